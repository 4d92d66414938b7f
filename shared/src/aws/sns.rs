//! The AWS alarm: one SNS notification per newly dead event (the error log line is the machine's).

use std::sync::OnceLock;

use async_trait::async_trait;

use crate::machine::{dead_summary, Notifier, NotifyError};
use crate::model::Record;

pub struct SnsNotifier {
    config: aws_sdk_sns::Config,
    /// Built on the first alarm: most cold starts never raise one.
    client: OnceLock<aws_sdk_sns::Client>,
    topic_arn: Option<String>,
}

impl SnsNotifier {
    /// Without a topic, dead events are only logged and counted.
    pub fn new(config: aws_sdk_sns::Config, topic_arn: Option<String>) -> Self {
        Self {
            config,
            client: OnceLock::new(),
            topic_arn,
        }
    }

    fn client(&self) -> &aws_sdk_sns::Client {
        self.client
            .get_or_init(|| aws_sdk_sns::Client::from_conf(self.config.clone()))
    }
}

#[async_trait]
impl Notifier for SnsNotifier {
    async fn dead(&self, event: &Record) -> Result<(), NotifyError> {
        let Some(topic) = &self.topic_arn else {
            return Ok(());
        };
        let subject = format!("webhook-inbox: {} event is DEAD", event.source);
        self.client()
            .publish()
            .topic_arn(topic)
            .subject(subject)
            .message(dead_summary(event).to_string())
            .send()
            .await
            .map(|_| ())
            .map_err(|e| {
                NotifyError(format!(
                    "SNS publish: {}",
                    aws_sdk_sns::error::DisplayErrorContext(e)
                ))
            })
    }
}
