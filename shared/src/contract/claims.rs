//! Claims and leases: one winner per claim, a lease that only its owner settles and that ends at its time (or when
//! given back), and a record without its body claimed as corrupt, never run with an empty one.

use std::time::Duration;

use super::{eventually, ids, key, new_event, Harness, ATOMICITY, LONG, RETAIN};
use crate::model::Status;
use crate::ports::{Claim, Settled, Settlement, StoreError};

pub async fn claim_then_settle_only_by_the_lease_owner(h: &dyn Harness) {
    let l = h.open(LONG).await;
    l.create(new_event("e1", "body")).await.unwrap();
    let Claim::Claimed(e) = l.claim(&key("e1"), "w1", LONG).await.unwrap() else {
        panic!("not claimed")
    };
    assert_eq!(
        (e.status, e.attempts, e.payload.as_ref()),
        (Status::Processing, 1, &b"body"[..])
    );
    assert_eq!(e.lease_owner.as_deref(), Some("w1"));
    assert_eq!(e.lease_until, Some(h.now() + LONG.as_millis() as i64));
    assert_eq!(
        l.claim(&key("e1"), "w2", LONG).await.unwrap(),
        Claim::OwnedElsewhere
    );
    assert_eq!(
        l.settle(&key("e1"), "w2", RETAIN).await.unwrap(),
        Settled::LeaseLost
    );
    assert_eq!(l.settle(&key("e1"), "w1", RETAIN).await.unwrap(), Settled::Done);
    assert_eq!(
        l.claim(&key("e1"), "w3", LONG).await.unwrap(),
        Claim::Done(Status::Completed)
    );
    let e = l.get(&key("e1")).await.unwrap().unwrap();
    assert_eq!(e.status, Status::Completed);
    assert!(e.completed_at.is_some() && e.expires_at > e.completed_at);
    assert_eq!((e.lease_owner.clone(), e.lease_until), (None, None));
    assert_eq!(l.claim(&key("nope"), "w1", LONG).await.unwrap(), Claim::Missing);
    assert_eq!(
        l.settle(&key("nope"), "w1", RETAIN).await.unwrap(),
        Settled::LeaseLost
    );
}

pub async fn concurrent_claims_have_one_winner(h: &dyn Harness) {
    let l = h.open(LONG).await;
    l.create(new_event("e1", "b")).await.unwrap();
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let l = l.clone();
            tokio::spawn(async move { l.claim(&key("e1"), &format!("w{i}"), LONG).await.unwrap() })
        })
        .collect();
    let mut winners = 0;
    for t in tasks {
        match t.await.unwrap() {
            Claim::Claimed(_) => winners += 1,
            Claim::OwnedElsewhere => {}
            other => panic!("a losing claim answered {other:?}"),
        }
    }
    assert_eq!(winners, 1, "{ATOMICITY}");
    assert_eq!(l.get(&key("e1")).await.unwrap().unwrap().attempts, 1);
}

/// A lease ends at its time on the store's clock, to the millisecond: until then its owner holds the event, from
/// then on the next claim takes it and the old owner's settle changes nothing.
pub async fn an_expired_lease_is_taken_over_and_the_old_owner_cannot_settle(h: &dyn Harness) {
    let l = h.open(LONG).await;
    l.create(new_event("e1", "b")).await.unwrap();
    let lease = Duration::from_secs(30);
    assert!(matches!(
        l.claim(&key("e1"), "w1", lease).await.unwrap(),
        Claim::Claimed(_)
    ));
    h.advance(lease - Duration::from_millis(1));
    assert_eq!(
        l.claim(&key("e1"), "w2", LONG).await.unwrap(),
        Claim::OwnedElsewhere,
        "taken a millisecond before the lease ended"
    );
    h.advance(Duration::from_millis(1));
    let Claim::Claimed(e) = l.claim(&key("e1"), "w2", LONG).await.unwrap() else {
        panic!("not taken over")
    };
    assert_eq!(e.attempts, 2);
    assert_eq!(
        l.settle(&key("e1"), "w1", RETAIN).await.unwrap(),
        Settled::LeaseLost
    );
    assert_eq!(l.settle(&key("e1"), "w2", RETAIN).await.unwrap(), Settled::Done);
}

pub async fn a_released_lease_is_taken_at_once(h: &dyn Harness) {
    let l = h.open(LONG).await;
    l.create(new_event("e1", "b")).await.unwrap();
    l.claim(&key("e1"), "w1", LONG).await.unwrap();
    assert_eq!(l.release(&key("e1"), "w2").await.unwrap(), Settled::LeaseLost);
    assert_eq!(l.release(&key("e1"), "w1").await.unwrap(), Settled::Done);
    // THEN the next claim takes it at once, and where the ledger is its own queue so does the sweeper. (Where the
    // queue vouches for a claimed event, DynamoDB's, its message brings it back, not the sweeper.)
    if l.capabilities().trusts_announcements {
        assert!(l.due(Duration::ZERO, 10).await.unwrap().is_empty());
    } else {
        let due = eventually(
            &*l,
            || l.due(Duration::ZERO, 10),
            |d| d.as_ref().is_ok_and(|d| d.len() == 1),
        )
        .await;
        assert_eq!(ids(&due.unwrap()), ["e1"]);
    }
    let Claim::Claimed(e) = l.claim(&key("e1"), "w2", LONG).await.unwrap() else {
        panic!("a released lease was not taken")
    };
    assert_eq!((e.attempts, e.lease_owner.as_deref()), (2, Some("w2")));
    assert_eq!(l.release(&key("e1"), "w1").await.unwrap(), Settled::LeaseLost);
    assert_eq!(l.release(&key("nope"), "w1").await.unwrap(), Settled::LeaseLost);
}

/// SQLite read a missing body as an empty one (and `forward` would have POSTed nothing).
pub async fn a_missing_body_is_a_corrupt_claim_never_an_empty_one(h: &dyn Harness) {
    let l = h.open(LONG).await;
    l.create(new_event("e1", "the body")).await.unwrap();
    h.lose_body(&key("e1")).await;
    let Claim::Corrupt(event, why) = l.claim(&key("e1"), "w", LONG).await.unwrap() else {
        panic!("a record without its body was claimed as runnable")
    };
    assert!(why.contains("missing"), "{why}");
    assert_eq!((event.status, event.attempts), (Status::Processing, 1));
    // The claim stands: its owner settles it DEAD.
    assert_eq!(
        l.settle(&key("e1"), "w", Settlement::Dead { error: why })
            .await
            .unwrap(),
        Settled::Done
    );
    assert!(matches!(l.get(&key("e1")).await, Err(StoreError::Corrupt(_))));
}
