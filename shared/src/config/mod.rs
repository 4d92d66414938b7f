//! The one TOML file both runtimes read: validated once at start, failing with the source and field named.
//! Secrets are references (`env:NAME`, `file:PATH`, and on AWS `secretsmanager:NAME`, `ssm:NAME`), never values.
//!
//! This file holds the validated configuration and the validation of everything but the `[sources.X.reconcile]`
//! block, which is in [`reconcile`]; the tests are in `tests.rs`.

mod reconcile;
mod routing;
mod scheme;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::model::{RouteName, SourceName};
use crate::schemes::families::jwt::JwtKey;
use crate::schemes::families::{Family, Jwt, Rsa, RsaKey};
use crate::schemes::{PublicKey, Scheme};
use crate::time::parse_duration;
use reconcile::RawReconcile;
pub use reconcile::{
    GithubAuth, GithubHook, GitlabHook, ProviderConfig, ReconcileConfig, DEFAULT_RECONCILE_INTERVAL,
    DEFAULT_RECONCILE_LOOKBACK, DEFAULT_RECONCILE_SETTLE,
};
pub use routing::{DestinationConfig, From, RouteConfig};
use routing::{RawHandler, Routing};

pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
/// The most any source may accept; Lambda Function URLs stop at 6 MB anyway.
pub const MAX_BODY_BYTES_LIMIT: usize = 32 * 1024 * 1024;
pub const DEFAULT_HANDLER_TIMEOUT: Duration = Duration::from_secs(10);
/// Request bodies in memory at once over every connection, by default.
pub const DEFAULT_MAX_INFLIGHT_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct Config {
    pub server: ServerConfig,
    /// Which store `inbox serve` and the operator commands run over (`[store]`): SQLite by default.
    pub store: StoreConfig,
    pub alarm: AlarmConfig,
    pub retry: RetryPolicy,
    pub sweeper: SweeperConfig,
    /// How long completed events are kept for dedup.
    pub retention: Duration,
    pub sources: BTreeMap<SourceName, SourceConfig>,
    /// Where events go: `[destinations.NAME]`, and one named after each source that has a `handler`.
    pub destinations: BTreeMap<crate::model::DestinationName, DestinationConfig>,
    /// Which events go where: `[routes.NAME]`, and one named after each source that has a `handler`.
    pub routes: BTreeMap<RouteName, RouteConfig>,
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    /// Handlers running at once.
    pub workers: usize,
    /// Writes waiting for the store before new requests get 503 + Retry-After.
    pub max_pending_writes: usize,
    /// How long a client may take to send its body before it gets 408 (default 30 s).
    pub read_timeout: Duration,
    /// Request bodies held in memory at once, over all connections: past it, 503 with Retry-After (default 64 MiB).
    pub max_inflight_bytes: usize,
}

/// The store `[store] kind` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreConfig {
    /// One SQLite file in `server.data_dir`: one `inbox serve` per directory.
    Sqlite,
    /// One PostgreSQL database shared by any number of `inbox serve` (docs/DESIGN.md, "PostgreSQL").
    Postgres {
        /// The connection URL, a secret reference (it may hold a password).
        url: SecretRef,
        /// Connections each process keeps at most (default 16).
        pool_size: usize,
        /// How long one statement may run before the server cancels it (default 10 s).
        statement_timeout: Duration,
        /// A PEM file of roots to trust for the server's certificate, beside the web's (with `sslmode=require`).
        ca_file: Option<PathBuf>,
        /// How long an instance's renewed heartbeat vouches for it (default 30 s, at least 2 s): past it, another
        /// instance may end its leases. An instance that cannot renew its own for half of it stops running
        /// handlers ([`crate::fence`]).
        liveness: Duration,
    },
}

#[derive(Debug, Clone, Default)]
pub struct AlarmConfig {
    pub notify_url: Option<reqwest::Url>,
}

/// When to try again and when to give up (docs/DESIGN.md "States and transitions").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub base: Duration,
    pub cap: Duration,
    pub max_attempts: u32,
    pub max_age: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(5),
            cap: Duration::from_secs(15 * 60),
            max_attempts: 12,
            max_age: Duration::from_secs(24 * 3600),
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct SweeperConfig {
    pub interval: Duration,
    /// How long a RECEIVED or overdue FAILED event may wait for its queue message before the sweeper re-sends it.
    pub grace: Duration,
}

impl Default for SweeperConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(60),
            grace: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, Clone)]
pub struct SourceConfig {
    pub scheme: Scheme,
    pub secrets: Vec<SecretRef>,
    /// The verification key of an asymmetric scheme, parsed.
    pub public_key: Option<PublicKey>,
    /// The endpoint's public URL as registered with the provider, where the scheme signs it.
    pub url: Option<String>,
    /// The token a provider's `GET` handshake carries (a reference, like the secrets).
    pub verify_token: Option<SecretRef>,
    pub tolerance: Duration,
    pub max_body_bytes: usize,
    /// The source's own retry policy (`[sources.X.retry]`), for the route of its `handler` short form.
    pub retry: RetryPolicy,
    /// A body already stored under another id of the same type (within retention) is answered as a duplicate of
    /// that event instead of being stored as its own, marked event: an opt-in, since distinct events do carry
    /// identical bytes (docs/DESIGN.md "Receiving").
    pub refuse_resent_bodies: bool,
    /// `[sources.X.reconcile]`: the periodic check against the provider's API (docs/DESIGN.md "Reconciliation").
    pub reconcile: Option<ReconcileConfig>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandlerConfig {
    Forward {
        url: reqwest::Url,
        timeout: Duration,
        /// Sent with every request (lower-case names), beside the ones `forward` sets itself.
        headers: Vec<(String, String)>,
    },
    Log,
    /// A handler registered by name by the program embedding webhook-inbox.
    Custom {
        name: String,
        timeout: Duration,
    },
}

impl HandlerConfig {
    pub fn timeout(&self) -> Duration {
        match self {
            HandlerConfig::Forward { timeout, .. } | HandlerConfig::Custom { timeout, .. } => *timeout,
            HandlerConfig::Log => DEFAULT_HANDLER_TIMEOUT,
        }
    }
}

/// Where a secret lives. Its value is read at start and never printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretRef {
    Env(String),
    File(PathBuf),
    SecretsManager(String),
    Ssm(String),
}

impl std::str::FromStr for SecretRef {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, rest) = s.split_once(':').unwrap_or(("", ""));
        if rest.is_empty() {
            return Err(
                "must be a reference (env:NAME, file:PATH, secretsmanager:NAME or ssm:NAME), never the secret itself"
                    .into(),
            );
        }
        Ok(match kind {
            "env" => SecretRef::Env(rest.to_owned()),
            "file" => SecretRef::File(PathBuf::from(rest)),
            "secretsmanager" => SecretRef::SecretsManager(rest.to_owned()),
            "ssm" => SecretRef::Ssm(rest.to_owned()),
            _ => {
                return Err(
                    "must start with env:, file:, secretsmanager: or ssm: (the secret itself never goes in the file)"
                        .into(),
                )
            }
        })
    }
}

impl std::fmt::Display for SecretRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SecretRef::Env(n) => write!(f, "env:{n}"),
            SecretRef::File(p) => write!(f, "file:{}", p.display()),
            SecretRef::SecretsManager(n) => write!(f, "secretsmanager:{n}"),
            SecretRef::Ssm(n) => write!(f, "ssm:{n}"),
        }
    }
}

/// A configuration error: `field` is the dotted path (`sources.stripe.secrets[0]`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("config: {field}: {message}")]
pub struct ConfigError {
    pub field: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(path.display().to_string(), format!("cannot read: {e}")))?;
        Config::from_toml(&text)
    }

    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let msg = e.message().to_owned();
            let at = e
                .span()
                .map(|s| format!("line {}", text[..s.start.min(text.len())].lines().count().max(1)))
                .unwrap_or_else(|| "file".into());
            ConfigError::new(at, msg)
        })?;
        raw.validate()
    }

    /// Names of every source, in order.
    pub fn source_names(&self) -> impl Iterator<Item = &SourceName> {
        self.sources.keys()
    }

    /// The routes that take a source's events, in name order.
    pub fn routes_from(&self, source: &SourceName) -> Vec<(&RouteName, &RouteConfig)> {
        self.routes.iter().filter(|(_, r)| r.from.takes(source)).collect()
    }

    /// The one route a source's events run on, and its destination's handler.
    ///
    /// The ledger keeps one state per event until it keeps one per delivery (docs/DESIGN.md "Routing"), so the
    /// runtimes run a source with one unfiltered route and refuse, naming the route, a source taken by several
    /// routes or by a filtered one. Such routes are already read and checked (`inbox routes test` judges them).
    pub fn single_route(
        &self,
        source: &SourceName,
    ) -> Result<(&RouteName, &RouteConfig, &HandlerConfig), ConfigError> {
        let mut routes = self.routes_from(source).into_iter();
        let Some((name, route)) = routes.next() else {
            return Err(ConfigError::new(
                format!("sources.{source}"),
                "no route takes its events",
            ));
        };
        if let Some((other, _)) = routes.next() {
            return Err(ConfigError::new(
                format!("routes.{other}"),
                format!(
                    "source \"{source}\" is taken by routes \"{name}\" and \"{other}\": one event to several destinations \
                     needs a delivery per route, which this release does not run yet (`inbox routes test` judges \
                     these routes already)"
                ),
            ));
        }
        if route.filter.is_some() {
            return Err(ConfigError::new(
                format!("routes.{name}.filter"),
                "a filtered route needs a delivery per route, which this release does not run yet (`inbox routes \
                 test` judges it already)",
            ));
        }
        let handler = self
            .destinations
            .get(&route.to)
            .map(|d| &d.handler)
            .ok_or_else(|| ConfigError::new(format!("routes.{name}.to"), "is not a destination"))?;
        Ok((name, route, handler))
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    server: RawServer,
    #[serde(default)]
    store: RawStore,
    #[serde(default)]
    alarm: RawAlarm,
    #[serde(default)]
    retry: RawRetry,
    #[serde(default)]
    sweeper: RawSweeper,
    retention_days: Option<u32>,
    #[serde(default)]
    sources: BTreeMap<String, toml::Value>,
    #[serde(default)]
    destinations: BTreeMap<String, toml::Value>,
    #[serde(default)]
    routes: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawServer {
    listen: Option<String>,
    data_dir: Option<PathBuf>,
    workers: Option<usize>,
    max_pending_writes: Option<usize>,
    read_timeout: Option<String>,
    max_inflight_bytes: Option<usize>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawStore {
    kind: Option<String>,
    url: Option<String>,
    pool_size: Option<usize>,
    statement_timeout: Option<String>,
    ca_file: Option<PathBuf>,
    liveness: Option<String>,
}

impl RawStore {
    fn validate(&self) -> Result<StoreConfig, ConfigError> {
        match self.kind.as_deref().unwrap_or("sqlite") {
            "sqlite" => {
                for (field, set) in [
                    ("store.url", self.url.is_some()),
                    ("store.pool_size", self.pool_size.is_some()),
                    ("store.statement_timeout", self.statement_timeout.is_some()),
                    ("store.ca_file", self.ca_file.is_some()),
                    ("store.liveness", self.liveness.is_some()),
                ] {
                    if set {
                        return Err(ConfigError::new(field, "is for kind = \"postgres\" only"));
                    }
                }
                Ok(StoreConfig::Sqlite)
            }
            "postgres" => {
                let url = self
                    .url
                    .as_deref()
                    .ok_or_else(|| {
                        ConfigError::new(
                            "store.url",
                            "is required for kind = \"postgres\" (a reference such as env:DATABASE_URL)",
                        )
                    })?
                    .parse::<SecretRef>()
                    .map_err(|e| ConfigError::new("store.url", e))?;
                let pool_size = self.pool_size.unwrap_or(16);
                if !(2..=1000).contains(&pool_size) {
                    return Err(ConfigError::new("store.pool_size", "must be between 2 and 1000"));
                }
                let statement_timeout = positive(
                    "store.statement_timeout",
                    duration(
                        "store.statement_timeout",
                        self.statement_timeout.as_ref(),
                        Duration::from_secs(10),
                    )?,
                )?;
                let liveness = duration("store.liveness", self.liveness.as_ref(), Duration::from_secs(30))?;
                if liveness < Duration::from_secs(2) {
                    return Err(ConfigError::new(
                        "store.liveness",
                        "must be at least 2s (a heartbeat goes out every tenth of it)",
                    ));
                }
                Ok(StoreConfig::Postgres {
                    url,
                    pool_size,
                    statement_timeout,
                    ca_file: self.ca_file.clone(),
                    liveness,
                })
            }
            other => Err(ConfigError::new(
                "store.kind",
                format!("{other:?} is not a store: \"sqlite\" (the default) or \"postgres\""),
            )),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawAlarm {
    notify_url: Option<String>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
struct RawRetry {
    base: Option<String>,
    cap: Option<String>,
    max_attempts: Option<u32>,
    max_age: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSweeper {
    interval: Option<String>,
    grace: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    scheme: String,
    #[serde(default)]
    secrets: Vec<String>,
    tolerance: Option<String>,
    max_body_bytes: Option<usize>,
    handler: Option<RawHandler>,
    retry: Option<RawRetry>,
    refuse_resent_bodies: Option<bool>,
    /// The source's verification key as the provider prints it (public: not a secret reference).
    public_key: Option<String>,
    /// The endpoint's public URL as registered with the provider, where the provider signs it.
    url: Option<String>,
    /// A secret reference: the token a provider's GET handshake carries (Meta's `hub.verify_token`).
    verify_token: Option<String>,
    // A family configured field by field only (config/scheme.rs).
    signature_header: Option<String>,
    algorithm: Option<String>,
    encoding: Option<String>,
    prefix: Option<String>,
    id: Option<String>,
    #[serde(rename = "type")]
    event_type: Option<String>,
    signed: Option<String>,
    format: Option<String>,
    timestamp: Option<String>,
    timestamp_unit: Option<String>,
    secret_encoding: Option<String>,
    token: Option<String>,
    issuer: Option<String>,
    audience: Option<String>,
    body_hash_claim: Option<String>,
    batch: Option<String>,
    reconcile: Option<RawReconcile>,
}

/// A named table (`[sources.NAME]`, `[routes.NAME]`, …) read as its raw type; an unknown key is named at `at`.
fn table<T: serde::de::DeserializeOwned>(at: &str, value: toml::Value) -> Result<T, ConfigError> {
    value
        .try_into()
        .map_err(|e: toml::de::Error| ConfigError::new(at, e.message().to_owned()))
}

fn duration(field: &str, value: Option<&String>, default: Duration) -> Result<Duration, ConfigError> {
    match value {
        None => Ok(default),
        Some(v) => parse_duration(v).map_err(|m| ConfigError::new(field, m)),
    }
}

fn positive(field: &str, d: Duration) -> Result<Duration, ConfigError> {
    if d.is_zero() {
        Err(ConfigError::new(field, "must be longer than 0"))
    } else {
        Ok(d)
    }
}

impl RawRetry {
    fn over(&self, at: &str, base: RetryPolicy) -> Result<RetryPolicy, ConfigError> {
        let p = RetryPolicy {
            base: positive(
                &format!("{at}.base"),
                duration(&format!("{at}.base"), self.base.as_ref(), base.base)?,
            )?,
            cap: duration(&format!("{at}.cap"), self.cap.as_ref(), base.cap)?,
            max_attempts: self.max_attempts.unwrap_or(base.max_attempts),
            max_age: positive(
                &format!("{at}.max_age"),
                duration(&format!("{at}.max_age"), self.max_age.as_ref(), base.max_age)?,
            )?,
        };
        if p.cap < p.base {
            return Err(ConfigError::new(
                format!("{at}.cap"),
                "must not be shorter than base",
            ));
        }
        if p.max_attempts == 0 {
            return Err(ConfigError::new(
                format!("{at}.max_attempts"),
                "must be at least 1",
            ));
        }
        Ok(p)
    }
}

impl RawConfig {
    fn validate(self) -> Result<Config, ConfigError> {
        let listen = match &self.server.listen {
            None => SocketAddr::from(([127, 0, 0, 1], 3000)),
            Some(l) => l.parse().map_err(|_| {
                ConfigError::new(
                    "server.listen",
                    format!("{l:?} is not an address such as 127.0.0.1:3000"),
                )
            })?,
        };
        let workers = self.server.workers.unwrap_or(16);
        if !(1..=1024).contains(&workers) {
            return Err(ConfigError::new("server.workers", "must be between 1 and 1024"));
        }
        let max_pending_writes = self.server.max_pending_writes.unwrap_or(4096);
        if !(1..=1_000_000).contains(&max_pending_writes) {
            return Err(ConfigError::new(
                "server.max_pending_writes",
                "must be between 1 and 1000000",
            ));
        }
        let server = ServerConfig {
            listen,
            data_dir: self
                .server
                .data_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from("./data")),
            workers,
            max_pending_writes,
            read_timeout: positive(
                "server.read_timeout",
                duration(
                    "server.read_timeout",
                    self.server.read_timeout.as_ref(),
                    Duration::from_secs(30),
                )?,
            )?,
            max_inflight_bytes: self
                .server
                .max_inflight_bytes
                .unwrap_or(DEFAULT_MAX_INFLIGHT_BYTES),
        };
        let alarm = AlarmConfig {
            notify_url: self
                .alarm
                .notify_url
                .as_deref()
                .map(|u| http_url("alarm.notify_url", u))
                .transpose()?,
        };
        let retry = self.retry.over("retry", RetryPolicy::default())?;
        let defaults = SweeperConfig::default();
        let sweeper = SweeperConfig {
            interval: positive(
                "sweeper.interval",
                duration(
                    "sweeper.interval",
                    self.sweeper.interval.as_ref(),
                    defaults.interval,
                )?,
            )?,
            grace: duration("sweeper.grace", self.sweeper.grace.as_ref(), defaults.grace)?,
        };
        let retention_days = self.retention_days.unwrap_or(30);
        if !(1..=3650).contains(&retention_days) {
            return Err(ConfigError::new("retention_days", "must be between 1 and 3650"));
        }
        let mut sources = BTreeMap::new();
        let mut short_forms = Vec::new();
        for (name, value) in self.sources {
            let at = format!("sources.{name}");
            let source_name = SourceName::parse(&name).map_err(|e| ConfigError::new(&at, e.0))?;
            let raw: RawSource = table(&at, value)?;
            let (source, handler) = raw.validate(&at, retry)?;
            if let Some(handler) = handler {
                short_forms.push((source_name.clone(), handler, source.retry));
            }
            sources.insert(source_name, source);
        }
        if sources.is_empty() {
            return Err(ConfigError::new("sources", "no source is configured"));
        }
        let names: Vec<SourceName> = sources.keys().cloned().collect();
        let routing = Routing::validate(self.destinations, self.routes, short_forms, &names, retry)?;
        let retention = Duration::from_secs(u64::from(retention_days) * 86_400);
        // Past retention a completed event's record is gone: a run looking further back would take an event done
        // and forgotten for one never received, create it again and run its handler twice.
        for (name, source) in &sources {
            if let Some(r) = source.reconcile.as_ref().filter(|r| r.lookback > retention) {
                return Err(ConfigError::new(
                    format!("sources.{name}.reconcile.lookback"),
                    format!(
                        "{} is longer than retention_days ({retention_days}): past retention the ledger cannot tell \
                         an event never received from one done and forgotten; shorten lookback or raise retention_days",
                        humantime::format_duration(r.lookback)
                    ),
                ));
            }
        }
        let largest = sources.values().map(|s| s.max_body_bytes).max().unwrap_or(0);
        if server.max_inflight_bytes < largest {
            return Err(ConfigError::new(
                "server.max_inflight_bytes",
                format!("must be at least the largest source's max_body_bytes ({largest})"),
            ));
        }
        Ok(Config {
            server,
            store: self.store.validate()?,
            alarm,
            retry,
            sweeper,
            retention,
            sources,
            destinations: routing.destinations,
            routes: routing.routes,
        })
    }
}

fn http_url(field: &str, text: &str) -> Result<reqwest::Url, ConfigError> {
    let url = reqwest::Url::parse(text).map_err(|e| ConfigError::new(field, format!("not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(ConfigError::new(field, "must be an http:// or https:// URL"));
    }
    Ok(url)
}

impl RawSource {
    /// The source, and its `handler`'s config if it has one (the short form of a route).
    fn validate(
        self,
        at: &str,
        retry: RetryPolicy,
    ) -> Result<(SourceConfig, Option<HandlerConfig>), ConfigError> {
        let scheme = self.scheme(at)?;
        let family = scheme.preset().map(|p| &p.family);
        let asymmetric = matches!(
            family,
            Some(Family::Ed25519(_) | Family::Ecdsa(_))
                | Some(Family::Rsa(_))
                | Some(Family::Jwt(Jwt {
                    key: JwtKey::Configured | JwtKey::Jwks { .. },
                    ..
                }))
        );
        let fetched = matches!(
            family,
            Some(Family::Rsa(Rsa {
                key: RsaKey::Certificate { .. },
                ..
            })) | Some(Family::Jwt(Jwt {
                key: JwtKey::Jwks { .. },
                ..
            }))
        );
        let public_key = match (&self.public_key, asymmetric && !fetched) {
            (Some(text), _) => Some(
                scheme
                    .public_key(text)
                    .map_err(|e| ConfigError::new(format!("{at}.public_key"), e.to_string()))?,
            ),
            (None, true) => {
                return Err(ConfigError::new(
                    format!("{at}.public_key"),
                    format!(
                        "missing: scheme {:?} verifies with the provider's public key",
                        scheme.name()
                    ),
                ))
            }
            (None, false) => None,
        };
        if self.secrets.is_empty() && !asymmetric {
            return Err(ConfigError::new(
                format!("{at}.secrets"),
                "at least one secret reference is needed",
            ));
        }
        let url = match &self.url {
            None => None,
            Some(text) => Some(http_url(&format!("{at}.url"), text)?.as_str().to_owned()),
        };
        let url_needed = match family {
            Some(Family::Hmac(h)) => h.signed.uses_url(),
            Some(Family::Jwt(j)) => j.audience_is_url,
            Some(Family::Custom(_)) | None => false,
            Some(Family::Ed25519(a) | Family::Ecdsa(a)) => a.signed.uses_url(),
            Some(Family::Rsa(r)) => r.spec.signed.uses_url(),
            Some(Family::Token(_)) => false,
        } || scheme.preset().is_some_and(|p| p.needs_url);
        if url_needed && url.is_none() {
            return Err(ConfigError::new(
                format!("{at}.url"),
                format!(
                    "missing: scheme {:?} signs the endpoint's public URL (as registered with the provider)",
                    scheme.name()
                ),
            ));
        }
        let verify_token = self
            .verify_token
            .as_deref()
            .map(|s| {
                s.parse::<SecretRef>()
                    .map_err(|m| ConfigError::new(format!("{at}.verify_token"), m))
            })
            .transpose()?;
        if verify_token.is_none() && scheme.preset().is_some_and(|p| p.needs_verify_token) {
            return Err(ConfigError::new(
                format!("{at}.verify_token"),
                format!(
                    "missing: scheme {:?} answers a GET handshake that carries it",
                    scheme.name()
                ),
            ));
        }
        let secrets = self
            .secrets
            .iter()
            .enumerate()
            .map(|(i, s)| {
                s.parse::<SecretRef>()
                    .map_err(|m| ConfigError::new(format!("{at}.secrets[{i}]"), m))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let default_tolerance = scheme
            .default_tolerance_secs()
            .map_or(DEFAULT_TOLERANCE, Duration::from_secs);
        let tolerance = duration(
            &format!("{at}.tolerance"),
            self.tolerance.as_ref(),
            default_tolerance,
        )?;
        if tolerance.is_zero() && scheme.has_timestamp() {
            return Err(ConfigError::new(
                format!("{at}.tolerance"),
                "must be longer than 0",
            ));
        }
        let max_body_bytes = self.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES);
        if !(1..=MAX_BODY_BYTES_LIMIT).contains(&max_body_bytes) {
            return Err(ConfigError::new(
                format!("{at}.max_body_bytes"),
                format!("must be between 1 and {MAX_BODY_BYTES_LIMIT}"),
            ));
        }
        let handler = self
            .handler
            .map(|h| h.validate(&format!("{at}.handler")))
            .transpose()?;
        let retry = match &self.retry {
            None => retry,
            Some(r) => r.over(&format!("{at}.retry"), retry)?,
        };
        let reconcile = self
            .reconcile
            .map(|r| r.validate(&format!("{at}.reconcile"), &scheme))
            .transpose()?;
        let refuse_resent_bodies = self.refuse_resent_bodies.unwrap_or(false);
        let source = SourceConfig {
            scheme,
            secrets,
            public_key,
            url,
            verify_token,
            tolerance,
            max_body_bytes,
            retry,
            refuse_resent_bodies,
            reconcile,
        };
        Ok((source, handler))
    }
}

fn handler_timeout(at: &str, value: Option<&String>) -> Result<Duration, ConfigError> {
    let field = format!("{at}.timeout");
    let t = positive(&field, duration(&field, value, DEFAULT_HANDLER_TIMEOUT)?)?;
    if t > Duration::from_secs(900) {
        return Err(ConfigError::new(field, "must be at most 15m"));
    }
    Ok(t)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
