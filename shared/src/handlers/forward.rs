use std::time::Duration;

use async_trait::async_trait;
use reqwest::StatusCode;

use super::{Handler, HandlerError, HttpClient};
use crate::model::Event;

/// POSTs the original body and content type to a URL. 2xx is done; 408, 425, 429, 5xx, connection errors and
/// timeouts are retryable; any other status is permanent.
pub struct Forward {
    client: HttpClient,
    url: reqwest::Url,
    timeout: Duration,
    /// The destination's own headers (`headers = {…}`), checked at start.
    headers: Vec<(String, String)>,
}

impl Forward {
    pub fn new(
        client: HttpClient,
        url: reqwest::Url,
        timeout: Duration,
        headers: Vec<(String, String)>,
    ) -> Self {
        Self {
            client,
            url,
            timeout,
            headers,
        }
    }
}

/// The headers `forward` sets itself on every request (in `handle`, below), which a destination's `headers` may not
/// override.
pub const OWN_HEADERS: [&str; 5] = [
    "content-type",
    "idempotency-key",
    "x-inbox-source",
    "x-inbox-event-id",
    "x-inbox-attempt",
];

/// Whether a downstream answer is worth another try.
pub fn retryable_status(status: StatusCode) -> bool {
    status.is_server_error() || matches!(status.as_u16(), 408 | 425 | 429)
}

#[async_trait]
impl Handler for Forward {
    async fn handle(&self, event: &Event) -> Result<(), HandlerError> {
        let content_type = event
            .headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("content-type"))
            .map_or("application/octet-stream", |(_, v)| v.as_str());
        let request = self
            .headers
            .iter()
            .fold(self.client.client().post(self.url.clone()), |r, (name, value)| {
                r.header(name.as_str(), value.as_str())
            });
        let result = request
            .timeout(self.timeout)
            .header("content-type", content_type)
            .header("idempotency-key", event.key().idempotency_key())
            .header("x-inbox-source", event.source.as_str())
            .header("x-inbox-event-id", event.event_id.as_str())
            .header("x-inbox-attempt", event.attempts.to_string())
            .body(event.payload.clone())
            .send()
            .await;
        match result {
            Ok(resp) if resp.status().is_success() => Ok(()),
            Ok(resp) if retryable_status(resp.status()) => Err(HandlerError::Retryable(format!(
                "forward: HTTP {}",
                resp.status().as_u16()
            ))),
            Ok(resp) => Err(HandlerError::Permanent(format!(
                "forward: HTTP {}",
                resp.status().as_u16()
            ))),
            // The error text holds the URL, which is config, never a secret; `without_url` keeps it short.
            Err(e) if e.is_timeout() => Err(HandlerError::Retryable(format!(
                "forward: no answer within {} ms",
                self.timeout.as_millis()
            ))),
            Err(e) => Err(HandlerError::Retryable(format!("forward: {}", e.without_url()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_classes_follow_the_contract() {
        for s in [408, 425, 429, 500, 502, 503, 504] {
            assert!(
                retryable_status(StatusCode::from_u16(s).unwrap_or_default()),
                "{s}"
            );
        }
        for s in [400, 401, 403, 404, 409, 410, 413, 422] {
            assert!(
                !retryable_status(StatusCode::from_u16(s).unwrap_or_default()),
                "{s}"
            );
        }
    }
}
