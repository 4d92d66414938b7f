//! The alarm Lambda (event source: the dead-letter queue): marks redriven events DEAD and notifies once.

use aws_lambda_events::event::sqs::SqsEvent;
use inbox_core::aws::functions;
use lambda_runtime::{Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    functions::serve(|rt, event: LambdaEvent<SqsEvent>| async move {
        Ok(functions::alarm(&rt, event.payload).await)
    })
    .await
}
