//! Settles and the dead letter path: a failure waits for its backoff, DEAD never overwrites COMPLETED nor a live
//! lease, and a dead event's alarm is recorded once.

use std::time::Duration;

use super::{eventually, ids, key, new_event, of_status, Harness, LONG, RETAIN};
use crate::model::Status;
use crate::ports::{Claim, MarkDead, Settled, Settlement};
use crate::rules::DUE_SLACK_MS;

pub async fn failed_waits_for_its_backoff(h: &dyn Harness) {
    let l = h.open(LONG).await;
    l.create(new_event("e1", "b")).await.unwrap();
    l.claim(&key("e1"), "w1", LONG).await.unwrap();
    let failed = Settlement::Failed {
        error: "HTTP 503".into(),
        delay: Duration::from_secs(30),
    };
    assert_eq!(l.settle(&key("e1"), "w1", failed).await.unwrap(), Settled::Done);
    let Claim::NotDue(at) = l.claim(&key("e1"), "w2", LONG).await.unwrap() else {
        panic!("claimed early")
    };
    assert_eq!(
        at,
        h.now() + 30_000,
        "due after its backoff, on the store's clock"
    );
    let e = l.get(&key("e1")).await.unwrap().unwrap();
    assert_eq!(
        (e.status, e.last_error.as_deref(), e.next_attempt_at),
        (Status::Failed, Some("HTTP 503"), Some(at))
    );
    // WHEN the backoff has passed, but for the slack a claim may come early by THEN it is taken.
    h.advance(Duration::from_millis(30_000 - DUE_SLACK_MS as u64 - 1));
    assert!(matches!(
        l.claim(&key("e1"), "w2", LONG).await.unwrap(),
        Claim::NotDue(_)
    ));
    h.advance(Duration::from_millis(1));
    let Claim::Claimed(e) = l.claim(&key("e1"), "w2", LONG).await.unwrap() else {
        panic!("not due after its backoff")
    };
    assert_eq!(e.attempts, 2);

    l.create(new_event("e2", "b")).await.unwrap();
    l.claim(&key("e2"), "w1", LONG).await.unwrap();
    let soon = Settlement::Failed {
        error: "x".into(),
        delay: Duration::ZERO,
    };
    l.settle(&key("e2"), "w1", soon).await.unwrap();
    let Claim::Claimed(e) = l.claim(&key("e2"), "w2", LONG).await.unwrap() else {
        panic!("not due")
    };
    assert_eq!(e.attempts, 2);
}

pub async fn dead_never_overwrites_completed_and_alarms_once(h: &dyn Harness) {
    let l = h.open(LONG).await;
    l.create(new_event("done", "b")).await.unwrap();
    l.claim(&key("done"), "w", LONG).await.unwrap();
    l.settle(&key("done"), "w", RETAIN).await.unwrap();
    assert_eq!(
        l.mark_dead(&key("done"), "redriven").await.unwrap(),
        MarkDead::Completed
    );

    l.create(new_event("e1", "b")).await.unwrap();
    let MarkDead::NewlyDead(e) = l.mark_dead(&key("e1"), "redriven").await.unwrap() else {
        panic!()
    };
    assert_eq!(
        (e.status, e.last_error.as_deref()),
        (Status::Dead, Some("redriven"))
    );
    let again = l.mark_dead(&key("e1"), "again").await.unwrap();
    assert!(
        matches!(&again, MarkDead::AlreadyDead(e) if e.notified_at.is_none() && e.last_error.as_deref() == Some("redriven")),
        "{again:?}"
    );
    h.advance(Duration::from_millis(10));
    l.mark_notified(&key("e1")).await.unwrap();
    let again = l.mark_dead(&key("e1"), "again").await.unwrap();
    assert!(
        matches!(&again, MarkDead::AlreadyDead(e) if e.notified_at.is_some()),
        "{again:?}"
    );
    let notified_at = l.get(&key("e1")).await.unwrap().unwrap().notified_at;
    assert_eq!(notified_at, Some(h.now()));
    h.advance(Duration::from_millis(10));
    l.mark_notified(&key("e1")).await.unwrap();
    assert_eq!(
        l.get(&key("e1")).await.unwrap().unwrap().notified_at,
        notified_at,
        "the alarm is recorded once"
    );
    assert_eq!(l.mark_dead(&key("nope"), "x").await.unwrap(), MarkDead::Missing);
    l.mark_notified(&key("nope")).await.unwrap();
    // A dead event whose alarm went out is still listed as dead.
    let dead_filter = of_status(Status::Dead);
    let dead = eventually(
        &*l,
        || l.list(&dead_filter),
        |d| d.as_ref().is_ok_and(|d| !d.is_empty()),
    )
    .await;
    assert_eq!(ids(&dead.unwrap()), ["e1"]);
}

/// The DLQ path marked an event DEAD under a live lease, beside a running worker.
pub async fn the_dead_letter_path_waits_for_a_live_lease(h: &dyn Harness) {
    let l = h.open(LONG).await;
    l.create(new_event("e1", "b")).await.unwrap();
    l.claim(&key("e1"), "w", LONG).await.unwrap();
    let MarkDead::Leased(until) = l.mark_dead(&key("e1"), "redriven").await.unwrap() else {
        panic!("marked dead under a live lease")
    };
    assert_eq!(until, h.now() + LONG.as_millis() as i64);
    // The running worker's settle wins.
    assert_eq!(l.settle(&key("e1"), "w", RETAIN).await.unwrap(), Settled::Done);
    assert_eq!(
        l.mark_dead(&key("e1"), "redriven").await.unwrap(),
        MarkDead::Completed
    );

    // A lease that ran out (its worker died) is buried.
    l.create(new_event("e2", "b")).await.unwrap();
    l.claim(&key("e2"), "w", Duration::from_millis(200))
        .await
        .unwrap();
    h.advance(Duration::from_millis(199));
    assert!(matches!(
        l.mark_dead(&key("e2"), "redriven").await.unwrap(),
        MarkDead::Leased(_)
    ));
    h.advance(Duration::from_millis(1));
    assert!(matches!(
        l.mark_dead(&key("e2"), "redriven").await.unwrap(),
        MarkDead::NewlyDead(_)
    ));
    assert_eq!(
        l.settle(&key("e2"), "w", RETAIN).await.unwrap(),
        Settled::LeaseLost
    );
}
