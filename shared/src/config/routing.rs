//! `[destinations.NAME]` and `[routes.NAME]`, and a source's `handler = {…}` as their short form (docs/DESIGN.md
//! "Routing: one event, many destinations").

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{handler_timeout, http_url, table, ConfigError, HandlerConfig, RawRetry, RetryPolicy};
use crate::handlers::forward::OWN_HEADERS;
use crate::model::{DestinationName, RouteName, SourceName};
use crate::routing::Filter;

/// Where a route's events go: the work of a handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestinationConfig {
    pub handler: HandlerConfig,
    /// Named from a source's `handler = {…}` (the short form) rather than from `[destinations.NAME]`.
    pub short_form: bool,
}

/// Which sources a route takes events from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum From {
    /// `from = "*"`: every source, those added later included.
    Every,
    Sources(Vec<SourceName>),
}

impl From {
    pub fn takes(&self, source: &SourceName) -> bool {
        match self {
            From::Every => true,
            From::Sources(s) => s.contains(source),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteConfig {
    pub from: From,
    pub to: DestinationName,
    /// Only events it holds true for are delivered; none admits every event.
    pub filter: Option<Filter>,
    /// The route's own retry policy: `[routes.NAME.retry]` over the top-level `[retry]` (for the short form, the
    /// source's `[sources.X.retry]`).
    pub retry: RetryPolicy,
    pub short_form: bool,
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub(super) enum RawHandler {
    Forward {
        url: String,
        timeout: Option<String>,
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
    Log {},
    Custom {
        name: String,
        timeout: Option<String>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoute {
    from: toml::Value,
    to: String,
    filter: Option<String>,
    retry: Option<RawRetry>,
}

/// Headers of the connection, which no destination may be given from the file.
const HOP_BY_HOP: [&str; 4] = ["content-length", "host", "transfer-encoding", "connection"];

/// Header names that carry credentials: a secret never goes in the file in clear.
fn is_credential(name: &str) -> bool {
    matches!(name, "authorization" | "proxy-authorization" | "cookie")
        || ["token", "secret", "api-key", "apikey", "password", "signature"]
            .iter()
            .any(|w| name.contains(w))
}

impl RawHandler {
    pub(super) fn validate(self, at: &str) -> Result<HandlerConfig, ConfigError> {
        Ok(match self {
            RawHandler::Log {} => HandlerConfig::Log,
            RawHandler::Forward {
                url,
                timeout,
                headers,
            } => {
                let mut kept = Vec::with_capacity(headers.len());
                for (name, value) in headers {
                    let field = format!("{at}.headers.{name}");
                    let lower = name.to_ascii_lowercase();
                    if reqwest::header::HeaderName::from_bytes(lower.as_bytes()).is_err() {
                        return Err(ConfigError::new(field, "is not a header name"));
                    }
                    if OWN_HEADERS.contains(&lower.as_str()) || HOP_BY_HOP.contains(&lower.as_str()) {
                        return Err(ConfigError::new(field, "is set by forward itself"));
                    }
                    if is_credential(&lower) {
                        return Err(ConfigError::new(
                            field,
                            "looks like a credential, and a secret never goes in the file in clear; a header \
                             from a secret reference is not supported yet",
                        ));
                    }
                    if reqwest::header::HeaderValue::from_str(&value).is_err() {
                        return Err(ConfigError::new(field, "is not a header value (visible ASCII)"));
                    }
                    kept.push((lower, value));
                }
                HandlerConfig::Forward {
                    url: http_url(&format!("{at}.url"), &url)?,
                    timeout: handler_timeout(at, timeout.as_ref())?,
                    headers: kept,
                }
            }
            RawHandler::Custom { name, timeout } => {
                if name.is_empty() {
                    return Err(ConfigError::new(format!("{at}.name"), "must not be empty"));
                }
                HandlerConfig::Custom {
                    name,
                    timeout: handler_timeout(at, timeout.as_ref())?,
                }
            }
        })
    }
}

/// The routes and destinations of a config: the explicit ones and each source handler's short form.
pub(super) struct Routing {
    pub destinations: BTreeMap<DestinationName, DestinationConfig>,
    pub routes: BTreeMap<RouteName, RouteConfig>,
}

impl Routing {
    pub(super) fn validate(
        raw_destinations: BTreeMap<String, toml::Value>,
        raw_routes: BTreeMap<String, toml::Value>,
        short_forms: Vec<(SourceName, HandlerConfig, RetryPolicy)>,
        sources: &[SourceName],
        retry: RetryPolicy,
    ) -> Result<Routing, ConfigError> {
        let mut destinations = BTreeMap::new();
        let mut routes = BTreeMap::new();
        for (name, handler, retry) in short_forms {
            let destination = DestinationName::parse(name.as_str())
                .map_err(|e| ConfigError::new(format!("sources.{name}"), e.0))?;
            let route = RouteName::parse(name.as_str())
                .map_err(|e| ConfigError::new(format!("sources.{name}"), e.0))?;
            destinations.insert(
                destination.clone(),
                DestinationConfig {
                    handler,
                    short_form: true,
                },
            );
            routes.insert(
                route,
                RouteConfig {
                    from: From::Sources(vec![name]),
                    to: destination,
                    filter: None,
                    retry,
                    short_form: true,
                },
            );
        }
        let taken = |kind: &str, at: &str, name: &str| {
            ConfigError::new(
                at,
                format!(
                    "the name is used twice: source {name:?} has a handler, whose short form is the {kind} {name:?} \
                     (rename this one, or move the source's handler into [{kind}s.{name}])"
                ),
            )
        };
        for (name, value) in raw_destinations {
            let at = format!("destinations.{name}");
            let parsed = DestinationName::parse(&name).map_err(|e| ConfigError::new(&at, e.0))?;
            if destinations.contains_key(&parsed) {
                return Err(taken("destination", &at, &name));
            }
            let raw: RawHandler = table(&at, value)?;
            destinations.insert(
                parsed,
                DestinationConfig {
                    handler: raw.validate(&at)?,
                    short_form: false,
                },
            );
        }
        for (name, value) in raw_routes {
            let at = format!("routes.{name}");
            let parsed = RouteName::parse(&name).map_err(|e| ConfigError::new(&at, e.0))?;
            if routes.contains_key(&parsed) {
                return Err(taken("route", &at, &name));
            }
            let raw: RawRoute = table(&at, value)?;
            routes.insert(parsed, raw.validate(&at, &destinations, sources, retry)?);
        }
        for source in sources {
            if !routes.values().any(|r| r.from.takes(source)) {
                return Err(ConfigError::new(
                    format!("sources.{source}"),
                    "no route takes its events: give it a handler, or add a [routes.NAME] with it in `from`",
                ));
            }
        }
        Ok(Routing { destinations, routes })
    }
}

impl RawRoute {
    fn validate(
        self,
        at: &str,
        destinations: &BTreeMap<DestinationName, DestinationConfig>,
        sources: &[SourceName],
        retry: RetryPolicy,
    ) -> Result<RouteConfig, ConfigError> {
        let from_at = format!("{at}.from");
        let names: Vec<String> = match self.from {
            toml::Value::String(s) if s == "*" => Vec::new(),
            toml::Value::String(s) => vec![s],
            toml::Value::Array(a) if !a.is_empty() => a
                .into_iter()
                .map(|v| match v {
                    toml::Value::String(s) if s != "*" => Ok(s),
                    _ => Err(ConfigError::new(&from_at, "a list holds source names")),
                })
                .collect::<Result<_, _>>()?,
            _ => {
                return Err(ConfigError::new(
                    &from_at,
                    "must be a source's name, a list of them, or \"*\" for every source",
                ))
            }
        };
        let from = if names.is_empty() {
            From::Every
        } else {
            let mut parsed = Vec::with_capacity(names.len());
            for n in names {
                let name = SourceName::parse(&n).map_err(|e| ConfigError::new(&from_at, e.0))?;
                if !sources.contains(&name) {
                    return Err(ConfigError::new(
                        &from_at,
                        format!("{n:?} is not a configured source"),
                    ));
                }
                if parsed.contains(&name) {
                    return Err(ConfigError::new(&from_at, format!("{n:?} is listed twice")));
                }
                parsed.push(name);
            }
            From::Sources(parsed)
        };
        let to_at = format!("{at}.to");
        let to = DestinationName::parse(&self.to).map_err(|e| ConfigError::new(&to_at, e.0))?;
        if !destinations.contains_key(&to) {
            return Err(ConfigError::new(
                &to_at,
                format!(
                    "{:?} is not a destination: add [destinations.{}]",
                    self.to, self.to
                ),
            ));
        }
        let filter = self
            .filter
            .as_deref()
            .map(|f| Filter::compile(f).map_err(|e| ConfigError::new(format!("{at}.filter"), e.to_string())))
            .transpose()?;
        let retry = match &self.retry {
            None => retry,
            Some(r) => r.over(&format!("{at}.retry"), retry)?,
        };
        Ok(RouteConfig {
            from,
            to,
            filter,
            retry,
            short_form: false,
        })
    }
}
