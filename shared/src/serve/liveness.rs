//! This process's heartbeat, where its store judges owners gone by their heartbeats (PostgreSQL; the reference store
//! with heartbeats), and the two rules that keep a live owner from being judged gone while it runs an event
//! (docs/DESIGN.md, "Owners, leases and clocks"):
//!
//! - **An owner fences itself.** The heartbeat runs on a task of its own, never behind other work, each beat bounded
//!   by a short timeout (on PostgreSQL, on a connection of its own). Once no beat *sent* in the last
//!   [`Pace::fence_after`] (half the liveness period) has been renewed, the fence goes up: the workers claim nothing
//!   and the running handlers are cancelled ([`crate::fence`]). A beat renews `alive_until` to the store's time of
//!   the beat plus the liveness period, and the store cannot have run it before it was sent, so another instance may
//!   judge this one gone no sooner than a whole liveness period after the last renewed beat was sent: the fence is
//!   up half a period before that. The half left over is the margin: a cancelled handler stops at its next await (a
//!   request in flight is dropped at once), timers may fire late on a loaded machine, and clocks drift by far less.
//!   Handler timeouts do not enter it: a handler is cancelled by the fence whatever its timeout, which is why the
//!   margin need not grow with them. What a cancelled handler costs is one repeat of its effect when its request had
//!   reached the destination, as after a crash (handlers are idempotent on the event id).
//! - **An owner judges others only from an unbroken heartbeat.** The leases of owners whose heartbeat ran out are
//!   ended only by an instance whose own beats have all been renewed, with no gap, for a whole liveness period: after
//!   an outage of the store (or of this instance's path to it), every live owner has had that long to renew its own
//!   before anyone judges it. An owner row that is missing is no proof (the store checks that, under a lock, when it
//!   ends the leases).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::fence::FenceSwitch;
use crate::ports::{GoneOwners, Store};
use crate::sync::lock;

/// How the heartbeat is paced against the store's liveness period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pace {
    pub liveness: Duration,
    /// A beat this often: a tenth of the liveness period, at most a second.
    pub every: Duration,
    /// A beat that has not answered in this long has failed: a tenth of the period, at most two seconds.
    pub timeout: Duration,
    /// The fence goes up once no beat sent this long ago or later has been renewed: half the period.
    pub fence_after: Duration,
}

impl Pace {
    pub fn of(liveness: Duration) -> Self {
        Self {
            liveness,
            every: (liveness / 10).min(Duration::from_secs(1)),
            timeout: (liveness / 10).min(Duration::from_secs(2)),
            fence_after: liveness / 2,
        }
    }
}

/// Whether this owner may judge others now: since when its beats have been renewed without a break.
#[derive(Debug, Default)]
pub(super) struct Judging {
    unbroken_since: Mutex<Option<Instant>>,
}

impl Judging {
    fn renewed(&self, sent: Instant, previous: Option<Instant>, pace: &Pace) {
        let mut since = lock(&self.unbroken_since);
        // A gap between two renewed beats longer than a failed beat's would take is a break too (the process was
        // paused, or its timers starved).
        let gap =
            previous.is_none_or(|p| sent.saturating_duration_since(p) > (pace.every + pace.timeout) * 2);
        if since.is_none() || gap {
            *since = Some(sent);
        }
    }

    fn broken(&self) {
        *lock(&self.unbroken_since) = None;
    }

    /// Whether the beats have been unbroken for a whole liveness period.
    pub(super) fn may_judge(&self, pace: &Pace) -> bool {
        lock(&self.unbroken_since).is_some_and(|since| since.elapsed() >= pace.liveness)
    }
}

/// Beats until `stop`, raising the fence once no beat sent in the last [`Pace::fence_after`] was renewed and lowering
/// it at the next renewed one. `first`: when the start-up beat that preceded this task was sent.
pub(super) async fn run_heartbeat(
    store: Arc<dyn Store>,
    owner: String,
    pace: Pace,
    first: Instant,
    switch: FenceSwitch,
    judging: Arc<Judging>,
    mut stop: watch::Receiver<bool>,
) {
    let mut renewed = first;
    judging.renewed(first, None, &pace);
    loop {
        let sent = Instant::now();
        let beat = tokio::time::timeout(pace.timeout, store.heartbeat(&owner));
        let Some(done) = watched(beat, &switch, renewed + pace.fence_after, &mut stop).await else {
            return;
        };
        match done {
            Ok(Ok(())) => {
                judging.renewed(sent, Some(renewed), &pace);
                renewed = renewed.max(sent);
                if switch.set(false) {
                    tracing::warn!("the heartbeat is renewed: this instance claims and runs again");
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "heartbeat failed");
                judging.broken();
            }
            Err(_) => {
                tracing::warn!(
                    timeout_ms = pace.timeout.as_millis() as u64,
                    "heartbeat timed out"
                );
                judging.broken();
            }
        }
        let next = tokio::time::sleep_until(sent + pace.every);
        if watched(next, &switch, renewed + pace.fence_after, &mut stop)
            .await
            .is_none()
        {
            return;
        }
    }
}

/// Awaits `work` (a beat, or the wait for the next) while watching the fence's deadline: the fence goes up at `fence`
/// if it is not up already, whatever `work` is waiting for. `None` once `stop` says so.
async fn watched<T>(
    work: impl std::future::Future<Output = T>,
    switch: &FenceSwitch,
    fence: Instant,
    stop: &mut watch::Receiver<bool>,
) -> Option<T> {
    tokio::pin!(work);
    loop {
        tokio::select! {
            biased;
            _ = stop.changed() => return None,
            () = tokio::time::sleep_until(fence), if !switch.is_raised() => {
                if switch.set(true) {
                    tracing::error!(
                        "the heartbeat could not be renewed: this instance claims nothing and cancels its handlers \
                         until it is, so that no other instance runs its events while it still does"
                    );
                }
            }
            done = &mut work => return Some(done),
        }
    }
}

/// Ends the leases of the owners whose heartbeat ran out, where this owner may judge ([`Judging::may_judge`]); the
/// store ends each only while its heartbeat is still out, under a lock, so a list read a moment ago ends nothing
/// that a live owner holds since.
pub(super) async fn judge(store: &dyn Store, me: &str, pace: &Pace, judging: &Judging) {
    if !judging.may_judge(pace) {
        return;
    }
    let gone = match store.gone_owners(me).await {
        Ok(GoneOwners::These(owners)) if !owners.is_empty() => GoneOwners::These(owners),
        Ok(_) => return,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read which owners are gone");
            return;
        }
    };
    match store.end_leases(&gone).await {
        Ok(ended) => tracing::warn!(?gone, ended, "owners stopped their heartbeat: their leases ended"),
        Err(e) => tracing::warn!(error = %e, "cannot end the leases of gone owners"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fence_goes_up_half_a_period_before_anyone_may_judge() {
        let pace = Pace::of(Duration::from_secs(30));
        assert_eq!(pace.every, Duration::from_secs(1));
        assert_eq!(pace.timeout, Duration::from_secs(2));
        assert_eq!(pace.fence_after, Duration::from_secs(15));
        let short = Pace::of(Duration::from_secs(4));
        assert_eq!(short.every, Duration::from_millis(400));
        assert_eq!(short.timeout, Duration::from_millis(400));
        assert!(short.fence_after + short.every + short.timeout < short.liveness);
    }

    #[tokio::test(start_paused = true)]
    async fn judging_waits_for_a_whole_period_of_unbroken_beats() {
        let pace = Pace::of(Duration::from_secs(10));
        let judging = Judging::default();
        let start = Instant::now();
        judging.renewed(start, None, &pace);
        tokio::time::advance(Duration::from_secs(9)).await;
        judging.renewed(Instant::now(), Some(Instant::now() - pace.every), &pace);
        assert!(!judging.may_judge(&pace), "judged before a whole period");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(judging.may_judge(&pace));
        // A failed beat starts the count again.
        judging.broken();
        assert!(!judging.may_judge(&pace));
        let back = Instant::now();
        judging.renewed(back, Some(start), &pace);
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(!judging.may_judge(&pace), "a gap was not a break");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(judging.may_judge(&pace));
    }
}
