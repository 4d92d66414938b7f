//! The store of the simulation: the reference store (`MemoryStore`, its writes durable only when synced) behind a
//! layer that injects what a real store does under faults, each drawn from the seed: latency, an error before
//! the write (nothing done), an error after it (done, but the caller cannot know: a commit whose outcome is
//! unknown, a connection lost mid-batch), and a pause between a write and its sync (so that a crash there loses a
//! write nobody was answered for). Every write is synced before it is answered, as `inbox serve`'s stores promise;
//! [`Mutation::AnswerBeforeSync`] breaks that on purpose, to show that the checks catch it.
//!
//! It also records what the checks need and only a store sees: each settle to COMPLETED answered `Done` (after its
//! sync), every settle's answer by its attempt, each settle that landed without its lease, and the leases ended
//! because their owner was judged gone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use std::collections::{HashMap, HashSet};

use inbox_core::model::{Event, EventId, EventKey, NewEvent, Record, SourceName, Status};
use inbox_core::ports::{
    Browse, Capabilities, Checkpoint, Checkpoints, Claim, Created, GoneOwners, Ledger, ListFilter, MarkDead,
    Purged, Queue, QueueDepth, QueueError, Replay, Settled, Settlement, StoreError, Summary, SweepIndex,
    Upkeep,
};
use inbox_core::serve::InProcessQueue;
use inbox_core::stores::memory::MemoryStore;
use rand::rngs::StdRng;
use rand::Rng;

/// A defect put in on purpose (`SIM_MUTATION`), to show that a seed catches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutation {
    None,
    /// A create answered before its write is synced: a crash after the answer loses an acknowledged event.
    AnswerBeforeSync,
}

/// The fault rates, in per mille of calls.
#[derive(Clone, Copy, Debug)]
pub struct Rates {
    pub error_before: u32,
    pub error_after: u32,
    pub slow: u32,
    /// A call held past any lease (a process paused, a stop-the-world pause): 8 to 15 s, before it reaches the
    /// store, or after a write landed and before its answer.
    pub stall: u32,
    pub pause_before_sync: u32,
}

pub struct Faulty {
    pub inner: MemoryStore,
    rng: Arc<Mutex<StdRng>>,
    rates: Rates,
    /// Faults happen only while this is set (the simulation's last phase runs without).
    pub on: AtomicBool,
    mutation: Mutation,
    /// `(event id, lease token)` of each settle to COMPLETED answered `Done`.
    pub completed: Mutex<Vec<(String, String)>>,
    /// Faults injected, for the figures.
    pub injected: Mutex<u64>,
    /// Settles answered `Done` while another attempt (or none) held the lease: always a defect.
    pub unleased: Mutex<Vec<String>>,
    /// Every settle's answer, by attempt (lease token): what explains a repeated effect.
    pub settles: Mutex<HashMap<String, Vec<Answered>>>,
    /// Leases ended because their owner was judged gone (by a heartbeat that ran out).
    pub judged: Mutex<u64>,
    /// The database's crashes so far: a write whose sync a crash overtook is answered with an error, as a
    /// connection lost mid-commit is, never as done.
    crashes: std::sync::atomic::AtomicU64,
}

/// How a settle was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answered {
    Done,
    LeaseLost,
    /// An error: the attempt cannot know whether it landed.
    Error,
}

impl Faulty {
    pub fn new(inner: MemoryStore, rng: Arc<Mutex<StdRng>>, rates: Rates, mutation: Mutation) -> Self {
        Self {
            inner,
            rng,
            rates,
            on: AtomicBool::new(true),
            mutation,
            completed: Mutex::default(),
            injected: Mutex::new(0),
            unleased: Mutex::default(),
            settles: Mutex::default(),
            judged: Mutex::new(0),
            crashes: Default::default(),
        }
    }

    /// The database crashes: every write not yet synced is lost, and the calls waiting for their sync fail.
    pub fn crash(&self) {
        self.crashes.fetch_add(1, Ordering::SeqCst);
        self.inner.crash();
    }

    fn draw(&self, per_mille: u32) -> bool {
        self.on.load(Ordering::SeqCst) && self.rng.lock().unwrap().random_range(0..1000) < per_mille
    }

    fn fault(&self, what: &str) -> StoreError {
        *self.injected.lock().unwrap() += 1;
        StoreError::Unavailable(format!("simulated: {what}"))
    }

    /// Before a call: maybe a delay, maybe an error with nothing done.
    async fn before(&self) -> Result<(), StoreError> {
        if self.draw(self.rates.slow) {
            let ms = self.rng.lock().unwrap().random_range(1..400);
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if self.draw(self.rates.stall) {
            *self.injected.lock().unwrap() += 1;
            let ms = self.rng.lock().unwrap().random_range(8_000..15_000);
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if self.draw(self.rates.error_before) {
            return Err(self.fault("refused before the write"));
        }
        Ok(())
    }

    /// After a write: synced (maybe after a pause a crash can fall into), then maybe answered with an error
    /// although it was done.
    async fn after<T>(&self, done: Result<T, StoreError>, sync: bool) -> Result<T, StoreError> {
        let epoch = self.crashes.load(Ordering::SeqCst);
        if self.draw(self.rates.pause_before_sync) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if sync && self.crashes.load(Ordering::SeqCst) != epoch {
            return Err(StoreError::Unavailable(
                "simulated: the database crashed before the write was synced".into(),
            ));
        }
        if sync {
            self.inner.sync();
        }
        // Landed, and answered late (a commit whose answer is held up, a process paused right after it): a lease it
        // took has been running all the while.
        if self.draw(self.rates.stall) {
            *self.injected.lock().unwrap() += 1;
            let ms = self.rng.lock().unwrap().random_range(8_000..15_000);
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        let done = done?;
        if self.draw(self.rates.error_after) {
            return Err(self.fault("outcome unknown (written, the answer lost)"));
        }
        Ok(done)
    }

    fn sync_creates(&self) -> bool {
        self.mutation != Mutation::AnswerBeforeSync
    }
}

#[async_trait]
impl Ledger for Faulty {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn create(&self, event: NewEvent) -> Result<Created, StoreError> {
        self.before().await?;
        let done = self.inner.create(event).await;
        self.after(done, self.sync_creates()).await
    }
    async fn create_announced(&self, event: NewEvent) -> Result<Created, StoreError> {
        self.before().await?;
        let done = self.inner.create_announced(event).await;
        self.after(done, self.sync_creates()).await
    }
    async fn create_batch(&self, events: Vec<NewEvent>) -> Result<Vec<Created>, StoreError> {
        self.before().await?;
        let done = self.inner.create_batch(events).await;
        self.after(done, self.sync_creates()).await
    }
    async fn create_claimed(
        &self,
        event: NewEvent,
        owner: &str,
        lease: Duration,
    ) -> Result<(Created, Option<Event>), StoreError> {
        self.before().await?;
        let done = self.inner.create_claimed(event, owner, lease).await;
        self.after(done, self.sync_creates()).await
    }
    async fn peek(&self, key: &EventKey) -> Result<Option<Record>, StoreError> {
        self.before().await?;
        self.inner.peek(key).await
    }
    async fn claim(&self, key: &EventKey, owner: &str, lease: Duration) -> Result<Claim, StoreError> {
        self.before().await?;
        let done = self.inner.claim(key, owner, lease).await;
        self.after(done, true).await
    }
    async fn settle(
        &self,
        key: &EventKey,
        owner: &str,
        settlement: Settlement,
    ) -> Result<Settled, StoreError> {
        self.before().await?;
        let completing = matches!(settlement, Settlement::Completed { .. });
        // Who holds the lease as the settle lands (nothing runs between this read and the write: one thread, and the
        // reference store's calls never wait).
        let holder = self
            .inner
            .peek(key)
            .await?
            .filter(|r| r.status == Status::Processing)
            .and_then(|r| r.lease_owner);
        let done = self.inner.settle(key, owner, settlement).await;
        if matches!(done, Ok(Settled::Done)) && holder.as_deref() != Some(owner) {
            self.unleased.lock().unwrap().push(format!(
                "{}: the attempt {owner} settled while {} held the lease",
                key.event_id.as_str(),
                holder.as_deref().unwrap_or("no attempt")
            ));
        }
        // A completion counts once it is durable and answered: a crash before its sync loses it, and the event
        // rightly runs again.
        let answered = self.after(done, true).await;
        self.settles
            .lock()
            .unwrap()
            .entry(owner.to_owned())
            .or_default()
            .push(match &answered {
                Ok(Settled::Done) => Answered::Done,
                Ok(Settled::LeaseLost) => Answered::LeaseLost,
                Err(_) => Answered::Error,
            });
        if completing && matches!(answered, Ok(Settled::Done)) {
            self.completed
                .lock()
                .unwrap()
                .push((key.event_id.as_str().to_owned(), owner.to_owned()));
        }
        answered
    }
    async fn completed(&self, key: &EventKey, owner: &str) -> Result<(), StoreError> {
        self.inner.completed(key, owner).await
    }
    async fn release(&self, key: &EventKey, owner: &str) -> Result<Settled, StoreError> {
        self.before().await?;
        let done = self.inner.release(key, owner).await;
        self.after(done, true).await
    }
    async fn mark_dead(&self, key: &EventKey, reason: &str) -> Result<MarkDead, StoreError> {
        self.before().await?;
        let done = self.inner.mark_dead(key, reason).await;
        self.after(done, true).await
    }
    async fn mark_notified(&self, key: &EventKey) -> Result<(), StoreError> {
        self.before().await?;
        let done = self.inner.mark_notified(key).await;
        self.after(done, true).await
    }
    async fn replay(&self, key: &EventKey, force: bool) -> Result<Replay, StoreError> {
        self.before().await?;
        let done = self.inner.replay(key, force).await;
        self.after(done, true).await
    }
    async fn get(&self, key: &EventKey) -> Result<Option<Event>, StoreError> {
        self.before().await?;
        self.inner.get(key).await
    }
    fn check(&self) -> Result<(), StoreError> {
        self.inner.check()
    }
}

#[async_trait]
impl SweepIndex for Faulty {
    async fn due(&self, ahead: Duration, limit: usize) -> Result<Vec<Record>, StoreError> {
        self.before().await?;
        self.inner.due(ahead, limit).await
    }
    async fn sent_again(&self, key: &EventKey, status: Status, updated_at: i64) -> Result<(), StoreError> {
        self.before().await?;
        let done = self.inner.sent_again(key, status, updated_at).await;
        self.after(done, true).await
    }
    async fn defer_alarm(&self, key: &EventKey, until: i64) -> Result<(), StoreError> {
        self.before().await?;
        let done = self.inner.defer_alarm(key, until).await;
        self.after(done, true).await
    }
}

#[async_trait]
impl Checkpoints for Faulty {
    async fn present(&self, source: &SourceName, ids: &[EventId]) -> Result<HashSet<EventId>, StoreError> {
        self.before().await?;
        self.inner.present(source, ids).await
    }
    async fn checkpoint(&self, source: &SourceName) -> Result<Option<Checkpoint>, StoreError> {
        self.before().await?;
        self.inner.checkpoint(source).await
    }
    async fn save_checkpoint(&self, source: &SourceName, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        self.before().await?;
        let done = self.inner.save_checkpoint(source, checkpoint).await;
        self.after(done, true).await
    }
}

/// Listings go to the reference store unfaulted: the simulation's processes read none.
#[async_trait]
impl Browse for Faulty {
    async fn list(&self, filter: &ListFilter) -> Result<Vec<Record>, StoreError> {
        self.inner.list(filter).await
    }
    async fn summary(&self) -> Result<Summary, StoreError> {
        self.inner.summary().await
    }
    fn lists_by_scan(&self, filter: &ListFilter) -> bool {
        self.inner.lists_by_scan(filter)
    }
}

/// Upkeep under the same faults as the rest: a heartbeat, a lead, a purge may be slow, stall past a lease, fail
/// before or after it landed, as the production loops must survive.
#[async_trait]
impl Upkeep for Faulty {
    async fn gone_owners(&self, me: &str) -> Result<GoneOwners, StoreError> {
        self.before().await?;
        self.inner.gone_owners(me).await
    }
    fn liveness(&self) -> Option<Duration> {
        self.inner.liveness()
    }
    async fn heartbeat(&self, me: &str) -> Result<(), StoreError> {
        self.before().await?;
        let done = self.inner.heartbeat(me).await;
        self.after(done, true).await
    }
    async fn lead(&self, role: &str, me: &str, hold: Duration) -> Result<Option<u64>, StoreError> {
        self.before().await?;
        let done = self.inner.lead(role, me, hold).await;
        self.after(done, true).await
    }
    async fn end_leases(&self, gone: &GoneOwners) -> Result<usize, StoreError> {
        self.before().await?;
        let done = self.inner.end_leases(gone).await;
        if let (GoneOwners::These(_), Ok(ended)) = (gone, &done) {
            *self.judged.lock().unwrap() += *ended as u64;
        }
        self.after(done, true).await
    }
    async fn give_back(&self, owner: &str) -> Result<usize, StoreError> {
        self.before().await?;
        let done = self.inner.give_back(owner).await;
        self.after(done, true).await
    }
    async fn purge(&self, limit: usize) -> Result<Purged, StoreError> {
        self.before().await?;
        let done = self.inner.purge(limit).await;
        self.after(done, true).await
    }
    async fn changed_elsewhere(&self) -> Result<bool, StoreError> {
        self.inner.changed_elsewhere().await
    }
    async fn finish_bodies(&self, limit: usize) -> Result<usize, StoreError> {
        self.inner.finish_bodies(limit).await
    }
    async fn failure(&self) -> String {
        self.inner.failure().await
    }
}

/// The in-process queue under faults, each drawn from the seed: a message lost (the enqueue answered, nothing
/// delivered: the sweeper must find the event), delivered twice, or refused.
pub struct FaultyQueue {
    pub inner: Arc<InProcessQueue>,
    rng: Arc<Mutex<StdRng>>,
    on: Arc<AtomicBool>,
    /// Messages lost, doubled or refused, for the figures (shared by every incarnation's queue).
    pub injected: Arc<Mutex<u64>>,
}

impl FaultyQueue {
    pub fn new(
        inner: Arc<InProcessQueue>,
        rng: Arc<Mutex<StdRng>>,
        on: Arc<AtomicBool>,
        injected: Arc<Mutex<u64>>,
    ) -> Self {
        Self {
            inner,
            rng,
            on,
            injected,
        }
    }
}

#[async_trait]
impl Queue for FaultyQueue {
    async fn enqueue(&self, key: &EventKey, delay: Duration) -> Result<(), QueueError> {
        let roll = if self.on.load(Ordering::SeqCst) {
            self.rng.lock().unwrap().random_range(0..1000)
        } else {
            1000
        };
        match roll {
            0..=19 => {
                *self.injected.lock().unwrap() += 1;
                Ok(())
            }
            20..=39 => {
                *self.injected.lock().unwrap() += 1;
                self.inner.enqueue(key, delay).await?;
                self.inner.enqueue(key, delay).await
            }
            40..=54 => {
                *self.injected.lock().unwrap() += 1;
                Err(QueueError("simulated: the queue refused the message".into()))
            }
            _ => self.inner.enqueue(key, delay).await,
        }
    }
    async fn announce(&self, key: &EventKey, until: i64) -> Result<(), QueueError> {
        self.inner.announce(key, until).await
    }
    async fn depth(&self) -> Result<Option<QueueDepth>, QueueError> {
        self.inner.depth().await
    }
}
