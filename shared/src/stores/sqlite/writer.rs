//! The writer thread: group commit (many operations a transaction, each answered after its commit, through the
//! sync thread). The operations are data ([`ops`](super::ops)); the SQL each runs is in
//! [`transitions`](super::transitions); what makes a commit durable, and what a failed sync does, is in
//! [`durability`](super::durability).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use rusqlite::Connection;
use tokio::sync::mpsc;

use super::durability::{failed_sync, sync_failed, Fatal, Path};
use super::ops::{Answer, Answers, Job, Op};
use super::sql;
use crate::clock::Clock;
use crate::ports::StoreError;
use crate::rules::Due;

/// Operations committed together at most.
const MAX_BATCH: usize = 512;

/// The writer thread's state: the write connection, the due-time rules, and the clock every job is stamped by (the
/// store's).
pub(super) struct Writer {
    pub(super) conn: Connection,
    pub(super) due: Due,
    pub(super) clock: Arc<dyn Clock>,
}

impl Writer {
    /// Takes what is waiting (up to a batch), runs it in one transaction and commits it; the batch's answers go to
    /// the sync thread ([`syncer`](super::durability::syncer)), which sends them once the WAL holding the commit is
    /// on disk. The writer does not wait for that sync: it runs the next batch meanwhile.
    pub(super) fn run(
        self,
        mut rx: mpsc::Receiver<Job>,
        checkpoints: std::sync::mpsc::SyncSender<()>,
        durable: std::sync::mpsc::SyncSender<Answers>,
        fatal: Fatal,
    ) {
        let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH);
        while let Some(first) = rx.blocking_recv() {
            batch.push(first);
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            // A sync failed: what the page cache held may never reach the disk, so nothing more is written.
            if fatal.is_set() {
                for job in batch.drain(..) {
                    let _ = job.reply.send(Err(sync_failed()));
                }
                continue;
            }
            // The one read served here, between transactions.
            let (reads, writes): (Vec<Job>, Vec<Job>) =
                batch.drain(..).partition(|job| matches!(job.op, Op::DataVersion));
            for job in reads {
                let _ = job.reply.send(self.data_version());
            }
            if !writes.is_empty() {
                let answers = self.commit_batch(writes, &fatal);
                // Full means a tick is already waiting: the checkpointer will see this commit too.
                let _ = checkpoints.try_send(());
                fatal.waiting.fetch_add(1, Ordering::AcqRel);
                // The sync thread has stopped: nothing of this batch is known to be durable.
                if let Err(std::sync::mpsc::SendError(answers)) = durable.send(answers) {
                    fatal.waiting.fetch_sub(1, Ordering::AcqRel);
                    for (reply, _) in answers {
                        let _ = reply.send(Err(sync_failed()));
                    }
                }
            }
        }
    }

    /// Runs `batch` in one transaction and gives back each job's answer as the commit decided it (every answer
    /// waits for the WAL's sync before it is sent).
    ///
    /// Jobs run side by side without a savepoint each: a savepoint makes SQLite copy every page a job touches that
    /// an earlier job of the batch already changed (the hot tails of the table and its indexes), which was a tenth
    /// of the writer's time. Jobs rarely fail; when one does, the transaction is rolled back whole, the failing job
    /// alone is answered with its error, and the rest run again from the start, each in a savepoint of its own
    /// this time, so a second failure costs no third pass.
    fn commit_batch(&self, batch: Vec<Job>, fatal: &Fatal) -> Answers {
        crate::failpoint!("sqlite_writer_batch");
        let mut jobs = batch;
        let mut careful = false;
        let mut done: Answers = Vec::with_capacity(jobs.len());
        loop {
            if let Err(e) = self.conn.execute_batch("BEGIN IMMEDIATE").map_err(sql) {
                // Nothing of the batch runs outside a transaction: every job is answered with the failure.
                done.extend(jobs.into_iter().map(|job| (job.reply, Err(e.clone()))));
                return done;
            }
            let mut answers: Vec<Result<Answer, StoreError>> = Vec::with_capacity(jobs.len());
            let mut failed = None;
            for (i, job) in jobs.iter().enumerate() {
                let now = self.clock.now_ms();
                let result = if careful {
                    self.step(&job.op, now)
                } else {
                    self.apply(&job.op, now)
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
                done.push((jobs.remove(i).reply, Err(e)));
                if jobs.is_empty() {
                    return done;
                }
                careful = true;
                continue;
            }
            let committed = self.conn.execute_batch("COMMIT").map_err(|e| {
                // A sync inside SQLite failed (its inline checkpoint's, or the log's header): the end of trust.
                if failed_sync(&e) {
                    fatal.set(Path::Commit, &e);
                }
                sql(e)
            });
            if committed.is_err() && !self.conn.is_autocommit() {
                let _ = self.conn.execute_batch("ROLLBACK");
            }
            for (job, result) in jobs.into_iter().zip(answers) {
                done.push((
                    job.reply,
                    match &committed {
                        Ok(()) => result,
                        Err(e) => Err(e.clone()),
                    },
                ));
            }
            return done;
        }
    }

    /// One job inside the open transaction, in a savepoint of its own: a failing job leaves the others intact.
    fn step(&self, op: &Op, now: i64) -> Result<Answer, StoreError> {
        run(&self.conn, "SAVEPOINT op").map_err(sql)?;
        let result = self.apply(op, now);
        if result.is_err() && !self.conn.is_autocommit() {
            let _ = run(&self.conn, "ROLLBACK TO op");
        }
        if !self.conn.is_autocommit() {
            let _ = run(&self.conn, "RELEASE op");
        }
        result
    }

    pub(super) fn data_version(&self) -> Result<Answer, StoreError> {
        self.conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .map(Answer::Version)
            .map_err(sql)
    }
}

/// A statement without parameters or rows, prepared once.
pub(super) fn run(conn: &Connection, sql: &str) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute([])
}
