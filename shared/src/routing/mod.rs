//! Routing: which destinations an event goes to (docs/DESIGN.md "Routing: one event, many destinations").
//!
//! A route takes the events of some sources, through an optional [`Filter`], to one destination. The routes are
//! applied once, when the event is routed; each route's [`Verdict`] is kept with the event.

mod body;
pub mod filter;

pub use filter::{Facts, Filter, FilterError, Verdict};
