//! The processor Lambda (event source: the work queue, with ReportBatchItemFailures).

use aws_lambda_events::event::sqs::SqsEvent;
use inbox_core::aws::functions;
use lambda_runtime::{Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    functions::serve(|rt, event: LambdaEvent<SqsEvent>| async move {
        let deadline = event.context.deadline;
        Ok(functions::processor(&rt, event.payload, deadline).await)
    })
    .await
}
