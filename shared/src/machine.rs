//! The state machine of docs/DESIGN.md "States and transitions": claim with a lease, run the handler, settle conditionally on the
//! lease; backoff with full jitter, the retry budget, dead letters and their alarm, and the sweeper's restart scan.
//! Both runtimes drive events through this one piece; only how a message comes back differs.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{mpsc, Semaphore};

use crate::clock::{Random, World};
use crate::config::RetryPolicy;
use crate::fence::Fence;
use crate::handlers::HandlerError;
use crate::metrics::Metrics;
use crate::model::{Event, EventKey, Record, Status};
use crate::ports::{Claim, Ledger, MarkDead, Queue, Settled, Settlement, StoreError, SweepIndex};
use crate::rules::bounded_error;
use crate::source::Sources;
use crate::sync::lock;
use crate::time::{ms, rfc3339};

/// Time kept back from a lease so that the settle lands before the lease ends.
pub const LEASE_MARGIN: Duration = Duration::from_secs(2);
/// How long one sweep sends at most: a pass is bounded in time, whatever the backlog.
pub const SWEEP_PASS: Duration = Duration::from_secs(10);

/// Tells an operator about a dead event. Called once per event that dies (again after a crash between the death
/// and the notice: at least once).
#[async_trait]
pub trait Notifier: Send + Sync + 'static {
    async fn dead(&self, event: &Record) -> Result<(), NotifyError>;
}

/// Why a notice did not go out: where it was to go and what answered (never the event's payload). The notice is
/// offered again later, after its own backoff.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotifyError(pub String);

/// The summary an alarm carries for a dead event: what an operator needs to act, never the payload.
pub fn dead_summary(event: &Record) -> serde_json::Value {
    serde_json::json!({
        "alarm": "event_dead",
        "source": event.source,
        "event_id": event.event_id,
        "event_type": event.event_type,
        "status": event.status,
        "attempts": event.attempts,
        "last_error": event.last_error,
        "received_at": rfc3339(event.received_at),
        "dead_at": rfc3339(event.updated_at),
    })
}

/// What became of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Completed,
    /// Failed retryably: deliver the message again after this delay.
    Retry(Duration),
    Dead,
    /// FAILED and not due yet: deliver the message again after this delay, without running anything.
    NotDue(Duration),
    /// Nothing to run (done, owned by another worker, missing) or the lease was lost: drop the message.
    Dropped(Dropped),
    /// This owner's fence is up (its heartbeat could not be renewed): nothing was claimed, or the handler was
    /// cancelled and its lease given back once the store answered again. Deliver the message again once the fence
    /// is down.
    Fenced,
}

/// Why a message is dropped without running anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Dropped {
    #[error("no handler is built in this process")]
    NoHandler,
    #[error("already done")]
    Done,
    #[error("owned by another worker")]
    OwnedElsewhere,
    /// No record (or one past retention): on AWS a message sent ahead of its record's create is kept instead while
    /// that create may still land.
    #[error("no such event")]
    Missing,
    #[error("lease lost")]
    LeaseLost,
}

/// What one sweep found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepReport {
    pub received: usize,
    pub expired_leases: usize,
    pub overdue_failed: usize,
    pub alarms: usize,
    pub enqueue_errors: usize,
}

impl SweepReport {
    pub fn enqueued(&self) -> usize {
        self.received + self.expired_leases + self.overdue_failed
    }
}

pub struct Machine {
    ledger: Arc<dyn Ledger>,
    /// The sweeper's index, for the restart scan and the alarms' bookkeeping.
    index: Arc<dyn SweepIndex>,
    /// The clock and randomness of its decisions: the due times it reads, the budget's age, backoff jitter, lease
    /// tokens.
    world: World,
    sources: Sources,
    metrics: Arc<Metrics>,
    alarm: Arc<dyn Notifier>,
    /// Where alarms go when they are sent beside the work ([`Machine::with_background_alarms`]).
    background: Option<AlarmQueue>,
    retention: Duration,
    /// This worker's name in lease owners (`embedded:{pid}`, a Lambda's request id…).
    owner: String,
    /// Whether this owner may claim and run now ([`crate::fence`]): never raised unless the runtime keeps a
    /// heartbeat.
    fence: Fence,
}

/// How a failed alarm is tried again: its own backoff, so a dead notify URL neither spins nor starves the rest.
const ALARM_RETRY: RetryPolicy = RetryPolicy {
    base: Duration::from_secs(10),
    cap: Duration::from_secs(15 * 60),
    max_attempts: u32::MAX,
    max_age: Duration::MAX,
};
/// Alarms waiting for the sender at most; past it the sweeper offers them again later.
const ALARM_QUEUE: usize = 1024;
/// Alarms in flight at once.
const ALARMS_AT_ONCE: usize = 8;

/// The hand-off to the alarm task: dead events waiting to be announced, and which are in hand already.
struct AlarmQueue {
    tx: mpsc::Sender<Record>,
    pending: Arc<Mutex<HashSet<EventKey>>>,
}

/// `min(cap, base·2^(attempt-1))`: the longest wait after `attempt` failed attempts.
pub fn longest_backoff(policy: &RetryPolicy, attempt: u32) -> Duration {
    policy
        .base
        .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1).min(31)))
        .min(policy.cap)
}

/// `random(0, min(cap, base·2^(attempt-1)))`: full jitter, so that a burst of failures does not retry in step.
pub fn backoff(policy: &RetryPolicy, attempt: u32, random: &dyn Random) -> Duration {
    let top = u64::try_from(longest_backoff(policy, attempt).as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(random.up_to(top))
}

/// Whether an event that has had `attempts` attempts may have another. `since` is where its age budget counts
/// from: its receipt, or its last replay ([`Event::budget_start`]).
pub fn budget_spent(policy: &RetryPolicy, attempts: u32, since: i64, now: i64) -> bool {
    attempts >= policy.max_attempts || now.saturating_sub(since) >= ms(policy.max_age)
}

impl Machine {
    /// A machine over the store's `ledger` and sweep `index` (one store, seen through the two ports it uses), on the
    /// system's clock and randomness ([`Machine::with_world`] for another's).
    pub fn new(
        ledger: Arc<dyn Ledger>,
        index: Arc<dyn SweepIndex>,
        sources: Sources,
        metrics: Arc<Metrics>,
        alarm: Arc<dyn Notifier>,
        retention: Duration,
        owner: impl Into<String>,
    ) -> Self {
        Self {
            ledger,
            index,
            world: World::system(),
            sources,
            metrics,
            alarm,
            background: None,
            retention,
            owner: owner.into(),
            fence: Fence::never(),
        }
    }

    /// Obeys `fence`: while it is up, claims nothing and cancels the handlers running when it went up.
    pub fn with_fence(mut self, fence: Fence) -> Self {
        self.fence = fence;
        self
    }

    /// The fence this machine obeys.
    pub fn fence(&self) -> &Fence {
        &self.fence
    }

    /// Decides on `world`'s clock and randomness. Set before [`Machine::with_background_alarms`], whose task takes
    /// the world it is given.
    pub fn with_world(mut self, world: World) -> Self {
        self.world = world;
        self
    }

    /// Sends alarms on a task of their own, beside the work: a slow or dead alarm endpoint then never holds up
    /// start-up, a sweep or a worker. A sent alarm is recorded; a failed one waits its own backoff in the ledger.
    /// Needs a Tokio runtime; the task ends when the machine is dropped.
    pub fn with_background_alarms(mut self) -> Self {
        let (tx, rx) = mpsc::channel(ALARM_QUEUE);
        let pending = Arc::new(Mutex::new(HashSet::new()));
        tokio::spawn(send_alarms(
            rx,
            self.ledger.clone(),
            self.index.clone(),
            self.world.clone(),
            self.alarm.clone(),
            pending.clone(),
        ));
        self.background = Some(AlarmQueue { tx, pending });
        self
    }

    pub fn ledger(&self) -> &Arc<dyn Ledger> {
        &self.ledger
    }

    /// The clock and randomness its decisions use.
    pub fn world(&self) -> &World {
        &self.world
    }

    /// The lease a worker takes for an event of this source: its handler's timeout plus a margin.
    pub fn lease_for(&self, key: &EventKey) -> Duration {
        self.sources
            .get(key.source.as_str())
            .map_or(Duration::from_secs(30), |s| s.handler_timeout)
            + LEASE_MARGIN * 2
    }

    /// Claims, runs and settles one event. `lease` is how long this worker may still run.
    pub async fn process(&self, key: &EventKey, lease: Duration) -> Result<Outcome, StoreError> {
        self.process_then(key, lease, || {}).await
    }

    /// A fresh lease owner for one claim: this worker's name and a random part, so that two claims of one worker
    /// never take each other's lease.
    pub fn lease_owner(&self) -> String {
        format!("{}:{:016x}", self.owner, self.world.random.next_u64())
    }

    /// [`Machine::process`], calling `handler_done` once the handler has returned, before its outcome is
    /// written (or dropping it uncalled where no handler runs). `inbox serve` frees the handler's worker slot
    /// there, so the next handler starts while this event's settle waits for its commit.
    pub async fn process_then(
        &self,
        key: &EventKey,
        lease: Duration,
        handler_done: impl FnOnce() + Send,
    ) -> Result<Outcome, StoreError> {
        // Sources built without handlers (the receiver function's) claim nothing: the event stays for a worker.
        if let Some(source) = self.sources.get(key.source.as_str()) {
            if source.handler.is_none() {
                return Ok(Outcome::Dropped(Dropped::NoHandler));
            }
        }
        // A fenced owner takes no lease: another instance may be about to judge it gone.
        if self.fence.is_raised() {
            return Ok(Outcome::Fenced);
        }
        let token = self.lease_owner();
        // The store starts the lease no sooner than the claim is sent: what is left of it is the lease less the time
        // the claim took to be answered (a slow commit, a paused process), on this process's monotonic clock.
        let sent = tokio::time::Instant::now();
        let claim = self.ledger.claim(key, &token, lease).await?;
        let lease = lease.saturating_sub(sent.elapsed());
        let event = match claim {
            Claim::Claimed(event) => *event,
            Claim::Done(_) => return Ok(Outcome::Dropped(Dropped::Done)),
            Claim::OwnedElsewhere => return Ok(Outcome::Dropped(Dropped::OwnedElsewhere)),
            Claim::Missing => return Ok(Outcome::Dropped(Dropped::Missing)),
            Claim::NotDue(at) => {
                let wait = u64::try_from(at.saturating_sub(self.world.now_ms())).unwrap_or(0);
                return Ok(Outcome::NotDue(Duration::from_millis(wait)));
            }
            // Never run with an empty body: the record is corrupt, and an operator must look at it.
            Claim::Corrupt(record, why) => return self.settle_dead(*record, &token, why).await,
        };
        self.run_claimed(event, &token, lease, handler_done).await
    }

    /// Runs and settles `event`, claimed already under `token` for `lease`: by [`Machine::process_then`]'s claim,
    /// or in its create's own write ([`crate::ports::Ledger::create_claimed`], `inbox serve` with a worker free).
    pub async fn run_claimed(
        &self,
        event: Event,
        token: &str,
        lease: Duration,
        handler_done: impl FnOnce() + Send,
    ) -> Result<Outcome, StoreError> {
        crate::failpoint!("after_claim");
        let key = &event.key();
        let runnable = match self.sources.get(key.source.as_str()) {
            Some(source) => match &source.handler {
                Some(handler) => Some((source.clone(), handler.clone())),
                // Nothing runs here: the lease is given back at once, for a worker that has the handler.
                None => {
                    self.ledger.release(key, token).await?;
                    return Ok(Outcome::Dropped(Dropped::NoHandler));
                }
            },
            None => None,
        };
        let Some((source, handler)) = runnable else {
            let error = "the source is no longer configured".to_owned();
            return self.settle_dead(event.record, token, error).await;
        };
        // A claim that finds the budget spent (crashes or a sweep after max_age) ends it without running.
        if budget_spent(
            &source.retry,
            event.attempts.saturating_sub(1),
            event.budget_start(),
            self.world.now_ms(),
        ) {
            let error = format!(
                "retry budget spent after {} attempts: {}",
                event.attempts.saturating_sub(1),
                event
                    .last_error
                    .as_deref()
                    .unwrap_or("no error recorded (the worker crashed or timed out)")
            );
            return self.settle_dead(event.record, token, error).await;
        }

        let run_for = source.handler_timeout.min(lease.saturating_sub(LEASE_MARGIN));
        let started = tokio::time::Instant::now();
        // The fence cancels the handler where it stands (a request in flight is dropped mid-way: the destination may
        // have acted on it, and the next attempt repeats it, as after a crash; handlers are idempotent on the id).
        let run = tokio::select! {
            biased;
            () = self.fence.raised() => None,
            r = tokio::time::timeout(run_for, handler.handle(&event)) => Some(r),
        };
        let Some(run) = run else {
            handler_done();
            return Ok(self.fenced(&event, token).await);
        };
        let result = match run {
            // A handler's error text can be anything (a whole HTML page): bounded before it is logged or stored.
            Ok(r) => r.map_err(|e| match e {
                HandlerError::Retryable(m) => HandlerError::Retryable(bounded_error(&m)),
                HandlerError::Permanent(m) => HandlerError::Permanent(bounded_error(&m)),
            }),
            Err(_) => Err(HandlerError::Retryable(format!(
                "the handler did not finish within {} ms",
                run_for.as_millis()
            ))),
        };
        let took = started.elapsed();
        handler_done();
        crate::failpoint!("after_handler_before_settle");
        match result {
            Ok(()) => {
                if !handler.settles_on_success() {
                    let completed = Settlement::Completed {
                        retention: self.retention,
                    };
                    if self.ledger.settle(key, token, completed).await? == Settled::LeaseLost {
                        return Ok(self.lease_lost(&event));
                    }
                }
                crate::failpoint!("after_settle");
                // What the body kept apart is owed from the settle on is in the ledger already (on AWS, the
                // claim's `body#` entry), so a failure or a crash here leaves it to the sweeper, not forever.
                if let Err(e) = self.ledger.completed(key, token).await {
                    tracing::warn!(source = %key.source, event_id = %key.event_id, error = %e,
                        "the body kept apart did not start its retention yet; the sweeper will start it");
                }
                self.metrics.completed(
                    source.index,
                    took,
                    self.world.now_ms().saturating_sub(event.received_at),
                );
                tracing::debug!(source = %key.source, event_id = %key.event_id, "completed");
                Ok(Outcome::Completed)
            }
            Err(HandlerError::Permanent(error)) => {
                tracing::warn!(source = %key.source, event_id = %key.event_id, %error, "permanent failure");
                self.settle_dead(event.record, token, error).await
            }
            Err(HandlerError::Retryable(error)) => {
                if budget_spent(
                    &source.retry,
                    event.attempts,
                    event.budget_start(),
                    self.world.now_ms(),
                ) {
                    let error = format!("retry budget spent after {} attempts: {error}", event.attempts);
                    return self.settle_dead(event.record, token, error).await;
                }
                let delay = backoff(&source.retry, event.attempts, self.world.random.as_ref());
                tracing::info!(
                    source = %key.source, event_id = %key.event_id, attempt = event.attempts,
                    delay_ms = delay.as_millis() as u64, %error, "failed, will retry"
                );
                let settled = self
                    .ledger
                    .settle(key, token, Settlement::Failed { error, delay })
                    .await?;
                if settled == Settled::LeaseLost {
                    return Ok(self.lease_lost(&event));
                }
                self.metrics.retried(source.index, took);
                Ok(Outcome::Retry(delay))
            }
        }
    }

    /// A handler cancelled by the fence: its lease is given back once the fence is down (the store answers this
    /// owner again), unless another instance ended it meanwhile; the attempt counts, as a crash's does.
    async fn fenced(&self, event: &Record, token: &str) -> Outcome {
        tracing::warn!(
            source = %event.source, event_id = %event.event_id, attempt = event.attempts,
            "this instance could not renew its heartbeat: the handler was cancelled, to run again"
        );
        self.fence.lowered().await;
        match self.ledger.release(&event.key(), token).await {
            Ok(_) => {}
            Err(e) => tracing::warn!(source = %event.source, event_id = %event.event_id, error = %e,
                "the lease of a cancelled handler was not given back; it ends on its own"),
        }
        Outcome::Fenced
    }

    fn lease_lost(&self, event: &Record) -> Outcome {
        tracing::error!(
            source = %event.source, event_id = %event.event_id, attempt = event.attempts,
            "the handler ran but the lease was lost before the settle: another worker may run it again \
             (handlers must be idempotent on the event id)"
        );
        Outcome::Dropped(Dropped::LeaseLost)
    }

    async fn settle_dead(
        &self,
        mut event: Record,
        token: &str,
        error: String,
    ) -> Result<Outcome, StoreError> {
        // The budget's message wraps the last error: bounded again as a whole.
        let error = bounded_error(&error);
        let key = event.key();
        let settled = self
            .ledger
            .settle(&key, token, Settlement::Dead { error: error.clone() })
            .await?;
        if settled == Settled::LeaseLost {
            return Ok(self.lease_lost(&event));
        }
        event.status = Status::Dead;
        event.updated_at = self.world.now_ms();
        event.last_error = Some(error);
        event.lease_owner = None;
        event.lease_until = None;
        self.announce_dead(&event).await;
        Ok(Outcome::Dead)
    }

    /// Error log, metric and alarm for an event that just died; the alarm is marked sent once it went out.
    async fn announce_dead(&self, event: &Record) {
        let slot = self
            .sources
            .get(event.source.as_str())
            .map_or(Metrics::UNKNOWN, |s| s.index);
        self.metrics.dead(slot);
        tracing::error!(
            source = %event.source, event_id = %event.event_id, attempts = event.attempts,
            last_error = event.last_error.as_deref().unwrap_or(""), "event is DEAD"
        );
        self.notify(event).await;
    }

    /// Sends the alarm for a dead event, or hands it to the alarm task; true once sent or handed over.
    async fn notify(&self, event: &Record) -> bool {
        if let Some(queue) = &self.background {
            let key = event.key();
            let fresh = lock(&queue.pending).insert(key.clone());
            if !fresh {
                return true;
            }
            if queue.tx.try_send(event.clone()).is_err() {
                lock(&queue.pending).remove(&key);
                tracing::warn!(source = %key.source, event_id = %key.event_id,
                    "too many alarms waiting; the sweeper will offer this one again");
                return false;
            }
            return true;
        }
        match self.alarm.dead(event).await {
            Ok(()) => {
                if let Err(e) = self.ledger.mark_notified(&event.key()).await {
                    tracing::warn!(source = %event.source, event_id = %event.event_id, error = %e,
                        "alarm sent but not recorded; it may be sent again");
                }
                true
            }
            Err(e) => {
                tracing::warn!(source = %event.source, event_id = %event.event_id, error = %e,
                    "alarm not sent; the sweeper will try again");
                false
            }
        }
    }

    /// The dead-letter path (AWS: a message redriven into the DLQ): DEAD unless COMPLETED, one alarm per event.
    pub async fn mark_dead(&self, key: &EventKey, reason: &str) -> Result<MarkDead, StoreError> {
        let outcome = self.ledger.mark_dead(key, reason).await?;
        match &outcome {
            MarkDead::NewlyDead(event) => self.announce_dead(event).await,
            // Its alarm is still owed: the refused write returned the record, so nothing is read again.
            MarkDead::AlreadyDead(event) if event.notified_at.is_none() => {
                self.notify(event).await;
            }
            MarkDead::AlreadyDead(_) | MarkDead::Completed | MarkDead::Leased(_) | MarkDead::Missing => {}
        }
        Ok(outcome)
    }

    /// The restart scan: re-sends what lost its message (RECEIVED or FAILED past the grace, PROCESSING with an
    /// expired lease) and the alarms that did not go out. Budgets are enforced by the claim that follows.
    pub async fn sweep(&self, queue: &dyn Queue, limit: usize) -> Result<SweepReport, StoreError> {
        self.sweep_ahead(queue, Duration::ZERO, limit).await
    }

    /// The sweep, for everything due by `ahead` past the store's now (its clock set the due times): at start-up,
    /// when the process that held the in-memory queue is known dead, everything open is handed out at once (a
    /// FAILED event that is not due yet comes back `NotDue` and waits for its time). A pass sends for at most
    /// [`SWEEP_PASS`]; what it did not reach is still due at the next.
    pub async fn sweep_ahead(
        &self,
        queue: &dyn Queue,
        ahead: Duration,
        limit: usize,
    ) -> Result<SweepReport, StoreError> {
        let mut report = SweepReport::default();
        let until = tokio::time::Instant::now() + SWEEP_PASS;
        for event in self.index.due(ahead, limit).await? {
            if tokio::time::Instant::now() >= until {
                break;
            }
            let found = match event.status {
                Status::Received => &mut report.received,
                Status::Processing => &mut report.expired_leases,
                Status::Failed => &mut report.overdue_failed,
                Status::Dead => {
                    if self.notify(&event).await {
                        report.alarms += 1;
                    }
                    continue;
                }
                Status::Completed => continue,
            };
            *found += 1;
            let key = event.key();
            if let Err(e) = queue.enqueue(&key, Duration::ZERO).await {
                report.enqueue_errors += 1;
                tracing::warn!(source = %key.source, event_id = %key.event_id, error = %e, "sweeper could not enqueue");
                continue;
            }
            // Sent again: not due again at the next sweep, or a long backlog would be sent again every sweep.
            if let Err(e) = self.index.sent_again(&key, event.status, event.updated_at).await {
                tracing::warn!(source = %key.source, event_id = %key.event_id, error = %e,
                    "the re-send was not recorded; the next sweep may send the event again");
            }
        }
        if report != SweepReport::default() {
            tracing::info!(?report, "sweep");
        }
        Ok(report)
    }
}

/// The alarm task: sends each dead event's alarm, a few at a time, each with its own backoff on failure.
async fn send_alarms(
    mut rx: mpsc::Receiver<Record>,
    ledger: Arc<dyn Ledger>,
    index: Arc<dyn SweepIndex>,
    world: World,
    alarm: Arc<dyn Notifier>,
    pending: Arc<Mutex<HashSet<EventKey>>>,
) {
    let slots = Arc::new(Semaphore::new(ALARMS_AT_ONCE));
    let failures: Arc<Mutex<HashMap<EventKey, u32>>> = Arc::default();
    while let Some(event) = rx.recv().await {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let (ledger, index, world, alarm, pending, failures) = (
            ledger.clone(),
            index.clone(),
            world.clone(),
            alarm.clone(),
            pending.clone(),
            failures.clone(),
        );
        tokio::spawn(async move {
            let key = event.key();
            let recorded = match alarm.dead(&event).await {
                Ok(()) => {
                    lock(&failures).remove(&key);
                    ledger.mark_notified(&key).await
                }
                Err(e) => {
                    let n = {
                        let mut failures = lock(&failures);
                        let n = failures.entry(key.clone()).or_insert(0);
                        *n += 1;
                        *n
                    };
                    let wait = backoff(&ALARM_RETRY, n, world.random.as_ref()).max(ALARM_RETRY.base);
                    tracing::warn!(source = %key.source, event_id = %key.event_id, error = %bounded_error(&e.to_string()),
                        retry_in_ms = wait.as_millis() as u64, "alarm not sent; it will be tried again");
                    index
                        .defer_alarm(&key, world.now_ms().saturating_add(ms(wait)))
                        .await
                }
            };
            if let Err(e) = recorded {
                tracing::warn!(source = %key.source, event_id = %key.event_id, error = %e,
                    "the alarm's outcome was not recorded; it may be sent again");
            }
            lock(&pending).remove(&key);
            drop(slot);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_full_jitter_under_the_exponential_cap() {
        let p = RetryPolicy {
            base: Duration::from_millis(100),
            cap: Duration::from_secs(1),
            max_attempts: 5,
            max_age: Duration::from_secs(60),
        };
        for attempt in 1..=40 {
            let top = Duration::from_millis(100 * 2u64.pow((attempt - 1).min(20))).min(p.cap);
            for _ in 0..50 {
                assert!(
                    backoff(&p, attempt, &crate::clock::SystemRandom) <= top,
                    "attempt {attempt}"
                );
            }
        }
        // Full jitter spreads: 200 draws at attempt 4 (top 800 ms) are not all in one half.
        let draws: Vec<_> = (0..200)
            .map(|_| backoff(&p, 4, &crate::clock::SystemRandom))
            .collect();
        assert!(draws.iter().any(|d| *d < Duration::from_millis(400)));
        assert!(draws.iter().any(|d| *d > Duration::from_millis(400)));
    }

    #[test]
    fn budget_counts_attempts_and_age() {
        let p = RetryPolicy::default();
        assert!(!budget_spent(&p, 11, 0, 1000));
        assert!(budget_spent(&p, 12, 0, 1000));
        assert!(budget_spent(&p, 1, 0, 24 * 3600 * 1000));
    }
}
