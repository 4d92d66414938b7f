//! What reconciliation keeps beside the events: how far each source was listed, and its last run.

use serde::{Deserialize, Serialize};

use crate::model::EventId;

/// Where reconciliation of a source stands: how far the provider's events were listed completely, and the last run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
