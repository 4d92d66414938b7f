//! The console: what it serves from, how it is set up, and its routes with the security layer around every one.

use std::sync::Arc;

use axum::http::header;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use secrecy::SecretString;

use inbox_core::config::Config;
use inbox_core::model::SourceName;
use inbox_core::ports::{Queue, Store, Timeline};

use crate::browse::{event, events, overview, raw};
use crate::counts::Counts;
use crate::error::ConsoleError;
use crate::guard::guard;
use crate::login::{login, login_page, logout};
use crate::replay::{confirm_replay, replay_many, replay_one};
use crate::sessions::{SessionPolicy, Sessions};

/// What the console serves from: the ledger, and the queue replays are sent to (AWS; the embedded `inbox serve`
/// notices another process's replay by itself).
pub struct Console {
    pub(crate) ledger: Arc<dyn Store>,
    pub(crate) queue: Option<Arc<dyn Queue>>,
    pub(crate) token: Option<SecretString>,
    /// Signs CSRF tokens; new in every process, as the sessions are.
    pub(crate) key: [u8; 32],
    /// The logins this process holds: a restart logs everyone out.
    pub(crate) sessions: Sessions,
    pub(crate) policy: SessionPolicy,
    /// The sources with a `[sources.X.reconcile]` block, where the console was given the config: the overview shows
    /// each one's last run. Without it, only those of the sources it counts events for (on DynamoDB, the ones with
    /// failed or dead events).
    pub(crate) reconciled: Option<Vec<SourceName>>,
    /// What the overview calls this store ("SQLite at …", "DynamoDB table …").
    pub(crate) store_name: String,
    /// The overview's counts, as last taken.
    pub(crate) counts: Arc<Counts>,
    /// The overview's chart, where the ledger cannot draw it (AWS: CloudWatch).
    pub(crate) timeline: Option<Arc<dyn Timeline>>,
}

impl Console {
    pub fn new(
        ledger: Arc<dyn Store>,
        queue: Option<Arc<dyn Queue>>,
        token: Option<SecretString>,
        store_name: impl Into<String>,
    ) -> Self {
        Self {
            ledger,
            queue,
            token,
            key: rand::random(),
            sessions: Sessions::default(),
            policy: SessionPolicy::default(),
            reconciled: None,
            store_name: store_name.into(),
            counts: Arc::default(),
            timeline: None,
        }
    }

    /// How long logins last and how their cookie is marked (by default 30 minutes idle, 12 hours in all, `Secure`).
    pub fn with_sessions(mut self, policy: SessionPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The config the store serves: the overview lists the last reconciliation run of every source that has a
    /// `reconcile` block, whether or not it has events to count.
    pub fn with_config(mut self, config: &Config) -> Self {
        self.reconciled = Some(
            config
                .sources
                .iter()
                .filter(|(_, s)| s.reconcile.is_some())
                .map(|(name, _)| name.clone())
                .collect(),
        );
        self
    }

    /// Where the overview's chart comes from when the ledger cannot draw it without a scan.
    pub fn with_timeline(mut self, timeline: Arc<dyn Timeline>) -> Self {
        self.timeline = Some(timeline);
        self
    }

    /// The console's routes, with its security layer around every one of them.
    pub fn router(self) -> Router {
        let state = Arc::new(self);
        Router::new()
            .route("/", get(overview))
            .route("/events", get(events))
            .route("/event", get(event))
            .route("/event/raw", get(raw))
            .route("/event/replay", axum::routing::post(replay_one))
            .route("/replay", get(confirm_replay).post(replay_many))
            .route("/login", get(login_page).post(login))
            .route("/logout", axum::routing::post(logout))
            .route("/style.css", get(stylesheet))
            .fallback(not_found)
            .layer(middleware::from_fn_with_state(state.clone(), guard))
            .with_state(state)
    }
}

async fn stylesheet() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("style.css"),
    )
        .into_response()
}

async fn not_found() -> ConsoleError {
    ConsoleError::NotFound
}
