//! The `[sources.X.reconcile]` block as written ([`RawReconcile`]) and its validation into a [`ReconcileConfig`]:
//! the provider's own fields, the scheme it needs, and the bounds of interval, lookback and settle.

use serde::Deserialize;

use super::{
    duration, http_url, positive, ConfigError, GithubAuth, GithubHook, ProviderConfig, ReconcileConfig,
    SecretRef, DEFAULT_RECONCILE_INTERVAL, DEFAULT_RECONCILE_LOOKBACK, DEFAULT_RECONCILE_SETTLE,
};
use crate::schemes::Scheme;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReconcile {
    provider: String,
    api_key: Option<String>,
    token: Option<String>,
    app_id: Option<u64>,
    private_key: Option<String>,
    hook: Option<String>,
    interval: Option<String>,
    lookback: Option<String>,
    settle: Option<String>,
    api_base: Option<String>,
    account: Option<String>,
}

impl ProviderConfig {
    /// The signature scheme a source must have for this provider's events to be the same events.
    fn scheme_fits(&self, scheme: &Scheme) -> bool {
        match self {
            ProviderConfig::Stripe { .. } => matches!(scheme, Scheme::Stripe),
            ProviderConfig::Github { .. } => matches!(scheme, Scheme::Github),
        }
    }
}

impl RawReconcile {
    pub(super) fn validate(self, at: &str, scheme: &Scheme) -> Result<ReconcileConfig, ConfigError> {
        let field = |f: &str| format!("{at}.{f}");
        let secret = |f: &str, v: &str| -> Result<SecretRef, ConfigError> {
            v.parse::<SecretRef>().map_err(|m| ConfigError::new(field(f), m))
        };
        let not_for = |f: &str, set: bool, provider: &str| -> Result<(), ConfigError> {
            if set {
                Err(ConfigError::new(
                    field(f),
                    format!("the {provider} provider does not take this field"),
                ))
            } else {
                Ok(())
            }
        };
        let provider = match self.provider.as_str() {
            "stripe" => {
                not_for("token", self.token.is_some(), "stripe")?;
                not_for("app_id", self.app_id.is_some(), "stripe")?;
                not_for("private_key", self.private_key.is_some(), "stripe")?;
                not_for("hook", self.hook.is_some(), "stripe")?;
                let api_key = self.api_key.as_deref().ok_or_else(|| {
                    ConfigError::new(
                        field("api_key"),
                        "missing: a reference to a key with read access to events (env:NAME, file:PATH, …)",
                    )
                })?;
                let account = match self.account {
                    Some(a) if a.is_empty() || !a.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') => {
                        return Err(ConfigError::new(
                            field("account"),
                            "must be a Stripe account id such as acct_1032D82eZvKYlo2C",
                        ))
                    }
                    a => a,
                };
                ProviderConfig::Stripe {
                    api_key: secret("api_key", api_key)?,
                    account,
                }
            }
            "github" => {
                not_for("api_key", self.api_key.is_some(), "github")?;
                not_for("account", self.account.is_some(), "github")?;
                let hook: GithubHook = self
                    .hook
                    .as_deref()
                    .ok_or_else(|| {
                        ConfigError::new(
                            field("hook"),
                            "missing: \"repos/OWNER/REPO/hooks/ID\", \"orgs/ORG/hooks/ID\" or \"app\"",
                        )
                    })?
                    .parse()
                    .map_err(|m: String| ConfigError::new(field("hook"), m))?;
                let auth = match (&hook, &self.token, self.app_id, &self.private_key) {
                    (GithubHook::App, Some(_), _, _) => {
                        return Err(ConfigError::new(
                            field("token"),
                            "an App's hook is read with the App's JWT: give app_id and private_key, not a token",
                        ))
                    }
                    (GithubHook::App, None, Some(app_id), Some(key)) => GithubAuth::App {
                        app_id,
                        private_key: secret("private_key", key)?,
                    },
                    (GithubHook::App, None, None, _) => {
                        return Err(ConfigError::new(
                            field("app_id"),
                            "missing: hook = \"app\" needs the App's id and private key",
                        ))
                    }
                    (GithubHook::App, None, Some(_), None) => {
                        return Err(ConfigError::new(
                            field("private_key"),
                            "missing: a reference to the App's PEM private key",
                        ))
                    }
                    (_, _, Some(_), _) => {
                        return Err(ConfigError::new(
                            field("app_id"),
                            "only hook = \"app\" is read with an App's JWT; a repository or organization hook takes a token",
                        ))
                    }
                    (_, _, None, Some(_)) => {
                        return Err(ConfigError::new(
                            field("private_key"),
                            "only hook = \"app\" is read with an App's JWT; a repository or organization hook takes a token",
                        ))
                    }
                    (_, Some(token), None, None) => GithubAuth::Token(secret("token", token)?),
                    (_, None, None, None) => {
                        return Err(ConfigError::new(
                            field("token"),
                            "missing: a reference to a token that can read the hook's deliveries",
                        ))
                    }
                };
                ProviderConfig::Github { hook, auth }
            }
            other => {
                return Err(ConfigError::new(
                    field("provider"),
                    format!("unknown provider {other:?} (stripe or github)"),
                ))
            }
        };
        if !provider.scheme_fits(scheme) {
            return Err(ConfigError::new(
                field("provider"),
                format!(
                    "the {} provider lists {}'s events, which only a source with scheme \"{}\" receives",
                    provider.name(),
                    provider.name(),
                    provider.name()
                ),
            ));
        }
        let interval = positive(
            &field("interval"),
            duration(
                &field("interval"),
                self.interval.as_ref(),
                DEFAULT_RECONCILE_INTERVAL,
            )?,
        )?;
        let lookback = positive(
            &field("lookback"),
            duration(
                &field("lookback"),
                self.lookback.as_ref(),
                DEFAULT_RECONCILE_LOOKBACK,
            )?,
        )?;
        if lookback > provider.retention() {
            return Err(ConfigError::new(
                field("lookback"),
                format!(
                    "{} keeps {} days of history: a longer lookback cannot be listed",
                    provider.name(),
                    provider.retention().as_secs() / 86_400
                ),
            ));
        }
        let settle = duration(&field("settle"), self.settle.as_ref(), DEFAULT_RECONCILE_SETTLE)?;
        if settle >= lookback {
            return Err(ConfigError::new(
                field("settle"),
                "must be shorter than lookback, or no event is ever old enough to be listed",
            ));
        }
        let api_base = http_url(
            &field("api_base"),
            self.api_base.as_deref().unwrap_or(provider.default_api_base()),
        )?;
        if !api_base.username().is_empty() || api_base.password().is_some() {
            return Err(ConfigError::new(
                field("api_base"),
                "must not hold credentials (they go in the secret references)",
            ));
        }
        Ok(ReconcileConfig {
            provider,
            interval,
            lookback,
            settle,
            api_base,
        })
    }
}
