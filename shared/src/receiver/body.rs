//! Reading a request's body: within the source's limit and a time bound, its memory counted against the bytes
//! every connection may hold at once ([`InflightBytes`]).

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use bytes::BytesMut;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::rejection::Rejection;

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

    pub(super) fn take(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let n = u32::try_from(bytes).ok()?;
        self.0.clone().try_acquire_many_owned(n).ok()
    }

    /// Bytes free now (for tests and `/metrics`).
    pub fn available(&self) -> usize {
        self.0.available_permits()
    }
}

/// Reads the body within `timeout`, at most `limit` bytes of it (no byte past the limit is read), taking the
/// memory for each chunk from `inflight` as it arrives. The permit that comes back holds that memory until dropped.
pub(super) async fn read_body(
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
