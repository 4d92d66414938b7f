//! The in-process work queue: pointers to events, delivered after their delay, at most `capacity` waiting.
//! It lives in memory on purpose: what it loses in a crash, the ledger still has, and the sweeper re-sends it.
//! Past `capacity` it refuses and remembers that it did: the backlog then waits in the ledger, and the workers
//! refill the queue from there once it has drained (see `serve::run_workers`), so memory stays bounded
//! however long a burst lasts.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;

use crate::model::EventKey;
use crate::ports::{Queue, QueueError};

pub struct InProcessQueue {
    tx: mpsc::UnboundedSender<EventKey>,
    waiting: Arc<AtomicUsize>,
    capacity: usize,
    /// An enqueue was refused for capacity since the last [`InProcessQueue::take_overflow`].
    overflowed: AtomicBool,
}

pub struct Deliveries {
    rx: mpsc::UnboundedReceiver<EventKey>,
    waiting: Arc<AtomicUsize>,
}

impl InProcessQueue {
    pub fn new(capacity: usize) -> (Arc<Self>, Deliveries) {
        let (tx, rx) = mpsc::unbounded_channel();
        let waiting = Arc::new(AtomicUsize::new(0));
        let queue = Arc::new(Self {
            tx,
            waiting: waiting.clone(),
            capacity,
            overflowed: AtomicBool::new(false),
        });
        (queue, Deliveries { rx, waiting })
    }

    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Whether events were refused for capacity (so some wait only in the ledger); clears the mark.
    pub fn take_overflow(&self) -> bool {
        self.overflowed.swap(false, Ordering::Relaxed)
    }

    /// Marks that events wait only in the ledger (a refill found more than it took).
    pub fn mark_overflow(&self) {
        self.overflowed.store(true, Ordering::Relaxed);
    }
}

impl Deliveries {
    pub async fn next(&mut self) -> Option<EventKey> {
        let key = self.rx.recv().await?;
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        Some(key)
    }

    /// The next key if one is waiting now.
    pub fn try_next(&mut self) -> Option<EventKey> {
        let key = self.rx.try_recv().ok()?;
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        Some(key)
    }
}

#[async_trait]
impl Queue for InProcessQueue {
    async fn enqueue(&self, key: &EventKey, delay: Duration) -> Result<(), QueueError> {
        if self.waiting.fetch_add(1, Ordering::Relaxed) >= self.capacity {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            self.overflowed.store(true, Ordering::Relaxed);
            if delay.is_zero() {
                // Due now: the workers' refill takes it from the ledger once the queue has drained.
                return Ok(());
            }
            return Err(QueueError("the in-process queue is full".into()));
        }
        if delay.is_zero() {
            return self
                .tx
                .send(key.clone())
                .map_err(|_| QueueError("the workers have stopped".into()));
        }
        let (tx, key) = (self.tx.clone(), key.clone());
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = tx.send(key);
        });
        Ok(())
    }

    /// Nothing is sent ahead of a create here (the ledger is its own queue): enqueued as any other.
    async fn announce(&self, key: &EventKey, _until: i64) -> Result<(), QueueError> {
        self.enqueue(key, Duration::ZERO).await
    }

    /// `inbox serve` counts its work in the ledger, not here.
    async fn depth(&self) -> Result<Option<crate::ports::QueueDepth>, QueueError> {
        Ok(None)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::{EventId, SourceName};

    fn key(i: usize) -> EventKey {
        EventKey::new(
            SourceName::parse("s").unwrap(),
            EventId::parse(&format!("e{i}")).unwrap(),
        )
    }

    #[tokio::test]
    async fn past_capacity_a_due_key_is_left_to_the_ledger_and_the_overflow_remembered() {
        let (queue, mut deliveries) = InProcessQueue::new(2);
        queue.enqueue(&key(1), Duration::ZERO).await.unwrap();
        queue.enqueue(&key(2), Duration::ZERO).await.unwrap();
        assert!(!queue.take_overflow());
        // Due now: answered Ok (the refill will take it from the ledger), and marked.
        queue.enqueue(&key(3), Duration::ZERO).await.unwrap();
        // Delayed: refused, for the sweeper.
        assert!(queue.enqueue(&key(4), Duration::from_secs(1)).await.is_err());
        assert_eq!(queue.waiting(), 2);
        assert!(queue.take_overflow());
        assert!(!queue.take_overflow(), "taking the mark clears it");
        assert_eq!(deliveries.try_next(), Some(key(1)));
        assert_eq!(deliveries.next().await, Some(key(2)));
        assert_eq!(deliveries.try_next(), None);
        assert_eq!(queue.waiting(), 0);
    }
}
