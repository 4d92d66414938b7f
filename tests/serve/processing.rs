//! Processing, end to end: a real `inbox serve` forwards accepted events to a sink in the test, retries what
//! fails retryably with a backoff, buries what fails permanently (one alarm), runs replayed events again, exposes
//! its counters, and finishes an in-flight handler on SIGTERM.

use std::time::Duration;

use crate::common::*;
use inbox_core::schemes::{Algorithm, Encoding, HmacParams, Locator, Scheme};
use reqwest::header::HeaderName;
use serde_json::{json, Value};

const SOURCE: &str = "orders";
const SECRET_VAR: &str = "ORDERS_WEBHOOK_SECRET";

/// The source's TOML: the generic HMAC scheme (id and type in the JSON body), forwarding to `sink`.
fn source_toml(sink: &str) -> String {
    format!(
        "[sources.{SOURCE}]\nscheme = \"hmac\"\nsignature_header = \"X-Orders-Signature\"\nprefix = \"sha256=\"\n\
         id = \"json:/id\"\ntype = \"json:/type\"\nsecrets = [\"env:{SECRET_VAR}\"]\n\
         handler = {{ kind = \"forward\", url = \"{sink}/orders\", timeout = \"5s\" }}\n"
    )
}

fn signer(secret: &str) -> Signer {
    Signer::new(
        Scheme::from(HmacParams {
            header: HeaderName::from_static("x-orders-signature"),
            algorithm: Algorithm::Sha256,
            encoding: Encoding::Hex,
            prefix: "sha256=".into(),
            id: Locator::Json("/id".into()),
            event_type: Some(Locator::Json("/type".into())),
        }),
        secret,
    )
}

/// Sends one fresh signed event; asserts it was accepted; returns its id and body.
async fn send_event(app: &App, signer: &Signer) -> (String, String) {
    let id = rand_id("ord");
    let body = json!({"id": id, "type": "order.paid", "amount": 4200}).to_string();
    let a = post(
        &client(),
        &app.webhook_url(SOURCE),
        body.clone(),
        &signer.headers(body.as_bytes(), &id, None),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.json["status"], "accepted", "{}", a.text);
    (id, body)
}

fn event(app: &App, id: &str) -> Value {
    app.event(SOURCE, id).expect("the event is stored")
}

/// GIVEN a sink that answers 503, 503, then 200, and `retry.base = 200ms`
/// WHEN one event arrives
/// THEN it is retried and ends COMPLETED after 3 attempts, and the sink saw the same Idempotency-Key three times
/// with X-Inbox-Attempt 1, 2, 3 and the original body.
#[tokio::test(flavor = "multi_thread")]
async fn retryable_failures_are_retried_with_the_same_idempotency_key() {
    let sink = Sink::start(&[503, 503], 200).await;
    let secret = rand_secret();
    let app = spawn_app(
        &format!("[retry]\nbase = \"200ms\"\n{}", source_toml(&sink.url())),
        &[(SECRET_VAR, &secret)],
    );
    let (id, body) = send_event(&app, &signer(&secret)).await;

    wait_until(Duration::from_secs(10), format!("{id} is COMPLETED"), || {
        app.status_of(SOURCE, &id) == "COMPLETED"
    });
    let stored = event(&app, &id);
    assert_eq!(stored["attempts"], 3, "{stored}");
    assert!(stored["completed_at"].is_string(), "{stored}");

    let seen = sink.requests();
    assert_eq!(seen.len(), 3, "the sink saw {} deliveries", seen.len());
    let key = format!("{SOURCE}:{id}");
    for (i, r) in seen.iter().enumerate() {
        assert_eq!(
            r.header("idempotency-key").as_deref(),
            Some(key.as_str()),
            "delivery {i}"
        );
        assert_eq!(
            r.header("x-inbox-attempt"),
            Some((i + 1).to_string()),
            "delivery {i}"
        );
        assert_eq!(r.body, body.as_bytes(), "delivery {i} forwards the original body");
        assert_eq!(r.header("content-type").as_deref(), Some("application/json"));
        assert_eq!(r.path, "/orders");
    }
}

/// GIVEN a sink that answers 400 (permanent) and an alarm `notify_url`
/// WHEN one event arrives
/// THEN it is DEAD after one attempt and the alarm got exactly one JSON summary;
/// WHEN the sink is fixed and `inbox replay` runs as another process while the server runs
/// THEN the server picks the replay up and the event ends COMPLETED.
#[tokio::test(flavor = "multi_thread")]
async fn permanent_failure_is_dead_alarmed_once_and_replayable() {
    let sink = Sink::start(&[], 400).await;
    let alarm = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let app = spawn_app(
        &format!(
            "[retry]\nbase = \"200ms\"\n[alarm]\nnotify_url = \"{}/alarm\"\n{}",
            alarm.url(),
            source_toml(&sink.url())
        ),
        &[(SECRET_VAR, &secret)],
    );
    let (id, _) = send_event(&app, &signer(&secret)).await;

    wait_until(Duration::from_secs(10), format!("{id} is DEAD"), || {
        app.status_of(SOURCE, &id) == "DEAD"
    });
    let dead = event(&app, &id);
    assert_eq!(dead["attempts"], 1, "a permanent error is not retried: {dead}");
    assert!(
        dead["last_error"].as_str().unwrap_or_default().contains("400"),
        "{dead}"
    );
    assert_eq!(sink.count(), 1);

    wait_until(Duration::from_secs(10), "the alarm is sent", || {
        alarm.count() >= 1
    });
    // The one wait that is not for an effect: a second alarm must NOT come (the sweeper runs every second when
    // the store changes; this outlasts a few of those).
    std::thread::sleep(Duration::from_secs(3));
    let alarms = alarm.requests();
    assert_eq!(alarms.len(), 1, "exactly one alarm per dead event");
    let summary = alarms[0].json();
    assert_eq!(summary["source"], SOURCE, "{summary}");
    assert_eq!(summary["event_id"], id.as_str(), "{summary}");
    assert_eq!(summary["status"], "DEAD", "{summary}");
    assert_eq!(summary["attempts"], 1, "{summary}");
    assert!(
        alarms[0]
            .header("content-type")
            .is_some_and(|c| c.starts_with("application/json")),
        "{:?}",
        alarms[0].headers
    );

    // Fix the downstream, then replay from another process while the server runs.
    sink.answer(200);
    let out = app.inbox(&["replay"]);
    assert!(
        out.status.success(),
        "inbox replay failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("replayed 1 event"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    wait_until(
        Duration::from_secs(10),
        format!("the replayed {id} is COMPLETED"),
        || app.status_of(SOURCE, &id) == "COMPLETED",
    );
    let done = event(&app, &id);
    assert_eq!(done["replays"], 1, "{done}");
    assert_eq!(done["attempts"], 1, "a replay resets the attempts: {done}");
    let seen = sink.requests();
    assert_eq!(seen.len(), 2, "one delivery before the replay, one after");
    assert_eq!(seen[1].header("x-inbox-attempt").as_deref(), Some("1"));
    assert_eq!(seen[1].header("idempotency-key"), Some(format!("{SOURCE}:{id}")));
    assert_eq!(alarm.count(), 1, "no alarm for a replayed event that completed");
}

/// GIVEN a sweeper that looks every second, a sink that answers 400, and an alarm endpoint that fails once
/// WHEN an event dies
/// THEN the alarm is sent again until it goes through, and never after that.
#[tokio::test(flavor = "multi_thread")]
async fn a_dead_event_is_alarmed_until_the_alarm_goes_through_and_then_never_again() {
    let sink = Sink::start(&[], 400).await;
    let alarm = Sink::start(&[500], 200).await;
    let secret = rand_secret();
    let app = spawn_app(
        &format!(
            "[sweeper]\ninterval = \"1s\"\ngrace = \"1s\"\n[alarm]\nnotify_url = \"{}/alarm\"\n{}",
            alarm.url(),
            source_toml(&sink.url())
        ),
        &[(SECRET_VAR, &secret)],
    );
    let (id, _) = send_event(&app, &signer(&secret)).await;
    wait_until(Duration::from_secs(10), format!("{id} is DEAD"), || {
        app.status_of(SOURCE, &id) == "DEAD"
    });
    wait_until(
        Duration::from_secs(15),
        "the alarm is sent again after the failed one",
        || alarm.count() >= 2,
    );
    // Not an effect but its absence: several sweeps (one a second) must not send it again.
    std::thread::sleep(Duration::from_secs(3));
    let alarms = alarm.requests();
    assert_eq!(
        alarms.len(),
        2,
        "one failed alarm, one that went through, and no more"
    );
    for a in &alarms {
        assert_eq!(a.json()["event_id"], id.as_str(), "{:?}", a.json());
    }
    assert_eq!(sink.count(), 1, "a dead event is not run again by the sweeper");
}

/// The value of one Prometheus sample line `name{labels} value`, if present.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

/// GIVEN one accepted event (completed), two duplicates (one with another body) and one bad signature
/// THEN /metrics counts each, and /healthz answers 200.
#[tokio::test(flavor = "multi_thread")]
async fn metrics_count_accepted_duplicate_rejected_and_completed() {
    let sink = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let app = spawn_app(&source_toml(&sink.url()), &[(SECRET_VAR, &secret)]);
    let http = client();
    let signer = signer(&secret);
    let url = app.webhook_url(SOURCE);

    let (id, body) = send_event(&app, &signer).await;
    let dup = post(
        &http,
        &url,
        body.clone(),
        &signer.headers(body.as_bytes(), &id, None),
    )
    .await;
    assert_eq!(dup.json["status"], "duplicate", "{}", dup.text);
    // The sender breaks its contract: same id, another body. Still a duplicate; the first payload stands.
    let changed = json!({"id": id, "type": "order.paid", "amount": 1}).to_string();
    let dup = post(
        &http,
        &url,
        changed.clone(),
        &signer.headers(changed.as_bytes(), &id, None),
    )
    .await;
    assert_eq!(dup.json["status"], "duplicate", "{}", dup.text);
    assert_eq!(
        event(&app, &id)["payload"],
        body.as_str(),
        "the first payload stands"
    );
    let forged = Signer::new(signer.scheme.clone(), &rand_secret());
    let bad = json!({"id": rand_id("ord"), "type": "order.paid"}).to_string();
    let a = post(
        &http,
        &url,
        bad.clone(),
        &forged.headers(bad.as_bytes(), "x", None),
    )
    .await;
    a.assert_error(401, "forged");
    wait_until(Duration::from_secs(10), format!("{id} is COMPLETED"), || {
        app.status_of(SOURCE, &id) == "COMPLETED"
    });

    let health = get(&http, &format!("{}/healthz", app.url())).await;
    assert_eq!(health.status, 200, "{}", health.text);

    let m = get(&http, &format!("{}/metrics", app.url())).await;
    assert_eq!(m.status, 200, "{}", m.text);
    let text = m.text;
    let label = format!("{{source=\"{SOURCE}\"}}");
    assert_eq!(
        sample(&text, &format!("inbox_accepted_total{label}")),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, &format!("inbox_duplicate_total{label}")),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, &format!("inbox_payload_mismatch_total{label}")),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, &format!("inbox_completed_total{label}")),
        Some(1.0),
        "{text}"
    );
    let rejected: f64 = text
        .lines()
        .filter(|l| l.starts_with(&format!("inbox_rejected_total{{source=\"{SOURCE}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(rejected, 1.0, "one rejected request: {text}");
}

/// GIVEN a sink that takes 1 s to answer, with the handler in flight
/// WHEN the server gets SIGTERM
/// THEN it exits 0, and after a restart on the same data dir the event ends COMPLETED, delivered with one
/// Idempotency-Key.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_with_a_handler_in_flight_exits_cleanly_and_loses_nothing() {
    let sink = Sink::start(&[], 200).await;
    sink.delay(Duration::from_secs(1));
    let secret = rand_secret();
    let mut app = spawn_app(
        &format!("[retry]\nbase = \"200ms\"\n{}", source_toml(&sink.url())),
        &[(SECRET_VAR, &secret)],
    );
    let (id, _) = send_event(&app, &signer(&secret)).await;
    wait_until(Duration::from_secs(10), "the handler is in flight", || {
        sink.count() >= 1
    });

    app.terminate();

    app.restart();
    wait_until(
        Duration::from_secs(15),
        format!("{id} is COMPLETED after the restart"),
        || app.status_of(SOURCE, &id) == "COMPLETED",
    );
    let seen = sink.requests();
    assert!((1..=2).contains(&seen.len()), "delivered {} times", seen.len());
    for r in &seen {
        assert_eq!(r.header("idempotency-key"), Some(format!("{SOURCE}:{id}")));
    }
    // The restarted server serves.
    let health = get(&client(), &format!("{}/healthz", app.url())).await;
    assert_eq!(health.status, 200);
}
