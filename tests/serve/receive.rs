//! Receiving, end to end over real HTTP against a real `inbox serve`: every signature scheme accepts a fresh
//! delivery once, answers the same delivery as a duplicate, refuses tampered, wrongly keyed, stale and id-less
//! deliveries, and stores exactly what it accepted; the refusals that come before verification (unknown source,
//! body over the limit, malformed JSON) store nothing; bad configuration stops `inbox serve` at start.

use crate::common::*;
use inbox_core::schemes::{Algorithm, Encoding, HmacParams, Locator, Scheme};
use reqwest::header::HeaderName;
use serde_json::json;
use std::time::Duration;

const STATUSES: [&str; 5] = ["RECEIVED", "PROCESSING", "COMPLETED", "FAILED", "DEAD"];

/// Where a scheme carries the event id.
#[derive(Clone, Copy)]
enum IdAt {
    /// A JSON pointer into the body.
    Body(&'static str),
    /// A header; `signed` when the signature covers it (Standard Webhooks, Svix), so it cannot be dropped
    /// without failing verification: then "missing" is an empty value.
    Header { name: &'static str, signed: bool },
}

struct Case {
    source: &'static str,
    /// The source's TOML lines other than `secrets` and `handler`.
    toml: &'static str,
    scheme: Scheme,
    id_at: IdAt,
    /// Whether the signature covers a timestamp checked against the tolerance.
    timestamped: bool,
    /// Secrets of this scheme's shape are `prefix + 32 hex characters`.
    secret_prefix: &'static str,
}

fn header(name: &'static str) -> HeaderName {
    HeaderName::from_static(name)
}

/// A delivery body: JSON with a type, some noise, and the id where the scheme looks for it (if `id` is given).
fn body_for(case: &Case, id: Option<&str>) -> String {
    let kind = if case.source == "slack" {
        "event_callback"
    } else {
        "test.event"
    };
    let mut body = json!({"type": kind, "noise": rand_id("n"), "data": {"object": "thing"}});
    if let (IdAt::Body(pointer), Some(id)) = (case.id_at, id) {
        let path: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
        let mut at = &mut body;
        for (i, part) in path.iter().enumerate() {
            if i + 1 == path.len() {
                at[*part] = json!(id);
            } else {
                at = &mut at[*part];
            }
        }
    }
    body.to_string()
}

/// GIVEN one app with one source of `case`'s scheme and two secrets (rotation)
/// WHEN deliveries signed now, tampered, wrongly keyed, stale or without an id arrive over HTTP
/// THEN only the good one is accepted (once), and the store holds exactly it.
async fn check_scheme(case: Case) {
    let (new_secret, old_secret, wrong_secret) = (
        format!("{}{}", case.secret_prefix, rand_secret()),
        format!("{}{}", case.secret_prefix, rand_secret()),
        format!("{}{}", case.secret_prefix, rand_secret()),
    );
    let config = format!(
        "[sources.{name}]\n{toml}\nsecrets = [\"env:E2E_NEW_SECRET\", \"env:E2E_OLD_SECRET\"]\nhandler = {{ kind = \"log\" }}\n",
        name = case.source,
        toml = case.toml
    );
    let app = spawn_app(
        &config,
        &[("E2E_NEW_SECRET", &new_secret), ("E2E_OLD_SECRET", &old_secret)],
    );
    let new = Signer::new(case.scheme.clone(), &new_secret);
    let old = Signer::new(case.scheme.clone(), &old_secret);
    let wrong = Signer::new(case.scheme.clone(), &wrong_secret);
    let url = app.webhook_url(case.source);
    let http = client();
    let ty = Some("test.event");
    let no_secret_in = |a: &Answer, what: &str| {
        for s in [&new_secret, &old_secret, &wrong_secret] {
            assert!(
                !a.text.contains(s.as_str()),
                "{what}: the answer holds a secret: {}",
                a.text
            );
        }
    };

    // Accepted: signed now with the second (rotated-out) secret.
    let id = rand_id("evt");
    let body = body_for(&case, Some(&id));
    let signed = old.headers(body.as_bytes(), &id, ty);
    let first = post(&http, &url, body.clone(), &signed).await;
    assert_eq!(
        first.status, 200,
        "{}: a fresh signed delivery: {}",
        case.source, first.text
    );
    assert_eq!(
        first.json["status"], "accepted",
        "{}: {}",
        case.source, first.text
    );
    assert_eq!(
        first.json["event_id"],
        id.as_str(),
        "{}: {}",
        case.source,
        first.text
    );

    // The very same request again: a duplicate.
    let again = post(&http, &url, body.clone(), &signed).await;
    assert_eq!(again.status, 200, "{}: duplicate: {}", case.source, again.text);
    assert_eq!(
        again.json["status"], "duplicate",
        "{}: {}",
        case.source, again.text
    );
    assert_eq!(
        again.json["event_id"],
        id.as_str(),
        "{}: {}",
        case.source,
        again.text
    );
    let state = again.json["state"].as_str().unwrap_or_default();
    assert!(
        STATUSES.contains(&state),
        "{}: a duplicate answers the current state: {}",
        case.source,
        again.text
    );

    // Each refusal below carries its own fresh id, which must never be stored.
    let mut refused_ids = Vec::new();

    // Tampered body: signed, then one byte changed.
    let rid = rand_id("tampered");
    let signed_body = body_for(&case, Some(&rid));
    let headers = new.headers(signed_body.as_bytes(), &rid, ty);
    let tampered = signed_body.replacen("thing", "thinG", 1);
    assert_ne!(tampered, signed_body);
    let a = post(&http, &url, tampered, &headers).await;
    a.assert_error(401, &format!("{}: tampered body", case.source));
    no_secret_in(&a, "tampered");
    refused_ids.push(rid);

    // Signed with a secret the source does not have.
    let rid = rand_id("wrongkey");
    let b = body_for(&case, Some(&rid));
    let a = post(&http, &url, b.clone(), &wrong.headers(b.as_bytes(), &rid, ty)).await;
    a.assert_error(401, &format!("{}: wrong secret", case.source));
    no_secret_in(&a, "wrong secret");
    refused_ids.push(rid);

    // Timestamped schemes: ten minutes off either way (the default tolerance is 5 minutes).
    if case.timestamped {
        for (what, skew) in [("stale", -600), ("future", 600)] {
            let rid = rand_id(what);
            let b = body_for(&case, Some(&rid));
            let h = new.headers_at(b.as_bytes(), &rid, ty, now_unix() + skew);
            let a = post(&http, &url, b, &h).await;
            a.assert_error(401, &format!("{}: {what} timestamp", case.source));
            refused_ids.push(rid);
        }
    }

    // Correctly signed, but without an event id.
    let missing = match case.id_at {
        IdAt::Body(_) => {
            let b = body_for(&case, None);
            let h = new.headers(b.as_bytes(), "unused", ty);
            (b, h)
        }
        IdAt::Header { name, signed: false } => {
            let b = body_for(&case, None);
            let h = new
                .headers(b.as_bytes(), &rand_id("dropped"), ty)
                .into_iter()
                .filter(|(n, _)| n.as_str() != name)
                .collect::<Vec<_>>();
            (b, h)
        }
        IdAt::Header { signed: true, .. } => {
            let b = body_for(&case, None);
            let h = new.headers(b.as_bytes(), "", ty);
            (b, h)
        }
    };
    let a = post(&http, &url, missing.0, &missing.1).await;
    a.assert_error(400, &format!("{}: missing id", case.source));

    // The store holds exactly the accepted event, with the raw body as sent.
    assert_eq!(
        app.event_keys(),
        vec![(case.source.to_owned(), id.clone())],
        "{}: the store holds exactly the accepted event",
        case.source
    );
    for rid in &refused_ids {
        assert!(
            app.event(case.source, rid).is_none(),
            "{}: {rid} was stored",
            case.source
        );
    }
    let stored = app.event(case.source, &id).expect("the accepted event is stored");
    assert_eq!(
        stored["payload"],
        body.as_str(),
        "{}: the stored payload is the raw body",
        case.source
    );
    assert!(
        stored["attempts"].as_u64().unwrap_or(99) <= 1,
        "{}: {stored}",
        case.source
    );
    // And it is processed (log handler).
    wait_until(
        Duration::from_secs(10),
        format!("{} {id} is COMPLETED", case.source),
        || app.status_of(case.source, &id) == "COMPLETED",
    );
    // A later retry, signed anew with the first secret: a duplicate that reports the final state.
    let late = post(&http, &url, body.clone(), &new.headers(body.as_bytes(), &id, ty)).await;
    assert_eq!(late.json["status"], "duplicate", "{}: {}", case.source, late.text);
    assert_eq!(late.json["state"], "COMPLETED", "{}: {}", case.source, late.text);
    assert_eq!(app.event_keys().len(), 1, "{}: still one event", case.source);
}

#[tokio::test(flavor = "multi_thread")]
async fn github() {
    check_scheme(Case {
        source: "github",
        toml: "scheme = \"github\"",
        scheme: Scheme::Github,
        id_at: IdAt::Header {
            name: "x-github-delivery",
            signed: false,
        },
        timestamped: false,
        secret_prefix: "",
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn stripe() {
    check_scheme(Case {
        source: "stripe",
        toml: "scheme = \"stripe\"",
        scheme: Scheme::Stripe,
        id_at: IdAt::Body("/id"),
        timestamped: true,
        secret_prefix: "whsec_",
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn standard_webhooks() {
    check_scheme(Case {
        source: "standard",
        toml: "scheme = \"standard-webhooks\"",
        scheme: Scheme::StandardWebhooks,
        id_at: IdAt::Header {
            name: "webhook-id",
            signed: true,
        },
        timestamped: true,
        secret_prefix: "whsec_",
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn svix() {
    check_scheme(Case {
        source: "svix",
        toml: "scheme = \"svix\"",
        scheme: Scheme::Svix,
        id_at: IdAt::Header {
            name: "svix-id",
            signed: true,
        },
        timestamped: true,
        secret_prefix: "whsec_",
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shopify() {
    check_scheme(Case {
        source: "shopify",
        toml: "scheme = \"shopify\"",
        scheme: Scheme::Shopify,
        id_at: IdAt::Header {
            name: "x-shopify-webhook-id",
            signed: false,
        },
        timestamped: false,
        secret_prefix: "",
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn slack() {
    check_scheme(Case {
        source: "slack",
        toml: "scheme = \"slack\"",
        scheme: Scheme::Slack,
        id_at: IdAt::Body("/event_id"),
        timestamped: true,
        secret_prefix: "",
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hmac_with_header_id() {
    check_scheme(Case {
        source: "acme",
        toml: "scheme = \"hmac\"\nsignature_header = \"X-Acme-Signature\"\nalgorithm = \"sha256\"\n\
               encoding = \"hex\"\nprefix = \"sha256=\"\nid = \"header:X-Acme-Delivery\"\ntype = \"header:X-Acme-Event\"",
        scheme: Scheme::from(HmacParams {
            header: header("x-acme-signature"),
            algorithm: Algorithm::Sha256,
            encoding: Encoding::Hex,
            prefix: "sha256=".into(),
            id: Locator::Header(header("x-acme-delivery")),
            event_type: Some(Locator::Header(header("x-acme-event"))),
        }),
        id_at: IdAt::Header {
            name: "x-acme-delivery",
            signed: false,
        },
        timestamped: false,
        secret_prefix: "",
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hmac_with_json_id() {
    check_scheme(Case {
        source: "partner",
        toml: "scheme = \"hmac\"\nsignature_header = \"X-Partner-Signature\"\nalgorithm = \"sha512\"\n\
               encoding = \"base64\"\nid = \"json:/data/id\"\ntype = \"json:/type\"",
        scheme: Scheme::from(HmacParams {
            header: header("x-partner-signature"),
            algorithm: Algorithm::Sha512,
            encoding: Encoding::Base64,
            prefix: String::new(),
            id: Locator::Json("/data/id".into()),
            event_type: Some(Locator::Json("/type".into())),
        }),
        id_at: IdAt::Body("/data/id"),
        timestamped: false,
        secret_prefix: "",
    })
    .await;
}

/// GIVEN a Slack source WHEN Slack checks the URL with a signed `url_verification` THEN the challenge is echoed
/// and nothing is stored; an unsigned one is refused.
#[tokio::test(flavor = "multi_thread")]
async fn slack_url_verification_answers_the_challenge_and_stores_nothing() {
    let secret = rand_secret();
    let app = spawn_app(
        "[sources.slack]\nscheme = \"slack\"\nsecrets = [\"env:SLACK_SIGNING_SECRET\"]\nhandler = { kind = \"log\" }\n",
        &[("SLACK_SIGNING_SECRET", &secret)],
    );
    let signer = Signer::new(Scheme::Slack, &secret);
    let http = client();
    let url = app.webhook_url("slack");

    // A normal event first, so that "nothing stored" is measured against a store that does store.
    let id = rand_id("Ev");
    let event = json!({"type": "event_callback", "event_id": id, "event": {"type": "message"}}).to_string();
    let a = post(
        &http,
        &url,
        event.clone(),
        &signer.headers(event.as_bytes(), &id, None),
    )
    .await;
    assert_eq!(a.json["status"], "accepted", "{}", a.text);
    let before = app.event_keys();
    assert_eq!(before, vec![("slack".to_owned(), id)]);

    let challenge = rand_id("challenge");
    let handshake = json!({"token": "tok", "challenge": challenge, "type": "url_verification"}).to_string();
    let a = post(
        &http,
        &url,
        handshake.clone(),
        &signer.headers(handshake.as_bytes(), "", None),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.json, json!({"challenge": challenge}), "{}", a.text);

    // Only after verification: the same handshake signed with another secret is refused.
    let other = Signer::new(Scheme::Slack, &rand_secret());
    let a = post(
        &http,
        &url,
        handshake.clone(),
        &other.headers(handshake.as_bytes(), "", None),
    )
    .await;
    a.assert_error(401, "unsigned url_verification");
    assert!(!a.text.contains(&challenge), "{}", a.text);

    assert_eq!(app.event_keys(), before, "a handshake stores nothing");
}

/// GIVEN a Stripe source limited to 1 KiB bodies, holding one event
/// WHEN requests arrive for an unknown source, with a declared length over the limit (and no body at all: it must
/// be refused before reading), with a chunked body that goes over, and with a signed body that is not JSON
/// THEN each gets its error (404, 413, 413, 400) as JSON, and the store is unchanged.
#[tokio::test(flavor = "multi_thread")]
async fn refusals_before_storing_leave_the_store_unchanged() {
    const LIMIT: usize = 1024;
    let secret = format!("whsec_{}", rand_secret());
    let app = spawn_app(
        &format!(
            "[sources.stripe]\nscheme = \"stripe\"\nsecrets = [\"env:STRIPE_WEBHOOK_SECRET\"]\n\
             max_body_bytes = {LIMIT}\nhandler = {{ kind = \"log\" }}\n"
        ),
        &[("STRIPE_WEBHOOK_SECRET", &secret)],
    );
    let signer = Signer::new(Scheme::Stripe, &secret);
    let http = client();
    let url = app.webhook_url("stripe");

    // A body of exactly the limit is accepted: the limit is inclusive, and the store is not empty.
    let id = rand_id("evt");
    let empty = json!({"id": id, "type": "charge.succeeded", "pad": ""}).to_string();
    let pad = "x".repeat(LIMIT - empty.len());
    let body = json!({"id": id, "type": "charge.succeeded", "pad": pad}).to_string();
    assert_eq!(body.len(), LIMIT);
    let a = post(
        &http,
        &url,
        body.clone(),
        &signer.headers(body.as_bytes(), &id, None),
    )
    .await;
    assert_eq!(a.status, 200, "a body of exactly max_body_bytes: {}", a.text);
    assert_eq!(a.json["status"], "accepted", "{}", a.text);
    let before = app.event_keys();
    assert_eq!(before, vec![("stripe".to_owned(), id)]);

    // Unknown source.
    let nid = rand_id("evt");
    let b = json!({"id": nid, "type": "x"}).to_string();
    let a = post(
        &http,
        &app.webhook_url("nosuchsource"),
        b.clone(),
        &signer.headers(b.as_bytes(), &nid, None),
    )
    .await;
    a.assert_error(404, "unknown source");

    // A declared Content-Length over the limit, and no body bytes sent: answered without waiting for the body.
    let a = raw_request(
        app.addr(),
        &format!(
            "POST /webhooks/stripe HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close",
            app.addr(),
            LIMIT * 4
        ),
        &[],
    )
    .await;
    a.assert_error(413, "declared Content-Length over the limit");

    // A chunked body with no length that goes over the limit (and never ends).
    let chunk = |data: &[u8]| {
        let mut c = format!("{:x}\r\n", data.len()).into_bytes();
        c.extend_from_slice(data);
        c.extend_from_slice(b"\r\n");
        c
    };
    let filler = vec![b' '; LIMIT / 2 + 88];
    let a = raw_request(
        app.addr(),
        &format!(
            "POST /webhooks/stripe HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Transfer-Encoding: chunked\r\nConnection: close",
            app.addr()
        ),
        &[chunk(&filler), chunk(&filler)],
    )
    .await;
    a.assert_error(413, "chunked body over the limit");

    // Correctly signed, but not JSON: Stripe's id lives in the body.
    let bad = format!("{{\"id\": \"{}\", \"type\": ", rand_id("evt"));
    let a = post(
        &http,
        &url,
        bad.clone(),
        &signer.headers(bad.as_bytes(), "unused", None),
    )
    .await;
    a.assert_error(400, "malformed JSON");

    assert_eq!(app.event_keys(), before, "refused requests changed the store");

    // The server is still healthy after all of that.
    let health = get(&http, &format!("{}/healthz", app.url())).await;
    assert_eq!(health.status, 200, "{}", health.text);
}

/// GIVEN a source whose secret is `env:VAR` with VAR unset WHEN `inbox serve` starts THEN it exits non-zero,
/// naming the source, the field and the variable (and never starts listening).
#[test]
fn unset_secret_variable_stops_serve_naming_source_and_field() {
    let var = format!("INBOX_E2E_UNSET_{:08X}", rand::random::<u32>());
    let config = format!(
        "[sources.billing]\nscheme = \"stripe\"\nsecrets = [\"env:{var}\"]\nhandler = {{ kind = \"log\" }}\n"
    );
    let (status, output) = serve_fails(&config, &[], &[&var]);
    assert!(
        !status.success(),
        "inbox serve started without its secret: {output}"
    );
    assert!(!output.contains("listening"), "{output}");
    for needle in ["sources.billing", "secrets", var.as_str()] {
        assert!(
            output.contains(needle),
            "the error does not name {needle:?}: {output}"
        );
    }
}

/// GIVEN a source with a misspelt field WHEN `inbox serve` starts THEN it exits non-zero naming the source and
/// the unknown field.
#[test]
fn unknown_config_field_stops_serve_naming_source_and_field() {
    let config = "[sources.billing]\nscheme = \"stripe\"\nsecrets = [\"env:BILLING_SECRET\"]\n\
                  tolerence = \"5m\"\nhandler = { kind = \"log\" }\n";
    let (status, output) = serve_fails(config, &[("BILLING_SECRET", "whsec_abc")], &[]);
    assert!(
        !status.success(),
        "inbox serve accepted an unknown field: {output}"
    );
    assert!(!output.contains("listening"), "{output}");
    for needle in ["sources.billing", "tolerence"] {
        assert!(
            output.contains(needle),
            "the error does not name {needle:?}: {output}"
        );
    }
}
