//! Security checks as tests: what `inbox serve` writes at its default log level never holds a secret, a
//! signature header's value or a byte sequence of a payload, whatever it receives (valid, tampered, stale,
//! duplicated with another payload, or dead-ending downstream). Constant-time comparison is checked in
//! shared/tests/core/properties.rs; the body limit before buffering (413 to a declared length, no body sent) in
//! receive.rs.

use std::time::Duration;

use crate::common::*;
use inbox_core::schemes::Scheme;
use serde_json::json;

/// GIVEN a server at the default log level (info) with a GitHub source forwarding to a sink that answers 200 and a
/// Stripe source forwarding to one that answers 400 (a permanent error: the event dies and its alarm is logged)
/// WHEN valid, tampered, stale, unsigned and payload-mismatched duplicate events arrive, each body holding a unique
/// marker, and the events settle (COMPLETED, DEAD) and the server stops
/// THEN its log holds none of the secrets, none of the signature header values, and no marker.
#[tokio::test(flavor = "multi_thread")]
async fn logs_hold_no_secret_signature_or_payload() {
    let ok_sink = Sink::start(&[], 200).await;
    let dead_sink = Sink::start(&[], 400).await;
    let gh_secret = format!("ghsecret{}", rand_secret());
    let st_secret = format!("whsec_stsecret{}", rand_secret());
    let mut app = spawn_app(
        &format!(
            "[sources.gh]\nscheme = \"github\"\nsecrets = [\"env:GH_SECRET\"]\n\
             handler = {{ kind = \"forward\", url = \"{}/ok\", timeout = \"5s\" }}\n\
             [sources.stripe]\nscheme = \"stripe\"\nsecrets = [\"env:ST_SECRET\"]\n\
             handler = {{ kind = \"forward\", url = \"{}/dead\", timeout = \"5s\" }}\n",
            ok_sink.url(),
            dead_sink.url()
        ),
        &[("GH_SECRET", &gh_secret), ("ST_SECRET", &st_secret)],
    );
    let gh = Signer::new(Scheme::Github, &gh_secret);
    let st = Signer::new(Scheme::Stripe, &st_secret);
    let http = client();
    let marker = format!("PAYLOADMARKER{:016x}", rand::random::<u64>());
    let mut signatures: Vec<String> = Vec::new();
    let mut keep = |headers: &[(reqwest::header::HeaderName, reqwest::header::HeaderValue)]| {
        for (name, value) in headers {
            if name.as_str().contains("signature") {
                signatures.push(value.to_str().expect("ascii").to_owned());
            }
        }
    };

    // Valid (completes), then the same id with another payload (a mismatch: logged with hashes only).
    let id = rand_id("valid");
    let body = json!({"id": id, "secret_field": marker}).to_string();
    let headers = gh.headers(body.as_bytes(), &id, Some("push"));
    keep(&headers);
    assert_eq!(
        post(&http, &app.webhook_url("gh"), body.clone(), &headers)
            .await
            .status,
        200
    );
    let other = json!({"id": id, "secret_field": format!("{marker}-changed")}).to_string();
    let headers = gh.headers(other.as_bytes(), &id, Some("push"));
    keep(&headers);
    assert_eq!(
        post(&http, &app.webhook_url("gh"), other, &headers).await.status,
        200
    );

    // Tampered: the signature of one body sent with another.
    let tampered = json!({"id": rand_id("tampered"), "x": marker}).to_string();
    let headers = gh.headers(body.as_bytes(), "t", None);
    keep(&headers);
    assert_eq!(
        post(&http, &app.webhook_url("gh"), tampered, &headers)
            .await
            .status,
        401
    );

    // Stale (Stripe, 10 minutes old), and unsigned.
    let sid = rand_id("evt_stale");
    let stale = json!({"id": sid, "type": "x", "m": marker}).to_string();
    let headers = st.headers_at(stale.as_bytes(), &sid, None, now_unix() - 600);
    keep(&headers);
    assert_eq!(
        post(&http, &app.webhook_url("stripe"), stale.clone(), &headers)
            .await
            .status,
        401
    );
    assert_eq!(
        post(&http, &app.webhook_url("stripe"), stale, &[]).await.status,
        401
    );

    // Dead-ending: accepted, then the downstream refuses it for good.
    let did = rand_id("evt_dead");
    let dead = json!({"id": did, "type": "charge.failed", "m": marker}).to_string();
    let headers = st.headers(dead.as_bytes(), &did, None);
    keep(&headers);
    assert_eq!(
        post(&http, &app.webhook_url("stripe"), dead, &headers)
            .await
            .status,
        200
    );

    wait_until(
        Duration::from_secs(20),
        "the valid event COMPLETED and the other DEAD",
        || app.status_of("gh", &id) == "COMPLETED" && app.status_of("stripe", &did) == "DEAD",
    );
    assert_eq!(ok_sink.count(), 1);
    app.terminate();

    let log = app.log();
    assert!(
        log.contains("event is DEAD"),
        "the dead event was not logged: is this the info level?"
    );
    // Refusals are logged as counts, a line a minute per source and reason (each one only at debug).
    assert!(
        log.lines()
            .any(|l| l.contains("requests rejected") && l.contains("signature")),
        "the refusals were not logged"
    );
    for (what, needle) in [
        ("GitHub secret", gh_secret.as_str()),
        ("Stripe secret", st_secret.as_str()),
    ]
    .into_iter()
    .chain(std::iter::once(("payload marker", marker.as_str())))
    {
        assert!(!log.contains(needle), "the log holds the {what}:\n{log}");
    }
    assert!(signatures.len() >= 5, "{signatures:?}");
    for sig in &signatures {
        // The hex/base64 digest alone, without the `sha256=` / `t=…,v1=` wrapping.
        for part in sig.split([',', '=']).filter(|p| p.len() >= 16) {
            assert!(
                !log.contains(part),
                "the log holds a signature value {part:?}:\n{log}"
            );
        }
    }
    eprintln!(
        "security: {} signature values, 2 secrets and 1 payload marker absent from {} log lines",
        signatures.len(),
        log.lines().count()
    );
}
