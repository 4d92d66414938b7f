//! The contract over the reference store in memory.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use inbox_core::clock::{Clock, ManualClock};
use inbox_core::contract::Harness;
use inbox_core::model::{EventKey, SourceName};
use inbox_core::ports::{Checkpoint, Checkpoints, Store};
use inbox_core::stores::memory::MemoryStore;

/// One test's reference store: one state that every handle opened shares.
pub struct MemoryHarness {
    clock: Arc<ManualClock>,
    store: MemoryStore,
}

impl MemoryHarness {
    pub async fn start() -> Option<Self> {
        let clock = super::clock_now();
        let store = MemoryStore::new(Duration::ZERO).with_clock(clock.clone());
        Some(Self { clock, store })
    }

    /// The reference store kept with heartbeats, as many runtimes share it (PostgreSQL's semantics).
    pub async fn with_heartbeats() -> Option<Self> {
        let clock = super::clock_now();
        let store = MemoryStore::new(Duration::ZERO)
            .with_clock(clock.clone())
            .with_heartbeats(Duration::from_secs(10));
        Some(Self { clock, store })
    }
}

#[async_trait]
impl Harness for MemoryHarness {
    fn name(&self) -> &'static str {
        "the memory store"
    }

    fn clock(&self) -> Arc<ManualClock> {
        self.clock.clone()
    }

    /// A restarted process keeps what was durable (every write, with the default durability).
    async fn open_on(&self, grace: Duration, clock: Arc<dyn Clock>) -> Arc<dyn Store> {
        self.store.crash();
        Arc::new(self.store.clone().with_grace(grace).with_clock(clock))
    }

    async fn lose_body(&self, key: &EventKey) {
        assert!(self.store.lose_body(key), "no body to lose for {key}");
    }

    async fn store_checkpoint_json(&self, source: &SourceName, json: &str) {
        let checkpoint: Checkpoint = serde_json::from_str(json).unwrap();
        self.store.save_checkpoint(source, &checkpoint).await.unwrap();
    }
}

inbox_core::contract_tests!(MemoryHarness::start());

/// The contract over the reference store kept with heartbeats: what PostgreSQL promises many instances.
mod heartbeats {
    use super::MemoryHarness;

    inbox_core::contract_tests!(MemoryHarness::with_heartbeats());
}
