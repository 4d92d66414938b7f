//! The in-process work queue: pointers to events, delivered after their delay, at most `capacity` waiting.
//! It lives in memory on purpose: what it loses in a crash, the ledger still has, and the sweeper re-sends it.

use std::sync::atomic::{AtomicUsize, Ordering};
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
        });
        (queue, Deliveries { rx, waiting })
    }

    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }
}

impl Deliveries {
    pub async fn next(&mut self) -> Option<EventKey> {
        let key = self.rx.recv().await?;
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        Some(key)
    }
}

#[async_trait]
impl Queue for InProcessQueue {
    async fn enqueue(&self, key: &EventKey, delay: Duration) -> Result<(), QueueError> {
        if self.waiting.fetch_add(1, Ordering::Relaxed) >= self.capacity {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
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
}
