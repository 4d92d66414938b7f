//! What only the SQLite store does beyond the ports, and how: its schema's migrations, its group commit, its reads
//! beside another process's write lock, its compressed bodies, its purge, and a failed sync as the end of trust.
//! The ports themselves it passes with every store (`crate::ledger::sqlite`, the contract).
#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use inbox_core::clock::ManualClock;
use inbox_core::contract::{all, ids, key, new_event, LONG, RETAIN};
use inbox_core::failpoint::IoFaults;
use inbox_core::model::{EventId, NewEvent, ResentBodies, Status};
use inbox_core::ports::{
    Browse, Claim, Created, GoneOwners, Ledger, Settlement, StoreError, SweepIndex, Upkeep,
};
use inbox_core::stores::sqlite::{Options, SqliteLedger};

fn open_sqlite(dir: &tempfile::TempDir, grace: Duration) -> SqliteLedger {
    SqliteLedger::open(dir.path(), 1024, grace).unwrap()
}

/// A store over `dir` on `clock`, which the test moves instead of sleeping.
fn open_on(dir: &tempfile::TempDir, clock: &Arc<ManualClock>) -> SqliteLedger {
    let options = Options {
        clock: clock.clone(),
        ..Options::new(1024, LONG)
    };
    SqliteLedger::open_with(dir.path(), options).unwrap()
}

fn clock() -> Arc<ManualClock> {
    ManualClock::at(inbox_core::time::now_ms())
}

/// Reads until `done` holds or ten seconds pass, and returns the last answer for the caller to assert on.
async fn eventually<T, F, Fut>(mut read: F, done: impl Fn(&T) -> bool) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = T>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let answer = read().await;
        if done(&answer) || tokio::time::Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Schema v3 (the console's listing indexes) comes to a version-2 file at open, its events kept; v4 takes away
/// the index on the id alone that v3 had (every insert paid for it; the unique key serves the lookup); and v5 marks
/// resent bodies and remembers bodies per type, the remembered ones kept under their holder's type; v6 indexes the
/// remembered bodies by expiry, for the purge; up to v9 (a remembered signed nonce's whole SHA-256).
#[tokio::test]
async fn sqlite_older_files_gain_the_console_indexes_and_lose_the_id_index() {
    let indexes = ["events_received", "events_source", "events_type"];
    for from in [2, 3, 4] {
        let dir = tempfile::tempdir().unwrap();
        let l = open_sqlite(&dir, LONG);
        l.create(new_event("e1", "b")).await.unwrap();
        drop(l);
        // GIVEN the file as version 2, 3 or 4 left it, a body remembered for e1.
        let c = rusqlite::Connection::open(dir.path().join("inbox.db")).unwrap();
        c.execute_batch(
            "ALTER TABLE events DROP COLUMN resent_of;
             DROP TABLE bodies;
             CREATE TABLE bodies (source TEXT NOT NULL, payload_sha256 TEXT NOT NULL, event_id TEXT NOT NULL,
                                  expires_at INTEGER NOT NULL, PRIMARY KEY (source, payload_sha256));
             INSERT INTO bodies VALUES ('src', 'sha-of-b', 'e1', 9999999999999);",
        )
        .unwrap();
        if from == 2 {
            for index in indexes {
                c.execute_batch(&format!("DROP INDEX {index}")).unwrap();
            }
        } else if from == 3 {
            c.execute_batch("CREATE INDEX events_event_id ON events (event_id)")
                .unwrap();
        }
        c.pragma_update(None, "user_version", from).unwrap();
        drop(c);
        // WHEN it is opened THEN the listing indexes are there, the id index is not, and the event is kept.
        let l = open_sqlite(&dir, LONG);
        let c = rusqlite::Connection::open(dir.path().join("inbox.db")).unwrap();
        let version: i64 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, 9);
        let has = |index: &str| -> bool {
            c.query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?1",
                [index],
                |r| r.get::<_, i64>(0),
            )
            .unwrap()
                == 1
        };
        for index in indexes {
            assert!(has(index), "v{from}: {index}");
        }
        assert!(!has("events_event_id"), "v{from}");
        assert!(has("bodies_expiry"), "v{from}");
        assert_eq!(ids(&l.list(&all(10)).await.unwrap()), ["e1"]);
        let marked = NewEvent {
            resent_bodies: ResentBodies::Marked { within: LONG },
            ..new_event("e2", "b")
        };
        assert_eq!(
            l.create(marked).await.unwrap(),
            Created::Resent {
                of: EventId::parse("e1").unwrap()
            },
            "v{from}"
        );
    }
}

/// A failed `BEGIN IMMEDIATE` ran the batch's jobs in autocommit and answered them `Err`:
/// a create stored but answered 503.
#[tokio::test]
async fn sqlite_a_failed_begin_runs_nothing_of_its_batch() {
    use inbox_core::stores::sqlite::Options;
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        busy_timeout: Duration::from_millis(300),
        ..Options::new(1024, LONG)
    };
    let l = SqliteLedger::open_with(dir.path(), options).unwrap();
    // GIVEN another connection holding the write lock for 600 ms: BEGIN IMMEDIATE gives up after 300 ms, and
    // a statement run after it would get the lock.
    let holder = rusqlite::Connection::open(dir.path().join("inbox.db")).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(600));
        holder.execute_batch("COMMIT").unwrap();
    });
    let answer = l.create(new_event("e1", "b")).await;
    assert!(
        matches!(answer, Err(inbox_core::ports::StoreError::Busy)),
        "{answer:?}"
    );
    release.join().unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    // THEN nothing of it was stored: the sender's retry is the first create.
    assert!(
        l.get(&key("e1")).await.unwrap().is_none(),
        "stored but answered 503"
    );
    assert_eq!(l.create(new_event("e1", "b")).await.unwrap(), Created::New);
}

/// Jobs of a batch share its transaction without a savepoint each: a job that fails half done (here a claim whose
/// update ran but whose record cannot be read back) must leave nothing of itself, and the rest of its batch must
/// commit as if it had not been there.
#[tokio::test]
async fn sqlite_a_job_that_fails_half_done_leaves_nothing_and_its_batch_commits() {
    let dir = tempfile::tempdir().unwrap();
    let l = open_sqlite(&dir, LONG);
    l.create(new_event("bad", "b")).await.unwrap();
    let other = rusqlite::Connection::open(dir.path().join("inbox.db")).unwrap();
    other
        .execute("UPDATE events SET origin = 'bogus' WHERE event_id = 'bad'", [])
        .unwrap();
    // GIVEN the writer held up behind another connection's write lock, so the next jobs queue into one batch.
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let first = tokio::spawn({
        let l = l.clone();
        async move { l.create(new_event("e0", "b")).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let jobs = tokio::spawn({
        let l = l.clone();
        async move {
            let bad = key("bad");
            tokio::join!(
                l.create(new_event("e1", "b")),
                l.claim(&bad, "w1", LONG),
                l.create(new_event("e2", "b")),
            )
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    other.execute_batch("COMMIT").unwrap();
    assert_eq!(first.await.unwrap().unwrap(), Created::New);
    // WHEN the claim fails after its update ran
    let (e1, claim, e2) = jobs.await.unwrap();
    assert!(claim.is_err(), "{claim:?}");
    // THEN the others are created and committed, and the failed claim changed nothing.
    assert_eq!((e1.unwrap(), e2.unwrap()), (Created::New, Created::New));
    for id in ["e0", "e1", "e2"] {
        assert!(l.get(&key(id)).await.unwrap().is_some(), "{id} not stored");
    }
    let (status, attempts, owner): (String, i64, Option<String>) = other
        .query_row(
            "SELECT status, attempts, lease_owner FROM events WHERE event_id = 'bad'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!((status.as_str(), attempts, owner), ("RECEIVED", 0, None));
}

/// Reads went through the writer under `BEGIN IMMEDIATE`, so a read waited for (and could
/// fail on) another process's write lock.
#[tokio::test]
async fn sqlite_reads_never_wait_for_the_write_lock() {
    let dir = tempfile::tempdir().unwrap();
    let l = open_sqlite(&dir, LONG);
    l.create(new_event("e1", "b")).await.unwrap();
    let holder = rusqlite::Connection::open(dir.path().join("inbox.db")).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = std::time::Instant::now();
    assert_eq!(l.get(&key("e1")).await.unwrap().unwrap().payload.as_ref(), b"b");
    assert_eq!(l.list(&all(10)).await.unwrap().len(), 1);
    assert_eq!(l.due(Duration::MAX, 10).await.unwrap().len(), 1);
    assert_eq!(l.counts().await.unwrap(), vec![(Status::Received, 1)]);
    l.changed_elsewhere().await.unwrap();
    let took = started.elapsed();
    holder.execute_batch("ROLLBACK").unwrap();
    assert!(
        took < Duration::from_secs(2),
        "reads waited {took:?} for the write lock"
    );
}

/// The purge chose event rows and payload rows with two independent `LIMIT`s.
#[tokio::test]
async fn sqlite_purge_removes_events_with_their_bodies() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let l = open_on(&dir, &clock);
    for i in 0..30 {
        let k = key(&format!("e{i}"));
        l.create(new_event(&format!("e{i}"), "b")).await.unwrap();
        l.claim(&k, "w", LONG).await.unwrap();
        let retention = if i % 3 == 0 { LONG } else { Duration::ZERO };
        l.settle(&k, "w", Settlement::Completed { retention })
            .await
            .unwrap();
    }
    clock.advance(Duration::from_millis(5));
    let mut purged = 0;
    loop {
        let n = l.purge(7).await.unwrap().events;
        if n == 0 {
            break;
        }
        purged += n;
    }
    assert_eq!(purged, 20);
    let c = rusqlite::Connection::open(dir.path().join("inbox.db")).unwrap();
    let orphans: i64 = c
        .query_row(
            "SELECT (SELECT count(*) FROM payloads WHERE event NOT IN (SELECT id FROM events))
                  + (SELECT count(*) FROM events WHERE id NOT IN (SELECT event FROM payloads))",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(orphans, 0);
}

/// Commits only append to the WAL; the checkpointer thread, not the writer, copies them into the database file
/// soon after (the writer's own checkpoint waits for 4,096 pages, forty times what this test writes).
#[tokio::test]
async fn sqlite_checkpoints_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let l = open_sqlite(&dir, LONG);
    let db = dir.path().join("inbox.db");
    let before = std::fs::metadata(&db).unwrap().len();
    for i in 0..100 {
        l.create(new_event(&format!("e{i}"), &"x".repeat(2000)))
            .await
            .unwrap();
    }
    let grown = eventually(
        || async { std::fs::metadata(&db).unwrap().len() },
        |len| *len > before + 100 * 2000,
    )
    .await;
    assert!(grown > before + 100 * 2000, "{before} -> {grown}");
    assert_eq!(l.list(&all(1000)).await.unwrap().len(), 100);
}

/// A store over `dir` whose `point` (a sync or a checkpoint) fails with an I/O error on its `at`th pass, held
/// first so that committed batches wait behind it ([`IoFaults`]).
fn open_failing(dir: &tempfile::TempDir, point: &str, at: u64) -> SqliteLedger {
    let faults = IoFaults::default();
    faults.arm(point, at);
    let options = Options {
        faults,
        ..Options::new(1024, LONG)
    };
    SqliteLedger::open_with(dir.path(), options).unwrap()
}

/// A write is answered only once the WAL holding its commit is synced. A sync that fails answers the writes it was
/// to make durable with an error (a 503 at the receiver, never a 200), and the store takes no write after it: what
/// the page cache held may never reach the disk. Here the sync thread's second `fdatasync` of the WAL (the one
/// after "before") meets an injected I/O error, as on a failing disk.
#[tokio::test]
async fn sqlite_a_failed_sync_of_the_log_answers_an_error_and_stops_every_later_write() {
    let dir = tempfile::tempdir().unwrap();
    let l = open_failing(&dir, "sqlite_wal_sync", 2);
    assert_eq!(l.create(new_event("before", "{}")).await.unwrap(), Created::New);
    assert!(l.check().is_ok());

    let refused = l.create(new_event("during", "{}")).await;
    assert!(
        matches!(&refused, Err(StoreError::Unavailable(m)) if m.contains("could not be synced")),
        "{refused:?}"
    );
    assert!(l.check().is_err(), "the store still says it takes writes");
    for later in [
        l.create(new_event("after", "{}")).await.map(|_| ()),
        l.claim(&key("before"), "w", LONG).await.map(|_| ()),
        l.settle(&key("before"), "w", RETAIN).await.map(|_| ()),
    ] {
        assert!(
            matches!(&later, Err(StoreError::Unavailable(_))),
            "a write after the failed sync: {later:?}"
        );
    }
}

/// Writes sent one after another, 5 ms apart, across a failing sync or checkpoint held for 200 ms: the writer
/// commits them in batches that wait behind the sync, and the next round's sync may well succeed, but the frames
/// of the failed round may be gone from the disk, and theirs come after that gap. So once one write is refused for
/// the failure, no write sent after it is answered, and the store says why.
async fn nothing_after_a_failure_is_answered(l: &SqliteLedger) {
    assert_eq!(l.create(new_event("first", "{}")).await.unwrap(), Created::New);
    let mut writes = tokio::task::JoinSet::new();
    for i in 0..80 {
        let l = l.clone();
        writes.spawn(async move { (i, l.create(new_event(&format!("w{i}"), "{}")).await) });
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut answers = writes.join_all().await;
    answers.sort_by_key(|(i, _)| *i);
    let first_refused = answers
        .iter()
        .position(|(_, a)| a.is_err())
        .expect("no write was refused");
    let answered_after: Vec<_> = answers[first_refused..]
        .iter()
        .filter(|(_, a)| a.is_ok())
        .map(|(i, _)| *i)
        .collect();
    assert!(
        answered_after.is_empty(),
        "w{first_refused} was refused, yet later writes were answered: {answered_after:?}"
    );
    for (i, refused) in &answers[first_refused..] {
        assert!(
            matches!(refused, Err(StoreError::Unavailable(_))),
            "w{i}: {refused:?}"
        );
    }
    assert!(l.failed().is_some(), "no failure recorded");
    let after = l.create(new_event("after", "{}")).await;
    assert!(matches!(&after, Err(StoreError::Unavailable(_))), "{after:?}");
    assert!(l.check().is_err());
}

/// The sync thread's failure, with batches committed behind it: the test the review asked for, which the store
/// before it failed (the next round's sync through a fresh descriptor succeeded, and answered its batches).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_no_batch_waiting_behind_a_failed_sync_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let l = open_failing(&dir, "sqlite_wal_sync", 3);
    nothing_after_a_failure_is_answered(&l).await;
    assert!(l.failed().unwrap().contains("sync thread"), "{:?}", l.failed());
}

/// A checkpoint's I/O error (the checkpointer thread's) is the end of trust too: its sync of the WAL may have
/// dropped frames that the sync thread's next `fdatasync` reports as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_checkpoint_that_fails_stops_every_write_waiting_behind_it() {
    let dir = tempfile::tempdir().unwrap();
    let l = open_failing(&dir, "sqlite_checkpoint", 2);
    nothing_after_a_failure_is_answered(&l).await;
    assert!(l.failed().unwrap().contains("checkpointer"), "{:?}", l.failed());
}

/// The writer's own checkpoint (past 4,096 WAL pages), whose error SQLite's autocheckpoint would have dropped:
/// the commit that ran it fails, and so does everything after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_the_writers_inline_checkpoint_that_fails_stops_every_later_write() {
    let dir = tempfile::tempdir().unwrap();
    let l = open_failing(&dir, "sqlite_inline_checkpoint", 1);
    // About 16 MiB of WAL, written without a pause, so that the checkpointer thread never catches up and the
    // writer checkpoints itself: bodies that do not compress, from 16 writers at once.
    let mut writers = tokio::task::JoinSet::new();
    for w in 0..16u64 {
        let l = l.clone();
        writers.spawn(async move {
            let mut seed = w.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            for i in 0..1_000 {
                let body: String = (0..8_000)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        char::from(b'a' + (seed % 26) as u8)
                    })
                    .collect();
                if let Err(e) = l.create(new_event(&format!("big{w}-{i}"), &body)).await {
                    return Some(e);
                }
            }
            None
        });
    }
    let refused = writers.join_all().await;
    assert!(
        refused
            .iter()
            .all(|e| matches!(e, Some(StoreError::Unavailable(_)))),
        "{refused:?}"
    );
    assert!(
        l.failed().unwrap().contains("inline checkpoint"),
        "{:?}",
        l.failed()
    );
    let after = l.create(new_event("after", "{}")).await;
    assert!(matches!(&after, Err(StoreError::Unavailable(_))), "{after:?}");
}

#[tokio::test]
async fn sqlite_purges_completed_events_past_retention() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let l = open_on(&dir, &clock);
    l.create(new_event("e1", "b")).await.unwrap();
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
    clock.advance(Duration::from_millis(5));
    assert_eq!(l.purge(100).await.unwrap().events, 1);
    assert_eq!(l.purge(100).await.unwrap().events, 0);
}

/// An event of `new_event`'s shape whose body (its id) is remembered for `within`, as a source that marks resent
/// bodies does.
fn marked(id: &str, within: Duration) -> NewEvent {
    NewEvent {
        resent_bodies: ResentBodies::Marked { within },
        ..new_event(id, id)
    }
}

fn rows(dir: &tempfile::TempDir, table: &str) -> i64 {
    let c = rusqlite::Connection::open(dir.path().join("inbox.db")).unwrap();
    c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

/// GIVEN 25 open events whose remembered bodies are past their window and 3 whose bodies are not
/// WHEN the store is purged 10 at a time
/// THEN each purge deletes 10 expired bodies at most, says so while it was full, and the last leaves only the live
/// bodies, while no open event is touched.
#[tokio::test]
async fn sqlite_purges_expired_remembered_bodies_a_batch_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let l = open_on(&dir, &clock);
    for i in 0..25 {
        l.create(marked(&format!("old{i}"), Duration::ZERO))
            .await
            .unwrap();
    }
    for i in 0..3 {
        l.create(marked(&format!("live{i}"), LONG)).await.unwrap();
    }
    clock.advance(Duration::from_millis(5));
    assert_eq!(rows(&dir, "bodies"), 28);

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
    assert_eq!(rows(&dir, "bodies"), 3);
    assert_eq!(rows(&dir, "events"), 28);
    assert_eq!(rows(&dir, "payloads"), 28);
}

/// GIVEN a remembered body whose entry names an event that holds another body (as two bodies under one hashed
/// key would: the key is the first 8 bytes of a SHA-256)
/// WHEN an event with the first body comes under a fresh id
/// THEN it is not marked a resend of the event that holds the other body, and the entry names it from then on.
#[tokio::test]
async fn sqlite_a_remembered_body_is_told_apart_from_another_under_the_same_key() {
    let dir = tempfile::tempdir().unwrap();
    let l = open_sqlite(&dir, LONG);
    assert_eq!(l.create(marked("a", LONG)).await.unwrap(), Created::New);
    assert_eq!(l.create(marked("b", LONG)).await.unwrap(), Created::New);
    tokio::time::sleep(Duration::from_millis(5)).await;
    let c = rusqlite::Connection::open(dir.path().join("inbox.db")).unwrap();
    // The entry of body "a" now names "b", whose body is "b".
    assert_eq!(
        c.execute("DELETE FROM bodies WHERE event_id = 'b'", []).unwrap(),
        1
    );
    assert_eq!(
        c.execute("UPDATE bodies SET event_id = 'b' WHERE event_id = 'a'", [])
            .unwrap(),
        1
    );

    // Events with body "a" under fresh ids, from a source that marks resent bodies.
    let body_a = |id: &str| NewEvent {
        resent_bodies: ResentBodies::Marked { within: LONG },
        ..new_event(id, "a")
    };
    assert_eq!(l.create(body_a("a2")).await.unwrap(), Created::New);
    let stored = l.get(&key("a2")).await.unwrap().unwrap();
    assert_eq!(stored.resent_of, None);

    // The entry names "a2" now: a third event with body "a" is its resend.
    assert_eq!(
        l.create(body_a("a3")).await.unwrap(),
        Created::Resent {
            of: EventId::parse("a2").unwrap()
        }
    );
}

/// GIVEN 23 completed events past retention
/// WHEN the store is purged 10 at a time until a batch is not full
/// THEN every one of them went, with its payload, 10 a transaction at most.
#[tokio::test]
async fn sqlite_purges_every_expired_event_however_many_batches_it_takes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let l = open_on(&dir, &clock);
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
    clock.advance(Duration::from_millis(5));

    let mut events = vec![];
    loop {
        let purged = l.purge(10).await.unwrap();
        events.push(purged.events);
        if !purged.full(10) {
            break;
        }
    }

    assert_eq!(events, vec![10, 10, 3]);
    assert_eq!(rows(&dir, "events"), 0);
    assert_eq!(rows(&dir, "payloads"), 0);
    // Their bodies' window has not passed: a resend under a fresh id still names them, until it does.
    assert_eq!(rows(&dir, "bodies"), 23);
}

#[tokio::test]
async fn sqlite_leases_of_a_dead_process_expire_at_restart() {
    let dir = tempfile::tempdir().unwrap();
    let l = open_sqlite(&dir, LONG);
    l.create(new_event("mine", "b")).await.unwrap();
    l.create(new_event("theirs", "b")).await.unwrap();
    l.claim(&key("mine"), "embedded:2:1:aa", LONG).await.unwrap();
    l.claim(&key("theirs"), "embedded:1:1:bb", LONG).await.unwrap();
    let gone = GoneOwners::AllBut("embedded:2:1".into());
    assert_eq!(l.end_leases(&gone).await.unwrap(), 1);
    assert!(matches!(
        l.claim(&key("theirs"), "embedded:2:1:cc", LONG).await.unwrap(),
        Claim::Claimed(_)
    ));
    assert_eq!(
        l.claim(&key("mine"), "embedded:2:1:dd", LONG).await.unwrap(),
        Claim::OwnedElsewhere
    );
    assert_eq!(l.give_back("embedded:2:1").await.unwrap(), 2);
}

/// Bodies are stored compressed where that makes them smaller, and read back whole; a row written before version 7
/// (as received) still reads, and a stored body that does not decode is corrupt, never an empty or garbled body.
#[tokio::test]
async fn sqlite_bodies_are_stored_compressed_and_read_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let l = open_sqlite(&dir, LONG);
    let json =
        r#"{"action":"opened","repository":{"full_name":"octo/hello"},"sender":{"login":"octo"}}"#.repeat(24);
    let tiny = "{}";
    l.create(new_event("json", &json)).await.unwrap();
    l.create(new_event("tiny", tiny)).await.unwrap();
    let c = rusqlite::Connection::open(dir.path().join("inbox.db")).unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    let stored = |id: &str| -> (i64, i64) {
        c.query_row(
            "SELECT p.encoding, length(p.body) FROM payloads p JOIN events e ON e.id = p.event WHERE e.event_id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    };
    let (encoding, len) = stored("json");
    assert_eq!(encoding, 1, "zstd");
    assert!(len * 4 < json.len() as i64, "{len} of {}", json.len());
    assert_eq!(
        stored("tiny"),
        (0, 2),
        "a body that does not shrink is kept as received"
    );
    assert_eq!(
        l.get(&key("json")).await.unwrap().unwrap().payload.as_ref(),
        json.as_bytes()
    );
    assert_eq!(
        l.get(&key("tiny")).await.unwrap().unwrap().payload.as_ref(),
        tiny.as_bytes()
    );
    match l.claim(&key("json"), "w", LONG).await.unwrap() {
        Claim::Claimed(event) => assert_eq!(event.payload.as_ref(), json.as_bytes()),
        other => panic!("{other:?}"),
    }

    // A row as version 6 wrote it: the body as received, encoding 0 by the column's default.
    c.execute(
        "UPDATE payloads SET body = CAST(?1 AS BLOB), encoding = 0
         WHERE event = (SELECT id FROM events WHERE event_id = 'json')",
        [json.as_str()],
    )
    .unwrap();
    assert_eq!(
        l.get(&key("json")).await.unwrap().unwrap().payload.as_ref(),
        json.as_bytes()
    );
    // Bytes that do not decompress, or an encoding this code does not know: corrupt.
    for (body, encoding) in [("not zstd", 1), ("{}", 9)] {
        c.execute(
            "UPDATE payloads SET body = CAST(?1 AS BLOB), encoding = ?2
             WHERE event = (SELECT id FROM events WHERE event_id = 'tiny')",
            rusqlite::params![body, encoding],
        )
        .unwrap();
        assert!(
            matches!(
                l.get(&key("tiny")).await,
                Err(inbox_core::ports::StoreError::Corrupt(_))
            ),
            "{body} as {encoding}"
        );
    }
}
