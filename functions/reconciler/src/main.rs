//! The reconciler Lambda (on a schedule): asks each reconciled source's provider which events exist and ingests
//! those the ledger lacks (docs/DESIGN.md "Reconciliation").

use inbox_core::aws::{functions, reconciler_from_env};
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let rt = std::sync::Arc::new(Box::pin(reconciler_from_env()).await?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| {
        let rt = rt.clone();
        async move {
            let report = functions::reconciler(&rt, event.context.deadline).await;
            // Every source ran before this: a failed one fails the invocation (the function's Errors alarm), the
            // others' work stands. The text names the sources; the causes are in the log.
            let failed = report.failed();
            if !failed.is_empty() {
                return Err(Error::from(format!(
                    "reconciliation failed for: {}",
                    failed.join(", ")
                )));
            }
            Ok::<_, Error>(serde_json::to_value(&report)?)
        }
    }))
    .await
}
