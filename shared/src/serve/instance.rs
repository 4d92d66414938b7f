//! One `inbox serve` instance without its HTTP edge: the state machine's workers, the heartbeat and its fence (where
//! the store judges owners by heartbeats), the sweeper with retention, and the reconcilers, over one store and an
//! in-process queue, and the intake the receiver hands verified events to. [`super::run`] puts the HTTP server in
//! front of it; the simulation (`shared/tests/core/simulation/`) runs several of these over one store under its
//! clock and faults, the production loops themselves.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::liveness::{run_heartbeat, Judging, Pace};
use super::queue::InProcessQueue;
use super::upkeep::{run_reconciler, run_sweeper};
use super::workers::{refill, run_workers, Pool};
use super::DRAIN;
use crate::clock::World;
use crate::delivery_health::DeliveryHealth;
use crate::fence::Fence;
use crate::intake::{Intake, Order};
use crate::machine::{Machine, Notifier};
use crate::metrics::Metrics;
use crate::ports::{GoneOwners, Queue, Store, StoreError};
use crate::reconcile::Reconciler;
use crate::source::Sources;

/// What an instance runs over, built from the configuration ([`super::run`]) or by a simulation.
pub struct Parts {
    pub sources: Sources,
    pub store: Arc<dyn Store>,
    pub world: World,
    pub metrics: Arc<Metrics>,
    /// Where dead events' alarms go.
    pub alarm: Arc<dyn Notifier>,
    pub health: Arc<DeliveryHealth>,
    pub reconcilers: Vec<Reconciler>,
    pub settings: Settings,
    /// What the intake and the sweeper send through in front of the in-process queue (a simulation's faults);
    /// `None`: the queue itself.
    pub queue_layer: Option<QueueLayer>,
}

/// A layer in front of the in-process queue, made once from it.
pub type QueueLayer = Box<dyn FnOnce(Arc<InProcessQueue>) -> Arc<dyn Queue> + Send>;

/// The instance's settings from the configuration.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub workers: usize,
    /// The sweeper's grace: how long a RECEIVED event may wait for its message.
    pub grace: Duration,
    /// The sweeper's interval.
    pub sweep_every: Duration,
    pub retention: Duration,
    /// Pointers waiting in memory at most; past it the backlog waits in the store.
    pub queue_capacity: usize,
}

/// A running instance. [`Instance::stop`] ends it gracefully; dropping it ends every task it runs at once, as a crash
/// ends a process (what it had not written is lost; what it held is found by the others, or by its successor).
pub struct Instance {
    owner: String,
    intake: Intake,
    store: Arc<dyn Store>,
    fence: Fence,
    stop: watch::Sender<bool>,
    /// The workers (with the handlers they run) and the sweeper.
    loops: JoinSet<()>,
    /// The heartbeat, stopped last: handlers draining at a stop still run under it.
    beat: JoinSet<()>,
    beat_stop: watch::Sender<bool>,
    /// The reconcilers, cut short at a stop (a run cut short leaves its checkpoint where it was).
    reconciling: JoinSet<()>,
}

impl Instance {
    /// Starts an instance: its heartbeat first (where the store keeps them), then the restart scan (the leases of
    /// owners the store proves gone by a lock end now, and whatever is open is handed out again: an earlier
    /// process's in-memory queue died with it), then its loops.
    pub async fn start(parts: Parts) -> Result<Self, StoreError> {
        let Parts {
            sources,
            store,
            world,
            metrics,
            alarm,
            health,
            reconcilers,
            settings,
            queue_layer,
        } = parts;
        // This process's name in its leases: unique to it, so that its leases can be told from every other's (on a
        // shared store, every other machine's too).
        let owner = format!(
            "serve:{}:{}:{:08x}",
            std::process::id(),
            world.now_ms(),
            world.random.up_to(u64::from(u32::MAX))
        );
        let (stop, stop_rx) = watch::channel(false);
        let (beat_stop, beat_stop_rx) = watch::channel(false);
        let mut loops = JoinSet::new();
        let mut beat = JoinSet::new();
        let beat_sent = tokio::time::Instant::now();
        store.heartbeat(&owner).await?;
        // Where the store judges owners by heartbeats, this instance beats on a task of its own and obeys its fence.
        let (fence, judging) = match store.liveness() {
            Some(liveness) => {
                let (switch, fence) = Fence::new();
                let pace = Pace::of(liveness);
                let judging = Arc::new(Judging::default());
                beat.spawn(run_heartbeat(
                    store.clone(),
                    owner.clone(),
                    pace,
                    beat_sent,
                    switch,
                    judging.clone(),
                    beat_stop_rx,
                ));
                (fence, Some((pace, judging)))
            }
            None => (Fence::never(), None),
        };
        // Alarms go out on a task of their own: a slow notify URL holds up neither start-up nor the workers.
        let machine = Arc::new(
            Machine::new(
                store.clone(),
                store.clone(),
                sources.clone(),
                metrics.clone(),
                alarm,
                settings.retention,
                owner.clone(),
            )
            .with_world(world.clone())
            .with_fence(fence.clone())
            .with_background_alarms(),
        );
        let (queue, deliveries) = InProcessQueue::new(settings.queue_capacity);
        let sends: Arc<dyn Queue> = match queue_layer {
            Some(layer) => layer(queue.clone()),
            None => queue.clone(),
        };

        // Only a store that admits one process proves the others gone at start (its lock); where owners keep
        // heartbeats, this instance judges no one before its own have been renewed for a whole liveness period.
        let expired = match store.gone_owners(&owner).await? {
            gone @ GoneOwners::AllBut(_) => store.end_leases(&gone).await?,
            GoneOwners::None | GoneOwners::These(_) => 0,
        };
        let found = refill(&machine, &queue, sends.as_ref(), settings.grace).await?;
        tracing::info!(
            expired_leases = expired,
            requeued = found.enqueued(),
            "start-up sweep done"
        );

        let (pool, claimed) = Pool::new(machine.clone(), settings.workers);
        loops.spawn(run_workers(
            machine.clone(),
            queue.clone(),
            sends.clone(),
            deliveries,
            pool.clone(),
            claimed,
            settings.grace,
            stop_rx.clone(),
        ));
        loops.spawn(run_sweeper(
            machine.clone(),
            store.clone(),
            sends.clone(),
            owner.clone(),
            settings.sweep_every,
            judging,
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
                store.clone(),
                sends.clone(),
                metrics.clone(),
                slot,
                world.clone(),
                owner.clone(),
                stop_rx.clone(),
            ));
        }
        let intake = Intake {
            ledger: store.clone(),
            queue: sends,
            metrics,
            health,
            resend_grace: settings.grace,
            // The ledger is its own queue: nothing is sent ahead of a create.
            order: Order::WriteThenEnqueue,
            // A new event runs at once in a free worker, claimed in its create's own write.
            runner: Some(pool),
            world,
        };
        Ok(Self {
            owner,
            intake,
            store,
            fence,
            stop,
            loops,
            beat,
            beat_stop,
            reconciling,
        })
    }

    /// What the receiver hands verified events to.
    pub fn intake(&self) -> Intake {
        self.intake.clone()
    }

    /// This instance's name as an owner of leases.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Whether its fence is up now (its heartbeat could not be renewed).
    pub fn fenced(&self) -> bool {
        self.fence.is_raised()
    }

    /// Stops the loops and reconcilers, lets in-flight handlers finish for a while, then gives back every lease still
    /// held. How many were given back.
    pub async fn stop(mut self) -> Result<usize, StoreError> {
        let _ = self.stop.send(true);
        self.reconciling.abort_all();
        let drained = tokio::time::timeout(DRAIN + Duration::from_secs(1), async {
            while self.loops.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            self.loops.abort_all();
        }
        let _ = self.beat_stop.send(true);
        while self.beat.join_next().await.is_some() {}
        self.store.give_back(&self.owner).await
    }

    /// Ends every task at once, as a process that must not write again (its store failed) ends.
    pub fn halt(mut self) {
        let _ = self.stop.send(true);
        self.reconciling.abort_all();
        self.loops.abort_all();
        self.beat.abort_all();
    }
}
