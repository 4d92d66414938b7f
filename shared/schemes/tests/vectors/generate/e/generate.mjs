// Test vectors for zoom and customerio, made with the providers' own npm packages.
// Every secret below is a made-up test value. Run: npm ci && node generate.mjs
// It rewrites ../../zoom.json and ../../customerio.json deterministically, and stops with an error if an
// SDK refuses what it is given.

import { createHash, createHmac } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { AwsLambdaReceiver } from "@zoom/rivet/meetings";
import { verifyRequestSignature } from "customerio-node";

const here = dirname(fileURLToPath(import.meta.url));
const vectors = join(here, "..", "..");
const pkg = (name) => JSON.parse(readFileSync(join(here, "node_modules", name, "package.json"), "utf8")).version;

function fail(provider, what) {
  console.error(`generate.mjs: ${provider}: the SDK refused the vector: ${what}`);
  process.exit(1);
}

function write(provider, vector) {
  writeFileSync(join(vectors, `${provider}.json`), JSON.stringify(vector, null, 2) + "\n");
  console.log(`wrote vectors/${provider}.json (${vector.cases.length} cases)`);
}

const sha256 = (text) => createHash("sha256").update(text, "utf8").digest("hex");
const hmacHex = (key, text) => createHmac("sha256", key).update(text, "utf8").digest("hex");

// ----------------------------------------------------------------------------------------------- zoom
async function zoom() {
  const secret = "zm_SecretToken_TestOnly_7Qb3Kc9";
  const wrong = "zm_SecretToken_Other_0000000";
  const url = "https://hooks.example.com/webhooks/zoom";
  const cases = [];

  // Zoom Rivet's receiver: verifies x-zm-signature, answers the url_validation handshake itself.
  async function receive(token, headers, body) {
    const emitted = [];
    const receiver = new AwsLambdaReceiver({ webhooksSecretToken: token });
    receiver.init({ eventEmitter: { emit: async (name, payload) => emitted.push([name, payload]) } });
    const quiet = console.debug;
    console.debug = () => {};
    try {
      const answer = await receiver.start()({ body, headers, isBase64Encoded: false }, {});
      return { answer, emitted };
    } finally {
      console.debug = quiet;
    }
  }

  async function kase(name, ts, payload, expect) {
    // Rivet verifies over JSON.stringify(JSON.parse(body)): the body is written that way so both agree.
    const body = JSON.stringify(payload);
    const signature = `v0=${hmacHex(secret, `v0:${ts}:${body}`)}`;
    const headers = {
      "x-zm-request-timestamp": String(ts),
      "x-zm-signature": signature,
      "content-type": "application/json; charset=utf-8",
    };
    const { answer, emitted } = await receive(secret, headers, body);
    if (answer.statusCode !== 200) fail("zoom", `${name}: ${answer.body}`);
    if ((await receive(wrong, headers, body)).answer.statusCode === 200) fail("zoom", `${name}: a wrong token verified`);
    if (expect.kind === "handshake") {
      const ours = JSON.parse(expect.answer.body);
      const theirs = JSON.parse(answer.body);
      if (ours.plainToken !== theirs.plainToken || ours.encryptedToken !== theirs.encryptedToken)
        fail("zoom", `${name}: the SDK answered ${answer.body}`);
    } else if (emitted.length !== 1 || emitted[0][0] !== expect.event_type) {
      fail("zoom", `${name}: the SDK emitted ${JSON.stringify(emitted.map((e) => e[0]))}`);
    }
    cases.push({
      name,
      method: "POST",
      url,
      headers: Object.entries(headers),
      body,
      now: ts + 1,
      expect,
    });
  }

  const started = {
    event: "meeting.started",
    event_ts: 1718700000123,
    payload: {
      account_id: "AAAAAABBBB_cccccc-DDDD",
      object: {
        id: "85746065432",
        uuid: "4444AAAiAAAAAiAiAiiAii==",
        host_id: "z8yAAAAA8bbbQ",
        topic: "Réunion hebdo",
        type: 2,
        start_time: "2024-06-18T08:40:00Z",
        timezone: "Europe/Paris",
        duration: 60,
      },
    },
  };
  await kase("meeting.started", 1718700000, started, {
    kind: "event",
    event_id: sha256(JSON.stringify(started)),
    event_type: "meeting.started",
  });
  const plainToken = "qgg8vlvZRS6UYooatFL8Aw";
  await kase(
    "endpoint.url_validation",
    1718700060,
    { payload: { plainToken }, event_ts: 1718700060456, event: "endpoint.url_validation" },
    {
      kind: "handshake",
      answer: {
        status: 200,
        content_type: "application/json",
        body: JSON.stringify({ plainToken, encryptedToken: hmacHex(secret, plainToken) }),
      },
    },
  );

  write("zoom", {
    provider: "zoom",
    made_by: "sdk",
    made_with: `@zoom/rivet ${pkg("@zoom/rivet")} (npm): AwsLambdaReceiver (signature check and url_validation answer); signatures built from the documented algorithm`,
    docs: "https://developers.zoom.us/docs/api/webhooks/#verify-webhook-events",
    config: { secrets: [secret], public_key: null, url: null, verify_token: null },
    wrong_config: { secrets: [wrong] },
    signs_timestamp: true,
    tolerance_secs: 300,
    notes:
      "x-zm-signature = 'v0=' + hex HMAC-SHA256(secret token, 'v0:' + x-zm-request-timestamp (unix seconds) + ':' + raw body). " +
      "Zoom documents no tolerance (300 s here; Rivet checks none). endpoint.url_validation (on setup and every 72 h) is signed " +
      "like any event and answered 200 application/json {plainToken, encryptedToken = hex HMAC-SHA256(secret token, plainToken)} " +
      "within 3 s; compare the answer as JSON (Rivet writes encryptedToken first). Zoom sends no event id: the id is the hex " +
      "SHA-256 of the body (x-zm-trackingid names one request, not one event); type: body 'event'.",
    cases,
  });
}

// ----------------------------------------------------------------------------------------- customerio
function customerio() {
  const secret = "cio_whsk_1b2c3d4e5f60718293a4b5c6d7e8f901";
  const wrong = "cio_whsk_ffffffffffffffffffffffffffffffff";
  const url = "https://hooks.example.com/webhooks/customerio";
  const cases = [];

  function kase(name, ts, event) {
    const body = JSON.stringify(event);
    const signature = hmacHex(secret, `v0:${ts}:${body}`);
    const ok = verifyRequestSignature({ signingSecret: secret, timestamp: String(ts), body, signature });
    if (!ok) fail("customerio", name);
    if (verifyRequestSignature({ signingSecret: wrong, timestamp: String(ts), body, signature }))
      fail("customerio", `${name}: a wrong secret verified`);
    if (verifyRequestSignature({ signingSecret: secret, timestamp: String(ts + 1), body, signature }))
      fail("customerio", `${name}: another timestamp verified`);
    cases.push({
      name,
      method: "POST",
      url,
      headers: [
        ["x-cio-timestamp", String(ts)],
        ["x-cio-signature", signature],
        ["content-type", "application/json"],
      ],
      body,
      now: ts + 1,
      expect: { kind: "event", event_id: event.event_id, event_type: event.metric },
    });
  }

  kase("email.delivered", 1718800000, {
    data: {
      action_id: 36,
      broadcast_id: 9,
      customer_id: "0200102",
      delivery_id: "RAECAAFwnUSneIa0ZXkmq8EdkAM==",
      identifiers: { id: "0200102", email: "zoe@example.com", cio_id: "d9c106000001" },
      recipient: "zoe@example.com",
      subject: "Vos offres de la semaine",
    },
    event_id: "01E4C4HDQ7P2J3ZSFD6EKCSBXG",
    object_type: "email",
    metric: "delivered",
    timestamp: 1718799998,
  });
  kase("sms.failed", 1718800060, {
    data: {
      action_id: 52,
      campaign_id: 14,
      customer_id: "0200103",
      delivery_id: "RAECAAFwnUSneIa0ZXkmq8EdkAN==",
      identifiers: { id: "0200103", cio_id: "d9c106000002" },
      recipient: "+15555550123",
      failure_message: "Twilio Error 21211: Invalid 'To' Phone Number",
    },
    event_id: "01E4C4HDQ7P2J3ZSFD6EKCSBXH",
    object_type: "sms",
    metric: "failed",
    timestamp: 1718800059,
  });

  write("customerio", {
    provider: "customerio",
    made_by: "sdk",
    made_with: `customerio-node ${pkg("customerio-node")} (npm): verifyRequestSignature (signatures built from the documented algorithm, then verified)`,
    docs: "https://docs.customer.io/api/webhooks/#section/Securely-Verifying-Requests",
    config: { secrets: [secret], public_key: null, url: null, verify_token: null },
    wrong_config: { secrets: [wrong] },
    signs_timestamp: true,
    tolerance_secs: 300,
    notes:
      "Reporting webhooks: X-CIO-Signature = hex HMAC-SHA256(webhook signing key, 'v0:' + X-CIO-Timestamp (unix seconds) + ':' + raw body), " +
      "no prefix. No tolerance is documented (300 s here; the SDK checks none). Id: body event_id (a ULID); type: body metric " +
      "(sent, delivered, opened, clicked, failed, ...); object_type (email, sms, push, in_app, webhook, ...) says the channel. " +
      "customerio-node 5.2.0 declares node >= 22; its verify function runs on node 20.",
    cases,
  });
}

await zoom();
customerio();
