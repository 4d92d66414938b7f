//! webhook-inbox core: everything the runtimes share, and each runtime and each store in a folder and a feature of
//! its own. The ports ([`ports`]) and the clock and randomness ([`clock`]); the receiver ([`receiver`]: the HTTP
//! edge) and its intake ([`intake`]), the state machine ([`machine`], its rules in [`rules`]), the signature schemes
//! ([`schemes`]); the stores ([`stores`]: memory, SQLite, DynamoDB); the `inbox serve` runtime ([`serve`]: the HTTP
//! server, workers, sweeper and reconcilers in one process, over any store) and the serverless one ([`aws`]: SQS,
//! S3, SNS, secrets, the functions' handlers); what only the `inbox` command uses behind the `operator` feature
//! (`aws::init`, `aws::play`). The operator console is the crate `inbox-console`, over these ports. The design:
//! `docs/DESIGN.md`.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::unwrap_used))]

#[cfg(feature = "aws")]
pub mod aws;
pub mod clock;
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "aws"))]
pub mod compression;
pub mod config;
#[cfg(feature = "contract")]
pub mod contract;
pub mod delivery_health;
#[doc(hidden)]
pub mod failpoint;
pub mod fence;
pub mod handlers;
pub mod intake;
pub mod keys;
pub mod machine;
pub mod metrics;
pub mod model;
pub mod ports;
pub mod receiver;
pub mod reconcile;
pub mod routing;
pub mod rules;
pub use inbox_schemes as schemes;
pub mod secrets;
#[cfg(feature = "serve")]
pub mod serve;
pub mod source;
pub mod stores;
pub mod sync;
pub mod time;
