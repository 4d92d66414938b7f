// Rewrites tests/vectors/chargebee.json. Chargebee authenticates webhooks with HTTP Basic credentials set on the
// webhook, not with a signature; the chargebee SDK's own WebhookHandler with basicAuthValidator must accept each
// case with the configured credentials, parse its id and event_type, and refuse the wrong credentials.
// Everything is fixed, so a run rewrites the same bytes.
//
// Run: npm ci && node generate.mjs

import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import Chargebee, { basicAuthValidator, WebhookAuthenticationError } from 'chargebee';

const here = dirname(fileURLToPath(import.meta.url));
const vectors = join(here, '..', '..');
const sdkVersion = JSON.parse(readFileSync(join(here, 'node_modules', 'chargebee', 'package.json'), 'utf8')).version;

const T0 = 1767225600; // 2026-01-01T00:00:00Z
const user = 'inbox-hooks';
const password = 'cb-Test:pa55-w0rd'; // a colon in the password: only the first one separates
const wrongPassword = 'cb-Test:pa55-w0rD';
const url = 'https://hooks.example.com/webhooks/chargebee';

function fail(message) {
  console.error(`generator failed: ${message}`);
  process.exit(1);
}

function basic(u, p) {
  return `Basic ${Buffer.from(`${u}:${p}`, 'utf8').toString('base64')}`;
}

// Runs the SDK's handler on one delivery; answers the parsed event, or the error it raised.
async function sdkHandle(expectedUser, expectedPassword, body, headers) {
  const chargebee = new Chargebee({ site: 'inbox-test', apiKey: 'test_inbox_unused_api_key' });
  const handler = chargebee.webhooks.createHandler({
    requestValidator: basicAuthValidator((u, p) => u === expectedUser && p === expectedPassword),
  });
  let outcome = null;
  handler.on('unhandled_event', ({ event }) => {
    outcome = { event };
  });
  handler.on('error', (error) => {
    outcome = { error };
  });
  await handler.handle({ body, headers });
  return outcome ?? fail('the SDK handler emitted nothing');
}

const deliveries = [
  {
    name: 'subscription_created',
    ts: T0 + 1000,
    event: {
      id: 'ev_16CS5LUgWWtNf2Bo9',
      occurred_at: T0 + 999,
      source: 'api',
      object: 'event',
      api_version: 'v2',
      content: {
        subscription: {
          id: '16CS5LUgWWtMt2Bnd',
          customer_id: '16CS5LUgWWtLg2Bmz',
          status: 'active',
          currency_code: 'EUR',
          subscription_items: [{ item_price_id: 'pro-EUR-monthly', quantity: 1, unit_price: 2900 }],
        },
        customer: { id: '16CS5LUgWWtLg2Bmz', first_name: 'Jürgen', email: 'jurgen@example.com' },
      },
      event_type: 'subscription_created',
      webhook_status: 'not_configured',
    },
  },
  {
    name: 'payment_succeeded',
    ts: T0 + 1001,
    event: {
      id: 'ev_16CS5LUgWWtQz2Bp4',
      occurred_at: T0 + 1000,
      source: 'scheduled_job',
      object: 'event',
      api_version: 'v2',
      content: {
        transaction: { id: 'txn_16CS5LUgWWtR32Bp7', amount: 2900, currency_code: 'EUR', status: 'success' },
      },
      event_type: 'payment_succeeded',
      webhook_status: 'not_configured',
    },
  },
];

const cases = [];
for (const { name, ts, event } of deliveries) {
  const body = JSON.stringify(event);
  const headers = {
    authorization: basic(user, password),
    'content-type': 'application/json',
    'user-agent': 'ChargeBee',
  };
  const accepted = await sdkHandle(user, password, body, headers);
  if (accepted.error) fail(`the SDK refused ${name}: ${accepted.error.message}`);
  if (accepted.event.id !== event.id || accepted.event.event_type !== event.event_type) {
    fail(`the SDK parsed another id or type for ${name}`);
  }
  const refused = await sdkHandle(user, wrongPassword, body, headers);
  if (!(refused.error instanceof WebhookAuthenticationError)) fail('the SDK accepted the wrong password');
  cases.push({
    name,
    method: 'POST',
    url,
    headers: Object.entries(headers),
    body,
    now: ts,
    expect: { kind: 'event', event_id: event.id, event_type: event.event_type },
    signs_body: false, // a token: the body is not signed
  });
}

const vector = {
  provider: 'chargebee',
  made_by: 'sdk',
  made_with: `chargebee ${sdkVersion} (npm): webhooks.createHandler with basicAuthValidator`,
  docs: 'https://apidocs.chargebee.com/docs/api/events',
  config: { secrets: [`${user}:${password}`], public_key: null, url: null, verify_token: null },
  wrong_config: { secrets: [`${user}:${wrongPassword}`], public_key: null, url: null, verify_token: null },
  signs_timestamp: false,
  tolerance_secs: 300,
  notes:
    'Token family: HTTP Basic credentials set on the webhook (Settings > Webhooks > Protect webhook URLs with ' +
    'basic authentication), compared in constant time; the body is not signed and no timestamp is sent. The ' +
    "password may hold ':' (split at the first one). Id = body id (Chargebee's documented duplicate key), " +
    'type = body event_type. Chargebee retries for about 3 days and 7 hours.',
  cases,
};

const path = join(vectors, 'chargebee.json');
writeFileSync(path, `${JSON.stringify(vector, null, 2)}\n`, 'utf8');
console.log(`wrote chargebee.json: ${cases.length} case(s), made by sdk`);
