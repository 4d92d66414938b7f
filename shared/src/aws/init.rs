//! `inbox aws init`: creates the stack's resources in whatever endpoint the SDK points at (the emulator,
//! LocalStack, a sandbox account) with the same definitions as `infra/template.yaml`, so "try the AWS path
//! locally" needs no template deployment.

use aws_config::SdkConfig;
use aws_sdk_sqs::types::QueueAttributeName;

use super::Resources;
use crate::aws::s3::S3Payloads;
use crate::stores::dynamodb::create_table;

/// The template's `RetentionDays` default: the days after its completion that the bucket expires a completed
/// event's body (its `completed-bodies` rule), as the config's default `retention_days`.
pub const TEMPLATE_RETENTION_DAYS: i32 = 30;

/// Settings that must match the template's defaults.
#[derive(Debug, Clone, Copy)]
pub struct QueueSettings {
    /// Receives before SQS moves a message to the DLQ.
    pub max_receive_count: u32,
    /// Seconds a received message stays hidden (at least six times the processor's timeout).
    pub visibility_timeout: u32,
}

impl Default for QueueSettings {
    /// The template's defaults: 25 receives (above the retry budget's 12 attempts, so the budget decides and the
    /// DLQ catches crash loops), and six times the processor's 60 s timeout.
    fn default() -> Self {
        Self {
            max_receive_count: 25,
            visibility_timeout: 360,
        }
    }
}

fn err(what: &str, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
}

/// Creates the table (with its sparse index and TTL), the DLQ and the work queue (redriving into it), the bucket
/// (with the template's lifecycle rules) and the alarm topic, all named `{prefix}-…`.
pub async fn create_stack(
    sdk: &SdkConfig,
    prefix: &str,
    settings: QueueSettings,
) -> Result<Resources, String> {
    let table = format!("{prefix}-events");
    create_table(&aws_sdk_dynamodb::Client::new(sdk), &table)
        .await
        .map_err(|e| err("table", e))?;

    let sqs = aws_sdk_sqs::Client::new(sdk);
    let dlq = sqs
        .create_queue()
        .queue_name(format!("{prefix}-dlq"))
        .attributes(QueueAttributeName::MessageRetentionPeriod, "1209600")
        .attributes(QueueAttributeName::VisibilityTimeout, "180")
        .attributes(QueueAttributeName::MaximumMessageSize, "16384")
        .attributes(QueueAttributeName::ReceiveMessageWaitTimeSeconds, "20")
        .attributes(QueueAttributeName::SqsManagedSseEnabled, "true")
        .send()
        .await
        .map_err(|e| err("dlq", aws_sdk_sqs::error::DisplayErrorContext(e)))?;
    let dlq_url = dlq.queue_url().unwrap_or_default().to_owned();
    let dlq_arn = sqs
        .get_queue_attributes()
        .queue_url(&dlq_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| err("dlq arn", aws_sdk_sqs::error::DisplayErrorContext(e)))?
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .ok_or("dlq arn: missing")?;
    let redrive = serde_json::json!({
        "deadLetterTargetArn": dlq_arn,
        "maxReceiveCount": settings.max_receive_count,
    });
    let queue = sqs
        .create_queue()
        .queue_name(format!("{prefix}-work"))
        .attributes(QueueAttributeName::RedrivePolicy, redrive.to_string())
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            settings.visibility_timeout.to_string(),
        )
        .attributes(QueueAttributeName::MessageRetentionPeriod, "864000")
        .attributes(QueueAttributeName::MaximumMessageSize, "16384")
        .attributes(QueueAttributeName::ReceiveMessageWaitTimeSeconds, "20")
        .attributes(QueueAttributeName::SqsManagedSseEnabled, "true")
        .send()
        .await
        .map_err(|e| err("work queue", aws_sdk_sqs::error::DisplayErrorContext(e)))?;
    let queue_url = queue.queue_url().unwrap_or_default().to_owned();

    let bucket = format!("{prefix}-bodies");
    let payloads = S3Payloads::new(S3Payloads::config(sdk), bucket.clone());
    payloads.create_bucket().await.map_err(|e| err("bucket", e))?;
    // The template's rules, so that a sandbox account expires bodies as a deployment does (the emulators keep the
    // rules and expire nothing).
    payloads
        .put_lifecycle(TEMPLATE_RETENTION_DAYS)
        .await
        .map_err(|e| err("bucket lifecycle", e))?;

    let topic = aws_sdk_sns::Client::new(sdk)
        .create_topic()
        .name(format!("{prefix}-alarms"))
        .send()
        .await
        .map_err(|e| err("topic", aws_sdk_sns::error::DisplayErrorContext(e)))?;

    Ok(Resources {
        table,
        queue_url,
        dlq_url: Some(dlq_url),
        bucket: Some(bucket),
        topic_arn: topic.topic_arn().map(str::to_owned),
        max_receive_count: Some(settings.max_receive_count),
        // Unchecked here: the bucket's rules are the template's at its default RetentionDays, and a local config
        // may keep events for less (the emulators expire nothing). A sandbox account should run with the default.
        retention_days: None,
    })
}
