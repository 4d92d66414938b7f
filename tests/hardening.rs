//! The defects an outside review of the core found (issue 13), each shown on a real `inbox serve` process:
//! `/healthz` after the store's writer thread died, axum's own rejections as JSON errors, a bad optional event type,
//! request bytes in memory over every connection, a body resent under a fresh id, and a dead notify URL at start-up.

mod common;

use std::time::{Duration, Instant};

use common::*;
use inbox_core::schemes::Scheme;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

const SECRET_VAR: &str = "HARDENING_GITHUB_SECRET";

fn github_source(name: &str, sink: &str, extra: &str) -> String {
    format!(
        "[sources.{name}]\nscheme = \"github\"\nsecrets = [\"env:{SECRET_VAR}\"]\n{extra}\
         handler = {{ kind = \"forward\", url = \"{sink}/{name}\", timeout = \"5s\" }}\n"
    )
}

async fn deliver(app: &App, source: &str, signer: &Signer, id: &str, event_type: &str, body: &str) -> Answer {
    post(
        &client(),
        &app.webhook_url(source),
        body.to_owned(),
        &signer.headers(body.as_bytes(), id, Some(event_type)),
    )
    .await
}

/// GIVEN a server whose SQLite writer thread panics at its second batch (the first delivery's create)
/// WHEN that delivery arrives
/// THEN it is answered 503 (nothing acknowledged), and `/healthz` turns red, so a supervisor restarts the process.
#[tokio::test(flavor = "multi_thread")]
async fn the_health_check_turns_red_when_the_writer_thread_dies() {
    let sink = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let app = spawn_app(
        &github_source("gh", &sink.url(), ""),
        &[
            (SECRET_VAR, &secret),
            ("INBOX_FAILPOINT", "sqlite_writer_batch@2:panic"),
        ],
    );
    let healthy = get(&client(), &format!("{}/healthz", app.url())).await;
    assert_eq!(healthy.status, 200, "{}", healthy.text);

    let signer = Signer::new(Scheme::Github, &secret);
    let a = deliver(&app, "gh", &signer, &rand_id("d"), "push", "{}").await;
    a.assert_error(503, "a delivery the writer never committed");
    assert!(
        app.log().contains("failpoint sqlite_writer_batch@2 hit"),
        "{}",
        app.log()
    );

    let health = get(&client(), &format!("{}/healthz", app.url())).await;
    health.assert_error(503, "/healthz after the writer thread died");
}

/// GIVEN a running server
/// WHEN a route is asked with the wrong method, or a path that is not UTF-8
/// THEN the answers are the contract's JSON errors, not axum's plain text.
#[tokio::test(flavor = "multi_thread")]
async fn axum_rejections_are_json_errors() {
    let sink = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let app = spawn_app(&github_source("gh", &sink.url(), ""), &[(SECRET_VAR, &secret)]);
    let wrong_method = get(&client(), &app.webhook_url("gh")).await;
    wrong_method.assert_error(405, "GET on the webhook route");
    let post_health = post(&client(), &format!("{}/healthz", app.url()), "", &[]).await;
    post_health.assert_error(405, "POST on /healthz");
    let bad_path = raw_request(
        app.addr(),
        "POST /webhooks/%FF%FE HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\nconnection: close",
        &[b"{}".to_vec()],
    )
    .await;
    bad_path.assert_error(404, "a source name that is not UTF-8");
    assert_eq!(app.status_counts().values().sum::<usize>(), 0);
}

/// GIVEN a GitHub source
/// WHEN a verified delivery carries an event type of 300 bytes, or one with a control character (a tab)
/// THEN it is accepted and stored without the type, and its record says why (a 400 would be answered to every
/// retry of it, forever).
#[tokio::test(flavor = "multi_thread")]
async fn a_bad_optional_event_type_is_left_out_not_refused() {
    let sink = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let app = spawn_app(&github_source("gh", &sink.url(), ""), &[(SECRET_VAR, &secret)]);
    let signer = Signer::new(Scheme::Github, &secret);
    for (n, bad_type) in ["x".repeat(300), "push\tnow".to_owned()].iter().enumerate() {
        let id = rand_id("t");
        let body = json!({"n": n}).to_string();
        let a = deliver(&app, "gh", &signer, &id, bad_type, &body).await;
        assert_eq!(a.status, 200, "{}", a.text);
        assert_eq!(a.json["status"], "accepted", "{}", a.text);
        let stored = app.event("gh", &id).expect("stored");
        assert_eq!(stored["event_type"], Value::Null, "{stored}");
        let headers = stored["headers"].to_string();
        assert!(
            headers.contains("x-inbox-note") && headers.contains("event type left out"),
            "{stored}"
        );
    }
    wait_until(Duration::from_secs(10), "both are forwarded", || {
        sink.count() == 2
    });
}

/// Opens a request that declares `declared` bytes of body and sends only `sent` of them, then waits.
async fn partial_request(app: &App, declared: usize, sent: usize) -> tokio::net::TcpStream {
    let mut stream = tokio::net::TcpStream::connect(app.addr()).await.expect("connect");
    let head = format!(
        "POST /webhooks/gh HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         x-github-delivery: slow\r\nx-hub-signature-256: sha256=00\r\ncontent-length: {declared}\r\n\r\n{}",
        "p".repeat(sent)
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    stream
}

/// A server holding at most 3,000 request bytes in memory, with a GitHub source limited to 1,500-byte bodies.
async fn bounded_app() -> (Sink, String, App) {
    let sink = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let app = spawn_app(
        &format!(
            "[server]\nmax_inflight_bytes = 3000\n{}",
            github_source("gh", &sink.url(), "max_body_bytes = 1500\n")
        ),
        &[(SECRET_VAR, &secret)],
    );
    (sink, secret, app)
}

/// Delivers until the answer has `status`, for up to 5 s (the slow clients' bytes reach the server in a moment).
async fn deliver_until(app: &App, signer: &Signer, id: &str, body: &str, status: u16) -> Answer {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let a = deliver(app, "gh", signer, id, "push", body).await;
        if a.status == status || Instant::now() > deadline {
            return a;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// GIVEN `max_inflight_bytes = 3000` and a source limit of 1500 bytes
/// WHEN two slow clients have each sent 1400 bytes of a body they have not finished
/// THEN a third request (1000 bytes) is answered 503 with Retry-After, and once the slow clients go away the same
/// request is accepted.
#[tokio::test(flavor = "multi_thread")]
async fn request_bytes_in_memory_are_bounded_over_every_connection() {
    let (_sink, secret, app) = bounded_app().await;
    let mut slow = Vec::new();
    for _ in 0..2 {
        slow.push(partial_request(&app, 1500, 1400).await);
    }
    let signer = Signer::new(Scheme::Github, &secret);
    let body = json!({"pad": "p".repeat(1000)}).to_string();
    let refused = deliver_until(&app, &signer, &rand_id("probe"), &body, 503).await;
    refused.assert_error(503, "a request past the bytes in memory");
    drop(slow);
    let accepted = deliver_until(&app, &signer, &rand_id("b"), &body, 200).await;
    assert_eq!(accepted.status, 200, "{}", accepted.text);
    assert_eq!(accepted.json["status"], "accepted", "{}", accepted.text);
}

/// GIVEN `max_inflight_bytes = 3000` and a source limit of 1500 bytes
/// WHEN ten slow clients have each declared a 1500-byte body (together five times the bound) and sent one byte
/// THEN a normal 1000-byte delivery beside them is accepted: a declared length reserves nothing, only bytes that
/// arrived are held.
#[tokio::test(flavor = "multi_thread")]
async fn declared_lengths_of_slow_clients_keep_no_room_from_normal_deliveries() {
    let (sink, secret, app) = bounded_app().await;
    let mut slow = Vec::new();
    for _ in 0..10 {
        slow.push(partial_request(&app, 1500, 1).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let signer = Signer::new(Scheme::Github, &secret);
    for i in 0..3 {
        let body = json!({"n": i, "pad": "p".repeat(1000)}).to_string();
        let a = deliver(&app, "gh", &signer, &rand_id("n"), "push", &body).await;
        assert_eq!(a.status, 200, "{}", a.text);
        assert_eq!(a.json["status"], "accepted", "{}", a.text);
    }
    wait_until(Duration::from_secs(10), "the deliveries are forwarded", || {
        sink.count() == 3
    });
    drop(slow);
}

/// The retry-after of a 503 is part of the contract.
#[tokio::test(flavor = "multi_thread")]
async fn a_saturated_server_says_when_to_retry() {
    let sink = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let app = spawn_app(
        &format!(
            "[server]\nmax_inflight_bytes = 1500\n{}",
            github_source("gh", &sink.url(), "max_body_bytes = 1500\n")
        ),
        &[(SECRET_VAR, &secret)],
    );
    let stream = partial_request(&app, 1500, 1499).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let a = raw_request(
        app.addr(),
        "POST /webhooks/gh HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\nconnection: close",
        &[b"{}".to_vec()],
    )
    .await;
    a.assert_error(503, "saturated");
    assert!(
        a.text.to_ascii_lowercase().contains("retry-after: 1"),
        "{}",
        a.text
    );
    drop(stream);
}

/// GIVEN a GitHub source (the scheme signs the body, not the delivery id) and one with the option turned off
/// WHEN a captured delivery is resent under a fresh delivery id
/// THEN the first source answers it as a duplicate of the stored event and runs nothing again; the second
/// accepts it as a new event.
#[tokio::test(flavor = "multi_thread")]
async fn a_body_resent_under_a_fresh_id_is_a_duplicate_of_the_stored_event() {
    let sink = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let app = spawn_app(
        &format!(
            "{}{}",
            github_source("gh", &sink.url(), ""),
            github_source("open", &sink.url(), "refuse_resent_bodies = false\n")
        ),
        &[(SECRET_VAR, &secret)],
    );
    let signer = Signer::new(Scheme::Github, &secret);
    let body = json!({"action": "opened", "number": 7}).to_string();
    let (first, again) = (rand_id("d"), rand_id("d"));
    let a = deliver(&app, "gh", &signer, &first, "pull_request", &body).await;
    assert_eq!(a.json["status"], "accepted", "{}", a.text);
    let b = deliver(&app, "gh", &signer, &again, "pull_request", &body).await;
    assert_eq!(b.status, 200, "{}", b.text);
    assert_eq!(b.json["status"], "duplicate", "{}", b.text);
    assert_eq!(b.json["event_id"], first.as_str(), "{}", b.text);
    assert!(app.event("gh", &again).is_none(), "the resend was stored");

    for id in [&first, &again] {
        let c = deliver(&app, "open", &signer, id, "pull_request", &body).await;
        assert_eq!(c.json["status"], "accepted", "{}", c.text);
    }
    wait_until(Duration::from_secs(10), "three forwards", || sink.count() == 3);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(sink.count(), 3, "the resend ran the handler");
}

/// GIVEN three dead events whose alarms go to a notify URL that never answers
/// WHEN the server is killed and started again (its start-up sweep finds the three alarms still owed)
/// THEN it listens at once, and a new event completes while the alarms hang: alarms go out beside the work.
#[tokio::test(flavor = "multi_thread")]
async fn a_dead_notify_url_holds_up_neither_start_up_nor_processing() {
    let sink = Sink::start(&[400, 400, 400], 200).await;
    let notify = Sink::start(&[], 200).await;
    notify.delay(Duration::from_secs(60));
    let secret = rand_secret();
    let mut app = spawn_app(
        &format!(
            "[alarm]\nnotify_url = \"{}/alerts\"\n[sweeper]\ngrace = \"0\"\n{}",
            notify.url(),
            github_source("gh", &sink.url(), "")
        ),
        &[(SECRET_VAR, &secret)],
    );
    let signer = Signer::new(Scheme::Github, &secret);
    let mut dead = Vec::new();
    for n in 0..3 {
        let id = rand_id("dead");
        let a = deliver(&app, "gh", &signer, &id, "push", &json!({"n": n}).to_string()).await;
        assert_eq!(a.json["status"], "accepted", "{}", a.text);
        dead.push(id);
    }
    wait_until(Duration::from_secs(10), "three DEAD", || {
        dead.iter().all(|id| app.status_of("gh", id) == "DEAD")
    });
    wait_until(Duration::from_secs(10), "their alarms are in flight", || {
        notify.count() >= 3
    });

    app.kill();
    let started = Instant::now();
    app.restart();
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "start-up took {took:?} with alarms owed"
    );
    let id = rand_id("live");
    let a = deliver(&app, "gh", &signer, &id, "push", "{\"live\":true}").await;
    assert_eq!(a.json["status"], "accepted", "{}", a.text);
    wait_until(
        Duration::from_secs(5),
        "the new event completes beside hanging alarms",
        || app.status_of("gh", &id) == "COMPLETED",
    );
}

/// Issue 14, item 1 (the public edge): a flood of unsigned requests is logged as counts, one line a minute per
/// source and reason, not one line a request: it cannot turn into a logging bill.
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_bad_signatures_logs_counts_not_lines() {
    let sink = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let app = spawn_app(&github_source("gh", &sink.url(), ""), &[(SECRET_VAR, &secret)]);
    let forger = Signer::new(Scheme::Github, "not-the-secret");
    let body = json!({"action": "opened"}).to_string();
    for _ in 0..300 {
        let a = deliver(&app, "gh", &forger, &rand_id("f"), "push", &body).await;
        assert_eq!(a.status, 401, "{}", a.text);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = app.log();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("rejected")).collect();
    // One line for the first of them; a second if the flood crossed a minute's boundary.
    assert!(
        (1..=2).contains(&lines.len()),
        "{} lines: {lines:#?}",
        lines.len()
    );
    assert!(lines[0].contains("signature"), "{}", lines[0]);
}
