//! The stores, one folder each, behind the ports of [`crate::ports`]: the reference store in memory ([`memory`]),
//! SQLite ([`sqlite`], `inbox serve` on one machine), PostgreSQL ([`postgres`], any number of `inbox serve` on one
//! database) and DynamoDB ([`dynamodb`], with S3 for large bodies, the AWS
//! runtime). Each passes the one contract of the `contract` module (`shared/src/contract/`). Which one a runtime
//! runs over is the configuration's to say, in one place: [`open`].

#[cfg(feature = "aws")]
pub mod dynamodb;
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
pub mod sqlite;

#[cfg(feature = "sqlite")]
use std::sync::Arc;

#[cfg(feature = "sqlite")]
use crate::clock::World;
#[cfg(feature = "sqlite")]
use crate::config::{Config, StoreConfig};
#[cfg(feature = "sqlite")]
use crate::ports::{Store, StoreError};

/// The store the configuration names (`[store] kind`), on `world`'s clock: SQLite in `server.data_dir` (created if
/// absent), or PostgreSQL at `store.url` (on the database's clock). `serving`: opened for `inbox serve`, a process
/// that answers senders from it ([`sqlite::Options::serving`]: on SQLite the only one).
#[cfg(feature = "sqlite")]
pub async fn open(config: &Config, world: &World, serving: bool) -> Result<Arc<dyn Store>, StoreError> {
    match &config.store {
        StoreConfig::Sqlite => {
            let mut options = sqlite::Options::new(config.server.max_pending_writes, config.sweeper.grace);
            options.serving = serving;
            options.clock = world.clock.clone();
            let store = sqlite::SqliteLedger::open_with(&config.server.data_dir, options)?;
            Ok(Arc::new(store))
        }
        #[cfg(feature = "postgres")]
        StoreConfig::Postgres {
            url,
            pool_size,
            statement_timeout,
            ca_file,
            liveness,
        } => {
            let url = crate::secrets::resolve_local(url)
                .map_err(|e| StoreError::Unavailable(format!("store.url: {e}")))?;
            let mut options = postgres::Options::new(url.trim().to_owned(), config.sweeper.grace);
            options.pool_size = *pool_size;
            options.statement_timeout = *statement_timeout;
            options.ca_file.clone_from(ca_file);
            options.liveness = *liveness;
            Ok(Arc::new(postgres::PostgresStore::open(options).await?))
        }
        #[cfg(not(feature = "postgres"))]
        StoreConfig::Postgres { .. } => Err(StoreError::Unavailable(
            "this build has no PostgreSQL store (the `postgres` feature)".into(),
        )),
    }
}
