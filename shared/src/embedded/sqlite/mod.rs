//! The embedded store: one SQLite file in WAL mode that is the ledger, the work queue's memory (due times and
//! leases) and the dead-letter store at once. Commits are made durable by an `fdatasync` of the WAL before any
//! answer leaves (the write connection itself is `synchronous=NORMAL`; see [`durability`]).
//!
//! Writes go to one writer thread that owns the write connection and commits many operations per transaction
//! (group commit): every caller is answered only after the commit that holds its write is on disk, so no 200 leaves
//! before its record is durable. An operation ([`Op`]) is data; the writer runs it inside the batch's transaction
//! and keeps its result until the commit decides the answer, so nothing ever runs outside a transaction and nothing
//! is answered that the commit did not keep. Reads go to a small pool of read connections: in WAL mode they see the
//! last commit and never take the write lock, so `inbox events list` in another process does not compete with
//! `inbox serve`'s writer.
//!
//! This file holds the [`SqliteLedger`] handle, its [`Options`] and the port impls, which hand each write to the
//! writer ([`writer`]) and each read to the pool ([`readers`]); the sync and checkpoint threads, and what a failed
//! sync does, are in [`durability`]; the schema and its migrations in [`schema`], the mapping of rows to events in
//! [`rows`], the console's overview counts in [`summary`].

mod durability;
mod readers;
mod rows;
mod schema;
mod summary;
mod writer;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::{mpsc, oneshot};

use crate::failpoint::IoFaults;
use crate::model::{Event, EventId, EventKey, NewEvent, SourceName, Status};
use crate::ports::{
    Browse, Checkpoint, Checkpoints, Claim, Created, Ledger, ListFilter, MarkDead, Replay, Settled,
    Settlement, StoreError, Summary, SweepIndex,
};
use crate::rules::{self, Due};
use crate::time::{ms, now_ms};
use durability::{checkpointer, inline_checkpoints, rewrite_log, syncer, Fatal};
use readers::{Readers, READERS};
use rows::{body_key, event_row, find, status, with_payload, COLUMNS, SOURCES};
use schema::migrate;
use summary::summarize;
pub use writer::Purged;
use writer::{Answer, ClaimOnCreate, Encoding, FromAnswer, Job, Op, Prepared, StoredBody, Writer};

/// Committed batches the writer may run ahead of the WAL's sync; past it, it waits for the sync.
const SYNC_AHEAD: usize = 4;

/// Bodies up to this size are stored compressed where that makes them smaller, on the request's own thread (a few
/// microseconds for a 2 KiB body); larger ones are stored as received, so that no request holds a runtime thread,
/// or the memory of a compression, for long.
const COMPRESS_UP_TO: usize = 64 * 1024;

/// How the file is opened.
#[derive(Clone, Debug)]
pub struct Options {
    /// Operations waiting for the writer at most: past it, [`Ledger::create`] answers [`StoreError::Busy`] at once
    /// (back-pressure) while other operations wait.
    pub max_pending: usize,
    /// How long an event may wait for its queue message before the sweeper re-sends it.
    pub grace: Duration,
    /// How long a statement waits for a lock another process holds before it fails as busy.
    pub busy_timeout: Duration,
    /// Before anything else, make what this process sees of the log what the disk holds
    /// ([`durability::rewrite_log`]): for `inbox serve`, which answers senders, after a crash or an earlier
    /// process's failed sync. The operator commands do without.
    pub rewrite_log: bool,
    /// I/O errors injected into the store's own syncs and checkpoints (tests only; see [`IoFaults`]).
    pub faults: IoFaults,
}

impl Options {
    pub fn new(max_pending: usize, grace: Duration) -> Self {
        Self {
            max_pending,
            grace,
            busy_timeout: Duration::from_secs(10),
            rewrite_log: false,
            faults: IoFaults::from_env(),
        }
    }
}

/// The SQLite ledger. Cheap to clone; the writer thread ends when the last clone is dropped.
#[derive(Clone)]
pub struct SqliteLedger {
    jobs: mpsc::Sender<Job>,
    readers: Arc<Readers>,
    path: PathBuf,
    data_version: Arc<std::sync::atomic::AtomicI64>,
    /// Set once a sync or a checkpoint failed: the store takes no more writes, and the process must stop.
    fatal: Fatal,
}

impl SqliteLedger {
    /// Opens (creating) `data_dir/inbox.db`; see [`Options`].
    pub fn open(data_dir: &Path, max_pending: usize, grace: Duration) -> Result<Self, StoreError> {
        Self::open_with(data_dir, Options::new(max_pending, grace))
    }

    pub fn open_with(data_dir: &Path, options: Options) -> Result<Self, StoreError> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| StoreError::Unavailable(format!("cannot create {}: {e}", data_dir.display())))?;
        let path = data_dir.join("inbox.db");
        let mut conn = connect(&path, options.busy_timeout)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(sql)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Unavailable(format!(
                "journal_mode is {mode}, not wal"
            )));
        }
        // Commits are made durable by the sync thread's `fdatasync` of the WAL before any answer leaves
        // ([`durability::syncer`]); checkpoints under NORMAL still sync the WAL before copying it and the database after.
        conn.execute_batch("PRAGMA synchronous=NORMAL;").map_err(sql)?;
        migrate(&conn)?;
        // The one descriptor the WAL is synced through, open from now on (the WAL exists once the database is open
        // in WAL mode): a writeback error of any later moment is reported to it.
        let wal_path = data_dir.join("inbox.db-wal");
        let wal = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&wal_path)
            .map_err(|e| StoreError::Unavailable(format!("cannot open {}: {e}", wal_path.display())))?;
        if options.rewrite_log {
            rewrite_log(&conn, &wal).map_err(|e| {
                StoreError::Unavailable(format!(
                    "cannot make {} durable at start: {e}",
                    wal_path.display()
                ))
            })?;
        }
        let fatal = Fatal::new();
        inline_checkpoints(&mut conn, fatal.clone(), options.faults.clone()).map_err(sql)?;
        let readers = Readers::open(&path, READERS, options.busy_timeout)?;
        // Checkpoints (copying the WAL into the database file, and its fsync) run on a thread and connection of
        // their own, so commits, and the answers waiting on them, do not stall behind them.
        let checkpoints = connect(&path, options.busy_timeout)?;
        // FULL: the database file is fsynced before the WAL frames it took are counted as copied (and reused).
        checkpoints
            .execute_batch("PRAGMA synchronous=FULL;")
            .map_err(sql)?;
        let (committed, ticks) = std::sync::mpsc::sync_channel::<()>(1);
        let (checkpoint_fatal, checkpoint_faults) = (fatal.clone(), options.faults.clone());
        std::thread::Builder::new()
            .name("inbox-sqlite-checkpoint".into())
            .spawn(move || checkpointer(checkpoints, ticks, checkpoint_fatal, checkpoint_faults))
            .map_err(|e| StoreError::Unavailable(format!("cannot start the checkpoint thread: {e}")))?;
        let (jobs, rx) = mpsc::channel(options.max_pending.max(1));
        let writer = Writer {
            conn,
            due: Due::new(options.grace),
        };
        // The writer runs ahead of the sync by a few committed batches at most.
        let (durable, batches) = std::sync::mpsc::sync_channel(SYNC_AHEAD);
        let (sync_fatal, sync_faults) = (fatal.clone(), options.faults);
        std::thread::Builder::new()
            .name("inbox-sqlite-sync".into())
            .spawn(move || syncer(wal, batches, sync_fatal, sync_faults))
            .map_err(|e| StoreError::Unavailable(format!("cannot start the sync thread: {e}")))?;
        let writer_fatal = fatal.clone();
        std::thread::Builder::new()
            .name("inbox-sqlite-writer".into())
            .spawn(move || writer.run(rx, committed, durable, writer_fatal))
            .map_err(|e| StoreError::Unavailable(format!("cannot start the writer thread: {e}")))?;
        Ok(Self {
            jobs,
            readers: Arc::new(readers),
            path,
            data_version: Default::default(),
            fatal,
        })
    }

    /// Resolves once the disk failed a sync or a checkpoint of this store, with the cause: from then on it takes
    /// no write, and the process must stop so that a restart recovers from what the disk holds.
    pub async fn failure(&self) -> String {
        self.fatal.wait().await
    }

    /// The cause, where the disk failed a sync or a checkpoint of this store.
    pub fn failed(&self) -> Option<String> {
        self.fatal.cause()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Hands `op` to the writer; answers after the commit that holds it (or its failure). `create` does not wait
    /// for room in the writer's queue: a full queue is back-pressure, answered 503 by the receiver.
    async fn write(&self, op: Op) -> Result<Answer, StoreError> {
        let wait = !matches!(op, Op::Create(_) | Op::CreateBatch(_));
        let (reply, answer) = oneshot::channel();
        let job = Job { op, reply };
        if wait {
            self.jobs.send(job).await.map_err(|_| writer_stopped())?;
        } else {
            self.jobs.try_send(job).map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => StoreError::Busy,
                mpsc::error::TrySendError::Closed(_) => writer_stopped(),
            })?;
        }
        answer.await.map_err(|_| writer_stopped())?
    }

    /// [`SqliteLedger::write`], answered as the caller expects.
    async fn ask<T: FromAnswer>(&self, op: Op) -> Result<T, StoreError> {
        T::from_answer(self.write(op).await?).ok_or_else(mismatch)
    }

    /// Runs `f` on a read connection, off the async runtime's threads. `now` is this process's clock.
    async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, i64) -> Result<T, StoreError> + Send + 'static,
    {
        let readers = self.readers.clone();
        tokio::task::spawn_blocking(move || readers.with(|c| f(c, now_ms())))
            .await
            .map_err(|e| StoreError::Unavailable(format!("a read stopped: {e}")))?
    }

    /// Ends leases now, so their events can be claimed again at once: those *not* held by `owner_prefix` at
    /// start-up (the serve lock proves their process dead), or those held by it at shutdown (`mine`).
    pub async fn expire_leases(&self, owner_prefix: &str, mine: bool) -> Result<usize, StoreError> {
        let op = Op::ExpireLeases {
            prefix: owner_prefix.to_owned(),
            mine,
        };
        self.ask(op).await
    }

    /// Whether another process (an `inbox replay`) committed since the last call: SQLite's `data_version`.
    pub async fn changed_elsewhere(&self) -> Result<bool, StoreError> {
        let v: i64 = self.ask(Op::DataVersion).await?;
        Ok(self.data_version.swap(v, std::sync::atomic::Ordering::Relaxed) != v)
    }

    /// Deletes completed events past retention, and remembered bodies past their window, at most `limit` of each
    /// in one transaction; returns how many events went.
    pub async fn purge_expired(&self, limit: usize) -> Result<usize, StoreError> {
        Ok(self.purge(limit).await?.events)
    }

    /// [`SqliteLedger::purge_expired`], telling what else went: call again while [`Purged::full`] says a batch was
    /// full, since more may be left.
    pub async fn purge(&self, limit: usize) -> Result<Purged, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.ask(Op::Purge { limit }).await
    }

    /// Counts of events by status (expired completed ones left out).
    pub async fn counts(&self) -> Result<Vec<(Status, u64)>, StoreError> {
        self.read(|c, now| {
            let mut stmt = c
                .prepare_cached(
                    "SELECT status, count(*) FROM events
                     WHERE NOT (status = 'COMPLETED' AND expires_at <= ?1) GROUP BY status",
                )
                .map_err(sql)?;
            let rows = stmt
                .query_map([now], |r| Ok((status(r, 0)?, r.get::<_, i64>(1)? as u64)))
                .map_err(sql)?;
            rows.collect::<rusqlite::Result<_>>().map_err(sql)
        })
        .await
    }
}

/// `event` as the writer stores it: its kept headers encoded, its body compressed where that makes it smaller, and
/// the key of its body among the remembered ones.
fn prepare(event: NewEvent, claim: Option<ClaimOnCreate>) -> Result<Prepared, StoreError> {
    let headers = serde_json::to_string(&event.headers)
        .map_err(|e| StoreError::Unavailable(format!("cannot encode the headers of {}: {e}", event.key)))?;
    let compressed = (event.payload.len() <= COMPRESS_UP_TO)
        .then(|| crate::compression::smaller(&event.payload, crate::compression::FAST))
        .flatten();
    let body = match compressed {
        Some(bytes) => StoredBody {
            bytes: bytes.into(),
            encoding: Encoding::Zstd,
        },
        None => StoredBody {
            bytes: event.payload.clone(),
            encoding: Encoding::Raw,
        },
    };
    // Only where the source looks for resent bodies (`within`): the key of its body among the remembered ones.
    let body_key = event.resent_bodies.within().map(|_| {
        body_key(
            event.key.source.as_str(),
            event.event_type.as_deref().unwrap_or(""),
            &event.payload_sha256,
        )
    });
    Ok(Prepared {
        event,
        headers,
        body,
        body_key,
        claim,
    })
}

/// A connection to the store's file as every one of this process is opened: it never checkpoints when it closes.
/// A checkpoint at close would copy into the database file what the page cache shows, which after a failed sync
/// is not what the disk holds; the checkpointer does that work while the store runs, and a WAL left at exit is
/// recovered by the next open.
fn connect(path: &Path, busy_timeout: Duration) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(sql)?;
    conn.busy_timeout(busy_timeout).map_err(sql)?;
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
        .map_err(sql)?;
    Ok(conn)
}

fn writer_stopped() -> StoreError {
    StoreError::Unavailable("the writer thread stopped".into())
}

fn mismatch() -> StoreError {
    StoreError::Unavailable("the writer answered another operation".into())
}

fn sql(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => StoreError::Busy,
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
            StoreError::Corrupt(e.to_string())
        }
        _ => StoreError::Unavailable(e.to_string()),
    }
}

#[async_trait]
impl Ledger for SqliteLedger {
    async fn create(&self, event: NewEvent) -> Result<Created, StoreError> {
        self.ask(Op::Create(prepare(event, None)?)).await
    }
    async fn create_claimed(
        &self,
        event: NewEvent,
        owner: &str,
        lease: Duration,
    ) -> Result<(Created, Option<Event>), StoreError> {
        let claim = ClaimOnCreate {
            owner: owner.to_owned(),
            lease: ms(lease),
        };
        self.ask(Op::Create(prepare(event, Some(claim))?)).await
    }
    async fn create_batch(&self, events: Vec<NewEvent>) -> Result<Vec<Created>, StoreError> {
        let prepared = events
            .into_iter()
            .map(|event| prepare(event, None))
            .collect::<Result<_, _>>()?;
        self.ask(Op::CreateBatch(prepared)).await
    }
    async fn claim(&self, key: &EventKey, owner: &str, lease: Duration) -> Result<Claim, StoreError> {
        let op = Op::Claim {
            key: key.clone(),
            owner: owner.to_owned(),
            lease: ms(lease),
        };
        self.ask(op).await
    }
    async fn settle(
        &self,
        key: &EventKey,
        owner: &str,
        settlement: Settlement,
    ) -> Result<Settled, StoreError> {
        let op = Op::Settle {
            key: key.clone(),
            owner: owner.to_owned(),
            settlement,
        };
        self.ask(op).await
    }
    async fn release(&self, key: &EventKey, owner: &str) -> Result<Settled, StoreError> {
        let op = Op::Release {
            key: key.clone(),
            owner: owner.to_owned(),
        };
        self.ask(op).await
    }
    async fn mark_dead(&self, key: &EventKey, reason: &str) -> Result<MarkDead, StoreError> {
        let op = Op::MarkDead {
            key: key.clone(),
            reason: reason.to_owned(),
        };
        self.ask(op).await
    }
    async fn mark_notified(&self, key: &EventKey) -> Result<(), StoreError> {
        self.ask(Op::MarkNotified(key.clone())).await
    }
    async fn replay(&self, key: &EventKey, force: bool) -> Result<Replay, StoreError> {
        let op = Op::Replay {
            key: key.clone(),
            force,
        };
        self.ask(op).await
    }
    async fn get(&self, key: &EventKey) -> Result<Option<Event>, StoreError> {
        let key = key.clone();
        self.read(move |c, now| match find(c, &key)? {
            Some((_, e)) if e.is_expired(now) => Ok(None),
            Some((id, e)) => match with_payload(c, id, e)? {
                Ok(event) => Ok(Some(event)),
                Err(event) => Err(StoreError::Corrupt(rules::missing_body(&event))),
            },
            None => Ok(None),
        })
        .await
    }
    fn check(&self) -> Result<(), StoreError> {
        if self.jobs.is_closed() {
            return Err(writer_stopped());
        }
        if self.fatal.is_set() {
            return Err(StoreError::Unavailable("a sync of the store's log failed".into()));
        }
        Ok(())
    }
}

#[async_trait]
impl SweepIndex for SqliteLedger {
    async fn defer_alarm(&self, key: &EventKey, until: i64) -> Result<(), StoreError> {
        let op = Op::DeferAlarm {
            key: key.clone(),
            until,
        };
        self.ask(op).await
    }
    async fn resent(&self, key: &EventKey, status: Status, updated_at: i64) -> Result<(), StoreError> {
        let op = Op::Resent {
            key: key.clone(),
            status,
            updated_at,
        };
        self.ask(op).await
    }
    async fn due(&self, due_before: i64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |c, _| {
            let mut stmt = c
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM events WHERE due_at <= ?1 ORDER BY due_at LIMIT ?2"
                ))
                .map_err(sql)?;
            let rows = stmt
                .query_map(params![due_before, limit], |r| event_row(r).map(|(_, e)| e))
                .map_err(sql)?;
            rows.collect::<rusqlite::Result<_>>().map_err(sql)
        })
        .await
    }
}

#[async_trait]
impl Checkpoints for SqliteLedger {
    async fn present(&self, source: &SourceName, ids: &[EventId]) -> Result<HashSet<EventId>, StoreError> {
        let (source, ids) = (source.clone(), ids.to_vec());
        self.read(move |c, _| {
            // Any record, expired or not: past retention "done and forgotten" looks like "never received".
            let mut stmt = c
                .prepare_cached("SELECT 1 FROM events WHERE source = ?1 AND event_id = ?2")
                .map_err(sql)?;
            let mut found = HashSet::new();
            for id in ids {
                if stmt.exists(params![source.as_str(), id.as_str()]).map_err(sql)? {
                    found.insert(id);
                }
            }
            Ok(found)
        })
        .await
    }
    async fn checkpoint(&self, source: &SourceName) -> Result<Option<Checkpoint>, StoreError> {
        let source = source.clone();
        self.read(move |c, _| {
            let body: Option<String> = c
                .prepare_cached("SELECT body FROM checkpoints WHERE source = ?1")
                .and_then(|mut s| s.query_row([source.as_str()], |r| r.get(0)).optional())
                .map_err(sql)?;
            body.map(|b| {
                serde_json::from_str(&b)
                    .map_err(|e| StoreError::Corrupt(format!("the checkpoint of {source}: {e}")))
            })
            .transpose()
        })
        .await
    }
    async fn save_checkpoint(&self, source: &SourceName, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        let body = serde_json::to_string(checkpoint)
            .map_err(|e| StoreError::Unavailable(format!("cannot encode the checkpoint of {source}: {e}")))?;
        let op = Op::SaveCheckpoint {
            source: source.clone(),
            body,
        };
        self.ask(op).await
    }
}

#[async_trait]
impl Browse for SqliteLedger {
    async fn list(&self, filter: &ListFilter) -> Result<Vec<Event>, StoreError> {
        use rusqlite::types::Value;
        let limit = i64::try_from(filter.limit).unwrap_or(i64::MAX);
        // Only the conditions the filter sets, so that SQLite picks the index that serves them (see SCHEMA_V3).
        let mut conditions = vec!["NOT (status = 'COMPLETED' AND expires_at <= ?1)".to_owned()];
        let mut values: Vec<Value> = Vec::new();
        let mut bind = |condition: &str, value: Value| {
            values.push(value);
            conditions.push(condition.replace('?', &format!("?{}", values.len() + 1)));
        };
        if let Some(st) = filter.status {
            bind("status = ?", Value::Text(st.as_str().to_owned()));
        }
        if let Some(source) = &filter.source {
            bind("source = ?", Value::Text(source.as_str().to_owned()));
        }
        if let Some(t) = &filter.event_type {
            bind("event_type = ?", Value::Text(t.clone()));
        }
        if let Some(id) = &filter.event_id {
            bind("event_id = ?", Value::Text(id.as_str().to_owned()));
        }
        if let Some(t) = filter.received_from {
            bind("received_at >= ?", Value::Integer(t));
        }
        if let Some(t) = filter.received_to {
            bind("received_at < ?", Value::Integer(t));
        }
        if filter.received_to.is_none() && filter.before.is_none() {
            // A bound the planner can see: without one, the bundled SQLite sorted the whole table for the
            // unfiltered newest-first page rather than walk `events_received` backwards (185 ms at 100k rows).
            bind("received_at <= ?", Value::Integer(i64::MAX));
        }
        if let Some(c) = &filter.before {
            bind("received_at <= ?", Value::Integer(c.received_at));
            let n = values.len() + 1;
            values.push(Value::Text(c.source.as_str().to_owned()));
            values.push(Value::Text(c.event_id.as_str().to_owned()));
            conditions.push(format!(
                "(received_at < ?{} OR (source, event_id) < (?{}, ?{}))",
                n,
                n + 1,
                n + 2
            ));
        }
        if filter.event_id.is_some() && filter.source.is_none() {
            conditions.push(format!("source IN ({SOURCES})"));
        }
        values.push(Value::Integer(limit));
        let query = format!(
            "SELECT {COLUMNS} FROM events WHERE {} ORDER BY received_at DESC, source DESC, event_id DESC LIMIT ?{}",
            conditions.join(" AND "),
            values.len() + 1
        );
        self.read(move |c, now| {
            let mut stmt = c.prepare_cached(&query).map_err(sql)?;
            let params = std::iter::once(Value::Integer(now)).chain(values);
            let rows = stmt
                .query_map(rusqlite::params_from_iter(params), |r| {
                    event_row(r).map(|(_, e)| e)
                })
                .map_err(sql)?;
            rows.collect::<rusqlite::Result<_>>().map_err(sql)
        })
        .await
    }
    /// Each count from an index: by status from `events_status`, per source from `events_source`, less the
    /// completed events past retention (from `events_expiry`), the open and dead ones per source looked up.
    async fn summary(&self) -> Result<Summary, StoreError> {
        self.read(|c, now| summarize(c, now).map_err(sql)).await
    }
}
