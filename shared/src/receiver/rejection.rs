//! Requests turned away, and how they are answered and counted: the precise reason in a debug line, a generic one
//! in the answer (JSON `{"error": …, "code": …}`, no secrets or internals), a count in the metrics and, once a
//! minute per source and reason, a log line ([`RejectLog`]).

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::metrics::Reject;
use crate::ports::StoreError;

/// Rejected requests are logged as a count, at most one line a minute per source and reason (each one on its own
/// only at debug): a flood of unsigned or malformed requests to a public endpoint cannot turn into a logging bill.
#[derive(Default)]
pub struct RejectLog(std::sync::Mutex<std::collections::HashMap<(usize, Reject), (i64, u64)>>);

impl RejectLog {
    /// Counts one rejection at `now_ms`; the first of a new minute gets the count to log, itself included.
    pub fn count(&self, slot: usize, reason: Reject, now_ms: i64) -> Option<u64> {
        let minute = now_ms.div_euclid(60_000);
        let mut seen = crate::sync::lock(&self.0);
        let (logged_in, since) = seen.entry((slot, reason)).or_insert((i64::MIN, 0));
        *since += 1;
        if *logged_in == minute {
            return None;
        }
        *logged_in = minute;
        Some(std::mem::take(since))
    }
}

/// Errors are JSON `{"error": …, "code": …}`, with no secrets or internals.
pub(super) fn error(status: StatusCode, code: &'static str, message: &'static str) -> Response {
    (status, Json(json!({"error": message, "code": code}))).into_response()
}

/// A request turned away; the debug line says why precisely, the answer says it generically.
pub(super) enum Rejection {
    TooLarge,
    SlowClient,
    Unreadable,
    Signature(Reject),
    MissingId,
    MalformedBody,
    Unavailable(StoreError),
    /// Too many request bytes in memory already: answered before the rest of the body is read.
    Saturated,
    /// The key the request points at could not be had (`Reject::KeyUnavailable`), or not now: the source's key
    /// fetches for the minute are spent (`Reject::KeyBudget`). The sender retries after `retry_after` seconds.
    KeyUnavailable {
        reason: Reject,
        retry_after: u64,
    },
    /// A `GET` that is not the provider's handshake.
    NotAHandshake,
}

impl Rejection {
    pub(super) fn reason(&self) -> Reject {
        match self {
            Rejection::TooLarge => Reject::TooLarge,
            Rejection::SlowClient | Rejection::Unreadable => Reject::SlowClient,
            Rejection::Signature(r) => *r,
            Rejection::MissingId => Reject::MissingId,
            Rejection::MalformedBody => Reject::MalformedBody,
            Rejection::Unavailable(_) | Rejection::Saturated => Reject::Unavailable,
            Rejection::KeyUnavailable { reason, .. } => *reason,
            Rejection::NotAHandshake => Reject::MalformedBody,
        }
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        match self {
            Rejection::TooLarge => error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                "body exceeds this source's limit",
            ),
            Rejection::SlowClient => error(
                StatusCode::REQUEST_TIMEOUT,
                "timeout",
                "body not received in time",
            ),
            Rejection::Unreadable => error(
                StatusCode::BAD_REQUEST,
                "unreadable_body",
                "body could not be read",
            ),
            Rejection::Signature(Reject::Timestamp) => error(
                StatusCode::UNAUTHORIZED,
                "stale_timestamp",
                "signature timestamp outside the tolerance",
            ),
            Rejection::Signature(_) => error(
                StatusCode::UNAUTHORIZED,
                "invalid_signature",
                "signature verification failed",
            ),
            Rejection::MissingId => error(
                StatusCode::BAD_REQUEST,
                "missing_id",
                "no valid event id in the request",
            ),
            Rejection::MalformedBody => error(
                StatusCode::BAD_REQUEST,
                "malformed_body",
                "body is not the JSON this source sends",
            ),
            Rejection::Saturated => unavailable("1"),
            Rejection::KeyUnavailable { retry_after, .. } => {
                let mut resp = error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "key_unavailable",
                    "the provider's signing key cannot be fetched right now; retry later",
                );
                resp.headers_mut()
                    .insert(header::RETRY_AFTER, header::HeaderValue::from(retry_after));
                resp
            }
            Rejection::NotAHandshake => error(
                StatusCode::BAD_REQUEST,
                "not_a_handshake",
                "this source answers GET only for its provider's handshake",
            ),
            Rejection::Unavailable(e) => unavailable(if matches!(e, StoreError::Busy) { "1" } else { "5" }),
        }
    }
}

/// The `Retry-After` of a key that could not be had (its failure is remembered for `keys::FAILED_FOR`).
pub(super) const KEY_RETRY_AFTER_SECS: u64 = 5;

fn unavailable(retry_after: &'static str) -> Response {
    let mut resp = error(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        "cannot store events right now; retry later",
    );
    resp.headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from_static(retry_after));
    resp
}
