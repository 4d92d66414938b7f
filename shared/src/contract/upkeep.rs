//! Upkeep: leases end early only where the store proves their owner gone, an owner gives back its own leases, and a
//! purge deletes nothing but completed events past retention. A lease owner is its process's name, a colon, and a
//! part of its own (`Machine::lease_owner`).

use std::time::Duration;

use super::{key, new_event, source, Harness, LONG};
use crate::model::{EventId, Status};
use crate::ports::{Claim, GoneOwners, MarkDead, Settlement};

/// Nothing is ever ended because a process *thinks* the others are gone: only the owners the store can prove gone
/// ([`Upkeep::gone_owners`](crate::ports::Upkeep::gone_owners)) lose their leases, at once, and never the asker's.
pub async fn only_the_leases_of_owners_the_store_proves_gone_end_at_once(h: &dyn Harness) {
    let l = h.open(LONG).await;
    for id in ["mine", "theirs"] {
        l.create(new_event(id, "b")).await.unwrap();
    }
    l.claim(&key("mine"), "me:1:aa", LONG).await.unwrap();
    l.claim(&key("theirs"), "them:1:bb", LONG).await.unwrap();
    // Told of no gone owner, no store ends a lease.
    assert_eq!(l.end_leases(&GoneOwners::None).await.unwrap(), 0);
    let gone = l.gone_owners("me:1").await.unwrap();
    let ended = l.end_leases(&gone).await.unwrap();
    let theirs_gone = match &gone {
        GoneOwners::None => false,
        GoneOwners::AllBut(me) => {
            assert_eq!(me, "me:1", "the store proves gone every owner but the asker");
            true
        }
        GoneOwners::These(owners) => {
            assert!(!owners.iter().any(|o| o == "me:1"), "{owners:?}");
            owners.iter().any(|o| o == "them:1")
        }
    };
    assert_eq!(ended, usize::from(theirs_gone), "{gone:?}");
    let theirs = l.claim(&key("theirs"), "me:1:cc", LONG).await.unwrap();
    if theirs_gone {
        assert!(matches!(theirs, Claim::Claimed(_)), "{theirs:?}");
    } else {
        assert_eq!(theirs, Claim::OwnedElsewhere);
    }
    assert_eq!(
        l.claim(&key("mine"), "me:1:dd", LONG).await.unwrap(),
        Claim::OwnedElsewhere,
        "the asker's own lease ended"
    );
}

/// Where owners keep heartbeats ([`Upkeep::liveness`](crate::ports::Upkeep::liveness)), an owner is gone only once
/// its heartbeat ran out on the store's clock, and its leases end only while it still has: a list of gone owners
/// read a moment ago ends nothing an owner that beat since holds, an owner that never kept a heartbeat is not proven
/// gone, and an owner whose leases ended is forgotten. A store that proves gone owners otherwise has nothing here.
pub async fn an_owner_is_gone_only_while_its_heartbeat_is_out(h: &dyn Harness) {
    let l = h.open(LONG).await;
    let Some(liveness) = l.liveness() else {
        return;
    };
    for id in ["a", "b", "c"] {
        l.create(new_event(id, id)).await.unwrap();
    }
    l.heartbeat("a:1").await.unwrap();
    l.heartbeat("b:1").await.unwrap();
    for (id, owner) in [("a", "a:1:aa"), ("b", "b:1:bb"), ("c", "c:1:cc")] {
        assert!(matches!(
            l.claim(&key(id), owner, LONG * 10).await.unwrap(),
            Claim::Claimed(_)
        ));
    }
    assert_eq!(
        l.gone_owners("me:1").await.unwrap(),
        GoneOwners::These(vec![]),
        "owners whose heartbeat is live are gone"
    );
    h.advance(liveness + Duration::from_millis(1));
    let GoneOwners::These(mut gone) = l.gone_owners("me:1").await.unwrap() else {
        panic!("a store that keeps heartbeats names its gone owners");
    };
    gone.sort();
    assert_eq!(
        gone,
        ["a:1", "b:1"],
        "only owners with a heartbeat that ran out are gone"
    );
    // a:1 beats again after the list was read; c:1 never kept a heartbeat.
    l.heartbeat("a:1").await.unwrap();
    let stale = GoneOwners::These(vec!["a:1".into(), "b:1".into(), "c:1".into()]);
    assert_eq!(l.end_leases(&stale).await.unwrap(), 1, "only b:1's lease ends");
    for (id, held) in [("a", true), ("b", false), ("c", true)] {
        let claim = l.claim(&key(id), "me:1:dd", LONG).await.unwrap();
        if held {
            assert_eq!(claim, Claim::OwnedElsewhere, "{id}'s lease ended");
        } else {
            assert!(matches!(claim, Claim::Claimed(_)), "{id}: {claim:?}");
        }
    }
    assert_eq!(
        l.gone_owners("me:1").await.unwrap(),
        GoneOwners::These(vec![]),
        "an owner whose leases ended is forgotten, and one that beat again is alive"
    );
}

/// A runtime shutting down with handlers still running gives back every lease it holds, and no other's: each of
/// its events can be claimed at once.
pub async fn an_owner_gives_back_every_lease_it_holds(h: &dyn Harness) {
    let l = h.open(LONG).await;
    for (id, owner) in [
        ("a", "me:1:aa"),
        ("b", "me:1:bb"),
        ("c", "them:1:cc"),
        ("d", "me:10:dd"),
    ] {
        l.create(new_event(id, "b")).await.unwrap();
        l.claim(&key(id), owner, LONG).await.unwrap();
    }
    assert_eq!(l.give_back("me:1").await.unwrap(), 2);
    for id in ["a", "b"] {
        assert!(
            matches!(
                l.claim(&key(id), "next:1:ee", LONG).await.unwrap(),
                Claim::Claimed(_)
            ),
            "{id} was not given back"
        );
    }
    for id in ["c", "d"] {
        assert_eq!(
            l.claim(&key(id), "next:1:ff", LONG).await.unwrap(),
            Claim::OwnedElsewhere,
            "{id} was given back by another owner"
        );
    }
    assert_eq!(l.give_back("me:1").await.unwrap(), 0);
}

/// Retention deletes completed events past it, however many calls it takes, and never an open, a dead or a live
/// completed event. (A store whose retention runs by itself, DynamoDB's TTL, deletes none here: every read still
/// counts the expired ones absent.)
pub async fn a_purge_deletes_only_completed_events_past_retention(h: &dyn Harness) {
    let l = h.open(LONG).await;
    let hour = Duration::from_secs(3600);
    for id in ["open", "dead", "kept", "old1", "old2", "old3"] {
        l.create(new_event(id, id)).await.unwrap();
    }
    assert!(matches!(
        l.mark_dead(&key("dead"), "gone").await.unwrap(),
        MarkDead::NewlyDead(_)
    ));
    for (id, retention) in [("kept", hour * 2), ("old1", hour), ("old2", hour), ("old3", hour)] {
        l.claim(&key(id), "w:1:aa", LONG).await.unwrap();
        l.settle(&key(id), "w:1:aa", Settlement::Completed { retention })
            .await
            .unwrap();
    }
    h.advance(hour);
    let mut purged = 0;
    for _ in 0..10 {
        let step = l.purge(2).await.unwrap();
        assert!(step.events <= 2, "{step:?}");
        purged += step.events;
        if !step.full(2) {
            break;
        }
    }
    assert!(purged == 3 || purged == 0, "purged {purged} of 3 expired events");
    assert_eq!(l.purge(2).await.unwrap().events, 0, "a second purge found more");
    for (id, status) in [
        ("open", Status::Received),
        ("dead", Status::Dead),
        ("kept", Status::Completed),
    ] {
        let e = l.get(&key(id)).await.unwrap();
        assert_eq!(e.map(|e| e.status), Some(status), "{id}");
    }
    let olds: Vec<EventId> = ["old1", "old2", "old3"]
        .iter()
        .map(|id| EventId::parse(id).unwrap())
        .collect();
    for id in &olds {
        assert!(l.get(&key(id.as_str())).await.unwrap().is_none());
    }
    // Deleted, they are gone for reconciliation too; kept until the store's own retention runs, they are present.
    let present = l.present(&source(), &olds).await.unwrap();
    assert_eq!(present.len(), if purged == 3 { 0 } else { 3 }, "{present:?}");
}

/// A pass one runtime at a time runs (the sweep, retention, a source's reconciliation) is led by one holder at a time
/// where many runtimes share the store ([`Capabilities::shared_by_many`]): a second asker is refused while the
/// holder holds it, the holder renews it in the same term, and roles are apart. Elsewhere whoever asks leads.
///
/// [`Capabilities::shared_by_many`]: crate::ports::Capabilities::shared_by_many
pub async fn a_role_has_one_holder_at_a_time_where_many_share_the_store(h: &dyn Harness) {
    let l = h.open(LONG).await;
    let hold = Duration::from_secs(60);
    let first = l.lead("sweep", "a:1", hold).await.unwrap();
    assert!(first.is_some(), "the first asker leads");
    let second = l.lead("sweep", "b:1", hold).await.unwrap();
    if !l.capabilities().shared_by_many {
        assert!(second.is_some(), "one runtime per store: whoever asks leads");
        return;
    }
    assert_eq!(second, None, "a second holder while the first holds the role");
    assert_eq!(
        l.lead("sweep", "a:1", hold).await.unwrap(),
        first,
        "its holder renews it in the same term"
    );
    assert!(
        l.lead("reconcile:src", "b:1", hold).await.unwrap().is_some(),
        "another role has a holder of its own"
    );
    // Giving back its leases at shutdown gives back its roles: the next asker leads, in a later term.
    l.give_back("a:1").await.unwrap();
    let next = l.lead("sweep", "b:1", hold).await.unwrap();
    assert!(next > first, "{next:?} after {first:?}");
}
