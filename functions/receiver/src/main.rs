//! The receiver Lambda: the same router as `inbox serve`, behind a Function URL or HTTP API.

use inbox_core::aws::{emf, receiver_from_env};
use inbox_core::receiver::router;
use lambda_http::{service_fn, Error, Request};
use tower::ServiceExt;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_http::tracing::init_default_subscriber();
    // Boxed: the start's future (the SDK's calls for the config and secrets) is large, and on main's stack it
    // would fault in more stack pages at every cold start (docs/bench-log/2026-11-30.md).
    let receiver = Box::pin(receiver_from_env()).await?;
    let metrics = receiver.metrics.clone();
    let app = router(receiver, false);
    lambda_http::run(service_fn(move |req: Request| {
        let (app, metrics) = (app.clone(), metrics.clone());
        async move {
            let response = app.oneshot(req).await;
            emf::Sink::Stdout.flush(&metrics);
            response
        }
    }))
    .await
}
