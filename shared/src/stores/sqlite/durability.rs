//! What makes a commit durable, and what happens when the disk fails it (docs/DESIGN.md, "A failed sync is the end
//! of trust"): the sync thread that `fdatasync`s the WAL before any answer leaves, the checkpoints (the thread
//! beside the writer, and the writer's own past [`INLINE_CHECKPOINT_PAGES`]), the start-up rewrite of the log,
//! and the [`Fatal`] state that one failed sync or checkpoint puts the store in for the rest of the process.
//!
//! Why a failure is fatal: Linux reports a failed writeback once, to the descriptors open when it happened, and
//! marks the pages clean. The page cache then goes on showing frames the disk never kept, and a later sync of the
//! same file succeeds without writing them. Commits made after such a gap are lost with it on recovery, and a
//! checkpoint that copies them into the database file mixes page versions the disk never held together (a
//! malformed database). So after the first failure nothing is answered as durable, nothing is checkpointed, and
//! the process stops so that a restart reads what the disk really holds (PostgreSQL's answer to "fsyncgate").

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::hooks::Wal;
use rusqlite::wal::CheckpointMode;
use rusqlite::Connection;
use tokio::sync::watch;

use super::ops::Answers;
use crate::failpoint::IoFaults;
use crate::ports::StoreError;

/// WAL pages past which the writer checkpoints inline, in the same commit. The checkpointer thread copies most
/// frames, but under steady load the writer commits again before any of its checkpoints has caught up, so the WAL
/// is never started over from its beginning until the writer itself checkpoints: past this many pages, after a
/// commit, it copies what the thread has not and syncs the WAL and the database file while every write waits.
/// Fewer pages make the writer stop for a sync more often; more make a longer WAL to copy at once and a longer
/// pause. 4,096 (a WAL of about 16 MiB) took most of the gain of larger ones with a p99 within the goal: the runs
/// are in docs/bench-log/ (2026-12-04 and 2026-12-05).
pub(super) const INLINE_CHECKPOINT_PAGES: i32 = 4096;

/// How often, at most, the checkpointer thread copies committed WAL frames into the database file.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(5);

/// Which disk call met the failure, as the error log names it.
#[derive(Clone, Copy, Debug)]
pub(super) enum Path {
    SyncThread,
    Checkpointer,
    InlineCheckpoint,
    Commit,
}

impl Path {
    fn as_str(self) -> &'static str {
        match self {
            Path::SyncThread => "the sync thread's fdatasync of the WAL",
            Path::Checkpointer => "the checkpointer thread's checkpoint",
            Path::InlineCheckpoint => "the writer's inline checkpoint",
            Path::Commit => "the writer's commit",
        }
    }
}

/// The end of trust: set once, by the first failed sync or checkpoint, and never cleared. From then on no write
/// of this process is answered as durable, and `inbox serve` stops itself ([`SqliteLedger::failure`]).
///
/// [`SqliteLedger::failure`]: super::SqliteLedger::failure
#[derive(Clone)]
pub(super) struct Fatal {
    cause: Arc<watch::Sender<Option<String>>>,
    /// Batches committed and not yet answered: those a failure leaves without their 200.
    pub(super) waiting: Arc<AtomicUsize>,
}

impl Fatal {
    pub(super) fn new() -> Self {
        Self {
            cause: Arc::new(watch::channel(None).0),
            waiting: Arc::default(),
        }
    }

    pub(super) fn is_set(&self) -> bool {
        self.cause.borrow().is_some()
    }

    pub(super) fn cause(&self) -> Option<String> {
        self.cause.borrow().clone()
    }

    /// Records the first failure, logged at error with its cause; a later one changes nothing.
    pub(super) fn set(&self, path: Path, error: &dyn std::fmt::Display) {
        let waiting = self.waiting.load(Ordering::Acquire);
        let cause = format!("{} failed: {error}", path.as_str());
        let first = self.cause.send_if_modified(|now| {
            if now.is_some() {
                return false;
            }
            *now = Some(cause.clone());
            true
        });
        if first {
            tracing::error!(path = path.as_str(), error = %error, committed_batches_waiting = waiting,
                "the disk failed a sync: no write of this process is answered as durable again, and it stops so \
                 that a restart recovers from what the disk holds");
        }
    }

    /// Resolves with the cause once a failure is recorded.
    pub(super) async fn wait(&self) -> String {
        let mut rx = self.cause.subscribe();
        loop {
            if let Some(cause) = rx.borrow_and_update().clone() {
                return cause;
            }
            if rx.changed().await.is_err() {
                // The sender lives as long as the store: unreachable while `self` holds it.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// What every write meets once the store has stopped trusting its disk (a 503 at the receiver).
pub(super) fn sync_failed() -> StoreError {
    StoreError::Unavailable("the store's log could not be synced to disk".into())
}

/// Whether `e` is an I/O error: of a checkpoint, always fatal.
fn io_error(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(rusqlite::ErrorCode::SystemIoFailure)
}

/// Whether `e` is a failed sync inside SQLite (of the WAL or the database file): fatal wherever it is met.
pub(super) fn failed_sync(e: &rusqlite::Error) -> bool {
    e.sqlite_error().is_some_and(|e| {
        e.extended_code == rusqlite::ffi::SQLITE_IOERR_FSYNC
            || e.extended_code == rusqlite::ffi::SQLITE_IOERR_DIR_FSYNC
    })
}

/// An injected fault as SQLite would report a failed sync.
fn injected(e: std::io::Error) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_IOERR_FSYNC),
        Some(e.to_string()),
    )
}

/// The sync thread: takes every batch the writer has committed since its last sync, `fdatasync`s the WAL once and
/// only then sends their answers, so no answer (a create's 200 among them) leaves before its commit is on disk,
/// while the writer already runs the next batch. The writer's connection commits without a sync of its own
/// (`synchronous=NORMAL`). The WAL is synced through one descriptor opened at start-up, so that a writeback error
/// of any moment since is reported to it. A failed sync, or a failure met elsewhere before this sync returned,
/// answers the round and every later one with an error ([`Fatal`]).
pub(super) fn syncer(wal: File, batches: std::sync::mpsc::Receiver<Answers>, fatal: Fatal, faults: IoFaults) {
    while let Ok(first) = batches.recv() {
        let mut waiting = vec![first];
        while let Ok(more) = batches.try_recv() {
            waiting.push(more);
        }
        if !fatal.is_set() {
            crate::failpoint!("sqlite_before_wal_sync");
            let synced = match faults.io("sqlite_wal_sync") {
                Some(e) => Err(e),
                None => wal.sync_data(),
            };
            if let Err(e) = synced {
                fatal.set(Path::SyncThread, &e);
            }
        }
        // Checked after the sync: a failure met by a checkpoint meanwhile may have dropped frames this sync
        // reported as written.
        let durable = !fatal.is_set();
        let rounds = waiting.len();
        for (reply, result) in waiting.into_iter().flatten() {
            let _ = reply.send(if durable { result } else { Err(sync_failed()) });
        }
        fatal.waiting.fetch_sub(rounds, Ordering::AcqRel);
    }
}

/// Copies committed WAL frames into the database file at most every [`CHECKPOINT_EVERY`] while commits come in;
/// ends with the writer, or at the first failure. PASSIVE: it never blocks the writer; a WAL wholly copied is
/// written again from its start by the writer's next transaction. Its connection is `synchronous=FULL`: the WAL is
/// synced before it is copied and the database file after, and an I/O error of either is fatal.
pub(super) fn checkpointer(
    conn: Connection,
    ticks: std::sync::mpsc::Receiver<()>,
    fatal: Fatal,
    faults: IoFaults,
) {
    while ticks.recv().is_ok() {
        std::thread::sleep(CHECKPOINT_EVERY);
        if fatal.is_set() {
            return;
        }
        let done = match faults.io("sqlite_checkpoint") {
            Some(e) => Err(injected(e)),
            None => conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())),
        };
        match done {
            Err(e) if io_error(&e) => {
                fatal.set(Path::Checkpointer, &e);
                return;
            }
            Err(e) => tracing::warn!(error = %e, "checkpoint failed; the next one will try again"),
            Ok(()) => {}
        }
    }
}

/// Installs the writer's inline checkpoint (in place of SQLite's autocheckpoint, whose errors SQLite drops): past
/// [`INLINE_CHECKPOINT_PAGES`], after a commit, a PASSIVE checkpoint on the writer's connection. An I/O error is
/// fatal, and fails the commit that ran it. None runs once the store has stopped trusting its disk.
pub(super) fn inline_checkpoints(
    conn: &mut Connection,
    fatal: Fatal,
    faults: IoFaults,
) -> rusqlite::Result<()> {
    conn.wal_hook(Some(move |wal: &mut Wal, pages: i32| {
        if pages < INLINE_CHECKPOINT_PAGES || fatal.is_set() {
            return Ok(());
        }
        let done = match faults.io("sqlite_inline_checkpoint") {
            Some(e) => Err(injected(e)),
            None => wal.checkpoint_v2(CheckpointMode::PASSIVE).map(drop),
        };
        match done {
            Err(e) if io_error(&e) => {
                fatal.set(Path::InlineCheckpoint, &e);
                Err(e)
            }
            // Busy: the checkpointer thread holds the checkpoint; it copies these frames.
            _ => Ok(()),
        }
    }))
}

/// Makes what this process sees of the log what the disk holds, before its first answer: every byte of the WAL is
/// read (through the page cache) and written back in place, then synced. After an earlier process's failed sync
/// the page cache may still show frames the disk never kept; written again, they are dirty once more and this
/// sync stores them, so an event this process later answers "duplicate" is one the disk holds. A checkpoint alone
/// would not do: it copies those frames into the database file and syncs that, but the WAL on disk still holds a
/// gap, and a power loss before the log starts over would replay the frames before the gap over newer pages.
///
/// Runs under the write lock (`BEGIN IMMEDIATE`), so no other process appends to the log or starts it over
/// meanwhile; the rewritten bytes are the ones already there, so readers see no change.
pub(super) fn rewrite_log(conn: &Connection, wal: &File) -> Result<(), String> {
    conn.execute_batch("BEGIN IMMEDIATE")
        .map_err(|e| format!("cannot take the write lock: {e}"))?;
    let rewritten = (|| {
        let len = wal.metadata()?.len();
        let mut buf = vec![0u8; 1 << 20];
        let mut at = 0u64;
        while at < len {
            let n = usize::try_from((len - at).min(buf.len() as u64)).unwrap_or(buf.len());
            wal.read_exact_at(&mut buf[..n], at)?;
            wal.write_all_at(&buf[..n], at)?;
            at += n as u64;
        }
        wal.sync_data()
    })();
    let _ = conn.execute_batch("ROLLBACK");
    rewritten.map_err(|e| format!("cannot rewrite and sync the WAL: {e}"))
}
