//! Building a source's provider from its `[sources.X.reconcile]` block: the credentials resolved, the concrete
//! provider made. Here, not in the config layer, so that the config knows no provider and no secret store.

use std::sync::Arc;

use super::{github, stripe, Provider};
use crate::config::{ConfigError, GithubAuth, ProviderConfig, SecretRef};
use crate::secrets::SecretResolver;

/// Resolves the credentials and builds the provider `config` names. `at` is the block's field path, for errors.
pub(super) async fn connect(
    config: &ProviderConfig,
    at: &str,
    api_base: &reqwest::Url,
    secrets: &dyn SecretResolver,
) -> Result<Arc<dyn Provider>, ConfigError> {
    let built: Result<Arc<dyn Provider>, String> = match config {
        ProviderConfig::Stripe { api_key, account } => {
            let key = resolve(secrets, at, "api_key", api_key).await?;
            stripe::Stripe::new(api_base.clone(), key, account.clone()).map(|p| Arc::new(p) as _)
        }
        ProviderConfig::Github { hook, auth } => {
            let auth = match auth {
                GithubAuth::Token(token) => github::Auth::token(resolve(secrets, at, "token", token).await?),
                GithubAuth::App { app_id, private_key } => {
                    let pem = resolve(secrets, at, "private_key", private_key).await?;
                    github::Auth::app(*app_id, &pem).map_err(|m| {
                        ConfigError::new(format!("{at}.private_key"), format!("{private_key}: {m}"))
                    })?
                }
            };
            github::Github::new(api_base.clone(), hook.clone(), auth).map(|p| Arc::new(p) as _)
        }
    };
    built.map_err(|m| ConfigError::new(at, m))
}

async fn resolve(
    secrets: &dyn SecretResolver,
    at: &str,
    field: &str,
    reference: &SecretRef,
) -> Result<String, ConfigError> {
    secrets
        .resolve(reference)
        .await
        .map(|v| v.trim().to_owned())
        .map_err(|m| ConfigError::new(format!("{at}.{field}"), format!("{reference}: {m}")))
}
