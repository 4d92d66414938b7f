//! webhook-inbox core: everything both runtimes share. The receiver router ([`receiver`]), the state machine
//! ([`machine`]), the signature schemes ([`schemes`]), the ports ([`ports`]) and their adapters ([`adapters`]).
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::unwrap_used))]

pub mod adapters;
#[cfg(feature = "aws")]
pub mod aws;
pub mod config;
pub mod console;
#[cfg(feature = "embedded")]
pub mod embedded;
#[doc(hidden)]
pub mod failpoint;
pub mod handlers;
pub mod health;
pub mod machine;
pub mod metrics;
pub mod model;
pub mod ports;
pub mod receiver;
pub mod reconcile;
pub mod rules;
pub mod schemes;
pub mod source;
pub mod time;
