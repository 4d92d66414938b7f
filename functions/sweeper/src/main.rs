//! The sweeper Lambda (every minute): re-sends events that lost their message and alarms that did not go out.

use std::sync::Arc;

use inbox_core::aws::{functions, Runtime};
use inbox_core::handlers::{http_client, Registry};
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let rt = Arc::new(Runtime::from_env(Registry::new(http_client())).await?);
    lambda_runtime::run(service_fn(move |_event: LambdaEvent<serde_json::Value>| {
        let rt = rt.clone();
        async move {
            let report = functions::sweeper(&rt).await?;
            Ok::<_, Error>(serde_json::json!({
                "received": report.received,
                "expired_leases": report.expired_leases,
                "overdue_failed": report.overdue_failed,
                "alarms": report.alarms,
            }))
        }
    }))
    .await
}
