//! The operator console (docs/DESIGN.md "The two runtimes and their parts"): server-rendered pages over the store
//! ports of `inbox-core`, for either runtime. What arrived, what is stuck or dead, and a replay through the same
//! conditional transition as `inbox replay` (two replays at once enqueue once). `inbox console` serves it
//! (`cli/commands/console.rs`), and on AWS hands it the CloudWatch chart (`inbox_core::aws::charts`) as its
//! [`Timeline`](inbox_core::ports::Timeline).
//!
//! Security, in the order a request meets it ([`guard`]):
//! - loopback by default; a listener elsewhere needs a token ([`check_listen`]), and then every request carries it
//!   (`Authorization: Bearer`, or the `HttpOnly`, `SameSite=Strict`, `Secure` session cookie the login form sets);
//!   sessions are held in this process ([`sessions`]) and end when idle, when too old, or at logout;
//! - on a loopback listener without a token, the `Host` must be a loopback name, so a DNS-rebinding page cannot
//!   read the console from the operator's browser;
//! - every state change is a POST carrying a CSRF token (an HMAC, under a per-process random key, of the session)
//!   from a page of the same origin (`Origin` and `Sec-Fetch-Site` checked);
//! - every answer carries a strict Content-Security-Policy (no script at all), `X-Frame-Options: DENY` and
//!   `X-Content-Type-Options: nosniff`; payloads are rendered as escaped text by the templates, and downloaded as
//!   `application/octet-stream` attachments; no secret is ever rendered (signature-like kept headers are not shown).
//!
//! Where things are:
//! - `router.rs`: [`Console`], what it serves from, and its routes;
//! - `guard.rs`: the security layer around every route (host, token or session, Origin, CSRF; the headers every
//!   answer carries); `sessions.rs`: the logins this process holds ([`SessionPolicy`]);
//! - `browse.rs`: the pages that read (overview, events, one event, its raw body); `counts.rs`: the overview's
//!   counts, kept a few seconds;
//! - `replay.rs`: replaying one event, or every one a filter matches ([`replay_event`]); `login.rs`: login and
//!   logout;
//! - `filters.rs`: what the URLs carry (the events list's filters and cursor, one event's key);
//! - `error.rs`: the answers that are not pages; `pages.rs` and `style.css`: the templates and their stylesheet;
//! - `tests/`: the handler tests, over SQLite. Beside `src/`, `tests/console/`: Chromium, AWS, the bench.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::unwrap_used))]

mod browse;
mod counts;
mod error;
mod filters;
mod guard;
mod login;
mod pages;
mod replay;
mod router;
mod sessions;

pub use replay::{replay_event, Replayed};
pub use router::Console;
pub use sessions::SessionPolicy;

use std::net::SocketAddr;

use secrecy::{ExposeSecret, SecretString};

/// Where `inbox console` listens unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:3001";
/// The environment variable holding the token a non-loopback console requires.
pub const TOKEN_ENV: &str = "INBOX_CONSOLE_TOKEN";
/// Events per page of the events list.
pub const PAGE_SIZE: usize = 50;
/// No script, no frames, no plugins; styles and images only from the console itself; forms post only to it.
pub const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
    frame-ancestors 'none'; base-uri 'none'";

/// Why the console will not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the console listens on {0}, which is not a loopback address: set {TOKEN_ENV} so that every request must carry it")]
    TokenRequired(SocketAddr),
    #[error("{TOKEN_ENV} is set but shorter than 16 characters")]
    WeakToken,
}

/// Refuses a non-loopback listener without a token (and a token too short to stand guessing).
pub fn check_listen(addr: SocketAddr, token: Option<&SecretString>) -> Result<(), StartError> {
    match token {
        Some(t) if t.expose_secret().len() < 16 => Err(StartError::WeakToken),
        Some(_) => Ok(()),
        None if addr.ip().is_loopback() => Ok(()),
        None => Err(StartError::TokenRequired(addr)),
    }
}

#[cfg(test)]
mod tests;
