//! The contract over PostgreSQL: a fresh schema per test in the database `INBOX_TEST_POSTGRES_URL` names (./test.sh
//! starts a throwaway server and sets it), so every test migrates its own empty store.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use inbox_core::clock::{Clock, ManualClock};
use inbox_core::contract::Harness;
use inbox_core::model::{EventKey, SourceName};
use inbox_core::ports::Store;
use inbox_core::stores::postgres::{Options, PostgresStore};

/// One test's schema, and the clock its stores run on.
pub struct PostgresHarness {
    /// The server's URL, as the environment gives it.
    pub base: String,
    pub schema: String,
    clock: Arc<ManualClock>,
}

impl PostgresHarness {
    /// `None` (after a loud SKIPPED line) when no server is configured and none is required.
    pub async fn start() -> Option<Self> {
        let Ok(base) = std::env::var("INBOX_TEST_POSTGRES_URL") else {
            assert_ne!(
                std::env::var("INBOX_REQUIRE_POSTGRES").as_deref(),
                Ok("1"),
                "INBOX_REQUIRE_POSTGRES=1 but INBOX_TEST_POSTGRES_URL is unset (./test.sh starts a server)"
            );
            static LOUD: std::sync::Once = std::sync::Once::new();
            LOUD.call_once(|| {
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED: the PostgreSQL store's tests: INBOX_TEST_POSTGRES_URL is unset (./test.sh sets it)"
                );
            });
            return None;
        };
        let schema = format!("t_{:016x}", rand::random::<u64>());
        let harness = Self {
            base,
            schema,
            clock: super::clock_now(),
        };
        harness.sql(&format!("CREATE SCHEMA {}", harness.schema)).await;
        Some(harness)
    }

    /// The store's URL: the server's, every session's `search_path` the test's schema.
    pub fn url(&self) -> String {
        let sep = if self.base.contains('?') { '&' } else { '?' };
        format!("{}{sep}options=-c%20search_path%3D{}", self.base, self.schema)
    }

    /// Runs `sql` on a connection of its own, in the test's schema, as an operator's `psql` would.
    pub async fn sql(&self, sql: &str) -> u64 {
        let (client, connection) = tokio_postgres::connect(&self.base, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        client
            .batch_execute(&format!("SET search_path = {}", self.schema))
            .await
            .unwrap();
        let mut affected = 0;
        for row in client.simple_query(sql).await.unwrap() {
            if let tokio_postgres::SimpleQueryMessage::CommandComplete(n) = row {
                affected += n;
            }
        }
        affected
    }

    /// Drops the test's schema (a test that passed; a failed one leaves it to look at).
    pub async fn finish_now(&self) {
        self.sql(&format!("DROP SCHEMA {} CASCADE", self.schema)).await;
    }

    /// A store over the test's schema whose due times use `grace`, on `clock` (`None`: the database's).
    pub async fn store(&self, grace: Duration, clock: Option<Arc<dyn Clock>>) -> PostgresStore {
        let mut options = Options::new(self.url(), grace);
        options.pool_size = 4;
        options.clock = clock;
        PostgresStore::open(options).await.unwrap()
    }
}

#[async_trait]
impl Harness for PostgresHarness {
    fn name(&self) -> &'static str {
        "PostgreSQL"
    }

    fn clock(&self) -> Arc<ManualClock> {
        self.clock.clone()
    }

    async fn open_on(&self, grace: Duration, clock: Arc<dyn Clock>) -> Arc<dyn Store> {
        Arc::new(self.store(grace, Some(clock)).await)
    }

    async fn lose_body(&self, key: &EventKey) {
        let n = self
            .sql(&format!(
                "DELETE FROM payloads WHERE event = (SELECT id FROM events WHERE source = '{}' AND event_id = '{}')",
                key.source.as_str(),
                key.event_id.as_str()
            ))
            .await;
        assert_eq!(n, 1, "no body to lose for {key}");
    }

    async fn store_checkpoint_json(&self, source: &SourceName, json: &str) {
        self.sql(&format!(
            "INSERT INTO checkpoints (source, body) VALUES ('{}', '{}')
             ON CONFLICT (source) DO UPDATE SET body = excluded.body",
            source.as_str(),
            json.replace('\'', "''")
        ))
        .await;
    }

    async fn finish(&self) {
        self.finish_now().await;
    }
}

inbox_core::contract_tests!(PostgresHarness::start());
