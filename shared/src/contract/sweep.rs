//! The sweeper's sparse index: only what no queue message vouches for, due at its time, oldest first; a re-send
//! moves an unchanged event's due time on, and a dead event's alarm comes due until it is recorded.

use std::time::Duration;

use super::{eventually, ids, key, new_event, Harness, LONG, RETAIN};
use crate::model::Status;
use crate::ports::Settlement;

pub async fn the_sparse_index_holds_only_what_the_sweeper_must_see(h: &dyn Harness) {
    let (grace, lease): (i64, i64) = (20_000, 5_000);
    let l = h.open(Duration::from_millis(grace.unsigned_abs())).await;
    let at = h.now();
    for id in ["received", "processing", "completed", "dead"] {
        l.create(new_event(id, "b")).await.unwrap();
    }
    l.claim(
        &key("processing"),
        "w",
        Duration::from_millis(lease.unsigned_abs()),
    )
    .await
    .unwrap();
    l.claim(&key("completed"), "w", LONG).await.unwrap();
    l.settle(&key("completed"), "w", RETAIN).await.unwrap();
    l.claim(&key("dead"), "w", LONG).await.unwrap();
    l.settle(&key("dead"), "w", Settlement::Dead { error: "x".into() })
        .await
        .unwrap();

    // Within the grace nothing is due but the lease that ends first. (A PROCESSING event is the sweeper's only
    // where the ledger is its own queue: where the queue vouches for it, its message brings it back.)
    let vouched = l.capabilities().trusts_announcements;
    h.set_now(at + lease - 1);
    assert!(l.due(Duration::ZERO, 100).await.unwrap().is_empty());
    h.set_now(at + lease);
    if !vouched {
        let due = eventually(
            &*l,
            || l.due(Duration::ZERO, 100),
            |d| d.as_ref().is_ok_and(|d| !d.is_empty()),
        )
        .await;
        assert_eq!(ids(&due.unwrap()), ["processing"]);
    }
    h.set_now(at + grace - 1);
    assert_eq!(
        l.due(Duration::ZERO, 100).await.unwrap().len(),
        usize::from(!vouched),
        "nothing else is due before the grace ends"
    );
    let expected = if vouched {
        vec!["dead", "received"]
    } else {
        vec!["dead", "processing", "received"]
    };
    h.set_now(at + grace);
    let due = eventually(
        &*l,
        || l.due(Duration::ZERO, 100),
        |d| d.as_ref().is_ok_and(|d| d.len() >= expected.len()),
    )
    .await;
    let mut due = ids(&due.unwrap());
    if !vouched {
        assert_eq!(due[0], "processing", "oldest first");
    }
    due.sort();
    assert_eq!(due, expected, "completed events are never in the index");
    assert_eq!(
        l.due(Duration::ZERO, 1).await.unwrap().len(),
        1,
        "at most the limit"
    );
    l.mark_notified(&key("dead")).await.unwrap();
    let due = eventually(
        &*l,
        || l.due(Duration::MAX, 100),
        |d| d.as_ref().is_ok_and(|d| d.len() == expected.len() - 1),
    )
    .await;
    assert_eq!(
        due.unwrap().len(),
        expected.len() - 1,
        "a dead event leaves the sweeper's view once its alarm went out"
    );
}

/// The sweeper left a re-sent event's due time as it was, so a backlog older than the grace was
/// sent again at every sweep. A re-send now moves it forward, by as long as the event has waited, and only while
/// the event is as the sweeper read it.
pub async fn a_resent_event_is_due_again_later_unless_it_moved(h: &dyn Harness) {
    let l = h.open(Duration::ZERO).await;
    for id in ["waiting", "moved"] {
        l.create(new_event(id, "b")).await.unwrap();
    }
    h.advance(Duration::from_millis(300));
    let seen = eventually(
        &*l,
        || l.due(Duration::ZERO, 100),
        |d| d.as_ref().is_ok_and(|d| d.len() == 2),
    )
    .await
    .unwrap();
    assert_eq!(seen.len(), 2, "{seen:?}");
    // GIVEN "moved" claimed after the sweeper read it
    l.claim(&key("moved"), "w", Duration::from_secs(30))
        .await
        .unwrap();
    // WHEN the sweeper records both re-sends
    for e in &seen {
        l.sent_again(&e.key(), e.status, e.updated_at).await.unwrap();
    }
    let resent_at = h.now();
    // THEN "waiting" (300 ms old) is not due at the next sweep, but 300 ms later
    h.set_now(resent_at + 299);
    let next = eventually(
        &*l,
        || l.due(Duration::ZERO, 100),
        |d| d.as_ref().is_ok_and(Vec::is_empty),
    )
    .await;
    assert!(next.unwrap().is_empty());
    // AND "moved" keeps the due time of its lease (30 s away): the re-send found it changed
    h.set_now(resent_at + 5_000);
    let later = eventually(
        &*l,
        || l.due(Duration::ZERO, 100),
        |d| d.as_ref().is_ok_and(|d| d.len() == 1),
    )
    .await;
    assert_eq!(ids(&later.unwrap()), ["waiting"]);
    // Back to the edge of its new due time (a read only: nothing is written at the earlier time).
    h.set_now(resent_at + 300);
    assert_eq!(ids(&l.due(Duration::ZERO, 100).await.unwrap()), ["waiting"]);
}

/// A dead event whose alarm did not go out comes due at the time the alarm's backoff names, not before; once its
/// alarm is recorded, a late deferral does not bring it back.
pub async fn a_deferred_alarm_comes_due_again_at_its_time(h: &dyn Harness) {
    let l = h.open(Duration::ZERO).await;
    l.create(new_event("dead", "b")).await.unwrap();
    l.mark_dead(&key("dead"), "gone").await.unwrap();
    let due = eventually(
        &*l,
        || l.due(Duration::ZERO, 100),
        |d| d.as_ref().is_ok_and(|d| d.len() == 1),
    )
    .await;
    assert_eq!(ids(&due.unwrap()), ["dead"], "its alarm is owed");
    let until = h.now() + 10_000;
    l.defer_alarm(&key("dead"), until).await.unwrap();
    h.set_now(until - 1);
    let due = eventually(
        &*l,
        || l.due(Duration::ZERO, 100),
        |d| d.as_ref().is_ok_and(Vec::is_empty),
    )
    .await;
    assert!(due.unwrap().is_empty(), "due before its alarm's backoff ended");
    h.set_now(until);
    let due = l.due(Duration::ZERO, 100).await.unwrap();
    assert_eq!(ids(&due), ["dead"]);
    assert_eq!(due[0].status, Status::Dead);
    l.mark_notified(&key("dead")).await.unwrap();
    l.defer_alarm(&key("dead"), until).await.unwrap();
    let due = eventually(
        &*l,
        || l.due(Duration::MAX, 100),
        |d| d.as_ref().is_ok_and(Vec::is_empty),
    )
    .await;
    assert!(due.unwrap().is_empty(), "a recorded alarm came due again");
}
