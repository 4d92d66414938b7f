//! An owner's fence (docs/DESIGN.md, "Owners, leases and clocks"): where a shared store judges owners gone by their
//! heartbeats, an owner that cannot renew its own stops itself before anyone may judge it gone. While its fence is
//! up it claims nothing and runs no handler: those running when it went up are cancelled (they are retryable, and
//! their leases given back once the store answers again), so that by the time another instance may end its leases
//! and run its events, it runs none of them. The heartbeat that raises and lowers it is the runtime's
//! (`serve::liveness`); the machine and the workers only obey it.

use tokio::sync::watch;

/// The side that obeys: whether this owner may claim and run now. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Fence(watch::Receiver<bool>);

/// The side that raises and lowers it: the owner's heartbeat.
#[derive(Debug)]
pub struct FenceSwitch(watch::Sender<bool>);

impl Fence {
    /// A switch and its fence, lowered.
    pub fn new() -> (FenceSwitch, Fence) {
        let (tx, rx) = watch::channel(false);
        (FenceSwitch(tx), Fence(rx))
    }

    /// A fence that is never raised: a runtime whose store proves gone owners otherwise (SQLite's lock, SQS's
    /// visibility) has no heartbeat to lose.
    pub fn never() -> Fence {
        let (tx, rx) = watch::channel(false);
        // The receiver keeps the last value once the sender is gone: lowered, for good.
        drop(tx);
        Fence(rx)
    }

    pub fn is_raised(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the fence is up (at once if it is); never, for a fence no switch can raise any more.
    pub async fn raised(&self) {
        let mut rx = self.0.clone();
        if rx.wait_for(|up| *up).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Resolves once the fence is down (at once if it is). A switch dropped while the fence is up leaves it up:
    /// this waits for ever, as an owner that can no longer renew its heartbeat must.
    pub async fn lowered(&self) {
        let mut rx = self.0.clone();
        if rx.wait_for(|up| !*up).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl FenceSwitch {
    /// Raises or lowers the fence; whether that changed it.
    pub fn set(&self, up: bool) -> bool {
        self.0
            .send_if_modified(|state| std::mem::replace(state, up) != up)
    }

    pub fn is_raised(&self) -> bool {
        *self.0.borrow()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_raised_fence_wakes_its_waiters_and_a_lowered_one_lets_them_on() {
        let (switch, fence) = Fence::new();
        assert!(!fence.is_raised());
        let waiting = tokio::spawn({
            let fence = fence.clone();
            async move { fence.raised().await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(
            !waiting.is_finished(),
            "raised() resolved while the fence was down"
        );
        assert!(switch.set(true));
        assert!(!switch.set(true), "raising a raised fence changes nothing");
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("raised() woke")
            .unwrap();
        assert!(fence.is_raised());
        let on = tokio::spawn({
            let fence = fence.clone();
            async move { fence.lowered().await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!on.is_finished(), "lowered() resolved while the fence was up");
        switch.set(false);
        tokio::time::timeout(Duration::from_secs(1), on)
            .await
            .expect("lowered() woke")
            .unwrap();
    }

    #[tokio::test]
    async fn a_fence_without_a_heartbeat_is_never_raised() {
        let fence = Fence::never();
        assert!(!fence.is_raised());
        fence.lowered().await;
        assert!(
            tokio::time::timeout(Duration::from_millis(20), fence.raised())
                .await
                .is_err(),
            "a fence no switch holds was raised"
        );
    }
}
