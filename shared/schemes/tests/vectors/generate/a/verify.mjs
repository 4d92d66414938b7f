// The Node half of batch a's generator: checks the vectors generate.py wrote with the providers' npm SDKs.
//   aws-sns  : sns-validator (AWS's aws-js-sns-message-validator), certificates served from the vector
//   discord  : discord-interactions verifyKey
//   sendgrid : @sendgrid/eventwebhook EventWebhook.verifySignature
// Exits non-zero when an SDK refuses a case that must verify, or accepts one that must not.
import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const load = (name) => JSON.parse(readFileSync(new URL(`../../${name}.json`, import.meta.url), 'utf8'));
let failures = 0;
const check = (ok, what) => {
  if (!ok) {
    failures += 1;
    console.error(`verify.mjs: FAILED: ${what}`);
  }
};
const header = (c, name) => (c.headers.find(([k]) => k === name) || [])[1];

// ---- aws-sns: no network; https.get answers with the PEM the vector records for that URL.
const sns = load('aws-sns');
https.get = (url, onResponse) => {
  const request = new EventEmitter();
  process.nextTick(() => {
    const pem = sns.certificates[url];
    if (pem === undefined) {
      request.emit('error', new Error(`no test certificate at ${url}`));
      return;
    }
    const response = new EventEmitter();
    response.statusCode = 200;
    onResponse(response);
    response.emit('data', Buffer.from(pem));
    response.emit('end');
  });
  return request;
};
const MessageValidator = require('sns-validator');
const validate = (body) => new Promise((resolve) => {
  new MessageValidator().validate(body, (err) => resolve(err ? err.message : null));
});
for (const c of [...sns.cases, ...(sns.refused || [])]) {
  const err = await validate(c.body);
  if (c.expect.kind === 'reject' && c.expect.reason.startsWith('certificate URL host')) {
    check(err !== null, `aws-sns ${c.name}: sns-validator must refuse the host`);
  } else if (c.expect.kind === 'reject') {
    // sns-validator checks the host and the signature, neither the chain nor the topic: it accepts these,
    // which webhook-inbox refuses (generate.py records why).
    check(err === null, `aws-sns ${c.name}: expected sns-validator to accept (no chain or topic check): ${err}`);
  } else {
    check(err === null, `aws-sns ${c.name}: ${err}`);
    const tampered = c.body.replace('"MessageId" : "', '"MessageId" : "0');
    check((await validate(tampered)) !== null, `aws-sns ${c.name}: tampered MessageId accepted`);
  }
}

// ---- discord
const { verifyKey } = require('discord-interactions');
const discord = load('discord');
for (const c of discord.cases) {
  const sig = header(c, 'x-signature-ed25519');
  const ts = header(c, 'x-signature-timestamp');
  check(await verifyKey(c.body, sig, ts, discord.config.public_key), `discord ${c.name}`);
  check(!(await verifyKey(c.body, sig, ts, discord.wrong_config.public_key)), `discord ${c.name}: wrong key accepted`);
}

// ---- sendgrid
const { EventWebhook } = require('@sendgrid/eventwebhook');
const sendgrid = load('sendgrid');
const ew = new EventWebhook();
for (const c of sendgrid.cases) {
  const sig = header(c, 'x-twilio-email-event-webhook-signature');
  const ts = header(c, 'x-twilio-email-event-webhook-timestamp');
  const key = ew.convertPublicKeyToECDSA(sendgrid.config.public_key);
  const wrong = ew.convertPublicKeyToECDSA(sendgrid.wrong_config.public_key);
  check(ew.verifySignature(key, c.body, sig, ts), `sendgrid ${c.name}`);
  check(!ew.verifySignature(wrong, c.body, sig, ts), `sendgrid ${c.name}: wrong key accepted`);
}

if (failures > 0) {
  process.exit(1);
}
const count = sns.cases.length + (sns.refused || []).length + discord.cases.length + sendgrid.cases.length;
console.log(`verify.mjs: ${count} cases checked by the npm SDKs`);
