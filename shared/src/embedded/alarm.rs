//! The embedded alarm: the error log line is the machine's; this POSTs a JSON summary to `notify_url`, if set.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;

use crate::machine::Alarm;
use crate::model::Event;
use crate::time::rfc3339;

pub struct NotifyUrl {
    client: reqwest::Client,
    url: Option<reqwest::Url>,
}

impl NotifyUrl {
    pub fn new(client: reqwest::Client, url: Option<reqwest::Url>) -> Self {
        Self { client, url }
    }
}

/// The summary sent for a dead event: what an operator needs to act, never the payload.
pub fn summary(event: &Event) -> serde_json::Value {
    json!({
        "alarm": "event_dead",
        "source": event.source,
        "event_id": event.event_id,
        "event_type": event.event_type,
        "status": event.status,
        "attempts": event.attempts,
        "last_error": event.last_error,
        "received_at": rfc3339(event.received_at),
        "dead_at": rfc3339(event.updated_at),
    })
}

#[async_trait]
impl Alarm for NotifyUrl {
    async fn dead(&self, event: &Event) -> Result<(), String> {
        let Some(url) = &self.url else {
            return Ok(());
        };
        let resp = self
            .client
            .post(url.clone())
            .timeout(Duration::from_secs(10))
            .header("content-type", "application/json")
            .body(summary(event).to_string())
            .send()
            .await
            .map_err(|e| format!("notify_url: {}", e.without_url()))?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(format!("notify_url answered HTTP {}", resp.status().as_u16()))
        }
    }
}
