//! webhook-inbox core: everything both runtimes share, and each runtime in a folder and a feature of its own. The
//! receiver router ([`receiver`]), the state machine ([`machine`]), the signature schemes ([`schemes`]), the ports
//! ([`ports`]); the embedded runtime ([`embedded`]: the SQLite ledger, the in-process queue, `inbox serve`) and the
//! serverless one ([`aws`]: DynamoDB, SQS, S3, SNS, secrets, the functions' handlers); what only the `inbox` command
//! uses behind the `operator` feature ([`console`], `aws::init`, `aws::play`). The design: `docs/DESIGN.md`.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::unwrap_used))]

#[cfg(feature = "aws")]
pub mod aws;
#[cfg(any(feature = "embedded", feature = "aws"))]
pub mod compression;
pub mod config;
#[cfg(feature = "operator")]
pub mod console;
pub mod delivery_health;
#[cfg(feature = "embedded")]
pub mod embedded;
#[doc(hidden)]
pub mod failpoint;
pub mod handlers;
pub mod keys;
pub mod machine;
pub mod metrics;
pub mod model;
pub mod ports;
pub mod receiver;
pub mod reconcile;
pub mod rules;
pub use inbox_schemes as schemes;
pub mod secrets;
pub mod source;
pub mod sync;
pub mod time;
