//! `inbox send`: a signed test webhook to a running server.

use std::path::Path;

use anyhow::{Context, Result};

use inbox_core::handlers::http_client;
use inbox_core::model::SourceName;
use inbox_core::schemes::{Identity, Key, Request, Signer};
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
    private_key: Option<&Path>,
) -> Result<()> {
    let config = load(config_path)?;
    let sources = Sources::receiving(&config, &LocalSecrets).await?;
    let src = sources
        .get(source.as_str())
        .with_context(|| format!("no source {source} in {}", config_path.display()))?;
    let now = now_ms();
    let event_id = event_id.unwrap_or_else(|| format!("evt_{now:x}{:04x}", rand_u16()));
    let event_type = event_type.unwrap_or_else(|| "inbox.test".to_owned());
    let identity = Identity {
        event_id,
        event_type: Some(event_type),
    };
    // A body with the id and type where this source's scheme looks for them, unless one is given.
    let sample = src.scheme.sample_at(std::slice::from_ref(&identity), now / 1000);
    let sample_headers = sample.headers;
    let (body, content_type) = match body {
        Some(b) => (b.into_bytes(), "application/json"),
        None => (sample.body, sample.content_type),
    };
    let signer = match private_key {
        Some(path) => {
            let pem = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            let block = pem::parse(pem.trim()).context("the private key is not PEM")?;
            Signer::Private {
                pkcs8: Key::new(block.contents().to_vec()),
                key_url: None,
            }
        }
        None => Signer::Secret(
            src.credentials
                .secrets
                .first()
                .cloned()
                .context("the source has no secret (an asymmetric scheme signs with --private-key)")?,
        ),
    };
    let path = format!("/webhooks/{source}");
    let uri: http::Uri = path.parse().context("the source's path")?;
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    let request = Request {
        method: &http::Method::POST,
        uri: &uri,
        headers: &headers,
        body: &body,
        received_ms: 0,
    };
    let signed = src
        .scheme
        .sign_request(&signer, &src.credentials, &request, &identity, now / 1000)
        .with_context(|| format!("scheme {} cannot sign with this key", src.scheme.name()))?;
    let body = signed.body.unwrap_or(body);
    let base = url.unwrap_or_else(|| format!("http://{}", config.server.listen));
    let client = http_client();
    let mut req = client
        .client()
        .post(format!("{}{path}", base.trim_end_matches('/')))
        .header("content-type", content_type)
        .body(body);
    for (name, value) in sample_headers.into_iter().chain(signed.headers) {
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
