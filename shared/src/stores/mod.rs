//! The stores, one folder each, behind the ports of [`crate::ports`]: the reference store in memory ([`memory`]),
//! SQLite ([`sqlite`], `inbox serve` on one machine) and DynamoDB ([`dynamodb`], with S3 for large bodies, the AWS
//! runtime). Each passes the one contract of the `contract` module (`shared/src/contract/`). Which one a runtime
//! runs over is the configuration's to say, in one place: [`open`].

#[cfg(feature = "aws")]
pub mod dynamodb;
pub mod memory;
#[cfg(feature = "sqlite")]
pub mod sqlite;

use std::sync::Arc;

use crate::clock::World;
use crate::config::Config;
use crate::ports::{Store, StoreError};

/// The store the configuration names, on `world`'s clock: SQLite in `server.data_dir` (created if absent), the
/// one kind `inbox serve` runs over today. `serving`: opened for `inbox serve`, the one process that answers
/// senders from it ([`sqlite::Options::serving`]).
#[cfg(feature = "sqlite")]
pub async fn open(config: &Config, world: &World, serving: bool) -> Result<Arc<dyn Store>, StoreError> {
    let mut options = sqlite::Options::new(config.server.max_pending_writes, config.sweeper.grace);
    options.serving = serving;
    options.clock = world.clock.clone();
    let store = sqlite::SqliteLedger::open_with(&config.server.data_dir, options)?;
    Ok(Arc::new(store))
}
