//! Retention against the template: a body kept in S3 expires within a day of its event (a dead one's never), and
//! a config whose retention the payload bucket does not expire by is refused.

use std::time::Duration;

use inbox_core::aws::init::QueueSettings;
use inbox_core::config::Config;
use inbox_core::model::Status;
use inbox_core::ports::{Ledger, Queue};

use crate::lifecycle;
use crate::stack::{bodies_in_s3, deliver, emulator, key, noise, poll_until, stack, Stored};

/// A body kept in S3 goes within a day of its event's expiry, and a dead event's body stays.
/// One object per event; the processor tags it when its event completes; the template's lifecycle rule (read from
/// `infra/template.yaml`, evaluated as S3 documents it) expires tagged objects only.
#[tokio::test]
async fn a_body_in_s3_expires_within_a_day_of_its_event_and_a_dead_ones_never() {
    let Some(sdk) = emulator().await else { return };
    let stack = stack(&sdk, QueueSettings::default(), "").await;
    let rules = lifecycle::of_the_template();
    let big = |id: &str| {
        serde_json::json!({"id": id, "object": "event", "type": "t", "pad": noise(600 * 1024)}).to_string()
    };
    // GIVEN two events whose bodies are too large for an item: one completes, one dies before it runs
    for id in ["evt_big_done", "evt_big_dead"] {
        assert_eq!(deliver(&stack, &big(id)).await.0, 200);
    }
    stack
        .rt
        .ledger
        .mark_dead(&key("evt_big_dead"), "buried by the test")
        .await
        .unwrap();
    poll_until(&stack, "evt_big_done", Status::Completed, Duration::from_secs(30)).await;

    // THEN each has its own object; the completed one's expires within a day after its event does, never before
    let expiry_of = |objects: &[Stored], id: &str| {
        let (key, tags, created) = objects
            .iter()
            .find(|(k, _, _)| k.starts_with(&format!("payloads/stripe/{id}/")))
            .unwrap_or_else(|| panic!("no object for {id}: {objects:?}"));
        lifecycle::expiry(&rules, key, tags, *created)
    };
    let objects = bodies_in_s3(&sdk, &stack).await;
    assert_eq!(objects.len(), 2, "{objects:?}");
    let done = stack.rt.ledger.get(&key("evt_big_done")).await.unwrap().unwrap();
    let event_expiry = done.expires_at.unwrap();
    let body_expiry = expiry_of(&objects, "evt_big_done").expect("the completed event's body expires");
    assert!(
        (event_expiry..=event_expiry + 86_400_000).contains(&body_expiry),
        "event expires at {event_expiry}, its body at {body_expiry}"
    );
    // AND the dead one's never does
    assert_eq!(expiry_of(&objects, "evt_big_dead"), None);

    // AND a forced replay gives the reopened event a copy of the body that does not count down (pending until its
    // claim keeps it: gone only after any message could have been claimed), then starts it over. An event's newest
    // object lists first under its prefix.
    let replay = stack.rt.ledger.replay(&key("evt_big_done"), true).await.unwrap();
    assert_eq!(replay, inbox_core::ports::Replay::Replayed);
    let reopened = expiry_of(&bodies_in_s3(&sdk, &stack).await, "evt_big_done");
    let two_weeks = inbox_core::time::now_ms() + 14 * 86_400_000;
    assert!(reopened.is_none_or(|at| at >= two_weeks), "{reopened:?}");
    stack
        .rt
        .queue
        .enqueue(&key("evt_big_done"), Duration::ZERO)
        .await
        .unwrap();
    poll_until(&stack, "evt_big_done", Status::Completed, Duration::from_secs(30)).await;
    let again = stack.rt.ledger.get(&key("evt_big_done")).await.unwrap().unwrap();
    let body_expiry = expiry_of(&bodies_in_s3(&sdk, &stack).await, "evt_big_done").unwrap();
    let event_expiry = again.expires_at.unwrap();
    assert!((event_expiry..=event_expiry + 86_400_000).contains(&body_expiry));
    assert_eq!(
        stack
            .rt
            .ledger
            .get(&key("evt_big_done"))
            .await
            .unwrap()
            .unwrap()
            .payload
            .len(),
        big("evt_big_done").len(),
        "the body reads back whole"
    );
}

/// The config's retention and the template's RetentionDays (the bucket's expiry of bodies) must agree.
#[test]
fn a_retention_the_payload_bucket_does_not_expire_by_is_refused() {
    let config = |days: u32| {
        Config::from_toml(&format!(
            "retention_days = {days}\n[sources.s]\nscheme = \"stripe\"\nsecrets = [\"env:X\"]\n\
             handler = {{ kind = \"log\" }}\n"
        ))
        .unwrap()
    };
    assert!(inbox_core::aws::check_retention(&config(30), 30).is_ok());
    let err = inbox_core::aws::check_retention(&config(7), 30)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("retention_days = 7") && err.contains("RetentionDays = 30"),
        "{err}"
    );
}
