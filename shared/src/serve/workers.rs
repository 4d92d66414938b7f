//! The workers of `inbox serve`: a pool of handler slots fed two ways, by the receiver (a new event created claimed
//! by a free worker) and by the in-process queue (a backlog, a retry, the sweeper's finds), refilled from the ledger
//! when the queue overflowed.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinSet;

use super::queue::{Deliveries, InProcessQueue};
use super::{DRAIN, QUEUE_CAPACITY};
use crate::intake::{Reserved, Runner};
use crate::machine::{Machine, Outcome, SweepReport, LEASE_MARGIN};
use crate::model::{Event, EventKey};
use crate::ports::{Queue, StoreError};

/// Events a refill takes from the ledger at most.
const REFILL: usize = QUEUE_CAPACITY / 2;

/// The worker slots of `inbox serve`, shared by the two ways an event reaches a handler: a new event that finds a
/// worker free is created claimed by it and handed over here by the receiver ([`Runner`]); every other one (a
/// backlog, a retry, the sweeper's) comes through the queue and is claimed by the worker that takes it.
pub(super) struct Pool {
    machine: Arc<Machine>,
    slots: Arc<Semaphore>,
    claimed: mpsc::UnboundedSender<(Reserved, Event)>,
}

impl Pool {
    pub(super) fn new(
        machine: Arc<Machine>,
        workers: usize,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<(Reserved, Event)>) {
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
    /// Only while a slot is free now and the fence is down: with every handler busy, or while this instance cannot
    /// renew its heartbeat, a new event waits in the queue, not under a lease.
    fn reserve(&self, key: &EventKey) -> Option<Reserved> {
        (self.slots.available_permits() > 0 && !self.machine.fence().is_raised()).then(|| Reserved {
            owner: self.machine.lease_owner(),
            lease: self.machine.lease_for(key),
            at: tokio::time::Instant::now(),
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
#[allow(clippy::too_many_arguments)]
pub(super) async fn run_workers(
    machine: Arc<Machine>,
    queue: Arc<InProcessQueue>,
    sends: Arc<dyn Queue>,
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
            let Ok(Ok(slot)) = tokio::time::timeout(LEASE_MARGIN, slots.acquire_owned()).await else {
                if let Err(e) = machine.ledger().release(&key, &reserved.owner).await {
                    tracing::warn!(source = %key.source, event_id = %key.event_id, error = %e,
                        "the lease of an event no worker took was not given back; it ends on its own");
                }
                again(&queue, &key, Ok(Outcome::Retry(Duration::ZERO))).await;
                return;
            };
            // What is left of the lease since it was reserved, before the create was sent: the commit's time and
            // the wait for a slot both count.
            let lease = reserved.left();
            let outcome = machine
                .run_claimed(event, &reserved.owner, lease, move || drop(slot))
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
        // While the fence is up, nothing is claimed: the events wait in the queue (or the store) for it to come down.
        if machine.fence().is_raised() {
            tokio::select! {
                biased;
                _ = stop.changed() => break,
                () = machine.fence().lowered() => {}
            }
        }
        let key = match deliveries.try_next() {
            Some(key) => Some(key),
            None => {
                if queue.take_overflow() {
                    if let Err(e) = refill(&machine, &queue, sends.as_ref(), grace).await {
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
        // The workers wait for the fence to come down before they take it.
        Ok(Outcome::Fenced) => Duration::ZERO,
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

/// Enqueues (through `sends`) everything due, oldest first (RECEIVED ones whatever their age), up to [`REFILL`];
/// marks the queue overflowed again if there may be more, or if the ledger could not be read.
pub(super) async fn refill(
    machine: &Machine,
    queue: &InProcessQueue,
    sends: &dyn Queue,
    grace: Duration,
) -> Result<SweepReport, StoreError> {
    let everything = grace + Duration::from_millis(1);
    let found = machine.sweep_ahead(sends, everything, REFILL).await;
    if found.as_ref().map_or(true, |f| f.enqueued() >= REFILL) {
        queue.mark_overflow();
    }
    found
}
