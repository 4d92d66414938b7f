//! The `[sources.X.reconcile]` block: as written ([`RawReconcile`]), validated ([`ReconcileConfig`]), and the
//! provider it names ([`ProviderConfig`]: one variant per provider, with its credentials as references and the
//! account it reads). Adding a provider adds a variant, its arm in [`RawReconcile::validate`] and its line in each
//! table of [`ProviderConfig`]; its API is read by its file under `reconcile/`.

use std::time::Duration;

use serde::Deserialize;

use super::{duration, http_url, positive, ConfigError, SecretRef};
use crate::schemes::Scheme;

/// How and how often to ask the provider which events exist. Credentials are references, never values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcileConfig {
    pub provider: ProviderConfig,
    pub interval: Duration,
    /// How far back a run looks at most; never past the provider's retention.
    pub lookback: Duration,
    /// Events younger than this are left to normal delivery.
    pub settle: Duration,
    /// The provider's API root (tests point it at a local server).
    pub api_base: reqwest::Url,
}

pub const DEFAULT_RECONCILE_INTERVAL: Duration = Duration::from_secs(15 * 60);
/// The default lookback, or the provider's retention where that is shorter.
pub const DEFAULT_RECONCILE_LOOKBACK: Duration = Duration::from_secs(72 * 3600);
pub const DEFAULT_RECONCILE_SETTLE: Duration = Duration::from_secs(5 * 60);

const DAY: u64 = 86_400;

/// One variant per provider (keep sorted), its credentials as secret references (docs/DESIGN.md
/// "Reconciliation": `api_key` for one key, `token` for a bearer token, `client_id` + `client_secret` for client
/// credentials) and the account it reads where the API needs it named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderConfig {
    /// `api_key`: a read-only API key; `site`: the Chargebee site (`acme` of acme.chargebee.com).
    Chargebee {
        api_key: SecretRef,
        site: String,
    },
    Github {
        hook: GithubHook,
        auth: GithubAuth,
    },
    /// `token`: a token with `read_api`; `hook`: the project's or group's hook.
    Gitlab {
        token: SecretRef,
        hook: GitlabHook,
    },
    /// `token`: a read-only access token.
    Gocardless {
        token: SecretRef,
    },
    /// `api_key`: a key that can read the domain's events; `domain`: the sending domain; `event_types`: the
    /// events its webhooks are registered for (the Events API lists every event of the domain).
    Mailgun {
        api_key: SecretRef,
        domain: String,
        event_types: Vec<String>,
    },
    /// `api_key`: an API token (SSWS) of a read-only admin; `domain`: the org (`acme.okta.com`); `event_types`: the
    /// event hook's subscribed types (the System Log holds every event of the org).
    Okta {
        api_key: SecretRef,
        domain: String,
        event_types: Vec<String>,
    },
    /// `api_key`: an API key with the `event.read` permission.
    Paddle {
        api_key: SecretRef,
    },
    /// `client_id` + `client_secret`: the REST app whose webhooks these are.
    Paypal {
        client_id: SecretRef,
        client_secret: SecretRef,
    },
    /// `api_key`: an API key with the events permission.
    Persona {
        api_key: SecretRef,
    },
    /// `token`: an organization access token with `webhooks:read`; `hook`: the webhook endpoint's id.
    Polar {
        token: SecretRef,
        endpoint: String,
    },
    /// `token`: an access token of the seller's account.
    Square {
        token: SecretRef,
    },
    Stripe {
        api_key: SecretRef,
        /// Connect: the connected account whose events are listed (`Stripe-Account`).
        account: Option<String>,
    },
    /// `api_key`: a WorkOS API key.
    Workos {
        api_key: SecretRef,
    },
}

impl ProviderConfig {
    /// The name used in the config and in logs: the catalogue's provider whose webhooks these events are.
    pub fn name(&self) -> &'static str {
        match self {
            ProviderConfig::Chargebee { .. } => "chargebee",
            ProviderConfig::Github { .. } => "github",
            ProviderConfig::Gitlab { .. } => "gitlab",
            ProviderConfig::Gocardless { .. } => "gocardless",
            ProviderConfig::Mailgun { .. } => "mailgun",
            ProviderConfig::Okta { .. } => "okta",
            ProviderConfig::Paddle { .. } => "paddle",
            ProviderConfig::Paypal { .. } => "paypal",
            ProviderConfig::Persona { .. } => "persona",
            ProviderConfig::Polar { .. } => "polar",
            ProviderConfig::Square { .. } => "square",
            ProviderConfig::Stripe { .. } => "stripe",
            ProviderConfig::Workos { .. } => "workos",
        }
    }

    /// How long the provider keeps what it lists, in days as documented (each provider's file cites where).
    pub fn retention(&self) -> Duration {
        let days = match self {
            ProviderConfig::Chargebee { .. } => 90,
            ProviderConfig::Github { .. } => 3,
            ProviderConfig::Gitlab { .. } => 7,
            ProviderConfig::Gocardless { .. } => 540,
            ProviderConfig::Mailgun { .. } => 3,
            ProviderConfig::Okta { .. } => 90,
            ProviderConfig::Paddle { .. } => 90,
            ProviderConfig::Paypal { .. } => 30,
            ProviderConfig::Persona { .. } => 90,
            ProviderConfig::Polar { .. } => 90,
            ProviderConfig::Square { .. } => 28,
            ProviderConfig::Stripe { .. } => 30,
            ProviderConfig::Workos { .. } => 30,
        };
        Duration::from_secs(days * DAY)
    }

    /// How late the provider may still add an event to a listing already read: each run re-reads at least this
    /// far below its checkpoint. Mailgun: "when the events arrive and are eventually indexed, they are inserted into
    /// the already retrieved pages", and a page is trustworthy once its events are older than "the threshold age
    /// (e.g. half an hour)" (https://documentation.mailgun.com/docs/mailgun/user-manual/events/event-polling).
    pub fn listing_lag(&self) -> Duration {
        match self {
            ProviderConfig::Mailgun { .. } => Duration::from_secs(30 * 60),
            _ => Duration::ZERO,
        }
    }

    /// The production API root.
    pub fn default_api_base(&self) -> String {
        match self {
            ProviderConfig::Chargebee { site, .. } => format!("https://{site}.chargebee.com/api/v2"),
            ProviderConfig::Github { .. } => "https://api.github.com".into(),
            ProviderConfig::Gitlab { .. } => "https://gitlab.com/api/v4".into(),
            ProviderConfig::Gocardless { .. } => "https://api.gocardless.com".into(),
            ProviderConfig::Mailgun { .. } => "https://api.mailgun.net".into(),
            ProviderConfig::Okta { domain, .. } => format!("https://{domain}"),
            ProviderConfig::Paddle { .. } => "https://api.paddle.com".into(),
            ProviderConfig::Paypal { .. } => "https://api-m.paypal.com".into(),
            ProviderConfig::Persona { .. } => "https://api.withpersona.com".into(),
            ProviderConfig::Polar { .. } => "https://api.polar.sh".into(),
            ProviderConfig::Square { .. } => "https://connect.squareup.com".into(),
            ProviderConfig::Stripe { .. } => "https://api.stripe.com".into(),
            ProviderConfig::Workos { .. } => "https://api.workos.com".into(),
        }
    }

    /// The signature scheme a source must have for this provider's events to be the same events: the catalogue's
    /// provider of the same name.
    fn scheme_fits(&self, scheme: &Scheme) -> bool {
        match scheme {
            Scheme::Stripe => matches!(self, ProviderConfig::Stripe { .. }),
            Scheme::Github => matches!(self, ProviderConfig::Github { .. }),
            Scheme::Preset(p) => p.name == self.name(),
            _ => false,
        }
    }
}

/// Whose deliveries a GitHub reconciliation lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GithubHook {
    Repo {
        owner: String,
        repo: String,
        id: u64,
    },
    Org {
        org: String,
        id: u64,
    },
    /// The GitHub App's own webhook (needs the App's JWT).
    App,
}

impl GithubHook {
    /// The API path of the hook's deliveries, without a leading slash.
    pub fn deliveries_path(&self) -> String {
        match self {
            GithubHook::Repo { owner, repo, id } => format!("repos/{owner}/{repo}/hooks/{id}/deliveries"),
            GithubHook::Org { org, id } => format!("orgs/{org}/hooks/{id}/deliveries"),
            GithubHook::App => "app/hook/deliveries".to_owned(),
        }
    }
}

impl std::str::FromStr for GithubHook {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        // Owner, repository and organization names: letters, digits, '-', '_' and '.', never "." or "..", so the
        // path cannot climb out of the API.
        fn name(n: &str) -> Option<String> {
            let ok = !n.is_empty()
                && n.len() <= 100
                && n != "."
                && n != ".."
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
            ok.then(|| n.to_owned())
        }
        fn id(n: &str) -> Option<u64> {
            n.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| n.parse().ok())
                .flatten()
                .filter(|&i| i > 0)
        }
        let parts: Vec<&str> = s.split('/').collect();
        let hook = match parts.as_slice() {
            ["app"] => Some(GithubHook::App),
            ["repos", owner, repo, "hooks", hook] => match (name(owner), name(repo), id(hook)) {
                (Some(owner), Some(repo), Some(id)) => Some(GithubHook::Repo { owner, repo, id }),
                _ => None,
            },
            ["orgs", org, "hooks", hook] => match (name(org), id(hook)) {
                (Some(org), Some(id)) => Some(GithubHook::Org { org, id }),
                _ => None,
            },
            _ => None,
        };
        hook.ok_or_else(|| {
            format!("{s:?} is not \"repos/OWNER/REPO/hooks/ID\", \"orgs/ORG/hooks/ID\" or \"app\"")
        })
    }
}

/// How a GitHub reconciliation authenticates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GithubAuth {
    /// A token (fine-grained: the repository's or organization's webhooks, read) for a repository or org hook.
    Token(SecretRef),
    /// A GitHub App: a JWT signed with its private key (PEM), for the App's own hook.
    App { app_id: u64, private_key: SecretRef },
}

/// Whose hook events a GitLab reconciliation lists: a project's or a group's hook, by numeric ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitlabHook {
    Project { project: u64, hook: u64 },
    Group { group: u64, hook: u64 },
}

impl GitlabHook {
    /// The API path of the hook's events, without a leading slash.
    pub fn events_path(&self) -> String {
        match self {
            GitlabHook::Project { project, hook } => format!("projects/{project}/hooks/{hook}/events"),
            GitlabHook::Group { group, hook } => format!("groups/{group}/hooks/{hook}/events"),
        }
    }
}

impl std::str::FromStr for GitlabHook {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let id = |n: &str| {
            n.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| n.parse::<u64>().ok())
                .flatten()
                .filter(|&i| i > 0)
        };
        let parts: Vec<&str> = s.split('/').collect();
        let hook = match parts.as_slice() {
            ["projects", p, "hooks", h] => id(p)
                .zip(id(h))
                .map(|(project, hook)| GitlabHook::Project { project, hook }),
            ["groups", g, "hooks", h] => id(g)
                .zip(id(h))
                .map(|(group, hook)| GitlabHook::Group { group, hook }),
            _ => None,
        };
        hook.ok_or_else(|| {
            format!("{s:?} is not \"projects/ID/hooks/ID\" or \"groups/ID/hooks/ID\" (numeric ids)")
        })
    }
}

/// The block as written. Every provider's fields are here, so that serde names a misspelt one; which of them a
/// provider takes is its arm's business in [`RawReconcile::validate`], and a field it does not take is an error.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReconcile {
    provider: String,
    interval: Option<String>,
    lookback: Option<String>,
    settle: Option<String>,
    api_base: Option<String>,
    // Credentials, as secret references.
    api_key: Option<String>,
    token: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    app_id: Option<u64>,
    private_key: Option<String>,
    // The account to read.
    hook: Option<String>,
    account: Option<String>,
    site: Option<String>,
    domain: Option<String>,
    event_types: Option<Vec<String>>,
}

/// The provider names the config takes, for the error that names an unknown one.
const PROVIDERS: &str =
    "chargebee, github, gitlab, gocardless, mailgun, okta, paddle, paypal, persona, polar, square, stripe or workos";

impl RawReconcile {
    pub(super) fn validate(mut self, at: &str, scheme: &Scheme) -> Result<ReconcileConfig, ConfigError> {
        let field = |f: &str| format!("{at}.{f}");
        let provider_name = std::mem::take(&mut self.provider);
        let provider = {
            let mut f = Fields { at, raw: &mut self };
            let provider = match provider_name.as_str() {
                "chargebee" => ProviderConfig::Chargebee {
                    api_key: f.secret("api_key", "a read-only API key")?,
                    site: f.name("site", "the Chargebee site, such as acme for acme.chargebee.com")?,
                },
                "github" => f.github()?,
                "gitlab" => ProviderConfig::Gitlab {
                    token: f.secret("token", "a token with the read_api scope")?,
                    hook: f.parsed("hook", "\"projects/ID/hooks/ID\" or \"groups/ID/hooks/ID\"")?,
                },
                "gocardless" => ProviderConfig::Gocardless {
                    token: f.secret("token", "a read-only access token")?,
                },
                "mailgun" => ProviderConfig::Mailgun {
                    api_key: f.secret("api_key", "an API key that can read the domain's events")?,
                    domain: f.host("domain", "the sending domain, such as mg.example.com")?,
                    event_types: f.list(
                        "event_types",
                        "the events the domain's webhooks are registered for",
                    )?,
                },
                "okta" => ProviderConfig::Okta {
                    api_key: f.secret("api_key", "an API token of a read-only administrator")?,
                    domain: f.host("domain", "the Okta org, such as acme.okta.com")?,
                    event_types: f.list("event_types", "the event types the event hook subscribes to")?,
                },
                "paddle" => ProviderConfig::Paddle {
                    api_key: f.secret("api_key", "an API key with the event.read permission")?,
                },
                "paypal" => ProviderConfig::Paypal {
                    client_id: f.secret("client_id", "the REST app's client id")?,
                    client_secret: f.secret("client_secret", "the REST app's secret")?,
                },
                "persona" => ProviderConfig::Persona {
                    api_key: f.secret("api_key", "an API key that can read events")?,
                },
                "polar" => ProviderConfig::Polar {
                    token: f.secret(
                        "token",
                        "an organization access token with the webhooks:read scope",
                    )?,
                    endpoint: f.id("hook", "the webhook endpoint's id (a UUID)")?,
                },
                "square" => ProviderConfig::Square {
                    token: f.secret("token", "an access token of the seller's account")?,
                },
                "stripe" => ProviderConfig::Stripe {
                    api_key: f.secret("api_key", "a key with read access to events")?,
                    account: f.stripe_account()?,
                },
                "workos" => ProviderConfig::Workos {
                    api_key: f.secret("api_key", "a WorkOS API key")?,
                },
                other => {
                    return Err(ConfigError::new(
                        field("provider"),
                        format!("unknown provider {other:?} ({PROVIDERS})"),
                    ))
                }
            };
            if let Some(extra) = f.raw.left_over() {
                return Err(ConfigError::new(
                    field(extra),
                    format!("the {provider_name} provider does not take this field"),
                ));
            }
            provider
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
                DEFAULT_RECONCILE_LOOKBACK.min(provider.retention()),
            )?,
        )?;
        if lookback > provider.retention() {
            return Err(ConfigError::new(
                field("lookback"),
                format!(
                    "{} keeps {} days of history: a longer lookback cannot be listed",
                    provider.name(),
                    provider.retention().as_secs() / DAY
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
            self.api_base.as_deref().unwrap_or(&provider.default_api_base()),
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

    /// The first provider field still set once the provider's arm took its own.
    fn left_over(&self) -> Option<&'static str> {
        [
            ("api_key", self.api_key.is_some()),
            ("token", self.token.is_some()),
            ("client_id", self.client_id.is_some()),
            ("client_secret", self.client_secret.is_some()),
            ("app_id", self.app_id.is_some()),
            ("private_key", self.private_key.is_some()),
            ("hook", self.hook.is_some()),
            ("account", self.account.is_some()),
            ("site", self.site.is_some()),
            ("domain", self.domain.is_some()),
            ("event_types", self.event_types.is_some()),
        ]
        .into_iter()
        .find_map(|(name, set)| set.then_some(name))
    }
}

/// The provider's fields, taken one by one by its arm: each taken field is cleared, so that what is left is a field
/// the provider does not take.
struct Fields<'a> {
    at: &'a str,
    raw: &'a mut RawReconcile,
}

impl Fields<'_> {
    fn field(&self, f: &str) -> String {
        format!("{}.{f}", self.at)
    }

    fn slot(&mut self, name: &str) -> Option<String> {
        match name {
            "api_key" => self.raw.api_key.take(),
            "token" => self.raw.token.take(),
            "client_id" => self.raw.client_id.take(),
            "client_secret" => self.raw.client_secret.take(),
            "private_key" => self.raw.private_key.take(),
            "hook" => self.raw.hook.take(),
            "account" => self.raw.account.take(),
            "site" => self.raw.site.take(),
            "domain" => self.raw.domain.take(),
            _ => None,
        }
    }

    fn required(&mut self, name: &str, what: &str) -> Result<String, ConfigError> {
        self.slot(name)
            .ok_or_else(|| ConfigError::new(self.field(name), format!("missing: {what}")))
    }

    /// A required secret reference (`env:NAME`, `file:PATH`, …).
    fn secret(&mut self, name: &str, what: &str) -> Result<SecretRef, ConfigError> {
        let value = self.required(name, &format!("a reference to {what} (env:NAME, file:PATH, …)"))?;
        value
            .parse::<SecretRef>()
            .map_err(|m| ConfigError::new(self.field(name), m))
    }

    /// A required value parsed by its type.
    fn parsed<T: std::str::FromStr<Err = String>>(
        &mut self,
        name: &str,
        what: &str,
    ) -> Result<T, ConfigError> {
        self.required(name, what)?
            .parse()
            .map_err(|m: String| ConfigError::new(self.field(name), m))
    }

    /// A required account name: lowercase letters, digits and '-', as a host label.
    fn name(&mut self, name: &str, what: &str) -> Result<String, ConfigError> {
        let value = self.required(name, what)?;
        let ok = !value.is_empty()
            && value.len() <= 63
            && !value.starts_with('-')
            && value
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if ok {
            Ok(value)
        } else {
            Err(ConfigError::new(
                self.field(name),
                format!("must be {what}: lowercase letters, digits and '-'"),
            ))
        }
    }

    /// A required host name (the API is asked at it, or the path names it): labels of letters, digits and '-'.
    fn host(&mut self, name: &str, what: &str) -> Result<String, ConfigError> {
        let value = self.required(name, what)?;
        let ok = value.len() <= 253
            && value.contains('.')
            && value.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && !label.starts_with('-')
                    && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            });
        if ok {
            Ok(value.to_ascii_lowercase())
        } else {
            Err(ConfigError::new(self.field(name), format!("must be {what}")))
        }
    }

    /// A required id: letters, digits and '-' (a UUID, a numeric id).
    fn id(&mut self, name: &str, what: &str) -> Result<String, ConfigError> {
        let value = self.required(name, what)?;
        if !value.is_empty()
            && value.len() <= 100
            && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            Ok(value)
        } else {
            Err(ConfigError::new(self.field(name), format!("must be {what}")))
        }
    }

    /// A required, non-empty list of event type names.
    fn list(&mut self, name: &str, what: &str) -> Result<Vec<String>, ConfigError> {
        let values = self
            .raw
            .event_types
            .take()
            .ok_or_else(|| ConfigError::new(self.field(name), format!("missing: {what}")))?;
        let ok = !values.is_empty()
            && values.iter().all(|v| {
                !v.is_empty()
                    && v.len() <= 200
                    && v.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._-:".contains(&b))
            });
        if ok {
            Ok(values)
        } else {
            Err(ConfigError::new(
                self.field(name),
                format!("must list {what}: names of letters, digits, '.', '_', '-' and ':'"),
            ))
        }
    }

    fn stripe_account(&mut self) -> Result<Option<String>, ConfigError> {
        match self.slot("account") {
            Some(a) if a.is_empty() || !a.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') => {
                Err(ConfigError::new(
                    self.field("account"),
                    "must be a Stripe account id such as acct_1032D82eZvKYlo2C",
                ))
            }
            a => Ok(a),
        }
    }

    /// GitHub: a repository's or organization's hook read with a token, or the App's own hook with its JWT.
    fn github(&mut self) -> Result<ProviderConfig, ConfigError> {
        let hook: GithubHook = self.parsed(
            "hook",
            "\"repos/OWNER/REPO/hooks/ID\", \"orgs/ORG/hooks/ID\" or \"app\"",
        )?;
        let token = self.slot("token");
        let private_key = self.slot("private_key");
        let app_id = self.raw.app_id.take();
        let secret = |f: &Fields, name: &str, v: &str| -> Result<SecretRef, ConfigError> {
            v.parse::<SecretRef>()
                .map_err(|m| ConfigError::new(f.field(name), m))
        };
        let not_app =
            "only hook = \"app\" is read with an App's JWT; a repository or organization hook takes a token";
        let auth = match (&hook, token, app_id, private_key) {
            (GithubHook::App, Some(_), _, _) => {
                return Err(ConfigError::new(
                    self.field("token"),
                    "an App's hook is read with the App's JWT: give app_id and private_key, not a token",
                ))
            }
            (GithubHook::App, None, Some(app_id), Some(key)) => GithubAuth::App {
                app_id,
                private_key: secret(self, "private_key", &key)?,
            },
            (GithubHook::App, None, None, _) => {
                return Err(ConfigError::new(
                    self.field("app_id"),
                    "missing: hook = \"app\" needs the App's id and private key",
                ))
            }
            (GithubHook::App, None, Some(_), None) => {
                return Err(ConfigError::new(
                    self.field("private_key"),
                    "missing: a reference to the App's PEM private key",
                ))
            }
            (_, _, Some(_), _) => return Err(ConfigError::new(self.field("app_id"), not_app)),
            (_, _, None, Some(_)) => return Err(ConfigError::new(self.field("private_key"), not_app)),
            (_, Some(token), None, None) => GithubAuth::Token(secret(self, "token", &token)?),
            (_, None, None, None) => {
                return Err(ConfigError::new(
                    self.field("token"),
                    "missing: a reference to a token that can read the hook's deliveries",
                ))
            }
        };
        Ok(ProviderConfig::Github { hook, auth })
    }
}
