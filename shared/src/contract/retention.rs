//! Retention and expiry: a completed event past retention counts as absent to every read but reconciliation's, and
//! a webhook reusing its id is a new event; reconciliation never re-creates it.

use std::time::Duration;

use super::{all, key, new_event, of_status, source, Harness, LONG};
use crate::model::{EventId, NewEvent, Origin, Status};
use crate::ports::{Claim, Created, Replay, Settlement};

pub async fn completed_events_past_retention_count_as_absent(h: &dyn Harness) {
    let l = h.open(LONG).await;
    let hour = Duration::from_secs(3600);
    let for_an_hour = || Settlement::Completed { retention: hour };
    l.create(new_event("e1", "first")).await.unwrap();
    l.claim(&key("e1"), "w", LONG).await.unwrap();
    l.settle(&key("e1"), "w", for_an_hour()).await.unwrap();
    // Within retention it is there (a store that keeps expiry in seconds rounds it down: a second less at most).
    h.advance(hour - Duration::from_secs(1));
    assert!(l.get(&key("e1")).await.unwrap().is_some());
    h.advance(Duration::from_secs(1));
    assert!(l.get(&key("e1")).await.unwrap().is_none());
    assert!(l.peek(&key("e1")).await.unwrap().is_none());
    assert_eq!(
        l.replay(&key("e1"), true).await.unwrap(),
        Replay::NotEligible(Status::Completed)
    );
    // A message that reaches the expired record (one sent ahead of a new create of the id) finds no event to
    // drop as done: the new one's work is not the old record's.
    assert_eq!(l.claim(&key("e1"), "w2", LONG).await.unwrap(), Claim::Missing);
    // Reconciliation sees the record, and never re-creates it: past retention "done" looks like "never received".
    let e1 = EventId::parse("e1").unwrap();
    assert!(l
        .present(&source(), std::slice::from_ref(&e1))
        .await
        .unwrap()
        .contains(&e1));
    let reconciled = NewEvent {
        origin: Origin::Reconciled,
        ..new_event("e1", "from the API")
    };
    assert!(matches!(
        l.create(reconciled).await.unwrap(),
        Created::Duplicate { .. }
    ));
    // A webhook reusing the id is a new event.
    assert_eq!(l.create(new_event("e1", "second")).await.unwrap(), Created::New);
    let e = l.get(&key("e1")).await.unwrap().unwrap();
    assert_eq!(
        (e.payload.as_ref(), e.status, e.completed_at),
        (&b"second"[..], Status::Received, None)
    );
    assert_eq!((e.received_at, e.attempts), (h.now(), 0));
    l.claim(&key("e1"), "w", LONG).await.unwrap();
    l.settle(&key("e1"), "w", for_an_hour()).await.unwrap();
    h.advance(hour);
    assert!(l.list(&all(10)).await.unwrap().is_empty());
    assert!(l.list(&of_status(Status::Completed)).await.unwrap().is_empty());
}
