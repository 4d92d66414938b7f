//! The SQLite ledger against a real file: every transition conditional, every race an outcome.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use inbox_core::adapters::sqlite::SqliteLedger;
use inbox_core::model::{EventId, EventKey, NewEvent, SourceName, Status};
use inbox_core::ports::{Claim, Created, Ledger, ListFilter, MarkDead, Replay, Settled, Settlement};

fn key(id: &str) -> EventKey {
    EventKey::new(SourceName::parse("src").unwrap(), EventId::parse(id).unwrap())
}

fn new_event(id: &str, body: &str) -> NewEvent {
    NewEvent {
        key: key(id),
        event_type: Some("t.created".into()),
        payload: bytes::Bytes::from(body.to_owned()),
        payload_sha256: format!("sha-of-{body}"),
        headers: vec![("content-type".into(), "application/json".into())],
    }
}

fn open(dir: &tempfile::TempDir, grace: Duration) -> SqliteLedger {
    SqliteLedger::open(dir.path(), 1024, grace).unwrap()
}

const LONG: Duration = Duration::from_secs(60);
const RETAIN: Settlement = Settlement::Completed {
    retention: Duration::from_secs(3600),
};

#[tokio::test]
async fn create_is_conditional_and_durable() {
    let dir = tempfile::tempdir().unwrap();
    let l = open(&dir, LONG);
    assert_eq!(l.create(new_event("e1", "{}")).await.unwrap(), Created::New);
    assert_eq!(
        l.create(new_event("e1", "{\"other\":1}")).await.unwrap(),
        Created::Duplicate {
            status: Status::Received,
            payload_sha256: "sha-of-{}".into()
        },
        "the first payload stands"
    );
    drop(l);
    // GIVEN a fresh connection to the same file WHEN reading THEN the first payload is there.
    let l = open(&dir, LONG);
    let e = l.get(&key("e1")).await.unwrap().unwrap();
    assert_eq!(e.payload.as_ref(), b"{}");
    assert_eq!(e.status, Status::Received);
    assert_eq!(
        e.headers,
        vec![("content-type".to_owned(), "application/json".to_owned())]
    );
    assert_eq!(e.attempts, 0);
}

#[tokio::test]
async fn concurrent_creates_of_one_event_make_one_record() {
    let dir = tempfile::tempdir().unwrap();
    let l = Arc::new(open(&dir, LONG));
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let l = l.clone();
            tokio::spawn(async move { l.create(new_event("same", "{}")).await.unwrap() })
        })
        .collect();
    let mut created = 0;
    for t in tasks {
        if t.await.unwrap() == Created::New {
            created += 1;
        }
    }
    assert_eq!(created, 1);
    let all = l
        .list(&ListFilter {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 1);
}

#[tokio::test]
async fn claim_then_settle_only_by_the_lease_owner() {
    let dir = tempfile::tempdir().unwrap();
    let l = open(&dir, LONG);
    l.create(new_event("e1", "body")).await.unwrap();
    let Claim::Claimed(e) = l.claim(&key("e1"), "w1", LONG).await.unwrap() else {
        panic!("not claimed")
    };
    assert_eq!(
        (e.status, e.attempts, e.payload.as_ref()),
        (Status::Processing, 1, &b"body"[..])
    );
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
    assert_eq!(l.claim(&key("nope"), "w1", LONG).await.unwrap(), Claim::Missing);
}

#[tokio::test]
async fn concurrent_claims_have_one_winner() {
    let dir = tempfile::tempdir().unwrap();
    let l = Arc::new(open(&dir, LONG));
    l.create(new_event("e1", "b")).await.unwrap();
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let l = l.clone();
            tokio::spawn(async move { l.claim(&key("e1"), &format!("w{i}"), LONG).await.unwrap() })
        })
        .collect();
    let mut winners = 0;
    for t in tasks {
        if matches!(t.await.unwrap(), Claim::Claimed(_)) {
            winners += 1;
        }
    }
    assert_eq!(winners, 1);
}

#[tokio::test]
async fn an_expired_lease_is_taken_over_and_the_old_owner_cannot_settle() {
    let dir = tempfile::tempdir().unwrap();
    let l = open(&dir, LONG);
    l.create(new_event("e1", "b")).await.unwrap();
    assert!(matches!(
        l.claim(&key("e1"), "w1", Duration::ZERO).await.unwrap(),
        Claim::Claimed(_)
    ));
    tokio::time::sleep(Duration::from_millis(5)).await;
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

#[tokio::test]
async fn failed_waits_for_its_backoff() {
    let dir = tempfile::tempdir().unwrap();
    let l = open(&dir, LONG);
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
    assert!(at > inbox_core::time::now_ms() + 25_000);
    let e = l.get(&key("e1")).await.unwrap().unwrap();
    assert_eq!(
        (e.status, e.last_error.as_deref()),
        (Status::Failed, Some("HTTP 503"))
    );

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

#[tokio::test]
async fn dead_never_overwrites_completed_and_alarms_once() {
    let dir = tempfile::tempdir().unwrap();
    let l = open(&dir, LONG);
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
    assert_eq!(
        l.mark_dead(&key("e1"), "again").await.unwrap(),
        MarkDead::AlreadyDead { notified: false }
    );
    l.mark_notified(&key("e1")).await.unwrap();
    assert_eq!(
        l.mark_dead(&key("e1"), "again").await.unwrap(),
        MarkDead::AlreadyDead { notified: true }
    );
    assert_eq!(l.mark_dead(&key("nope"), "x").await.unwrap(), MarkDead::Missing);
}

#[tokio::test]
async fn replay_is_a_conditional_transition_that_resets_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let l = open(&dir, LONG);
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

    l.claim(&key("e1"), "w", LONG).await.unwrap();
    l.settle(&key("e1"), "w", RETAIN).await.unwrap();
    assert_eq!(
        l.replay(&key("e1"), false).await.unwrap(),
        Replay::NotEligible(Status::Completed)
    );
    assert_eq!(l.replay(&key("e1"), true).await.unwrap(), Replay::Replayed);
    assert_eq!(l.replay(&key("zzz"), true).await.unwrap(), Replay::Missing);
}

#[tokio::test]
async fn the_sparse_index_holds_only_what_the_sweeper_must_see() {
    let dir = tempfile::tempdir().unwrap();
    let grace = Duration::from_millis(300);
    let l = open(&dir, grace);
    let now = inbox_core::time::now_ms;
    for id in ["received", "processing", "completed", "dead"] {
        l.create(new_event(id, "b")).await.unwrap();
    }
    l.claim(&key("processing"), "w", Duration::from_millis(100))
        .await
        .unwrap();
    l.claim(&key("completed"), "w", LONG).await.unwrap();
    l.settle(&key("completed"), "w", RETAIN).await.unwrap();
    l.claim(&key("dead"), "w", LONG).await.unwrap();
    l.settle(&key("dead"), "w", Settlement::Dead { error: "x".into() })
        .await
        .unwrap();
    // Within the grace nothing is due but the lease that ends first.
    assert!(l.due(now(), 100).await.unwrap().is_empty());
    tokio::time::sleep(Duration::from_millis(150)).await;
    let due: Vec<_> = l
        .due(now(), 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event_id.to_string())
        .collect();
    assert_eq!(due, ["processing"]);
    tokio::time::sleep(Duration::from_millis(250)).await;
    let mut due: Vec<_> = l
        .due(now(), 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event_id.to_string())
        .collect();
    due.sort();
    assert_eq!(
        due,
        ["dead", "processing", "received"],
        "completed events are never in the index"
    );
    l.mark_notified(&key("dead")).await.unwrap();
    assert_eq!(
        l.due(now(), 100).await.unwrap().len(),
        2,
        "a dead event leaves the index once its alarm went out"
    );
}

#[tokio::test]
async fn completed_events_past_retention_count_as_absent() {
    let dir = tempfile::tempdir().unwrap();
    let l = open(&dir, LONG);
    l.create(new_event("e1", "first")).await.unwrap();
    l.claim(&key("e1"), "w", LONG).await.unwrap();
    l.settle(
        &key("e1"),
        "w",
        Settlement::Completed {
            retention: Duration::ZERO,
        },
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(l.get(&key("e1")).await.unwrap().is_none());
    assert_eq!(l.create(new_event("e1", "second")).await.unwrap(), Created::New);
    assert_eq!(
        l.get(&key("e1")).await.unwrap().unwrap().payload.as_ref(),
        b"second"
    );
    l.claim(&key("e1"), "w", LONG).await.unwrap();
    l.settle(
        &key("e1"),
        "w",
        Settlement::Completed {
            retention: Duration::ZERO,
        },
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(l.purge_expired(100).await.unwrap(), 1);
    assert!(l
        .list(&ListFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn leases_of_a_dead_process_expire_at_restart() {
    let dir = tempfile::tempdir().unwrap();
    let l = open(&dir, LONG);
    l.create(new_event("mine", "b")).await.unwrap();
    l.create(new_event("theirs", "b")).await.unwrap();
    l.claim(&key("mine"), "embedded:2:1:aa", LONG).await.unwrap();
    l.claim(&key("theirs"), "embedded:1:1:bb", LONG).await.unwrap();
    assert_eq!(l.expire_leases("embedded:2:1", false).await.unwrap(), 1);
    assert!(matches!(
        l.claim(&key("theirs"), "embedded:2:1:cc", LONG).await.unwrap(),
        Claim::Claimed(_)
    ));
    assert_eq!(
        l.claim(&key("mine"), "embedded:2:1:dd", LONG).await.unwrap(),
        Claim::OwnedElsewhere
    );
    assert_eq!(l.expire_leases("embedded:2:1", true).await.unwrap(), 2);
}

#[tokio::test]
async fn list_filters_by_status_and_source() {
    let dir = tempfile::tempdir().unwrap();
    let l = open(&dir, LONG);
    for i in 0..5 {
        l.create(new_event(&format!("e{i}"), "b")).await.unwrap();
    }
    l.claim(&key("e0"), "w", LONG).await.unwrap();
    let received = l
        .list(&ListFilter {
            status: Some(Status::Received),
            source: None,
            limit: 100,
        })
        .await
        .unwrap();
    assert_eq!(received.len(), 4);
    assert!(
        received.iter().all(|e| e.payload.is_empty()),
        "lists carry no payloads"
    );
    let other = SourceName::parse("other").unwrap();
    assert!(l
        .list(&ListFilter {
            status: None,
            source: Some(other),
            limit: 100
        })
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        l.list(&ListFilter {
            limit: 2,
            ..Default::default()
        })
        .await
        .unwrap()
        .len(),
        2
    );
}
