// Writes the batch-d test vectors into ../../<provider>.json.
//
// Every key, id, timestamp and body below is a fixed, made-up test value, so two runs write the same
// bytes. Where the provider publishes a package that verifies its webhooks (Linear: @linear/sdk;
// npm: npm-hook-receiver, npm Inc.'s sample receiver), the request is signed here from the documented
// algorithm and then handed to that package, and the run fails if the package refuses it (or accepts
// the wrong secret). The other providers publish no such package: their requests are built from the
// documented algorithm and checked again by an independent verifier written from the same page.
//
// Run: npm ci && node generate.mjs

import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { LinearWebhookClient } from "@linear/sdk/webhooks";

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
const outDir = path.resolve(here, "..", "..");
const pkgVersion = (name) =>
  JSON.parse(fs.readFileSync(path.join(here, "node_modules", name, "package.json"), "utf8")).version;

// ---------------------------------------------------------------- helpers

function fail(message) {
  throw new Error(`generator check failed: ${message}`);
}
function check(condition, message) {
  if (!condition) fail(message);
}
const hmac = (alg, key, data) => crypto.createHmac(alg, key).update(data);
const hmacHex = (alg, key, data) => hmac(alg, key, data).digest("hex");
const hmacB64 = (alg, key, data) => hmac(alg, key, data).digest("base64");
const sha256Hex = (data) => crypto.createHash("sha256").update(data).digest("hex");
const json = (value) => JSON.stringify(value);
const header = (headers, name) => {
  const found = headers.filter(([k]) => k === name);
  return found.length === 1 ? found[0][1] : undefined;
};
function safeEqual(a, b) {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && crypto.timingSafeEqual(x, y);
}

// Go's url.QueryEscape, as Gitea's form content type uses it (url.Values.Encode).
function goQueryEscape(s) {
  let out = "";
  for (const byte of Buffer.from(s, "utf8")) {
    const c = String.fromCharCode(byte);
    if (/[A-Za-z0-9\-_.~]/.test(c)) out += c;
    else if (c === " ") out += "+";
    else out += "%" + byte.toString(16).toUpperCase().padStart(2, "0");
  }
  return out;
}

const written = [];
function writeVector(vector) {
  for (const c of vector.cases) {
    for (const [name] of c.headers) check(name === name.toLowerCase(), `${vector.provider}: header ${name} not lower case`);
    check(typeof c.body === "string", `${vector.provider}/${c.name}: body`);
    check(Number.isInteger(c.now), `${vector.provider}/${c.name}: now`);
  }
  const file = path.join(outDir, `${vector.provider}.json`);
  fs.writeFileSync(file, JSON.stringify(vector, null, 2) + "\n");
  written.push(path.relative(outDir, file));
}

const NOW = 1700000000; // 2023-11-14T22:13:20Z
const base = (provider) => `https://hooks.example.com/webhooks/${provider}`;

// ---------------------------------------------------------------- gitlab
// Token, not a signature: X-Gitlab-Token carries the secret token as configured. The event id is
// Idempotency-Key (GitLab 17.4+, the same on every retry); older GitLab sends none, and the id is
// then the SHA-256 of the body.
function gitlab() {
  const token = "gitlab-test-token-0f5c2b";
  const verify = (headers) => safeEqual(header(headers, "x-gitlab-token") ?? "", token);
  const push = json({
    object_kind: "push",
    event_name: "push",
    before: "95790bf891e76fee5e1747ab589903a6a1f80f22",
    after: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
    ref: "refs/heads/main",
    ref_protected: true,
    checkout_sha: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
    message: null,
    user_id: 4,
    user_name: "John Smith",
    user_username: "jsmith",
    user_email: "",
    user_avatar: "https://gitlab.example.com/uploads/-/system/user/avatar/4/avatar.jpg",
    project_id: 15,
    project: {
      id: 15,
      name: "Diaspora",
      description: "",
      web_url: "https://gitlab.example.com/mike/diaspora",
      git_ssh_url: "git@gitlab.example.com:mike/diaspora.git",
      git_http_url: "https://gitlab.example.com/mike/diaspora.git",
      namespace: "Mike",
      visibility_level: 0,
      path_with_namespace: "mike/diaspora",
      default_branch: "main",
    },
    commits: [
      {
        id: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
        message: "fixed readme\n",
        title: "fixed readme",
        timestamp: "2023-11-14T22:13:00+00:00",
        url: "https://gitlab.example.com/mike/diaspora/-/commit/da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
        author: { name: "GitLab dev user", email: "gitlabdev@example.com" },
        added: ["CHANGELOG"],
        modified: ["app/controller/application.rb"],
        removed: [],
      },
    ],
    total_commits_count: 1,
    push_options: {},
    repository: {
      name: "Diaspora",
      url: "git@gitlab.example.com:mike/diaspora.git",
      description: "",
      homepage: "https://gitlab.example.com/mike/diaspora",
      git_http_url: "https://gitlab.example.com/mike/diaspora.git",
      git_ssh_url: "git@gitlab.example.com:mike/diaspora.git",
      visibility_level: 0,
    },
  });
  const mr = json({
    object_kind: "merge_request",
    event_type: "merge_request",
    user: { id: 1, name: "Administrator", username: "root", email: "admin@example.com" },
    project: { id: 1, name: "Gitlab Test", web_url: "https://gitlab.example.com/gitlabhq/gitlab-test", path_with_namespace: "gitlabhq/gitlab-test", default_branch: "main" },
    object_attributes: {
      id: 99,
      iid: 1,
      title: "MS-Viewport",
      state: "opened",
      action: "open",
      source_branch: "ms-viewport",
      target_branch: "main",
      created_at: "2023-11-14 22:12:01 UTC",
      updated_at: "2023-11-14 22:12:01 UTC",
      url: "https://gitlab.example.com/gitlabhq/gitlab-test/-/merge_requests/1",
    },
    labels: [],
    changes: {},
  });
  const common = [
    ["content-type", "application/json"],
    ["user-agent", "GitLab/17.6.0"],
    ["x-gitlab-instance", "https://gitlab.example.com"],
  ];
  const cases = [
    {
      name: "push hook (GitLab 17.4+, Idempotency-Key)",
      method: "POST",
      url: base("gitlab"),
      headers: [
        ...common,
        ["x-gitlab-event", "Push Hook"],
        ["x-gitlab-webhook-uuid", "0e1b4f3a-5a53-4b8f-9a64-9d0bd3d1c2a1"],
        ["x-gitlab-event-uuid", "8b1f1a6c-8f0e-4d8c-9b1e-2b2f4f0c7d11"],
        ["idempotency-key", "5c0d7b3e-9a0f-4c42-8e0b-7e6f3a2d1c90"],
        ["x-gitlab-token", token],
      ],
      body: push,
      now: NOW,
      expect: { kind: "event", event_id: "5c0d7b3e-9a0f-4c42-8e0b-7e6f3a2d1c90", event_type: "Push Hook" },
    },
    {
      name: "merge request hook (GitLab before 17.4, no Idempotency-Key: id is the body's SHA-256)",
      method: "POST",
      url: base("gitlab"),
      headers: [
        ["content-type", "application/json"],
        ["user-agent", "GitLab/17.3.2"],
        ["x-gitlab-instance", "https://gitlab.example.com"],
        ["x-gitlab-event", "Merge Request Hook"],
        ["x-gitlab-webhook-uuid", "0e1b4f3a-5a53-4b8f-9a64-9d0bd3d1c2a1"],
        ["x-gitlab-event-uuid", "3a9e2c41-70d5-4b6e-8f1a-c2d3e4f5a6b7"],
        ["x-gitlab-token", token],
      ],
      body: mr,
      now: NOW,
      expect: { kind: "event", event_id: sha256Hex(mr), event_type: "Merge Request Hook" },
    },
  ];
  for (const c of cases) check(verify(c.headers), `gitlab ${c.name}`);
  writeVector({
    provider: "gitlab",
    made_by: "docs",
    made_with:
      "built from the documented scheme (no registry package verifies GitLab webhooks): https://docs.gitlab.com/user/project/integrations/webhooks/#delivery-headers",
    docs: "https://docs.gitlab.com/user/project/integrations/webhooks/",
    config: { secrets: [token], public_key: null, url: null, verify_token: null },
    wrong_config: { secrets: ["gitlab-other-token-9d1e77"] },
    signs_timestamp: false,
    tolerance_secs: 300,
    notes:
      "X-Gitlab-Token is the secret token itself (constant-time compare). Event id: Idempotency-Key (GitLab 17.4+, same on retries), else the hex SHA-256 of the body. Type: X-Gitlab-Event. GitLab's newer optional signing token (webhook-id/webhook-timestamp/webhook-signature, Standard Webhooks, whsec_ key) is not covered here: a source using it is a standard-webhooks source.",
    cases,
  });
}

// ---------------------------------------------------------------- bitbucket
// X-Hub-Signature: sha256=<hex HMAC-SHA256(secret, body)>. Cloud: X-Request-UUID, X-Event-Key.
// Data Center: X-Request-Id, X-Event-Key, the same signature header.
function bitbucket() {
  const secret = "bb-test-secret-7c1d0e4a";
  const sign = (body) => "sha256=" + hmacHex("sha256", secret, body);
  const verify = (headers, body) => {
    const v = header(headers, "x-hub-signature") ?? "";
    return v.startsWith("sha256=") && safeEqual(v.slice(7), hmacHex("sha256", secret, body));
  };
  const cloudPush = json({
    push: {
      changes: [
        {
          old: { type: "branch", name: "main", target: { type: "commit", hash: "1e65c05c1d5171631d92438a13901ca7dae9618c" } },
          new: { type: "branch", name: "main", target: { type: "commit", hash: "c4b2b7914156a878aa7c9da452a09fb50c2091f2", message: "fix the build\n", date: "2023-11-14T22:13:00+00:00" } },
          created: false,
          forced: false,
          closed: false,
          commits: [{ type: "commit", hash: "c4b2b7914156a878aa7c9da452a09fb50c2091f2", message: "fix the build\n" }],
          truncated: false,
        },
      ],
    },
    repository: { type: "repository", full_name: "acme/widgets", name: "widgets", uuid: "{9c5e1f2a-3b4c-4d5e-8f90-a1b2c3d4e5f6}", is_private: true },
    actor: { type: "user", display_name: "Ada Lovelace", uuid: "{d301aafa-d676-4ee0-88be-962be7417567}", account_id: "557058:c0b72ad0-1cb5-4018-9cdc-0cde8492c443" },
  });
  const dcPush = json({
    eventKey: "repo:refs_changed",
    date: "2023-11-14T22:13:19+0000",
    actor: { name: "admin", emailAddress: "admin@example.com", id: 1, displayName: "Administrator", active: true, slug: "admin", type: "NORMAL" },
    repository: { slug: "repository", id: 84, name: "repository", scmId: "git", state: "AVAILABLE", forkable: true, project: { key: "PROJ", id: 84, name: "project", public: false, type: "NORMAL" }, public: false },
    changes: [
      { ref: { id: "refs/heads/master", displayId: "master", type: "BRANCH" }, refId: "refs/heads/master", fromHash: "ecddabb624f6f5ba43816f5926e580a5f680a932", toHash: "178864a7d521b6f5e720b386b2c2b0ef8563e0dc", type: "UPDATE" },
    ],
  });
  const cases = [
    {
      name: "Cloud repo:push",
      method: "POST",
      url: base("bitbucket"),
      headers: [
        ["content-type", "application/json"],
        ["user-agent", "Bitbucket-Webhooks/2.0"],
        ["x-event-key", "repo:push"],
        ["x-hook-uuid", "2f0e4c8e-7d0a-4f55-9a4b-3f1c2d3e4f50"],
        ["x-request-uuid", "6f1d9b1c-64a3-4c3b-a8e8-07c2d6a0b9e4"],
        ["x-attempt-number", "1"],
        ["x-hub-signature", sign(cloudPush)],
      ],
      body: cloudPush,
      now: NOW,
      expect: { kind: "event", event_id: "6f1d9b1c-64a3-4c3b-a8e8-07c2d6a0b9e4", event_type: "repo:push" },
    },
    {
      name: "Data Center repo:refs_changed (X-Request-Id)",
      method: "POST",
      url: base("bitbucket"),
      headers: [
        ["content-type", "application/json; charset=utf-8"],
        ["user-agent", "Atlassian HttpClient 4.2.0 / Bitbucket-8.9.0 (8009000) / Default"],
        ["x-event-key", "repo:refs_changed"],
        ["x-request-id", "fbda6fc6-0f4e-4b6b-a9a3-8c4f6f3d1e2a"],
        ["x-hub-signature", sign(dcPush)],
      ],
      body: dcPush,
      now: NOW,
      expect: { kind: "event", event_id: "fbda6fc6-0f4e-4b6b-a9a3-8c4f6f3d1e2a", event_type: "repo:refs_changed" },
    },
  ];
  for (const c of cases) check(verify(c.headers, c.body), `bitbucket ${c.name}`);
  writeVector({
    provider: "bitbucket",
    made_by: "docs",
    made_with:
      "built from the documented algorithm (no registry package verifies Bitbucket webhooks): https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/#Secure-webhooks",
    docs: "https://support.atlassian.com/bitbucket-cloud/docs/event-payloads/",
    config: { secrets: [secret], public_key: null, url: null, verify_token: null },
    wrong_config: { secrets: ["bb-other-secret-2b9f6a31"] },
    signs_timestamp: false,
    tolerance_secs: 300,
    notes:
      "X-Hub-Signature is sha256=<hex HMAC-SHA256 of the raw body> (SHA-256 despite GitHub's header name). Id: X-Request-UUID (Cloud, same on every X-Attempt-Number), else X-Request-Id (Data Center, https://confluence.atlassian.com/bitbucketserver/event-payload-938025882.html). Type: X-Event-Key.",
    cases,
  });
}

// ---------------------------------------------------------------- gitea
// X-Gitea-Signature: hex HMAC-SHA256(secret, payload JSON); the same value in X-Gogs-Signature and
// X-Hub-Signature-256 (sha256=), plus X-Hub-Signature (sha1=). Gitea indents its payload JSON. With the
// form content type the body is payload=<query-escaped JSON> but the signature still covers the JSON.
function gitea() {
  const secret = "gitea-test-secret-4e8a91";
  const payload = JSON.stringify(
    {
      ref: "refs/heads/develop",
      before: "28e1879d029cb852e4844d9c718537df08844e03",
      after: "bffeb74224043ba2feb48d137756c8a9331c449a",
      compare_url: "https://gitea.example.com/gitea/webhooks/compare/28e1879d029cb852e4844d9c718537df08844e03...bffeb74224043ba2feb48d137756c8a9331c449a",
      commits: [
        {
          id: "bffeb74224043ba2feb48d137756c8a9331c449a",
          message: "Webhooks Yay!",
          url: "https://gitea.example.com/gitea/webhooks/commit/bffeb74224043ba2feb48d137756c8a9331c449a",
          author: { name: "Gitea", email: "someone@gitea.io", username: "gitea" },
          committer: { name: "Gitea", email: "someone@gitea.io", username: "gitea" },
          timestamp: "2023-11-14T22:13:00Z",
        },
      ],
      total_commits: 1,
      repository: { id: 140, name: "webhooks", full_name: "gitea/webhooks", private: false, html_url: "https://gitea.example.com/gitea/webhooks", default_branch: "main" },
      pusher: { id: 1, login: "gitea", full_name: "Gitea", email: "someone@gitea.io" },
      sender: { id: 1, login: "gitea", full_name: "Gitea", email: "someone@gitea.io" },
    },
    null,
    2,
  );
  const issue = JSON.stringify(
    {
      action: "opened",
      number: 7,
      issue: { id: 1201, number: 7, title: "Form-encoded webhook", state: "open", html_url: "https://gitea.example.com/gitea/webhooks/issues/7", body: "a + b = c? (50% done)" },
      repository: { id: 140, name: "webhooks", full_name: "gitea/webhooks" },
      sender: { id: 1, login: "gitea" },
    },
    null,
    2,
  );
  const headersFor = (delivery, event, eventType, signed) => {
    const s256 = hmacHex("sha256", secret, signed);
    const s1 = hmacHex("sha1", secret, signed);
    return [
      ["x-gitea-delivery", delivery],
      ["x-gitea-event", event],
      ["x-gitea-event-type", eventType],
      ["x-gitea-signature", s256],
      ["x-gogs-delivery", delivery],
      ["x-gogs-event", event],
      ["x-gogs-event-type", eventType],
      ["x-gogs-signature", s256],
      ["x-hub-signature", "sha1=" + s1],
      ["x-hub-signature-256", "sha256=" + s256],
      ["x-github-delivery", delivery],
      ["x-github-event", event],
      ["x-github-event-type", eventType],
    ];
  };
  const formBody = "payload=" + goQueryEscape(issue);
  const cases = [
    {
      name: "push (JSON content type)",
      method: "POST",
      url: base("gitea"),
      headers: [["content-type", "application/json"], ...headersFor("f6266f16-1bf3-46a5-9ea4-602e06ead473", "push", "push", payload)],
      body: payload,
      now: NOW,
      expect: { kind: "event", event_id: "f6266f16-1bf3-46a5-9ea4-602e06ead473", event_type: "push" },
    },
    {
      name: "issues opened (form content type: the signature covers the decoded payload field)",
      method: "POST",
      url: base("gitea"),
      headers: [["content-type", "application/x-www-form-urlencoded"], ...headersFor("0c8e9f7a-2d3b-4e5f-8a6b-7c9d0e1f2a3b", "issues", "issues", issue)],
      body: formBody,
      now: NOW,
      expect: { kind: "event", event_id: "0c8e9f7a-2d3b-4e5f-8a6b-7c9d0e1f2a3b", event_type: "issues" },
    },
  ];
  // Independent check: decode as a receiver would, then verify.
  for (const c of cases) {
    const ct = header(c.headers, "content-type");
    const signed = ct === "application/json" ? c.body : new URLSearchParams(c.body).get("payload");
    check(signed !== null && safeEqual(header(c.headers, "x-gitea-signature"), hmacHex("sha256", secret, signed)), `gitea ${c.name}`);
  }
  check(new URLSearchParams(formBody).get("payload") === issue, "gitea form round trip");
  writeVector({
    provider: "gitea",
    made_by: "docs",
    made_with:
      "built from Gitea's sender (services/webhook/deliver.go, addDefaultHeaders: hex HMAC-SHA256 of the payload with the hook secret); no registry package verifies Gitea webhooks",
    docs: "https://docs.gitea.com/usage/repository/webhooks",
    config: { secrets: [secret], public_key: null, url: null, verify_token: null },
    wrong_config: { secrets: ["gitea-other-secret-6d02fc"] },
    signs_timestamp: false,
    tolerance_secs: 300,
    notes:
      "X-Gitea-Signature = hex HMAC-SHA256(secret, payload JSON); the same value is in X-Gogs-Signature and X-Hub-Signature-256 (sha256=). With the form content type the body is payload=<url-encoded JSON> and the signature covers the form field payload after decoding, not the raw body. Id: X-Gitea-Delivery. Type: X-Gitea-Event (X-Gitea-Event-Type is finer, Gitea 1.17+). Forgejo sends the same plus X-Forgejo-*.",
    cases,
  });
}

// ---------------------------------------------------------------- linear (SDK)
// Linear-Signature: hex HMAC-SHA256(secret, body). The body's webhookTimestamp (ms) must be within 60 s.
async function linear() {
  const secret = "lin_wh_testsecret0123456789abcdefghijklmnopqrstuvwx";
  const wrong = "lin_wh_othersecret0123456789abcdefghijklmnopqrstuvw";
  const issueTs = 1700000000123;
  const issue = json({
    action: "create",
    actor: { id: "2e6eea91-1111-0000-9486-acea0603064d", type: "user", name: "Ada Lovelace", email: "ada@example.com", url: "https://linear.app/acme/profiles/ada" },
    createdAt: "2023-11-14T22:13:19.812Z",
    data: {
      id: "9cfb482a-81e3-4154-b5b9-2c805e70a02d",
      createdAt: "2023-11-14T22:13:19.812Z",
      updatedAt: "2023-11-14T22:13:19.812Z",
      number: 42,
      title: "Webhook inbox drops events",
      priority: 2,
      identifier: "ENG-42",
      teamId: "72b2a2dc-6f4f-4423-9d34-24b5bd10634a",
      stateId: "c4f3a8f0-8e4b-4e3e-9f8e-3c1f0a6a1c2d",
      labelIds: [],
    },
    url: "https://linear.app/acme/issue/ENG-42/webhook-inbox-drops-events",
    type: "Issue",
    organizationId: "e6b4c6a1-7d0e-4b0f-8f3a-2a1b3c4d5e6f",
    webhookTimestamp: issueTs,
    webhookId: "000042e3-d123-4980-b49f-8e140eef9329",
  });
  const commentTs = 1700000360045;
  const comment = json({
    action: "update",
    actor: { id: "2e6eea91-1111-0000-9486-acea0603064d", type: "user", name: "Ada Lovelace" },
    createdAt: "2023-11-14T22:19:20.001Z",
    data: { id: "b1f2e3d4-c5b6-4a79-8e01-f2a3b4c5d6e7", body: "Fixed in ENG-43 — thanks! 🎉", issueId: "9cfb482a-81e3-4154-b5b9-2c805e70a02d", userId: "2e6eea91-1111-0000-9486-acea0603064d" },
    updatedFrom: { body: "Looking into it", updatedAt: "2023-11-14T22:15:00.000Z" },
    url: "https://linear.app/acme/issue/ENG-42#comment-b1f2e3d4",
    type: "Comment",
    organizationId: "e6b4c6a1-7d0e-4b0f-8f3a-2a1b3c4d5e6f",
    webhookTimestamp: commentTs,
    webhookId: "000042e3-d123-4980-b49f-8e140eef9329",
  });
  const mk = (name, body, ts, delivery, event, type) => ({
    name,
    method: "POST",
    url: base("linear"),
    headers: [
      ["content-type", "application/json; charset=utf-8"],
      ["user-agent", "Linear-Webhook"],
      ["linear-delivery", delivery],
      ["linear-event", event],
      ["linear-signature", hmacHex("sha256", secret, body)],
      ["linear-timestamp", String(ts)],
    ],
    body,
    now: Math.floor(ts / 1000),
    expect: { kind: "event", event_id: delivery, event_type: type },
  });
  const cases = [
    mk("Issue create", issue, issueTs, "234d1a4e-b617-4388-90fe-adc3633d6b72", "Issue", "Issue.create"),
    mk("Comment update (non-ASCII body)", comment, commentTs, "7a4c5d9e-2b3f-4c1d-9e8f-0a1b2c3d4e5f", "Comment", "Comment.update"),
  ];

  // Prove each case with the SDK: accepted at `now`, refused with the wrong secret, refused 61 s later.
  const realNow = Date.now;
  try {
    for (const c of cases) {
      const body = Buffer.from(c.body, "utf8");
      const sig = header(c.headers, "linear-signature");
      const ts = JSON.parse(c.body).webhookTimestamp;
      Date.now = () => c.now * 1000;
      const parsed = new LinearWebhookClient(secret).parseData(body, sig);
      check(parsed.webhookTimestamp === ts, `linear ${c.name}: SDK parse`);
      let refused = false;
      try {
        new LinearWebhookClient(wrong).verify(body, sig);
      } catch {
        refused = true;
      }
      check(refused, `linear ${c.name}: SDK accepted the wrong secret`);
      Date.now = () => ts + 61_000;
      refused = false;
      try {
        new LinearWebhookClient(secret).verify(body, sig);
      } catch {
        refused = true;
      }
      check(refused, `linear ${c.name}: SDK accepted a stale timestamp`);
      // The full handler path too (Fetch API request).
      Date.now = () => c.now * 1000;
      const handler = new LinearWebhookClient(secret).createHandler();
      let seen = null;
      handler.on(JSON.parse(c.body).type, (p) => {
        seen = p;
      });
      const res = await handler(new Request(c.url, { method: "POST", headers: c.headers, body: c.body }));
      check(res.status === 200 && seen !== null, `linear ${c.name}: SDK handler answered ${res.status}`);
    }
  } finally {
    Date.now = realNow;
  }
  writeVector({
    provider: "linear",
    made_by: "sdk",
    made_with: `@linear/sdk ${pkgVersion("@linear/sdk")} (npm): LinearWebhookClient.verify / parseData / createHandler (signature made here, proven by the SDK)`,
    docs: "https://linear.app/developers/webhooks",
    config: { secrets: [secret], public_key: null, url: null, verify_token: null },
    wrong_config: { secrets: [wrong] },
    signs_timestamp: true,
    tolerance_secs: 60,
    notes:
      "Linear-Signature = hex HMAC-SHA256(secret, raw body). The timestamp is the body's webhookTimestamp (unix ms, inside the signed bytes); the SDK refuses it more than 60 s from now, either way, and ignores the Linear-Timestamp header. Id: Linear-Delivery. Type: the body's type and action as {type}.{action} (Linear-Event carries the type alone).",
    cases,
  });
}

// ---------------------------------------------------------------- sentry
// Sentry-Hook-Signature: hex HMAC-SHA256(client secret, body). Sentry-Hook-Timestamp is not signed.
function sentry() {
  const secret = "sentry-client-secret-test-1f2e3d4c5b6a";
  const issue = json({
    action: "created",
    installation: { uuid: "7a485448-a9e2-4c85-8a3c-4f44175783c9" },
    data: {
      issue: {
        id: "1170820242",
        shortId: "PYTHON-Z",
        title: "ZeroDivisionError: division by zero",
        culprit: "app.views in index",
        level: "error",
        status: "unresolved",
        platform: "python",
        project: { id: "1", name: "python", slug: "python", platform: "python" },
        url: "https://sentry.io/api/0/organizations/acme/issues/1170820242/",
        web_url: "https://sentry.io/organizations/acme/issues/1170820242/",
        project_url: "https://sentry.io/organizations/acme/issues/?project=1",
        firstSeen: "2023-11-14T22:13:01.123456Z",
        lastSeen: "2023-11-14T22:13:01.123456Z",
      },
    },
    actor: { type: "application", id: "sentry", name: "Sentry" },
  });
  const install = json({
    action: "created",
    installation: { uuid: "a8e5d37a-696c-4c54-adb5-b3f28d64c7de" },
    data: {
      installation: {
        app: { uuid: "2ebf071f-28df-4989-aca9-c37c763b278f", slug: "webhooks-galore" },
        organization: { slug: "test-org" },
        uuid: "a8e5d37a-696c-4c54-adb5-b3f28d64c7de",
        status: "pending",
        code: "f3c71b491e3949b6b033ae45312a4fcb",
      },
    },
    actor: { type: "user", id: 1, name: "Meredith Heller" },
  });
  const mk = (name, body, resource, requestId, type) => ({
    name,
    method: "POST",
    url: base("sentry"),
    headers: [
      ["content-type", "application/json"],
      ["request-id", requestId],
      ["sentry-hook-resource", resource],
      ["sentry-hook-timestamp", String(NOW)],
      ["sentry-hook-signature", hmacHex("sha256", secret, body)],
    ],
    body,
    now: NOW,
    // Sentry makes a new Request-ID for every attempt: the id is the SHA-256 of what it signs, the body.
    expect: { kind: "event", event_id: crypto.createHash("sha256").update(body).digest("hex"), event_type: type },
  });
  const cases = [
    mk("issue.created", issue, "issue", "5d9c0e1f2a3b4c5d8e6f7a8b9c0d1e2f", "issue.created"),
    mk("installation.created", install, "installation", "e2b4c6d8f0a1432e9b7d5f3a1c8e6b40", "installation.created"),
  ];
  for (const c of cases) check(safeEqual(header(c.headers, "sentry-hook-signature"), hmacHex("sha256", secret, c.body)), `sentry ${c.name}`);
  writeVector({
    provider: "sentry",
    made_by: "docs",
    made_with:
      "built from the documented algorithm (no registry package verifies Sentry integration webhooks): https://docs.sentry.io/organization/integrations/integration-platform/webhooks/#verifying-the-signature",
    docs: "https://docs.sentry.io/organization/integrations/integration-platform/webhooks/",
    config: { secrets: [secret], public_key: null, url: null, verify_token: null },
    wrong_config: { secrets: ["sentry-client-secret-other-9a8b7c6d5e4f"] },
    signs_timestamp: false,
    tolerance_secs: 300,
    notes:
      "Sentry-Hook-Signature = hex HMAC-SHA256(integration client secret, raw body); Sentry serialises compact JSON. Sentry-Hook-Timestamp (unix seconds) is sent but not signed, so it is not checked. Id: the SHA-256 of the body (Sentry makes a new Request-ID for every attempt). Type: {Sentry-Hook-Resource}.{action}. The installation webhook is an ordinary event (no answer required).",
    cases,
  });
}

// ---------------------------------------------------------------- vercel
// x-vercel-signature: hex HMAC-SHA1(secret, body); secret = the webhook's secret (account webhooks) or
// the integration's client secret.
function vercel() {
  const secret = "vercel-webhook-secret-test-5a6b7c";
  const created = json({
    id: "uev_sE2obSrVpUFUhwXcSW3tNwGk",
    type: "deployment.created",
    createdAt: 1699999999871,
    region: "iad1",
    payload: {
      team: { id: "team_a1B2c3D4e5F6g7H8i9J0k1L2" },
      user: { id: "c1QkMm5RNjhGQ0VzNWxQbmc2eG9y" },
      deployment: { id: "dpl_89qyp1cskzkLrVicDaZoDbjyHuDJ", meta: { githubCommitRef: "main" }, url: "my-app-3x4mpl3.vercel.app", name: "my-app" },
      links: { deployment: "https://vercel.com/acme/my-app/89qyp1cskzkLrVicDaZoDbjyHuDJ", project: "https://vercel.com/acme/my-app" },
      target: "production",
      project: { id: "prj_ndlgr43fadlPyCtREAqxxdyFK" },
      plan: "pro",
      regions: ["iad1"],
    },
  });
  const removed = json({
    id: "uev_Q4kY7pM2wHc9ZxR1nTbV6sLd",
    type: "project.removed",
    createdAt: 1700000012345,
    region: null,
    payload: { team: { id: "team_a1B2c3D4e5F6g7H8i9J0k1L2" }, user: { id: "c1QkMm5RNjhGQ0VzNWxQbmc2eG9y" }, project: { id: "prj_ndlgr43fadlPyCtREAqxxdyFK", name: "old-site" } },
  });
  const mk = (name, body, now) => ({
    name,
    method: "POST",
    url: base("vercel"),
    headers: [
      ["content-type", "application/json"],
      ["x-vercel-signature", hmacHex("sha1", secret, body)],
    ],
    body,
    now,
    expect: { kind: "event", event_id: JSON.parse(body).id, event_type: JSON.parse(body).type },
  });
  const cases = [mk("deployment.created", created, NOW), mk("project.removed", removed, NOW + 13)];
  for (const c of cases) check(safeEqual(header(c.headers, "x-vercel-signature"), hmacHex("sha1", secret, c.body)), `vercel ${c.name}`);
  writeVector({
    provider: "vercel",
    made_by: "docs",
    made_with:
      "built from the documented algorithm (@vercel/sdk has no webhook verifier): https://vercel.com/docs/webhooks/webhooks-api#securing-webhooks",
    docs: "https://vercel.com/docs/webhooks/webhooks-api",
    config: { secrets: [secret], public_key: null, url: null, verify_token: null },
    wrong_config: { secrets: ["vercel-webhook-secret-other-8d9e0f"] },
    signs_timestamp: false,
    tolerance_secs: 300,
    notes:
      "x-vercel-signature = hex HMAC-SHA1(secret, raw body); the secret is the account webhook's secret or, for integration webhooks, the integration's client secret. No signed timestamp (createdAt is in the body, in ms, but no tolerance is documented). Id: body id. Type: body type.",
    cases,
  });
}

// ---------------------------------------------------------------- circleci
// circleci-signature: v1=<hex HMAC-SHA256(secret, body)>, a comma-separated list of versioned signatures.
function circleci() {
  const secret = "circleci-signing-secret-test-8e7d";
  const org = { id: "f22b6566-597d-46d5-ba74-99ef5bb3d85c", name: "acme" };
  const project = { id: "84996744-a854-4f5e-aea3-04e2851dc1d2", name: "app", slug: "github/acme/app" };
  const pipeline = {
    id: "1285fe1d-d3a6-44fc-8886-8979558254c4",
    number: 130,
    created_at: "2023-11-14T22:10:06.107Z",
    trigger: { type: "webhook" },
    vcs: {
      provider_name: "github",
      origin_repository_url: "https://github.com/acme/app",
      target_repository_url: "https://github.com/acme/app",
      revision: "1dc6aa69429bff4806ad6afe58d3d8f57e25973e",
      commit: { subject: "Add Slack notifications", body: "", author: { name: "Author Name", email: "author.email@example.com" }, authored_at: "2023-11-14T22:09:00Z", committer: { name: "Committer Name", email: "committer.email@example.com" }, committed_at: "2023-11-14T22:09:00Z" },
      branch: "main",
    },
  };
  const workflowBody = json({
    type: "workflow-completed",
    id: "3888f21b-eaa7-38e3-8f3d-75a63bba8895",
    happened_at: "2023-11-14T22:13:18.752Z",
    webhook: { id: "cf8c4fdd-0587-4da1-b4ca-4846e9640af9", name: "Sample Webhook" },
    workflow: { id: "fda08377-fe7e-46b1-8992-3a7aaecac9c3", name: "build-test-deploy", created_at: "2023-11-14T22:10:06.151Z", stopped_at: "2023-11-14T22:13:18.752Z", url: "https://app.circleci.com/pipelines/github/acme/app/130/workflows/fda08377-fe7e-46b1-8992-3a7aaecac9c3", status: "success" },
    pipeline,
    project,
    organization: org,
  });
  const jobBody = json({
    type: "job-completed",
    id: "8bd26246-4e8d-3d5a-9c1e-0b5e2a3c4d6f",
    happened_at: "2023-11-14T22:12:40.115Z",
    webhook: { id: "cf8c4fdd-0587-4da1-b4ca-4846e9640af9", name: "Sample Webhook" },
    workflow: { id: "fda08377-fe7e-46b1-8992-3a7aaecac9c3", name: "build-test-deploy", created_at: "2023-11-14T22:10:06.151Z", stopped_at: null, url: "https://app.circleci.com/pipelines/github/acme/app/130/workflows/fda08377-fe7e-46b1-8992-3a7aaecac9c3", status: "running" },
    pipeline,
    project,
    organization: org,
    job: { id: "8bd26246-0597-4d0a-a8f7-2b0b9ab1a7b8", name: "test", started_at: "2023-11-14T22:10:30.000Z", stopped_at: "2023-11-14T22:12:40.115Z", status: "success", number: 1127 },
  });
  const mk = (name, body, type) => ({
    name,
    method: "POST",
    url: base("circleci"),
    headers: [
      ["content-type", "application/json"],
      ["user-agent", "CircleCI-Webhook/1.0"],
      ["circleci-event-type", type],
      ["circleci-signature", "v1=" + hmacHex("sha256", secret, body)],
    ],
    body,
    now: NOW,
    expect: { kind: "event", event_id: JSON.parse(body).id, event_type: type },
  });
  const cases = [mk("workflow-completed", workflowBody, "workflow-completed"), mk("job-completed", jobBody, "job-completed")];
  // Independent check, as CircleCI's sample does: split on ",", pick the v1 entry.
  for (const c of cases) {
    const parts = Object.fromEntries(header(c.headers, "circleci-signature").split(",").map((kv) => kv.split("=", 2)));
    check(safeEqual(parts.v1, hmacHex("sha256", secret, c.body)), `circleci ${c.name}`);
  }
  writeVector({
    provider: "circleci",
    made_by: "docs",
    made_with:
      "built from the documented algorithm (no registry package verifies CircleCI webhooks): https://circleci.com/docs/guides/integration/outbound-webhooks/#payload-signature",
    docs: "https://circleci.com/docs/guides/integration/outbound-webhooks/",
    config: { secrets: [secret], public_key: null, url: null, verify_token: null },
    wrong_config: { secrets: ["circleci-signing-secret-other-1a2b"] },
    signs_timestamp: false,
    tolerance_secs: 300,
    notes:
      "circleci-signature is a comma-separated list of versioned signatures; v1 = hex HMAC-SHA256(secret, raw body); ignore versions you do not know. Id: body id (CircleCI says to deduplicate on it). Type: circleci-event-type (= body type). happened_at is not signed separately and no tolerance is documented.",
    cases,
  });
}

// ---------------------------------------------------------------- pagerduty
// X-PagerDuty-Signature: v1=<hex HMAC-SHA256(secret, body)>[,v1=...] - one per active secret.
function pagerduty() {
  const secret = "pd-webhook-secret-test-current-3c4d";
  const previous = "pd-webhook-secret-test-previous-1a2b"; // a secret being rotated out, not configured here
  const incident = (status) => ({
    id: "Q1B5N3S0Y4PCAE",
    type: "incident",
    self: "https://api.pagerduty.com/incidents/Q1B5N3S0Y4PCAE",
    html_url: "https://acme.pagerduty.com/incidents/Q1B5N3S0Y4PCAE",
    number: 2,
    status,
    incident_key: "3d9f1e6a0b2c4d5e8f7a6b5c4d3e2f1a",
    created_at: "2023-11-14T22:13:18Z",
    title: "A little bump in the road",
    service: { html_url: "https://acme.pagerduty.com/services/PF9KMXH", id: "PF9KMXH", self: "https://api.pagerduty.com/services/PF9KMXH", summary: "API Service", type: "service_reference" },
    assignees: [{ html_url: "https://acme.pagerduty.com/users/PTUXL6G", id: "PTUXL6G", self: "https://api.pagerduty.com/users/PTUXL6G", summary: "User 123", type: "user_reference" }],
    escalation_policy: { html_url: "https://acme.pagerduty.com/escalation_policies/PUS0KTE", id: "PUS0KTE", self: "https://api.pagerduty.com/escalation_policies/PUS0KTE", summary: "Default", type: "escalation_policy_reference" },
    teams: [],
    priority: null,
    urgency: "high",
    conference_bridge: null,
    resolve_reason: null,
  });
  const agent = { html_url: "https://acme.pagerduty.com/users/PLH1HKV", id: "PLH1HKV", self: "https://api.pagerduty.com/users/PLH1HKV", summary: "Tenex Engineer", type: "user_reference" };
  const triggered = json({ event: { id: "01DEN4G0N8WSUHBJ6IUTVSHQ7X", event_type: "incident.triggered", resource_type: "incident", occurred_at: "2023-11-14T22:13:19.123Z", agent: null, client: null, data: incident("triggered") } });
  const resolved = json({ event: { id: "01DEN4HPBQAIXQ4NDH2XRU0D2D", event_type: "incident.resolved", resource_type: "incident", occurred_at: "2023-11-14T22:20:02.456Z", agent, client: { name: "PagerDuty" }, data: incident("resolved") } });
  const ping = json({ event: { id: "01DEN4K0PZ8C0R5V1M3QJ7X2YB", event_type: "pagey.ping", resource_type: "pagey", occurred_at: "2023-11-14T22:13:20.000Z", agent: null, client: null, data: { message: "Hello from your friend Pagey!", type: "ping" } } });
  const mk = (name, body, webhookId, now, signatures) => ({
    name,
    method: "POST",
    url: base("pagerduty"),
    headers: [
      ["content-type", "application/json"],
      ["user-agent", "PagerDuty-Webhook/V3.0"],
      ["x-webhook-id", webhookId],
      ["x-webhook-subscription", "PY1OQ6P"],
      ["x-pagerduty-signature", signatures.map((k) => "v1=" + hmacHex("sha256", k, body)).join(",")],
    ],
    body,
    now,
    expect: { kind: "event", event_id: JSON.parse(body).event.id, event_type: JSON.parse(body).event.event_type },
  });
  const cases = [
    mk("incident.triggered", triggered, "c6e8e0a6-8e52-4d3b-a9a4-2d7a1c0b9f11", NOW, [secret]),
    mk("incident.resolved during a secret rotation (two v1 signatures, the configured one second)", resolved, "1f0e2d3c-4b5a-4968-8776-5a4b3c2d1e0f", NOW + 403, [previous, secret]),
    mk("pagey.ping (test event)", ping, "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", NOW, [secret]),
  ];
  // Independent check, as PagerDuty's sample does: split on ",", compare each with "v1=" + hex.
  for (const c of cases) {
    const want = "v1=" + hmacHex("sha256", secret, c.body);
    check(header(c.headers, "x-pagerduty-signature").split(",").some((s) => safeEqual(s, want)), `pagerduty ${c.name}`);
  }
  writeVector({
    provider: "pagerduty",
    made_by: "docs",
    made_with:
      "built from the documented algorithm (the pagerduty PyPI client has no webhook verifier; go-pagerduty is Go): https://github.com/PagerDuty/developer-docs/blob/main/docs/webhooks/04-Signatures.md",
    docs: "https://developer.pagerduty.com/docs/webhooks-overview",
    config: { secrets: [secret], public_key: null, url: null, verify_token: null },
    wrong_config: { secrets: ["pd-webhook-secret-other-9f8e"] },
    signs_timestamp: false,
    tolerance_secs: 300,
    notes:
      "V3 webhooks. X-PagerDuty-Signature is a comma-separated list of v1=<hex HMAC-SHA256(secret, raw body)>, one per active secret (rotation): any may match; ignore other versions. Id: body event.id (signed; X-Webhook-Id is the unsigned per-webhook delivery id, repeated on retries). Type: event.event_type. pagey.ping is PagerDuty's test event, stored like any other. One event per request by design.",
    cases,
  });
}

// ---------------------------------------------------------------- buildkite
// X-Buildkite-Signature: timestamp=<unix s>,signature=<hex HMAC-SHA256(token, "<timestamp>.<body>")>.
function buildkite() {
  const token = "buildkite-webhook-token-test-0a1b2c3d";
  const finished = json({
    event: "build.finished",
    build: {
      id: "f62a1b4d-10f9-4790-bc1c-e2c3a0c80983",
      graphql_id: "QnVpbGQtLS1mYmQ2Zjk3OS0yOTRhLTQ3ZjItOTU0Ni1lNTk0M2VlMTAwNzE=",
      url: "https://api.buildkite.com/v2/organizations/acme/pipelines/app/builds/1",
      web_url: "https://buildkite.com/acme/app/builds/1",
      number: 1,
      state: "passed",
      blocked: false,
      message: "Bumping to version 0.2-beta.6",
      commit: "abcd0b72a1e580e90712cdd9eb26d3fb41cd09c8",
      branch: "main",
      source: "webhook",
      created_at: "2023-11-14 22:10:00 UTC",
      scheduled_at: "2023-11-14 22:10:00 UTC",
      started_at: "2023-11-14 22:10:05 UTC",
      finished_at: "2023-11-14 22:13:15 UTC",
    },
    pipeline: { id: "849411f9-9e6d-4739-a0d8-e247088e9b52", slug: "app", name: "app", repository: "git@github.com:acme/app.git" },
    sender: { id: "8a7693f8-dbae-4783-9137-84090fce9045", name: "Some Person" },
  });
  const ping = json({
    event: "ping",
    service: { id: "49801950-1df0-474f-bb56-ad6a930c5cb9", provider: "webhook", settings: { url: base("buildkite") } },
    organization: { id: "a1b2c3d4-e5f6-4789-8abc-def012345678", slug: "acme", name: "Acme" },
    sender: { id: "8a7693f8-dbae-4783-9137-84090fce9045", name: "Some Person" },
  });
  const mk = (name, body, ts) => ({
    name,
    method: "POST",
    url: base("buildkite"),
    headers: [
      ["content-type", "application/json"],
      ["user-agent", "Buildkite-Request"],
      ["x-buildkite-event", JSON.parse(body).event],
      ["x-buildkite-signature", `timestamp=${ts},signature=${hmacHex("sha256", token, `${ts}.${body}`)}`],
    ],
    body,
    now: ts,
    expect: { kind: "event", event_id: sha256Hex(body), event_type: JSON.parse(body).event },
  });
  const cases = [mk("build.finished", finished, NOW), mk("ping (sent when the webhook's settings change)", ping, NOW + 7)];
  // Independent check, as Buildkite's Ruby sample does.
  for (const c of cases) {
    const parts = Object.fromEntries(header(c.headers, "x-buildkite-signature").split(",").map((kv) => kv.split("=", 2).map((s) => s.trim())));
    check(safeEqual(parts.signature, hmacHex("sha256", token, `${parts.timestamp}.${c.body}`)) && Number(parts.timestamp) === c.now, `buildkite ${c.name}`);
  }
  writeVector({
    provider: "buildkite",
    made_by: "docs",
    made_with:
      "built from the documented algorithm (no registry package verifies Buildkite webhooks): https://buildkite.com/docs/apis/webhooks/pipelines#webhook-signature",
    docs: "https://buildkite.com/docs/apis/webhooks/pipelines",
    config: { secrets: [token], public_key: null, url: null, verify_token: null },
    wrong_config: { secrets: ["buildkite-webhook-token-other-9e8d7c6b"] },
    signs_timestamp: true,
    tolerance_secs: 300,
    notes:
      "Signature mode: X-Buildkite-Signature: timestamp=<unix s>,signature=<hex HMAC-SHA256(token, \"{timestamp}.{body}\")>; the docs suggest a short window such as 5 minutes. Token mode (the webhook's other setting) sends the same token in clear in X-Buildkite-Token; it has no timestamp, so it is not a case here. Buildkite sends no event id: the id is the hex SHA-256 of the body (a dispatch timestamp would make every retry a new id). Type: X-Buildkite-Event (= body event). ping is an ordinary event.",
    cases,
  });
}

// ---------------------------------------------------------------- heroku
// Heroku-Webhook-Hmac-SHA256: base64 HMAC-SHA256(secret, body).
function heroku() {
  const secret = "heroku-webhook-secret-test-475beb0bf7de962fb898";
  const release = json({
    action: "create",
    actor: { email: "heroku-postgresql@addons.heroku.com", id: "f87b5e7e-4631-46cc-9912-9fcdbbb6c985" },
    created_at: "2023-11-14T22:13:18Z",
    id: "b6a68e77-8c13-41c8-b30c-b50cca7a608a",
    data: {
      addon_plan_names: ["heroku-postgresql:essential-0"],
      app: { id: "44dc9c7a-771c-4a9e-bfe9-a8dbc1c55f4d", name: "sample-app-0339" },
      created_at: "2023-11-14T22:13:18Z",
      description: "Update DATABASE by heroku-postgresql",
      status: "succeeded",
      id: "5f1463a4-0210-43ba-b906-52599e246482",
      slug: null,
      updated_at: "2023-11-14T22:13:18Z",
      user: { email: "heroku-postgresql@addons.heroku.com", id: "f87b5e7e-4631-46cc-9912-9fcdbbb6c985" },
      version: 3,
      current: true,
    },
    previous_data: {},
    published_at: null,
    resource: "release",
    sequence: null,
    updated_at: "2023-11-14T22:13:18Z",
    version: "application/vnd.heroku+json; version=3",
    webhook_metadata: {
      attempt: { id: "8a44f820-2354-489d-9a11-a793cbf49979" },
      delivery: { id: "d244009a-670f-4340-88e9-789a4f9002d5" },
      event: { id: "b6a68e77-8c13-41c8-b30c-b50cca7a608a", include: "api:release" },
      webhook: { id: "01234567-89ab-cdef-0123-456789abcdef" },
    },
  });
  const app = json({
    action: "update",
    actor: { email: "user-0436@example.com", id: "096370c8-f3ad-4e20-a309-fb4f06ec0a89" },
    created_at: "2023-11-14T22:13:20Z",
    id: "d472a8bb-1a3c-4f78-aad1-995e6d0022ec",
    data: { id: "d4714cc8-aa56-4314-817c-0c6a66ff3d41", name: "sample-app-0301", maintenance: true, web_url: "https://sample-app-0301.herokuapp.com/", region: { id: "7044c05a-0873-42c2-abbe-6841c5481ba7", name: "us" } },
    previous_data: { maintenance: false },
    published_at: null,
    resource: "app",
    sequence: null,
    updated_at: "2023-11-14T22:13:20Z",
    version: "application/vnd.heroku+json; version=3",
    webhook_metadata: {
      attempt: { id: "2b7e9f10-3c4d-4e5f-8a9b-0c1d2e3f4a5b" },
      delivery: { id: "6c7d8e9f-0a1b-4c2d-9e3f-4a5b6c7d8e9f" },
      event: { id: "d472a8bb-1a3c-4f78-aad1-995e6d0022ec", include: "api:app" },
      webhook: { id: "01234567-89ab-cdef-0123-456789abcdef" },
    },
  });
  const mk = (name, body, type) => ({
    name,
    method: "POST",
    url: base("heroku"),
    headers: [
      ["content-type", "application/json"],
      ["heroku-webhook-hmac-sha256", hmacB64("sha256", secret, body)],
    ],
    body,
    now: NOW,
    expect: { kind: "event", event_id: JSON.parse(body).id, event_type: type },
  });
  const cases = [mk("api:release create", release, "release.create"), mk("api:app update", app, "app.update")];
  for (const c of cases) check(safeEqual(header(c.headers, "heroku-webhook-hmac-sha256"), hmacB64("sha256", secret, c.body)), `heroku ${c.name}`);
  writeVector({
    provider: "heroku",
    made_by: "docs",
    made_with:
      "built from the documented algorithm (no registry package verifies Heroku webhooks): https://devcenter.heroku.com/articles/app-webhooks#securing-webhook-requests",
    docs: "https://devcenter.heroku.com/articles/app-webhooks",
    config: { secrets: [secret], public_key: null, url: null, verify_token: null },
    wrong_config: { secrets: ["heroku-webhook-secret-other-9c8d7e6f5a4b3c2d1e0f"] },
    signs_timestamp: false,
    tolerance_secs: 300,
    notes:
      "Heroku-Webhook-Hmac-SHA256 = base64 HMAC-SHA256(secret, raw body); an optional Authorization header carries a value the user chose (not checked here). Id: body id (the event id, = webhook_metadata.event.id, the same for every delivery attempt). Type: {resource}.{action}. Heroku ignores the answer's body; any 2xx is success.",
    cases,
  });
}

// ---------------------------------------------------------------- launchdarkly
// X-LD-Signature: hex HMAC-SHA256(secret, body).
function launchdarkly() {
  const secret = "ld-webhook-secret-test-7f6e5d";
  const member = { _links: { self: { href: "/api/v2/members/57c0a8e29969090743529964", type: "application/json" } }, _id: "57c0a8e29969090743529964", email: "alexis@example.com", firstName: "Alexis", lastName: "Georges" };
  const env = json({
    _links: {
      canonical: { href: "/api/v2/projects/alexis/environments/test", type: "application/json" },
      parent: { href: "/api/v2/auditlog", type: "application/json" },
      self: { href: "/api/v2/auditlog/57c0a8e29969090743529965", type: "application/json" },
      site: { href: "/settings#/projects", type: "text/html" },
    },
    _id: "57c0a8e29969090743529965",
    date: 1699999998774,
    accesses: [{ action: "updateName", resource: "proj/alexis:env/test" }],
    kind: "environment",
    name: "Testing",
    description: "- Changed the name from ~~Test~~ to *Testing*",
    shortDescription: "",
    comment: "This is just for testing.",
    member,
    titleVerb: "changed the name of",
    title: "[Alexis Georges](mailto:alexis@example.com) changed the name of [Testing](https://app.launchdarkly.com/settings/projects)",
    target: { _links: { canonical: { href: "/api/v2/projects/alexis/environments/test", type: "application/json" }, site: { href: "/settings#/projects", type: "text/html" } }, name: "Testing", resources: ["proj/alexis:env/test"] },
  });
  const flag = json({
    _links: { parent: { href: "/api/v2/auditlog", type: "application/json" }, self: { href: "/api/v2/auditlog/655402f0c1a2b3c4d5e6f708", type: "application/json" } },
    _id: "655402f0c1a2b3c4d5e6f708",
    date: 1700000000512,
    accesses: [{ action: "updateOn", resource: "proj/default:env/production:flag/new-checkout" }],
    kind: "flag",
    name: "New checkout",
    description: "",
    shortDescription: "",
    member,
    titleVerb: "turned on the flag",
    title: "Alexis Georges turned on the flag [New checkout](https://app.launchdarkly.com/default/production/features/new-checkout) in `Production`",
    target: { name: "New checkout", resources: ["proj/default:env/production:flag/new-checkout"] },
  });
  const mk = (name, body) => ({
    name,
    method: "POST",
    url: base("launchdarkly"),
    headers: [
      ["content-type", "application/json"],
      ["x-ld-signature", hmacHex("sha256", secret, body)],
    ],
    body,
    now: NOW,
    expect: { kind: "event", event_id: JSON.parse(body)._id, event_type: JSON.parse(body).kind },
  });
  const cases = [mk("environment updateName (the docs' sample entry)", env), mk("flag updateOn", flag)];
  for (const c of cases) check(safeEqual(header(c.headers, "x-ld-signature"), hmacHex("sha256", secret, c.body)), `launchdarkly ${c.name}`);
  writeVector({
    provider: "launchdarkly",
    made_by: "docs",
    made_with:
      "built from the documented algorithm (no registry package verifies LaunchDarkly webhooks): https://launchdarkly.com/docs/home/infrastructure/webhooks#sign-a-webhook",
    docs: "https://launchdarkly.com/docs/api/webhooks",
    config: { secrets: [secret], public_key: null, url: null, verify_token: null },
    wrong_config: { secrets: ["ld-webhook-secret-other-3c2b1a"] },
    signs_timestamp: false,
    tolerance_secs: 300,
    notes:
      "X-LD-Signature = hex HMAC-SHA256(secret, raw body), sent only when the webhook is signed. The body is an audit log entry: id _id, type kind (accesses[].action says what changed). date (ms) orders entries; no tolerance is documented.",
    cases,
  });
}

// ---------------------------------------------------------------- terraform-cloud
// X-TFE-Notification-Signature: hex HMAC-SHA512(token, body). A "verification" notification is sent
// when the configuration is created or enabled; it needs only a 2xx.
function terraformCloud() {
  const token = "tfc-notification-token-test-2e3f";
  const run = json({
    payload_version: 1,
    notification_configuration_id: "nc-AeUQ2zfKZzW9TiGZ",
    run_url: "https://app.terraform.io/app/acme-org/my-workspace/runs/run-FwnENkvDnrpyFC7M",
    run_id: "run-FwnENkvDnrpyFC7M",
    run_message: "Add five new queue workers",
    run_created_at: "2023-11-14T22:10:00.000Z",
    run_created_by: "sample-user",
    workspace_id: "ws-XdeUVMWShTesDMME",
    workspace_name: "my-workspace",
    organization_name: "acme-org",
    notifications: [{ message: "Applied", trigger: "run:completed", run_status: "applied", run_updated_at: "2023-11-14T22:13:04.000Z", run_updated_by: "sample-user" }],
  });
  const verification = json({
    payload_version: 1,
    notification_configuration_id: "nc-AeUQ2zfKZzW9TiGZ",
    run_url: "https://app.terraform.io/app/acme-org/my-workspace/runs/run-xxxxxxxxxxxxxxxx",
    run_id: "run-xxxxxxxxxxxxxxxx",
    run_message: "Verification of Webhook Inbox",
    run_created_at: "2023-11-14T22:13:20.000Z",
    run_created_by: "sample-user",
    workspace_id: "ws-XdeUVMWShTesDMME",
    workspace_name: "my-workspace",
    organization_name: "acme-org",
    notifications: [{ message: "Verification of Webhook Inbox", trigger: "verification", run_status: null, run_updated_at: null, run_updated_by: null }],
  });
  const headers = (body) => [
    ["content-type", "application/json"],
    ["user-agent", "TFE-Notification/1.0"],
    ["x-tfe-notification-signature", hmacHex("sha512", token, body)],
  ];
  const cases = [
    {
      name: "run:completed",
      method: "POST",
      url: base("terraform-cloud"),
      headers: headers(run),
      body: run,
      now: NOW,
      expect: { kind: "event", event_id: sha256Hex(run), event_type: "run:completed" },
    },
    {
      name: "verification (sent when the notification configuration is created or enabled)",
      method: "POST",
      url: base("terraform-cloud"),
      headers: headers(verification),
      body: verification,
      now: NOW,
      expect: { kind: "handshake", answer: { status: 200, content_type: "text/plain", body: "" } },
    },
  ];
  for (const c of cases) check(safeEqual(header(c.headers, "x-tfe-notification-signature"), hmacHex("sha512", token, c.body)), `terraform-cloud ${c.name}`);
  writeVector({
    provider: "terraform-cloud",
    made_by: "docs",
    made_with:
      "built from the documented algorithm (no registry package verifies HCP Terraform notifications): https://developer.hashicorp.com/terraform/cloud-docs/api-docs/notification-configurations#notification-authenticity",
    docs: "https://developer.hashicorp.com/terraform/cloud-docs/api-docs/notification-configurations",
    config: { secrets: [token], public_key: null, url: null, verify_token: null },
    wrong_config: { secrets: ["tfc-notification-token-other-7a6b"] },
    signs_timestamp: false,
    tolerance_secs: 300,
    notes:
      "HCP Terraform (Terraform Cloud) generic notifications. X-TFE-Notification-Signature = hex HMAC-SHA512(token, raw body), sent when a token is set. No event id: the id is the hex SHA-256 of the body. Type: notifications[0].trigger (one notification per request in practice). The verification notification (trigger \"verification\") only needs a 2xx to enable the configuration: answered, not stored.",
    cases,
  });
}

// ---------------------------------------------------------------- npm (SDK)
// x-npm-signature: sha256=<hex HMAC-SHA256(secret, body)>.
async function npmHooks() {
  const secret = "npm-hook-secret-test-6b5a";
  const wrong = "npm-hook-secret-other-1c2d";
  const publish = json({
    event: "package:publish",
    name: "@acme/widgets",
    type: "package",
    version: "1.0.0",
    hookOwner: { username: "acme-bot" },
    payload: {
      _id: "@acme/widgets",
      name: "@acme/widgets",
      "dist-tags": { latest: "2.1.0" },
      versions: { "2.1.0": { name: "@acme/widgets", version: "2.1.0", dist: { shasum: "5f0c3ad8a3e0b1b2c4d6e8f0a1b3c5d7e9f1a3b5", tarball: "https://registry.npmjs.org/@acme/widgets/-/widgets-2.1.0.tgz" } } },
      time: { modified: "2023-11-14T22:13:19.512Z", "2.1.0": "2023-11-14T22:13:19.512Z" },
    },
    change: { version: "2.1.0", "dist-tag": "latest" },
    time: 1699999999512,
  });
  const star = json({
    event: "package:star",
    name: "@acme/widgets",
    type: "package",
    version: "1.0.0",
    hookOwner: { username: "acme-bot" },
    payload: { _id: "@acme/widgets", name: "@acme/widgets", "dist-tags": { latest: "2.1.0" } },
    change: { user: "ada" },
    time: 1700000004021,
  });
  const mk = (name, body, now) => ({
    name,
    method: "POST",
    url: base("npm"),
    headers: [
      ["content-type", "application/json"],
      ["x-npm-signature", "sha256=" + hmacHex("sha256", secret, body)],
    ],
    body,
    now,
    expect: { kind: "event", event_id: sha256Hex(body), event_type: JSON.parse(body).event },
  });
  const cases = [mk("package:publish", publish, NOW), mk("package:star", star, NOW + 4)];

  // Prove each case with npm's receiver on loopback: 200 "OK" with the hook emitted, and 400 for a
  // signature made with another secret.
  const makeReceiver = require("npm-hook-receiver");
  const server = makeReceiver({ secret, mount: "/webhooks/npm" });
  const seen = [];
  server.on("hook", (m) => seen.push(m.event));
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const port = server.address().port;
    for (const c of cases) {
      const post = (sig) =>
        fetch(`http://127.0.0.1:${port}/webhooks/npm`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-npm-signature": sig },
          body: c.body,
        });
      const good = await post(header(c.headers, "x-npm-signature"));
      const goodText = await good.text();
      check(good.status === 200 && goodText === '"OK"', `npm ${c.name}: receiver answered ${good.status} ${goodText}`);
      const bad = await post("sha256=" + hmacHex("sha256", wrong, c.body));
      await bad.text();
      check(bad.status === 400, `npm ${c.name}: receiver accepted the wrong secret`);
    }
    check(seen.join(",") === "package:publish,package:star", `npm receiver saw ${seen}`);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
  writeVector({
    provider: "npm",
    made_by: "sdk",
    made_with: `npm-hook-receiver ${pkgVersion("npm-hook-receiver")} (npm; npm Inc.'s sample hook receiver, run on 127.0.0.1): makeReceiver({secret}) answered 200 to each case and 400 to the wrong secret (signature made here)`,
    docs: "https://github.com/npm/registry/blob/main/docs/hooks/hooks-payload.md",
    config: { secrets: [secret], public_key: null, url: null, verify_token: null },
    wrong_config: { secrets: [wrong] },
    signs_timestamp: false,
    tolerance_secs: 300,
    notes:
      "npm registry hooks (npm hook add). x-npm-signature = sha256=<hex HMAC-SHA256(secret, raw body)>. The body's time (ms) is inside the signed bytes but no tolerance is documented, so it is not checked. No event id: the id is the hex SHA-256 of the body (time makes distinct events differ). Type: body event (package:publish, package:star, ...).",
    cases,
  });
}

// ---------------------------------------------------------------- main

gitlab();
bitbucket();
gitea();
await linear();
sentry();
vercel();
circleci();
pagerduty();
buildkite();
heroku();
launchdarkly();
terraformCloud();
await npmHooks();
console.log(`wrote ${written.length} vectors: ${written.join(", ")}`);
