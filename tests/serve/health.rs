//! Delivery health on a real `inbox serve` (docs/DESIGN.md "Delivery health"): each alarm reaches `notify_url` once
//! per episode when it should, and the server stays quiet under normal traffic.

use std::time::Duration;

use crate::common::*;
use inbox_core::schemes::Scheme;
use serde_json::{json, Value};

const SECRET_VAR: &str = "HEALTH_GITHUB_SECRET";

fn config(notify: &str, sink: &str) -> String {
    format!(
        "[alarm]\nnotify_url = \"{notify}/alerts\"\n\
         [sources.gh]\nscheme = \"github\"\nsecrets = [\"env:{SECRET_VAR}\"]\nrefuse_resent_bodies = false\n\
         handler = {{ kind = \"forward\", url = \"{sink}/gh\", timeout = \"5s\" }}\n"
    )
}

fn alarms(notify: &Sink) -> Vec<Value> {
    notify.requests().iter().map(Recorded::json).collect()
}

async fn send(app: &App, signer: &Signer, id: &str, body: &str) -> Answer {
    post(
        &client(),
        &app.webhook_url("gh"),
        body.to_owned(),
        &signer.headers(body.as_bytes(), id, Some("push")),
    )
    .await
}

/// GIVEN normal traffic (distinct events, a few retries) THEN no alarm; WHEN a sender retries in a loop
/// (25 duplicates of 2 events) THEN one `duplicates_out_of_proportion`; WHEN one id comes with another payload
/// THEN one `payload_mismatch`; WHEN the secret is wrong for every delivery THEN one `signatures_refused`.
#[tokio::test(flavor = "multi_thread")]
async fn each_delivery_health_alarm_fires_once_and_only_when_it_should() {
    let sink = Sink::start(&[], 200).await;
    let notify = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let app = spawn_app(&config(&notify.url(), &sink.url()), &[(SECRET_VAR, &secret)]);
    let signer = Signer::new(Scheme::Github, &secret);

    // Normal traffic: 20 events, 5 of them delivered twice.
    for i in 0..20 {
        let id = format!("norm{i}");
        let body = json!({"n": i}).to_string();
        assert_eq!(send(&app, &signer, &id, &body).await.status, 200);
        if i % 4 == 0 {
            assert_eq!(send(&app, &signer, &id, &body).await.json["status"], "duplicate");
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        alarms(&notify).is_empty(),
        "alarms under normal traffic: {:?}",
        alarms(&notify)
    );

    // A retry loop: 45 duplicates against 20 accepted is over the 1.0 ratio with at least 20 duplicates.
    for i in 0..45 {
        let id = format!("norm{}", i % 2);
        let body = json!({"n": i % 2}).to_string();
        assert_eq!(send(&app, &signer, &id, &body).await.json["status"], "duplicate");
    }
    wait_until(Duration::from_secs(5), "the duplicates alarm", || {
        !alarms(&notify).is_empty()
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let raised = alarms(&notify);
    assert_eq!(raised.len(), 1, "once per episode: {raised:?}");
    assert_eq!(raised[0]["alarm"], "duplicates_out_of_proportion");
    assert_eq!(raised[0]["source"], "gh");
    assert!(app.log().contains("more than 10 times"), "the one-event warning");

    // One id, another payload.
    let a = send(&app, &signer, "norm3", "{\"n\":\"changed\"}").await;
    assert_eq!(a.json["status"], "duplicate");
    let b = send(&app, &signer, "norm5", "{\"n\":\"changed too\"}").await;
    assert_eq!(b.json["status"], "duplicate");
    wait_until(Duration::from_secs(5), "the mismatch alarm", || {
        alarms(&notify).len() >= 2
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let raised = alarms(&notify);
    assert_eq!(raised.len(), 2, "{raised:?}");
    assert_eq!(raised[1]["alarm"], "payload_mismatch");
    assert!(
        !raised[1].to_string().contains("changed"),
        "a payload in an alarm"
    );

    // A wrong secret on a source of its own, so the window holds refusals only.
    drop(app);
    let app = spawn_app(&config(&notify.url(), &sink.url()), &[(SECRET_VAR, &secret)]);
    let wrong = Signer::new(Scheme::Github, &rand_secret());
    for i in 0..8 {
        let a = send(&app, &wrong, &format!("bad{i}"), "{}").await;
        assert_eq!(a.status, 401, "{}", a.text);
    }
    wait_until(Duration::from_secs(5), "the 401 alarm", || {
        alarms(&notify).len() >= 3
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let raised = alarms(&notify);
    assert_eq!(raised.len(), 3, "{raised:?}");
    assert_eq!(raised[2]["alarm"], "signatures_refused");
    assert!(!raised[2].to_string().contains(&secret), "a secret in an alarm");
}
