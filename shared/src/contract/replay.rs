//! Replay: a conditional transition (DEAD, or with `force` an unexpired COMPLETED, to RECEIVED) that resets the
//! retry budget, its age counted from the replay.

use std::time::Duration;

use super::{key, new_event, Harness, LONG, RETAIN};
use crate::model::Status;
use crate::ports::{Replay, Settlement};

pub async fn replay_is_a_conditional_transition_that_resets_the_budget(h: &dyn Harness) {
    let l = h.open(LONG).await;
    l.create(new_event("e1", "b")).await.unwrap();
    l.claim(&key("e1"), "w", LONG).await.unwrap();
    l.settle(
        &key("e1"),
        "w",
        Settlement::Dead {
            error: "HTTP 400".into(),
        },
    )
    .await
    .unwrap();
    assert_eq!(l.replay(&key("e1"), false).await.unwrap(), Replay::Replayed);
    assert_eq!(
        l.replay(&key("e1"), false).await.unwrap(),
        Replay::NotEligible(Status::Received),
        "a second operator replaying at once enqueues nothing"
    );
    let e = l.get(&key("e1")).await.unwrap().unwrap();
    assert_eq!((e.status, e.attempts, e.replays), (Status::Received, 0, 1));
    assert_eq!(e.payload.as_ref(), b"b");

    l.claim(&key("e1"), "w", LONG).await.unwrap();
    l.settle(&key("e1"), "w", RETAIN).await.unwrap();
    assert_eq!(
        l.replay(&key("e1"), false).await.unwrap(),
        Replay::NotEligible(Status::Completed)
    );
    assert_eq!(l.replay(&key("e1"), true).await.unwrap(), Replay::Replayed);
    let e = l.get(&key("e1")).await.unwrap().unwrap();
    assert_eq!(
        (e.status, e.replays, e.completed_at, e.expires_at),
        (Status::Received, 2, None, None)
    );
    assert_eq!(l.replay(&key("zzz"), true).await.unwrap(), Replay::Missing);
}

/// A replay must run even when it comes after `max_age`: the record says when it was replayed.
pub async fn replay_restarts_the_age_budget(h: &dyn Harness) {
    let l = h.open(LONG).await;
    let received = h.now();
    l.create(new_event("e1", "b")).await.unwrap();
    l.claim(&key("e1"), "w", LONG).await.unwrap();
    l.settle(&key("e1"), "w", Settlement::Dead { error: "x".into() })
        .await
        .unwrap();
    // GIVEN a day later
    h.advance(Duration::from_secs(24 * 3600));
    let replayed = h.now();
    assert_eq!(l.replay(&key("e1"), false).await.unwrap(), Replay::Replayed);
    let e = l.get(&key("e1")).await.unwrap().unwrap();
    assert_eq!(e.replayed_at, Some(replayed), "{e:?}");
    assert_eq!((e.budget_start(), e.received_at), (replayed, received), "{e:?}");
}
