// Test vectors for batch h made in Node: mux, segment, trello; and a second check of replicate.json.
//
// Every key, id, body and timestamp is a fixed, made-up test value, so a run rewrites the same files.
// mux: signed per the docs, then accepted (and the wrong secret and a stale timestamp refused) by the official
//      @mux/mux-node SDK's webhooks.verifySignature; a refusal ends the run with a non-zero exit.
// segment: the request is produced by Segment's own Webhooks (Actions) destination code
//      (@segment/action-destinations), run by its @segment/actions-core runtime with fetch captured locally.
// trello: no SDK verifies it; signed as the docs describe (Node crypto over body + callbackURL, the string
//      taken as "binary", i.e. latin1: the low byte of each UTF-16 code unit).
// Run generate.py first: this script also checks replicate.json with the npm replicate client.

import { createHash, createHmac } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const HERE = dirname(fileURLToPath(import.meta.url));
const VECTORS = join(HERE, '..', '..');
const NOW = 1767225600; // 2026-01-01T00:00:00Z
const HOOK = 'https://hooks.example.com/webhooks';

function fail(message) {
  console.error(`generate.mjs: ${message}`);
  process.exit(1);
}

function pkgVersion(name) {
  return JSON.parse(readFileSync(join(HERE, 'node_modules', name, 'package.json'), 'utf8')).version;
}

function testSecret(label, size = 32) {
  return createHash('sha512').update(`webhook-inbox test key ${label}`).digest().subarray(0, size);
}

function config(secrets, url = null) {
  return { secrets, public_key: null, url, verify_token: null };
}

function kase(name, headers, body, expect, { method = 'POST', url = null, now = NOW, signed = true } = {}) {
  const out = { name, method, url, headers, body, now, expect };
  if (!signed) out.signed = false;
  return out;
}

function event(eventId, eventType) {
  return { kind: 'event', event_id: eventId, event_type: eventType };
}

function write(vector) {
  const path = join(VECTORS, `${vector.provider}.json`);
  writeFileSync(path, JSON.stringify(vector, null, 2) + '\n');
  console.log(`wrote tests/vectors/${vector.provider}.json (${vector.cases.length} cases)`);
}

async function refused(check) {
  try {
    return (await check()) === false;
  } catch {
    return true;
  }
}

async function withClock(second, fn) {
  const real = Date.now;
  Date.now = () => second * 1000;
  try {
    return await fn();
  } finally {
    Date.now = real;
  }
}

// ------------------------------------------------------------------------------------------------- mux

async function mux() {
  const { default: Mux } = await import('@mux/mux-node');
  const client = new Mux({ tokenId: 'test-token-id', tokenSecret: 'test-token-secret' });
  const secret = testSecret('mux', 16).toString('hex');
  const other = testSecret('mux other', 16).toString('hex');
  const retired = testSecret('mux retired', 16).toString('hex');
  const url = `${HOOK}/mux`;
  const v1 = (key, t, body) => createHmac('sha256', key).update(`${t}.${body}`).digest('hex');

  const body = (id, type, objectId, data, createdAt) =>
    JSON.stringify({
      type,
      request_id: null,
      object: { type: 'asset', id: objectId },
      id,
      environment: { name: 'Development', id: 'j0863n' },
      data,
      created_at: createdAt,
      attempts: [],
      accessor_source: null,
      accessor: null,
    });
  const asset = 'Y2gsw2h02ZhKT5zcmO2ZbFmYwXqfPrPu5lI01vEV6Zx8s';
  const ready = body('b7e1a2c3-4d5e-4f60-8a9b-0c1d2e3f4a5b', 'video.asset.ready', asset,
    { id: asset, status: 'ready', duration: 23.857, playback_ids: [{ policy: 'public', id: 'p9Tn6ZrQ1a2b3c' }] },
    '2025-12-31T23:59:58.000000Z');
  const created = body('0c9d8e7f-6a5b-4c3d-9e2f-1a0b9c8d7e6f', 'video.asset.created', asset,
    { id: asset, status: 'preparing' }, '2025-12-31T23:59:40.000000Z');

  const cases = [];
  const make = async (name, payload, t, header, expect) => {
    const headers = [['content-type', 'application/json'], ['mux-signature', header]];
    const asObject = Object.fromEntries(headers);
    await withClock(NOW, () => client.webhooks.verifySignature(payload, asObject, secret)); // throws if refused
    const parsed = await withClock(NOW, () => client.webhooks.unwrap(payload, asObject, secret));
    if (parsed.id !== expect.event_id || parsed.type !== expect.event_type) fail('mux unwrap disagrees');
    if (!(await refused(() => withClock(NOW, () => client.webhooks.verifySignature(payload, asObject, other)))))
      fail('mux SDK accepted the mux vector under the wrong secret');
    if (!(await refused(() => withClock(t + 301, () => client.webhooks.verifySignature(payload, asObject, secret)))))
      fail('mux SDK accepted a stale mux vector');
    cases.push(kase(name, headers, payload, expect, { url }));
  };
  const t1 = NOW - 1;
  await make('video.asset.ready', ready, t1, `t=${t1},v1=${v1(secret, t1, ready)}`,
    event('b7e1a2c3-4d5e-4f60-8a9b-0c1d2e3f4a5b', 'video.asset.ready'));
  await make('video.asset.created, two v1 signatures', created, NOW,
    `t=${NOW},v1=${v1(retired, NOW, created)},v1=${v1(secret, NOW, created)}`,
    event('0c9d8e7f-6a5b-4c3d-9e2f-1a0b9c8d7e6f', 'video.asset.created'));

  return {
    provider: 'mux',
    made_by: 'sdk',
    made_with: `signed per the docs; accepted by @mux/mux-node ${pkgVersion('@mux/mux-node')} (npm): ` +
      'client.webhooks.verifySignature and unwrap',
    docs: 'https://mux.com/docs/core/verify-webhook-signatures',
    config: config([secret]),
    wrong_config: config([other]),
    signs_timestamp: true,
    tolerance_secs: 300,
    cases,
    notes: "mux-signature is 't=<unix>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">', comma-separated; several v1 " +
      'entries may appear and any may match. The signing secret is the HMAC key as text. The SDK refuses a ' +
      'timestamp older than 300 s (it does not bound future ones). Event id is the body id, type the body type.',
  };
}

// --------------------------------------------------------------------------------------------- segment

function segmentRuntime() {
  // Load actions-core with its fetch replaced by one that records the request and answers 200 locally.
  const corePath = require.resolve('@segment/actions-core');
  const fetchPath = require.resolve('cross-fetch', { paths: [dirname(corePath)] });
  const real = require(fetchPath);
  const captured = [];
  async function capture(request) {
    captured.push({
      url: request.url,
      method: request.method,
      headers: [...request.headers.entries()],
      body: await request.text(),
    });
    return new real.Response('ok', { status: 200 });
  }
  Object.assign(capture, real, { default: capture });
  require(fetchPath);
  require.cache[fetchPath].exports = capture;
  const { Destination } = require('@segment/actions-core');
  const definition = require('@segment/action-destinations/dist/destinations/webhook/index.js').default;
  return { destination: new Destination(definition), captured };
}

async function segment() {
  const { destination, captured } = segmentRuntime();
  const secret = 'seg_shared_' + testSecret('segment', 16).toString('hex');
  const other = 'seg_shared_' + testSecret('segment other', 16).toString('hex');
  const url = `${HOOK}/segment`;
  const mapping = { url, method: 'POST', data: { '@path': '$.' }, batch_size: 0 };
  const common = {
    anonymousId: '507f191e810c19729de860ea',
    context: { library: { name: 'analytics.js', version: '2.11.1' }, ip: '203.0.113.7' },
    receivedAt: '2025-12-31T23:59:59.120Z',
    sentAt: '2025-12-31T23:59:58.990Z',
    userId: 'user-1234',
    version: 2,
  };
  const track = {
    ...common,
    event: 'Order Completed',
    messageId: 'ajs-next-1767225598-6e4d0c1a-7b2f-4c3e-9a8d-5f6e7d8c9b0a',
    properties: { order_id: 'ord_5001', total: 27.5, currency: 'EUR' },
    timestamp: '2025-12-31T23:59:58.987Z',
    type: 'track',
  };
  const identify = {
    ...common,
    messageId: 'ajs-next-1767225599-0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0',
    timestamp: '2025-12-31T23:59:59.001Z',
    traits: { email: 'ada@example.com', plan: 'pro', name: 'Ada Ü. Example' },
    type: 'identify',
  };

  const cases = [];
  for (const [name, evt] of [['track: Order Completed', track], ['identify', identify]]) {
    captured.length = 0;
    await destination.executeAction('send', { event: evt, mapping, settings: { sharedSecret: secret } });
    if (captured.length !== 1) fail('segment destination did not send exactly one request');
    const [request] = captured;
    const headers = request.headers.map(([k, v]) => [k.toLowerCase(), v]);
    const signature = headers.find(([k]) => k === 'x-signature')?.[1];
    const mine = createHmac('sha1', secret).update(request.body).digest('hex');
    if (signature !== mine) fail('segment X-Signature is not the hex HMAC-SHA1 of the body sent');
    if (createHmac('sha1', other).update(request.body).digest('hex') === signature) fail('segment wrong secret');
    cases.push(kase(name, headers, request.body, event(evt.messageId, evt.type), { method: request.method, url: request.url }));
  }

  // A batched delivery (the destination's batch_size > 0): its X-Signature covers only the first event.
  captured.length = 0;
  await destination.executeBatch('send', {
    events: [track, identify],
    mapping: { ...mapping, batch_size: 10, enable_batching: true },
    settings: { sharedSecret: secret },
  });
  const [batched] = captured;
  const batchHeaders = batched.headers.map(([k, v]) => [k.toLowerCase(), v]);
  const firstOnly = createHmac('sha1', secret).update(JSON.stringify(track)).digest('hex');
  if (batchHeaders.find(([k]) => k === 'x-signature')?.[1] !== firstOnly)
    fail('segment batch signature no longer covers only the first event: revisit the notes');

  return {
    provider: 'segment',
    made_by: 'sdk',
    made_with: `@segment/action-destinations ${pkgVersion('@segment/action-destinations')} (npm): the Webhooks ` +
      `(Actions) destination 'send' action, run by @segment/actions-core ${pkgVersion('@segment/actions-core')} ` +
      'Destination.executeAction, request captured before the network',
    docs: 'https://www.twilio.com/docs/segment/connections/destinations/catalog/actions-webhook',
    config: config([secret]),
    wrong_config: config([other]),
    signs_timestamp: false,
    tolerance_secs: 300,
    cases,
    notes: 'X-Signature is the hex HMAC-SHA1 of the body (JSON.stringify of the mapped data) with the shared ' +
      "secret as text; the method may be POST, PUT or PATCH (the mapping's). With the default data mapping the " +
      'body is the Segment event: id messageId, type type. No timestamp, no handshake. With batching on, the ' +
      'body is a JSON array but X-Signature covers only the first event (seen in the destination code and ' +
      "Twilio's support article 51193799782171): the other items are unauthenticated, so a batched body must " +
      'be refused (unsupported_cases holds one); tell the user to leave batch size at 0. The older Webhooks ' +
      '(Classic) destination signs the same way.',
    unsupported_cases: [
      kase('batched delivery: refuse (only the first item is signed)', batchHeaders, batched.body,
        { kind: 'refused', reason: 'batched Segment deliveries sign only their first event' },
        { method: batched.method, url: batched.url }),
    ],
  };
}

// ---------------------------------------------------------------------------------------------- trello

function trello() {
  const secret = testSecret('trello').toString('hex');
  const other = testSecret('trello other').toString('hex');
  const callback = `${HOOK}/trello?board=roadmap`;
  const sign = (key, body) => createHmac('sha1', key).update(body + callback, 'latin1').digest('base64');
  const board = { id: '5f1a2b3c4d5e6f7a8b9c0d1e', name: 'Roadmap', shortLink: 'aBcD1234' };
  const member = { id: '5e0f1a2b3c4d5e6f7a8b9c0d', username: 'ada_example', fullName: 'Ada Example', initials: 'AE' };
  const webhook = {
    id: '65a1b2c3d4e5f60718293a4b',
    description: 'webhook-inbox',
    idModel: board.id,
    callbackURL: callback,
    active: true,
    consecutiveFailures: 0,
    firstConsecutiveFailDate: null,
  };
  const model = { id: board.id, name: board.name, desc: '', closed: false, idOrganization: '5d4c3b2a1f0e9d8c7b6a5f4e',
    url: 'https://trello.com/b/aBcD1234/roadmap', shortUrl: 'https://trello.com/b/aBcD1234' };
  const action = (id, type, date, data) => ({
    id, idMemberCreator: member.id, data, appCreator: null, type, date,
    limits: null, display: { translationKey: `action_${type}` }, memberCreator: member,
  });
  const update = JSON.stringify({
    model,
    action: action('6790a1b2c3d4e5f607182930', 'updateCard', '2025-12-31T23:59:58.120Z', {
      card: { id: '6789f0e1d2c3b4a596870123', name: 'Ship the inbox', idShort: 42, shortLink: 'XyZ98765', idList: '5f1a2b3c4d5e6f7a8b9c0d20' },
      old: { idList: '5f1a2b3c4d5e6f7a8b9c0d1f' },
      listBefore: { id: '5f1a2b3c4d5e6f7a8b9c0d1f', name: 'Doing' },
      listAfter: { id: '5f1a2b3c4d5e6f7a8b9c0d20', name: 'Done' },
      board,
    }),
    webhook,
  });
  const comment = JSON.stringify({
    model,
    action: action('6790a1b2c3d4e5f607182931', 'commentCard', '2025-12-31T23:59:59.480Z', {
      text: 'Résumé – ready ✅ 🚀 (naïve café)',
      card: { id: '6789f0e1d2c3b4a596870123', name: 'Ship the inbox', idShort: 42, shortLink: 'XyZ98765' },
      board,
      list: { id: '5f1a2b3c4d5e6f7a8b9c0d20', name: 'Done' },
    }),
    webhook,
  });
  const utf8Sig = createHmac('sha1', secret).update(Buffer.from(comment + callback, 'utf8')).digest('base64');
  if (utf8Sig === sign(secret, comment)) fail('trello non-ASCII case does not tell the two encodings apart');
  const headers = (body) => [['content-type', 'application/json'], ['x-trello-webhook', sign(secret, body)]];
  const cases = [
    kase('HEAD check on webhook creation', [], '', { kind: 'handshake', answer: { status: 200, content_type: 'text/plain', body: '' } },
      { method: 'HEAD', url: callback, signed: false }),
    kase('updateCard', headers(update), update, event('6790a1b2c3d4e5f607182930', 'updateCard'), { url: callback }),
    kase('commentCard, non-ASCII text', headers(comment), comment, event('6790a1b2c3d4e5f607182931', 'commentCard'),
      { url: callback }),
  ];
  return {
    provider: 'trello',
    made_by: 'docs',
    made_with: 'https://developer.atlassian.com/cloud/trello/guides/rest-api/webhooks (Webhook signatures: base64 ' +
      'HMAC-SHA1 of body + callbackURL with the app secret, the text taken as binary by Node crypto); ' +
      `computed with Node ${process.version} crypto, update(text, 'latin1'); no Trello SDK verifies it`,
    docs: 'https://developer.atlassian.com/cloud/trello/guides/rest-api/webhooks',
    config: config([secret], callback),
    wrong_config: config([other], callback),
    signs_timestamp: false,
    tolerance_secs: 300,
    cases,
    notes: 'Signed text: the raw body followed by the callbackURL exactly as registered (config.url, query ' +
      "included). Trello's docs say the signed payload is treated as a binary string, not UTF-8: each UTF-16 code " +
      'unit of the decoded text contributes its low 8 bits (U+2013 gives 0x13; an astral character gives its two ' +
      'surrogates\' low bytes); for ASCII bodies this is the bytes as received. The key is the OAuth1 app secret as ' +
      'text. On creation Trello sends an unsigned HEAD to the callback URL that must answer 200; a 410 answer ' +
      'makes Trello delete the webhook. Event id action.id, type action.type.',
  };
}

// -------------------------------------------------------------------- replicate.json, second opinion

async function checkReplicate() {
  const { validateWebhook } = require('replicate');
  const vector = JSON.parse(readFileSync(join(VECTORS, 'replicate.json'), 'utf8'));
  for (const c of vector.cases) {
    const request = { headers: Object.fromEntries(c.headers), body: c.body };
    if (!(await validateWebhook(request, vector.config.secrets[0]))) fail(`npm replicate refused ${c.name}`);
    if (await validateWebhook(request, vector.wrong_config.secrets[0])) fail(`npm replicate accepted ${c.name} wrongly`);
  }
  console.log(`checked tests/vectors/replicate.json with replicate ${pkgVersion('replicate')} (npm) validateWebhook`);
}

write(await mux());
write(await segment());
write(trello());
await checkReplicate();
