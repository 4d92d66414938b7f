//! The embedded runtime end to end: every test here runs real `inbox serve` processes (the `inbox` binary of this
//! package, built with its crash points) over HTTP, with SIGKILLs and restarts, against a fresh data directory each.
//!
//! One test binary (`cargo test --test serve`); each module is one suite, run alone with its path as the filter:
//! `cargo test --test serve crashpoints::`.

// The helpers every suite uses: the server under test, the operator commands, a sink, signatures.
mod common;
// A provider's sender: signing its webhooks, drawing which are lost (shared by both test binaries).
#[path = "../sender.rs"]
mod sender;

mod crash;
mod crashpoints;
mod disk;
mod faults;
mod fixtures;
mod hardening;
mod health;
mod hostile;
mod keys;
mod lossy;
mod memory;
mod owners;
mod postgres;
mod processing;
mod providers;
mod receive;
mod reconcile;
mod routes;
mod security;
mod soak;
mod storm;
