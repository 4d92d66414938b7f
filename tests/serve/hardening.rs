//! The defects an outside review of the core found, each shown on a real `inbox serve` process:
//! `/healthz` after the store's writer thread died, axum's own rejections as JSON errors, a bad optional event type,
//! request bytes in memory over every connection, a body resent under a fresh id (stored and marked, or refused by
//! opt-in), and a dead notify URL at start-up.

use std::time::{Duration, Instant};

use crate::common::*;
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

/// Every example payload of `@octokit/webhooks-examples` 7.6.1 (npm, MIT; `api.github.com/index.json`, each example
/// as compact JSON beside its event name, zstd-compressed): 329 deliveries, of which five repeat an earlier body of
/// the same event byte for byte (`github_app_authorization` revoked, `membership` removed, `organization`
/// member_added, `org_block` blocked, `sponsorship` created), as a user blocked, unblocked and blocked again would.
fn octokit_examples() -> Vec<(String, String)> {
    let packed = include_bytes!("../data/octokit-webhooks-examples-7.6.1.json.zst");
    let json = zstd::decode_all(&packed[..]).expect("the examples decompress");
    serde_json::from_slice(&json).expect("the examples are a list of [event, body]")
}

/// GIVEN a GitHub source (the scheme signs the body, not the delivery id), as it comes by default
/// WHEN every octokit example payload is sent as its own delivery
/// THEN all 329 are stored and forwarded once byte for byte, the five repeated bodies are marked `resent_of` the
/// delivery that carried them first, and the resent-body alarm goes out once for the episode.
/// AND a source that opts in to refusing (`refuse_resent_bodies = true`) answers those five, and only those, as
/// duplicates of the stored event, and runs nothing for them.
#[tokio::test(flavor = "multi_thread")]
async fn a_resent_body_is_stored_and_marked_by_default_and_refused_only_by_opt_in() {
    let examples = octokit_examples();
    assert_eq!(examples.len(), 329);
    let sink = Sink::start(&[], 200).await;
    let notify = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let app = spawn_app(
        &format!(
            "[alarm]\nnotify_url = \"{}/alerts\"\n{}{}",
            notify.url(),
            github_source("gh", &sink.url(), ""),
            github_source("strict", &sink.url(), "refuse_resent_bodies = true\n")
        ),
        &[(SECRET_VAR, &secret)],
    );
    let signer = Signer::new(Scheme::Github, &secret);

    let mut first_of = std::collections::HashMap::<(&str, &str), String>::new();
    let mut resent = Vec::new();
    let mut sent = std::collections::HashMap::new();
    for (n, (event, body)) in examples.iter().enumerate() {
        let id = format!("octo-{n}");
        let a = deliver(&app, "gh", &signer, &id, event, body).await;
        assert_eq!(a.json["status"], "accepted", "example {n} ({event}): {}", a.text);
        match first_of.get(&(event.as_str(), body.as_str())) {
            Some(first) => resent.push((id.clone(), first.clone())),
            None => {
                first_of.insert((event, body), id.clone());
            }
        }
        sent.insert(id, body.clone());
    }
    assert_eq!(resent.len(), 5, "the package's repeated bodies");
    app.wait_all_completed(329, Duration::from_secs(60), "every example");
    assert_eq!(app.events().len(), 329);
    for (id, first) in &resent {
        let e = app.event("gh", id).expect("a resent body was stored");
        assert_eq!(e["resent_of"], first.as_str(), "{e}");
        assert_eq!(e["status"], "COMPLETED", "{e}");
    }
    let (first, _) = &resent[0];
    assert_eq!(
        app.event("gh", &first_of.values().next().unwrap().clone())
            .unwrap()["resent_of"],
        Value::Null
    );
    let shown = app.inbox(&["events", "show", "gh", first]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    let line = shown.lines().find(|l| l.starts_with("resent_of:"));
    assert_eq!(
        line.map(|l| l.split_whitespace().last().unwrap_or("")),
        Some(resent[0].1.as_str()),
        "`inbox events show` names the mark: {shown}"
    );
    wait_until(Duration::from_secs(10), "329 forwards", || sink.count() >= 329);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let forwarded = sink.requests();
    assert_eq!(forwarded.len(), 329, "each example forwarded once");
    let mut seen = std::collections::HashSet::new();
    for r in &forwarded {
        let key = r.header("idempotency-key").expect("an idempotency key");
        let id = key.strip_prefix("gh:").expect("the source's key").to_owned();
        assert_eq!(r.body, sent[&id].as_bytes(), "{id} forwarded byte for byte");
        assert!(seen.insert(id), "forwarded twice");
    }
    wait_until(Duration::from_secs(5), "the resent-body alarm", || {
        notify
            .requests()
            .iter()
            .any(|r| r.json()["alarm"] == "resent_body")
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let alarms: Vec<Value> = notify.requests().iter().map(Recorded::json).collect();
    let raised: Vec<&Value> = alarms.iter().filter(|a| a["alarm"] == "resent_body").collect();
    assert_eq!(raised.len(), 1, "once per episode: {alarms:?}");
    assert_eq!(raised[0]["resent_of"], resent[0].1.as_str(), "{alarms:?}");
    assert!(
        !raised[0].to_string().contains("\"sender\""),
        "a payload in an alarm"
    );
    let metrics = get(&client(), &format!("{}/metrics", app.url())).await;
    assert!(
        metrics.text.contains("inbox_resent_body_total{source=\"gh\"} 5"),
        "{}",
        metrics.text
    );

    // The opt-in: the same deliveries, refused where the body repeats.
    let mut refused = Vec::new();
    for (n, (event, body)) in examples.iter().enumerate() {
        let id = format!("strict-{n}");
        let a = deliver(&app, "strict", &signer, &id, event, body).await;
        assert_eq!(a.status, 200, "{}", a.text);
        if a.json["status"] == "duplicate" {
            refused.push((id, a.json["event_id"].as_str().unwrap().to_owned()));
        } else {
            assert_eq!(a.json["status"], "accepted", "{}", a.text);
        }
    }
    let want: Vec<(String, String)> = resent
        .iter()
        .map(|(id, first)| (id.replace("octo", "strict"), first.replace("octo", "strict")))
        .collect();
    assert_eq!(
        refused, want,
        "only the repeated bodies are refused, as duplicates of the first"
    );
    app.wait_all_completed(329 + 324, Duration::from_secs(60), "the strict source's events");
    for (id, _) in &refused {
        assert!(app.event("strict", id).is_none(), "a refused body was stored");
    }
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

/// A flood of unsigned requests is logged as counts, one line a minute per
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
