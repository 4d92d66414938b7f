//! The narrow ports the core talks through: the store (SQLite, DynamoDB, the reference store in memory), split by
//! who uses it ([`Ledger`], [`SweepIndex`], [`Checkpoints`], [`Browse`], [`Upkeep`]), and the work queue ([`Queue`]:
//! SQS or the in-process queue). Expected races are outcomes ([`outcomes`]), not errors. What each port promises, and
//! which store does what: docs/DESIGN.md, "What each port promises".
//!
//! **Time.** A store call that depends on time runs at the store's own clock, the one its leases, due times and
//! retention are measured on, and the only one: the clock the store was built with (the system's by default: SQLite's
//! writer and DynamoDB's callers read it, as the reference store does), or the database's `now()` where the store has
//! one of its own. A test or a simulation moves time by building the store on a clock it drives
//! ([`crate::clock::ManualClock`]); no call carries a time of its own.

mod browse;
mod checkpoint;
mod outcomes;

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;

pub use browse::{Browse, Bucket, Cursor, ListFilter, Summary, Timeline};
pub use checkpoint::{Checkpoint, FailedEvent, RunRecord};
pub use outcomes::{Claim, Created, MarkDead, Purged, Replay, Settled, Settlement};

use crate::model::{Event, EventId, EventKey, NewEvent, Record, SourceName, Status};

/// The event ledger as the receiver and the state machine use it: every method that changes a record is one
/// conditional write on the state it leaves (docs/DESIGN.md, "States and transitions").
#[async_trait]
pub trait Ledger: Send + Sync + 'static {
    /// What this store does beyond what every store must: asked, never assumed.
    fn capabilities(&self) -> Capabilities;

    /// Creates `event` as RECEIVED unless `(source, event_id)` exists: then it answers the one in the way, whose
    /// first payload stands.
    async fn create(&self, event: NewEvent) -> Result<Created, StoreError>;

    /// [`Ledger::create`] of an event whose queue message went out before it (the AWS intake,
    /// `intake::Order::AnnounceThenWrite`): a store whose queue vouches for announced records
    /// ([`Capabilities::trusts_announcements`]) leaves it out of the sweeper's index; any other creates it as
    /// `create` does.
    async fn create_announced(&self, event: NewEvent) -> Result<Created, StoreError>;

    /// The events of one batched delivery, made durable in one atomic write: every item is created (or found a
    /// duplicate) or, on an error, none is. A retried batch finds the items already stored as duplicates and
    /// creates the rest. Answers each item's outcome, in order. No item looks for resent bodies (its
    /// `resent_bodies` is read as [`ResentBodies::Ignored`]): a batch's scheme signs each id with its body.
    ///
    /// [`ResentBodies::Ignored`]: crate::model::ResentBodies::Ignored
    async fn create_batch(&self, events: Vec<NewEvent>) -> Result<Vec<Created>, StoreError>;

    /// [`Ledger::create`], the event claimed in the same write by `owner` for `lease` where it is created (RECEIVED →
    /// PROCESSING within the create's one conditional write, `attempts` 1), for a runtime that runs its handler in
    /// this process right after: answers the outcome and, where the event was created, the claimed record with its
    /// body. A store without [`Capabilities::claims_in_create`] answers as `create` does, with no record: the event
    /// is RECEIVED and waits for its message.
    async fn create_claimed(
        &self,
        event: NewEvent,
        owner: &str,
        lease: Duration,
    ) -> Result<(Created, Option<Event>), StoreError>;

    /// The record without its body, as cheaply as the store can read it (an eventually consistent read may miss
    /// a record just written: the create's condition catches that duplicate); a completed one past retention
    /// is none.
    async fn peek(&self, key: &EventKey) -> Result<Option<Record>, StoreError>;

    async fn claim(&self, key: &EventKey, owner: &str, lease: Duration) -> Result<Claim, StoreError>;

    async fn settle(
        &self,
        key: &EventKey,
        owner: &str,
        settlement: Settlement,
    ) -> Result<Settled, StoreError>;

    /// After a COMPLETED settle of the claim `owner` took (by the machine, or by a handler in its own transaction),
    /// whatever the store owes the body it handed that claim is started (on DynamoDB, the countdown of a body in
    /// S3); a store that keeps bodies in the record owes nothing. What is owed is in the store before the settle,
    /// so a failure or a crash here leaves it to [`Upkeep::finish_bodies`].
    async fn completed(&self, key: &EventKey, owner: &str) -> Result<(), StoreError>;

    async fn release(&self, key: &EventKey, owner: &str) -> Result<Settled, StoreError>;

    async fn mark_dead(&self, key: &EventKey, reason: &str) -> Result<MarkDead, StoreError>;

    async fn mark_notified(&self, key: &EventKey) -> Result<(), StoreError>;

    async fn replay(&self, key: &EventKey, force: bool) -> Result<Replay, StoreError>;

    /// The record with its body; a completed one past retention is none.
    async fn get(&self, key: &EventKey) -> Result<Option<Event>, StoreError>;

    /// Whether the store can take this process's writes now (SQLite: its writer is alive and no sync failed).
    fn check(&self) -> Result<(), StoreError>;
}

/// The sweeper's sparse index: the events that lost their message or their alarm, and their due times.
#[async_trait]
pub trait SweepIndex: Send + Sync + 'static {
    /// The events due by `ahead` past the time of the call on the store's own clock (the one their due times were
    /// set on, so that an instance whose clock runs ahead of the database's sends nothing early), oldest due first,
    /// at most `limit`. `Duration::MAX` reads everything that will ever be due.
    async fn due(&self, ahead: Duration, limit: usize) -> Result<Vec<Record>, StoreError>;

    /// The sweeper sent an open event's message again: it is not due again for a while, unless it moved (its
    /// status and `updated_at` still what the sweeper read).
    async fn sent_again(&self, key: &EventKey, status: Status, updated_at: i64) -> Result<(), StoreError>;

    /// A dead event's alarm did not go out: it comes due again at `until`.
    async fn defer_alarm(&self, key: &EventKey, until: i64) -> Result<(), StoreError>;
}

/// What reconciliation reads and keeps beside the events: which ids exist, and how far each source was listed.
#[async_trait]
pub trait Checkpoints: Send + Sync + 'static {
    /// Which of `ids` have a record, in any state, expired or not: past retention "done and forgotten" looks like
    /// "never received".
    async fn present(&self, source: &SourceName, ids: &[EventId]) -> Result<HashSet<EventId>, StoreError>;

    async fn checkpoint(&self, source: &SourceName) -> Result<Option<Checkpoint>, StoreError>;

    async fn save_checkpoint(&self, source: &SourceName, checkpoint: &Checkpoint) -> Result<(), StoreError>;
}

/// The store's upkeep, which a runtime runs beside the work: ending the leases of owners that are gone, retention,
/// noticing changes made by another process, finishing bodies kept apart, and the failure that ends a process.
#[async_trait]
pub trait Upkeep: Send + Sync + 'static {
    /// Which owners, other than `me`, this store can prove are gone, so that their leases can end now rather than
    /// at their expiry. Nothing is ever ended because a process *thinks* the others are gone.
    async fn gone_owners(&self, me: &str) -> Result<GoneOwners, StoreError>;

    /// `me` is alive. A store whose gone owners are proven by heartbeats (PostgreSQL: on the database's clock) renews
    /// `me`'s, which a runtime does well within the store's liveness period; a store that proves them otherwise (a
    /// lock, a queue's visibility) has nothing to record.
    async fn heartbeat(&self, me: &str) -> Result<(), StoreError>;

    /// How long a renewed heartbeat vouches for its owner, where the store judges owners gone by their heartbeats;
    /// `None` where it proves them otherwise. A runtime over such a store beats on a task of its own and fences
    /// itself when it cannot ([`crate::fence`]).
    fn liveness(&self) -> Option<Duration>;

    /// Whether `me` leads `role` (a pass one runtime at a time runs: the sweep, retention, a source's
    /// reconciliation) for the next `hold`, taking or renewing it: the role's term while `me` holds it, `None` while
    /// another does. Where the store is [`Capabilities::shared_by_many`], a role has one holder at a time, measured on
    /// the store's clock, and its term grows with every change of holder; elsewhere whoever asks leads (term 0).
    async fn lead(&self, role: &str, me: &str, hold: Duration) -> Result<Option<u64>, StoreError>;

    /// Ends the leases `gone` names: their events can be claimed at once. How many ended.
    async fn end_leases(&self, gone: &GoneOwners) -> Result<usize, StoreError>;

    /// Gives back every lease `owner` holds (a runtime shutting down with handlers still running). How many.
    async fn give_back(&self, owner: &str) -> Result<usize, StoreError>;

    /// Deletes completed events past retention, and whatever else of the store's has expired, at most `limit` of
    /// each kind in one step: call again while [`Purged::full`] says a kind filled the limit. A store whose
    /// retention runs by itself (DynamoDB's TTL) deletes nothing.
    async fn purge(&self, limit: usize) -> Result<Purged, StoreError>;

    /// Whether another process changed the store since the last call (`inbox replay` beside `inbox serve`): the
    /// runtime then sweeps at once. A store that cannot tell says `false`; the sweeper's interval covers it.
    async fn changed_elsewhere(&self) -> Result<bool, StoreError>;

    /// Finishes what completed events owe their bodies kept apart ([`Ledger::completed`] not done after a crash or a
    /// failure), at most `limit`; how many.
    async fn finish_bodies(&self, limit: usize) -> Result<usize, StoreError>;

    /// Resolves, with the cause, once the store can no longer be trusted by this process (SQLite: a failed sync):
    /// the process must stop so that a restart recovers from what the disk holds. Never, for a store without such
    /// a state.
    async fn failure(&self) -> String;
}

/// The owners whose leases a store can prove are no longer held ([`Upkeep::gone_owners`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum GoneOwners {
    /// None that the store can prove (DynamoDB: SQS's visibility vouches for a Lambda's claim, and a lease ends at
    /// its expiry).
    None,
    /// Every owner but `me` (SQLite under `inbox serve`: the data directory's lock admits one process).
    AllBut(String),
    /// These owners (a shared store whose owners keep heartbeats).
    These(Vec<String>),
}

/// What a store does beyond what every store must, declared by the store and asked by its users and by the
/// contract: never a default that silently does nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// [`Ledger::create_claimed`] claims a created event in the create's own write (SQLite, the reference store).
    pub claims_in_create: bool,
    /// An announced create ([`Ledger::create_announced`]) stays out of the sweeper's index, the queue vouching for it
    /// (DynamoDB beside SQS). Without it, every open record is in the index (the ledger is its own queue).
    pub trusts_announcements: bool,
    /// Listings answer every filter from an index; without it, a filter the store cannot index reads the whole
    /// table (DynamoDB: [`Browse::lists_by_scan`] says which).
    pub indexes_every_listing: bool,
    /// Bodies can be kept apart from their records and owe work after completion ([`Ledger::completed`],
    /// [`Upkeep::finish_bodies`]): DynamoDB with S3.
    pub keeps_bodies_apart: bool,
    /// Reads of the sweeper's index and listings may lag the writes (DynamoDB's global secondary index): readers
    /// look again before they conclude.
    pub eventually_consistent_index: bool,
    /// Any number of runtimes serve from it at once (PostgreSQL): [`Upkeep::lead`] gives each role to one holder at a
    /// time. Without it, one process serves from the store (SQLite's lock) or each pass is scheduled once
    /// (DynamoDB's functions), and whoever asks leads.
    pub shared_by_many: bool,
}

/// Everything a runtime's store serves, by part: a runtime builds one and hands each user the part it needs (the
/// receiver a [`Ledger`], the machine a [`Ledger`] and a [`SweepIndex`], reconciliation [`Checkpoints`], the
/// console and the CLI [`Browse`], the runtime's loops [`Upkeep`]). A store is all five.
pub trait Store: Ledger + SweepIndex + Checkpoints + Browse + Upkeep {}

impl<T: Ledger + SweepIndex + Checkpoints + Browse + Upkeep> Store for T {}

/// The work queue carries pointers, never payloads.
#[async_trait]
pub trait Queue: Send + Sync + 'static {
    /// Delivers `key` to a processor after `delay`, at least once.
    async fn enqueue(&self, key: &EventKey, delay: Duration) -> Result<(), QueueError>;

    /// Sends `key`'s message ahead of its record's create (the AWS intake): a processor that finds no record keeps
    /// the message until `until` (ms), by when the create has landed or never will. A queue that does not hold
    /// messages for records to come enqueues it as any other.
    async fn announce(&self, key: &EventKey, until: i64) -> Result<(), QueueError>;

    /// How many messages the queue holds, where it can say without reading them (SQS's approximate counts): on
    /// AWS the RECEIVED and PROCESSING events, which the sparse index does not hold. `None` for a queue that
    /// cannot say.
    async fn depth(&self) -> Result<Option<QueueDepth>, QueueError>;
}

/// The queue of a store that is its own queue, where no process holds a queue: it sends nothing, and the record
/// waits in the store's sweep index, where a running `inbox serve` takes it (its sweep, within the sweeper's grace),
/// as it does after a restart. For the operator's commands that create events (`inbox reconcile`) and for writing a
/// store with no server (the migration fixtures).
pub struct LedgerIsTheQueue;

#[async_trait]
impl Queue for LedgerIsTheQueue {
    async fn enqueue(&self, _key: &EventKey, _delay: Duration) -> Result<(), QueueError> {
        Ok(())
    }
    async fn announce(&self, _key: &EventKey, _until: i64) -> Result<(), QueueError> {
        Ok(())
    }
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
