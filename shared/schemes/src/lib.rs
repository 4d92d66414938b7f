//! Webhook signature schemes: verify a delivery, find its event id and type, and sign like the provider does.
//!
//! Pure and synchronous: no I/O and no clock (the caller passes `now`). Every check runs over the raw body
//! bytes, compares MACs in constant time, accepts any of several keys (rotation) and any of several signatures,
//! and never panics on input. Errors and `Debug` output never carry a secret, a signature or a body.

mod clock;
mod encoding;
mod errors;
pub mod families;
mod github;
mod headers;
mod identity;
mod json;
mod key;
mod locator;
mod mac;
pub mod providers;
pub mod request;
pub mod sample;
mod scheme;
mod shopify;
mod slack;
mod standard;
mod stripe;
mod time;

pub use clock::Clock;
pub use encoding::Encoding;
pub use errors::{IdError, KeyError, ParseError, VerifyError};
pub use families::{Family, Signer};
pub use identity::{checked_type, Identity};
pub use key::Key;
pub use locator::Locator;
pub use mac::Algorithm;
pub use providers::{Identify, Preset};
pub use request::{Answer, Credentials, Identified, Item, KeyRequest, PublicKey, Request, Signed};
pub use scheme::{HmacParams, Scheme};

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
