//! Counts the requests an SDK client sends, by service and operation: the bench's and the tests' measure of the
//! happy path's AWS calls (one PutItem and one SendMessage to receive, two UpdateItems to process).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

/// An interceptor to attach to a client's config (`.interceptor(counter.clone())`); clones share the counts.
#[derive(Debug, Default, Clone)]
pub struct CallCounter(Arc<Mutex<HashMap<String, usize>>>);

impl CallCounter {
    /// The counts so far (`"dynamodb.PutItem" → 1`), leaving zero behind.
    pub fn take(&self) -> HashMap<String, usize> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Intercept for CallCounter {
    fn name(&self) -> &'static str {
        "CallCounter"
    }

    /// DynamoDB and SQS name the operation in `x-amz-target` (`DynamoDB_20120810.PutItem`,
    /// `AmazonSQS.SendMessage`): counted per request sent, retries included.
    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let target = context
            .request()
            .headers()
            .get("x-amz-target")
            .unwrap_or("unknown");
        let (service, op) = target.split_once('.').unwrap_or(("unknown", target));
        let service = if service.starts_with("DynamoDB") {
            "dynamodb"
        } else if service.starts_with("AmazonSQS") {
            "sqs"
        } else {
            service
        };
        *self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(format!("{service}.{op}"))
            .or_default() += 1;
        Ok(())
    }
}
