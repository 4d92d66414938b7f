//! The receiver Lambda: the same router as `inbox serve`, behind a Function URL or HTTP API.

use inbox_core::aws::{emf, Function, Runtime};
use inbox_core::handlers::{http_client, Registry};
use inbox_core::receiver::router;
use lambda_http::{service_fn, Error, Request};
use tower::ServiceExt;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_http::tracing::init_default_subscriber();
    let rt = Runtime::from_env(Function::Receiver, Registry::new(http_client())).await?;
    let app = router(rt.receiver(), false);
    let metrics = rt.metrics.clone();
    lambda_http::run(service_fn(move |req: Request| {
        let (app, metrics) = (app.clone(), metrics.clone());
        async move {
            let response = app.oneshot(req).await;
            emf::flush(&metrics);
            response
        }
    }))
    .await
}
