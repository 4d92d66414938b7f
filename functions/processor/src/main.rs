//! The processor Lambda (event source: the work queue, with ReportBatchItemFailures).

use std::sync::Arc;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use inbox_core::aws::{functions, Runtime};
use inbox_core::handlers::{http_client, Registry};
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let rt = Arc::new(Runtime::from_env(Registry::new(http_client())).await?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        let rt = rt.clone();
        async move {
            let deadline = event.context.deadline;
            Ok::<SqsBatchResponse, Error>(functions::processor(&rt, event.payload, deadline).await)
        }
    }))
    .await
}
