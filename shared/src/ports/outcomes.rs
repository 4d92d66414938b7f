//! What a transition answers: expected races are outcomes, not errors.

use std::time::Duration;

use crate::model::{Event, EventId, Origin, Record, Status};

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
    Corrupt(Box<Record>, String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
    NewlyDead(Box<Record>),
    /// Dead already: the record as it stands, without its body (its `notified_at` says whether its alarm went
    /// out), so that an alarm still owed is sent without reading the record again.
    AlreadyDead(Box<Record>),
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

/// What one purge deleted ([`crate::ports::Upkeep::purge`]): completed events past retention (with their payloads),
/// and the store's other expired keeping (SQLite's remembered bodies); each at most the purge's limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
