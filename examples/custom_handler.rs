//! A program that embeds webhook-inbox with its own handler: `handler = { kind = "custom", name = "audit" }`
//! in the config runs `Audit` for that source. Run it like `inbox serve`:
//!
//! ```sh
//! INBOX_DEMO_SECRET=demo-secret cargo run --example custom_handler -- examples/custom.toml
//! ```

use std::sync::Arc;

use async_trait::async_trait;
use inbox_core::config::Config;
use inbox_core::handlers::{http_client, Handler, HandlerError, Registry};
use inbox_core::model::Event;

/// Counts event types. A real handler must be idempotent on `event.key()` (it can run twice for one event if the
/// process dies between its effect and the settle), and says whether a failure is worth a retry.
struct Audit;

#[async_trait]
impl Handler for Audit {
    async fn handle(&self, event: &Event) -> Result<(), HandlerError> {
        let Ok(body) = serde_json::from_slice::<serde_json::Value>(&event.payload) else {
            // Will never parse, however often it is tried: straight to the dead letters.
            return Err(HandlerError::Permanent("payload is not JSON".into()));
        };
        println!(
            "audit: {} {} {}",
            event.key().idempotency_key(),
            event.event_type.as_deref().unwrap_or("-"),
            body.get("data").map_or(0, |d| d.to_string().len())
        );
        Ok(())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "examples/custom.toml".into());
    let config = Config::load(path.as_ref())?;
    let handlers = Registry::new(http_client()).register("audit", Arc::new(Audit));
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    inbox_core::serve::serve(
        config,
        handlers,
        |addr| println!("listening on http://{addr}"),
        shutdown,
    )
    .await?;
    Ok(())
}
