//! The writer thread: operations as data ([`Op`], [`Answer`]), group commit (many operations a transaction, each
//! answered after its commit), the write operations it runs (create, claim, settle, release, dead-letter, replay,
//! purge, …). What makes a commit durable, and what a failed sync does, is in [`durability`](super::durability).

use std::sync::atomic::Ordering;

use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::{mpsc, oneshot};

use super::durability::{failed_sync, sync_failed, Fatal, Path};
use super::rows::{event_row, find, with_payload, COLUMNS};
use super::sql;
use crate::model::{Event, EventId, EventKey, NewEvent, Origin, ResentBodies, SourceName, Status};
use crate::ports::{Claim, Created, MarkDead, Replay, Settled, Settlement, StoreError};
use crate::rules::{self, Due};
use crate::time::{ms, now_ms};

/// Operations committed together at most.
const MAX_BATCH: usize = 512;

/// One write, as data: what the writer runs inside a transaction.
pub(super) enum Op {
    Create(Prepared),
    /// The events of one batched delivery: created together or not at all (one savepoint).
    CreateBatch(Vec<Prepared>),
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

/// A new event as the writer stores it, prepared on the caller's thread so that the one writer thread does neither
/// the encoding nor the compression: its kept headers as JSON, and its body as stored.
pub(super) struct Prepared {
    pub(super) event: NewEvent,
    pub(super) headers: String,
    pub(super) body: StoredBody,
    /// The body's key among the remembered bodies ([`body_key`](super::rows::body_key)), where its source looks
    /// for resent bodies.
    pub(super) body_key: Option<i64>,
    /// The worker that claims the event in its create, where it is created ([`Ledger::create_claimed`]).
    ///
    /// [`Ledger::create_claimed`]: crate::ports::Ledger::create_claimed
    pub(super) claim: Option<ClaimOnCreate>,
}

/// A claim taken in a create's own write: the lease's owner and length (ms).
pub(super) struct ClaimOnCreate {
    pub(super) owner: String,
    pub(super) lease: i64,
}

/// A body as the `payloads` table keeps it: the bytes and how they are encoded (`payloads.encoding`).
pub(super) struct StoredBody {
    pub(super) bytes: bytes::Bytes,
    pub(super) encoding: Encoding,
}

/// How a stored body is encoded (`payloads.encoding`, schema version 7; older rows are all `Raw`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Encoding {
    Raw = 0,
    Zstd = 1,
}

impl Encoding {
    pub(super) fn from_column(value: i64) -> Option<Self> {
        match value {
            0 => Some(Self::Raw),
            1 => Some(Self::Zstd),
            _ => None,
        }
    }
}

/// What an operation answers.
pub(super) enum Answer {
    /// A create's outcome, and the record it claimed (with its body) where it was asked to and created it.
    Created(Created, Option<Box<Event>>),
    CreatedBatch(Vec<Created>),
    Claim(Claim),
    Settled(Settled),
    MarkDead(MarkDead),
    Replay(Replay),
    Count(usize),
    Purged(Purged),
    Version(i64),
    Done,
}

/// What one purge deleted: completed events past retention (with their payloads), and remembered bodies past
/// their window; each at most the purge's limit.
#[derive(Clone, Copy, Debug)]
pub struct Purged {
    pub events: usize,
    pub bodies: usize,
}

impl Purged {
    /// Whether either kind filled the `limit`: more of it may be left.
    pub fn full(&self, limit: usize) -> bool {
        self.events >= limit || self.bodies >= limit
    }
}

/// Where an operation's answer goes.
type Reply = oneshot::Sender<Result<Answer, StoreError>>;

/// An operation and where its answer goes.
pub(super) struct Job {
    pub(super) op: Op,
    pub(super) reply: Reply,
}

/// Which [`Answer`] an operation's caller expects.
pub(super) trait FromAnswer: Sized {
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

impl FromAnswer for Created {
    fn from_answer(answer: Answer) -> Option<Self> {
        match answer {
            Answer::Created(created, _) => Some(created),
            _ => None,
        }
    }
}

impl FromAnswer for (Created, Option<Event>) {
    fn from_answer(answer: Answer) -> Option<Self> {
        match answer {
            Answer::Created(created, claimed) => Some((created, claimed.map(|e| *e))),
            _ => None,
        }
    }
}

from_answer!(CreatedBatch => Vec<Created>, Claim => Claim, Settled => Settled, MarkDead => MarkDead, Replay => Replay,
    Count => usize, Purged => Purged, Version => i64);

impl FromAnswer for () {
    fn from_answer(_: Answer) -> Option<Self> {
        Some(())
    }
}

/// The writer thread's state: the write connection and the due-time rules.
pub(super) struct Writer {
    pub(super) conn: Connection,
    pub(super) due: Due,
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
            Op::Create(prepared) => {
                let (created, claimed) = self.create(prepared, now)?;
                Answer::Created(created, claimed.map(Box::new))
            }
            // Inside this job's savepoint: one failing create rolls every item back, and the transaction's one
            // commit makes them all durable at once.
            Op::CreateBatch(events) => Answer::CreatedBatch(
                events
                    .iter()
                    .map(|prepared| {
                        let created = self.create(prepared, now).map(|(created, _)| created);
                        crate::failpoint!("batch_item_written");
                        created
                    })
                    .collect::<Result<_, _>>()?,
            ),
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
                // Through `bodies_expiry`, a batch at most: the writer never holds the others up for long.
                let bodies = c
                    .prepare_cached(
                        "DELETE FROM bodies WHERE rowid IN
                            (SELECT rowid FROM bodies WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2)",
                    )
                    .and_then(|mut s| s.execute(params![now, limit]))
                    .map_err(sql)?;
                Answer::Purged(Purged {
                    events: ids.len(),
                    bodies,
                })
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

    fn create(&self, prepared: &Prepared, now: i64) -> Result<(Created, Option<Event>), StoreError> {
        let (c, event) = (&self.conn, &prepared.event);
        // A body already stored under another id of this source and type: a resend under a fresh id, or a
        // distinct event with the same bytes. Looked for in the same transaction as the insert.
        let resent_of = match prepared.body_key {
            None => None,
            Some(body_key) => self.body_holder(event, body_key, now)?,
        };
        if let (Some(holder), ResentBodies::Refused { .. }) = (&resent_of, event.resent_bodies) {
            // A retry of this very event stays its own duplicate, whoever holds the body now.
            return Ok((
                match find(c, &event.key)? {
                    Some((_, own)) if !own.is_expired(now) => rules::duplicate_of(&own),
                    _ => rules::duplicate_of(holder),
                },
                None,
            ));
        }
        let resent_of = resent_of.map(|holder| holder.event_id);
        if self.insert(prepared, resent_of.as_ref(), now)? {
            if resent_of.is_none() {
                self.remember_body(prepared, now)?;
            }
            return Ok(self.created(prepared, resent_of, now));
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
            self.insert(prepared, resent_of.as_ref(), now)?;
            if resent_of.is_none() {
                self.remember_body(prepared, now)?;
            }
            return Ok(self.created(prepared, resent_of, now));
        }
        Ok((rules::duplicate_of(&existing), None))
    }

    /// What a create that inserted `prepared` answers: the outcome, and where it was claimed in the write, the
    /// record as the insert left it (every column known here, so nothing is read back).
    fn created(&self, prepared: &Prepared, resent_of: Option<EventId>, now: i64) -> (Created, Option<Event>) {
        let claimed = prepared.claim.as_ref().map(|claim| {
            let e = &prepared.event;
            Event {
                source: e.key.source.clone(),
                event_id: e.key.event_id.clone(),
                event_type: e.event_type.clone(),
                status: Status::Processing,
                payload: e.payload.clone(),
                payload_sha256: e.payload_sha256.clone(),
                headers: e.headers.clone(),
                received_at: now,
                updated_at: now,
                attempts: 1,
                replays: 0,
                lease_owner: Some(claim.owner.clone()),
                lease_until: Some(now.saturating_add(claim.lease)),
                next_attempt_at: None,
                last_error: None,
                completed_at: None,
                expires_at: None,
                notified_at: None,
                replayed_at: None,
                origin: e.origin,
                resent_of: resent_of.clone(),
                body_object: None,
            }
        });
        (rules::created(resent_of), claimed)
    }

    /// The live event that holds `event`'s body under another id of its source and type, if any.
    fn body_holder(&self, event: &NewEvent, body_key: i64, now: i64) -> Result<Option<Event>, StoreError> {
        let c = &self.conn;
        let event_type = event.event_type.as_deref().unwrap_or("");
        let holder: Option<String> = c
            .prepare_cached("SELECT event_id FROM bodies WHERE body_key = ?1 AND expires_at > ?2")
            .and_then(|mut s| s.query_row(params![body_key, now], |r| r.get(0)).optional())
            .map_err(sql)?;
        let Some(holder) = holder.filter(|h| h != event.key.event_id.as_str()) else {
            return Ok(None);
        };
        let id = EventId::parse(&holder).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        // The key is a hash: the holder's record says whether it holds this very body (same type, same SHA-256).
        Ok(find(c, &EventKey::new(event.key.source.clone(), id))?
            .map(|(_, existing)| existing)
            .filter(|existing| {
                !existing.is_expired(now)
                    && existing.event_type.as_deref().unwrap_or("") == event_type
                    && existing.payload_sha256 == event.payload_sha256
            }))
    }

    /// Remembers the body of a just-created event as held by it, for the source's retention, where no other live
    /// event holds it: a later resend names the first event that carried the body, as on DynamoDB.
    fn remember_body(&self, prepared: &Prepared, now: i64) -> Result<(), StoreError> {
        let event = &prepared.event;
        let (Some(body_key), Some(within)) = (prepared.body_key, event.resent_bodies.within()) else {
            return Ok(());
        };
        self.conn
            .prepare_cached(
                "INSERT INTO bodies (body_key, event_id, expires_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (body_key) DO UPDATE SET event_id = excluded.event_id, expires_at = excluded.expires_at",
            )
            .and_then(|mut s| {
                s.execute(params![
                    body_key,
                    event.key.event_id.as_str(),
                    now.saturating_add(ms(within))
                ])
            })
            .map_err(sql)?;
        Ok(())
    }

    /// Inserts `e` as RECEIVED unless its key is taken. A failure after the first insert leaves nothing: the batch
    /// (or, once a batch has failed, the job's savepoint) is rolled back.
    fn insert(&self, prepared: &Prepared, resent_of: Option<&EventId>, now: i64) -> Result<bool, StoreError> {
        let (c, e) = (&self.conn, &prepared.event);
        // RECEIVED, or PROCESSING under the lease of the worker that claims it in this write.
        let (status, attempts, owner, until, due) = match &prepared.claim {
            None => (Status::Received, 0, None, None, self.due.received(now)),
            Some(claim) => {
                let until = now.saturating_add(claim.lease);
                let owner = Some(claim.owner.as_str());
                (
                    Status::Processing,
                    1,
                    owner,
                    Some(until),
                    self.due.processing(until),
                )
            }
        };
        let n = c
            .prepare_cached(
                "INSERT INTO events (source, event_id, event_type, status, payload_sha256, received_at, updated_at,
                                     due_at, origin, resent_of, attempts, lease_owner, lease_until)
                 VALUES (?1, ?2, ?3, ?9, ?4, ?5, ?5, ?6, ?7, ?8, ?10, ?11, ?12)
                 ON CONFLICT (source, event_id) DO NOTHING",
            )
            .and_then(|mut s| {
                s.execute(params![
                    e.key.source.as_str(),
                    e.key.event_id.as_str(),
                    e.event_type,
                    e.payload_sha256,
                    now,
                    due,
                    e.origin.as_str(),
                    resent_of.map(EventId::as_str),
                    status.as_str(),
                    attempts,
                    owner,
                    until,
                ])
            })
            .map_err(sql)?;
        if n == 0 {
            return Ok(false);
        }
        let id = c.last_insert_rowid();
        let body = &prepared.body;
        c.prepare_cached(
            "INSERT OR REPLACE INTO payloads (event, headers, body, encoding) VALUES (?1, ?2, ?3, ?4)",
        )
        .and_then(|mut s| {
            s.execute(params![
                id,
                prepared.headers,
                body.bytes.as_ref(),
                body.encoding as i64
            ])
        })
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

/// One batch's answers, as its commit decided them, waiting for the sync that makes that commit durable.
pub(super) type Answers = Vec<(Reply, Result<Answer, StoreError>)>;

/// A statement without parameters or rows, prepared once.
fn run(conn: &Connection, sql: &str) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute([])
}
