//! The receiver: the HTTP edge of intake, one router that both `inbox serve` and the receiver Lambda run, so the
//! runtimes cannot drift. Order of work (docs/DESIGN.md "Receiving"): source → body limit → signature → id →
//! the intake ([`crate::intake`]: the conditional create and the message, in the runtime's order) → answer.
//! Nothing is written before the signature holds, and no 200 leaves before the write is durable. Reading the body
//! within its bounds is in [`body`]; refusals and how they are answered and counted in [`rejection`].

mod body;
mod rejection;

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument;

pub use body::InflightBytes;
pub use rejection::RejectLog;

use crate::clock::World;
use crate::delivery_health::{DeliveryHealth, Seen};
use crate::intake::{Intake, Taken};
use crate::keys::{KeyFetchError, KeySource};
use crate::metrics::{Metrics, Reject};
use crate::model::{EventId, EventKey, KeptHeaders, NewEvent, Origin, ResentBodies};
use crate::ports::StoreError;
use crate::schemes::{checked_type, Answer, IdError, Identified, Identity, Item, Request, VerifyError};
use crate::source::{Source, Sources};
use body::read_body;
use rejection::{error, Rejection, KEY_RETRY_AFTER_SECS};

/// Everything a request needs, built once at start.
pub struct Receiver {
    pub sources: Sources,
    /// What becomes of a verified event: the create and the message, in the runtime's order.
    pub intake: Intake,
    pub metrics: Arc<Metrics>,
    /// How long a client may take to send its body before it gets 408.
    pub read_timeout: Duration,
    /// Request bodies in memory over every connection, in bytes ([`InflightBytes`]).
    pub inflight: InflightBytes,
    /// Delivery health: all-401 sources (the intake feeds it the rest).
    pub health: Arc<DeliveryHealth>,
    /// Rejected requests, logged as counts at most once a minute per source and reason.
    pub rejections: RejectLog,
    /// Fetches the keys a request points at (PayPal's and SNS's certificates, JWK sets), cached.
    pub keys: Arc<dyn KeySource>,
    /// The clock signatures' timestamps are checked against.
    pub world: World,
}

/// `POST /webhooks/{source}` and `GET /healthz`; `GET /metrics` too where `expose_metrics` (embedded: yes; on a
/// public Function URL: no, metrics go to CloudWatch there).
pub fn router(receiver: Arc<Receiver>, expose_metrics: bool) -> Router {
    let mut router = Router::new()
        // GET only answers the handshakes of sources whose provider sends them; others get 405.
        .route("/webhooks/{source}", post(receive).get(receive))
        .route("/healthz", get(healthz));
    if expose_metrics {
        router = router.route("/metrics", get(metrics));
    }
    router
        .fallback(|| async { error(StatusCode::NOT_FOUND, "not_found", "no such route") })
        // axum's own answers are plain text; every error here is JSON.
        .method_not_allowed_fallback(|| async {
            error(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "method not allowed on this route",
            )
        })
        .with_state(receiver)
}

/// Green only while the store can still take this process's writes (the SQLite writer thread is alive).
async fn healthz(State(r): State<Arc<Receiver>>) -> Response {
    match r.intake.ledger.check() {
        Ok(()) => Json(json!({"status": "ok"})).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "health check failed: the store cannot take writes");
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "the store cannot take writes",
            )
        }
    }
}

async fn metrics(State(r): State<Arc<Receiver>>) -> Response {
    (
        [(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
        r.metrics.render(),
    )
        .into_response()
}

async fn receive(
    State(r): State<Arc<Receiver>>,
    source: Result<Path<String>, PathRejection>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(source) = source.ok().and_then(|Path(name)| r.sources.get(&name).cloned()) else {
        rejected(&r, Metrics::UNKNOWN, "", Reject::UnknownSource);
        return error(StatusCode::NOT_FOUND, "unknown_source", "no such source");
    };
    if method != Method::POST && !source.scheme.accepts_get() {
        return error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "method not allowed on this route",
        );
    }
    let span = tracing::info_span!("receive", source = %source.name, event_id = tracing::field::Empty);
    async move {
        match accept(&r, &source, &method, &uri, &headers, body).await {
            Ok(response) => response,
            Err(reject) => {
                rejected(&r, source.index, source.name.as_str(), reject.reason());
                match reject {
                    // A provider that checks a refusal has no body (Xero) gets none.
                    Rejection::Signature(_) if source.scheme.bare_refusals() => {
                        StatusCode::UNAUTHORIZED.into_response()
                    }
                    reject => reject.into_response(),
                }
            }
        }
    }
    .instrument(span)
    .await
}

/// Counts a rejected request, and logs the count of its kind once a minute (see [`RejectLog`]): a warning where a
/// provider's key cannot be had or the source's key fetches are spent (real deliveries may be among them, and
/// wait for their sender's retry), else at info.
fn rejected(r: &Receiver, slot: usize, source: &str, reason: Reject) {
    r.metrics.rejected(slot, reason);
    if let Some(count) = r.rejections.count(slot, reason, r.world.now_ms()) {
        let line =
            "requests rejected since the last line of their kind (one line a minute; each one at debug)";
        if matches!(reason, Reject::KeyUnavailable | Reject::KeyBudget) {
            tracing::warn!(source, reason = reason.as_str(), count, "{line}");
        } else {
            tracing::info!(source, reason = reason.as_str(), count, "{line}");
        }
    }
}

async fn accept(
    r: &Receiver,
    source: &Source,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, Rejection> {
    // 1. No body read past the limit: a declared length over it is refused before reading anything.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > source.max_body_bytes as u64) {
        tracing::debug!(
            declared,
            limit = source.max_body_bytes,
            "rejected: body too large"
        );
        return Err(Rejection::TooLarge);
    }
    // The body's memory is held until its write is done (the intake's create), not only until the answer.
    let (body, memory) =
        read_body(body, source.max_body_bytes, declared, r.read_timeout, &r.inflight).await?;

    let req = Request {
        method,
        uri,
        headers,
        body: &body,
        received_ms: r.world.now_ms(),
    };
    let creds = &source.credentials;
    let refused = |e: VerifyError| {
        tracing::debug!(reason = %e, "rejected: signature");
        r.health.seen(source.index, Seen::Refused);
        Rejection::Signature(match e {
            VerifyError::Timestamp { .. } => Reject::Timestamp,
            _ => Reject::Signature,
        })
    };
    // A handshake the provider does not sign (a GET challenge): answered, never stored.
    if let Some(answered) = source.scheme.unsigned_handshake(creds, &req) {
        let answer = answered.map_err(refused)?;
        tracing::info!("answered a handshake; nothing stored");
        return Ok(answer_with(answer));
    }
    if method != Method::POST {
        return Err(Rejection::NotAHandshake);
    }

    // 2. The signature, over the raw bytes; first the key the request points at, from the provider's own hosts.
    let wanted = source.scheme.key_request(creds, &req).map_err(refused)?;
    let fetched = match &wanted {
        None => None,
        // Anyone can name a key, so what follows is logged at debug per request and counted once a minute
        // ([`rejected`]); a fetch that fails is logged once by the fetcher, not once per request waiting for it.
        Some(wanted) => match r.keys.fetch(source.name.as_str(), wanted).await {
            Ok(key) => Some(key),
            // A certificate under another name than the provider's: a forgery, like a key off its hosts.
            Err(KeyFetchError::Forged(why)) => return Err(refused(VerifyError::UntrustedKey(why))),
            // Not a verdict on the signature, which was not checked: a 503, and no count in delivery health, whose
            // 401 alarm would otherwise blame the secret of a source whose real deliveries only wait for a key.
            Err(KeyFetchError::Unavailable(e)) => {
                tracing::debug!(error = %e, "the provider's key could not be had: answered 503");
                return Err(Rejection::KeyUnavailable {
                    reason: Reject::KeyUnavailable,
                    retry_after: KEY_RETRY_AFTER_SECS,
                });
            }
            Err(KeyFetchError::Budget { retry_after }) => {
                tracing::debug!(?retry_after, "the source's key fetches are spent: answered 503");
                return Err(Rejection::KeyUnavailable {
                    reason: Reject::KeyBudget,
                    // Rounded up: a sender that waits as told finds the fetch it needs allowed.
                    retry_after: (retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0)).max(1),
                });
            }
        },
    };
    let now_unix = r.world.now_ms() / 1000;
    source
        .scheme
        .verify_request(creds, &req, now_unix, source.tolerance_secs, fetched.as_ref())
        .map_err(refused)?;
    // The key is the provider's: kept for the source where invented keys cannot push it out or keep it from
    // being fetched again.
    if let Some(wanted) = &wanted {
        r.keys.verified(source.name.as_str(), wanted);
    }
    crate::failpoint!("after_verify");
    if let Some(answer) = source.scheme.signed_handshake(creds, &req) {
        if let Some(url) = &answer.confirm {
            // Confirmed before the answer: if the confirmation cannot be made, the provider sends it again.
            if let Err(e) = r.keys.confirm(url).await {
                tracing::warn!(error = %e, "a subscription could not be confirmed: answered 503");
                return Err(Rejection::KeyUnavailable {
                    reason: Reject::KeyUnavailable,
                    retry_after: KEY_RETRY_AFTER_SECS,
                });
            }
        }
        tracing::info!("answered a handshake; nothing stored");
        return Ok(answer_with(answer));
    }
    let required = source.scheme.required_answer(&req);

    // 3. The event id; several for a batched delivery.
    let identified = source.scheme.identify_request(&req).map_err(|e| {
        tracing::debug!(reason = %e, "rejected: event id");
        match e {
            IdError::MalformedBody => Rejection::MalformedBody,
            _ => Rejection::MissingId,
        }
    })?;
    let identity = match identified {
        Identified::One(identity) => identity,
        Identified::Batch(items) => {
            let answer = accept_batch(r, source, headers, items, memory).await?;
            return Ok(required.map_or(answer, answer_with));
        }
    };
    let event_id = EventId::parse(&identity.event_id).map_err(|e| {
        tracing::debug!(reason = %e, "rejected: event id");
        Rejection::MissingId
    })?;
    tracing::Span::current().record("event_id", tracing::field::display(&event_id));
    let key = EventKey::new(source.name.clone(), event_id);

    // 4. The conditional create, in the runtime's order; the answer waits for durability. Where the signature
    // covers a nonce of its own but neither the body nor the id (Mailgun's token), the nonce is remembered in the
    // body's place: one signed delivery is one event, whatever body comes with it.
    let guard = match source.scheme.signed_nonce(&req) {
        Some(nonce) => ResentBodies::signed_nonce(nonce.as_bytes(), source.signed_nonces_within),
        None => source.resent_bodies,
    };
    let event = record(source, headers, key.clone(), identity.event_type, body, guard);
    let taken = r.intake.take(source, event, memory).await.map_err(unavailable)?;
    Ok(required.map_or_else(
        || match taken {
            Taken::Accepted { .. } => {
                tracing::debug!("accepted");
                Json(json!({"status": "accepted", "event_id": key.event_id})).into_response()
            }
            Taken::Duplicate { event_id, status } => {
                Json(json!({"status": "duplicate", "event_id": event_id, "state": status})).into_response()
            }
        },
        answer_with,
    ))
}

/// A store that cannot take a write now: 503, logged.
fn unavailable(e: StoreError) -> Rejection {
    tracing::warn!(error = %e, "store unavailable: answered 503");
    Rejection::Unavailable(e)
}

/// A provider's answer: a handshake's, or the one it requires to its events.
fn answer_with(answer: Answer) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    let mut resp = (status, answer.body.clone()).into_response();
    if let Ok(value) = header::HeaderValue::from_str(answer.content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    for (name, value) in &answer.headers {
        if let Ok(value) = header::HeaderValue::from_str(value) {
            resp.headers_mut().insert(name.clone(), value);
        }
    }
    // An echoed challenge is the provider's text, never a page to render.
    resp.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    resp
}

/// A batched delivery (docs/DESIGN.md "Providers: who can send"): one event per item, all made durable in one
/// atomic write before the one answer, which lists each item's outcome. A retried batch finds the items already
/// stored as duplicates and stores the rest ([`Intake::take_batch`]).
async fn accept_batch(
    r: &Receiver,
    source: &Source,
    headers: &HeaderMap,
    items: Vec<Item>,
    memory: Option<OwnedSemaphorePermit>,
) -> Result<Response, Rejection> {
    let mut events = Vec::with_capacity(items.len());
    let mut notes = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for Item { identity, payload } in items {
        let Identity { event_id, event_type } = identity;
        let event_id = EventId::parse(&event_id).map_err(|e| {
            tracing::debug!(reason = %e, "rejected: an item's event id");
            Rejection::MissingId
        })?;
        let key = EventKey::new(source.name.clone(), event_id);
        if !seen.insert(key.clone()) {
            // The same id twice in one delivery is one event: the first item stands.
            notes.push(key.event_id.to_string());
            continue;
        }
        // The batch's scheme signs each item's id with its body: no resend under a fresh id to look for.
        let ignored = ResentBodies::Ignored;
        events.push(record(
            source,
            headers,
            key,
            event_type,
            Bytes::from(payload),
            ignored,
        ));
    }
    if !notes.is_empty() {
        tracing::info!(
            repeated = notes.len(),
            "ids repeated within one delivery: stored once"
        );
    }
    let keys: Vec<EventId> = events.iter().map(|e| e.key.event_id.clone()).collect();
    let taken = r
        .intake
        .take_batch(source, events, memory)
        .await
        .map_err(unavailable)?;
    let outcomes: Vec<_> = keys
        .iter()
        .zip(taken)
        .map(|(event_id, taken)| match taken {
            Taken::Accepted { .. } => json!({"event_id": event_id, "status": "accepted"}),
            Taken::Duplicate { status, .. } => {
                json!({"event_id": event_id, "status": "duplicate", "state": status})
            }
        })
        .collect();
    tracing::debug!(items = outcomes.len(), "batch accepted");
    Ok(Json(json!({"status": "accepted", "events": outcomes})).into_response())
}

/// A verified event's record, as one event's path and a batch's items write it: its kept headers, and its type
/// checked (one that is not usable is left out, and the kept headers say why).
fn record(
    source: &Source,
    headers: &HeaderMap,
    key: EventKey,
    event_type: Option<String>,
    payload: Bytes,
    resent_bodies: ResentBodies,
) -> NewEvent {
    let mut kept = kept_headers(source, headers);
    let (event_type, dropped) = checked_type(event_type);
    if let Some(why) = dropped {
        tracing::info!(reason = %why, "event type left out");
        kept.push((TYPE_NOTE.to_owned(), format!("event type left out: {why}")));
    }
    NewEvent {
        payload_sha256: hex::encode(Sha256::digest(&payload)),
        key,
        event_type,
        payload,
        headers: kept,
        origin: Origin::Webhook,
        resent_bodies,
    }
}

/// The kept header that says what the receiver left out of a verified event, and why.
pub const TYPE_NOTE: &str = "x-inbox-note";

fn kept_headers(source: &Source, headers: &HeaderMap) -> KeptHeaders {
    source
        .kept_headers
        .iter()
        .filter_map(|name| {
            let value = headers.get(name)?.to_str().ok()?;
            Some((name.as_str().to_owned(), value.to_owned()))
        })
        .collect()
}
