//! One module per `inbox` command; `main.rs` holds their flags, the dispatch and what they share.

pub mod aws;
pub mod console;
pub mod events;
pub mod reconcile;
pub mod replay;
pub mod routes;
pub mod send;
pub mod serve;
