//! The operator console (docs/DESIGN.md "The two runtimes and their parts"): server-rendered pages over the ledger port, for either
//! runtime. What arrived, what is stuck or dead, and a replay through the same conditional transition as
//! `inbox replay` (two replays at once enqueue once).
//!
//! Security, in the order a request meets it ([`guard`]):
//! - loopback by default; a listener elsewhere needs a token ([`check_listen`]), and then every request carries it
//!   (`Authorization: Bearer`, or the `HttpOnly`, `SameSite=Strict`, `Secure` session cookie the login form sets);
//!   sessions are held in this process ([`sessions`]) and end when idle, when too old, or at logout;
//! - on a loopback listener without a token, the `Host` must be a loopback name, so a DNS-rebinding page cannot
//!   read the console from the operator's browser;
//! - every state change is a POST carrying a CSRF token (an HMAC, under a per-process random key, of the session)
//!   from a page of the same origin (`Origin` and `Sec-Fetch-Site` checked);
//! - every answer carries a strict Content-Security-Policy (no script at all), `X-Frame-Options: DENY` and
//!   `X-Content-Type-Options: nosniff`; payloads are rendered as escaped text by the templates, and downloaded as
//!   `application/octet-stream` attachments; no secret is ever rendered (signature-like kept headers are not shown).
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::unwrap_used))]

mod pages;
mod sessions;

pub use sessions::SessionPolicy;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Form, Router};
use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use inbox_core::config::Config;
use inbox_core::model::{EventId, EventKey, SourceName, Status};
use inbox_core::ports::{
    Cursor, ListFilter, Queue, QueueDepth, Replay, Store, StoreError, Summary, Timeline,
};
use sessions::Sessions;

/// Where `inbox console` listens unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:3001";
/// The environment variable holding the token a non-loopback console requires.
pub const TOKEN_ENV: &str = "INBOX_CONSOLE_TOKEN";
/// Events per page of the events list.
pub const PAGE_SIZE: usize = 50;
/// The session cookie's name.
const COOKIE: &str = "inbox_console";
/// No script, no frames, no plugins; styles and images only from the console itself; forms post only to it.
pub const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
    frame-ancestors 'none'; base-uri 'none'";

type HmacSha256 = Hmac<Sha256>;

/// Why the console will not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the console listens on {0}, which is not a loopback address: set {TOKEN_ENV} so that every request must carry it")]
    TokenRequired(SocketAddr),
    #[error("{TOKEN_ENV} is set but shorter than 16 characters")]
    WeakToken,
}

/// Refuses a non-loopback listener without a token (and a token too short to stand guessing).
pub fn check_listen(addr: SocketAddr, token: Option<&SecretString>) -> Result<(), StartError> {
    match token {
        Some(t) if t.expose_secret().len() < 16 => Err(StartError::WeakToken),
        Some(_) => Ok(()),
        None if addr.ip().is_loopback() => Ok(()),
        None => Err(StartError::TokenRequired(addr)),
    }
}

/// What the console serves from: the ledger, and the queue replays are sent to (AWS; the embedded `inbox serve`
/// notices another process's replay by itself).
pub struct Console {
    ledger: Arc<dyn Store>,
    queue: Option<Arc<dyn Queue>>,
    token: Option<SecretString>,
    /// Signs CSRF tokens; new in every process, as the sessions are.
    key: [u8; 32],
    /// The logins this process holds: a restart logs everyone out.
    sessions: Sessions,
    policy: SessionPolicy,
    /// The sources with a `[sources.X.reconcile]` block, where the console was given the config: the overview shows
    /// each one's last run. Without it, only those of the sources it counts events for (on DynamoDB, the ones with
    /// failed or dead events).
    reconciled: Option<Vec<SourceName>>,
    /// What the overview calls this store ("SQLite at …", "DynamoDB table …").
    store_name: String,
    /// The overview's counts, as last taken.
    counts: Arc<Counts>,
    /// The overview's chart, where the ledger cannot draw it (AWS: CloudWatch).
    timeline: Option<Arc<dyn Timeline>>,
}

/// How long the overview's counts are shown before they are taken again. Counting a big store walks its indexes,
/// which takes longer than a page may (BENCHMARKS.md, "The operator console"); so a page shows the counts as last
/// taken, with their time, and a view past this age takes them again in the background for the next one.
const COUNTS_FRESH: Duration = Duration::from_secs(5);

/// The overview's counts and when they were taken. Only the first view after start (or after a replay from this
/// console, which changes them) waits for them.
#[derive(Default)]
struct Counts {
    taken: tokio::sync::Mutex<Option<Taken>>,
    refreshing: std::sync::atomic::AtomicBool,
}

#[derive(Clone)]
struct Taken {
    at: std::time::Instant,
    /// When, in UTC ms, for the page.
    when: i64,
    summary: Arc<Summary>,
    /// The work queue's counts, where the console has a queue that can say them (AWS).
    queue: Option<QueueDepth>,
    /// How the chart counts, for its legend: by the hour events arrived (the store's own counts), or as the
    /// [`Timeline`] says (by the hour each count was made).
    timeline_note: &'static str,
}

impl Taken {
    async fn now(
        ledger: &dyn Store,
        timeline: Option<&dyn Timeline>,
        queue: Option<&dyn Queue>,
    ) -> Result<Self, StoreError> {
        let when = inbox_core::time::now_ms();
        let mut summary = ledger.summary(None).await?;
        let mut depth = None;
        if let Some(queue) = queue {
            match queue.depth().await {
                Ok(d) => depth = d,
                Err(e) => tracing::warn!(error = %e, "the work queue's counts could not be read"),
            }
        }
        let mut timeline_note = "by the hour they arrived";
        if let (true, Some(timeline)) = (summary.timeline.is_empty(), timeline) {
            // The chart is an aid: a page without it beats no page.
            match timeline.last_day(when).await {
                Ok(hours) => {
                    summary.timeline = hours;
                    timeline_note = timeline.note();
                }
                Err(e) => tracing::warn!(error = %e, "the overview's chart could not be read"),
            }
        }
        let summary = Arc::new(summary);
        Ok(Self {
            at: std::time::Instant::now(),
            when,
            summary,
            queue: depth,
            timeline_note,
        })
    }
}

impl Counts {
    /// The counts to show.
    async fn get(
        self: &Arc<Self>,
        ledger: &Arc<dyn Store>,
        timeline: &Option<Arc<dyn Timeline>>,
        queue: &Option<Arc<dyn Queue>>,
    ) -> Result<Taken, StoreError> {
        use std::sync::atomic::Ordering;
        let mut taken = self.taken.lock().await;
        if let Some(shown) = taken.clone() {
            if shown.at.elapsed() >= COUNTS_FRESH && !self.refreshing.swap(true, Ordering::AcqRel) {
                let (counts, ledger) = (self.clone(), ledger.clone());
                let (timeline, queue) = (timeline.clone(), queue.clone());
                tokio::spawn(async move {
                    match Taken::now(ledger.as_ref(), timeline.as_deref(), queue.as_deref()).await {
                        Ok(fresh) => *counts.taken.lock().await = Some(fresh),
                        Err(e) => {
                            tracing::warn!(error = %e, "the overview's counts could not be taken again")
                        }
                    }
                    counts.refreshing.store(false, Ordering::Release);
                });
            }
            return Ok(shown);
        }
        // Taken under the lock: views that come meanwhile wait for these counts rather than take their own.
        let fresh = Taken::now(ledger.as_ref(), timeline.as_deref(), queue.as_deref()).await?;
        *taken = Some(fresh.clone());
        Ok(fresh)
    }

    /// A change made here (a replay) is shown at once: the next view takes the counts again.
    async fn forget(&self) {
        *self.taken.lock().await = None;
    }
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

    fn mac(&self, purpose: &str, value: &str) -> String {
        // `new_from_slice` accepts any key length for HMAC; the fallback is never taken.
        let Ok(mut mac) = HmacSha256::new_from_slice(&self.key) else {
            return String::new();
        };
        mac.update(purpose.as_bytes());
        mac.update(b"\0");
        mac.update(value.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    /// The CSRF token of a session: what every form of its pages carries.
    fn csrf(&self, session: &Session) -> String {
        self.mac("csrf", &session.id)
    }

    /// The `Set-Cookie` of a session: the id itself, or (`None`) the empty value that makes a browser drop it.
    fn set_cookie(&self, id: Option<&str>) -> Option<HeaderValue> {
        let max_age = id.map_or(0, |_| self.policy.lifetime.as_secs());
        let secure = if self.policy.secure_cookie { "; Secure" } else { "" };
        let value = format!(
            "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={max_age}{secure}",
            id.unwrap_or("")
        );
        HeaderValue::from_str(&value).ok()
    }

    fn token_matches(&self, offered: &str) -> bool {
        self.token
            .as_ref()
            .is_some_and(|t| bool::from(t.expose_secret().as_bytes().ct_eq(offered.as_bytes())))
    }
}

/// Who is asking: the session the CSRF token is bound to, and how the request proved it may ask. No `Debug`: a
/// cookie session's id is its secret.
#[derive(Clone)]
struct Session {
    id: String,
    via: Via,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    /// A loopback console without a token, or the login form.
    Anonymous,
    /// The token as a bearer header: one no browser adds by itself, so such a request needs neither Origin nor
    /// CSRF token.
    Bearer,
    /// A live session's cookie, set by the login form: `id` is the cookie's value, which logout ends.
    Cookie,
}

tokio::task_local! {
    /// The CSRF token of the logged-in session a page is drawn for, if any: every page then carries a logout
    /// button. Set around each request by [`guard`], so error pages carry it too.
    static LOGOUT: Option<String>;
}

/// The logout form's CSRF token, while drawing a page of a logged-in session.
pub(crate) fn logout_csrf() -> Option<String> {
    LOGOUT.try_with(Clone::clone).ok().flatten()
}

/// The anonymous session: a loopback console without a token, or the login form.
const ANONYMOUS: &str = "anonymous";

/// Answers that are not pages.
#[derive(Debug, thiserror::Error)]
enum ConsoleError {
    #[error("{0}")]
    BadRequest(String),
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    Forbidden(&'static str),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let (status, text) = match &self {
            ConsoleError::BadRequest(why) => (StatusCode::BAD_REQUEST, why.clone()),
            ConsoleError::NotFound => (StatusCode::NOT_FOUND, "No such page or event.".to_owned()),
            ConsoleError::Forbidden(why) => (StatusCode::FORBIDDEN, (*why).to_owned()),
            ConsoleError::Store(StoreError::Busy) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "The store is busy; try again.".to_owned(),
            ),
            ConsoleError::Store(e) => {
                // The cause goes to the log, never to the page.
                tracing::error!(error = %e, "console: the store failed");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "The store failed; see the log.".to_owned(),
                )
            }
        };
        (status, pages::message(status.as_str(), &text)).into_response()
    }
}

/// The security layer: host, authentication, origin; then the headers every answer carries.
async fn guard(State(console): State<Arc<Console>>, mut request: Request, next: Next) -> Response {
    let mut response = match admit(&console, &request) {
        Ok(session) => {
            let logout = (session.via == Via::Cookie).then(|| console.csrf(&session));
            request.extensions_mut().insert(session);
            LOGOUT.scope(logout, next.run(request)).await
        }
        Err(refused) => *refused,
    };
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Not `no-referrer`: under it a browser posts `Origin: null`, and the origin check would refuse every form.
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Decides whether a request may reach its page, and as which session.
fn admit(console: &Console, request: &Request) -> Result<Session, Box<Response>> {
    let headers = request.headers();
    let host = host_of(headers);
    if console.token.is_none() && !is_loopback_host(host) {
        return Err(Box::new(forbidden(
            "This console answers only to a loopback host name.",
        )));
    }
    let path = request.uri().path();
    let open_path = path == "/login" || path == "/style.css";
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .is_some_and(|t| console.token_matches(t));
    let presented = cookie(headers, COOKIE).filter(|v| !v.is_empty());
    let session = if bearer {
        Session {
            id: ANONYMOUS.to_owned(),
            via: Via::Bearer,
        }
    } else if console.token.is_none() {
        anonymous()
    } else if let Some(id) = presented.filter(|id| {
        console
            .sessions
            .touch(id, &console.policy, std::time::Instant::now())
    }) {
        Session {
            id: id.to_owned(),
            via: Via::Cookie,
        }
    } else if open_path {
        anonymous()
    } else {
        // No session, or one that ended (logged out, idle, too old, or from before a restart): the login page,
        // and the dead cookie dropped from the browser.
        let login = pages::Login {
            csrf: &console.csrf(&anonymous()),
            required: true,
            ended: presented.is_some(),
            plain_http: console.plain_http_elsewhere(headers, host),
        };
        let mut page = (StatusCode::UNAUTHORIZED, pages::login(&login)).into_response();
        if presented.is_some() {
            if let Some(clear) = console.set_cookie(None) {
                page.headers_mut().insert(header::SET_COOKIE, clear);
            }
        }
        return Err(Box::new(page));
    };
    if request.method() != Method::GET && request.method() != Method::HEAD && session.via != Via::Bearer {
        same_origin(headers, host).map_err(|why| Box::new(forbidden(why)))?;
    }
    Ok(session)
}

fn anonymous() -> Session {
    Session {
        id: ANONYMOUS.to_owned(),
        via: Via::Anonymous,
    }
}

impl Console {
    /// Whether this request looks like plain HTTP to a host other than loopback: a browser there drops a `Secure`
    /// cookie, so the login page says what to do instead. Behind a TLS proxy, `X-Forwarded-Proto: https` says not.
    fn plain_http_elsewhere(&self, headers: &HeaderMap, host: &str) -> bool {
        let https = headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"));
        self.policy.secure_cookie && !https && !is_loopback_host(host)
    }
}

/// A state change must come from one of the console's own pages: the browser says where it was sent from.
fn same_origin(headers: &HeaderMap, host: &str) -> Result<(), &'static str> {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        if site != "same-origin" && site != "none" {
            return Err("Refused: this request came from another site.");
        }
    }
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .ok_or("Refused: a state change needs an Origin header.")?;
    let matches = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|o| !host.is_empty() && o.eq_ignore_ascii_case(host));
    if matches {
        Ok(())
    } else {
        Err("Refused: this request came from another origin.")
    }
}

fn forbidden(why: &str) -> Response {
    (StatusCode::FORBIDDEN, pages::message("403", why)).into_response()
}

fn host_of(headers: &HeaderMap) -> &str {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
}

fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// A form's CSRF token must be the one the session's pages carry.
fn check_csrf(console: &Console, session: &Session, offered: Option<&str>) -> Result<(), ConsoleError> {
    if session.via == Via::Bearer {
        return Ok(());
    }
    let expected = console.csrf(session);
    match offered {
        Some(t) if bool::from(expected.as_bytes().ct_eq(t.as_bytes())) => Ok(()),
        _ => Err(ConsoleError::Forbidden(
            "Refused: the form's CSRF token is missing or wrong. Reload the page and try again.",
        )),
    }
}

/// The filters of the events list, as they appear in its URL (every one optional, empty meaning unset).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Filters {
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub status: String,
    #[serde(default, rename = "type")]
    pub event_type: String,
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub to: String,
    #[serde(default)]
    pub before: String,
}

impl Filters {
    /// The port's filter, parsed once here; a bad value is the operator's 400, naming the field.
    fn parse(&self, limit: usize) -> Result<ListFilter, ConsoleError> {
        let bad =
            |field: &str, why: &dyn std::fmt::Display| ConsoleError::BadRequest(format!("{field}: {why}"));
        let opt = |s: &str| Some(s.trim()).filter(|s| !s.is_empty()).map(str::to_owned);
        Ok(ListFilter {
            status: opt(&self.status)
                .map(|s| s.parse::<Status>())
                .transpose()
                .map_err(|e| bad("status", &e))?,
            source: opt(&self.source)
                .map(|s| SourceName::parse(&s))
                .transpose()
                .map_err(|e| bad("source", &e))?,
            limit,
            event_type: opt(&self.event_type),
            event_id: opt(&self.id)
                .map(|s| EventId::parse(&s))
                .transpose()
                .map_err(|e| bad("id", &e))?,
            received_from: opt(&self.from)
                .map(|s| parse_time(&s).ok_or_else(|| bad("from", &TIME_FORMAT)))
                .transpose()?,
            received_to: opt(&self.to)
                .map(|s| parse_time(&s).ok_or_else(|| bad("to", &TIME_FORMAT)))
                .transpose()?,
            before: opt(&self.before)
                .map(|s| parse_cursor(&s).ok_or_else(|| bad("before", &"not a page cursor")))
                .transpose()?,
        })
    }

    /// The query string of these filters (the cursor left out unless `with_cursor`).
    pub(crate) fn query(&self, with_cursor: bool) -> String {
        let mut pairs = vec![
            ("source", &self.source),
            ("status", &self.status),
            ("type", &self.event_type),
            ("id", &self.id),
            ("from", &self.from),
            ("to", &self.to),
        ];
        if with_cursor {
            pairs.push(("before", &self.before));
        }
        pairs
            .into_iter()
            .filter(|(_, v)| !v.trim().is_empty())
            .map(|(k, v)| format!("{k}={}", encode(v.trim())))
            .collect::<Vec<_>>()
            .join("&")
    }
}

const TIME_FORMAT: &str = "a time is RFC 3339 in UTC (2026-12-01T09:30:00Z) or YYYY-MM-DDTHH:MM (UTC)";

/// RFC 3339 in UTC, or what an `<input type="datetime-local">` sends (`2026-12-01T09:30`, read as UTC).
fn parse_time(text: &str) -> Option<i64> {
    inbox_core::time::parse_rfc3339(text)
        .or_else(|| inbox_core::time::parse_rfc3339(&format!("{text}Z")))
        .or_else(|| inbox_core::time::parse_rfc3339(&format!("{text}:00Z")))
}

/// A cursor as it travels in a URL: `received_at:source:event_id` (source names hold no ':').
pub(crate) fn cursor_text(c: &Cursor) -> String {
    format!("{}:{}:{}", c.received_at, c.source, c.event_id)
}

fn parse_cursor(text: &str) -> Option<Cursor> {
    let (at, rest) = text.split_once(':')?;
    let (source, id) = rest.split_once(':')?;
    Some(Cursor {
        received_at: at.parse().ok()?,
        source: SourceName::parse(source).ok()?,
        event_id: EventId::parse(id).ok()?,
    })
}

/// Everything but RFC 3986's unreserved characters is percent-encoded in a query string's values.
const QUERY_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Percent-encodes everything but the unreserved characters, for query strings.
pub(crate) fn encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, QUERY_VALUE).to_string()
}

/// The link to one event's page.
pub(crate) fn event_link(key: &EventKey) -> String {
    format!(
        "/event?source={}&id={}",
        encode(key.source.as_str()),
        encode(key.event_id.as_str())
    )
}

async fn overview(State(console): State<Arc<Console>>) -> Result<Response, ConsoleError> {
    let counts = console
        .counts
        .get(&console.ledger, &console.timeline, &console.queue)
        .await?;
    let summary = counts.summary.as_ref();
    let dead = console
        .ledger
        .list(
            &ListFilter {
                status: Some(Status::Dead),
                limit: 20,
                ..Default::default()
            },
            None,
        )
        .await?;
    // Every source the config says reconciles, run yet or not; without the config, those counted here that have
    // a checkpoint (on DynamoDB only the sources with failed or dead events are counted).
    let sources: Vec<SourceName> = match &console.reconciled {
        Some(reconciled) => reconciled.clone(),
        None => {
            let mut counted: Vec<SourceName> = summary.by_source.iter().map(|(s, _, _)| s.clone()).collect();
            counted.dedup();
            counted
        }
    };
    let mut runs = Vec::new();
    for source in sources {
        let checkpoint = console.ledger.checkpoint(&source).await?;
        if checkpoint.is_some() || console.reconciled.is_some() {
            runs.push((source, checkpoint));
        }
    }
    let page = pages::overview(&pages::Overview {
        store: &console.store_name,
        summary,
        queue: counts.queue,
        timeline_note: counts.timeline_note,
        counted_at: counts.when,
        dead: &dead,
        runs: &runs,
        configured: console.reconciled.is_some(),
        now: inbox_core::time::now_ms(),
    });
    Ok(page.into_response())
}

async fn events(
    State(console): State<Arc<Console>>,
    Query(filters): Query<Filters>,
) -> Result<Response, ConsoleError> {
    let filter = filters.parse(PAGE_SIZE + 1)?;
    let mut events = console.ledger.list(&filter, None).await?;
    let next = (events.len() > PAGE_SIZE).then(|| {
        events.truncate(PAGE_SIZE);
        events.last().map(Cursor::after)
    });
    let next = next.flatten().map(|c| {
        let mut f = filters.clone();
        f.before = cursor_text(&c);
        f.query(true)
    });
    let scans = console.ledger.lists_by_scan(&filter);
    Ok(pages::events(&pages::EventsPage {
        filters: &filters,
        events: &events,
        next: next.as_deref(),
        scans,
    })
    .into_response())
}

#[derive(Debug, Deserialize)]
struct KeyQuery {
    #[serde(default)]
    source: String,
    #[serde(default)]
    id: String,
    /// What the last action did, said once on the page it redirected to.
    flash: Option<String>,
}

impl KeyQuery {
    fn key(&self) -> Result<EventKey, ConsoleError> {
        let source =
            SourceName::parse(&self.source).map_err(|e| ConsoleError::BadRequest(format!("source: {e}")))?;
        let id = EventId::parse(&self.id).map_err(|e| ConsoleError::BadRequest(format!("id: {e}")))?;
        Ok(EventKey::new(source, id))
    }
}

async fn event(
    State(console): State<Arc<Console>>,
    axum::Extension(session): axum::Extension<Session>,
    Query(q): Query<KeyQuery>,
) -> Result<Response, ConsoleError> {
    let key = q.key()?;
    let Some(event) = console.ledger.get(&key, None).await? else {
        return Err(ConsoleError::NotFound);
    };
    Ok(pages::event(
        &event,
        &console.csrf(&session),
        inbox_core::time::now_ms(),
        q.flash.as_deref(),
    )
    .into_response())
}

/// The stored body as a download: an attachment of a type no browser runs, whatever the sender put in it.
async fn raw(
    State(console): State<Arc<Console>>,
    Query(q): Query<KeyQuery>,
) -> Result<Response, ConsoleError> {
    let key = q.key()?;
    let Some(event) = console.ledger.get(&key, None).await? else {
        return Err(ConsoleError::NotFound);
    };
    let name: String = format!("{}-{}", key.source, key.event_id)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(120)
        .collect();
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{name}.bin\""))
        .unwrap_or_else(|_| HeaderValue::from_static("attachment"));
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            ),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        event.payload,
    )
        .into_response())
}

/// What one replay did, for the page that reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replayed {
    /// Moved to RECEIVED and sent to the queue (or left to a running `inbox serve` to notice).
    Replayed,
    /// Moved to RECEIVED, but the enqueue failed: the sweeper sends it.
    NotEnqueued,
    /// Not replayable now (another operator replayed it first, or it is not dead).
    Skipped(Option<Status>),
}

/// Replays one event as `inbox replay` does: the conditional transition, then (AWS) the enqueue; two replays at
/// once enqueue once, since only the transition's winner enqueues.
pub async fn replay_event(
    ledger: &dyn Store,
    queue: Option<&dyn Queue>,
    key: &EventKey,
    force: bool,
) -> Result<Replayed, StoreError> {
    match ledger.replay(key, force, None).await? {
        Replay::Replayed => {
            if let Some(queue) = queue {
                if let Err(e) = queue.enqueue(key, Duration::ZERO).await {
                    tracing::warn!(source = %key.source, event_id = %key.event_id, error = %e,
                        "console: replayed, not enqueued; the sweeper will send it");
                    return Ok(Replayed::NotEnqueued);
                }
            }
            tracing::info!(source = %key.source, event_id = %key.event_id, "console: replayed");
            Ok(Replayed::Replayed)
        }
        Replay::NotEligible(st) => Ok(Replayed::Skipped(Some(st))),
        Replay::Missing => Ok(Replayed::Skipped(None)),
    }
}

#[derive(Debug, Deserialize)]
struct ReplayOneForm {
    #[serde(default)]
    source: String,
    #[serde(default)]
    id: String,
    csrf: Option<String>,
    #[serde(default)]
    force: Option<String>,
}

async fn replay_one(
    State(console): State<Arc<Console>>,
    axum::Extension(session): axum::Extension<Session>,
    Form(form): Form<ReplayOneForm>,
) -> Result<Response, ConsoleError> {
    check_csrf(&console, &session, form.csrf.as_deref())?;
    let key = KeyQuery {
        source: form.source,
        id: form.id,
        flash: None,
    }
    .key()?;
    let outcome = replay_event(
        console.ledger.as_ref(),
        console.queue.as_deref(),
        &key,
        form.force.is_some(),
    )
    .await?;
    console.counts.forget().await;
    let flash = match outcome {
        Replayed::Replayed => "replayed",
        Replayed::NotEnqueued => "not-enqueued",
        Replayed::Skipped(_) => "skipped",
    };
    Ok(Redirect::to(&format!("{}&flash={flash}", event_link(&key))).into_response())
}

/// Which statuses a bulk replay may take, and whether it needs `force`.
fn replayable(filter: &ListFilter) -> Result<bool, ConsoleError> {
    match filter.status {
        Some(Status::Dead) => Ok(false),
        Some(Status::Completed) => Ok(true),
        _ => Err(ConsoleError::BadRequest(
            "a bulk replay takes the dead events of a filter (or the completed ones, which run their handler again): \
             filter on status DEAD or COMPLETED first"
                .into(),
        )),
    }
}

/// The dry run: how many events a bulk replay would take, and a confirmation form.
async fn confirm_replay(
    State(console): State<Arc<Console>>,
    axum::Extension(session): axum::Extension<Session>,
    Query(mut filters): Query<Filters>,
) -> Result<Response, ConsoleError> {
    filters.before.clear();
    let filter = filters.parse(usize::MAX)?;
    let force = replayable(&filter)?;
    let matching = console.ledger.list(&filter, None).await?;
    Ok(pages::confirm(&filters, matching.len(), force, &console.csrf(&session)).into_response())
}

#[derive(Debug, Deserialize)]
struct ReplayManyForm {
    #[serde(flatten)]
    filters: Filters,
    csrf: Option<String>,
    /// The count the operator confirmed: a store that changed since gets a new confirmation.
    expected: Option<usize>,
}

async fn replay_many(
    State(console): State<Arc<Console>>,
    axum::Extension(session): axum::Extension<Session>,
    Form(mut form): Form<ReplayManyForm>,
) -> Result<Response, ConsoleError> {
    check_csrf(&console, &session, form.csrf.as_deref())?;
    form.filters.before.clear();
    let filter = form.filters.parse(usize::MAX)?;
    let force = replayable(&filter)?;
    let matching = console.ledger.list(&filter, None).await?;
    if form.expected != Some(matching.len()) {
        return Ok(
            pages::confirm(&form.filters, matching.len(), force, &console.csrf(&session)).into_response(),
        );
    }
    let (mut replayed, mut not_enqueued, mut skipped) = (0usize, 0usize, 0usize);
    for e in &matching {
        match replay_event(console.ledger.as_ref(), console.queue.as_deref(), &e.key(), force).await? {
            Replayed::Replayed => replayed += 1,
            Replayed::NotEnqueued => not_enqueued += 1,
            Replayed::Skipped(_) => skipped += 1,
        }
    }
    console.counts.forget().await;
    Ok(pages::replayed(&form.filters, replayed, not_enqueued, skipped).into_response())
}

async fn login_page(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    let host = host_of(&headers);
    // The anonymous session's token, whoever asks: that is what the login checks, a browser logged in already
    // included.
    pages::login(&pages::Login {
        csrf: &console.csrf(&anonymous()),
        required: console.token.is_some(),
        ended: false,
        plain_http: console.token.is_some() && console.plain_http_elsewhere(&headers, host),
    })
    .into_response()
}

#[derive(Debug, Deserialize)]
struct LoginForm {
    #[serde(default)]
    token: String,
    csrf: Option<String>,
}

async fn login(
    State(console): State<Arc<Console>>,
    axum::Extension(session): axum::Extension<Session>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Result<Response, ConsoleError> {
    // The login form is the anonymous session's, whoever posts it.
    check_csrf(&console, &anonymous(), form.csrf.as_deref())?;
    if !console.token_matches(&form.token) {
        tracing::warn!("console: a login with a wrong token");
        let host = host_of(&headers);
        let login = pages::Login {
            csrf: &console.csrf(&anonymous()),
            required: true,
            ended: false,
            plain_http: console.plain_http_elsewhere(&headers, host),
        };
        return Ok((StatusCode::UNAUTHORIZED, pages::login(&login)).into_response());
    }
    // A login from a browser that was logged in already replaces its session rather than leave it live.
    if session.via == Via::Cookie {
        console.sessions.end(&session.id);
    }
    let id = console.sessions.open(&console.policy, std::time::Instant::now());
    tracing::info!("console: logged in");
    let mut response = Redirect::to("/").into_response();
    if let Some(v) = console.set_cookie(Some(&id)) {
        response.headers_mut().insert(header::SET_COOKIE, v);
    }
    Ok(response)
}

#[derive(Debug, Deserialize)]
struct LogoutForm {
    csrf: Option<String>,
}

/// Ends the session here, so its cookie lets nothing in any more (a copy of it included), and drops it from the
/// browser.
async fn logout(
    State(console): State<Arc<Console>>,
    axum::Extension(session): axum::Extension<Session>,
    Form(form): Form<LogoutForm>,
) -> Result<Response, ConsoleError> {
    check_csrf(&console, &session, form.csrf.as_deref())?;
    let mut response = Redirect::to("/login").into_response();
    if session.via == Via::Cookie {
        console.sessions.end(&session.id);
        tracing::info!("console: logged out");
        if let Some(clear) = console.set_cookie(None) {
            response.headers_mut().insert(header::SET_COOKIE, clear);
        }
    }
    Ok(response)
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

#[cfg(test)]
mod tests;
