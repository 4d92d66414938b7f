//! Building a source's provider from its `[sources.X.reconcile]` block: the credentials resolved, the concrete
//! provider made. Here, not in the config layer, so that the config knows no provider and no secret store.

use std::sync::Arc;

use super::{
    chargebee, github, gitlab, gocardless, mailgun, okta, paddle, paypal, persona, polar, square, stripe,
    workos, Provider,
};
use crate::config::{ConfigError, GithubAuth, ProviderConfig, SecretRef};
use crate::secrets::SecretResolver;

/// Resolves the credentials and builds the provider `config` names. `at` is the block's field path, for errors.
pub(super) async fn connect(
    config: &ProviderConfig,
    at: &str,
    api_base: &reqwest::Url,
    secrets: &dyn SecretResolver,
) -> Result<Arc<dyn Provider>, ConfigError> {
    let base = api_base.clone();
    let built: Result<Arc<dyn Provider>, String> = match config {
        ProviderConfig::Chargebee { api_key, .. } => {
            let key = resolve(secrets, at, "api_key", api_key).await?;
            chargebee::Chargebee::new(base, key).map(|p| Arc::new(p) as _)
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
            github::Github::new(base, hook.clone(), auth).map(|p| Arc::new(p) as _)
        }
        ProviderConfig::Gitlab { token, hook } => {
            let token = resolve(secrets, at, "token", token).await?;
            gitlab::Gitlab::new(base, hook, token).map(|p| Arc::new(p) as _)
        }
        ProviderConfig::Gocardless { token } => {
            let token = resolve(secrets, at, "token", token).await?;
            gocardless::Gocardless::new(base, token).map(|p| Arc::new(p) as _)
        }
        ProviderConfig::Mailgun {
            api_key,
            domain,
            event_types,
        } => {
            let key = resolve(secrets, at, "api_key", api_key).await?;
            mailgun::Mailgun::new(base, domain, event_types, key).map(|p| Arc::new(p) as _)
        }
        ProviderConfig::Okta {
            api_key, event_types, ..
        } => {
            let key = resolve(secrets, at, "api_key", api_key).await?;
            okta::Okta::new(base, event_types, key).map(|p| Arc::new(p) as _)
        }
        ProviderConfig::Paddle { api_key } => {
            let key = resolve(secrets, at, "api_key", api_key).await?;
            paddle::Paddle::new(base, key).map(|p| Arc::new(p) as _)
        }
        ProviderConfig::Paypal {
            client_id,
            client_secret,
        } => {
            let id = resolve(secrets, at, "client_id", client_id).await?;
            let secret = resolve(secrets, at, "client_secret", client_secret).await?;
            paypal::Paypal::new(base, id, secret).map(|p| Arc::new(p) as _)
        }
        ProviderConfig::Persona { api_key } => {
            let key = resolve(secrets, at, "api_key", api_key).await?;
            persona::Persona::new(base, key).map(|p| Arc::new(p) as _)
        }
        ProviderConfig::Polar { token, endpoint } => {
            let token = resolve(secrets, at, "token", token).await?;
            polar::Polar::new(base, endpoint, token).map(|p| Arc::new(p) as _)
        }
        ProviderConfig::Square { token } => {
            let token = resolve(secrets, at, "token", token).await?;
            square::Square::new(base, token).map(|p| Arc::new(p) as _)
        }
        ProviderConfig::Stripe { api_key, account } => {
            let key = resolve(secrets, at, "api_key", api_key).await?;
            stripe::Stripe::new(base, key, account.clone()).map(|p| Arc::new(p) as _)
        }
        ProviderConfig::Workos { api_key } => {
            let key = resolve(secrets, at, "api_key", api_key).await?;
            workos::Workos::new(base, key).map(|p| Arc::new(p) as _)
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
