//! The loops beside the work in `inbox serve`: the sweeper on its interval (with retention and the bodies' upkeep),
//! a quick sweep whenever another process changed the store, the end of the leases of owners whose heartbeat ran
//! out (where this instance may judge: [`super::liveness`]), and each source's reconciliation on its interval.
//! Every pass is bounded in time; the heartbeat is not among them (it runs on a task of its own, never behind a pass).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::liveness::{judge, Judging, Pace};
use crate::clock::World;
use crate::machine::Machine;
use crate::metrics::Metrics;
use crate::ports::{Queue, Store};
use crate::reconcile::{Reconciler, RunOptions};

/// How soon after start the first reconciliation runs at the earliest: after the start-up sweep's work is handed
/// out.
const FIRST_RECONCILE_AFTER: Duration = Duration::from_secs(2);
/// Expired events (and whatever else a store keeps) one purge step deletes at most.
const PURGE_BATCH: usize = 1_000;
/// How long one purge pass goes on at most: what it leaves is deleted by the next.
const PURGE_PASS: Duration = Duration::from_secs(5);
/// Bodies one sweep finishes at most.
const FINISH_BODIES: usize = 1_000;
/// How often the server looks for changes made by another process (`inbox replay`, another instance), at most.
const WATCH_EVERY: Duration = Duration::from_secs(1);
/// How long the sweep's role is held: its holder renews it at every look (at most a second apart), so another
/// instance takes it this long after its holder stopped.
const SWEEP_HOLD: Duration = Duration::from_secs(10);

/// One source's reconciliation on its interval: the first run once the last recorded one is an interval old (at
/// once on a fresh store, a moment after start), then every interval. A failed run is logged and counted, and the
/// next one starts over from the checkpoint; receiving never waits for it.
///
/// On a store many runtimes share, one of them reconciles a source at a time: the holder of its role
/// (`reconcile:{source}`), held for two intervals and renewed at each run.
#[allow(clippy::too_many_arguments)]
pub(super) async fn run_reconciler(
    reconciler: Reconciler,
    ledger: Arc<dyn Store>,
    queue: Arc<dyn Queue>,
    metrics: Arc<Metrics>,
    slot: usize,
    world: World,
    owner: String,
    mut stop: watch::Receiver<bool>,
) {
    let role = format!("reconcile:{}", reconciler.source());
    let interval = reconciler.interval();
    let last = match ledger.checkpoint(reconciler.source()).await {
        Ok(cp) => cp.and_then(|c| c.last_run).map(|r| r.finished_at),
        Err(e) => {
            tracing::warn!(source = %reconciler.source(), error = %e, "cannot read the reconciliation checkpoint");
            None
        }
    };
    let since_last = last.map_or(Duration::MAX, |t| {
        Duration::from_millis(u64::try_from(world.now_ms().saturating_sub(t)).unwrap_or(0))
    });
    let mut wait = interval.saturating_sub(since_last).max(FIRST_RECONCILE_AFTER);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
        if !leads(ledger.as_ref(), &role, &owner, interval.saturating_mul(2)).await {
            wait = interval;
            continue;
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

/// The sweeper on its interval, plus a quick look whenever another process changed the ledger; and, where the store
/// judges owners by heartbeats (`judging`), the end of the leases of owners that stopped theirs.
pub(super) async fn run_sweeper(
    machine: Arc<Machine>,
    store: Arc<dyn Store>,
    queue: Arc<dyn Queue>,
    owner: String,
    interval: Duration,
    judging: Option<(Pace, Arc<Judging>)>,
    mut stop: watch::Receiver<bool>,
) {
    let mut full = tokio::time::interval(interval);
    full.tick().await; // the start-up sweep has just run
                       // The sweep and retention: on a store many runtimes share, one at a time; its holder renews it at every look.
    let hold = SWEEP_HOLD;
    loop {
        // A look every 250 ms to 1 s, drawn each time, so that many instances' polls do not fall in step.
        let look = WATCH_EVERY.mul_f64(0.25 + 0.75 * machine.world().random.up_to(1_000) as f64 / 1_000.0);
        let sweep = tokio::select! {
            _ = full.tick() => {
                if leads(store.as_ref(), "sweep", &owner, hold).await {
                    purge(store.as_ref(), &stop).await;
                    finish_bodies(store.as_ref()).await;
                    true
                } else {
                    false
                }
            }
            _ = tokio::time::sleep(look) => {
                if let Some((pace, judging)) = &judging {
                    judge(store.as_ref(), &owner, pace, judging).await;
                }
                store.changed_elsewhere().await.unwrap_or(false)
                    && leads(store.as_ref(), "sweep", &owner, hold).await
            }
            _ = stop.changed() => return,
        };
        if sweep {
            if let Err(e) = machine.sweep(queue.as_ref(), 10_000).await {
                tracing::warn!(error = %e, "sweep failed");
            }
        }
    }
}

/// Whether `owner` leads `role` now (taking or renewing it); a store that cannot say is not followed blindly: no.
async fn leads(store: &dyn Store, role: &str, owner: &str, hold: Duration) -> bool {
    match store.lead(role, owner, hold).await {
        Ok(term) => term.is_some(),
        Err(e) => {
            tracing::warn!(role, error = %e, "cannot tell who leads; this instance skips the pass");
            false
        }
    }
}

/// Deletes what is past retention a batch (one transaction) at a time until none is left or the pass has taken
/// [`PURGE_PASS`]: however many expired since the last sweep, all of them go over the passes that follow, not a
/// fixed number a sweep. Other writes run between two batches, and a stop ends it there.
async fn purge(store: &dyn Store, stop: &watch::Receiver<bool>) {
    let mut events = 0;
    let until = tokio::time::Instant::now() + PURGE_PASS;
    loop {
        match store.purge(PURGE_BATCH).await {
            Ok(purged) => {
                events += purged.events;
                if !purged.full(PURGE_BATCH) || *stop.borrow() || tokio::time::Instant::now() >= until {
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

/// What completed events still owe their bodies kept apart (a store that keeps none owes nothing).
async fn finish_bodies(store: &dyn Store) {
    match store.finish_bodies(FINISH_BODIES).await {
        Ok(0) => {}
        Ok(finished) => tracing::info!(finished, "bodies of completed events started their retention"),
        Err(e) => tracing::warn!(error = %e, "finishing bodies failed; the next sweep tries again"),
    }
}
