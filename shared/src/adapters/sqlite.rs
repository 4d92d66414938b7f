//! The embedded store: one SQLite file (WAL, `synchronous=FULL`) that is the ledger, the work queue's memory (due
//! times and leases) and the dead-letter store at once. One writer thread owns the connection and commits many
//! operations per transaction (group commit): every caller is answered only after the commit that holds its write
//! is on disk, so no 200 leaves before its record is durable.

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, Row};
use tokio::sync::{mpsc, oneshot};

use crate::model::{Event, EventKey, NewEvent, SourceName, Status};
use crate::ports::{Claim, Created, Ledger, ListFilter, MarkDead, Replay, Settled, Settlement, StoreError};
use crate::time::{ms, now_ms};

/// Operations committed together at most.
const MAX_BATCH: usize = 512;
/// How often, at most, the checkpointer thread copies committed WAL frames into the database file.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(5);
/// WAL pages past which the writer checkpoints inline (SQLite's autocheckpoint), should the checkpointer thread
/// fall behind; below it the writer never does.
const INLINE_CHECKPOINT_PAGES: u32 = 8192;
/// A FAILED event may be claimed this much before its `next_attempt_at` (clock slop between writers).
const DUE_SLACK_MS: i64 = 250;

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

const COLUMNS: &str =
    "id, source, event_id, event_type, status, payload_sha256, received_at, updated_at, attempts, \
    replays, lease_owner, lease_until, next_attempt_at, last_error, completed_at, expires_at, notified_at";

type Reply = Box<dyn FnOnce(Result<(), StoreError>) + Send>;
type Job = Box<dyn FnOnce(&Connection, i64) -> (bool, Reply) + Send>;

/// The SQLite ledger. Cheap to clone; the writer thread ends when the last clone is dropped.
#[derive(Clone)]
pub struct SqliteLedger {
    jobs: mpsc::Sender<Job>,
    path: PathBuf,
    /// How long past its natural time an event waits for its queue message before the sweeper takes it.
    grace: i64,
    data_version: std::sync::Arc<std::sync::atomic::AtomicI64>,
}

impl SqliteLedger {
    /// Opens (creating) `data_dir/inbox.db`. `max_pending` bounds the operations waiting for the writer: past it,
    /// [`Ledger::create`] answers [`StoreError::Busy`] at once (back-pressure) while other operations wait.
    /// `grace` is how long an event may wait for its queue message before the sweeper re-sends it.
    pub fn open(data_dir: &Path, max_pending: usize, grace: Duration) -> Result<Self, StoreError> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| StoreError::Unavailable(format!("cannot create {}: {e}", data_dir.display())))?;
        let path = data_dir.join("inbox.db");
        let conn = Connection::open(&path).map_err(sql)?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(sql)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(sql)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Unavailable(format!(
                "journal_mode is {mode}, not wal"
            )));
        }
        conn.execute_batch("PRAGMA synchronous=FULL;").map_err(sql)?;
        conn.execute_batch(SCHEMA).map_err(sql)?;
        conn.pragma_update(None, "wal_autocheckpoint", INLINE_CHECKPOINT_PAGES)
            .map_err(sql)?;
        // Checkpoints (copying the WAL into the database file, and its fsync) run on a thread and connection of
        // their own, so commits, and the answers waiting on them, do not stall behind them.
        let checkpoints = Connection::open(&path).map_err(sql)?;
        checkpoints.busy_timeout(Duration::from_secs(10)).map_err(sql)?;
        // FULL: the database file is fsynced before the WAL frames it took are counted as copied (and reused).
        checkpoints
            .execute_batch("PRAGMA synchronous=FULL;")
            .map_err(sql)?;
        let (committed, ticks) = std::sync::mpsc::sync_channel::<()>(1);
        std::thread::Builder::new()
            .name("inbox-sqlite-checkpoint".into())
            .spawn(move || checkpointer(checkpoints, ticks))
            .map_err(|e| StoreError::Unavailable(format!("cannot start the checkpoint thread: {e}")))?;
        let (jobs, rx) = mpsc::channel(max_pending.max(1));
        std::thread::Builder::new()
            .name("inbox-sqlite-writer".into())
            .spawn(move || writer(conn, rx, committed))
            .map_err(|e| StoreError::Unavailable(format!("cannot start the writer thread: {e}")))?;
        Ok(Self {
            jobs,
            path,
            grace: ms(grace),
            data_version: Default::default(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` inside the writer's next transaction; answers after it committed. `now` is the writer's clock.
    async fn call<T, F>(&self, wait: bool, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, i64) -> rusqlite::Result<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<Result<T, StoreError>>();
        let job: Job = Box::new(move |conn, now| {
            let result = f(conn, now).map_err(sql);
            let ok = result.is_ok();
            let reply: Reply = Box::new(move |committed| {
                let _ = tx.send(committed.and(result));
            });
            (ok, reply)
        });
        if wait {
            self.jobs
                .send(job)
                .await
                .map_err(|_| StoreError::Unavailable("the writer thread stopped".into()))?;
        } else {
            self.jobs.try_send(job).map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => StoreError::Busy,
                mpsc::error::TrySendError::Closed(_) => {
                    StoreError::Unavailable("the writer thread stopped".into())
                }
            })?;
        }
        rx.await
            .map_err(|_| StoreError::Unavailable("the writer thread stopped".into()))?
    }

    /// Ends leases now, so their events can be claimed again at once: those *not* held by `owner_prefix` at
    /// start-up (the serve lock proves their process dead), or those held by it at shutdown (`mine`).
    pub async fn expire_leases(&self, owner_prefix: &str, mine: bool) -> Result<usize, StoreError> {
        let prefix = owner_prefix.to_owned();
        self.call(true, move |c, now| {
            c.execute(
                "UPDATE events SET lease_until = ?1, due_at = ?1, updated_at = ?1
                 WHERE status = 'PROCESSING' AND lease_until > ?1
                   AND (coalesce(substr(lease_owner, 1, length(?2)) = ?2, 0) = ?3)",
                params![now, prefix, mine],
            )
        })
        .await
    }

    /// Whether another process (an `inbox replay`) committed since the last call: SQLite's `data_version`.
    pub async fn changed_elsewhere(&self) -> Result<bool, StoreError> {
        let seen = self.data_version.clone();
        self.call(true, move |c, _| {
            let v: i64 = c.query_row("PRAGMA data_version", [], |r| r.get(0))?;
            Ok(seen.swap(v, std::sync::atomic::Ordering::Relaxed) != v)
        })
        .await
    }

    /// Deletes completed events past retention, at most `limit` a call; returns how many went.
    pub async fn purge_expired(&self, limit: usize) -> Result<usize, StoreError> {
        self.call(true, move |c, now| {
            c.execute(
                "DELETE FROM payloads WHERE event IN
                   (SELECT id FROM events WHERE expires_at <= ?1 AND status = 'COMPLETED' LIMIT ?2)",
                params![now, limit as i64],
            )?;
            c.execute(
                "DELETE FROM events WHERE id IN
                   (SELECT id FROM events WHERE expires_at <= ?1 AND status = 'COMPLETED' LIMIT ?2)",
                params![now, limit as i64],
            )
        })
        .await
    }

    /// Counts of events by status (expired completed ones left out).
    pub async fn counts(&self) -> Result<Vec<(Status, u64)>, StoreError> {
        self.call(true, |c, now| {
            let mut stmt = c.prepare_cached(
                "SELECT status, count(*) FROM events
                 WHERE NOT (status = 'COMPLETED' AND expires_at <= ?1) GROUP BY status",
            )?;
            let rows = stmt.query_map([now], |r| Ok((status(r, 0)?, r.get::<_, i64>(1)? as u64)))?;
            rows.collect()
        })
        .await
    }
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

/// The writer: take what is waiting (up to a batch), run it in one transaction, commit (fsync), then answer.
fn writer(conn: Connection, mut rx: mpsc::Receiver<Job>, committed: std::sync::mpsc::SyncSender<()>) {
    let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH);
    let mut replies: Vec<Reply> = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let now = now_ms();
        let began = conn.execute_batch("BEGIN IMMEDIATE").map_err(sql);
        if let Err(e) = began {
            for job in batch.drain(..) {
                let (_, reply) = job(&conn, now);
                reply(Err(clone_err(&e)));
            }
            let _ = conn.execute_batch("ROLLBACK");
            continue;
        }
        for job in batch.drain(..) {
            // A savepoint per operation: one failing operation leaves the others of the batch intact.
            let _ = run(&conn, "SAVEPOINT op");
            let (ok, reply) = job(&conn, now);
            if !ok {
                let _ = run(&conn, "ROLLBACK TO op");
            }
            let _ = run(&conn, "RELEASE op");
            replies.push(reply);
        }
        let done = conn.execute_batch("COMMIT").map_err(sql);
        if done.is_err() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        for reply in replies.drain(..) {
            reply(done.as_ref().map(|_| ()).map_err(clone_err));
        }
        // Full means a tick is already waiting: the checkpointer will see this commit too.
        let _ = committed.try_send(());
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

fn clone_err(e: &StoreError) -> StoreError {
    match e {
        StoreError::Busy => StoreError::Busy,
        StoreError::Unavailable(m) => StoreError::Unavailable(m.clone()),
        StoreError::Corrupt(m) => StoreError::Corrupt(m.clone()),
    }
}

fn status(r: &Row<'_>, i: usize) -> rusqlite::Result<Status> {
    let text: String = r.get(i)?;
    text.parse().map_err(|_| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, "bad status".into())
    })
}

fn conversion(i: usize, what: &'static str) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, what.into())
}

/// A row of `COLUMNS` (without payload); returns the row id too.
fn event_row(r: &Row<'_>) -> rusqlite::Result<(i64, Event)> {
    let source: String = r.get(1)?;
    let event_id: String = r.get(2)?;
    Ok((
        r.get(0)?,
        Event {
            source: SourceName::parse(&source).map_err(|_| conversion(1, "bad source"))?,
            event_id: crate::model::EventId::parse(&event_id).map_err(|_| conversion(2, "bad event id"))?,
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
        },
    ))
}

fn with_payload(c: &Connection, id: i64, mut event: Event) -> rusqlite::Result<Event> {
    let found: Option<(String, Vec<u8>)> = c
        .prepare_cached("SELECT headers, body FROM payloads WHERE event = ?1")?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    if let Some((headers, body)) = found {
        event.headers = serde_json::from_str(&headers).map_err(|_| conversion(0, "bad headers"))?;
        event.payload = bytes::Bytes::from(body);
    }
    Ok(event)
}

/// What decides why a conditional write did not apply.
struct Current {
    status: Status,
    next_attempt_at: Option<i64>,
    notified: bool,
}

fn current(c: &Connection, key: &EventKey) -> rusqlite::Result<Option<Current>> {
    c.prepare_cached(
        "SELECT status, next_attempt_at, notified_at FROM events WHERE source = ?1 AND event_id = ?2",
    )?
    .query_row(params![key.source.as_str(), key.event_id.as_str()], |r| {
        Ok(Current {
            status: status(r, 0)?,
            next_attempt_at: r.get(1)?,
            notified: r.get::<_, Option<i64>>(2)?.is_some(),
        })
    })
    .optional()
}

fn insert(c: &Connection, e: &NewEvent, now: i64, grace: i64) -> rusqlite::Result<bool> {
    let n = c
        .prepare_cached(
            "INSERT INTO events (source, event_id, event_type, status, payload_sha256, received_at, updated_at, due_at)
             VALUES (?1, ?2, ?3, 'RECEIVED', ?4, ?5, ?5, ?6)
             ON CONFLICT (source, event_id) DO NOTHING",
        )?
        .execute(params![
            e.key.source.as_str(),
            e.key.event_id.as_str(),
            e.event_type,
            e.payload_sha256,
            now,
            now.saturating_add(grace)
        ])?;
    if n == 0 {
        return Ok(false);
    }
    let id = c.last_insert_rowid();
    let headers = serde_json::to_string(&e.headers).map_err(|_| conversion(0, "headers"))?;
    c.prepare_cached("INSERT OR REPLACE INTO payloads (event, headers, body) VALUES (?1, ?2, ?3)")?
        .execute(params![id, headers, e.payload.as_ref()])?;
    Ok(true)
}

#[async_trait]
impl Ledger for SqliteLedger {
    async fn create(&self, event: NewEvent) -> Result<Created, StoreError> {
        let grace = self.grace;
        self.call(false, move |c, now| {
            if insert(c, &event, now, grace)? {
                return Ok(Created::New);
            }
            let (id, existing) = c
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM events WHERE source = ?1 AND event_id = ?2"
                ))?
                .query_row(
                    params![event.key.source.as_str(), event.key.event_id.as_str()],
                    event_row,
                )?;
            if existing.is_expired(now) {
                // Past retention it no longer counts for dedup: this delivery is a new event.
                c.execute("DELETE FROM payloads WHERE event = ?1", [id])?;
                c.execute("DELETE FROM events WHERE id = ?1", [id])?;
                insert(c, &event, now, grace)?;
                return Ok(Created::New);
            }
            Ok(Created::Duplicate {
                status: existing.status,
                payload_sha256: existing.payload_sha256,
            })
        })
        .await
    }

    async fn claim(&self, key: &EventKey, owner: &str, lease: Duration) -> Result<Claim, StoreError> {
        let (key, owner, lease) = (key.clone(), owner.to_owned(), ms(lease));
        self.call(true, move |c, now| {
            let claimed = c
                .prepare_cached(&format!(
                    "UPDATE events SET status = 'PROCESSING', lease_owner = ?3, lease_until = ?4, due_at = ?4,
                            attempts = attempts + 1, updated_at = ?5
                     WHERE source = ?1 AND event_id = ?2
                       AND (status = 'RECEIVED'
                            OR (status = 'FAILED' AND next_attempt_at <= ?5 + {DUE_SLACK_MS})
                            OR (status = 'PROCESSING' AND lease_until <= ?5))
                     RETURNING {COLUMNS}"
                ))?
                .query_row(
                    params![
                        key.source.as_str(),
                        key.event_id.as_str(),
                        owner,
                        now.saturating_add(lease),
                        now
                    ],
                    event_row,
                )
                .optional()?;
            if let Some((id, event)) = claimed {
                return Ok(Claim::Claimed(Box::new(with_payload(c, id, event)?)));
            }
            Ok(match current(c, &key)? {
                None => Claim::Missing,
                Some(Current {
                    status: st @ (Status::Completed | Status::Dead),
                    ..
                }) => Claim::Done(st),
                Some(Current {
                    status: Status::Failed,
                    next_attempt_at,
                    ..
                }) => Claim::NotDue(next_attempt_at.unwrap_or(now)),
                Some(_) => Claim::OwnedElsewhere,
            })
        })
        .await
    }

    async fn settle(
        &self,
        key: &EventKey,
        owner: &str,
        settlement: Settlement,
    ) -> Result<Settled, StoreError> {
        let (key, owner, grace) = (key.clone(), owner.to_owned(), self.grace);
        self.call(true, move |c, now| {
            let k = (key.source.as_str(), key.event_id.as_str(), owner.as_str());
            let n = match settlement {
                Settlement::Completed { retention } => c
                    .prepare_cached(
                        "UPDATE events SET status = 'COMPLETED', completed_at = ?4, expires_at = ?5, updated_at = ?4,
                                lease_owner = NULL, lease_until = NULL, next_attempt_at = NULL, due_at = NULL
                         WHERE source = ?1 AND event_id = ?2 AND status = 'PROCESSING' AND lease_owner = ?3",
                    )?
                    .execute(params![k.0, k.1, k.2, now, now.saturating_add(ms(retention))])?,
                Settlement::Failed { error, delay } => {
                    let next = now.saturating_add(ms(delay));
                    c.prepare_cached(
                        "UPDATE events SET status = 'FAILED', last_error = ?4, next_attempt_at = ?5, due_at = ?7,
                                updated_at = ?6, lease_owner = NULL, lease_until = NULL
                         WHERE source = ?1 AND event_id = ?2 AND status = 'PROCESSING' AND lease_owner = ?3",
                    )?
                    .execute(params![k.0, k.1, k.2, error, next, now, next.saturating_add(grace)])?
                }
                Settlement::Dead { error } => c
                    .prepare_cached(
                        "UPDATE events SET status = 'DEAD', last_error = ?4, updated_at = ?5, due_at = ?6,
                                notified_at = NULL, lease_owner = NULL, lease_until = NULL, next_attempt_at = NULL
                         WHERE source = ?1 AND event_id = ?2 AND status = 'PROCESSING' AND lease_owner = ?3",
                    )?
                    .execute(params![k.0, k.1, k.2, error, now, now.saturating_add(grace)])?,
            };
            Ok(if n == 1 { Settled::Done } else { Settled::LeaseLost })
        })
        .await
    }

    async fn release(&self, key: &EventKey, owner: &str) -> Result<Settled, StoreError> {
        let (key, owner) = (key.clone(), owner.to_owned());
        self.call(true, move |c, now| {
            let n = c
                .prepare_cached(
                    "UPDATE events SET lease_until = ?4, due_at = ?4, updated_at = ?4
                     WHERE source = ?1 AND event_id = ?2 AND status = 'PROCESSING' AND lease_owner = ?3",
                )?
                .execute(params![key.source.as_str(), key.event_id.as_str(), owner, now])?;
            Ok(if n == 1 { Settled::Done } else { Settled::LeaseLost })
        })
        .await
    }

    async fn mark_dead(&self, key: &EventKey, reason: &str) -> Result<MarkDead, StoreError> {
        let (key, reason, grace) = (key.clone(), reason.to_owned(), self.grace);
        self.call(true, move |c, now| {
            let dead = c
                .prepare_cached(&format!(
                    "UPDATE events SET status = 'DEAD', last_error = ?3, updated_at = ?4, due_at = ?5,
                            notified_at = NULL, lease_owner = NULL, lease_until = NULL, next_attempt_at = NULL
                     WHERE source = ?1 AND event_id = ?2 AND status IN ('RECEIVED', 'PROCESSING', 'FAILED')
                     RETURNING {COLUMNS}"
                ))?
                .query_row(
                    params![
                        key.source.as_str(),
                        key.event_id.as_str(),
                        reason,
                        now,
                        now.saturating_add(grace)
                    ],
                    event_row,
                )
                .optional()?;
            if let Some((_, event)) = dead {
                return Ok(MarkDead::NewlyDead(Box::new(event)));
            }
            Ok(match current(c, &key)? {
                None => MarkDead::Missing,
                Some(Current {
                    status: Status::Dead,
                    notified,
                    ..
                }) => MarkDead::AlreadyDead { notified },
                Some(_) => MarkDead::Completed,
            })
        })
        .await
    }

    async fn mark_notified(&self, key: &EventKey) -> Result<(), StoreError> {
        let key = key.clone();
        self.call(true, move |c, now| {
            c.prepare_cached(
                "UPDATE events SET notified_at = ?3, due_at = NULL
                 WHERE source = ?1 AND event_id = ?2 AND status = 'DEAD' AND notified_at IS NULL",
            )?
            .execute(params![key.source.as_str(), key.event_id.as_str(), now])?;
            Ok(())
        })
        .await
    }

    async fn replay(&self, key: &EventKey, force: bool) -> Result<Replay, StoreError> {
        let key = key.clone();
        self.call(true, move |c, now| {
            let n = c
                .prepare_cached(
                    "UPDATE events SET status = 'RECEIVED', attempts = 0, replays = replays + 1, updated_at = ?3,
                            due_at = ?3, lease_owner = NULL, lease_until = NULL, next_attempt_at = NULL,
                            completed_at = NULL, expires_at = NULL, notified_at = NULL
                     WHERE source = ?1 AND event_id = ?2
                       AND (status = 'DEAD' OR (?4 AND status = 'COMPLETED' AND expires_at > ?3))",
                )?
                .execute(params![key.source.as_str(), key.event_id.as_str(), now, force])?;
            if n == 1 {
                return Ok(Replay::Replayed);
            }
            Ok(match current(c, &key)? {
                None => Replay::Missing,
                Some(cur) => Replay::NotEligible(cur.status),
            })
        })
        .await
    }

    async fn get(&self, key: &EventKey) -> Result<Option<Event>, StoreError> {
        let key = key.clone();
        self.call(true, move |c, now| {
            let found = c
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM events WHERE source = ?1 AND event_id = ?2"
                ))?
                .query_row(params![key.source.as_str(), key.event_id.as_str()], event_row)
                .optional()?;
            match found {
                Some((_, e)) if e.is_expired(now) => Ok(None),
                Some((id, e)) => with_payload(c, id, e).map(Some),
                None => Ok(None),
            }
        })
        .await
    }

    async fn list(&self, filter: &ListFilter) -> Result<Vec<Event>, StoreError> {
        let status = filter.status.map(Status::as_str);
        let source = filter.source.as_ref().map(|s| s.as_str().to_owned());
        let limit = filter.limit.min(i64::MAX as usize) as i64;
        self.call(true, move |c, now| {
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM events
                 WHERE (?1 IS NULL OR status = ?1) AND (?2 IS NULL OR source = ?2)
                   AND NOT (status = 'COMPLETED' AND expires_at <= ?3)
                 ORDER BY received_at DESC, id DESC LIMIT ?4"
            ))?;
            let rows = stmt.query_map(params![status, source, now, limit], |r| {
                event_row(r).map(|(_, e)| e)
            })?;
            rows.collect()
        })
        .await
    }

    async fn due(&self, due_before: i64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let limit = limit.min(i64::MAX as usize) as i64;
        self.call(true, move |c, _| {
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM events WHERE due_at <= ?1 ORDER BY due_at LIMIT ?2"
            ))?;
            let rows = stmt.query_map(params![due_before, limit], |r| event_row(r).map(|(_, e)| e))?;
            rows.collect()
        })
        .await
    }
}
