//! The sweeper Lambda (every minute): re-sends events that lost their message and alarms that did not go out.

use inbox_core::aws::functions;
use lambda_runtime::{Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    functions::serve(|rt, _event: LambdaEvent<serde_json::Value>| async move {
        let report = functions::sweeper(&rt).await?;
        Ok(serde_json::json!({
            "received": report.received,
            "expired_leases": report.expired_leases,
            "overdue_failed": report.overdue_failed,
            "alarms": report.alarms,
        }))
    })
    .await
}
