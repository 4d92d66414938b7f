//! The narrow ports the core talks through: the ledger (DynamoDB or SQLite) and the work queue (SQS or the
//! in-process queue). Expected races are outcomes, not errors.

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::model::{Event, EventId, EventKey, NewEvent, Origin, SourceName, Status};

/// The event ledger: every method that changes a record is one conditional write on the state it leaves.
#[async_trait]
pub trait Ledger: Send + Sync + 'static {
    /// Creates the record as RECEIVED only if `(source, event_id)` is absent (or completed and past retention),
    /// and, where `event.unique_body_for` is set, only if no other event of the source holds the same body within
    /// that time. Returns only once the write is durable.
    async fn create(&self, event: NewEvent) -> Result<Created, StoreError>;

    /// RECEIVED | FAILED (due) | PROCESSING with an expired lease → PROCESSING owned by `owner` for `lease`,
    /// `attempts + 1`. Returns the claimed record, payload included.
    async fn claim(&self, key: &EventKey, owner: &str, lease: Duration) -> Result<Claim, StoreError>;

    /// Settles a claim, only while `owner` still holds it.
    async fn settle(
        &self,
        key: &EventKey,
        owner: &str,
        settlement: Settlement,
    ) -> Result<Settled, StoreError>;

    /// Gives a claim back without settling it (graceful shutdown): the lease expires now, so the next claim
    /// may take it at once. Only while `owner` still holds it.
    async fn release(&self, key: &EventKey, owner: &str) -> Result<Settled, StoreError>;

    /// The dead-letter path: RECEIVED | FAILED | PROCESSING with an expired lease → DEAD with `reason`; never over
    /// COMPLETED, and never under a live lease (the running worker's settle wins).
    async fn mark_dead(&self, key: &EventKey, reason: &str) -> Result<MarkDead, StoreError>;

    /// Records that the alarm for a dead event went out, so it is sent once.
    async fn mark_notified(&self, key: &EventKey) -> Result<(), StoreError>;

    /// An alarm that could not go out waits until `until` (ms) before the sweeper offers it again.
    async fn defer_alarm(&self, key: &EventKey, until: i64) -> Result<(), StoreError>;

    /// Operator replay: DEAD → RECEIVED (or COMPLETED → RECEIVED with `force`), retry budget reset (attempts to
    /// 0, the age budget counted from now), `replays + 1`.
    async fn replay(&self, key: &EventKey, force: bool) -> Result<Replay, StoreError>;

    async fn get(&self, key: &EventKey) -> Result<Option<Event>, StoreError>;

    /// Events by status/source, newest first, without payloads. Completed events past retention are left out.
    async fn list(&self, filter: &ListFilter) -> Result<Vec<Event>, StoreError>;

    /// The sweeper's query, through the sparse index only: events that lost their message or their alarm. Each
    /// record's due time is set by the write that gives it its state: RECEIVED, received (or replayed: at once)
    /// plus the grace; PROCESSING, the lease end; FAILED, the next attempt plus the grace; DEAD, the death plus the
    /// grace until its alarm is recorded; none once COMPLETED. Oldest first, at most `limit`, without payloads.
    async fn due(&self, due_before: i64, limit: usize) -> Result<Vec<Event>, StoreError>;

    /// Which of `ids` (of one source) the ledger holds; a completed event past retention counts as absent.
    async fn present(&self, source: &SourceName, ids: &[EventId]) -> Result<HashSet<EventId>, StoreError>;

    /// The reconciliation checkpoint of a source, kept apart from the events (no listing, replay or sweep sees it).
    async fn checkpoint(&self, source: &SourceName) -> Result<Option<Checkpoint>, StoreError>;

    async fn save_checkpoint(&self, source: &SourceName, checkpoint: &Checkpoint) -> Result<(), StoreError>;

    /// Whether the store can still take writes from this process (`/healthz`); asks nothing of the store.
    fn check(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// The work queue carries pointers, never payloads.
#[async_trait]
pub trait Queue: Send + Sync + 'static {
    /// Delivers `key` to a processor after `delay`, at least once.
    async fn enqueue(&self, key: &EventKey, delay: Duration) -> Result<(), QueueError>;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    New,
    /// The event was there already: its id (another one than asked for where its body was refused as a resend),
    /// its state now, the hash of the first payload, which stands, and how it came.
    Duplicate {
        event_id: EventId,
        status: Status,
        payload_sha256: String,
        origin: Origin,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    Claimed(Box<Event>),
    /// COMPLETED or DEAD: nothing to run.
    Done(Status),
    /// PROCESSING under a live lease: someone else owns it.
    OwnedElsewhere,
    /// FAILED and its backoff has not run out yet; due at this time (ms).
    NotDue(i64),
    /// No such record (never written, or expired and purged).
    Missing,
    /// Claimed, but its stored body cannot be read back (the record without it, and why): never run with an empty
    /// body; the caller holds the lease and settles it DEAD.
    Corrupt(Box<Event>, String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    Completed { retention: Duration },
    Failed { error: String, delay: Duration },
    Dead { error: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    Done,
    /// The lease was lost (taken by another worker after it expired): nothing was written.
    LeaseLost,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkDead {
    /// This call made it dead; the caller notifies.
    NewlyDead(Box<Event>),
    /// Dead already; `notified` says whether its alarm went out.
    AlreadyDead {
        notified: bool,
    },
    Completed,
    /// PROCESSING under a live lease until this time (ms): the worker's settle decides; ask again after it.
    Leased(i64),
    Missing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    Replayed,
    /// Not in a replayable state (another operator replayed it first, or it is open).
    NotEligible(Status),
    Missing,
}

/// Where reconciliation of a source stands: how far the provider's events were listed completely, and the last run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Everything the provider created before this time (UTC ms) has been listed completely.
    pub scanned_to: i64,
    /// The last run, ok or not: what the console and `inbox reconcile` show.
    pub last_run: Option<RunRecord>,
}

/// One reconciliation run and what it found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    pub started_at: i64,
    pub finished_at: i64,
    pub listed: u64,
    pub present: u64,
    pub recovered: u64,
    pub failed: u64,
    /// Why the run ended early (never a credential); `None` when it reached the end.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub status: Option<Status>,
    pub source: Option<crate::model::SourceName>,
    pub limit: usize,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// Too busy to take the write now (throttled, or the write queue is full): answer 503 with Retry-After.
    #[error("the store is busy")]
    Busy,
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    #[error("a stored record is corrupt: {0}")]
    Corrupt(String),
}

#[derive(Debug, thiserror::Error)]
#[error("enqueue failed: {0}")]
pub struct QueueError(pub String);
