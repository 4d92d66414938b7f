//! The overview's counts, kept a few seconds: counting a big store takes longer than a page may.

use std::sync::Arc;
use std::time::Duration;

use inbox_core::ports::{Queue, QueueDepth, Store, StoreError, Summary, Timeline};

/// How long the overview's counts are shown before they are taken again. Counting a big store walks its indexes,
/// which takes longer than a page may (BENCHMARKS.md, "The operator console"); so a page shows the counts as last
/// taken, with their time, and a view past this age takes them again in the background for the next one.
const COUNTS_FRESH: Duration = Duration::from_secs(5);

/// The overview's counts and when they were taken. Only the first view after start (or after a replay from this
/// console, which changes them) waits for them.
#[derive(Default)]
pub(crate) struct Counts {
    taken: tokio::sync::Mutex<Option<Taken>>,
    refreshing: std::sync::atomic::AtomicBool,
}

#[derive(Clone)]
pub(crate) struct Taken {
    at: std::time::Instant,
    /// When, in UTC ms, for the page.
    pub(crate) when: i64,
    pub(crate) summary: Arc<Summary>,
    /// The work queue's counts, where the console has a queue that can say them (AWS).
    pub(crate) queue: Option<QueueDepth>,
    /// How the chart counts, for its legend: by the hour events arrived (the store's own counts), or as the
    /// [`Timeline`] says (by the hour each count was made).
    pub(crate) timeline_note: &'static str,
}

impl Taken {
    async fn now(
        ledger: &dyn Store,
        timeline: Option<&dyn Timeline>,
        queue: Option<&dyn Queue>,
    ) -> Result<Self, StoreError> {
        let when = inbox_core::time::now_ms();
        let mut summary = ledger.summary().await?;
        let mut depth = None;
        if let Some(queue) = queue {
            match queue.depth().await {
                Ok(d) => depth = d,
                Err(e) => tracing::warn!(error = %e, "the work queue's counts could not be read"),
            }
        }
        let mut timeline_note = "by the hour they arrived";
        if let (true, Some(timeline)) = (summary.timeline.is_empty(), timeline) {
            // The chart is an aid: a page without it beats no page.
            match timeline.last_day(when).await {
                Ok(hours) => {
                    summary.timeline = hours;
                    timeline_note = timeline.note();
                }
                Err(e) => tracing::warn!(error = %e, "the overview's chart could not be read"),
            }
        }
        let summary = Arc::new(summary);
        Ok(Self {
            at: std::time::Instant::now(),
            when,
            summary,
            queue: depth,
            timeline_note,
        })
    }
}

impl Counts {
    /// The counts to show.
    pub(crate) async fn get(
        self: &Arc<Self>,
        ledger: &Arc<dyn Store>,
        timeline: &Option<Arc<dyn Timeline>>,
        queue: &Option<Arc<dyn Queue>>,
    ) -> Result<Taken, StoreError> {
        use std::sync::atomic::Ordering;
        let mut taken = self.taken.lock().await;
        if let Some(shown) = taken.clone() {
            if shown.at.elapsed() >= COUNTS_FRESH && !self.refreshing.swap(true, Ordering::AcqRel) {
                let (counts, ledger) = (self.clone(), ledger.clone());
                let (timeline, queue) = (timeline.clone(), queue.clone());
                tokio::spawn(async move {
                    match Taken::now(ledger.as_ref(), timeline.as_deref(), queue.as_deref()).await {
                        Ok(fresh) => *counts.taken.lock().await = Some(fresh),
                        Err(e) => {
                            tracing::warn!(error = %e, "the overview's counts could not be taken again")
                        }
                    }
                    counts.refreshing.store(false, Ordering::Release);
                });
            }
            return Ok(shown);
        }
        // Taken under the lock: views that come meanwhile wait for these counts rather than take their own.
        let fresh = Taken::now(ledger.as_ref(), timeline.as_deref(), queue.as_deref()).await?;
        *taken = Some(fresh.clone());
        Ok(fresh)
    }

    /// A change made here (a replay) is shown at once: the next view takes the counts again.
    pub(crate) async fn forget(&self) {
        *self.taken.lock().await = None;
    }
}
