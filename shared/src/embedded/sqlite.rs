//! The embedded store: one SQLite file (WAL, `synchronous=FULL`) that is the ledger, the work queue's memory (due
//! times and leases) and the dead-letter store at once.
//!
//! Writes go to one writer thread that owns the write connection and commits many operations per transaction
//! (group commit): every caller is answered only after the commit that holds its write is on disk, so no 200 leaves
//! before its record is durable. An operation ([`Op`]) is data; the writer runs it inside the batch's transaction
//! and keeps its result until the commit decides the answer, so nothing ever runs outside a transaction and nothing
//! is answered that the commit did not keep. Reads go to a small pool of read connections: in WAL mode they see the
//! last commit and never take the write lock, so `inbox events list` in another process does not compete with
//! `inbox serve`'s writer.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, Row};
use tokio::sync::{mpsc, oneshot};

use crate::model::{Event, EventId, EventKey, NewEvent, Origin, ResentBodies, SourceName, Status};
use crate::ports::{Browse, Checkpoints, SweepIndex, 
    Bucket, Checkpoint, Claim, Created, Ledger, ListFilter, MarkDead, Replay, Settled, Settlement,
    StoreError, Summary,
};
use crate::rules::{self, Due};
use crate::time::{ms, now_ms};

/// Operations committed together at most.
const MAX_BATCH: usize = 512;
/// Read connections; reads are short, and most of them come from the sweeper and operators.
const READERS: usize = 4;
/// Each read connection's page cache, in KiB (`PRAGMA cache_size` takes a negative number for KiB).
const READER_CACHE_KIB: i64 = -512;
/// How often, at most, the checkpointer thread copies committed WAL frames into the database file.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(5);
/// WAL pages past which the writer checkpoints inline (SQLite's autocheckpoint), should the checkpointer thread
/// fall behind; below it the writer never does.
const INLINE_CHECKPOINT_PAGES: u32 = 8192;
/// The schema version this code writes (`PRAGMA user_version`); older files are brought up to it at open.
const SCHEMA_VERSION: i64 = 5;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS events (
    id              INTEGER PRIMARY KEY,
    source          TEXT    NOT NULL,
    event_id        TEXT    NOT NULL,
    event_type      TEXT,
    status          TEXT    NOT NULL,
    payload_sha256  TEXT    NOT NULL,
    received_at     INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    replays         INTEGER NOT NULL DEFAULT 0,
    lease_owner     TEXT,
    lease_until     INTEGER,
    next_attempt_at INTEGER,
    last_error      TEXT,
    completed_at    INTEGER,
    expires_at      INTEGER,
    notified_at     INTEGER,
    -- The sparse index key: set only while the event is open, or dead with its alarm not yet sent.
    due_at          INTEGER,
    UNIQUE (source, event_id)
);
CREATE INDEX IF NOT EXISTS events_due ON events (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS events_status ON events (status, received_at);
CREATE INDEX IF NOT EXISTS events_expiry ON events (expires_at) WHERE expires_at IS NOT NULL;
-- Bodies are written once, beside the small state row that every transition rewrites.
CREATE TABLE IF NOT EXISTS payloads (
    event   INTEGER PRIMARY KEY,
    headers TEXT NOT NULL,
    body    BLOB NOT NULL
);
";

/// Version 2: the origin of an event, when it was last replayed (the age budget counts from there), the bodies of
/// sources that refuse a resent body under a fresh id, and the reconciliation checkpoints, apart from the events.
const SCHEMA_V2: &str = "
ALTER TABLE events ADD COLUMN origin TEXT NOT NULL DEFAULT 'webhook';
ALTER TABLE events ADD COLUMN replayed_at INTEGER;
CREATE TABLE IF NOT EXISTS bodies (
    source         TEXT    NOT NULL,
    payload_sha256 TEXT    NOT NULL,
    event_id       TEXT    NOT NULL,
    expires_at     INTEGER NOT NULL,
    PRIMARY KEY (source, payload_sha256)
);
CREATE TABLE IF NOT EXISTS checkpoints (
    source TEXT PRIMARY KEY,
    body   TEXT NOT NULL
);
";

/// Version 3: the operator console's listings, newest first, filtered by source or type, each served from an
/// index rather than a walk of the table. Only inserts write them (`received_at`, `source` and `event_type` never
/// change), so the state transitions cost what they did; and each grows at its end (per source, per type), so an
/// insert dirties a page already dirty in its batch. A filter on the id alone needs no index of its own: it looks
/// the id up under each source in the unique key (see [`SOURCES`]).
const SCHEMA_V3: &str = "
CREATE INDEX IF NOT EXISTS events_received ON events (received_at);
CREATE INDEX IF NOT EXISTS events_source ON events (source, received_at);
CREATE INDEX IF NOT EXISTS events_type ON events (event_type, received_at);
";

/// Version 4: version 3 had an index on `event_id` alone. Ids are random, so each insert wrote a leaf page of its
/// own there, as many as the unique key itself: a tenth of the accept rate, for a lookup the unique key serves.
const SCHEMA_V4: &str = "DROP INDEX IF EXISTS events_event_id;";

/// Version 5: a resent body is stored as its own event, marked with the id that held it (`resent_of`), and a body
/// is remembered per source **and type** (`''` for none), since one body under two types is two events. The
/// remembered bodies of version 4 keep their holder, under its type.
const SCHEMA_V5: &str = "
ALTER TABLE events ADD COLUMN resent_of TEXT;
CREATE TABLE bodies_v5 (
    source         TEXT    NOT NULL,
    event_type     TEXT    NOT NULL,
    payload_sha256 TEXT    NOT NULL,
    event_id       TEXT    NOT NULL,
    expires_at     INTEGER NOT NULL,
    PRIMARY KEY (source, event_type, payload_sha256)
);
INSERT OR IGNORE INTO bodies_v5 (source, event_type, payload_sha256, event_id, expires_at)
    SELECT b.source, coalesce(e.event_type, ''), b.payload_sha256, b.event_id, b.expires_at
    FROM bodies b LEFT JOIN events e ON e.source = b.source AND e.event_id = b.event_id;
DROP TABLE bodies;
ALTER TABLE bodies_v5 RENAME TO bodies;
";

/// The sources present, each found by one seek in `events_source` (a skip scan), so that an id looked up without
/// its source is still a seek per source in the unique key `(source, event_id)`.
const SOURCES: &str = "WITH RECURSIVE s(x) AS (
        SELECT min(source) FROM events
        UNION ALL SELECT (SELECT min(source) FROM events WHERE source > s.x) FROM s WHERE s.x IS NOT NULL
    ) SELECT x FROM s WHERE x IS NOT NULL";

const COLUMNS: &str =
    "id, source, event_id, event_type, status, payload_sha256, received_at, updated_at, attempts, \
    replays, lease_owner, lease_until, next_attempt_at, last_error, completed_at, expires_at, notified_at, \
    replayed_at, origin, resent_of";

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
}

impl Options {
    pub fn new(max_pending: usize, grace: Duration) -> Self {
        Self {
            max_pending,
            grace,
            busy_timeout: Duration::from_secs(10),
        }
    }
}

/// One write, as data: what the writer runs inside a transaction.
enum Op {
    Create(NewEvent),
    Claim {
        key: EventKey,
        owner: String,
        lease: i64,
    },
    Settle {
        key: EventKey,
        owner: String,
        settlement: Settlement,
    },
    Release {
        key: EventKey,
        owner: String,
    },
    MarkDead {
        key: EventKey,
        reason: String,
    },
    MarkNotified(EventKey),
    DeferAlarm {
        key: EventKey,
        until: i64,
    },
    Resent {
        key: EventKey,
        status: Status,
        updated_at: i64,
    },
    Replay {
        key: EventKey,
        force: bool,
    },
    ExpireLeases {
        prefix: String,
        mine: bool,
    },
    Purge {
        limit: i64,
    },
    SaveCheckpoint {
        source: SourceName,
        body: String,
    },
    /// `PRAGMA data_version` of the write connection: served between transactions, it takes no lock. Only this
    /// connection tells another process's commits apart from this one's.
    DataVersion,
}

/// What an operation answers.
enum Answer {
    Created(Created),
    Claim(Claim),
    Settled(Settled),
    MarkDead(MarkDead),
    Replay(Replay),
    Count(usize),
    Version(i64),
    Done,
}

/// Where an operation's answer goes.
type Reply = oneshot::Sender<Result<Answer, StoreError>>;

/// An operation and where its answer goes.
struct Job {
    op: Op,
    reply: Reply,
}

/// The SQLite ledger. Cheap to clone; the writer thread ends when the last clone is dropped.
#[derive(Clone)]
pub struct SqliteLedger {
    jobs: mpsc::Sender<Job>,
    readers: Arc<Readers>,
    path: PathBuf,
    data_version: Arc<std::sync::atomic::AtomicI64>,
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
        let conn = Connection::open(&path).map_err(sql)?;
        conn.busy_timeout(options.busy_timeout).map_err(sql)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(sql)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Unavailable(format!(
                "journal_mode is {mode}, not wal"
            )));
        }
        conn.execute_batch("PRAGMA synchronous=FULL;").map_err(sql)?;
        migrate(&conn)?;
        conn.pragma_update(None, "wal_autocheckpoint", INLINE_CHECKPOINT_PAGES)
            .map_err(sql)?;
        let readers = Readers::open(&path, READERS, options.busy_timeout)?;
        // Checkpoints (copying the WAL into the database file, and its fsync) run on a thread and connection of
        // their own, so commits, and the answers waiting on them, do not stall behind them.
        let checkpoints = Connection::open(&path).map_err(sql)?;
        checkpoints.busy_timeout(options.busy_timeout).map_err(sql)?;
        // FULL: the database file is fsynced before the WAL frames it took are counted as copied (and reused).
        checkpoints
            .execute_batch("PRAGMA synchronous=FULL;")
            .map_err(sql)?;
        let (committed, ticks) = std::sync::mpsc::sync_channel::<()>(1);
        std::thread::Builder::new()
            .name("inbox-sqlite-checkpoint".into())
            .spawn(move || checkpointer(checkpoints, ticks))
            .map_err(|e| StoreError::Unavailable(format!("cannot start the checkpoint thread: {e}")))?;
        let (jobs, rx) = mpsc::channel(options.max_pending.max(1));
        let writer = Writer {
            conn,
            due: Due::new(options.grace),
        };
        std::thread::Builder::new()
            .name("inbox-sqlite-writer".into())
            .spawn(move || writer.run(rx, committed))
            .map_err(|e| StoreError::Unavailable(format!("cannot start the writer thread: {e}")))?;
        Ok(Self {
            jobs,
            readers: Arc::new(readers),
            path,
            data_version: Default::default(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Hands `op` to the writer; answers after the commit that holds it (or its failure). `create` does not wait
    /// for room in the writer's queue: a full queue is back-pressure, answered 503 by the receiver.
    async fn write(&self, op: Op) -> Result<Answer, StoreError> {
        let wait = !matches!(op, Op::Create(_));
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

    /// Deletes completed events past retention, at most `limit` a call; returns how many went.
    pub async fn purge_expired(&self, limit: usize) -> Result<usize, StoreError> {
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

/// Brings the file's schema to [`SCHEMA_VERSION`]; a file already there is only read (no write lock taken).
fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sql)?;
    if version >= SCHEMA_VERSION {
        return Ok(());
    }
    conn.execute_batch("BEGIN IMMEDIATE").map_err(sql)?;
    let migrated = (|| {
        // Read again under the lock: another process may have migrated meanwhile.
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version >= SCHEMA_VERSION {
            return Ok(());
        }
        if version < 2 {
            conn.execute_batch(SCHEMA)?;
            conn.execute_batch(SCHEMA_V2)?;
        }
        if version < 3 {
            conn.execute_batch(SCHEMA_V3)?;
        }
        if version < 4 {
            conn.execute_batch(SCHEMA_V4)?;
        }
        conn.execute_batch(SCHEMA_V5)?;
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)
    })();
    match migrated {
        Ok(()) => conn.execute_batch("COMMIT").map_err(sql),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(sql(e))
        }
    }
}

/// The read connections: WAL readers see the last commit and never block the writer.
struct Readers {
    idle: Mutex<Vec<Connection>>,
    path: PathBuf,
    busy_timeout: Duration,
}

impl Readers {
    fn open(path: &Path, n: usize, busy_timeout: Duration) -> Result<Self, StoreError> {
        let readers = Self {
            idle: Mutex::new(Vec::with_capacity(n)),
            path: path.to_owned(),
            busy_timeout,
        };
        let mut idle = Vec::with_capacity(n);
        for _ in 0..n {
            idle.push(readers.connect()?);
        }
        *crate::sync::lock(&readers.idle) = idle;
        Ok(readers)
    }

    fn connect(&self) -> Result<Connection, StoreError> {
        let flags =
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(&self.path, flags).map_err(sql)?;
        conn.busy_timeout(self.busy_timeout).map_err(sql)?;
        // A read connection never writes, whatever a bug might ask of it.
        conn.pragma_update(None, "query_only", true).map_err(sql)?;
        // Reads are lookups and short pages; the operating system's page cache holds the file for all of them.
        // SQLite's default (2 MB a connection) cost the pool 8 MiB of the server's memory budget.
        conn.pragma_update(None, "cache_size", READER_CACHE_KIB)
            .map_err(sql)?;
        Ok(conn)
    }

    /// Runs `f` on an idle connection (a new one if all are busy; at most the pool's size is kept).
    fn with<T>(&self, f: impl FnOnce(&Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let taken = crate::sync::lock(&self.idle).pop();
        let conn = match taken {
            Some(c) => c,
            None => self.connect()?,
        };
        let result = f(&conn);
        let mut idle = crate::sync::lock(&self.idle);
        if idle.len() < READERS {
            idle.push(conn);
        }
        result
    }
}

/// The writer thread's state: the write connection and the due-time rules.
struct Writer {
    conn: Connection,
    due: Due,
}

impl Writer {
    /// Takes what is waiting (up to a batch), runs it in one transaction, commits (fsync), then answers.
    fn run(self, mut rx: mpsc::Receiver<Job>, committed: std::sync::mpsc::SyncSender<()>) {
        let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH);
        while let Some(first) = rx.blocking_recv() {
            batch.push(first);
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            // The one read served here, between transactions.
            let (reads, writes): (Vec<Job>, Vec<Job>) =
                batch.drain(..).partition(|job| matches!(job.op, Op::DataVersion));
            for job in reads {
                let _ = job.reply.send(self.data_version());
            }
            if !writes.is_empty() {
                self.commit_batch(writes);
                // Full means a tick is already waiting: the checkpointer will see this commit too.
                let _ = committed.try_send(());
            }
        }
    }

    /// Runs `batch` in one transaction and answers each job once the commit has decided its fate.
    ///
    /// Jobs run side by side without a savepoint each: a savepoint makes SQLite copy every page a job touches that
    /// an earlier job of the batch already changed (the hot tails of the table and its indexes), which was a tenth
    /// of the writer's time. Jobs rarely fail; when one does, the transaction is rolled back whole, the failing job
    /// alone is answered with its error, and the rest run again from the start, each in a savepoint of its own
    /// this time, so a second failure costs no third pass.
    fn commit_batch(&self, batch: Vec<Job>) {
        crate::failpoint!("sqlite_writer_batch");
        let mut jobs = batch;
        let mut careful = false;
        loop {
            if let Err(e) = self.conn.execute_batch("BEGIN IMMEDIATE").map_err(sql) {
                // Nothing of the batch runs outside a transaction: every job is answered with the failure.
                for job in jobs {
                    let _ = job.reply.send(Err(e.clone()));
                }
                return;
            }
            let mut answers: Vec<Result<Answer, StoreError>> = Vec::with_capacity(jobs.len());
            let mut failed = None;
            for (i, job) in jobs.iter().enumerate() {
                let result = if careful {
                    self.step(&job.op)
                } else {
                    self.apply(&job.op, now_ms())
                };
                match result {
                    Err(e) if !careful || self.conn.is_autocommit() => {
                        failed = Some((i, e));
                        break;
                    }
                    result => answers.push(result),
                }
            }
            if let Some((i, e)) = failed {
                // Undo everything the batch did, so no job is kept half done; the others run again.
                if !self.conn.is_autocommit() {
                    let _ = self.conn.execute_batch("ROLLBACK");
                }
                let _ = jobs.remove(i).reply.send(Err(e));
                if jobs.is_empty() {
                    return;
                }
                careful = true;
                continue;
            }
            let done = self.conn.execute_batch("COMMIT").map_err(sql);
            if done.is_err() && !self.conn.is_autocommit() {
                let _ = self.conn.execute_batch("ROLLBACK");
            }
            for (job, result) in jobs.into_iter().zip(answers) {
                let _ = job.reply.send(match &done {
                    Ok(()) => result,
                    Err(e) => Err(e.clone()),
                });
            }
            return;
        }
    }

    /// One job inside the open transaction, in a savepoint of its own: a failing job leaves the others intact.
    fn step(&self, op: &Op) -> Result<Answer, StoreError> {
        run(&self.conn, "SAVEPOINT op").map_err(sql)?;
        let result = self.apply(op, now_ms());
        if result.is_err() && !self.conn.is_autocommit() {
            let _ = run(&self.conn, "ROLLBACK TO op");
        }
        if !self.conn.is_autocommit() {
            let _ = run(&self.conn, "RELEASE op");
        }
        result
    }

    fn data_version(&self) -> Result<Answer, StoreError> {
        self.conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .map(Answer::Version)
            .map_err(sql)
    }

    fn apply(&self, op: &Op, now: i64) -> Result<Answer, StoreError> {
        let c = &self.conn;
        Ok(match op {
            Op::Create(event) => Answer::Created(self.create(event, now)?),
            Op::Claim { key, owner, lease } => Answer::Claim(self.claim(key, owner, *lease, now)?),
            Op::Settle {
                key,
                owner,
                settlement,
            } => Answer::Settled(self.settle(key, owner, settlement, now)?),
            Op::Release { key, owner } => {
                let n = c
                    .prepare_cached(
                        "UPDATE events SET lease_until = ?4, due_at = ?5, updated_at = ?4
                         WHERE source = ?1 AND event_id = ?2 AND status = 'PROCESSING' AND lease_owner = ?3",
                    )
                    .and_then(|mut s| {
                        s.execute(params![
                            key.source.as_str(),
                            key.event_id.as_str(),
                            owner,
                            now,
                            self.due.processing(now)
                        ])
                    })
                    .map_err(sql)?;
                Answer::Settled(if n == 1 { Settled::Done } else { Settled::LeaseLost })
            }
            Op::MarkDead { key, reason } => Answer::MarkDead(self.mark_dead(key, reason, now)?),
            Op::MarkNotified(key) => {
                c.prepare_cached(
                    "UPDATE events SET notified_at = ?3, due_at = NULL
                     WHERE source = ?1 AND event_id = ?2 AND status = 'DEAD' AND notified_at IS NULL",
                )
                .and_then(|mut s| s.execute(params![key.source.as_str(), key.event_id.as_str(), now]))
                .map_err(sql)?;
                Answer::Done
            }
            Op::DeferAlarm { key, until } => {
                c.prepare_cached(
                    "UPDATE events SET due_at = ?3
                     WHERE source = ?1 AND event_id = ?2 AND status = 'DEAD' AND notified_at IS NULL",
                )
                .and_then(|mut s| s.execute(params![key.source.as_str(), key.event_id.as_str(), until]))
                .map_err(sql)?;
                Answer::Done
            }
            Op::Resent {
                key,
                status,
                updated_at,
            } => {
                c.prepare_cached(
                    "UPDATE events SET due_at = ?5
                     WHERE source = ?1 AND event_id = ?2 AND status = ?3 AND updated_at = ?4 AND due_at IS NOT NULL",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        key.source.as_str(),
                        key.event_id.as_str(),
                        status.as_str(),
                        updated_at,
                        self.due.resent(now, *updated_at)
                    ])
                })
                .map_err(sql)?;
                Answer::Done
            }
            Op::Replay { key, force } => Answer::Replay(self.replay(key, *force, now)?),
            Op::ExpireLeases { prefix, mine } => Answer::Count(
                c.execute(
                    "UPDATE events SET lease_until = ?1, due_at = ?1, updated_at = ?1
                     WHERE status = 'PROCESSING' AND lease_until > ?1
                       AND (coalesce(substr(lease_owner, 1, length(?2)) = ?2, 0) = ?3)",
                    params![now, prefix, mine],
                )
                .map_err(sql)?,
            ),
            Op::Purge { limit } => {
                // One choice of rows for both tables, so no payload outlives its event nor the reverse.
                let ids: Vec<i64> = c
                    .prepare_cached(
                        "SELECT id FROM events WHERE expires_at <= ?1 AND status = 'COMPLETED' LIMIT ?2",
                    )
                    .and_then(|mut s| s.query_map(params![now, limit], |r| r.get(0))?.collect())
                    .map_err(sql)?;
                for id in &ids {
                    c.prepare_cached("DELETE FROM payloads WHERE event = ?1")
                        .and_then(|mut s| s.execute([id]))
                        .map_err(sql)?;
                    c.prepare_cached("DELETE FROM events WHERE id = ?1")
                        .and_then(|mut s| s.execute([id]))
                        .map_err(sql)?;
                }
                c.prepare_cached("DELETE FROM bodies WHERE expires_at <= ?1")
                    .and_then(|mut s| s.execute([now]))
                    .map_err(sql)?;
                Answer::Count(ids.len())
            }
            Op::SaveCheckpoint { source, body } => {
                c.prepare_cached(
                    "INSERT INTO checkpoints (source, body) VALUES (?1, ?2)
                     ON CONFLICT (source) DO UPDATE SET body = excluded.body",
                )
                .and_then(|mut s| s.execute(params![source.as_str(), body]))
                .map_err(sql)?;
                Answer::Done
            }
            Op::DataVersion => return self.data_version(),
        })
    }

    fn create(&self, event: &NewEvent, now: i64) -> Result<Created, StoreError> {
        let c = &self.conn;
        // A body already stored under another id of this source and type: a resend under a fresh id, or a
        // distinct event with the same bytes. Looked for in the same transaction as the insert.
        let resent_of = match event.resent_bodies.within() {
            None => None,
            Some(_) => self.body_holder(event, now)?,
        };
        if let (Some(holder), ResentBodies::Refused { .. }) = (&resent_of, event.resent_bodies) {
            // A retry of this very event stays its own duplicate, whoever holds the body now.
            return Ok(match find(c, &event.key)? {
                Some((_, own)) if !own.is_expired(now) => rules::duplicate_of(&own),
                _ => rules::duplicate_of(holder),
            });
        }
        let resent_of = resent_of.map(|holder| holder.event_id);
        if self.insert(event, resent_of.as_ref(), now)? {
            if resent_of.is_none() {
                self.remember_body(event, now)?;
            }
            return Ok(rules::created(resent_of));
        }
        let Some((id, existing)) = find(c, &event.key)? else {
            return Err(StoreError::Unavailable(format!(
                "the create of {} was refused but no row stands in the way",
                event.key
            )));
        };
        // Past retention a completed event no longer counts for dedup: a webhook reusing its id is a new event.
        // Reconciliation never replaces a record: past retention it cannot tell "never received" from "done".
        if existing.is_expired(now) && event.origin == Origin::Webhook {
            c.execute("DELETE FROM payloads WHERE event = ?1", [id])
                .map_err(sql)?;
            c.execute("DELETE FROM events WHERE id = ?1", [id]).map_err(sql)?;
            self.insert(event, resent_of.as_ref(), now)?;
            if resent_of.is_none() {
                self.remember_body(event, now)?;
            }
            return Ok(rules::created(resent_of));
        }
        Ok(rules::duplicate_of(&existing))
    }

    /// The live event that holds `event`'s body under another id of its source and type, if any.
    fn body_holder(&self, event: &NewEvent, now: i64) -> Result<Option<Event>, StoreError> {
        let c = &self.conn;
        let holder: Option<String> = c
            .prepare_cached(
                "SELECT event_id FROM bodies
                 WHERE source = ?1 AND event_type = ?2 AND payload_sha256 = ?3 AND expires_at > ?4",
            )
            .and_then(|mut s| {
                s.query_row(
                    params![
                        event.key.source.as_str(),
                        event.event_type.as_deref().unwrap_or(""),
                        event.payload_sha256,
                        now
                    ],
                    |r| r.get(0),
                )
                .optional()
            })
            .map_err(sql)?;
        let Some(holder) = holder.filter(|h| h != event.key.event_id.as_str()) else {
            return Ok(None);
        };
        let id = EventId::parse(&holder).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        Ok(find(c, &EventKey::new(event.key.source.clone(), id))?
            .map(|(_, existing)| existing)
            .filter(|existing| !existing.is_expired(now)))
    }

    /// Remembers the body of a just-created event as held by it, for the source's retention, where no other live
    /// event holds it: a later resend names the first event that carried the body, as on DynamoDB.
    fn remember_body(&self, event: &NewEvent, now: i64) -> Result<(), StoreError> {
        let Some(within) = event.resent_bodies.within() else {
            return Ok(());
        };
        self.conn
            .prepare_cached(
                "INSERT INTO bodies (source, event_type, payload_sha256, event_id, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (source, event_type, payload_sha256) DO UPDATE
                 SET event_id = excluded.event_id, expires_at = excluded.expires_at",
            )
            .and_then(|mut s| {
                s.execute(params![
                    event.key.source.as_str(),
                    event.event_type.as_deref().unwrap_or(""),
                    event.payload_sha256,
                    event.key.event_id.as_str(),
                    now.saturating_add(ms(within))
                ])
            })
            .map_err(sql)?;
        Ok(())
    }

    /// Inserts `e` as RECEIVED unless its key is taken. A failure after the first insert leaves nothing: the batch
    /// (or, once a batch has failed, the job's savepoint) is rolled back.
    fn insert(&self, e: &NewEvent, resent_of: Option<&EventId>, now: i64) -> Result<bool, StoreError> {
        let c = &self.conn;
        let n = c
            .prepare_cached(
                "INSERT INTO events (source, event_id, event_type, status, payload_sha256, received_at, updated_at,
                                     due_at, origin, resent_of)
                 VALUES (?1, ?2, ?3, 'RECEIVED', ?4, ?5, ?5, ?6, ?7, ?8)
                 ON CONFLICT (source, event_id) DO NOTHING",
            )
            .and_then(|mut s| {
                s.execute(params![
                    e.key.source.as_str(),
                    e.key.event_id.as_str(),
                    e.event_type,
                    e.payload_sha256,
                    now,
                    self.due.received(now),
                    e.origin.as_str(),
                    resent_of.map(EventId::as_str),
                ])
            })
            .map_err(sql)?;
        if n == 0 {
            return Ok(false);
        }
        let id = c.last_insert_rowid();
        let headers = serde_json::to_string(&e.headers).map_err(|err| {
            StoreError::Unavailable(format!("cannot encode the headers of {}: {err}", e.key))
        })?;
        c.prepare_cached("INSERT OR REPLACE INTO payloads (event, headers, body) VALUES (?1, ?2, ?3)")
            .and_then(|mut s| s.execute(params![id, headers, e.payload.as_ref()]))
            .map_err(sql)?;
        Ok(true)
    }

    fn claim(&self, key: &EventKey, owner: &str, lease: i64, now: i64) -> Result<Claim, StoreError> {
        let c = &self.conn;
        let until = now.saturating_add(lease);
        let claimed = c
            .prepare_cached(&format!(
                "UPDATE events SET status = 'PROCESSING', lease_owner = ?3, lease_until = ?4, due_at = ?5,
                        attempts = attempts + 1, updated_at = ?6
                 WHERE source = ?1 AND event_id = ?2
                   AND (status = 'RECEIVED'
                        OR (status = 'FAILED' AND next_attempt_at <= ?7)
                        OR (status = 'PROCESSING' AND lease_until <= ?6))
                 RETURNING {COLUMNS}"
            ))
            .and_then(|mut s| {
                s.query_row(
                    params![
                        key.source.as_str(),
                        key.event_id.as_str(),
                        owner,
                        until,
                        self.due.processing(until),
                        now,
                        rules::failed_claimable_by(now)
                    ],
                    event_row,
                )
                .optional()
            })
            .map_err(sql)?;
        match claimed {
            // The claim stands even when the body is gone: the caller holds the lease and settles it DEAD.
            Some((id, event)) => Ok(match with_payload(c, id, event)? {
                Ok(event) => Claim::Claimed(Box::new(event)),
                Err(event) => {
                    let why = rules::missing_body(&event);
                    Claim::Corrupt(Box::new(event), why)
                }
            }),
            None => Ok(rules::refused_claim(find(c, key)?.map(|(_, e)| e).as_ref(), now)),
        }
    }

    fn settle(
        &self,
        key: &EventKey,
        owner: &str,
        settlement: &Settlement,
        now: i64,
    ) -> Result<Settled, StoreError> {
        let c = &self.conn;
        let k = (key.source.as_str(), key.event_id.as_str(), owner);
        let n = match settlement {
            Settlement::Completed { retention } => c
                .prepare_cached(
                    "UPDATE events SET status = 'COMPLETED', completed_at = ?4, expires_at = ?5, updated_at = ?4,
                            lease_owner = NULL, lease_until = NULL, next_attempt_at = NULL, due_at = NULL
                     WHERE source = ?1 AND event_id = ?2 AND status = 'PROCESSING' AND lease_owner = ?3",
                )
                .and_then(|mut s| s.execute(params![k.0, k.1, k.2, now, now.saturating_add(ms(*retention))])),
            Settlement::Failed { error, delay } => {
                let next = now.saturating_add(ms(*delay));
                c.prepare_cached(
                    "UPDATE events SET status = 'FAILED', last_error = ?4, next_attempt_at = ?5, due_at = ?7,
                            updated_at = ?6, lease_owner = NULL, lease_until = NULL
                     WHERE source = ?1 AND event_id = ?2 AND status = 'PROCESSING' AND lease_owner = ?3",
                )
                .and_then(|mut s| {
                    s.execute(params![k.0, k.1, k.2, error, next, now, self.due.failed(next)])
                })
            }
            Settlement::Dead { error } => c
                .prepare_cached(
                    "UPDATE events SET status = 'DEAD', last_error = ?4, updated_at = ?5, due_at = ?6,
                            notified_at = NULL, lease_owner = NULL, lease_until = NULL, next_attempt_at = NULL
                     WHERE source = ?1 AND event_id = ?2 AND status = 'PROCESSING' AND lease_owner = ?3",
                )
                .and_then(|mut s| s.execute(params![k.0, k.1, k.2, error, now, self.due.dead(now)])),
        }
        .map_err(sql)?;
        Ok(if n == 1 { Settled::Done } else { Settled::LeaseLost })
    }

    fn mark_dead(&self, key: &EventKey, reason: &str, now: i64) -> Result<MarkDead, StoreError> {
        let c = &self.conn;
        let dead = c
            .prepare_cached(&format!(
                "UPDATE events SET status = 'DEAD', last_error = ?3, updated_at = ?4, due_at = ?5,
                        notified_at = NULL, lease_owner = NULL, lease_until = NULL, next_attempt_at = NULL
                 WHERE source = ?1 AND event_id = ?2
                   AND (status IN ('RECEIVED', 'FAILED') OR (status = 'PROCESSING' AND lease_until <= ?4))
                 RETURNING {COLUMNS}"
            ))
            .and_then(|mut s| {
                s.query_row(
                    params![
                        key.source.as_str(),
                        key.event_id.as_str(),
                        reason,
                        now,
                        self.due.dead(now)
                    ],
                    event_row,
                )
                .optional()
            })
            .map_err(sql)?;
        Ok(match dead {
            Some((_, event)) => MarkDead::NewlyDead(Box::new(event)),
            None => rules::refused_mark_dead(find(c, key)?.map(|(_, e)| e).as_ref(), now),
        })
    }

    fn replay(&self, key: &EventKey, force: bool, now: i64) -> Result<Replay, StoreError> {
        let c = &self.conn;
        let n = c
            .prepare_cached(
                "UPDATE events SET status = 'RECEIVED', attempts = 0, replays = replays + 1, updated_at = ?3,
                        replayed_at = ?3, due_at = ?5, lease_owner = NULL, lease_until = NULL,
                        next_attempt_at = NULL, completed_at = NULL, expires_at = NULL, notified_at = NULL
                 WHERE source = ?1 AND event_id = ?2
                   AND (status = 'DEAD' OR (?4 AND status = 'COMPLETED' AND expires_at > ?3))",
            )
            .and_then(|mut s| {
                s.execute(params![
                    key.source.as_str(),
                    key.event_id.as_str(),
                    now,
                    force,
                    self.due.replayed(now)
                ])
            })
            .map_err(sql)?;
        if n == 1 {
            return Ok(Replay::Replayed);
        }
        Ok(rules::refused_replay(find(c, key)?.map(|(_, e)| e).as_ref()))
    }
}

/// Copies committed WAL frames into the database file at most every [`CHECKPOINT_EVERY`] while commits come in;
/// ends with the writer. PASSIVE: it never blocks the writer; a WAL wholly copied is written again from its start
/// by the writer's next transaction.
fn checkpointer(conn: Connection, ticks: std::sync::mpsc::Receiver<()>) {
    while ticks.recv().is_ok() {
        std::thread::sleep(CHECKPOINT_EVERY);
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::warn!(error = %e, "checkpoint failed; the next one will try again");
        }
    }
}

/// A statement without parameters or rows, prepared once.
fn run(conn: &Connection, sql: &str) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute([])
}

fn status(r: &Row<'_>, i: usize) -> rusqlite::Result<Status> {
    let text: String = r.get(i)?;
    text.parse().map_err(|_| conversion(i, "bad status"))
}

fn conversion(i: usize, what: &'static str) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, what.into())
}

/// A row of `COLUMNS` (without payload); returns the row id too.
fn event_row(r: &Row<'_>) -> rusqlite::Result<(i64, Event)> {
    let source: String = r.get(1)?;
    let event_id: String = r.get(2)?;
    let origin: String = r.get(18)?;
    Ok((
        r.get(0)?,
        Event {
            source: SourceName::parse(&source).map_err(|_| conversion(1, "bad source"))?,
            event_id: EventId::parse(&event_id).map_err(|_| conversion(2, "bad event id"))?,
            event_type: r.get(3)?,
            status: status(r, 4)?,
            payload: bytes::Bytes::new(),
            payload_sha256: r.get(5)?,
            headers: Vec::new(),
            received_at: r.get(6)?,
            updated_at: r.get(7)?,
            attempts: r.get(8)?,
            replays: r.get(9)?,
            lease_owner: r.get(10)?,
            lease_until: r.get(11)?,
            next_attempt_at: r.get(12)?,
            last_error: r.get(13)?,
            completed_at: r.get(14)?,
            expires_at: r.get(15)?,
            notified_at: r.get(16)?,
            replayed_at: r.get(17)?,
            origin: origin
                .parse::<Origin>()
                .map_err(|_| conversion(18, "bad origin"))?,
            resent_of: r
                .get::<_, Option<String>>(19)?
                .map(|id| EventId::parse(&id).map_err(|_| conversion(19, "bad resent_of")))
                .transpose()?,
            body_object: None,
        },
    ))
}

/// The record of `key` and its row id, without payload.
fn find(c: &Connection, key: &EventKey) -> Result<Option<(i64, Event)>, StoreError> {
    c.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM events WHERE source = ?1 AND event_id = ?2"
    ))
    .and_then(|mut s| {
        s.query_row(params![key.source.as_str(), key.event_id.as_str()], event_row)
            .optional()
    })
    .map_err(sql)
}

/// `event` with its body and headers, or back without them (`Err`) when its payload row is gone.
fn with_payload(c: &Connection, id: i64, mut event: Event) -> Result<Result<Event, Event>, StoreError> {
    let found: Option<(String, Vec<u8>)> = c
        .prepare_cached("SELECT headers, body FROM payloads WHERE event = ?1")
        .and_then(|mut s| s.query_row([id], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(sql)?;
    let Some((headers, body)) = found else {
        return Ok(Err(event));
    };
    event.headers = serde_json::from_str(&headers)
        .map_err(|_| StoreError::Corrupt(format!("the kept headers of {} are not JSON", event.key())))?;
    event.payload = bytes::Bytes::from(body);
    Ok(Ok(event))
}

/// Hours the overview's chart covers.
const TIMELINE_HOURS: i64 = 24;
const HOUR_MS: i64 = 3_600_000;

/// The console's overview counts; see [`Ledger::summary`].
fn summarize(c: &Connection, now: i64) -> rusqlite::Result<Summary> {
    let pairs = |sql: &str, p: &[&dyn rusqlite::ToSql]| -> rusqlite::Result<Vec<(String, i64)>> {
        let mut stmt = c.prepare_cached(sql)?;
        let rows = stmt.query_map(p, |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect()
    };
    let expired = pairs(
        // INDEXED BY: left alone, the planner walks `events_source` for the GROUP BY and reads every row.
        "SELECT source, count(*) FROM events INDEXED BY events_expiry WHERE expires_at <= ?1 GROUP BY source",
        &[&now],
    )?;
    let expired_total: i64 = expired.iter().map(|(_, n)| n).sum();
    // Completed events are most of a store: their count is the whole (a count of pages, not of rows) less the
    // others, which `events_status` counts in ranges of their own.
    let total: i64 = c
        .prepare_cached("SELECT count(*) FROM events")?
        .query_row([], |r| r.get(0))?;
    let mut by_status: Vec<(Status, Option<u64>)> = Status::ALL.iter().map(|st| (*st, Some(0))).collect();
    let mut completed = total - expired_total;
    for (st, n) in pairs(
        "SELECT status, count(*) FROM events
         WHERE status IN ('RECEIVED', 'PROCESSING', 'FAILED', 'DEAD') GROUP BY status",
        &[],
    )? {
        let st: Status = st.parse().map_err(|_| conversion(0, "bad status"))?;
        completed -= n;
        if let Some(slot) = by_status.iter_mut().find(|(s, _)| *s == st) {
            slot.1 = Some(u64::try_from(n).unwrap_or(0));
        }
    }
    if let Some(slot) = by_status.iter_mut().find(|(s, _)| *s == Status::Completed) {
        slot.1 = Some(u64::try_from(completed).unwrap_or(0));
    }
    let totals = pairs("SELECT source, count(*) FROM events GROUP BY source", &[])?;
    let mut stmt = c.prepare_cached(
        "SELECT source, status, count(*) FROM events
         WHERE status IN ('RECEIVED', 'PROCESSING', 'FAILED', 'DEAD') GROUP BY source, status",
    )?;
    let open = stmt
        .query_map([], |r| {
            Ok((r.get::<_, String>(0)?, status(r, 1)?, r.get::<_, i64>(2)?))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut by_source = Vec::new();
    for (source, total) in totals {
        let name = SourceName::parse(&source).map_err(|_| conversion(0, "bad source"))?;
        let mut rest = total;
        for (_, st, n) in open.iter().filter(|(s, _, _)| *s == source) {
            rest -= n;
            by_source.push((name.clone(), *st, u64::try_from(*n).unwrap_or(0)));
        }
        rest -= expired
            .iter()
            .filter(|(s, _)| *s == source)
            .map(|(_, n)| n)
            .sum::<i64>();
        if rest > 0 {
            by_source.push((name, Status::Completed, u64::try_from(rest).unwrap_or(0)));
        }
    }
    let mut oldest_open: Option<i64> = None;
    for st in ["RECEIVED", "PROCESSING", "FAILED"] {
        let t: Option<i64> = c
            .prepare_cached("SELECT min(received_at) FROM events WHERE status = ?1")?
            .query_row([st], |r| r.get(0))?;
        oldest_open = match (oldest_open, t) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    let first = (now / HOUR_MS - (TIMELINE_HOURS - 1)) * HOUR_MS;
    let mut timeline: Vec<Bucket> = (0..TIMELINE_HOURS)
        .map(|h| Bucket {
            start: first + h * HOUR_MS,
            ..Default::default()
        })
        .collect();
    // Per status, so each count walks only the covering index `events_status (status, received_at)`.
    let mut stmt = c.prepare_cached(
        "SELECT (received_at - ?1) / ?2, count(*) FROM events WHERE status = ?3 AND received_at >= ?1 GROUP BY 1",
    )?;
    for st in Status::ALL {
        let rows = stmt.query_map(params![first, HOUR_MS, st.as_str()], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
        })?;
        for row in rows {
            let (hour, n) = row?;
            let Some(bucket) = usize::try_from(hour).ok().and_then(|h| timeline.get_mut(h)) else {
                continue;
            };
            let n = u64::try_from(n).unwrap_or(0);
            bucket.accepted += n;
            match st {
                Status::Completed => bucket.completed += n,
                Status::Dead => bucket.dead += n,
                _ => {}
            }
        }
    }
    Ok(Summary {
        by_status,
        by_source,
        oldest_open,
        timeline,
        timeline_note: "by the hour they arrived",
        queue: None,
    })
}

/// Which [`Answer`] an operation's caller expects.
trait FromAnswer: Sized {
    fn from_answer(answer: Answer) -> Option<Self>;
}

macro_rules! from_answer {
    ($($variant:ident => $t:ty),* $(,)?) => {
        $(impl FromAnswer for $t {
            fn from_answer(answer: Answer) -> Option<Self> {
                match answer {
                    Answer::$variant(v) => Some(v),
                    _ => None,
                }
            }
        })*
    };
}

from_answer!(Created => Created, Claim => Claim, Settled => Settled, MarkDead => MarkDead, Replay => Replay,
    Count => usize, Version => i64);

impl FromAnswer for () {
    fn from_answer(_: Answer) -> Option<Self> {
        Some(())
    }
}

#[async_trait]
impl Ledger for SqliteLedger {
    async fn create(&self, event: NewEvent) -> Result<Created, StoreError> {
        self.ask(Op::Create(event)).await
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
