//! The receiver: one HTTP router that both `inbox serve` and the receiver Lambda run, so the runtimes cannot drift.
//! Order of work (docs/DESIGN.md "Receiving"): source → body limit → signature → id → conditional create → enqueue →
//! answer. Nothing is written before the signature holds, and no 200 leaves before the write is durable. Where the
//! queue vouches for what it was sent (AWS), the enqueue comes before the create, after a read for a duplicate.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::BytesMut;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::Instrument;

use crate::delivery_health::{DeliveryHealth, Seen};
use crate::keys::{KeyFetchError, KeySource};
use crate::metrics::{Metrics, Reject};
use crate::model::{EventId, EventKey, KeptHeaders, NewEvent, Origin, Status};
use crate::ports::{Created, Ledger, Queue, StoreError};
use crate::rules;
use crate::schemes::{checked_type, Answer, IdError, Identified, Identity, Item, Request, VerifyError};
use crate::source::{Source, Sources};
use crate::time::{ms, now_ms};

/// Everything a request needs, built once at start.
pub struct Receiver {
    pub sources: Sources,
    pub ledger: Arc<dyn Ledger>,
    pub queue: Arc<dyn Queue>,
    pub metrics: Arc<Metrics>,
    /// How long a client may take to send its body before it gets 408.
    pub read_timeout: Duration,
    /// Request bodies in memory over every connection, in bytes ([`InflightBytes`]).
    pub inflight: InflightBytes,
    /// Delivery health: duplicates out of proportion, all-401 sources, payload mismatches.
    pub health: Arc<DeliveryHealth>,
    /// Rejected requests, logged as counts at most once a minute per source and reason.
    pub rejections: RejectLog,
    /// The sweeper's grace: a duplicate of a RECEIVED event enqueues it again only once it is this old.
    pub resend_grace: Duration,
    /// In which order a delivery is written and enqueued: the runtime's choice, since it composes the store and
    /// the queue (docs/DESIGN.md, "Ordering on each runtime").
    pub intake: Intake,
    /// Fetches the keys a request points at (PayPal's and SNS's certificates, JWK sets), cached.
    pub keys: Arc<dyn KeySource>,
    /// Where a new event's handler runs in this process right after its create (embedded: the worker pool), claimed
    /// in the create's own write while a worker is free; `None` where events wait for their message (AWS).
    pub runner: Option<Arc<dyn Runner>>,
}

/// The workers of this process, as the receiver hands them a new event: while a worker is free, the event is created
/// claimed under a lease of theirs ([`Ledger::create_claimed`]) and runs as soon as the create is durable, without
/// a message, a claim or a read of its body. With every worker busy it is created RECEIVED and enqueued, as without
/// a runner.
pub trait Runner: Send + Sync + 'static {
    /// The lease a create of `key` takes for the workers, while one is free; `None` when every worker is busy.
    fn reserve(&self, key: &EventKey) -> Option<Reserved>;

    /// Runs and settles `event`, created claimed under `reserved`'s lease, in the next free worker.
    fn run(&self, reserved: Reserved, event: crate::model::Event);
}

/// The lease a new event's create takes for the workers: its owner and its length.
pub struct Reserved {
    pub owner: String,
    pub lease: Duration,
}

/// The order of a first delivery's durable write and its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intake {
    /// Write, then enqueue (embedded: the ledger is its own queue, and a lost enqueue is found by the sweeper).
    WriteThenEnqueue,
    /// Read, then send the message, then write (AWS: the work queue vouches for the record from its first moment,
    /// so it needs no sparse-index entry). `window`: how long after sending it the create may still land (this
    /// process's own time bound, and a margin for a write in flight when it ended).
    AnnounceThenWrite { window: Duration },
}

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

/// The bytes of request bodies held in memory at once, over every connection. Each request takes what its body
/// needs as the bytes arrive, one chunk at a time, and gives it all back when answered; a chunk that would pass
/// the bound gets 503 with Retry-After. So many slow or large senders together can neither exhaust memory nor make
/// the server queue without bound, and a sender that declares a large body but trickles it holds only what it has
/// sent: it cannot keep room from the normal deliveries beside it.
#[derive(Clone)]
pub struct InflightBytes(Arc<Semaphore>);

impl InflightBytes {
    pub fn new(max_bytes: usize) -> Self {
        Self(Arc::new(Semaphore::new(max_bytes.min(Semaphore::MAX_PERMITS))))
    }

    fn take(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let n = u32::try_from(bytes).ok()?;
        self.0.clone().try_acquire_many_owned(n).ok()
    }

    /// Bytes free now (for tests and `/metrics`).
    pub fn available(&self) -> usize {
        self.0.available_permits()
    }
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
    match r.ledger.check() {
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

/// Errors are JSON `{"error": …, "code": …}`, with no secrets or internals.
fn error(status: StatusCode, code: &'static str, message: &'static str) -> Response {
    (status, Json(json!({"error": message, "code": code}))).into_response()
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
    if let Some(count) = r.rejections.count(slot, reason, now_ms()) {
        let line =
            "requests rejected since the last line of their kind (one line a minute; each one at debug)";
        if matches!(reason, Reject::KeyUnavailable | Reject::KeyBudget) {
            tracing::warn!(source, reason = reason.as_str(), count, "{line}");
        } else {
            tracing::info!(source, reason = reason.as_str(), count, "{line}");
        }
    }
}

/// A request turned away; the debug line says why precisely, the answer says it generically.
enum Rejection {
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
    fn reason(&self) -> Reject {
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
const KEY_RETRY_AFTER_SECS: u64 = 5;

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

/// Reads the body within `timeout`, at most `limit` bytes of it (no byte past the limit is read), taking the
/// memory for each chunk from `inflight` as it arrives. The permit that comes back holds that memory until dropped.
async fn read_body(
    body: Body,
    limit: usize,
    declared: Option<u64>,
    timeout: Duration,
    inflight: &InflightBytes,
) -> Result<(Bytes, Option<OwnedSemaphorePermit>), Rejection> {
    // A body of several chunks is gathered in one buffer of its declared length (within the limit, checked
    // before), so the memory it takes is what `inflight` counts, not up to twice that as a doubling buffer grows.
    let expected = declared.map_or(0, |n| usize::try_from(n).unwrap_or(limit).min(limit));
    let read = async {
        let mut body = Limited::new(body, limit);
        let mut held: Option<OwnedSemaphorePermit> = None;
        // Most bodies arrive in one chunk: kept as it came, copied only when a second one follows.
        let mut first: Option<Bytes> = None;
        let mut joined: Option<BytesMut> = None;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                if e.downcast_ref::<LengthLimitError>().is_some() {
                    Rejection::TooLarge
                } else {
                    Rejection::Unreadable
                }
            })?;
            let Ok(chunk) = frame.into_data() else {
                continue; // trailers carry nothing we keep
            };
            if chunk.is_empty() {
                continue;
            }
            let Some(permit) = inflight.take(chunk.len()) else {
                tracing::debug!(
                    chunk = chunk.len(),
                    "rejected: too many request bytes in memory; answered 503"
                );
                return Err(Rejection::Saturated);
            };
            match held.as_mut() {
                Some(h) => h.merge(permit),
                None => held = Some(permit),
            }
            match (&mut joined, first.take()) {
                (Some(buf), _) => buf.extend_from_slice(&chunk),
                (None, None) => first = Some(chunk),
                (None, Some(earlier)) => {
                    let mut buf = BytesMut::with_capacity(expected.max(earlier.len() + chunk.len()));
                    buf.extend_from_slice(&earlier);
                    buf.extend_from_slice(&chunk);
                    joined = Some(buf);
                }
            }
        }
        let bytes = match joined {
            Some(buf) => buf.freeze(),
            None => first.unwrap_or_default(),
        };
        Ok((bytes, held))
    };
    tokio::time::timeout(timeout, read)
        .await
        .map_err(|_| Rejection::SlowClient)?
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
    // The body's memory is held until its write is done (see [`create`]), not only until the answer.
    let (body, memory) =
        read_body(body, source.max_body_bytes, declared, r.read_timeout, &r.inflight).await?;

    let req = Request {
        method,
        uri,
        headers,
        body: &body,
        received_ms: now_ms(),
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
    let fetched = match source.scheme.key_request(creds, &req).map_err(refused)? {
        None => None,
        // Anyone can name a key, so what follows is logged at debug per request and counted once a minute
        // ([`rejected`]); a fetch that fails is logged once by the fetcher, not once per request waiting for it.
        Some(wanted) => match r.keys.fetch(source.name.as_str(), &wanted).await {
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
    let now_unix = now_ms() / 1000;
    source
        .scheme
        .verify_request(creds, &req, now_unix, source.tolerance_secs, fetched.as_ref())
        .map_err(refused)?;
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

    // 4. Conditional create; the answer waits for durability.
    let mut event = record(
        source,
        headers,
        key.clone(),
        identity.event_type,
        body,
        source.resent_bodies,
    );
    let payload_sha256 = event.payload_sha256.clone();
    let unavailable = |e: StoreError| {
        tracing::warn!(error = %e, "store unavailable: answered 503");
        Rejection::Unavailable(e)
    };
    // Where the queue vouches for a record from the moment its message is sent (DynamoDB with SQS), the message
    // goes first, once a read has found no record: a duplicate sends none, and the record needs no index entry.
    let mut found = None;
    if let Intake::AnnounceThenWrite { window } = r.intake {
        match r.ledger.peek(&key).await.map_err(unavailable)? {
            Some(existing) => found = Some(rules::duplicate_of(&existing)),
            None => {
                let until = now_ms().saturating_add(ms(window));
                match r.queue.announce(&key, until).await {
                    Ok(()) => event.announced = true,
                    // Written unannounced, so into the sweeper's index; the send is tried once more after the
                    // write, and counted as a lost enqueue only if that fails too.
                    Err(e) => {
                        tracing::info!(error = %e, "enqueue failed ahead of the write; tried again after it")
                    }
                }
            }
        }
    }
    let announced = event.announced;
    let (created, claimed) = match found {
        Some(duplicate) => (duplicate, None),
        None => create(r, event, memory).await.map_err(unavailable)?,
    };
    match created {
        Created::New | Created::Resent { .. } => {
            r.metrics.accepted(source.index);
            match &created {
                Created::Resent { of } => {
                    r.metrics.resent_body(source.index);
                    tracing::warn!(resent_of = %of,
                        "a body already stored under another id of this type: stored and run as its own event");
                    r.health.seen(source.index, Seen::Resent { key: &key, of });
                }
                _ => r.health.seen(source.index, Seen::Accepted),
            }
            if !announced {
                crate::failpoint!("after_write_before_enqueue");
                match (claimed, &r.runner) {
                    (Some((reserved, event)), Some(runner)) => runner.run(reserved, event),
                    _ => enqueue(r, source, &key).await,
                }
                crate::failpoint!("after_enqueue_before_answer");
            }
            tracing::debug!("accepted");
            Ok(required.map_or_else(
                || Json(json!({"status": "accepted", "event_id": key.event_id})).into_response(),
                answer_with,
            ))
        }
        Created::Duplicate {
            event_id,
            status,
            payload_sha256: first,
            origin,
            since,
        } => {
            r.metrics.duplicate(source.index);
            if event_id != key.event_id {
                tracing::warn!(stored_event_id = %event_id,
                    "a body already stored under another id: answered as a duplicate of that event");
            }
            // A reconciled record holds the provider's API object, which need not match the webhook's bytes.
            let mismatch = first != payload_sha256 && origin == Origin::Webhook && event_id == key.event_id;
            // The stored event's key: this one's, unless the body was refused as a resend under a fresh id.
            let resent;
            let stored = if event_id == key.event_id {
                &key
            } else {
                resent = EventKey::new(key.source.clone(), event_id.clone());
                &resent
            };
            r.health.seen(
                source.index,
                Seen::Duplicate {
                    key: stored,
                    mismatch,
                },
            );
            if mismatch {
                r.metrics.payload_mismatch(source.index);
                tracing::warn!(
                    first_sha256 = %first, this_sha256 = %payload_sha256,
                    "duplicate with a different payload: the sender broke its contract; the first payload stands"
                );
            }
            // Still RECEIVED past the grace: its first enqueue may have been lost in a crash between the write and
            // the enqueue, and this heals it without waiting for the sweeper. A younger one has its message in
            // flight: a retry storm adds none. Where the message goes before the write, no such crash exists: a
            // RECEIVED record has its message, or (its send failed) is in the sweeper's index; and a backlog of
            // RECEIVED events older than the grace must not turn each duplicate into another message.
            let enqueued_first = announced || r.intake != Intake::WriteThenEnqueue;
            if !enqueued_first
                && status == Status::Received
                && now_ms().saturating_sub(since) >= ms(r.resend_grace)
            {
                enqueue(r, source, stored).await;
            }
            Ok(required.map_or_else(
                || {
                    Json(json!({"status": "duplicate", "event_id": event_id, "state": status}))
                        .into_response()
                },
                answer_with,
            ))
        }
    }
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
/// stored as duplicates and stores the rest. Every item is written before its message (the ledger's index vouches
/// for any whose enqueue is lost), in both runtimes.
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
        let ignored = crate::model::ResentBodies::Ignored;
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
    // What the answer and the duplicates' check need once the events have gone to the store.
    let sent: Vec<(EventKey, String)> = events
        .iter()
        .map(|e| (e.key.clone(), e.payload_sha256.clone()))
        .collect();
    let ledger = r.ledger.clone();
    let created = tokio::spawn(async move {
        let created = ledger.create_batch(events).await;
        drop(memory);
        created
    })
    .await
    .map_err(|e| StoreError::Unavailable(format!("the create stopped: {e}")))
    .and_then(|c| c)
    .map_err(|e| {
        tracing::warn!(error = %e, "store unavailable: answered 503");
        Rejection::Unavailable(e)
    })?;
    crate::failpoint!("after_write_before_enqueue");
    let mut outcomes = Vec::with_capacity(sent.len());
    for ((key, sha256), created) in sent.iter().zip(created) {
        match created {
            Created::New | Created::Resent { .. } => {
                r.metrics.accepted(source.index);
                r.health.seen(source.index, Seen::Accepted);
                enqueue(r, source, key).await;
                outcomes.push(json!({"event_id": key.event_id, "status": "accepted"}));
            }
            Created::Duplicate {
                event_id,
                status,
                since,
                payload_sha256: first,
                origin,
            } => {
                r.metrics.duplicate(source.index);
                // The same item sent again with other bytes: the sender broke its contract; the first stands.
                let mismatch = origin == Origin::Webhook && event_id == key.event_id && *sha256 != first;
                if mismatch {
                    r.metrics.payload_mismatch(source.index);
                    tracing::warn!(event_id = %key.event_id, first_sha256 = %first,
                        "a batch item already stored with a different payload: the first payload stands");
                }
                r.health.seen(source.index, Seen::Duplicate { key, mismatch });
                if r.intake == Intake::WriteThenEnqueue
                    && status == Status::Received
                    && now_ms().saturating_sub(since) >= ms(r.resend_grace)
                {
                    enqueue(r, source, key).await;
                }
                outcomes.push(json!({"event_id": key.event_id, "status": "duplicate", "state": status}));
            }
        }
    }
    tracing::debug!(items = outcomes.len(), "batch accepted");
    Ok(Json(json!({"status": "accepted", "events": outcomes})).into_response())
}

/// The create, on a task of its own that holds the body's memory until the ledger is done with the body: a client
/// that disconnects drops this request, but not the write queued with its body, so the bytes stay counted in
/// `max_inflight_bytes` for as long as they are in memory. With a worker free ([`Runner`]), the event is created
/// claimed by it, and answered with the record to run; a worker reserved for an event that was not created is free
/// again at once.
async fn create(
    r: &Receiver,
    event: NewEvent,
    memory: Option<OwnedSemaphorePermit>,
) -> Result<(Created, Option<(Reserved, crate::model::Event)>), StoreError> {
    let ledger = r.ledger.clone();
    let reserved = r.runner.as_ref().and_then(|runner| runner.reserve(&event.key));
    let write = tokio::spawn(async move {
        let created = match reserved {
            None => ledger.create(event).await.map(|created| (created, None)),
            Some(reserved) => ledger
                .create_claimed(event, &reserved.owner, reserved.lease)
                .await
                .map(|(created, claimed)| (created, claimed.map(|event| (reserved, event)))),
        };
        drop(memory);
        created
    });
    write
        .await
        .map_err(|e| StoreError::Unavailable(format!("the create stopped: {e}")))?
}

/// The record is durable already, so a failed enqueue still answers 200: the sweeper enqueues it later. It is
/// counted (`EnqueueFailed`, alarmed on AWS): events then wait for the sweeper's next pass, and many of them mean
/// the queue is down.
async fn enqueue(r: &Receiver, source: &Source, key: &EventKey) {
    if let Err(e) = r.queue.enqueue(key, Duration::ZERO).await {
        r.metrics.enqueue_failed(source.index);
        tracing::warn!(error = %e, "enqueue failed after the durable write; the sweeper will pick it up");
    }
}

/// A verified event's record, as one event's path and a batch's items write it: its kept headers, and its type
/// checked (one that is not usable is left out, and the kept headers say why).
fn record(
    source: &Source,
    headers: &HeaderMap,
    key: EventKey,
    event_type: Option<String>,
    payload: Bytes,
    resent_bodies: crate::model::ResentBodies,
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
        announced: false,
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
