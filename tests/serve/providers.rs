//! Every signature family end to end against a real `inbox serve` (docs/DESIGN.md "Providers: who can send"):
//! each family configured field by field and a named provider of each, signed by `inbox send` as the provider
//! would sign; forgeries refused with nothing stored; handshakes answered with nothing stored; a batched delivery
//! of 50 events stored whole or not at all across a crash in the middle of its write; and a certificate fetched
//! from the provider's own host only.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::common::*;

/// The test-only keys and certificates (tests/data/keys/make.sh).
pub(crate) fn keys() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/keys")
}

pub(crate) fn read(name: &str) -> String {
    std::fs::read_to_string(keys().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The DER inside one of those PEM files.
pub(crate) fn der(name: &str) -> Vec<u8> {
    pem::parse(read(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .into_contents()
}

/// `inbox send` for `source`, with the app's environment (its secrets) and, for an asymmetric scheme, the
/// private key. Answers the HTTP status and body it printed.
fn send(
    app: &App,
    env: &[(&str, &str)],
    source: &str,
    private_key: Option<&str>,
    extra: &[&str],
) -> (u16, Value) {
    let mut cmd = Command::new(INBOX);
    cmd.args(["send", "--config"])
        .arg(app.config_path())
        .args(["--source", source, "--url", &app.url()])
        .args(extra)
        .envs(env.iter().copied())
        .env("NO_COLOR", "1");
    if let Some(key) = private_key {
        cmd.arg("--private-key").arg(keys().join(key));
    }
    let out = cmd.output().expect("run inbox send");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let Some(line) = stdout.lines().find(|l| l.starts_with("HTTP ")) else {
        // Refused before sending (a key that cannot sign for this scheme): status 0, and why.
        return (
            0,
            Value::String(String::from_utf8_lossy(&out.stderr).into_owned()),
        );
    };
    let (status, body) = line["HTTP ".len()..].split_once(' ').unwrap_or((&line[5..], ""));
    (
        status.parse().expect("a status"),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

pub(crate) const HANDLER: &str = "handler = { kind = \"log\" }";

/// A source of each family configured field by field, and a named provider of each family.
fn config() -> String {
    let (ed, p256, rsa) = (read("ed25519.pub"), read("p256.pub"), read("signer.pub"));
    format!(
        r#"
[sources.fam-hmac]
scheme = "hmac"
secrets = ["env:HMAC_SECRET"]
signature_header = "x-acme-signature"
format = "t={{timestamp}},v1={{signature}}"
signed = "{{timestamp}}.{{body}}"
timestamp = "signature"
id = "json:/id"
type = "json:/type"
{HANDLER}

[sources.fam-token]
scheme = "token"
secrets = ["env:TOKEN_SECRET"]
token = "header:x-hook-token"
id = "json:/id"
{HANDLER}

[sources.fam-ed25519]
scheme = "ed25519"
public_key = '''{ed}'''
signature_header = "x-signature-ed25519"
timestamp = "header:x-signature-timestamp"
signed = "{{timestamp}}{{body}}"
id = "json:/id"
{HANDLER}

[sources.fam-ecdsa]
scheme = "ecdsa"
public_key = '''{p256}'''
signature_header = "x-signature"
timestamp = "header:x-timestamp"
signed = "{{timestamp}}{{body}}"
id = "json:/id"
{HANDLER}

[sources.fam-rsa]
scheme = "rsa"
public_key = '''{rsa}'''
signature_header = "x-signature"
id = "json:/id"
{HANDLER}

[sources.fam-jwt]
scheme = "jwt"
secrets = ["env:JWT_SECRET"]
signature_header = "x-webhook-signature"
body_hash_claim = "sha256"
id = "json:/id"
{HANDLER}

[sources.discord]
scheme = "discord"
public_key = '''{ed}'''
{HANDLER}

[sources.sendgrid]
scheme = "sendgrid"
public_key = '''{p256}'''
{HANDLER}

[sources.wise]
scheme = "wise"
public_key = '''{rsa}'''
{HANDLER}

[sources.paddle]
scheme = "paddle"
secrets = ["env:PADDLE_SECRET"]
{HANDLER}

[sources.chargebee]
scheme = "chargebee"
secrets = ["env:CHARGEBEE_SECRET"]
{HANDLER}

[sources.vonage]
scheme = "vonage"
secrets = ["env:VONAGE_SECRET"]
{HANDLER}

[sources.twitch]
scheme = "twitch"
secrets = ["env:TWITCH_SECRET"]
{HANDLER}

[sources.meta]
scheme = "meta"
secrets = ["env:META_SECRET"]
verify_token = "env:META_VERIFY"
{HANDLER}

[sources.xero]
scheme = "xero"
secrets = ["env:XERO_KEY"]
{HANDLER}

[sources.batch]
scheme = "hmac"
secrets = ["env:BATCH_SECRET"]
signature_header = "x-batch-signature"
batch = "/events"
id = "json:/id"
type = "json:/type"
{HANDLER}
"#
    )
}

const ENV: &[(&str, &str)] = &[
    ("HMAC_SECRET", "hmac-test-secret"),
    ("TOKEN_SECRET", "token-test-secret"),
    ("JWT_SECRET", "jwt-test-secret"),
    ("PADDLE_SECRET", "pdl_ntfset_01test_secret"),
    ("CHARGEBEE_SECRET", "inbox:chargebee-test-password"),
    ("VONAGE_SECRET", "vonage-signature-secret"),
    ("TWITCH_SECRET", "twitch-test-secret-0123"),
    ("META_SECRET", "meta-app-secret"),
    ("META_VERIFY", "meta-verify-token"),
    ("BATCH_SECRET", "batch-test-secret"),
    ("XERO_KEY", "xero-webhooks-key"),
];

/// GIVEN a source of every family (hmac, token, ed25519, ecdsa, rsa, jwt) configured field by field, and a named
/// provider of each family (discord, sendgrid, wise, paddle, chargebee, vonage, and twitch's own signing)
/// WHEN `inbox send` signs a delivery for each as the provider does, and a forgery is posted to each
/// THEN every signed delivery is accepted and stored once under its id, and every forgery is answered 401 with
/// nothing stored.
#[tokio::test(flavor = "multi_thread")]
async fn every_family_is_verified_end_to_end_and_forgeries_are_refused() {
    let app = spawn_app(&config(), ENV);
    let cases: &[(&str, Option<&str>)] = &[
        ("fam-hmac", None),
        ("fam-token", None),
        ("fam-ed25519", Some("ed25519.key")),
        ("fam-ecdsa", Some("p256.key")),
        ("fam-rsa", Some("signer.key")),
        ("fam-jwt", None),
        ("discord", Some("ed25519.key")),
        ("sendgrid", Some("p256.key")),
        ("wise", Some("signer.key")),
        ("paddle", None),
        ("chargebee", None),
        ("vonage", None),
        ("twitch", None),
    ];
    for (source, key) in cases {
        let id = rand_id(source);
        let (status, answer) = send(&app, ENV, source, *key, &["--event-id", &id]);
        assert_eq!(status, 200, "{source}: {answer}\n{}", app.log());
        // One event's answer names it; a batch's lists its items; Discord requires its own answer (a deferred
        // response), so the id is the one sent.
        let stored = answer["event_id"]
            .as_str()
            .or(answer["events"][0]["event_id"].as_str())
            .unwrap_or(&id)
            .to_owned();
        if *source == "discord" {
            assert_eq!(answer, json!({"type": 5}), "discord's required answer");
        } else {
            let status = answer["status"]
                .as_str()
                .or(answer["events"][0]["status"].as_str());
            assert_eq!(status, Some("accepted"), "{source}: {answer}");
        }
        assert!(
            app.event(source, &stored).is_some(),
            "{source}: {stored} is not stored"
        );
        eprintln!("{source}: signed by inbox send, accepted as {stored}");
    }
    // Forgeries: the right headers with a signature no key made, or a key from elsewhere.
    let client = client();
    let before = app.events().len();
    // Fresh timestamps, so each is refused for its signature; one stale one, refused for its time.
    let now = now_unix().to_string();
    let (fresh_pairs, fresh_paddle) = (format!("t={now},v1=00"), format!("ts={now};h1=00"));
    let forged: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("fam-hmac", vec![("x-acme-signature", fresh_pairs.as_str())]),
        ("fam-hmac", vec![("x-acme-signature", "t=1,v1=00")]),
        ("fam-token", vec![("x-hook-token", "not-the-token")]),
        (
            "fam-ed25519",
            vec![
                ("x-signature-ed25519", "00"),
                ("x-signature-timestamp", now.as_str()),
            ],
        ),
        (
            "fam-ecdsa",
            vec![("x-signature", "AAAA"), ("x-timestamp", now.as_str())],
        ),
        ("fam-rsa", vec![("x-signature", "AAAA")]),
        ("fam-jwt", vec![("x-webhook-signature", "e30.e30.AAAA")]),
        ("paddle", vec![("paddle-signature", fresh_paddle.as_str())]),
        ("chargebee", vec![("authorization", "Basic aW5ib3g6d3Jvbmc=")]),
    ];
    for (source, headers) in &forged {
        let headers: Vec<_> = headers
            .iter()
            .map(|(n, v)| {
                (
                    n.parse().expect("a header name"),
                    v.parse().expect("a header value"),
                )
            })
            .collect();
        let body = json!({"id": rand_id("forged"), "event_id": "forged", "type": "x"}).to_string();
        let answer = post(&client, &app.webhook_url(source), body, &headers).await;
        answer.assert_error(401, source);
        eprintln!("{source}: forged -> {} {}", answer.status, answer.text);
    }
    // A delivery signed with another key of the same kind.
    let (status, answer) = send(&app, ENV, "fam-rsa", Some("untrusted.key"), &[]);
    assert_eq!(status, 401, "fam-rsa with another key: {answer}");
    let (status, answer) = send(&app, ENV, "fam-ed25519", Some("p256.key"), &[]);
    assert_eq!(status, 0, "fam-ed25519 signed with a P-256 key: {answer}");
    assert_eq!(app.events().len(), before, "a forgery stored something");
    // No secret, signature or key in the log.
    let log = app.log();
    for (_, secret) in ENV {
        assert!(!log.contains(secret), "the log holds a secret");
    }
    for needle in [
        "v1=00",
        "h1=00",
        "not-the-token",
        "BEGIN PUBLIC KEY",
        "h1=00",
        "e30.e30",
        "aW5ib3g6d3Jvbmc=",
        "e30.e30",
    ] {
        assert!(!log.contains(needle), "the log holds {needle:?}");
    }
}

/// GIVEN a Meta source (verify token configured) and a source whose provider sends no GET
/// WHEN Meta's subscription GET arrives with the right token, then with a wrong one, and a GET reaches the other
/// THEN the first is answered with its challenge as text, the second 401, the third 405; nothing is stored.
#[tokio::test(flavor = "multi_thread")]
async fn get_handshakes_are_answered_only_where_the_provider_sends_them_and_store_nothing() {
    let app = spawn_app(&config(), ENV);
    let client = client();
    let url = app.webhook_url("meta");
    let ok = get(
        &client,
        &format!("{url}?hub.mode=subscribe&hub.verify_token=meta-verify-token&hub.challenge=1158201444"),
    )
    .await;
    assert_eq!(
        (ok.status, ok.text.as_str()),
        (200, "1158201444"),
        "the challenge echo"
    );
    let wrong = get(
        &client,
        &format!("{url}?hub.mode=subscribe&hub.verify_token=guess&hub.challenge=1"),
    )
    .await;
    wrong.assert_error(401, "a wrong verify token");
    let other = get(&client, &app.webhook_url("paddle")).await;
    other.assert_error(405, "GET on a source whose provider sends none");
    assert!(app.events().is_empty(), "a handshake stored something");
    eprintln!(
        "meta GET: {} {:?}; wrong token: {}; paddle GET: {}",
        ok.status, ok.text, wrong.status, other.status
    );
}

/// GIVEN a Xero source and a Vonage source
/// WHEN Xero's intent-to-receive check sends a wrong signature, and Vonage sends its documented unsigned callback
/// THEN Xero gets a 401 with no body (its check wants exactly that) and Vonage a 503 (it sends it again, signed);
/// nothing is stored.
#[tokio::test(flavor = "multi_thread")]
async fn providers_get_the_refusals_they_document() {
    let app = spawn_app(&config(), ENV);
    let client = client();
    let xero = post(
        &client,
        &app.webhook_url("xero"),
        r#"{"events":[],"firstEventSequence":0,"lastEventSequence":0,"entropy":"S0m3r4Nd0mt3xt"}"#,
        &[(
            "x-xero-signature".parse().expect("name"),
            "bm90IGEgc2lnbmF0dXJl".parse().expect("value"),
        )],
    )
    .await;
    assert_eq!(
        (xero.status, xero.text.as_str()),
        (401, ""),
        "Xero's refusal has no body"
    );
    let vonage = post(
        &client,
        &app.webhook_url("vonage"),
        r#"{"message_uuid":"m-1","status":"delivered"}"#,
        &[],
    )
    .await;
    assert_eq!(
        vonage.status, 503,
        "an unsigned Vonage callback is asked for again: {}",
        vonage.text
    );
    assert!(app.events().is_empty(), "a refusal stored something");
    eprintln!(
        "xero wrong signature: {} {:?}; vonage unsigned: {}",
        xero.status, xero.text, vonage.status
    );
}

fn batch_body(ids: &[String]) -> String {
    let events: Vec<Value> = ids
        .iter()
        .map(|id| json!({"id": id, "type": "thing.done", "n": id.len()}))
        .collect();
    json!({"events": events}).to_string()
}

/// POSTs a batch to the `batch` source, signed like `inbox send` would; answers (status, json).
async fn post_batch(app: &App, body: &str) -> (u16, Value) {
    let (status, answer) = send(app, ENV, "batch", None, &["--body", body]);
    (status, answer)
}

/// GIVEN a source whose deliveries carry 50 events each
/// WHEN the server crashes (aborts, as abruptly as SIGKILL) after writing 25 of a batch's items, and restarts
/// THEN none of that batch is stored (one transaction); the sender's retry stores all 50 and answers each; a retry
/// of that stores nothing more; and a batch holding the 50 and 10 new stores only the 10.
#[tokio::test(flavor = "multi_thread")]
async fn a_batch_is_stored_whole_or_not_at_all_across_a_crash_and_a_retry_completes_it() {
    let mut env = ENV.to_vec();
    env.push(("INBOX_FAILPOINT", "batch_item_written@25"));
    let mut app = spawn_app(&config(), &env);
    let run = rand_id("batch");
    let ids: Vec<String> = (0..50).map(|i| format!("{run}-{i:02}")).collect();
    let body = batch_body(&ids);

    let mut cmd = Command::new(INBOX);
    let out = cmd
        .args(["send", "--config"])
        .arg(app.config_path())
        .args(["--source", "batch", "--url", &app.url(), "--body", &body])
        .envs(ENV.iter().copied())
        .output()
        .expect("run inbox send");
    assert!(
        !out.status.success(),
        "the crashed server answered the batch: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let mut exited = false;
    wait_until(
        std::time::Duration::from_secs(10),
        "the server to abort mid-batch",
        || {
            exited = app.has_exited();
            exited
        },
    );
    app.set_env("INBOX_FAILPOINT", None);
    app.restart();
    assert_eq!(app.events().len(), 0, "part of a batch outlived the crash");

    let (status, answer) = post_batch(&app, &body).await;
    assert_eq!(status, 200, "{answer}");
    let outcomes = answer["events"].as_array().expect("each item's outcome");
    assert_eq!(outcomes.len(), 50);
    assert!(outcomes.iter().all(|o| o["status"] == "accepted"), "{answer}");
    assert_eq!(app.events().len(), 50);

    let (_, again) = post_batch(&app, &body).await;
    let again = again["events"].as_array().expect("outcomes").clone();
    assert!(
        again.iter().all(|o| o["status"] == "duplicate"),
        "a retried batch ran again: {again:?}"
    );

    // The same ids, one item's bytes changed: still duplicates, the first payload stands, and it is counted.
    let mut changed: Value = serde_json::from_str(&body).expect("the batch");
    changed["events"][0]["n"] = json!(999);
    let (_, redone) = post_batch(&app, &changed.to_string()).await;
    let redone = redone["events"].as_array().expect("outcomes").clone();
    assert!(redone.iter().all(|o| o["status"] == "duplicate"), "{redone:?}");
    assert_one_mismatch(
        &app,
        "batch",
        "one item sent again with other bytes is one mismatch",
    )
    .await;

    let mut more = ids.clone();
    more.extend((50..60).map(|i| format!("{run}-{i:02}")));
    let (_, mixed) = post_batch(&app, &batch_body(&more)).await;
    let mixed = mixed["events"].as_array().expect("outcomes").clone();
    let accepted = mixed.iter().filter(|o| o["status"] == "accepted").count();
    assert_eq!(
        (accepted, mixed.len()),
        (10, 60),
        "only the missing items are stored"
    );
    app.wait_all_completed(
        60,
        std::time::Duration::from_secs(30),
        "every item of the batches is COMPLETED",
    );
    let mut stored: Vec<String> = app.event_keys().into_iter().map(|(_, id)| id).collect();
    stored.sort();
    assert_eq!(stored, more, "each item stored once under its own id");
    eprintln!("batch of 50: crash after 25 items -> 0 stored; retry -> 50 accepted; again -> 50 duplicates; 60 with 10 new -> 10 accepted");
}

/// An SNS message signed like SNS signs (SignatureVersion 2: SHA256withRSA over `Key\nvalue\n` in key order),
/// with the certificate at `cert_url`.
pub(crate) fn sns_message(
    kind: &str,
    topic: &str,
    id: &str,
    cert_url: &str,
    key: &str,
    extra: &[(&str, &str)],
) -> String {
    let mut fields: Vec<(&str, String)> = vec![
        ("Message", format!("{{\"order\":\"{id}\"}}")),
        ("MessageId", id.to_owned()),
        ("Timestamp", "2026-12-02T03:00:00.000Z".to_owned()),
        ("TopicArn", topic.to_owned()),
        ("Type", kind.to_owned()),
    ];
    fields.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    fields.sort_by(|a, b| a.0.cmp(b.0));
    let mut signed = String::new();
    for (k, v) in &fields {
        signed.push_str(&format!("{k}\n{v}\n"));
    }
    let der = der(key);
    use base64::Engine as _;
    let pair = aws_lc_rs::signature::RsaKeyPair::from_pkcs8(&der).expect("an RSA key");
    let mut sig = vec![0; pair.public_modulus_len()];
    pair.sign(
        &aws_lc_rs::signature::RSA_PKCS1_SHA256,
        &aws_lc_rs::rand::SystemRandom::new(),
        signed.as_bytes(),
        &mut sig,
    )
    .expect("signed");
    let mut body = serde_json::Map::new();
    for (k, v) in fields {
        body.insert(k.to_owned(), Value::String(v));
    }
    body.insert("SignatureVersion".into(), "2".into());
    body.insert(
        "Signature".into(),
        base64::engine::general_purpose::STANDARD.encode(sig).into(),
    );
    body.insert("SigningCertURL".into(), cert_url.into());
    Value::Object(body).to_string()
}

/// Where the test key host serves a signing certificate that does not chain to a trusted root, in SNS's own path.
const UNTRUSTED_PATH: &str = "/SimpleNotificationService-0bad0bad000000000000000000000002.pem";
/// Where it serves a certificate for the signer's own key, from the trusted root, but issued to another name.
const OTHER_NAME_PATH: &str = "/SimpleNotificationService-0bad0bad000000000000000000000003.pem";

/// GIVEN an AWS SNS source, a local HTTPS server answering as `sns.us-east-1.amazonaws.com` with a certificate from
/// a test-only root (INBOX_TRUST_ROOTS; INBOX_CONNECT_TO points the host at it), serving SNS's signing certificate
/// THEN a signed notification fetches that certificate once and is accepted, and a second one uses the cached
/// key; a message naming a certificate on any other host (an S3 bucket named `sns` among them) or at any other
/// path of SNS's host is refused (401) with nothing fetched; a certificate on SNS's host that does not chain to
/// a trusted root, or a host that cannot be reached, answers 503, and one that chains to it but is issued to a
/// name other than SNS's is refused 401 (a forgery); a SubscriptionConfirmation is confirmed by fetching its SubscribeURL and stores nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_certificate_is_fetched_only_from_the_providers_host_and_checked_to_a_trusted_root() {
    let cert_path = "/SimpleNotificationService-7e57ce27000000000000000000000001.pem";
    let confirm_path =
        "/?Action=ConfirmSubscription&TopicArn=arn:aws:sns:us-east-1:123456789012:orders&Token=t0k3n";
    let routes = std::collections::HashMap::from([
        (cert_path.to_owned(), read("sns-signer.pem").into_bytes()),
        (UNTRUSTED_PATH.to_owned(), read("untrusted.pem").into_bytes()),
        (OTHER_NAME_PATH.to_owned(), read("other-name.pem").into_bytes()),
        (
            confirm_path.to_owned(),
            b"<ConfirmSubscriptionResponse/>".to_vec(),
        ),
    ]);
    let host =
        testkit::https::HttpsServer::start(read("host.pem").as_bytes(), read("host.key").as_bytes(), routes)
            .await;
    let topic = "arn:aws:sns:us-east-1:123456789012:orders";
    let config = format!("[sources.sns]\nscheme = \"aws-sns\"\nsecrets = [\"env:SNS_TOPIC\"]\n{HANDLER}\n");
    let roots = keys().join("root.pem");
    // The bucket hosts point at the test host too: were they admitted, their fetch would show in its hits.
    let connect_to = format!(
        "sns.us-east-1.amazonaws.com={0},sns.eu-west-1.amazonaws.com=127.0.0.1:1,sns.s3.amazonaws.com={0},\
         sns.s3-us-west-2.amazonaws.com={0}",
        host.addr()
    );
    let app = spawn_app(
        &config,
        &[
            ("SNS_TOPIC", topic),
            ("INBOX_TRUST_ROOTS", roots.to_str().expect("a UTF-8 path")),
            ("INBOX_CONNECT_TO", &connect_to),
        ],
    );
    let client = client();
    let url = app.webhook_url("sns");
    let good_cert = format!("https://sns.us-east-1.amazonaws.com{cert_path}");
    let sns = |body: String| async {
        let headers = [(
            "x-amz-sns-message-type".parse().expect("name"),
            "Notification".parse().expect("value"),
        )];
        post(&client, &url, body, &headers).await
    };

    let first = sns(sns_message(
        "Notification",
        topic,
        "m-1",
        &good_cert,
        "signer.key",
        &[("Subject", "s")],
    ))
    .await;
    assert_eq!(
        (first.status, first.json["status"].as_str()),
        (200, Some("accepted")),
        "{}",
        first.text
    );
    let second = sns(sns_message(
        "Notification",
        topic,
        "m-2",
        &good_cert,
        "signer.key",
        &[],
    ))
    .await;
    assert_eq!(second.status, 200, "{}", second.text);
    assert_eq!(
        host.hits(),
        vec![cert_path.to_owned()],
        "fetched once, then cached"
    );

    let off_path = format!("{good_cert}?n=1");
    for elsewhere in [
        "https://evil.example/SimpleNotificationService-test.pem",
        "https://sns.us-east-1.amazonaws.com.evil.example/x.pem",
        "http://sns.us-east-1.amazonaws.com/x.pem",
        // The endpoints of an S3 bucket named `sns`, which anyone may own.
        "https://sns.s3.amazonaws.com/SimpleNotificationService-7e57ce27000000000000000000000001.pem",
        "https://sns.s3-us-west-2.amazonaws.com/SimpleNotificationService-7e57ce27000000000000000000000001.pem",
        // SNS's own host, but not its certificate's path.
        &off_path,
        "https://sns.us-east-1.amazonaws.com/x.pem",
    ] {
        let answer = sns(sns_message(
            "Notification",
            topic,
            "m-evil",
            elsewhere,
            "signer.key",
            &[],
        ))
        .await;
        answer.assert_error(401, elsewhere);
        eprintln!("certificate at {elsewhere}: {} {}", answer.status, answer.text);
    }
    assert_eq!(
        host.hits().len(),
        1,
        "a certificate named on another host was fetched"
    );

    let untrusted = format!("https://sns.us-east-1.amazonaws.com{UNTRUSTED_PATH}");
    let answer = sns(sns_message(
        "Notification",
        topic,
        "m-untrusted",
        &untrusted,
        "untrusted.key",
        &[],
    ))
    .await;
    answer.assert_error(503, "a certificate from an untrusted root");
    // The signer's own key, from the trusted root, but not issued to SNS's name: not SNS's certificate, whoever
    // served it. A forgery, refused like one (401), not a key that could not be had (503).
    let other_name = sns(sns_message(
        "Notification",
        topic,
        "m-other-name",
        &format!("https://sns.us-east-1.amazonaws.com{OTHER_NAME_PATH}"),
        "signer.key",
        &[],
    ))
    .await;
    other_name.assert_error(401, "a trusted certificate issued to another name");
    assert!(
        host.hits().contains(&OTHER_NAME_PATH.to_owned()),
        "the certificate was fetched and its name checked"
    );
    let unreachable =
        "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-0000000000000000000000000000dead.pem";
    let down = sns(sns_message(
        "Notification",
        topic,
        "m-down",
        unreachable,
        "signer.key",
        &[],
    ))
    .await;
    down.assert_error(503, "the provider's key host cannot be reached");
    assert!(down.text.contains("key_unavailable"), "{}", down.text);
    eprintln!(
        "untrusted root: {} {}; host down: {} {}",
        answer.status, answer.text, down.status, down.text
    );

    let subscribe = format!("https://sns.us-east-1.amazonaws.com{confirm_path}");
    let confirmation = sns_message(
        "SubscriptionConfirmation",
        topic,
        "m-sub",
        &good_cert,
        "signer.key",
        &[("SubscribeURL", &subscribe), ("Token", "t0k3n")],
    );
    let answer = sns(confirmation).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert!(
        host.hits().contains(&confirm_path.to_owned()),
        "the subscription was not confirmed: {:?}",
        host.hits()
    );

    let stored: Vec<String> = app.event_keys().into_iter().map(|(_, id)| id).collect();
    assert_eq!(
        stored.len(),
        2,
        "only the two good notifications are stored: {stored:?}"
    );
    let log = app.log();
    assert!(
        !log.contains("BEGIN CERTIFICATE") && !log.contains(topic),
        "the log holds a key or a topic"
    );
}

/// The test P-256 key as a JWK with `kid`.
pub(crate) fn p256_jwk(kid: &str) -> Value {
    use base64::Engine as _;
    let der = der("p256.pub");
    let point = &der[der.len() - 64..];
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    json!({"kty": "EC", "crv": "P-256", "kid": kid, "x": b64(&point[..32]), "y": b64(&point[32..]), "alg": "ES256", "use": "sig"})
}

/// The key id the test key host serves the test P-256 key under: a UUID, as Plaid's key ids are.
pub(crate) const PLAID_KID: &str = "bfbd5111-8e33-4643-8ced-b2e642a72f3c";

/// A local HTTPS server answering as production.plaid.com, whose `/webhook_verification_key/get` returns the test
/// P-256 key under [`PLAID_KID`].
async fn plaid_key_host() -> testkit::https::HttpsServer {
    let routes = std::collections::HashMap::from([(
        "/webhook_verification_key/get".to_owned(),
        json!({"key": p256_jwk(PLAID_KID), "request_id": "r1"})
            .to_string()
            .into_bytes(),
    )]);
    testkit::https::HttpsServer::start(read("host.pem").as_bytes(), read("host.key").as_bytes(), routes).await
}

/// `inbox serve` on `config`, the Plaid API credentials in `PLAID_API` and production.plaid.com reached at `host`.
fn spawn_plaid_app(config: &str, host: &testkit::https::HttpsServer) -> App {
    let roots = keys().join("root.pem");
    let connect_to = format!("production.plaid.com={}", host.addr());
    spawn_app(
        config,
        &[
            ("PLAID_API", "client-test-id:plaid-test-secret"),
            ("INBOX_TRUST_ROOTS", roots.to_str().expect("a UTF-8 path")),
            ("INBOX_CONNECT_TO", &connect_to),
        ],
    )
}

/// A `Plaid-Verification` token for `body` as Plaid makes one: an ES256 JWT under the test P-256 key, naming
/// `kid`, whose claims are `iat` and the body's hex SHA-256.
pub(crate) fn plaid_token(kid: &str, body: &str, iat: i64) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let claims =
        json!({"iat": iat, "request_body_sha256": hex::encode(sha2::Sha256::digest(body.as_bytes()))});
    let header = json!({"alg": "ES256", "kid": kid, "typ": "JWT"});
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let signing = format!("{}.{}", b64(&header), b64(&claims));
    let der = der("p256.key");
    let pair = aws_lc_rs::signature::EcdsaKeyPair::from_pkcs8(
        &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        &der,
    )
    .expect("a P-256 key");
    let sig = pair
        .sign(&aws_lc_rs::rand::SystemRandom::new(), signing.as_bytes())
        .expect("signed");
    format!(
        "{signing}.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sig.as_ref())
    )
}

/// The same ES256 token with its signature `(r, s)` mirrored to `(r, n − s)`, n the order of P-256: a second
/// signature of the same bytes that verifies as well, which anyone who saw the token can make without the key.
fn mirrored_es256(token: &str) -> String {
    use base64::Engine as _;
    const N: &str = "FFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551";
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let (signed, signature) = token.rsplit_once('.').expect("a JWS");
    let mut signature = engine.decode(signature).expect("base64url");
    assert_eq!(signature.len(), 64, "ES256 is r || s");
    let n = hex::decode(N).expect("hex");
    let mut borrow = 0i16;
    for i in (0..32).rev() {
        let mut d = i16::from(n[i]) - i16::from(signature[32 + i]) - borrow;
        borrow = i16::from(d < 0);
        if d < 0 {
            d += 256;
        }
        signature[32 + i] = d as u8;
    }
    assert_eq!(borrow, 0, "s is below n");
    format!("{signed}.{}", engine.encode(&signature))
}

/// GIVEN a Plaid source (its API credentials as its secret), and a local HTTPS server answering as
/// production.plaid.com whose `/webhook_verification_key/get` returns the key for the token's `kid`
/// WHEN Plaid-signed webhooks arrive (an ES256 JWT binding the body's SHA-256), one with a changed body
/// THEN the key is asked for once by POST, with the credentials and the key id, and the good one is accepted; the
/// changed one is refused 401, and so is one naming a key id of no Plaid key's shape, with nothing asked for;
/// nothing else is stored.
#[tokio::test(flavor = "multi_thread")]
async fn a_plaid_key_is_asked_for_by_post_with_the_sources_credentials() {
    let host = plaid_key_host().await;
    let config = format!("[sources.plaid]\nscheme = \"plaid\"\nsecrets = [\"env:PLAID_API\"]\n{HANDLER}\n");
    let app = spawn_plaid_app(&config, &host);
    let body = json!({"webhook_type": "TRANSACTIONS", "webhook_code": "SYNC_UPDATES_AVAILABLE", "item_id": "item-1"}).to_string();
    let token = plaid_token(PLAID_KID, &body, now_unix());
    let client = client();
    let headers = [(
        "plaid-verification".parse().expect("name"),
        token.parse().expect("value"),
    )];
    let ok = post(&client, &app.webhook_url("plaid"), body.clone(), &headers).await;
    assert_eq!(
        (ok.status, ok.json["status"].as_str()),
        (200, Some("accepted")),
        "{}",
        ok.text
    );
    let changed = body.replace("item-1", "item-2");
    let refused = post(&client, &app.webhook_url("plaid"), changed, &headers).await;
    refused.assert_error(401, "a body the token does not bind");
    // A key id Plaid's keys never have (not a UUID): refused, and the credentials are not sent for it.
    let invented = [(
        "plaid-verification".parse().expect("name"),
        plaid_token("plaid-k1", &body, now_unix()).parse().expect("value"),
    )];
    let answer = post(&client, &app.webhook_url("plaid"), body.clone(), &invented).await;
    answer.assert_error(401, "a kid of no Plaid key's shape");
    assert_eq!(
        host.hits(),
        vec!["/webhook_verification_key/get".to_owned()],
        "the key asked for once"
    );
    assert_eq!(app.events().len(), 1);
    assert!(
        !app.log().contains("plaid-test-secret"),
        "the log holds the API secret"
    );
    eprintln!(
        "plaid: key asked for by POST once; signed -> {}; changed body -> {} {}",
        ok.status, refused.status, refused.text
    );
}

/// Posts `body` to the Plaid source under `token`.
async fn post_plaid(client: &reqwest::Client, app: &App, body: &str, token: &str) -> Answer {
    let headers = [(
        "plaid-verification".parse().expect("name"),
        token.parse().expect("value"),
    )];
    post(client, &app.webhook_url("plaid"), body.to_owned(), &headers).await
}

/// GIVEN a Plaid source that forwards to a sink, its key host faked
/// WHEN a Plaid delivery arrives, then the same token again, then the token with its ES256 signature mirrored
/// (`s` → `n − s`: it verifies too, and anyone who saw the token, in a proxy's log say, can make it within the 5
/// minutes of `iat`), then the same body under a token issued a second earlier
/// THEN the first is accepted and the same and the mirrored token are answered as its duplicates; the other token
/// is an event of its own (Plaid repeats bodies byte for byte: the signed `iat` tells its deliveries apart); the
/// handler ran once for each event.
#[tokio::test(flavor = "multi_thread")]
async fn a_plaid_token_with_its_signature_mirrored_is_the_same_event() {
    let sink = Sink::start(&[], 200).await;
    let host = plaid_key_host().await;
    let config = format!(
        "[sources.plaid]\nscheme = \"plaid\"\nsecrets = [\"env:PLAID_API\"]\n\
         handler = {{ kind = \"forward\", url = \"{}/plaid\", timeout = \"5s\" }}\n",
        sink.url()
    );
    let app = spawn_plaid_app(&config, &host);
    let body = json!({"webhook_type": "TRANSACTIONS", "webhook_code": "SYNC_UPDATES_AVAILABLE", "item_id": "item-1"})
        .to_string();
    let now = now_unix();
    let token = plaid_token(PLAID_KID, &body, now);
    let mirrored = mirrored_es256(&token);
    assert_ne!(mirrored, token);
    let client = client();

    let first = post_plaid(&client, &app, &body, &token).await;
    assert_eq!(
        (first.status, first.json["status"].as_str()),
        (200, Some("accepted")),
        "{}",
        first.text
    );
    let id = first.json["event_id"].as_str().expect("an event id").to_owned();
    for (what, token) in [("the same token", &token), ("the mirrored token", &mirrored)] {
        let again = post_plaid(&client, &app, &body, token).await;
        assert_eq!(
            (
                again.status,
                again.json["status"].as_str(),
                again.json["event_id"].as_str()
            ),
            (200, Some("duplicate"), Some(id.as_str())),
            "{what}: {}",
            again.text
        );
    }
    let later = post_plaid(&client, &app, &body, &plaid_token(PLAID_KID, &body, now - 1)).await;
    assert_eq!(
        (later.status, later.json["status"].as_str()),
        (200, Some("accepted")),
        "{}",
        later.text
    );
    let other = later.json["event_id"].as_str().expect("an event id").to_owned();
    assert_ne!(other, id, "another iat is another delivery");

    app.wait_all_completed(
        2,
        std::time::Duration::from_secs(30),
        "both Plaid events are handled",
    );
    let mut ran: Vec<String> = sink
        .requests()
        .iter()
        .map(|r| r.header("x-inbox-event-id").unwrap_or_default())
        .collect();
    ran.sort();
    let mut expected = vec![id, other];
    expected.sort();
    assert_eq!(
        ran, expected,
        "the handler ran once for each event, and only for them"
    );
}

/// A source of `scheme` under the name `scheme`, its secret in `SECRET`, forwarding to `sink`.
fn forwarding_source(scheme: &str, sink: &Sink) -> String {
    format!(
        "[sources.{scheme}]\nscheme = \"{scheme}\"\nsecrets = [\"env:SECRET\"]\n\
         handler = {{ kind = \"forward\", url = \"{}/{scheme}\", timeout = \"5s\" }}\n",
        sink.url()
    )
}

/// `body` (a notification as the provider's documentation shows it) signed as the provider signs it for `source`
/// (`inbox send`'s signer): the body to post, with the signature where the provider puts it.
fn signed_delivery(scheme: &str, secret: &str, body: &[u8], content_type: &str) -> Vec<u8> {
    use inbox_core::schemes::{Credentials, Identity, Request, Scheme, Signer};
    let scheme = Scheme::named(scheme).expect("a provider");
    let key = scheme.key_from_secret(secret).expect("a usable secret");
    let uri = http::Uri::from_static("/");
    let mut headers = http::HeaderMap::new();
    headers.insert("content-type", content_type.parse().expect("a content type"));
    let identity = Identity {
        event_id: String::new(),
        event_type: None,
    };
    let signed = scheme
        .sign_request(
            &Signer::Secret(key),
            &Credentials::default(),
            &Request::post(&uri, &headers, body),
            &identity,
            now_unix(),
        )
        .expect("signed");
    assert!(
        signed.headers.iter().all(|(name, _)| name == "content-type"),
        "the signature is in the body"
    );
    signed.body.expect("a provider that signs inside the body")
}

/// Posts `body` as `content_type` to `source`.
async fn post_typed(
    client: &reqwest::Client,
    app: &App,
    source: &str,
    content_type: &str,
    body: &[u8],
) -> Answer {
    let resp = client
        .post(app.webhook_url(source))
        .header("content-type", content_type)
        .body(body.to_vec())
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {source}: {e}"));
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    let json = serde_json::from_str(&text).unwrap_or(Value::Null);
    Answer { status, json, text }
}

/// Posts `original` to `source`, then each variant: the original is stored as one event, every variant (the
/// same delivery, or one a replayer made from it without the key) is answered 200 and stores nothing more (where
/// the provider takes the receiver's JSON answer: `accepted`, then `duplicate` of that event), and the handler,
/// forwarding to `sink`, runs once, for that event.
async fn variants_are_one_event(
    app: &App,
    sink: &Sink,
    source: &str,
    content_type: &str,
    original: &[u8],
    variants: &[(&str, Vec<u8>)],
) {
    let client = client();
    let first = post_typed(&client, app, source, content_type, original).await;
    assert_eq!(first.status, 200, "{}", first.text);
    let stored = app.event_keys();
    assert_eq!(stored.len(), 1, "the original is one event: {stored:?}");
    let id = stored[0].1.clone();
    if first.json.is_object() {
        assert_eq!(
            (first.json["status"].as_str(), first.json["event_id"].as_str()),
            (Some("accepted"), Some(id.as_str())),
            "{}",
            first.text
        );
    }
    for (what, body) in variants {
        let again = post_typed(&client, app, source, content_type, body).await;
        assert_eq!(again.status, 200, "{what}: {}", again.text);
        if again.json.is_object() {
            assert_eq!(
                (again.json["status"].as_str(), again.json["event_id"].as_str()),
                (Some("duplicate"), Some(id.as_str())),
                "{what}: {}",
                again.text
            );
        }
        assert_eq!(app.event_keys(), stored, "{what}: stored as another event");
    }
    app.wait_all_completed(1, std::time::Duration::from_secs(30), "the one event is handled");
    let ran: Vec<String> = sink
        .requests()
        .iter()
        .map(|r| r.header("x-inbox-event-id").unwrap_or_default())
        .collect();
    assert_eq!(ran, vec![id], "the handler ran once, for that event");
}

/// GIVEN a Braintree source that forwards to a sink
/// WHEN a notification arrives as Braintree posts it (`bt_payload` is base64 ending in a newline), then the same
/// form again, then the form with the payload's trailing newline (`%0A`) taken off, which the signature verifies
/// as well (it covers the payload with or without it) and which anyone who saw the delivery can make
/// THEN the first is accepted, the other two are its duplicates, and the handler ran once.
#[tokio::test(flavor = "multi_thread")]
async fn a_braintree_payload_without_its_trailing_newline_is_the_same_event() {
    let sink = Sink::start(&[], 200).await;
    let secret = "k7tq2x9mvb4wd3np:3f1e9c0b7a2d4e6f8091a2b3c4d5e6f7";
    let app = spawn_app(&forwarding_source("braintree", &sink), &[("SECRET", secret)]);
    let xml = br#"<notification><kind>subscription_charged_successfully</kind><timestamp type="datetime">2026-01-01T00:00:00Z</timestamp><subject><subscription><id>sub_1</id></subscription></subject></notification>"#;
    let form = "application/x-www-form-urlencoded";
    let original = signed_delivery("braintree", secret, xml, form);
    let text = String::from_utf8(original.clone()).expect("a form");
    let stripped = text
        .strip_suffix("%0A")
        .expect("Braintree's payload ends in a newline");
    variants_are_one_event(
        &app,
        &sink,
        "braintree",
        form,
        &original,
        &[
            ("the same delivery", original.clone()),
            ("the payload without its newline", stripped.as_bytes().to_vec()),
        ],
    )
    .await;
}

/// GIVEN a Dropbox Sign source that forwards to a sink (its `event_hash` signs only `event_time` + `event_type`)
/// WHEN a callback arrives, then the same callback again, then it rewritten by someone who saw it, without the
/// key: spaced out, and with an unsigned field changed
/// THEN the first is accepted, the others are its duplicates, and the handler ran once.
#[tokio::test(flavor = "multi_thread")]
async fn a_rewritten_dropbox_sign_callback_is_the_same_event() {
    let sink = Sink::start(&[], 200).await;
    let secret = "c4f1a9e27b3d58f6a0e1c2d3b4a5968778695a4b3c2d1e0f9a8b7c6d5e4f3a2b";
    let app = spawn_app(&forwarding_source("dropbox-sign", &sink), &[("SECRET", secret)]);
    let event = json!({
        "event": {"event_time": now_unix().to_string(), "event_type": "signature_request_signed",
                  "event_metadata": {"related_signature_id": "78caf2a1d01cd39cea2bc1cbb340dac3",
                                     "reported_for_account_id": "63522885f9261e2b04eea043933ee7313eb674fd",
                                     "reported_for_app_id": null, "event_message": null}},
        "signature_request": {"signature_request_id": "fa5c8a0b0f492d768749333ad6fcc214c111e967", "title": "NDA",
                              "is_complete": false}
    });
    let original = signed_delivery(
        "dropbox-sign",
        secret,
        event.to_string().as_bytes(),
        "application/json",
    );
    let signed: Value = serde_json::from_slice(&original).expect("JSON");
    let mut retitled = signed.clone();
    retitled["signature_request"]["title"] = json!("Not the NDA");
    variants_are_one_event(
        &app,
        &sink,
        "dropbox-sign",
        "application/json",
        &original,
        &[
            ("the same callback", original.clone()),
            ("spaced out", serde_json::to_vec_pretty(&signed).expect("JSON")),
            ("an unsigned field changed", retitled.to_string().into_bytes()),
        ],
    )
    .await;
}

/// GIVEN a Zendesk and a Linear source, whose ids are headers their signatures do not cover (a signed timestamp
/// bounds a resend to the tolerance; it does not stop one)
/// WHEN a signed delivery arrives, then the same body, signature and timestamp under a fresh id header, as anyone who
/// saw the first could send it within the tolerance
/// THEN the second is stored as its own event (an id is the sender's to choose) but marked `resent_of` the first: the
/// resent-body guard looks for it, as for GitHub's unsigned delivery id.
#[tokio::test(flavor = "multi_thread")]
async fn an_unsigned_id_header_beside_a_signed_timestamp_is_watched_for_resent_bodies() {
    use inbox_core::schemes::Scheme;
    use reqwest::header::{HeaderName, HeaderValue};
    let secret = rand_secret();
    let config = format!(
        "[sources.zendesk]\nscheme = \"zendesk\"\nsecrets = [\"env:SECRET\"]\n{HANDLER}\n\
         [sources.linear]\nscheme = \"linear\"\nsecrets = [\"env:SECRET\"]\n{HANDLER}\n"
    );
    let app = spawn_app(&config, &[("SECRET", &secret)]);
    let client = client();
    let cases = [
        (
            "zendesk",
            "x-zendesk-webhook-invocation-id",
            json!({"type": "zen:event-type:ticket.created", "detail": {"id": "35436"}}).to_string(),
        ),
        (
            "linear",
            "linear-delivery",
            json!({"action": "create", "type": "Issue", "data": {"id": "9cfb482a"}, "webhookTimestamp": now_unix() * 1000})
                .to_string(),
        ),
    ];
    for (source, id_header, body) in cases {
        let signer = Signer::new(Scheme::named(source).expect("a provider"), &secret);
        let mut headers = signer.headers(body.as_bytes(), "first", None);
        headers.retain(|(name, _)| name != id_header);
        for id in ["first", "again"] {
            let mut sent = headers.clone();
            sent.push((HeaderName::from_static(id_header), HeaderValue::from_static(id)));
            let a = post(&client, &app.webhook_url(source), body.clone(), &sent).await;
            assert_eq!(
                (a.status, a.json["event_id"].as_str()),
                (200, Some(id)),
                "{source}: {}",
                a.text
            );
        }
        let resent = app.event(source, "again").expect("the second stored");
        assert_eq!(resent["resent_of"], "first", "{source}: {resent}");
    }
}

/// GIVEN a field-by-field `hmac` source whose id is a query parameter its MAC (over the body alone) does not cover
/// WHEN a signed delivery arrives under `?delivery=d1`, then the same body and signature under `?delivery=d2`, as
/// anyone who saw it could send it
/// THEN the second is stored as its own event (an id is the sender's to choose) but marked `resent_of` the first,
/// as for an id in an unsigned header; and a source whose id would hash a body its signature does not cover is
/// refused at start, naming the field.
#[tokio::test(flavor = "multi_thread")]
async fn an_unsigned_query_id_is_watched_for_resent_bodies_and_an_unsigned_body_is_never_hashed() {
    use inbox_core::schemes::{Algorithm, Encoding, HmacParams, Locator, Scheme};
    let secret = rand_secret();
    let config = format!(
        "[sources.q]\nscheme = \"hmac\"\nsecrets = [\"env:SECRET\"]\nsignature_header = \"x-sig\"\n\
         id = \"query:delivery\"\n{HANDLER}\n"
    );
    let app = spawn_app(&config, &[("SECRET", &secret)]);
    let scheme = Scheme::from(HmacParams {
        header: "x-sig".parse().expect("a header name"),
        algorithm: Algorithm::Sha256,
        encoding: Encoding::Hex,
        prefix: String::new(),
        id: Locator::Query("delivery".to_owned()),
        event_type: None,
    });
    let body = json!({"order": 42, "state": "paid"}).to_string();
    let headers = Signer::new(scheme, &secret).headers(body.as_bytes(), "d1", None);
    let client = client();
    for id in ["d1", "d2"] {
        let url = format!("{}?delivery={id}", app.webhook_url("q"));
        let a = post(&client, &url, body.clone(), &headers).await;
        assert_eq!(
            (a.status, a.json["event_id"].as_str()),
            (200, Some(id)),
            "{}",
            a.text
        );
    }
    let resent = app.event("q", "d2").expect("d2 stored");
    assert_eq!(resent["resent_of"], "d1", "{resent}");

    let unsigned =
        "[sources.h]\nscheme = \"hmac\"\nsecrets = [\"env:SECRET\"]\nsignature_header = \"x-sig\"\n\
                    signed = \"{header:x-ts}\"\nid = \"sha256\"\nhandler = { kind = \"log\" }\n";
    let (status, output) = serve_fails(unsigned, &[("SECRET", "s3cret")], &[]);
    assert!(!status.success());
    assert!(
        output.contains("sources.h.id") && output.contains("does not cover"),
        "{output}"
    );
}

/// GIVEN a Mailgun source that forwards to a sink, whose signature covers `timestamp` + `token` but not the event
/// WHEN a signed delivery arrives, then the same delivery again (a retry), then its signature block beside another
/// `event-data` under a fresh id, as anyone who saw the first can send within the 15-minute tolerance
/// THEN the first is accepted and the retry is its duplicate; the forgery is answered `duplicate` naming the first
/// event, stores nothing and runs nothing (the token is the delivery's signed nonce); the handler ran once; the
/// source counts one payload mismatch and delivery health raises its `payload_mismatch` alarm.
#[tokio::test(flavor = "multi_thread")]
async fn a_mailgun_signature_beside_another_event_is_the_first_events_duplicate_and_a_mismatch() {
    let sink = Sink::start(&[], 200).await;
    let notify = Sink::start(&[], 200).await;
    let secret = "f7c1a0e2b9d84c3a5e6f70812a3b4c5d-5e6f7a8b-9c0d1e2f";
    let config = format!(
        "[alarm]\nnotify_url = \"{}/alerts\"\n{}",
        notify.url(),
        forwarding_source("mailgun", &sink)
    );
    let app = spawn_app(&config, &[("SECRET", secret)]);
    let now = now_unix() as f64;
    let event = json!({"id": "CPgfbmQMTCKtHW6uIWtuVe", "timestamp": now - 1.5, "event": "delivered",
                       "recipient": "alice@example.org"});
    let json_type = "application/json";
    let original = signed_delivery("mailgun", secret, event.to_string().as_bytes(), json_type);
    let mut forged: Value = serde_json::from_slice(&original).expect("JSON");
    forged["event-data"] = json!({"id": "Zq8uN3bTqQOl0a2c7Ye1xw", "timestamp": now - 0.5, "event": "unsubscribed",
                                  "recipient": "alice@example.org"});
    let client = client();

    let first = post_typed(&client, &app, "mailgun", json_type, &original).await;
    assert_eq!(
        (first.status, first.json["status"].as_str()),
        (200, Some("accepted")),
        "{}",
        first.text
    );
    let id = first.json["event_id"]
        .as_str()
        .expect("the event's id")
        .to_owned();
    for (what, body) in [
        ("the retry", original.clone()),
        ("the forgery", forged.to_string().into_bytes()),
    ] {
        let a = post_typed(&client, &app, "mailgun", json_type, &body).await;
        assert_eq!(
            (a.status, a.json["status"].as_str(), a.json["event_id"].as_str()),
            (200, Some("duplicate"), Some(id.as_str())),
            "{what}: {}",
            a.text
        );
    }
    assert_eq!(
        app.event_keys(),
        vec![("mailgun".to_owned(), id.clone())],
        "one event stored"
    );

    app.wait_all_completed(1, std::time::Duration::from_secs(30), "the one event is handled");
    let ran: Vec<String> = sink
        .requests()
        .iter()
        .map(|r| r.header("x-inbox-event-id").unwrap_or_default())
        .collect();
    assert_eq!(ran, vec![id.clone()], "the handler ran once, for the first event");
    assert_one_mismatch(&app, "mailgun", "the forgery is one payload mismatch").await;
    let alarmed = || {
        notify.requests().iter().map(Recorded::json).any(|a| {
            a["alarm"] == "payload_mismatch" && a["source"] == "mailgun" && a["event_id"] == id.as_str()
        })
    };
    wait_until(
        std::time::Duration::from_secs(5),
        "the payload_mismatch alarm",
        alarmed,
    );
}

/// `app`'s `/metrics` count one payload mismatch for `source` (the mismatch lines shown where not, with `why`).
async fn assert_one_mismatch(app: &App, source: &str, why: &str) {
    let metrics = get(&client(), &format!("{}/metrics", app.url())).await.text;
    assert!(
        metrics.contains(&format!("inbox_payload_mismatch_total{{source=\"{source}\"}} 1")),
        "{why}:\n{}",
        metrics
            .lines()
            .filter(|l| l.contains("mismatch"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
