//! What the console and `inbox events` ask of a store: listings by filter and cursor, and the overview's counts.

use async_trait::async_trait;

use super::StoreError;
use crate::model::{EventId, Record, SourceName, Status};

/// Browsing for the operator console and `inbox events`: listings and counts, never a write. Listings answer
/// records without their bodies; a completed record past retention is left out.
#[async_trait]
pub trait Browse: Send + Sync + 'static {
    async fn list(&self, filter: &ListFilter) -> Result<Vec<Record>, StoreError>;

    /// Counts for the operator console, as cheaply as the store can say them (a count that would scan is `None`).
    async fn summary(&self) -> Result<Summary, StoreError>;

    /// Whether listing `filter` reads the whole table on this store (without
    /// [`Capabilities::indexes_every_listing`](super::Capabilities::indexes_every_listing)): the console says so
    /// before it runs one.
    fn lists_by_scan(&self, filter: &ListFilter) -> bool;
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
    pub fn after(event: &Record) -> Self {
        Self {
            received_at: event.received_at,
            source: event.source.clone(),
            event_id: event.event_id.clone(),
        }
    }

    /// Whether `event` comes after this position in a listing's order.
    pub fn precedes(&self, event: &Record) -> bool {
        (event.received_at, &event.source, &event.event_id) < (self.received_at, &self.source, &self.event_id)
    }
}

impl ListFilter {
    /// Whether `event` passes the filter's every condition (the cursor included). Adapters that cannot ask their
    /// store for a condition check it here, so both adapters answer the same.
    pub fn admits(&self, event: &Record) -> bool {
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
