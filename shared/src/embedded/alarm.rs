//! The embedded alarm: the error log line is the machine's; this POSTs a JSON summary to `notify_url`, if set.

use std::time::Duration;

use async_trait::async_trait;

use crate::handlers::HttpClient;
use crate::machine::{dead_summary, Alarm};
use crate::model::Event;

pub struct NotifyUrl {
    client: HttpClient,
    url: Option<reqwest::Url>,
}

impl NotifyUrl {
    pub fn new(client: HttpClient, url: Option<reqwest::Url>) -> Self {
        Self { client, url }
    }
}

#[async_trait]
impl Alarm for NotifyUrl {
    async fn dead(&self, event: &Event) -> Result<(), String> {
        let Some(url) = &self.url else {
            return Ok(());
        };
        let resp = self
            .client
            .get()
            .post(url.clone())
            .timeout(Duration::from_secs(10))
            .header("content-type", "application/json")
            .body(dead_summary(event).to_string())
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
