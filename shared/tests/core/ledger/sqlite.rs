//! The contract over SQLite, a real file in a fresh directory per test.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use inbox_core::clock::{Clock, ManualClock};
use inbox_core::contract::Harness;
use inbox_core::model::{EventKey, SourceName};
use inbox_core::ports::Store;
use inbox_core::stores::sqlite::{Options, SqliteLedger};

/// One test's SQLite store: its data directory, and the clock it runs on.
pub struct SqliteHarness {
    dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
}

impl SqliteHarness {
    pub async fn start() -> Option<Self> {
        Some(Self {
            dir: tempfile::tempdir().unwrap(),
            clock: super::clock_now(),
        })
    }

    /// The database file.
    pub fn db(&self) -> PathBuf {
        self.dir.path().join("inbox.db")
    }

    /// A second connection to the store's own file, as an operator's `sqlite3` would open it.
    pub fn sql(&self) -> rusqlite::Connection {
        let c = rusqlite::Connection::open(self.db()).unwrap();
        c.busy_timeout(Duration::from_secs(10)).unwrap();
        c
    }
}

#[async_trait]
impl Harness for SqliteHarness {
    fn name(&self) -> &'static str {
        "SQLite"
    }

    fn clock(&self) -> Arc<ManualClock> {
        self.clock.clone()
    }

    async fn open_on(&self, grace: Duration, clock: Arc<dyn Clock>) -> Arc<dyn Store> {
        let options = Options {
            clock,
            ..Options::new(1024, grace)
        };
        Arc::new(SqliteLedger::open_with(self.dir.path(), options).unwrap())
    }

    async fn lose_body(&self, key: &EventKey) {
        let n = self
            .sql()
            .execute(
                "DELETE FROM payloads WHERE event = (SELECT id FROM events WHERE source = ?1 AND event_id = ?2)",
                [key.source.as_str(), key.event_id.as_str()],
            )
            .unwrap();
        assert_eq!(n, 1, "no body to lose for {key}");
    }

    async fn store_checkpoint_json(&self, source: &SourceName, json: &str) {
        self.sql()
            .execute(
                "INSERT OR REPLACE INTO checkpoints (source, body) VALUES (?1, ?2)",
                [source.as_str(), json],
            )
            .unwrap();
    }
}

inbox_core::contract_tests!(SqliteHarness::start());
