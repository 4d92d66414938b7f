//! Counts the requests an SDK client sends, by service and operation: the bench's and the tests' measure of the
//! happy path's AWS calls (one PutItem and one SendMessage to receive, two UpdateItems to process).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
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

    /// Counted per request sent, retries included, as `service.Operation` from the operation's metadata
    /// (`dynamodb.PutItem`, `sqs.SendMessage`, `s3.PutObject`, `sns.Publish`, `ssm.GetParameter`,
    /// `secretsmanager.GetSecretValue`). A `TransactWriteItems` also counts each of its parts
    /// (`dynamodb.TransactWriteItems.Put`), since IAM authorises a transaction by the actions of its parts.
    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let (service, op) = cfg.load::<Metadata>().map_or_else(
            || ("unknown".to_owned(), "unknown".to_owned()),
            |m| (m.service().to_lowercase().replace(' ', ""), m.name().to_owned()),
        );
        let mut names = vec![format!("{service}.{op}")];
        if service == "dynamodb" && op == "TransactWriteItems" {
            let body: serde_json::Value = context
                .request()
                .body()
                .bytes()
                .and_then(|b| serde_json::from_slice(b).ok())
                .unwrap_or_default();
            for item in body["TransactItems"].as_array().into_iter().flatten() {
                for part in item.as_object().into_iter().flat_map(|o| o.keys()) {
                    names.push(format!("dynamodb.TransactWriteItems.{part}"));
                }
            }
        }
        let mut counts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for name in names {
            *counts.entry(name).or_default() += 1;
        }
        Ok(())
    }
}
