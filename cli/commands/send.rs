//! `inbox send`: a signed test webhook to a running server.

use std::path::Path;

use anyhow::{Context, Result};

use inbox_core::handlers::http_client;
use inbox_core::model::SourceName;
use inbox_core::schemes::Identity;
use inbox_core::secrets::LocalSecrets;
use inbox_core::source::Sources;
use inbox_core::time::now_ms;

use crate::load;

pub async fn run(
    config_path: &Path,
    source: SourceName,
    body: Option<String>,
    event_id: Option<String>,
    event_type: Option<String>,
    url: Option<String>,
) -> Result<()> {
    let config = load(config_path)?;
    let sources = Sources::receiving(&config, &LocalSecrets).await?;
    let src = sources
        .get(source.as_str())
        .with_context(|| format!("no source {source} in {}", config_path.display()))?;
    let key = src.keys.first().context("the source has no secret")?;
    let now = now_ms();
    let event_id = event_id.unwrap_or_else(|| format!("evt_{now:x}{:04x}", rand_u16()));
    let event_type = event_type.unwrap_or_else(|| "inbox.test".to_owned());
    let body = body.unwrap_or_else(|| {
        serde_json::json!({"id": event_id, "event_id": event_id, "type": event_type, "created": now / 1000})
            .to_string()
    });
    let identity = Identity {
        event_id,
        event_type: Some(event_type),
    };
    let headers = src.scheme.sign(key, body.as_bytes(), &identity, now / 1000);
    let base = url.unwrap_or_else(|| format!("http://{}", config.server.listen));
    let client = http_client();
    let mut req = client
        .client()
        .post(format!("{}/webhooks/{source}", base.trim_end_matches('/')))
        .header("content-type", "application/json")
        .body(body);
    for (name, value) in headers {
        req = req.header(name, value);
    }
    let resp = req.send().await.context("sending")?;
    let status = resp.status();
    println!(
        "HTTP {} {}",
        status.as_u16(),
        resp.text().await.unwrap_or_default()
    );
    if !status.is_success() {
        std::process::exit(1);
    }
    Ok(())
}

fn rand_u16() -> u16 {
    (std::process::id() as u16) ^ (now_ms() as u16).rotate_left(7)
}
