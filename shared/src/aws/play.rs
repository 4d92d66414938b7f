//! `inbox aws play`: what AWS does around the functions, for functions served locally by `cargo lambda watch`
//! (or any server of Lambda's Invoke API). The event source mappings: receive a batch from the work queue, invoke
//! the processor with it, delete what it did not report as a batch item failure (the rest comes back after its
//! visibility timeout); the same from the dead-letter queue to the alarm function. The schedules: the sweeper every
//! minute, the reconciler every five.
//!
//! The Invoke API: `POST {base}/2015-03-31/functions/{name}/invocations` with the event as the JSON body, the
//! function's result as the JSON answer (https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html); a function
//! error is answered with `X-Amz-Function-Error` set. `cargo lambda watch` serves it on port 9000.

use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use aws_sdk_sqs::types::MessageSystemAttributeName;

use super::functions::as_delivered;

/// What one pump of a queue did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pumped {
    /// Messages received and handed to the function.
    pub received: usize,
    /// Deleted: handled by the function.
    pub deleted: usize,
    /// Reported as batch item failures, or in a batch whose invocation failed: left for SQS to deliver again.
    pub left: usize,
}

/// The event source mappings and schedules, against one Invoke API, or one per function (`cargo lambda watch -p`
/// serves one package: in this workspace, whose root is a package of its own, a `watch` without `-p` finds no
/// function's binary).
pub struct Player {
    sqs: aws_sdk_sqs::Client,
    http: reqwest::Client,
    base: String,
    /// Functions served elsewhere than `base`: (name, base).
    elsewhere: Vec<(String, String)>,
}

impl Player {
    pub fn new(sqs: aws_sdk_sqs::Client, base: &str) -> Self {
        Self {
            sqs,
            http: reqwest::Client::new(),
            base: base.trim_end_matches('/').to_owned(),
            elsewhere: Vec::new(),
        }
    }

    /// `function` is served at `base` rather than at the default one.
    #[must_use]
    pub fn serving(mut self, function: &str, base: &str) -> Self {
        self.elsewhere
            .push((function.to_owned(), base.trim_end_matches('/').to_owned()));
        self
    }

    fn base_of(&self, function: &str) -> &str {
        self.elsewhere
            .iter()
            .find(|(f, _)| f == function)
            .map_or(&self.base, |(_, b)| b)
    }

    /// Invokes `function` with `event`, answering its result (an error for a failed invocation or function).
    pub async fn invoke(
        &self,
        function: &str,
        event: &serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        let url = format!(
            "{}/2015-03-31/functions/{function}/invocations",
            self.base_of(function)
        );
        let response = self
            .http
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(event.to_string())
            .send()
            .await
            .map_err(|e| format!("{function}: cannot invoke at {url}: {e}"))?;
        let status = response.status();
        let failed = response.headers().contains_key("x-amz-function-error");
        let body = response
            .text()
            .await
            .map_err(|e| format!("{function}: no answer: {e}"))?;
        if !status.is_success() || failed {
            return Err(format!("{function}: the invocation failed ({status}): {body}"));
        }
        serde_json::from_str(&body).map_err(|e| format!("{function}: not JSON ({e}): {body}"))
    }

    /// One batch (up to 10 messages, waiting up to `wait` for them) from `queue_url` through `function`, as an
    /// SQS event source mapping with `ReportBatchItemFailures` hands it over and deletes after.
    pub async fn pump(&self, queue_url: &str, function: &str, wait: Duration) -> Result<Pumped, String> {
        let received = self
            .sqs
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(i32::try_from(wait.as_secs()).unwrap_or(20).min(20))
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "receive from {queue_url}: {}",
                    aws_sdk_sqs::error::DisplayErrorContext(e)
                )
            })?;
        let messages = received.messages();
        if messages.is_empty() {
            return Ok(Pumped::default());
        }
        let mut event = SqsEvent::default();
        event.records = messages.iter().map(as_delivered).collect();
        let mut pumped = Pumped {
            received: messages.len(),
            ..Pumped::default()
        };
        let answer = match self
            .invoke(function, &serde_json::to_value(&event).unwrap_or_default())
            .await
        {
            Ok(answer) => answer,
            Err(e) => {
                // A failed invocation: the whole batch comes back after its visibility timeout.
                tracing::warn!(error = %e, "the batch is left on the queue");
                pumped.left = pumped.received;
                return Ok(pumped);
            }
        };
        let response: SqsBatchResponse = serde_json::from_value(answer).unwrap_or_default();
        for message in messages {
            let id = message.message_id().unwrap_or_default();
            if response
                .batch_item_failures
                .iter()
                .any(|f| f.item_identifier == id)
            {
                pumped.left += 1;
                continue;
            }
            let Some(receipt) = message.receipt_handle() else {
                continue;
            };
            self.sqs
                .delete_message()
                .queue_url(queue_url)
                .receipt_handle(receipt)
                .send()
                .await
                .map_err(|e| {
                    format!(
                        "delete from {queue_url}: {}",
                        aws_sdk_sqs::error::DisplayErrorContext(e)
                    )
                })?;
            pumped.deleted += 1;
        }
        Ok(pumped)
    }

    /// A schedule's tick: the EventBridge scheduled event the template's rules send.
    pub async fn tick(&self, function: &str) -> Result<serde_json::Value, String> {
        let event = serde_json::json!({
            "version": "0",
            "id": format!("{:032x}", rand::random::<u128>()),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "time": crate::time::rfc3339(crate::time::now_ms()),
            "detail": {},
        });
        self.invoke(function, &event).await
    }
}
