//! Local fakes of the providers' APIs that reconciliation reads, one file per provider, each served by axum on
//! 127.0.0.1:0 and following the provider's published API description (cited in its file): its pages and cursors,
//! its rate-limit answer and headers, a 401 for a wrong credential and a 500 in the middle of a walk.
//!
//! Every fake but the two oldest (Stripe, GitHub: tests of their own) is a [`Fake`]: it keeps the events a sender
//! created ([`Api`]), renders them as its API lists them and as its webhooks carry them, and says how a source
//! receiving its webhooks and a reconcile block reading its API are written. The tests over every provider
//! (`shared/tests/core/reconcile.rs`, `tests/serve/lossy.rs`, `tests/aws/reconcile.rs`) take [`fakes`].
// Test-only: a malformed request from the code under test should fail the test loudly.
#![allow(clippy::unwrap_used)]
// Each fake's `new` answers the trait object the tests hold (`Arc<dyn Fake>`), not `Self`.
#![allow(clippy::new_ret_no_self)]

mod github;
mod stripe;
// The providers behind `Fake`, one line each (keep sorted).
mod chargebee;
mod gitlab;
mod gocardless;
mod mailgun;
mod okta;
mod paddle;
mod paypal;
mod persona;
mod polar;
mod square;
mod workos;

pub use github::*;
pub use stripe::*;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

/// Every provider's fake, fresh, by the catalogue's names; only those `RECONCILE_ONLY` names (comma-separated)
/// when it is set, to run one provider's cases alone.
pub fn fakes() -> Vec<Arc<dyn Fake>> {
    let all = all_fakes();
    match std::env::var("RECONCILE_ONLY") {
        Ok(only) => {
            let only: Vec<&str> = only.split(',').map(str::trim).collect();
            all.into_iter().filter(|f| only.contains(&f.provider())).collect()
        }
        Err(_) => all,
    }
}

/// Every provider's fake, fresh, whatever `RECONCILE_ONLY` says.
pub fn all_fakes() -> Vec<Arc<dyn Fake>> {
    vec![
        chargebee::FakeChargebee::new(),
        gitlab::FakeGitlab::new(),
        gocardless::FakeGocardless::new(),
        mailgun::FakeMailgun::new(),
        okta::FakeOkta::new(),
        paddle::FakePaddle::new(),
        paypal::FakePaypal::new(),
        persona::FakePersona::new(),
        polar::FakePolar::new(),
        square::FakeSquare::new(),
        workos::FakeWorkos::new(),
    ]
}

/// One event a sender created: the fake lists it and [`Fake::publish`] renders the webhook that announces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The id the webhook carries (where the scheme finds it), as the provider writes ids.
    pub id: String,
    pub event_type: String,
    pub created_ms: i64,
}

/// A webhook as the provider POSTs it, before signing: the harness signs it with the source's scheme.
#[derive(Debug, Clone)]
pub struct Webhook {
    pub body: Vec<u8>,
    pub content_type: &'static str,
    /// Headers the provider sends beside the signature (an id or type header, a delivery time…).
    pub headers: Vec<(String, String)>,
}

/// How a source receiving a provider's webhooks is configured and signed for.
#[derive(Debug, Clone, Default)]
pub struct Receiving {
    /// The source's lines after `scheme = "…"`: secrets, keys, URL… referring to `env` by name.
    pub config: String,
    pub env: Vec<(String, String)>,
    /// Asymmetric schemes: the PKCS#8 private key (PEM) the harness signs with, and the key URL the request names.
    pub private_key: Option<(String, Option<String>)>,
    /// A key the server fetches over HTTPS from the provider's own host (PayPal's certificate).
    pub key_host: Option<KeyHost>,
}

/// What a provider's key host serves: `body` at `https://{host}{path}`. The harness serves it with the test-only
/// certificate of `tests/data/keys/host.pem` (its names include the providers' key hosts) and points the server at
/// it (`INBOX_TRUST_ROOTS`, `INBOX_CONNECT_TO`).
#[derive(Debug, Clone)]
pub struct KeyHost {
    pub host: &'static str,
    pub path: String,
    pub body: Vec<u8>,
}

/// A provider's API as reconciliation reads it, and the provider's webhooks as a sender sends them.
pub trait Fake: Send + Sync {
    /// The catalogue's name: the source's `scheme` and the reconcile block's `provider`.
    fn provider(&self) -> &'static str;
    /// Serves the API on a loopback port (inside a tokio runtime); its base URL, the block's `api_base`.
    fn start(self: Arc<Self>) -> String;
    /// The events, the request counter and the faults.
    fn api(&self) -> &Api;
    /// A fresh event id as the provider writes them; `n` makes it unique within a test.
    fn new_id(&self, n: usize) -> String;
    /// The id of event `n` created at `created_ms`, as its webhook carries it: [`Fake::new_id`], unless the
    /// provider's id holds the event's time (Mailgun's `event-data.id:event-data.timestamp`).
    fn event_id(&self, n: usize, created_ms: i64) -> String {
        let _ = created_ms;
        self.new_id(n)
    }
    /// An event type the provider sends.
    fn event_type(&self) -> &'static str;
    /// The webhook that announces `event`, exactly as the provider's webhooks carry it.
    fn webhook(&self, event: &Event) -> Webhook;
    /// What reconciliation should store for `event`: the webhook's payload as the handler sees it, as JSON. The same
    /// as the webhook's body unless the provider's API cannot give it whole (its file says how and why).
    fn stored(&self, event: &Event) -> serde_json::Value {
        serde_json::from_slice(&self.webhook(event).body).unwrap()
    }
    /// The reconcile block's provider-specific lines (credentials as `env:{prefix}_…` references, the account),
    /// and the credentials' values by variable name: the good ones, or with `wrong` ones the API refuses.
    fn block(&self, prefix: &str, wrong: bool) -> (String, Vec<(String, String)>);
    /// The receiving source's config, its variables named from `prefix`.
    fn receiving(&self, prefix: &str) -> Receiving;
    /// The events its API serves per page at most when asked for the most.
    fn page_size(&self) -> usize;
}

impl dyn Fake {
    /// Creates `event` in the provider's list and answers its webhook.
    pub fn publish(&self, event: &Event) -> Webhook {
        self.api().add(event.clone());
        self.webhook(event)
    }
}

/// What every fake shares: the events (newest first, ties by id descending), the requests served and the faults.
#[derive(Default)]
pub struct Api {
    events: Mutex<Vec<Event>>,
    requests: AtomicUsize,
    pub faults: Mutex<Faults>,
}

/// What [`Api::gate`] decided for a request: serve it, or answer a fault in the provider's own shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Serve,
    /// The scheduled 500.
    Fail,
    /// One of the first `rate_limited` requests.
    RateLimited,
}

impl Api {
    pub fn add(&self, event: Event) {
        let mut events = self.events.lock().unwrap();
        events.push(event);
        events.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then(b.id.cmp(&a.id)));
    }
    pub fn add_all(&self, more: impl IntoIterator<Item = Event>) {
        for e in more {
            self.add(e);
        }
    }
    /// Newest first.
    pub fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }
    pub fn find(&self, id: &str) -> Option<Event> {
        self.events.lock().unwrap().iter().find(|e| e.id == id).cloned()
    }
    /// Requests served, faults included.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
    /// Counts the request and says whether a fault answers it.
    pub fn gate(&self) -> Gate {
        let n = self.requests.fetch_add(1, Ordering::SeqCst) + 1;
        let faults = self.faults.lock().unwrap();
        if faults.fail_request == Some(n) {
            Gate::Fail
        } else if n <= faults.rate_limited {
            Gate::RateLimited
        } else {
            Gate::Serve
        }
    }
}

/// Serves `router` on a random loopback port without waiting (inside a tokio runtime); the base URL.
pub fn serve_now(router: Router) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

/// A query's value parsed, or a 400 the way most APIs answer a malformed parameter.
pub fn bad_request(what: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"error": format!("invalid {what}")})),
    )
        .into_response()
}

/// Unix seconds of an RFC 3339 time (fakes parse the times their APIs take).
pub fn parse_rfc3339_ms(text: &str) -> Option<i64> {
    let at = humantime::parse_rfc3339_weak(text).ok()?;
    let d = at.duration_since(UNIX_EPOCH).ok()?;
    i64::try_from(d.as_millis()).ok()
}

/// RFC 3339 in whole seconds, `2026-12-02T06:00:00Z`.
pub fn rfc3339_secs(ms: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_seconds(at).to_string()
}

/// The fake of `name`, served (inside a tokio runtime), with `n` events over the last ten hours: the fake, its base
/// URL and its first good credential, for a provider's own unit tests.
pub fn served(name: &str, n: usize) -> (Arc<dyn Fake>, String, String) {
    let fake = all_fakes()
        .into_iter()
        .find(|f| f.provider() == name)
        .unwrap_or_else(|| panic!("no fake {name}"));
    let base = fake.clone().start();
    fake.api()
        .add_all(events_over(fake.as_ref(), n, 10 * 3_600_000, 0));
    let (_, env) = fake.block("UNIT", false);
    let credential = env[0].1.clone();
    (fake, base, credential)
}

/// A config's `[sources.{provider}]` receiving the fake's webhooks with `handler`, and its reconcile block reading
/// the fake at `api_base` (plus `extra` lines: interval, settle…), credentials `wrong` or not; with the variables
/// it refers to, named from `prefix`: the receiving source's, and the reconcile block's credentials. The tests, the
/// end-to-end runs and the bench write a fake's source with it.
pub fn source_config(
    fake: &dyn Fake,
    prefix: &str,
    api_base: &str,
    handler: &str,
    extra: &str,
    wrong: bool,
) -> SourceConfig {
    let name = fake.provider();
    let receiving = fake.receiving(prefix);
    let (block, credentials) = fake.block(prefix, wrong);
    let toml = format!(
        "[sources.{name}]\nscheme = \"{name}\"\n{}\nhandler = {handler}\n\
         [sources.{name}.reconcile]\nprovider = \"{name}\"\napi_base = \"{api_base}\"\n{extra}{block}\n",
        receiving.config
    );
    SourceConfig {
        toml,
        receiving,
        credentials,
    }
}

/// What [`source_config`] wrote.
pub struct SourceConfig {
    pub toml: String,
    /// How the source receives (its variables, its signing key).
    pub receiving: Receiving,
    /// The reconcile block's credentials, by variable name.
    pub credentials: Vec<(String, String)>,
}

impl SourceConfig {
    /// Every variable the config refers to.
    pub fn env(&self) -> impl Iterator<Item = &(String, String)> {
        self.receiving.env.iter().chain(&self.credentials)
    }
}

/// `n` events of `fake` spread evenly from `span_ms` ago to six minutes ago (older than the default settle time),
/// off the window's edges.
pub fn events_over(fake: &dyn Fake, n: usize, span_ms: i64, first: usize) -> Vec<Event> {
    let now = now_ms();
    let step = (span_ms - 360_000) / n.max(1) as i64;
    (0..n)
        .map(|i| {
            let created_ms = off_the_edges(now, now - 360_000 - i as i64 * step);
            Event {
                id: fake.event_id(first + i, created_ms),
                event_type: fake.event_type().to_owned(),
                created_ms,
            }
        })
        .collect()
}

/// The reconcile block's defaults (docs/DESIGN.md): the window a run lists is `[now − LOOKBACK, now − SETTLE)`.
pub const LOOKBACK: Duration = Duration::from_secs(72 * 3600);
pub const SETTLE: Duration = Duration::from_secs(5 * 60);

/// UTC milliseconds now, as `inbox_core::time::now_ms` (this crate does not link the core).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// RFC 3339 with milliseconds, as `inbox_core::time::rfc3339`.
pub fn rfc3339(ms: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(at).to_string()
}

/// Serves `router` on a random loopback port; the base URL.
pub async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

/// Faults a fake serves, by request number (1-based) or for the first N requests.
#[derive(Default)]
pub struct Faults {
    /// Answer 500 to this request.
    pub fail_request: Option<usize>,
    /// Answer the first N requests with a rate limit.
    pub rate_limited: usize,
}

/// `at` moved half a minute off the edges of the default window, where the run's clock and the test's would
/// disagree on which side an event falls.
pub fn off_the_edges(now: i64, at: i64) -> i64 {
    let edges = [now - LOOKBACK.as_millis() as i64, now - SETTLE.as_millis() as i64];
    match edges.iter().find(|e| (at - **e).abs() < 30_000) {
        Some(e) => e - 30_000,
        None => at,
    }
}
