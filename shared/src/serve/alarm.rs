//! The embedded alarms: the error log line is the machine's (or the health tracker's); this POSTs a JSON summary
//! to `notify_url`, if set.

use std::time::Duration;

use async_trait::async_trait;

use crate::delivery_health::HealthAlarm;
use crate::handlers::HttpClient;
use crate::machine::{dead_summary, Notifier, NotifyError};
use crate::model::Record;

#[derive(Clone)]
pub struct NotifyUrl {
    client: HttpClient,
    url: Option<reqwest::Url>,
}

impl NotifyUrl {
    pub fn new(client: HttpClient, url: Option<reqwest::Url>) -> Self {
        Self { client, url }
    }
}

impl NotifyUrl {
    /// POSTs `summary` to the URL, if one is set.
    async fn post(&self, summary: &serde_json::Value) -> Result<(), NotifyError> {
        let Some(url) = &self.url else {
            return Ok(());
        };
        let resp = self
            .client
            .client()
            .post(url.clone())
            .timeout(Duration::from_secs(10))
            .header("content-type", "application/json")
            .body(summary.to_string())
            .send()
            .await
            .map_err(|e| NotifyError(format!("notify_url: {}", e.without_url())))?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(NotifyError(format!(
                "notify_url answered HTTP {}",
                resp.status().as_u16()
            )))
        }
    }
}

#[async_trait]
impl Notifier for NotifyUrl {
    async fn dead(&self, event: &Record) -> Result<(), NotifyError> {
        self.post(&dead_summary(event)).await
    }
}

/// A delivery-health alarm: logged at error level, and POSTed on a task of its own (once per episode, so never
/// many at a time), out of the request's way.
impl HealthAlarm for NotifyUrl {
    fn raise(&self, alarm: serde_json::Value) {
        tracing::error!(alarm = %alarm, "delivery health");
        if self.url.is_none() {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            if let Err(e) = this.post(&alarm).await {
                tracing::warn!(error = %e, "the delivery-health alarm was not sent to notify_url");
            }
        });
    }
}
