//! The SQLite purge: what is past retention goes a bounded batch (one transaction) at a time, the events with
//! their payloads and the remembered bodies with them, and a full batch says that more may be left.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use inbox_core::embedded::sqlite::{Purged, SqliteLedger};
use inbox_core::model::{EventId, EventKey, NewEvent, ResentBodies, SourceName};
use inbox_core::ports::{Ledger, Settlement};

const LONG: Duration = Duration::from_secs(3600);

fn key(id: &str) -> EventKey {
    EventKey::new(SourceName::parse("src").unwrap(), EventId::parse(id).unwrap())
}

/// An event whose body is remembered for `within` (a source that marks resent bodies).
fn marked(id: &str, within: Duration) -> NewEvent {
    NewEvent {
        key: key(id),
        event_type: Some("t.created".into()),
        payload: bytes::Bytes::from(format!("body of {id}")),
        payload_sha256: format!("sha-of-{id}"),
        headers: vec![],
        origin: Default::default(),
        resent_bodies: ResentBodies::Marked { within },
        announced: false,
    }
}

fn count(dir: &tempfile::TempDir, table: &str) -> i64 {
    let c = rusqlite::Connection::open(dir.path().join("inbox.db")).unwrap();
    c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

/// GIVEN 25 open events whose remembered bodies are past their window and 3 whose bodies are not
/// WHEN the store is purged 10 at a time
/// THEN each purge deletes 10 expired bodies at most, says so while it was full, and the last leaves only the live
/// bodies, while no open event is touched.
#[tokio::test]
async fn expired_remembered_bodies_go_a_batch_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let l = SqliteLedger::open(dir.path(), 1024, LONG).unwrap();
    for i in 0..25 {
        l.create(marked(&format!("old{i}"), Duration::ZERO))
            .await
            .unwrap();
    }
    for i in 0..3 {
        l.create(marked(&format!("live{i}"), LONG)).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(count(&dir, "bodies"), 28);

    let mut batches = vec![];
    loop {
        let purged = l.purge(10).await.unwrap();
        batches.push(purged);
        if !purged.full(10) {
            break;
        }
    }

    let bodies: Vec<usize> = batches.iter().map(|p| p.bodies).collect();
    assert_eq!(bodies, vec![10, 10, 5]);
    assert!(batches.iter().all(|p| p.events == 0), "{batches:?}");
    assert_eq!(count(&dir, "bodies"), 3);
    assert_eq!(count(&dir, "events"), 28);
    assert_eq!(count(&dir, "payloads"), 28);
}

/// GIVEN 23 completed events past retention
/// WHEN the store is purged 10 at a time until a batch is not full
/// THEN every one of them went, with its payload, 10 a transaction at most.
#[tokio::test]
async fn every_expired_event_goes_however_many_batches_it_takes() {
    let dir = tempfile::tempdir().unwrap();
    let l = SqliteLedger::open(dir.path(), 1024, LONG).unwrap();
    for i in 0..23 {
        let id = format!("done{i}");
        l.create(marked(&id, LONG)).await.unwrap();
        l.claim(&key(&id), "w", LONG).await.unwrap();
        l.settle(
            &key(&id),
            "w",
            Settlement::Completed {
                retention: Duration::ZERO,
            },
        )
        .await
        .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(5)).await;

    let mut events = vec![];
    loop {
        let purged: Purged = l.purge(10).await.unwrap();
        events.push(purged.events);
        if !purged.full(10) {
            break;
        }
    }

    assert_eq!(events, vec![10, 10, 3]);
    assert_eq!(count(&dir, "events"), 0);
    assert_eq!(count(&dir, "payloads"), 0);
    // Their bodies' window has not passed: a resend under a fresh id still names them, until it does.
    assert_eq!(count(&dir, "bodies"), 23);
}
