//! `inbox serve`: the receiver, the state machine's workers, the sweeper and the alarm in one process, over the
//! SQLite ledger and an in-process queue.

mod alarm;
mod queue;
pub mod sqlite;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinSet;

pub use alarm::NotifyUrl;
pub use queue::{Deliveries, InProcessQueue};

use crate::config::{Config, ConfigError};
use crate::delivery_health::{DeliveryHealth, Thresholds};
use crate::embedded::sqlite::{Options, SqliteLedger};
use crate::handlers::{http_client, Registry};
use crate::machine::{Machine, Outcome, SweepReport, LEASE_MARGIN};
use crate::metrics::Metrics;
use crate::model::{Event, EventKey};
use crate::ports::{Queue, Store, StoreError};
use crate::receiver::{router, InflightBytes, Intake, Receiver, Reserved, Runner};
use crate::reconcile::{reconcilers, Reconciler, RunOptions};
use crate::secrets::LocalSecrets;
use crate::source::Sources;
use crate::time::now_ms;

/// Pointers waiting in memory; past it the backlog waits in the ledger and the workers refill from there.
const QUEUE_CAPACITY: usize = 20_000;
/// Events a refill takes from the ledger at most.
const REFILL: usize = QUEUE_CAPACITY / 2;
/// How long in-flight handlers get to finish at shutdown before their leases are given back.
const DRAIN: Duration = Duration::from_secs(20);
/// How soon after start the first reconciliation runs at the earliest: after the start-up sweep's work is handed
/// out.
const FIRST_RECONCILE_AFTER: Duration = Duration::from_secs(2);
/// Expired events (and remembered bodies) one purge transaction deletes at most.
const PURGE_BATCH: usize = 1_000;
/// How often the server looks for changes made by another process (`inbox replay`).
const WATCH_EVERY: Duration = Duration::from_secs(1);
/// How long requests in flight get to be answered 503 once the store failed a sync, before the process stops.
const FAILED_DRAIN: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Io(String),
}

/// Runs until `shutdown` resolves, then stops accepting, lets in-flight handlers finish (or gives their leases
/// back) and returns. `on_listen` is told the bound address (the port may have been 0).
pub async fn serve(
    config: Config,
    handlers: Registry,
    on_listen: impl FnOnce(std::net::SocketAddr),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let data_dir = &config.server.data_dir;
    std::fs::create_dir_all(data_dir)
        .map_err(|e| ServeError::Io(format!("cannot create {}: {e}", data_dir.display())))?;
    // One server per data directory: the lock also proves that leases of earlier processes are dead.
    let lock_path = data_dir.join("serve.lock");
    let lock = std::fs::File::create(&lock_path)
        .map_err(|e| ServeError::Io(format!("cannot open {}: {e}", lock_path.display())))?;
    lock.try_lock().map_err(|_| {
        ServeError::Io(format!(
            "another `inbox serve` is using {}; stop it first",
            data_dir.display()
        ))
    })?;

    let sources = Sources::build(&config, Some(&LocalSecrets), &handlers).await?;
    let reconcilers = reconcilers(&config, &LocalSecrets).await?;
    let mut options = Options::new(config.server.max_pending_writes, config.sweeper.grace);
    // This process answers senders: what it reads of the log must be what the disk holds.
    options.rewrite_log = true;
    let ledger = SqliteLedger::open_with(data_dir, options)?;
    let shared: Arc<dyn Store> = Arc::new(ledger.clone());
    let metrics = Arc::new(Metrics::new(sources.names()));
    let alarm = Arc::new(NotifyUrl::new(http_client(), config.alarm.notify_url.clone()));
    let health = Arc::new(DeliveryHealth::new(
        sources.names(),
        Thresholds::default(),
        alarm.clone(),
    ));
    let owner = format!("embedded:{}:{}", std::process::id(), now_ms());
    // Alarms go out on a task of their own: a slow notify URL holds up neither start-up nor the workers.
    let machine = Arc::new(
        Machine::new(
            shared.clone(),
            sources.clone(),
            metrics.clone(),
            alarm,
            config.retention,
            owner.clone(),
        )
        .with_background_alarms(),
    );
    let (queue, deliveries) = InProcessQueue::new(QUEUE_CAPACITY);

    // The restart scan: whatever an earlier process left open is handed out again now.
    let expired = ledger.expire_leases(&owner, false).await?;
    // The earlier process's in-memory queue died with it, so nothing open can be waiting for its message: the
    // same take from the ledger as a refill.
    let found = refill(&machine, &queue, config.sweeper.grace).await?;
    tracing::info!(
        expired_leases = expired,
        requeued = found.enqueued(),
        "start-up sweep done"
    );

    let (stop_tx, stop_rx) = watch::channel(false);
    let (pool, claimed) = Pool::new(machine.clone(), config.server.workers);
    let workers = tokio::spawn(run_workers(
        machine.clone(),
        queue.clone(),
        deliveries,
        pool.clone(),
        claimed,
        config.sweeper.grace,
        stop_rx.clone(),
    ));
    let sweeper = tokio::spawn(run_sweeper(
        machine.clone(),
        ledger.clone(),
        queue.clone(),
        config.sweeper.interval,
        stop_rx.clone(),
    ));
    // Reconciliation: a task per source with a `reconcile` block, on its interval, beside receiving.
    let mut reconciling = JoinSet::new();
    for reconciler in reconcilers {
        let slot = sources
            .get(reconciler.source().as_str())
            .map_or(Metrics::UNKNOWN, |s| s.index);
        reconciling.spawn(run_reconciler(
            reconciler,
            shared.clone(),
            queue.clone(),
            metrics.clone(),
            slot,
            stop_rx.clone(),
        ));
    }

    let receiver = Arc::new(Receiver {
        sources,
        ledger: shared,
        queue: queue.clone(),
        metrics,
        read_timeout: config.server.read_timeout,
        inflight: InflightBytes::new(config.server.max_inflight_bytes),
        health,
        rejections: Default::default(),
        resend_grace: config.sweeper.grace,
        // The ledger is its own queue: nothing is sent ahead of a create.
        intake: Intake::WriteThenEnqueue,
        keys: crate::keys::from_env()?,
        // A new event runs at once in a free worker, claimed in its create's own write.
        runner: Some(pool),
    });
    let listener = TcpListener::bind(config.server.listen)
        .await
        .map_err(|e| ServeError::Io(format!("cannot listen on {}: {e}", config.server.listen)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| ServeError::Io(format!("no local address: {e}")))?;
    tracing::info!(%addr, data_dir = %data_dir.display(), "inbox serve is listening");
    on_listen(addr);
    // A failed sync of the store ends the process, as a shutdown would but without waiting for handlers: nothing
    // it writes can be answered as durable any more, and a restart recovers from what the disk holds.
    let failing = ledger.clone();
    let stopping = async move {
        tokio::select! {
            () = shutdown => {}
            _ = failing.failure() => {}
        }
    };
    let serving = axum::serve(listener, router(receiver, true)).with_graceful_shutdown(stopping);
    let failed = async {
        let cause = ledger.failure().await;
        // The requests in flight are answered 503 (every write is refused); a client still sending its body is
        // not waited for past this.
        tokio::time::sleep(FAILED_DRAIN).await;
        cause
    };
    tokio::select! {
        served = serving => served.map_err(|e| ServeError::Io(format!("server: {e}")))?,
        _ = failed => {}
    }
    if let Some(cause) = ledger.failed() {
        let _ = stop_tx.send(true);
        reconciling.abort_all();
        return Err(ServeError::Store(StoreError::Unavailable(format!(
            "stopped: {cause}; restart to recover from what the disk holds"
        ))));
    }

    tracing::info!("shutting down: no new requests; finishing in-flight handlers");
    let _ = stop_tx.send(true);
    let _ = sweeper.await;
    // A run cut short leaves its checkpoint where it was: the next one lists that window again.
    reconciling.abort_all();
    let _ = workers.await;
    let released = ledger.expire_leases(&owner, true).await?;
    if released > 0 {
        tracing::warn!(
            released,
            "handlers still running at shutdown: their leases were given back"
        );
    }
    drop(lock);
    Ok(())
}

/// The worker slots of `inbox serve`, shared by the two ways an event reaches a handler: a new event that finds a
/// worker free is created claimed by it and handed over here by the receiver ([`Runner`]); every other one (a
/// backlog, a retry, the sweeper's) comes through the queue and is claimed by the worker that takes it.
pub(crate) struct Pool {
    machine: Arc<Machine>,
    slots: Arc<Semaphore>,
    claimed: mpsc::UnboundedSender<(Reserved, Event)>,
}

impl Pool {
    fn new(machine: Arc<Machine>, workers: usize) -> (Arc<Self>, mpsc::UnboundedReceiver<(Reserved, Event)>) {
        let (claimed, rx) = mpsc::unbounded_channel();
        let pool = Self {
            machine,
            slots: Arc::new(Semaphore::new(workers)),
            claimed,
        };
        (Arc::new(pool), rx)
    }
}

impl Runner for Pool {
    /// Only while a slot is free now: with every handler busy, a new event waits in the queue, not under a lease.
    fn reserve(&self, key: &EventKey) -> Option<Reserved> {
        (self.slots.available_permits() > 0).then(|| Reserved {
            owner: self.machine.lease_owner(),
            lease: self.machine.lease_for(key),
        })
    }

    /// Hands the event to the workers' loop, which runs it in the next free slot. Once the loop has stopped (the
    /// server is shutting down), the event stays PROCESSING under this process's lease, given back at shutdown.
    fn run(&self, reserved: Reserved, event: Event) {
        let _ = self.claimed.send((reserved, event));
    }
}

/// Runs events in the pool's slots, at most `workers` handlers at a time: those the receiver created claimed (each
/// as soon as a slot is free), and pointers taken off the queue, each claimed first. When the queue is empty and events
/// were left in the ledger for lack of room, takes the oldest due ones from there (as the start-up sweep does), so
/// a backlog longer than the queue is worked through at full speed.
async fn run_workers(
    machine: Arc<Machine>,
    queue: Arc<InProcessQueue>,
    mut deliveries: Deliveries,
    pool: Arc<Pool>,
    mut claimed: mpsc::UnboundedReceiver<(Reserved, Event)>,
    grace: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut running = JoinSet::new();
    // An event created claimed waits for a slot at most the lease's margin, so that its handler still has its whole
    // timeout; past it the lease is given back and the event goes through the queue like any other (its next claim
    // counts a second attempt, as after any lease that ended without a settle).
    let run_claimed = |running: &mut JoinSet<()>, (reserved, event): (Reserved, Event)| {
        let (machine, queue, slots) = (machine.clone(), queue.clone(), pool.slots.clone());
        running.spawn(async move {
            let key = event.key();
            let Reserved { owner, lease } = reserved;
            let waited = std::time::Instant::now();
            let Ok(Ok(slot)) = tokio::time::timeout(LEASE_MARGIN, slots.acquire_owned()).await else {
                if let Err(e) = machine.ledger().release(&key, &owner).await {
                    tracing::warn!(source = %key.source, event_id = %key.event_id, error = %e,
                        "the lease of an event no worker took was not given back; it ends on its own");
                }
                again(&queue, &key, Ok(Outcome::Retry(Duration::ZERO))).await;
                return;
            };
            let lease = lease.saturating_sub(waited.elapsed());
            let outcome = machine
                .run_claimed(event, &owner, lease, move || drop(slot))
                .await;
            again(&queue, &key, outcome).await;
        });
        // A finished task's memory is held until it is joined: join every one that has finished.
        while running.try_join_next().is_some() {}
    };
    'work: loop {
        let permit = tokio::select! {
            biased;
            _ = stop.changed() => break,
            Some(c) = claimed.recv() => {
                run_claimed(&mut running, c);
                continue;
            }
            p = pool.slots.clone().acquire_owned() => p,
        };
        let Ok(permit) = permit else { break };
        let key = match deliveries.try_next() {
            Some(key) => Some(key),
            None => {
                if queue.take_overflow() {
                    if let Err(e) = refill(&machine, &queue, grace).await {
                        tracing::warn!(error = %e, "refill from the ledger failed; the sweeper will pick the backlog up");
                    }
                }
                loop {
                    tokio::select! {
                        biased;
                        _ = stop.changed() => break 'work,
                        Some(c) = claimed.recv() => run_claimed(&mut running, c),
                        k = deliveries.next() => break k,
                    }
                }
            }
        };
        let Some(key) = key else { break };
        let (machine, queue) = (machine.clone(), queue.clone());
        running.spawn(async move {
            let lease = machine.lease_for(&key);
            // The slot is free again as soon as the handler returns (or if none runs): the settle's commit
            // need not hold it.
            let outcome = machine.process_then(&key, lease, move || drop(permit)).await;
            again(&queue, &key, outcome).await;
        });
        while running.try_join_next().is_some() {}
    }
    // Events created claimed before the receiver stopped still run (or are given back with this process's leases).
    while let Ok(c) = claimed.try_recv() {
        run_claimed(&mut running, c);
    }
    let drained = tokio::time::timeout(DRAIN, async { while running.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        running.abort_all();
    }
}

/// Sends an event back to the queue where its outcome asks for another try later.
async fn again(queue: &InProcessQueue, key: &EventKey, outcome: Result<Outcome, StoreError>) {
    let delay = match outcome {
        Ok(Outcome::Retry(delay) | Outcome::NotDue(delay)) => delay,
        Ok(_) => return,
        Err(e) => {
            tracing::warn!(source = %key.source, event_id = %key.event_id, error = %e,
                "store error while processing; trying again shortly");
            Duration::from_secs(1)
        }
    };
    if let Err(e) = queue.enqueue(key, delay).await {
        tracing::warn!(error = %e, "not re-queued; the sweeper will pick it up");
    }
}

/// Enqueues everything due, oldest first (RECEIVED ones whatever their age), up to [`REFILL`]; marks the queue
/// overflowed again if there may be more, or if the ledger could not be read.
async fn refill(
    machine: &Machine,
    queue: &Arc<InProcessQueue>,
    grace: Duration,
) -> Result<SweepReport, StoreError> {
    let everything = now_ms().saturating_add(crate::time::ms(grace)).saturating_add(1);
    let found = machine.sweep_due_before(queue.as_ref(), everything, REFILL).await;
    if found.as_ref().map_or(true, |f| f.enqueued() >= REFILL) {
        queue.mark_overflow();
    }
    found
}

/// One source's reconciliation on its interval: the first run once the last recorded one is an interval old (at
/// once on a fresh store, a moment after start), then every interval. A failed run is logged and counted, and the
/// next one starts over from the checkpoint; receiving never waits for it.
async fn run_reconciler(
    reconciler: Reconciler,
    ledger: Arc<dyn Store>,
    queue: Arc<InProcessQueue>,
    metrics: Arc<Metrics>,
    slot: usize,
    mut stop: watch::Receiver<bool>,
) {
    let interval = reconciler.interval();
    let last = match ledger.checkpoint(reconciler.source()).await {
        Ok(cp) => cp.and_then(|c| c.last_run).map(|r| r.finished_at),
        Err(e) => {
            tracing::warn!(source = %reconciler.source(), error = %e, "cannot read the reconciliation checkpoint");
            None
        }
    };
    let since_last = last.map_or(Duration::MAX, |t| {
        Duration::from_millis(u64::try_from(now_ms().saturating_sub(t)).unwrap_or(0))
    });
    let mut wait = interval.saturating_sub(since_last).max(FIRST_RECONCILE_AFTER);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
        let run = reconciler
            .run(
                ledger.as_ref(),
                queue.as_ref(),
                RunOptions::default(),
                &mut |_| {},
            )
            .await;
        let recovered = match run {
            Ok(summary) => summary.recovered,
            Err(e) => {
                tracing::error!(error = %e, "reconciliation run failed; the next one starts over");
                e.summary.recovered
            }
        };
        metrics.reconciled(slot, recovered);
        wait = interval;
    }
}

/// The sweeper on its interval, plus a quick look whenever another process changed the ledger.
async fn run_sweeper(
    machine: Arc<Machine>,
    ledger: SqliteLedger,
    queue: Arc<InProcessQueue>,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut full = tokio::time::interval(interval);
    let mut watch = tokio::time::interval(WATCH_EVERY);
    full.tick().await; // the start-up sweep has just run
    loop {
        let sweep = tokio::select! {
            _ = full.tick() => {
                purge(&ledger, &stop).await;
                true
            }
            _ = watch.tick() => ledger.changed_elsewhere().await.unwrap_or(false),
            _ = stop.changed() => return,
        };
        if sweep {
            if let Err(e) = machine.sweep(queue.as_ref() as &dyn Queue, 10_000).await {
                tracing::warn!(error = %e, "sweep failed");
            }
        }
    }
}

/// Deletes what is past retention a batch (one transaction) at a time until none is left: however many expired
/// since the last sweep, all of them go, not a fixed number a sweep. Other writes run between two batches, and a
/// stop ends it there.
async fn purge(ledger: &SqliteLedger, stop: &watch::Receiver<bool>) {
    let mut events = 0;
    loop {
        match ledger.purge(PURGE_BATCH).await {
            Ok(purged) => {
                events += purged.events;
                if !purged.full(PURGE_BATCH) || *stop.borrow() {
                    break;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "purge failed; the next sweep tries again");
                break;
            }
        }
    }
    if events > 0 {
        tracing::info!(purged = events, "completed events past retention deleted");
    }
}
