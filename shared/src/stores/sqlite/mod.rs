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
//! This file holds the [`SqliteLedger`] handle and its [`Options`]; the port impls, which hand each write to the
//! writer and each read to the pool, are in [`ports`]. The writer's operations as data are in [`ops`], its group
//! commit in [`writer`], the SQL of each transition in [`transitions`]; the sync and checkpoint threads, and what a
//! failed sync does, in [`durability`]; the read pool in [`readers`], the schema and its migrations in [`schema`],
//! the mapping of rows to records in [`rows`], the console's overview counts in [`summary`].

mod durability;
mod ops;
mod ports;
mod readers;
mod rows;
mod schema;
mod summary;
mod transitions;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use crate::clock::{Clock, SystemClock};
use crate::failpoint::IoFaults;
use crate::model::{NewEvent, Status};
use crate::ports::StoreError;
use crate::rules::Due;
use durability::{checkpointer, inline_checkpoints, rewrite_log, syncer, Fatal};
use ops::{Answer, ClaimOnCreate, Encoding, FromAnswer, Job, Op, Prepared, StoredBody};
use readers::{Readers, READERS};
use rows::{body_key, status};
use schema::migrate;
use writer::Writer;

/// Committed batches the writer may run ahead of the WAL's sync; past it, it waits for the sync.
const SYNC_AHEAD: usize = 4;

/// Bodies up to this size are stored compressed where that makes them smaller, on the request's own thread (a
/// small body compresses quickly: BENCHMARKS.md); larger ones are stored as received, so that no request holds a
/// runtime thread, or the memory of a compression, for long.
const COMPRESS_UP_TO: usize = 64 * 1024;

/// How the file is opened.
#[derive(Clone)]
pub struct Options {
    /// Operations waiting for the writer at most: past it, [`Ledger::create`] answers [`StoreError::Busy`] at once
    /// (back-pressure) while other operations wait.
    pub max_pending: usize,
    /// How long an event may wait for its queue message before the sweeper re-sends it.
    pub grace: Duration,
    /// How long a statement waits for a lock another process holds before it fails as busy.
    pub busy_timeout: Duration,
    /// Opened for `inbox serve`, the one process that answers senders from this directory: it takes the
    /// directory's lock (so every other owner of a lease is provably gone, [`GoneOwners::AllBut`]), and before
    /// anything else it makes what it sees of the log what the disk holds ([`durability::rewrite_log`]), after a
    /// crash or an earlier process's failed sync. The operator commands open it without.
    ///
    /// [`GoneOwners::AllBut`]: crate::ports::GoneOwners::AllBut
    pub serving: bool,
    /// The store's clock, the one every call runs at (the system's by default): a test or a simulation hands in one
    /// it moves.
    pub clock: Arc<dyn Clock>,
    /// I/O errors injected into the store's own syncs and checkpoints (tests only; see [`IoFaults`]).
    pub faults: IoFaults,
}

impl Options {
    pub fn new(max_pending: usize, grace: Duration) -> Self {
        Self {
            max_pending,
            grace,
            busy_timeout: Duration::from_secs(10),
            serving: false,
            clock: Arc::new(SystemClock),
            faults: IoFaults::from_env(),
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("max_pending", &self.max_pending)
            .field("grace", &self.grace)
            .field("busy_timeout", &self.busy_timeout)
            .field("serving", &self.serving)
            .finish_non_exhaustive()
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
    clock: Arc<dyn Clock>,
    /// The data directory's lock, held while serving ([`Options::serving`]).
    lock: Option<Arc<std::fs::File>>,
}

impl SqliteLedger {
    /// Opens (creating) `data_dir/inbox.db`; see [`Options`].
    pub fn open(data_dir: &Path, max_pending: usize, grace: Duration) -> Result<Self, StoreError> {
        Self::open_with(data_dir, Options::new(max_pending, grace))
    }

    pub fn open_with(data_dir: &Path, options: Options) -> Result<Self, StoreError> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| StoreError::Unavailable(format!("cannot create {}: {e}", data_dir.display())))?;
        let lock = options.serving.then(|| lock(data_dir)).transpose()?;
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
        if options.serving {
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
            clock: options.clock.clone(),
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
            clock: options.clock,
            lock,
        })
    }

    /// The cause, where the disk failed a sync or a checkpoint of this store.
    pub fn failed(&self) -> Option<String> {
        self.fatal.cause()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Hands `op` to the writer, to run at the store's clock as the writer takes it; answers after the commit that
    /// holds it (or its failure). `create` does not wait for room in the writer's queue: a full queue is
    /// back-pressure, answered 503 by the receiver.
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

    /// Runs `f` on a read connection, off the async runtime's threads, at the time the store's clock reads.
    async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, i64) -> Result<T, StoreError> + Send + 'static,
    {
        let readers = self.readers.clone();
        let now = self.clock.now_ms();
        tokio::task::spawn_blocking(move || readers.with(|c| f(c, now)))
            .await
            .map_err(|e| StoreError::Unavailable(format!("a read stopped: {e}")))?
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
    // Only where the create looks for resent bodies or a signed nonce: its key among the remembered ones.
    let guard = event.guard().map(|guard| {
        (
            body_key(event.key.source.as_str(), &guard.kind, &guard.sha256),
            guard,
        )
    });
    Ok(Prepared {
        event,
        headers,
        body,
        guard,
        claim,
    })
}

/// One `inbox serve` per data directory: its lock (`serve.lock`), held for the process's life, proves that no
/// other process holds a lease in this store.
fn lock(data_dir: &Path) -> Result<Arc<std::fs::File>, StoreError> {
    let path = data_dir.join("serve.lock");
    let lock = std::fs::File::create(&path)
        .map_err(|e| StoreError::Unavailable(format!("cannot open {}: {e}", path.display())))?;
    lock.try_lock().map_err(|_| {
        StoreError::Unavailable(format!(
            "another `inbox serve` is using {}; stop it first",
            data_dir.display()
        ))
    })?;
    Ok(Arc::new(lock))
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
