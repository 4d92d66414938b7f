//! Helpers shared by the end-to-end tests (`tests/aws.rs`) and the bench (`bench/src/aws.rs`) that the production
//! library and the Lambda functions must not link. A crate of its own rather than a `#[path]` include, so both
//! users import it by name and build it once.

pub mod calls;
pub mod faultfs;
pub mod https;
pub mod providers;
pub mod sockets;
