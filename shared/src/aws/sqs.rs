//! The SQS work queue: each message is a small pointer `{"source":…,"event_id":…}`, never the payload. A message
//! sent ahead of its record's create also says until when that create may still land (`"until"`, ms).

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::Client;

use crate::model::EventKey;
use crate::ports::{Queue, QueueDepth, QueueError};

/// SQS delays a message by at most 15 minutes; a longer backoff is delivered early and answered `NotDue`.
pub const MAX_DELAY: Duration = Duration::from_secs(900);

pub struct SqsQueue {
    client: Client,
    url: String,
}

impl SqsQueue {
    pub fn new(client: Client, url: impl Into<String>) -> Self {
        Self {
            client,
            url: url.into(),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn url(&self) -> &str {
        &self.url
    }
}

/// The message body for an event.
pub fn pointer(key: &EventKey) -> String {
    serde_json::json!({"source": key.source, "event_id": key.event_id}).to_string()
}

/// The message body for an event whose record is created after it was sent, by `until` (ms) or never.
pub fn announcement(key: &EventKey, until: i64) -> String {
    serde_json::json!({"source": key.source, "event_id": key.event_id, "until": until}).to_string()
}

/// The event a message body points at; `None` for a body that is not one of ours.
pub fn parse_pointer(body: &str) -> Option<EventKey> {
    serde_json::from_str(body).ok()
}

/// Until when (ms) a message sent ahead of its record's create may find no record: `None` for any other message.
pub fn announced_until(body: &str) -> Option<i64> {
    #[derive(serde::Deserialize)]
    struct Announced {
        until: i64,
    }
    serde_json::from_str::<Announced>(body).ok().map(|a| a.until)
}

/// Whole seconds for SQS's `DelaySeconds`, rounded up and capped at 15 minutes.
pub fn sqs_seconds(d: Duration) -> i32 {
    capped_seconds(d, MAX_DELAY)
}

/// How long a received message may be hidden again: SQS allows 12 hours from its receipt, less a margin here for
/// the time the invocation has taken already (the processor's timeout is at most 15 minutes).
pub const MAX_VISIBILITY: Duration = Duration::from_secs(12 * 3600 - 15 * 60);

/// Whole seconds for a received message's new visibility timeout (a retry's wait), rounded up, capped at
/// [`MAX_VISIBILITY`]: a wait up to that costs the message one receive, not one per 15 minutes.
pub fn visibility_seconds(d: Duration) -> i32 {
    capped_seconds(d, MAX_VISIBILITY)
}

fn capped_seconds(d: Duration, cap: Duration) -> i32 {
    let secs = d.min(cap).as_millis().div_ceil(1000);
    i32::try_from(secs).unwrap_or(i32::MAX)
}

impl SqsQueue {
    async fn send(&self, body: String, delay: Duration) -> Result<(), QueueError> {
        self.client
            .send_message()
            .queue_url(&self.url)
            .message_body(body)
            .delay_seconds(sqs_seconds(delay))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| QueueError(aws_sdk_sqs::error::DisplayErrorContext(e).to_string()))
    }

    /// Holds a received message back for `delay` (its backoff) before SQS hands it out again: the processor's
    /// answer for a message it reports failed.
    pub async fn hide(&self, receipt: &str, delay: Duration) -> Result<(), QueueError> {
        self.client
            .change_message_visibility()
            .queue_url(&self.url)
            .receipt_handle(receipt)
            .visibility_timeout(visibility_seconds(delay))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| QueueError(aws_sdk_sqs::error::DisplayErrorContext(e).to_string()))
    }
}

#[async_trait]
impl Queue for SqsQueue {
    async fn enqueue(&self, key: &EventKey, delay: Duration) -> Result<(), QueueError> {
        self.send(pointer(key), delay).await
    }

    async fn announce(&self, key: &EventKey, until: i64) -> Result<(), QueueError> {
        self.send(announcement(key, until), Duration::ZERO).await
    }

    async fn depth(&self) -> Result<Option<QueueDepth>, QueueError> {
        use aws_sdk_sqs::types::QueueAttributeName as A;
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(&self.url)
            .attribute_names(A::ApproximateNumberOfMessages)
            .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
            .attribute_names(A::ApproximateNumberOfMessagesDelayed)
            .send()
            .await
            .map_err(|e| QueueError(aws_sdk_sqs::error::DisplayErrorContext(e).to_string()))?;
        let count = |name: A| {
            out.attributes()
                .and_then(|a| a.get(&name))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Ok(Some(QueueDepth {
            waiting: count(A::ApproximateNumberOfMessages),
            in_flight: count(A::ApproximateNumberOfMessagesNotVisible),
            delayed: count(A::ApproximateNumberOfMessagesDelayed),
        }))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::{EventId, SourceName};

    #[test]
    fn pointers_round_trip_and_reject_strangers() {
        let key = EventKey::new(
            SourceName::parse("stripe").unwrap(),
            EventId::parse("evt_1\"x").unwrap(),
        );
        assert_eq!(parse_pointer(&pointer(&key)), Some(key.clone()));
        assert_eq!(
            parse_pointer("{\"source\":\"Bad/Name\",\"event_id\":\"x\"}"),
            None
        );
        assert_eq!(parse_pointer("not json"), None);
        // An announcement points at the same event and says until when its create may land.
        assert_eq!(parse_pointer(&announcement(&key, 42)), Some(key.clone()));
        assert_eq!(announced_until(&announcement(&key, 42)), Some(42));
        assert_eq!(announced_until(&pointer(&key)), None);
    }

    #[test]
    fn delays_round_up_to_whole_seconds_within_sqs_limits() {
        assert_eq!(sqs_seconds(Duration::ZERO), 0);
        assert_eq!(sqs_seconds(Duration::from_millis(1)), 1);
        assert_eq!(sqs_seconds(Duration::from_millis(2500)), 3);
        assert_eq!(sqs_seconds(Duration::from_secs(3600)), 900);
        assert_eq!(visibility_seconds(Duration::from_secs(3600)), 3600);
        assert_eq!(visibility_seconds(Duration::from_secs(86_400)), 42_300);
    }
}
