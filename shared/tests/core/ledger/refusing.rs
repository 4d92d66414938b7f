//! A store that refuses the creates a test names, as a full disk or a constraint would, over any store: every other
//! call goes to the store it wraps, unchanged.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use inbox_core::model::{Event, EventId, EventKey, NewEvent, Record, SourceName, Status};
use inbox_core::ports::{
    Browse, Capabilities, Checkpoint, Checkpoints, Claim, Created, GoneOwners, Ledger, ListFilter, MarkDead,
    Purged, Replay, Settled, Settlement, Store, StoreError, Summary, SweepIndex, Upkeep,
};

type Refusal = Box<dyn Fn(&NewEvent) -> bool + Send + Sync>;

pub struct Refusing {
    store: Arc<dyn Store>,
    refuse: Mutex<Option<Refusal>>,
}

impl Refusing {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            refuse: Mutex::new(None),
        }
    }

    /// From now on, every create of an event `when` matches fails, until [`Refusing::accept`].
    pub fn refuse(&self, when: impl Fn(&NewEvent) -> bool + Send + Sync + 'static) {
        *self.refuse.lock().unwrap() = Some(Box::new(when));
    }

    pub fn accept(&self) {
        *self.refuse.lock().unwrap() = None;
    }

    fn refused(&self, event: &NewEvent) -> Result<(), StoreError> {
        match &*self.refuse.lock().unwrap() {
            Some(when) if when(event) => Err(StoreError::Unavailable("refused by the test".into())),
            _ => Ok(()),
        }
    }
}

#[async_trait]
impl Ledger for Refusing {
    fn capabilities(&self) -> Capabilities {
        self.store.capabilities()
    }
    async fn create(&self, event: NewEvent) -> Result<Created, StoreError> {
        self.refused(&event)?;
        self.store.create(event).await
    }
    async fn create_announced(&self, event: NewEvent) -> Result<Created, StoreError> {
        self.refused(&event)?;
        self.store.create_announced(event).await
    }
    async fn create_batch(&self, events: Vec<NewEvent>) -> Result<Vec<Created>, StoreError> {
        for event in &events {
            self.refused(event)?;
        }
        self.store.create_batch(events).await
    }
    async fn create_claimed(
        &self,
        event: NewEvent,
        owner: &str,
        lease: Duration,
    ) -> Result<(Created, Option<Event>), StoreError> {
        self.refused(&event)?;
        self.store.create_claimed(event, owner, lease).await
    }
    async fn peek(&self, key: &EventKey) -> Result<Option<Record>, StoreError> {
        self.store.peek(key).await
    }
    async fn claim(&self, key: &EventKey, owner: &str, lease: Duration) -> Result<Claim, StoreError> {
        self.store.claim(key, owner, lease).await
    }
    async fn settle(
        &self,
        key: &EventKey,
        owner: &str,
        settlement: Settlement,
    ) -> Result<Settled, StoreError> {
        self.store.settle(key, owner, settlement).await
    }
    async fn completed(&self, key: &EventKey, owner: &str) -> Result<(), StoreError> {
        self.store.completed(key, owner).await
    }
    async fn release(&self, key: &EventKey, owner: &str) -> Result<Settled, StoreError> {
        self.store.release(key, owner).await
    }
    async fn mark_dead(&self, key: &EventKey, reason: &str) -> Result<MarkDead, StoreError> {
        self.store.mark_dead(key, reason).await
    }
    async fn mark_notified(&self, key: &EventKey) -> Result<(), StoreError> {
        self.store.mark_notified(key).await
    }
    async fn replay(&self, key: &EventKey, force: bool) -> Result<Replay, StoreError> {
        self.store.replay(key, force).await
    }
    async fn get(&self, key: &EventKey) -> Result<Option<Event>, StoreError> {
        self.store.get(key).await
    }
    fn check(&self) -> Result<(), StoreError> {
        self.store.check()
    }
}

#[async_trait]
impl SweepIndex for Refusing {
    async fn due(&self, ahead: Duration, limit: usize) -> Result<Vec<Record>, StoreError> {
        self.store.due(ahead, limit).await
    }
    async fn sent_again(&self, key: &EventKey, status: Status, updated_at: i64) -> Result<(), StoreError> {
        self.store.sent_again(key, status, updated_at).await
    }
    async fn defer_alarm(&self, key: &EventKey, until: i64) -> Result<(), StoreError> {
        self.store.defer_alarm(key, until).await
    }
}

#[async_trait]
impl Checkpoints for Refusing {
    async fn present(&self, source: &SourceName, ids: &[EventId]) -> Result<HashSet<EventId>, StoreError> {
        self.store.present(source, ids).await
    }
    async fn checkpoint(&self, source: &SourceName) -> Result<Option<Checkpoint>, StoreError> {
        self.store.checkpoint(source).await
    }
    async fn save_checkpoint(&self, source: &SourceName, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        self.store.save_checkpoint(source, checkpoint).await
    }
}

#[async_trait]
impl Browse for Refusing {
    async fn list(&self, filter: &ListFilter) -> Result<Vec<Record>, StoreError> {
        self.store.list(filter).await
    }
    async fn summary(&self) -> Result<Summary, StoreError> {
        self.store.summary().await
    }
    fn lists_by_scan(&self, filter: &ListFilter) -> bool {
        self.store.lists_by_scan(filter)
    }
}

#[async_trait]
impl Upkeep for Refusing {
    async fn gone_owners(&self, me: &str) -> Result<GoneOwners, StoreError> {
        self.store.gone_owners(me).await
    }
    fn liveness(&self) -> Option<std::time::Duration> {
        self.store.liveness()
    }
    async fn heartbeat(&self, me: &str) -> Result<(), StoreError> {
        self.store.heartbeat(me).await
    }
    async fn lead(&self, role: &str, me: &str, hold: std::time::Duration) -> Result<Option<u64>, StoreError> {
        self.store.lead(role, me, hold).await
    }
    async fn end_leases(&self, gone: &GoneOwners) -> Result<usize, StoreError> {
        self.store.end_leases(gone).await
    }
    async fn give_back(&self, owner: &str) -> Result<usize, StoreError> {
        self.store.give_back(owner).await
    }
    async fn purge(&self, limit: usize) -> Result<Purged, StoreError> {
        self.store.purge(limit).await
    }
    async fn changed_elsewhere(&self) -> Result<bool, StoreError> {
        self.store.changed_elsewhere().await
    }
    async fn finish_bodies(&self, limit: usize) -> Result<usize, StoreError> {
        self.store.finish_bodies(limit).await
    }
    async fn failure(&self) -> String {
        self.store.failure().await
    }
}
