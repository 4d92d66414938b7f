//! The narrow ports the core talks through: the store (DynamoDB or SQLite), split by who uses it ([`Ledger`],
//! [`SweepIndex`], [`Checkpoints`], [`Browse`]), and the work queue (SQS or the in-process queue). Expected races
//! are outcomes, not errors.

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::model::{Event, EventId, EventKey, NewEvent, Origin, SourceName, Status};

/// The event ledger as the receiver and the state machine use it: every method that changes a record is one
/// conditional write on the state it leaves (docs/DESIGN.md, "States and transitions").
#[async_trait]
pub trait Ledger: Send + Sync + 'static {
    async fn create(&self, event: NewEvent) -> Result<Created, StoreError>;
    /// The events of one batched delivery, made durable in one atomic write: every item is created (or found a
    /// duplicate) or, on an error, none is. A retried batch finds the items already stored as duplicates and
    /// creates the rest. Answers each item's outcome, in order.
    async fn create_batch(&self, events: Vec<NewEvent>) -> Result<Vec<Created>, StoreError>;

    /// [`Ledger::create`], the event claimed in the same write by `owner` for `lease` where it is created (RECEIVED →
    /// PROCESSING within the create's one conditional write, `attempts` 1), for a runtime that runs its handler in
    /// this process right after (`inbox serve` with a worker free): answers the outcome and, where the event was
    /// created, the claimed record with its body. A store that does not claim in a create answers as `create` does,
    /// with no record: the event is RECEIVED and waits for its message.
    async fn create_claimed(
        &self,
        event: NewEvent,
        owner: &str,
        lease: Duration,
    ) -> Result<(Created, Option<Event>), StoreError> {
        let _ = (owner, lease);
        Ok((self.create(event).await?, None))
    }

    async fn peek(&self, key: &EventKey) -> Result<Option<Event>, StoreError> {
        Ok(self.get(key).await?.map(|mut e| {
            e.payload = bytes::Bytes::new();
            e
        }))
    }

    async fn claim(&self, key: &EventKey, owner: &str, lease: Duration) -> Result<Claim, StoreError>;

    async fn settle(
        &self,
        key: &EventKey,
        owner: &str,
        settlement: Settlement,
    ) -> Result<Settled, StoreError>;

    async fn completed_body(&self, event: &Event) -> Result<(), StoreError> {
        let _ = event;
        Ok(())
    }

    async fn release(&self, key: &EventKey, owner: &str) -> Result<Settled, StoreError>;

    async fn mark_dead(&self, key: &EventKey, reason: &str) -> Result<MarkDead, StoreError>;

    async fn mark_notified(&self, key: &EventKey) -> Result<(), StoreError>;

    async fn replay(&self, key: &EventKey, force: bool) -> Result<Replay, StoreError>;

    async fn get(&self, key: &EventKey) -> Result<Option<Event>, StoreError>;

    fn check(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// The sweeper's sparse index: the events that lost their message or their alarm, and their due times.
#[async_trait]
pub trait SweepIndex: Send + Sync + 'static {
    async fn due(&self, due_before: i64, limit: usize) -> Result<Vec<Event>, StoreError>;

    async fn resent(&self, key: &EventKey, status: Status, updated_at: i64) -> Result<(), StoreError>;

    async fn defer_alarm(&self, key: &EventKey, until: i64) -> Result<(), StoreError>;
}

/// What reconciliation reads and keeps beside the events: which ids exist, and how far each source was listed.
#[async_trait]
pub trait Checkpoints: Send + Sync + 'static {
    async fn present(&self, source: &SourceName, ids: &[EventId]) -> Result<HashSet<EventId>, StoreError>;

    async fn checkpoint(&self, source: &SourceName) -> Result<Option<Checkpoint>, StoreError>;

    async fn save_checkpoint(&self, source: &SourceName, checkpoint: &Checkpoint) -> Result<(), StoreError>;
}

/// Browsing for the operator console and `inbox events`: listings and counts, never a write.
#[async_trait]
pub trait Browse: Send + Sync + 'static {
    async fn list(&self, filter: &ListFilter) -> Result<Vec<Event>, StoreError>;

    /// Counts for the operator console, as cheaply as the store can say them (a count that would scan is `None`).
    async fn summary(&self) -> Result<Summary, StoreError>;

    fn lists_by_scan(&self, _filter: &ListFilter) -> bool {
        false
    }
}

/// Everything a runtime's store serves, by part: a runtime builds one and hands each user the part it needs (the
/// receiver and the machine a [`Ledger`], the sweeper a [`SweepIndex`], reconciliation [`Checkpoints`], the
/// console and the CLI [`Browse`]). A store is all four; a third store or a simulated one implements each.
pub trait Store: Ledger + SweepIndex + Checkpoints + Browse {}

impl<T: Ledger + SweepIndex + Checkpoints + Browse> Store for T {}

/// The work queue carries pointers, never payloads.
#[async_trait]
pub trait Queue: Send + Sync + 'static {
    /// Delivers `key` to a processor after `delay`, at least once.
    async fn enqueue(&self, key: &EventKey, delay: Duration) -> Result<(), QueueError>;

    /// Sends `key`'s message ahead of its record's create (the AWS intake, `receiver::Intake`): a processor that finds no
    /// record keeps the message until `until` (ms), by when the create has landed or never will.
    async fn announce(&self, key: &EventKey, until: i64) -> Result<(), QueueError> {
        let _ = until;
        self.enqueue(key, Duration::ZERO).await
    }

    /// How many messages the queue holds, where it can say without reading them (SQS's approximate counts):
    /// on AWS the RECEIVED and PROCESSING events, which the sparse index does not hold.
    async fn depth(&self) -> Result<Option<QueueDepth>, QueueError> {
        Ok(None)
    }
}

/// A queue's approximate counts (SQS: `ApproximateNumberOfMessages`, `…NotVisible`, `…Delayed`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDepth {
    /// Waiting to be received.
    pub waiting: u64,
    /// Received and not yet deleted: being processed, or held back for a retry.
    pub in_flight: u64,
    /// Sent with a delay that has not passed.
    pub delayed: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    New,
    /// Created as its own event, though its body (same source and type) is stored under another id within
    /// retention already: the record is marked `resent_of` that id (docs/DESIGN.md "Receiving").
    Resent {
        of: EventId,
    },
    /// The event was there already: its id (another one than asked for where its body was refused as a resend),
    /// its state now, the hash of the first payload, which stands, and how it came.
    Duplicate {
        event_id: EventId,
        status: Status,
        payload_sha256: String,
        origin: Origin,
        /// When it entered `status` (its `updated_at`): a RECEIVED one younger than the grace has its message in
        /// flight, and a duplicate sends no other.
        since: i64,
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
    /// Dead already: the record as it stands, without its body (its `notified_at` says whether its alarm went
    /// out), so that an alarm still owed is sent without reading the record again.
    AlreadyDead(Box<Event>),
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
    /// Events listed but not stored (a detail that answered 404, a payload missing, a create the ledger refused),
    /// tried again by the next runs until they are stored or fall out of the lookback. Checkpoints saved before
    /// this field existed read as none.
    #[serde(default)]
    pub failed: Vec<FailedEvent>,
}

/// One event a run listed but could not store: what a later run needs to ask the provider for it again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedEvent {
    /// The id a webhook would carry (Stripe `id`, GitHub `guid`).
    pub id: EventId,
    /// What the provider finds its detail by: GitHub the delivery's numeric id, Stripe the event id.
    pub handle: String,
    /// When the provider created it (UTC ms): once it is older than the lookback it is given up.
    pub created_ms: i64,
    #[serde(default)]
    pub event_type: Option<String>,
    /// The runs that failed to store it.
    pub attempts: u32,
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

/// Which events a listing wants, newest first. Every field narrows; `Default` lists everything (up to `limit`).
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub status: Option<Status>,
    pub source: Option<crate::model::SourceName>,
    pub limit: usize,
    /// Only events of this type (exact match).
    pub event_type: Option<String>,
    /// Only events with this id (of any source, unless `source` is set too).
    pub event_id: Option<EventId>,
    /// Only events received at or after this time (UTC ms).
    pub received_from: Option<i64>,
    /// Only events received before this time (UTC ms).
    pub received_to: Option<i64>,
    /// Only events strictly after this one in the listing's order (the next page).
    pub before: Option<Cursor>,
}

/// A position in a listing (newest first by `received_at`, ties broken by source then event id, descending):
/// what the next page starts after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub received_at: i64,
    pub source: SourceName,
    pub event_id: EventId,
}

impl Cursor {
    /// The cursor that continues a listing after `event`.
    pub fn after(event: &Event) -> Self {
        Self {
            received_at: event.received_at,
            source: event.source.clone(),
            event_id: event.event_id.clone(),
        }
    }

    /// Whether `event` comes after this position in a listing's order.
    pub fn precedes(&self, event: &Event) -> bool {
        (event.received_at, &event.source, &event.event_id) < (self.received_at, &self.source, &self.event_id)
    }
}

impl ListFilter {
    /// Whether `event` passes the filter's every condition (the cursor included). Adapters that cannot ask their
    /// store for a condition check it here, so both adapters answer the same.
    pub fn admits(&self, event: &Event) -> bool {
        self.status.is_none_or(|s| event.status == s)
            && self.source.as_ref().is_none_or(|s| &event.source == s)
            && self
                .event_type
                .as_ref()
                .is_none_or(|t| event.event_type.as_deref() == Some(t.as_str()))
            && self.event_id.as_ref().is_none_or(|id| &event.event_id == id)
            && self.received_from.is_none_or(|t| event.received_at >= t)
            && self.received_to.is_none_or(|t| event.received_at < t)
            && self.before.as_ref().is_none_or(|c| c.precedes(event))
    }
}

/// What the console's overview shows: counts and the oldest open event, as cheaply as the store can say them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Events by status; `None` where counting them would scan the table (on DynamoDB: completed events, and the
    /// RECEIVED and PROCESSING ones that the work queue vouches for).
    pub by_status: Vec<(Status, Option<u64>)>,
    /// Per source, events by status, for the statuses counted in `by_status`.
    pub by_source: Vec<(SourceName, Status, u64)>,
    /// When the oldest open (RECEIVED, PROCESSING or FAILED) event among the counted ones was received (UTC ms).
    pub oldest_open: Option<i64>,
    /// Events received per hour over the last day and what became of them, oldest hour first; empty where the
    /// store cannot say it without a scan (then a [`Timeline`] may).
    pub timeline: Vec<Bucket>,
    /// How the chart counts, for its legend: by the hour events arrived (SQLite), or by the hour each count was
    /// made ([`Timeline`]).
    pub timeline_note: &'static str,
    /// The work queue's counts, where the console has a queue that can say them (AWS).
    pub queue: Option<QueueDepth>,
}

/// The overview's hourly chart where the ledger cannot draw it without a scan (DynamoDB): on AWS, from the
/// functions' metrics in CloudWatch.
#[async_trait]
pub trait Timeline: Send + Sync + 'static {
    /// Events accepted, completed and dead per hour over the 24 hours before `now` (ms), oldest hour first.
    async fn last_day(&self, now: i64) -> Result<Vec<Bucket>, StoreError>;

    /// What the counts are, for the chart's legend.
    fn note(&self) -> &'static str;
}

/// One hour of the overview's chart: events received in it, and how many of those are completed or dead now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bucket {
    pub start: i64,
    pub accepted: u64,
    pub completed: u64,
    pub dead: u64,
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
