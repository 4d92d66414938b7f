// Batch f vectors made in Node: meta (whatsapp, Meta's WhatsApp Cloud API SDK), clerk (@clerk/backend
// verifyWebhook over standardwebhooks signatures) and twitch (documented algorithm, cross-checked with
// @twurple/eventsub-http, a community library: Twitch publishes no SDK).
//
// Deterministic: fixed keys, fixed timestamps, fixed bodies. Any SDK refusal throws and stops the run.
// Run: npm ci && node generate.mjs

import { createHash, createHmac } from 'node:crypto';
import { writeFileSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { verifyWebhook } from '@clerk/backend/webhooks';
import { Webhook } from 'standardwebhooks';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const VECTORS = path.resolve(HERE, '..', '..');
const require = createRequire(import.meta.url);
const NOW = 1700000000; // 2023-11-14T22:13:20Z

// Subpaths these packages do not export: load their files by path.
const whatsappUtils = require(path.join(HERE, 'node_modules/whatsapp/build/utils.js'));
const { EventSubMiddleware } = await import(
  pathToFileURL(path.join(HERE, 'node_modules/@twurple/eventsub-http/lib/index.js')).href
);

function pkgVersion(name) {
  return JSON.parse(readFileSync(path.join(HERE, 'node_modules', name, 'package.json'), 'utf8')).version;
}

function write(provider, vector) {
  const file = path.join(VECTORS, `${provider}.json`);
  writeFileSync(file, JSON.stringify(vector, null, 2) + '\n');
  console.log('wrote', path.relative(VECTORS, file));
}

function fail(msg) {
  throw new Error(msg);
}

const sha256Hex = (s) => createHash('sha256').update(s, 'utf8').digest('hex');
const hmac = (algo, key, msg, enc) => createHmac(algo, key).update(msg, 'utf8').digest(enc);
const config = (secrets, extra = {}) => ({ secrets, public_key: null, url: null, verify_token: null, ...extra });

// ------------------------------------------------------------------------------------------- meta
// Meta escapes '/' and non-ASCII characters in the JSON it sends (and signs those exact bytes).
function metaJson(value) {
  return JSON.stringify(value)
    .replace(/\//g, '\\/')
    .replace(/[\u0080-\uffff]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

function meta() {
  const appSecret = '3f9a1c7e5b2d8046a1e9c3b7d5f20864'; // app secret (made up)
  const wrong = '4a0b2d8f6c3e9157b2f0d4c8e6a31975';
  const verifyToken = 'inbox-test-verify-token-5b2e';
  const url = 'https://hooks.example.com/webhooks/meta';

  const sign256 = (body) => {
    const sdk = whatsappUtils.generateXHub256Sig(body, appSecret);
    if (sdk !== hmac('sha256', appSecret, body, 'hex')) fail('whatsapp generateXHub256Sig disagrees with HMAC-SHA256');
    if (whatsappUtils.generateXHub256Sig(body, wrong) === sdk) fail('wrong secret gives the same signature');
    return 'sha256=' + sdk;
  };
  const sign1 = (body) => 'sha1=' + hmac('sha1', appSecret, body, 'hex');

  // Raw bytes of each entry are kept so each item's id can be computed over exactly what was sent.
  const waEntry = metaJson({
    id: '102290129340398',
    changes: [{
      value: {
        messaging_product: 'whatsapp',
        metadata: { display_phone_number: '15550783881', phone_number_id: '106540352242922' },
        contacts: [{ profile: { name: 'Zoë Test' }, wa_id: '16505551234' }],
        messages: [{
          from: '16505551234',
          id: 'wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUFERjg0NDEzNDdFODU3MUMxMAA=',
          timestamp: String(NOW - 2),
          text: { body: 'Hello, see https://example.com/order/42' },
          type: 'text',
        }],
      },
      field: 'messages',
    }],
  });
  const waBody = `{"object":"whatsapp_business_account","entry":[${waEntry}]}`;

  const pageEntries = [
    metaJson({
      id: '0', time: NOW - 1,
      changes: [{ field: 'feed', value: { item: 'post', post_id: '44444444_444444444', verb: 'add', published: 1,
        created_time: NOW - 1, message: 'Example post content.', from: { name: 'Test Page', id: '1067280970047460' } } }],
    }),
    metaJson({
      id: '0', time: NOW,
      changes: [{ field: 'feed', value: { item: 'reaction', post_id: '44444444_444444444', verb: 'add',
        reaction_type: 'like', created_time: NOW, from: { name: 'Jane Doe', id: '1067280970047461' } } }],
    }),
  ];
  const pageBody = `{"entry":[${pageEntries.join(',')}],"object":"page"}`;

  for (const b of [waBody, pageBody]) JSON.parse(b); // well-formed

  const items = (entries) => entries.map((e) => ({ event_id: sha256Hex(e), event_type: JSON.parse(e).changes[0].field }));
  const headers = (body) => [
    ['x-hub-signature', sign1(body)],
    ['x-hub-signature-256', sign256(body)],
    ['content-type', 'application/json'],
  ];
  const challenge = '1158201444';

  write('meta', {
    provider: 'meta',
    made_by: 'sdk',
    made_with: `whatsapp ${pkgVersion('whatsapp')} (npm, Meta's WhatsApp Cloud API SDK): generateXHub256Sig`,
    docs: 'https://developers.facebook.com/docs/graph-api/webhooks/getting-started',
    config: config([appSecret], { verify_token: verifyToken }),
    wrong_config: { secrets: [wrong], verify_token: 'inbox-other-verify-token-6c3f' },
    signs_timestamp: false,
    tolerance_secs: 300,
    notes: "Graph API webhooks (Pages, Instagram, WhatsApp Cloud API): X-Hub-Signature-256 = 'sha256=' + hex " +
      'HMAC-SHA256(app secret, raw body); Meta also sends the older X-Hub-Signature (sha1=, HMAC-SHA1), not needed. ' +
      "The body escapes '/' and non-ASCII (\\u00eb), so verify the raw bytes. No timestamp is signed. Verification: " +
      'unsigned GET ?hub.mode=subscribe&hub.challenge=C&hub.verify_token=T; when T equals config.verify_token ' +
      'answer 200 with C as text/plain, else 403. A POST batches entry[] (up to 1000): one item per entry; no ' +
      'event id is sent, so each item id is the hex SHA-256 of that entry\'s raw bytes as sent; type is the ' +
      "entry's changes[0].field (Messenger entries carry messaging[] instead: type 'messaging').",
    cases: [
      {
        name: 'whatsapp inbound message (one entry)',
        method: 'POST',
        url,
        headers: headers(waBody),
        body: waBody,
        now: NOW,
        expect: { kind: 'batch', items: items([waEntry]) },
      },
      {
        name: 'page feed, two entries',
        method: 'POST',
        url,
        headers: headers(pageBody),
        body: pageBody,
        now: NOW,
        expect: { kind: 'batch', items: items(pageEntries) },
      },
      {
        name: 'verification GET hub.challenge',
        method: 'GET',
        url: `${url}?hub.mode=subscribe&hub.challenge=${challenge}&hub.verify_token=${verifyToken}`,
        headers: [],
        body: '',
        now: NOW,
        expect: { kind: 'handshake', answer: { status: 200, content_type: 'text/plain', body: challenge } },
      },
    ],
  });
}

// ------------------------------------------------------------------------------------------- clerk
async function clerk() {
  const key = Buffer.from(Array.from({ length: 24 }, (_, i) => (i * 37 + 11) & 0xff));
  const other = Buffer.from(Array.from({ length: 24 }, (_, i) => (i * 53 + 7) & 0xff));
  const secret = 'whsec_' + key.toString('base64');
  const wrong = 'whsec_' + other.toString('base64');
  const url = 'https://hooks.example.com/webhooks/clerk';

  const userCreated = JSON.stringify({
    data: {
      id: 'user_29w83sxmDNGwOuEthce5gg56FcC', object: 'user', first_name: 'Example', last_name: 'Example',
      email_addresses: [{ id: 'idn_29w83yL7CwVlJXylYLxcslromF1', object: 'email_address',
        email_address: 'example@example.org', verification: { status: 'verified', strategy: 'ticket' } }],
      primary_email_address_id: 'idn_29w83yL7CwVlJXylYLxcslromF1', created_at: NOW * 1000 - 900,
      updated_at: NOW * 1000 - 900,
    },
    event_attributes: { http_request: { client_ip: '0.0.0.0', user_agent: 'Mozilla/5.0' } },
    instance_id: 'ins_2bQZ9gqW3k5m7n9p1r3t5v7x9z',
    object: 'event',
    timestamp: NOW * 1000 - 500,
    type: 'user.created',
  });
  const sessionCreated = JSON.stringify({
    data: { id: 'sess_2bQZAx9cZ2B3C4D5E6F7G8H9J0', object: 'session', status: 'active',
      user_id: 'user_29w83sxmDNGwOuEthce5gg56FcC', client_id: 'client_2bQZB1a2b3c4d5e6f7g8h9j0k1',
      created_at: NOW * 1000 - 300, updated_at: NOW * 1000 - 300, expire_at: NOW * 1000 + 604800000 },
    event_attributes: { http_request: { client_ip: '0.0.0.0', user_agent: 'Mozilla/5.0' } },
    instance_id: 'ins_2bQZ9gqW3k5m7n9p1r3t5v7x9z',
    object: 'event',
    timestamp: NOW * 1000 - 200,
    type: 'session.created',
  });

  const wh = new Webhook(secret);
  // The key a rotated-out secret signed with: neither the config's nor wrong_config's.
  const retired = 'whsec_' + Buffer.from(Array.from({ length: 24 }, (_, i) => (i * 71 + 3) & 0xff)).toString('base64');
  const whOld = new Webhook(retired);
  const cases = [];
  const spec = [
    ['user.created', userCreated, 'msg_2bQZCp0J4K5L6M7N8P9Q0R1S2T', false],
    ['session.created, two signatures (old key first)', sessionCreated, 'msg_2bQZDq1K5L6M7N8P9Q0R1S2T3U', true],
  ];
  for (const [name, body, msgId, rotated] of spec) {
    const ts = new Date(NOW * 1000);
    let signature = wh.sign(msgId, ts, body);
    if (rotated) signature = `${whOld.sign(msgId, ts, body)} ${signature}`;
    const headers = [
      ['svix-id', msgId],
      ['svix-timestamp', String(NOW)],
      ['svix-signature', signature],
      ['content-type', 'application/json'],
    ];
    const request = () => new Request(url, { method: 'POST', headers, body });
    const realNow = Date.now;
    Date.now = () => NOW * 1000; // the SDK reads the clock; hold it at the vector's now
    try {
      const event = await verifyWebhook(request(), { signingSecret: secret });
      if (event.type !== JSON.parse(body).type) fail('@clerk/backend verifyWebhook returned another type');
      let refused = false;
      try {
        await verifyWebhook(request(), { signingSecret: wrong });
      } catch {
        refused = true;
      }
      if (!refused) fail('@clerk/backend verifyWebhook accepted a wrong secret');
      Date.now = () => (NOW + 301) * 1000;
      refused = false;
      try {
        await verifyWebhook(request(), { signingSecret: secret });
      } catch {
        refused = true;
      }
      if (!refused) fail('@clerk/backend verifyWebhook accepted a stale timestamp');
    } finally {
      Date.now = realNow;
    }
    cases.push({
      name, method: 'POST', url, headers, body, now: NOW,
      expect: { kind: 'event', event_id: msgId, event_type: JSON.parse(body).type },
    });
  }

  write('clerk', {
    provider: 'clerk',
    made_by: 'sdk',
    made_with: `@clerk/backend ${pkgVersion('@clerk/backend')} (npm): verifyWebhook from @clerk/backend/webhooks; ` +
      `signatures made with standardwebhooks ${pkgVersion('standardwebhooks')} (npm): Webhook.sign`,
    docs: 'https://clerk.com/docs/guides/development/webhooks/overview',
    config: config([secret]),
    wrong_config: { secrets: [wrong] },
    signs_timestamp: true,
    tolerance_secs: 300,
    notes: 'Clerk delivers through Svix: svix-id, svix-timestamp (unix seconds), svix-signature = space-separated ' +
      "'v1,<base64 HMAC-SHA256(key, id + \".\" + timestamp + \".\" + raw body)>', any may match; key = base64-decoded " +
      "secret after 'whsec_'. Tolerance 5 minutes both ways. Id: svix-id (stable across retries); type: body type. " +
      'In the second case the first signature is from a retired key (in neither config), as during rotation.',
    cases,
  });
}

// ------------------------------------------------------------------------------------------- twitch
function twitch() {
  const secret = 's3cRe7-twitch-eventsub-test-0001'; // subscription transport secret (made up)
  const wrong = 's3cRe7-twitch-eventsub-test-0002';
  const url = 'https://hooks.example.com/webhooks/twitch';
  const ts = '2023-11-14T22:13:20.123456789Z'; // RFC 3339 with nanoseconds, as Twitch sends

  const verify = EventSubMiddleware.prototype._verifyData;
  const sign = (id, body) => {
    const sig = 'sha256=' + hmac('sha256', secret, id + ts + body, 'hex');
    if (!verify.call({ _secret: secret }, id, ts, body, sig)) fail('@twurple/eventsub-http refused the twitch vector');
    if (verify.call({ _secret: wrong }, id, ts, body, sig)) fail('@twurple/eventsub-http accepted the wrong secret');
    return sig;
  };

  const subscription = (type, version, status, condition) => ({
    id: 'f1c2a387-161a-49f9-a165-0f21d7a4e1c4', type, version, status, cost: 0, condition,
    transport: { method: 'webhook', callback: url }, created_at: '2023-11-14T22:10:00.634234626Z',
  });
  const follow = JSON.stringify({
    subscription: subscription('channel.follow', '2', 'enabled', { broadcaster_user_id: '1337', moderator_user_id: '1337' }),
    event: { user_id: '1234', user_login: 'cool_user', user_name: 'Cool_User', broadcaster_user_id: '1337',
      broadcaster_user_login: 'cooler_user', broadcaster_user_name: 'Cooler_User', followed_at: '2023-11-14T22:13:19.17106713Z' },
  });
  const challenge = 'pogchamp-kappa-360noscope-vohiyo';
  const verification = JSON.stringify({
    challenge,
    subscription: subscription('channel.follow', '2', 'webhook_callback_verification_pending',
      { broadcaster_user_id: '1337', moderator_user_id: '1337' }),
  });
  const revocation = JSON.stringify({
    subscription: subscription('channel.follow', '2', 'authorization_revoked', { broadcaster_user_id: '1337', moderator_user_id: '1337' }),
  });
  const drops = JSON.stringify({
    subscription: { ...subscription('drop.entitlement.grant', '1', 'enabled', { organization_id: '9001', category_id: '9002' }),
      id: 'f1c2a387-161a-49f9-a165-0f21d7a4e1c5' },
    events: [
      { id: 'bf7c8577-e3e2-4e1f-9a1e-31c4b6e2c001', data: { organization_id: '9001', category_id: '9002',
        category_name: 'Fortnite', campaign_id: '9003', user_id: '1234', user_name: 'Cool_User', user_login: 'cool_user',
        entitlement_id: 'fb78259e-fb81-4d1b-8333-34a06ffc24c0', benefit_id: '74c52265-e214-48a6-91b9-23b6014e8041',
        created_at: '2023-11-14T22:13:18.000000000Z' } },
      { id: 'bf7c8577-e3e2-4e1f-9a1e-31c4b6e2c002', data: { organization_id: '9001', category_id: '9002',
        category_name: 'Fortnite', campaign_id: '9003', user_id: '5678', user_name: 'Cooler_User', user_login: 'cooler_user',
        entitlement_id: 'fb78259e-fb81-4d1b-8333-34a06ffc24c1', benefit_id: '74c52265-e214-48a6-91b9-23b6014e8041',
        created_at: '2023-11-14T22:13:19.000000000Z' } },
    ],
  });

  const headers = (id, type, subType, subVersion, body) => [
    ['twitch-eventsub-message-id', id],
    ['twitch-eventsub-message-retry', '0'],
    ['twitch-eventsub-message-type', type],
    ['twitch-eventsub-message-signature', sign(id, body)],
    ['twitch-eventsub-message-timestamp', ts],
    ['twitch-eventsub-subscription-type', subType],
    ['twitch-eventsub-subscription-version', subVersion],
    ['content-type', 'application/json'],
  ];

  write('twitch', {
    provider: 'twitch',
    made_by: 'docs',
    made_with: 'https://dev.twitch.tv/docs/eventsub/handling-webhook-events/ (Verifying the event message); ' +
      `cross-checked with @twurple/eventsub-http ${pkgVersion('@twurple/eventsub-http')} (npm, community library; ` +
      'Twitch publishes no SDK)',
    docs: 'https://dev.twitch.tv/docs/eventsub/handling-webhook-events/',
    config: config([secret]),
    wrong_config: { secrets: [wrong] },
    signs_timestamp: true,
    tolerance_secs: 600,
    notes: "Twitch-Eventsub-Message-Signature = 'sha256=' + hex HMAC-SHA256(secret, message id + timestamp + raw body); " +
      'the timestamp header is RFC 3339 with nanoseconds; Twitch says reject messages older than 10 minutes. ' +
      'Message types (Twitch-Eventsub-Message-Type): notification (id: message id header, type: subscription type ' +
      "header), webhook_callback_verification (signed; answer 200 text/plain with body 'challenge', never stored), " +
      "revocation (signed, answer 2xx; stored here as type 'revocation' under its message id). Batched " +
      'subscriptions (drop.entitlement.grant) carry events[]: one item per event, id events[].id, type the ' +
      'subscription type.',
    cases: [
      {
        name: 'notification channel.follow',
        method: 'POST', url,
        headers: headers('befa7b53-d79d-478f-86b9-120f112b044e', 'notification', 'channel.follow', '2', follow),
        body: follow, now: NOW,
        expect: { kind: 'event', event_id: 'befa7b53-d79d-478f-86b9-120f112b044e', event_type: 'channel.follow' },
      },
      {
        name: 'webhook_callback_verification',
        method: 'POST', url,
        headers: headers('e76c6bd4-55c9-4987-8304-da1588d8988b', 'webhook_callback_verification', 'channel.follow', '2',
          verification),
        body: verification, now: NOW,
        expect: { kind: 'handshake', answer: { status: 200, content_type: 'text/plain', body: challenge } },
      },
      {
        name: 'revocation',
        method: 'POST', url,
        headers: headers('84c1e79a-2a4b-4c13-ba0b-4312293e9308', 'revocation', 'channel.follow', '2', revocation),
        body: revocation, now: NOW,
        expect: { kind: 'event', event_id: '84c1e79a-2a4b-4c13-ba0b-4312293e9308', event_type: 'revocation' },
      },
      {
        name: 'batched drop.entitlement.grant',
        method: 'POST', url,
        headers: headers('5d0f9b1e-8c2a-4b7e-9d3f-1a2b3c4d5e6f', 'notification', 'drop.entitlement.grant', '1', drops),
        body: drops, now: NOW,
        expect: { kind: 'batch', items: JSON.parse(drops).events.map((e) => ({ event_id: e.id, event_type: 'drop.entitlement.grant' })) },
      },
    ],
  });
}

meta();
await clerk();
twitch();
