//! A source ready to receive: its scheme, its keys (secrets resolved), limits, handler and retry policy.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;

use crate::config::{Config, ConfigError, HandlerConfig, RetryPolicy};
use crate::handlers::{Handler, Registry};
use crate::model::{ResentBodies, SourceName};
use crate::schemes::{Credentials, Key, Scheme};
use crate::secrets::SecretResolver;

pub struct Source {
    pub name: SourceName,
    /// Position in [`Sources::names`]: the metrics' index.
    pub index: usize,
    pub scheme: Scheme,
    /// What the source verifies with: its keys (secrets resolved), public key, public URL and verify token.
    pub credentials: Credentials,
    pub tolerance_secs: u64,
    pub max_body_bytes: usize,
    pub kept_headers: Vec<HeaderName>,
    /// `None` where sources were built by [`Sources::receiving`]: in the receiver function, which only receives.
    pub handler: Option<Arc<dyn Handler>>,
    pub handler_timeout: Duration,
    pub retry: RetryPolicy,
    /// What a create does with a body already stored under another id of the same type: marked where the scheme
    /// signs the body but not the id, refused where the source opts in.
    pub resent_bodies: ResentBodies,
    /// How long a delivery's signed nonce is remembered, where the scheme signs one ([`ResentBodies::SignedNonce`]):
    /// the retention, and at least twice the tolerance (a delivery verifies from `tolerance` before its timestamp
    /// to `tolerance` after it).
    pub signed_nonces_within: Duration,
}

/// Every configured source, looked up by the name in the URL.
#[derive(Clone)]
pub struct Sources {
    by_name: HashMap<String, Arc<Source>>,
    names: Vec<SourceName>,
}

impl Sources {
    /// Resolves every secret and builds every handler; any failure names the source and field. Without a
    /// resolver no secret is read and no key is held: for workers that never verify a signature (least privilege).
    pub async fn build(
        config: &Config,
        secrets: Option<&dyn SecretResolver>,
        handlers: &Registry,
    ) -> Result<Sources, ConfigError> {
        Self::build_with(config, secrets, |field, handler| {
            handlers.build(field, handler).map(Some)
        })
        .await
    }

    /// [`Sources::build`] without handlers: for the receiver function, which never runs one. Its code never
    /// reaches a [`Registry`], so the handlers and their HTTP client are not even linked into it.
    pub async fn receiving(config: &Config, secrets: &dyn SecretResolver) -> Result<Sources, ConfigError> {
        Self::build_with(config, Some(secrets), |_, _| Ok(None)).await
    }

    async fn build_with(
        config: &Config,
        secrets: Option<&dyn SecretResolver>,
        handler: impl Fn(&str, &HandlerConfig) -> Result<Option<Arc<dyn Handler>>, ConfigError>,
    ) -> Result<Sources, ConfigError> {
        let mut by_name = HashMap::new();
        let mut names = Vec::new();
        for (index, (name, sc)) in config.sources.iter().enumerate() {
            let at = format!("sources.{name}");
            let mut keys = Vec::with_capacity(sc.secrets.len());
            let references = if secrets.is_some() {
                sc.secrets.as_slice()
            } else {
                &[]
            };
            for (i, reference) in references.iter().enumerate() {
                let Some(secrets) = secrets else { break };
                let field = format!("{at}.secrets[{i}]");
                let value = secrets
                    .resolve(reference)
                    .await
                    .map_err(|m| ConfigError::new(&field, format!("{reference}: {m}")))?;
                let key = sc
                    .scheme
                    .key_from_secret(value.trim_end_matches(['\r', '\n']))
                    .map_err(|e| ConfigError::new(&field, format!("{reference}: {e}")))?;
                keys.push(key);
            }
            let verify_token = match (&sc.verify_token, secrets) {
                (Some(reference), Some(secrets)) => {
                    let field = format!("{at}.verify_token");
                    let value = secrets
                        .resolve(reference)
                        .await
                        .map_err(|m| ConfigError::new(&field, format!("{reference}: {m}")))?;
                    Some(Key::new(value.trim_end_matches(['\r', '\n']).as_bytes().to_vec()))
                }
                _ => None,
            };
            let credentials = Credentials {
                secrets: keys,
                public_key: sc.public_key.clone(),
                url: sc.url.clone(),
                verify_token,
            };
            let (_, route, route_handler) = config.single_route(name)?;
            let route_at = if route.short_form {
                format!("{at}.handler")
            } else {
                format!("destinations.{}", route.to)
            };
            let source = Source {
                name: name.clone(),
                index,
                scheme: sc.scheme.clone(),
                credentials,
                tolerance_secs: sc.tolerance.as_secs(),
                max_body_bytes: sc.max_body_bytes,
                kept_headers: sc.scheme.kept_headers(),
                handler: handler(&route_at, route_handler)?,
                handler_timeout: route_handler.timeout(),
                retry: route.retry,
                resent_bodies: if sc.refuse_resent_bodies {
                    ResentBodies::Refused {
                        within: config.retention,
                    }
                } else if sc.scheme.signs_body_but_not_id() {
                    ResentBodies::Marked {
                        within: config.retention,
                    }
                } else {
                    ResentBodies::Ignored
                },
                signed_nonces_within: config.retention.max(sc.tolerance.saturating_mul(2)),
            };
            by_name.insert(name.as_str().to_owned(), Arc::new(source));
            names.push(name.clone());
        }
        Ok(Sources { by_name, names })
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Source>> {
        self.by_name.get(name)
    }

    pub fn names(&self) -> &[SourceName] {
        &self.names
    }
}
