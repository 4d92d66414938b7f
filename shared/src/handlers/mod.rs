//! Handlers: the business logic run for an event. Built in: `forward` and `log`; custom ones implement
//! [`Handler`] and are registered by name.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;

use crate::config::{ConfigError, HandlerConfig};
use crate::model::Event;

pub mod forward;
mod log;

pub use forward::Forward;
pub use log::Log;

/// Runs an event's business logic. It may run more than once for one event (a crash between the effect and the
/// settle), so it must be idempotent on [`Event::key`] — `forward` sends `Idempotency-Key: {source}:{event_id}`.
#[async_trait]
pub trait Handler: Send + Sync + 'static {
    /// `event.attempts` is this attempt's number, from 1; `event.lease_owner` is this attempt's lease token.
    async fn handle(&self, event: &Event) -> Result<(), HandlerError>;

    /// True for handlers that commit their effect in the same transaction as the event's COMPLETED settle
    /// (conditional on `event.lease_owner`), for an exactly-once effect: the machine then does not settle again
    /// after `Ok`. See the example in `tests/aws/wallet.rs`.
    fn settles_on_success(&self) -> bool {
        false
    }
}

/// How a handler failed decides what happens next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandlerError {
    /// Worth another try after a backoff (timeouts, 5xx, 429, connection errors).
    #[error("{0}")]
    Retryable(String),
    /// Will fail the same way every time: the event goes DEAD at once.
    #[error("{0}")]
    Permanent(String),
}

/// Builds each source's handler from its config; custom handlers are looked up by name.
#[derive(Clone)]
pub struct Registry {
    client: HttpClient,
    custom: HashMap<String, Arc<dyn Handler>>,
}

impl Registry {
    pub fn new(client: HttpClient) -> Self {
        Self {
            client,
            custom: HashMap::new(),
        }
    }

    /// Makes `handler = { kind = "custom", name = NAME }` run `handler`.
    pub fn register(mut self, name: impl Into<String>, handler: Arc<dyn Handler>) -> Self {
        self.custom.insert(name.into(), handler);
        self
    }

    pub fn build(&self, field: &str, config: &HandlerConfig) -> Result<Arc<dyn Handler>, ConfigError> {
        Ok(match config {
            HandlerConfig::Forward {
                url,
                timeout,
                headers,
            } => Arc::new(Forward::new(
                self.client.clone(),
                url.clone(),
                *timeout,
                headers.clone(),
            )),
            HandlerConfig::Log => Arc::new(Log),
            HandlerConfig::Custom { name, .. } => self.custom.get(name).cloned().ok_or_else(|| {
                ConfigError::new(
                    format!("{field}.name"),
                    format!("no handler named {name:?} is registered by this program"),
                )
            })?,
        })
    }
}

/// The HTTP client handlers and alarms share: no redirects (a webhook is not a page), no proxy from the
/// environment, rustls. Built on first use: building it loads the platform's TLS roots (milliseconds of file
/// reads and parsing), which a process that never sends, like the receiver Lambda, should not pay at start.
/// Clones share one client and its connection pool.
#[derive(Clone, Default)]
pub struct HttpClient(Arc<OnceLock<reqwest::Client>>);

impl HttpClient {
    pub fn client(&self) -> &reqwest::Client {
        self.0.get_or_init(|| {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .pool_max_idle_per_host(64)
                .build()
                .unwrap_or_else(|_| reqwest::Client::new())
        })
    }
}

pub fn http_client() -> HttpClient {
    HttpClient::default()
}
