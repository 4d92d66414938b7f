//! Hostile requests over HTTP against a real `inbox serve`: a matrix of what senders and attackers can
//! put on the wire. Each is answered with a 4xx and a JSON error body, and none changes the event list. The body
//! limit over a declared length and over a chunked body are in receive.rs already (not repeated here).

use std::time::{Duration, Instant};

use crate::common::*;
use inbox_core::schemes::Scheme;
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::json;

const LIMIT: usize = 16 * 1024;

fn h(name: &'static str, value: &[u8]) -> (HeaderName, HeaderValue) {
    (
        HeaderName::from_static(name),
        HeaderValue::from_bytes(value).expect("a header value a client can send"),
    )
}

/// Asserts a 4xx with the contract's JSON error body.
fn assert_4xx(a: &Answer, case: &str) {
    assert!((400..500).contains(&a.status), "{case}: {} {}", a.status, a.text);
    for field in ["error", "code"] {
        assert!(
            !a.json
                .get(field)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .is_empty(),
            "{case}: no JSON {field:?} in the answer: {}",
            a.text
        );
    }
}

/// GIVEN a GitHub source (id in a header) and a Stripe source (id in the body, timestamped), 16 KiB bodies, a 2 s
/// read timeout, and two events stored (one sent chunked, without a length)
/// WHEN the matrix of hostile requests arrives
/// THEN each is a 4xx with a JSON error body, the event list is unchanged, and the server is still healthy.
#[tokio::test(flavor = "multi_thread")]
async fn hostile_requests_are_4xx_with_json_and_change_nothing() {
    let started = Instant::now();
    let gh_secret = rand_secret();
    let st_secret = format!("whsec_{}", rand_secret());
    let app = spawn_app(
        &format!(
            "[server]\nread_timeout = \"2s\"\n\
             [sources.gh]\nscheme = \"github\"\nsecrets = [\"env:GH_SECRET\"]\nmax_body_bytes = {LIMIT}\n\
             handler = {{ kind = \"log\" }}\n\
             [sources.stripe]\nscheme = \"stripe\"\nsecrets = [\"env:ST_SECRET\"]\nmax_body_bytes = {LIMIT}\n\
             handler = {{ kind = \"log\" }}\n"
        ),
        &[("GH_SECRET", &gh_secret), ("ST_SECRET", &st_secret)],
    );
    let gh = Signer::new(Scheme::Github, &gh_secret);
    let st = Signer::new(Scheme::Stripe, &st_secret);
    let http = client();
    let gh_url = app.webhook_url("gh");
    let st_url = app.webhook_url("stripe");

    // Positive controls: a valid event, and a valid one sent chunked without a Content-Length, are stored.
    let id = rand_id("ok");
    let body = json!({"id": id}).to_string();
    let a = post(
        &http,
        &gh_url,
        body.clone(),
        &gh.headers(body.as_bytes(), &id, Some("push")),
    )
    .await;
    assert_eq!(a.status, 200, "valid: {}", a.text);
    let cid = rand_id("chunked");
    let cbody = json!({"id": cid, "type": "charge.succeeded"}).to_string();
    let mut head = format!(
        "POST /webhooks/stripe HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\nConnection: close",
        app.addr()
    );
    for (name, value) in st.headers(cbody.as_bytes(), &cid, None) {
        head.push_str(&format!("\r\n{name}: {}", value.to_str().expect("ascii")));
    }
    let half = cbody.len() / 2;
    let chunk = |data: &[u8]| {
        let mut c = format!("{:x}\r\n", data.len()).into_bytes();
        c.extend_from_slice(data);
        c.extend_from_slice(b"\r\n");
        c
    };
    let chunks = [
        chunk(&cbody.as_bytes()[..half]),
        chunk(&cbody.as_bytes()[half..]),
        b"0\r\n\r\n".to_vec(),
    ];
    let a = raw_request(app.addr(), &head, &chunks).await;
    assert_eq!(a.status, 200, "chunked without a length: {}", a.text);
    let before = app.event_keys();
    assert_eq!(before.len(), 2, "{before:?}");

    let cases = std::cell::Cell::new(0);
    let check = |a: Answer, case: &str| {
        assert_4xx(&a, case);
        cases.set(cases.get() + 1);
    };

    // Headers: duplicated signatures (both wrong), garbage bytes, missing, and the id header duplicated unsigned.
    let nid = rand_id("evt");
    let b = json!({"id": nid}).to_string();
    let dup = [
        h("x-hub-signature-256", b"sha256=00"),
        h(
            "x-hub-signature-256",
            format!("sha256={}", "ab".repeat(32)).as_bytes(),
        ),
        h("x-github-delivery", nid.as_bytes()),
    ];
    check(
        post(&http, &gh_url, b.clone(), &dup).await,
        "duplicated wrong signatures",
    );
    let garbage = [
        h("x-hub-signature-256", b"sha256=\xff\xfe\x80garbage"),
        h("x-github-delivery", b"\xc3\x28\xa0\xa1"),
        h("x-github-event", b"\x80\x81"),
    ];
    check(
        post(&http, &gh_url, b.clone(), &garbage).await,
        "non-UTF-8 header values",
    );
    check(
        post(
            &http,
            &gh_url,
            b.clone(),
            &[h("x-github-delivery", nid.as_bytes())],
        )
        .await,
        "no signature",
    );
    let mut two_ids = gh.headers(b.as_bytes(), &nid, None);
    two_ids.retain(|(n, _)| n.as_str() != "x-github-delivery");
    check(
        post(&http, &gh_url, b.clone(), &two_ids).await,
        "signed, no id header",
    );
    check(
        post(
            &http,
            &st_url,
            b.clone(),
            &[h("stripe-signature", b"t=,v1=,,,=;;")],
        )
        .await,
        "garbage Stripe signature header",
    );

    // Bodies: non-UTF-8, unsigned and signed (Stripe's id is in the body); over the limit by one byte, signed.
    let binary: Vec<u8> = (0..=255u8).cycle().take(700).collect();
    check(
        post(
            &http,
            &gh_url,
            binary.clone(),
            &gh.headers(b"other body", &nid, None),
        )
        .await,
        "non-UTF-8 body, signature of another body",
    );
    check(
        post(&http, &st_url, binary.clone(), &st.headers(&binary, "x", None)).await,
        "non-UTF-8 body, signed, no id in it",
    );
    let oid = rand_id("big");
    let empty = format!("{{\"id\":\"{oid}\",\"pad\":\"\"}}");
    let over = format!(
        "{{\"id\":\"{oid}\",\"pad\":\"{}\"}}",
        "x".repeat(LIMIT + 1 - empty.len())
    );
    assert_eq!(over.len(), LIMIT + 1);
    let a = post(
        &http,
        &st_url,
        over.clone(),
        &st.headers(over.as_bytes(), "x", None),
    )
    .await;
    a.assert_error(413, "one body over the limit, signed");
    cases.set(cases.get() + 1);

    // A slow client: half the declared body, then nothing. 408 after the read timeout, not a hang.
    let sid = rand_id("slow");
    let sbody = json!({"id": sid}).to_string();
    let mut head = format!(
        "POST /webhooks/gh HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close",
        app.addr(),
        sbody.len()
    );
    for (name, value) in gh.headers(sbody.as_bytes(), &sid, None) {
        head.push_str(&format!("\r\n{name}: {}", value.to_str().expect("ascii")));
    }
    let stalled = Instant::now();
    let a = raw_request(app.addr(), &head, &[sbody.as_bytes()[..sbody.len() / 2].to_vec()]).await;
    a.assert_error(408, "a client that stalls mid-body");
    assert!(
        stalled.elapsed() >= Duration::from_millis(1_900) && stalled.elapsed() < Duration::from_secs(8),
        "408 after {:?}, not after the 2 s read timeout",
        stalled.elapsed()
    );
    cases.set(cases.get() + 1);

    // Timestamps far in the past and the future, at the edges of the integer range, and not a number.
    let tid = rand_id("evt");
    let tbody = json!({"id": tid}).to_string();
    let now = now_unix();
    for (at, case) in [
        (now - 301, "5 minutes and a second old"),
        (now + 301, "5 minutes and a second ahead"),
        (0, "the epoch"),
        (now + 10 * 365 * 86_400, "ten years ahead"),
        (-now, "before the epoch"),
    ] {
        let a = post(
            &http,
            &st_url,
            tbody.clone(),
            &st.headers_at(tbody.as_bytes(), &tid, None, at),
        )
        .await;
        a.assert_error(401, case);
        cases.set(cases.get() + 1);
    }
    for t in [
        "99999999999999999999999",
        "-9223372036854775808",
        "9223372036854775807",
        "soon",
    ] {
        let sig = st.headers(tbody.as_bytes(), &tid, None);
        let v1 = sig
            .iter()
            .find_map(|(_, v)| v.to_str().ok()?.split(",v1=").nth(1).map(str::to_owned))
            .expect("a v1 signature");
        let header = format!("t={t},v1={v1}");
        let a = post(
            &http,
            &st_url,
            tbody.clone(),
            &[h("stripe-signature", header.as_bytes())],
        )
        .await;
        a.assert_error(401, &format!("timestamp {t}"));
        cases.set(cases.get() + 1);
    }

    // Ids of 0 and 10,000 bytes, signed: in the body (Stripe) and in a header (GitHub).
    for id in [String::new(), "i".repeat(10_000)] {
        let body = json!({"id": id, "type": "charge.succeeded"}).to_string();
        let a = post(
            &http,
            &st_url,
            body.clone(),
            &st.headers(body.as_bytes(), &id, None),
        )
        .await;
        a.assert_error(400, &format!("Stripe id of {} bytes", id.len()));
        let mut headers = gh.headers(body.as_bytes(), "x", None);
        headers.retain(|(n, _)| n.as_str() != "x-github-delivery");
        headers.push(h("x-github-delivery", id.as_bytes()));
        let a = post(&http, &gh_url, body.clone(), &headers).await;
        a.assert_error(400, &format!("GitHub id of {} bytes", id.len()));
        cases.set(cases.get() + 2);
    }

    // Path tricks in the source name, with a body validly signed for `gh`: never routed to it.
    let pid = rand_id("path");
    let pbody = json!({"id": pid}).to_string();
    for path in [
        "/webhooks/..%2Fgh",
        "/webhooks/..%2F",
        "/webhooks/%00",
        "/webhooks/gh%00",
        "/webhooks/GH",
        "/webhooks/gh%2F..%2Fgh",
        "/webhooks/gh/",
        "/webhooks/gh/x",
        "/webhooks//gh",
        "/webhooks/../webhooks/gh/..",
    ] {
        let mut head = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: close",
            app.addr(),
            pbody.len()
        );
        for (name, value) in gh.headers(pbody.as_bytes(), &pid, None) {
            head.push_str(&format!("\r\n{name}: {}", value.to_str().expect("ascii")));
        }
        let a = raw_request(app.addr(), &head, &[pbody.clone().into_bytes()]).await;
        check(a, &format!("path {path}"));
    }

    assert_eq!(
        app.event_keys(),
        before,
        "a hostile request changed the event list"
    );
    let health = get(&http, &format!("{}/healthz", app.url())).await;
    assert_eq!(health.status, 200, "{}", health.text);
    eprintln!(
        "hostile: {} hostile requests, all 4xx with a JSON error, 0 stored; {:?}",
        cases.get(),
        started.elapsed()
    );
}
