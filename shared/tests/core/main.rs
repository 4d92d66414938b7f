//! inbox-core's integration tests, one binary (`cargo test -p inbox-core --test core`); each module is one suite,
//! run alone with its path as the filter: `cargo test -p inbox-core --test core ledger::`. The `*_bench` module
//! is a measurement, ignored unless asked for (`-- --ignored`, see it).
//!
//! `ledger` runs the store contract (`inbox_core::contract`) over every store, each in a module of its own with its
//! harness (`ledger::memory::`, `ledger::sqlite::`, `ledger::dynamodb::` with the `aws` feature); `machine` and
//! `reconcile` run over every store the same way. What one store does beyond the ports is tested beside it:
//! `sqlite`, `postgres`, `dynamodb`. `simulation` plays thousands of seeds of one process under faults.

#[cfg(feature = "aws")]
mod dynamodb;
mod ledger;
mod machine;
mod metrics_bench;
mod model;
#[cfg(feature = "postgres")]
mod postgres;
mod properties;
mod reconcile;
mod reconcile_providers;
mod simulation;
mod sqlite;
