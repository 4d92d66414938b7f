//! `inbox console`: the operator console (a web page) over the same store.

use anyhow::{bail, Context, Result};

use crate::{load, shutdown_signal, StoreArgs};

pub async fn run(
    store: StoreArgs,
    listen: std::net::SocketAddr,
    policy: inbox_console::SessionPolicy,
) -> Result<()> {
    let token = std::env::var(inbox_console::TOKEN_ENV)
        .ok()
        .filter(|t| !t.is_empty())
        .map(secrecy::SecretString::from);
    inbox_console::check_listen(listen, token.as_ref())?;
    if policy.idle.is_zero() || policy.lifetime.is_zero() {
        bail!("--session-idle and --session-lifetime must be longer than 0");
    }
    if token.is_some() && !policy.secure_cookie {
        tracing::warn!("console: the session cookie is not Secure (--insecure-cookie): a browser sends it over plain HTTP");
    }
    let name = if store.aws {
        format!(
            "DynamoDB table {}",
            std::env::var("INBOX_TABLE").unwrap_or_default()
        )
    } else {
        match (&store.data_dir, &store.config) {
            (Some(dir), _) => format!("SQLite in {}", dir.display()),
            (None, Some(config)) => match load(config)?.store {
                inbox_core::config::StoreConfig::Sqlite => format!("SQLite named by {}", config.display()),
                inbox_core::config::StoreConfig::Postgres { .. } => {
                    format!("PostgreSQL named by {}", config.display())
                }
            },
            (None, None) => String::new(),
        }
    };
    let aws = store.aws;
    let opened = store.open().await?;
    let mut console =
        inbox_console::Console::new(opened.ledger, opened.queue, token, name).with_sessions(policy);
    // The config names the sources that reconcile, for the overview: the one named, or on AWS the stack's
    // (INBOX_CONFIG or INBOX_CONFIG_PARAMETER, as the functions read it), where the operator's shell has it.
    if aws {
        // DynamoDB cannot draw the chart without a scan: the functions' metrics in CloudWatch do.
        let sdk = inbox_core::aws::sdk::load().await;
        console = console.with_timeline(std::sync::Arc::new(
            inbox_core::aws::charts::CloudWatchTimeline::new(&sdk),
        ));
        let set = |k| std::env::var_os(k).is_some_and(|v| !v.is_empty());
        if set("INBOX_CONFIG") || set("INBOX_CONFIG_PARAMETER") {
            let secrets = inbox_core::aws::AwsSecrets::new(&sdk);
            console = console.with_config(&inbox_core::aws::load_config(&secrets).await?);
        } else {
            tracing::warn!(
                "console: neither INBOX_CONFIG nor INBOX_CONFIG_PARAMETER is set: the overview shows reconciliation \
                 only for sources with failed or dead events"
            );
        }
    } else if let Some(path) = &store.config {
        console = console.with_config(&load(path)?);
    }
    let app = console.router();
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    println!("inbox console: http://{}", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await?;
    Ok(())
}
