//! Webhook signature schemes: verify a delivery, find its event id and type, and sign like the provider does.
//!
//! Pure and synchronous: no I/O and no clock (the caller passes `now`). Every check runs over the raw body
//! bytes, compares MACs in constant time, accepts any of several keys (rotation) and any of several signatures,
//! and never panics on input. Errors and `Debug` output never carry a secret, a signature or a body.
//!
//! Where things are:
//! - `scheme.rs`: [`Scheme`] and the dispatch of each operation (keys, verify, identify, handshakes, answers,
//!   kept headers, sign) to a built-in scheme or a family; [`HmacParams`].
//! - `families/`: the general families (`hmac`, `token`, `ed25519`, `ecdsa`, `rsa`, `jwt`, `custom`);
//!   `providers/`: each named provider in its own file, a family with its parameters filled in.
//! - `github.rs`, `stripe.rs`, `standard.rs` (Standard Webhooks and Svix), `shopify.rs`, `slack.rs`: the
//!   built-in schemes.
//! - `request.rs`: what a verifier sees ([`Request`]), verifies with ([`Credentials`], [`PublicKey`]), fetches
//!   ([`KeyRequest`]), answers ([`Answer`]) and stores ([`Identified`]).
//! - `errors.rs`: [`VerifyError`], [`IdError`], [`KeyError`], [`ParseError`]. `key.rs`: [`Key`], a secret.
//! - `mac.rs`: [`Algorithm`], the HMAC and its constant-time check; `encoding.rs`: [`Encoding`], hex and base64;
//!   `headers.rs`: reading signature headers; `clock.rs`: [`Clock`], timestamps against a tolerance.
//! - `identity.rs`: [`Identity`] and the checks every id and type passes; `locator.rs`: [`Locator`], where the
//!   generic schemes find them.
//! - `sample.rs`: sample deliveries for `inbox send`; `json.rs`: JSON pointers read in one pass; `time.rs`:
//!   RFC 3339 times.

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
