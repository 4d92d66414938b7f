//! Reconciliation against local fakes of the providers' APIs, served by axum on 127.0.0.1:0, following the
//! documented shapes, and the in-process queue.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use inbox_core::adapters::sqlite::SqliteLedger;
use inbox_core::config::{GithubHook, ProviderConfig, ReconcileConfig, SecretRef};
use inbox_core::embedded::{Deliveries, InProcessQueue};
use inbox_core::model::{Event, EventId, EventKey, NewEvent, Origin, SourceName};
use inbox_core::ports::{Created, Ledger, ListFilter};
use inbox_core::reconcile::github::{Auth, Github};
use inbox_core::reconcile::stripe::Stripe;
use inbox_core::reconcile::{Provider, Reconciler, RunErrorKind, RunOptions, Summary};
use inbox_core::time::{now_ms, rfc3339};
use serde_json::json;

const HOUR_MS: i64 = 3_600_000;
const LOOKBACK: Duration = Duration::from_secs(72 * 3600);
const SETTLE: Duration = Duration::from_secs(5 * 60);

fn source(name: &str) -> SourceName {
    SourceName::parse(name).unwrap()
}

// ---------------------------------------------------------------------------------------------------------------
// The real SQLite ledger on a temp dir.

struct Store {
    ledger: SqliteLedger,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for Store {
    type Target = SqliteLedger;
    fn deref(&self) -> &SqliteLedger {
        &self.ledger
    }
}

fn store() -> Store {
    let dir = tempfile::tempdir().unwrap();
    let ledger = SqliteLedger::open(dir.path(), 1024, Duration::from_secs(30)).unwrap();
    Store { ledger, _dir: dir }
}

impl Store {
    async fn ids(&self, source: &SourceName) -> BTreeSet<String> {
        let filter = ListFilter {
            source: Some(source.clone()),
            limit: 1_000_000,
            ..Default::default()
        };
        let events = self.ledger.list(&filter).await.unwrap();
        events.iter().map(|e| e.event_id.as_str().to_owned()).collect()
    }
    async fn event(&self, source: &SourceName, id: &str) -> Event {
        let key = EventKey::new(source.clone(), EventId::parse(id).unwrap());
        self.ledger.get(&key).await.unwrap().unwrap()
    }
}

/// What a webhook delivered earlier: stored as the receiver stores it.
async fn deliver(ledger: &dyn Ledger, source: &SourceName, id: &str, body: &str) {
    let created = ledger
        .create(NewEvent {
            key: EventKey::new(source.clone(), EventId::parse(id).unwrap()),
            event_type: Some("delivered".into()),
            payload: bytes::Bytes::from(body.to_owned()),
            payload_sha256: format!("sha-of-{id}"),
            headers: vec![],
            origin: Origin::Webhook,
            unique_body_for: None,
        })
        .await
        .unwrap();
    assert_eq!(created, Created::New);
}

fn drain(deliveries: &mut Deliveries) -> Vec<EventKey> {
    std::iter::from_fn(|| deliveries.try_next()).collect()
}

async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

fn base(url: &str) -> reqwest::Url {
    reqwest::Url::parse(url).unwrap()
}

/// Faults a fake serves, by request number (1-based) or for the first N requests.
#[derive(Default)]
struct Faults {
    /// Answer 500 to this request.
    fail_request: Option<usize>,
    /// Answer the first N requests with a rate limit.
    rate_limited: usize,
}

// ---------------------------------------------------------------------------------------------------------------
// Fake Stripe. https://docs.stripe.com/api/events/list : `GET /v1/events` with `created[gte]`, `created[lt]`,
// `limit` (1-100) and `starting_after` (https://docs.stripe.com/api/pagination), newest first, answering
// `{"object":"list","url":"/v1/events","has_more":bool,"data":[event…]}`; an event is
// `{"id":"evt_…","object":"event","type":…,"created":unix seconds,"data":{"object":…},…}`. A wrong key is a 401
// with `{"error":{"type":"invalid_request_error",…}}`; too many requests a 429 (https://docs.stripe.com/rate-limits).

struct FakeStripe {
    /// (id, created seconds, type), kept newest first.
    events: Mutex<Vec<(String, i64, String)>>,
    key: String,
    requests: AtomicUsize,
    faults: Mutex<Faults>,
    accounts: Mutex<Vec<Option<String>>>,
}

impl FakeStripe {
    fn new(events: Vec<(String, i64, String)>) -> Arc<Self> {
        let fake = Arc::new(FakeStripe {
            events: Mutex::new(Vec::new()),
            key: "sk_test_good".into(),
            requests: AtomicUsize::new(0),
            faults: Mutex::new(Faults::default()),
            accounts: Mutex::new(Vec::new()),
        });
        fake.add(events);
        fake
    }
    fn add(&self, more: Vec<(String, i64, String)>) {
        let mut events = self.events.lock().unwrap();
        events.extend(more);
        events.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
    }
    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
    async fn start(self: &Arc<Self>) -> String {
        serve(
            Router::new()
                .route("/v1/events", get(stripe_events))
                .with_state(self.clone()),
        )
        .await
    }
}

async fn stripe_events(
    State(fake): State<Arc<FakeStripe>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let n = fake.requests.fetch_add(1, Ordering::SeqCst) + 1;
    {
        let faults = fake.faults.lock().unwrap();
        if faults.fail_request == Some(n) {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"error": {"type": "api_error"}})),
            )
                .into_response();
        }
        if n <= faults.rate_limited {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [("retry-after", "1")],
                Json(json!({"error": {"type": "rate_limit_error", "message": "Too many requests"}})),
            )
                .into_response();
        }
    }
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&format!("Bearer {}", fake.key)) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": {"type": "invalid_request_error", "message": "Invalid API Key provided"}})),
        )
            .into_response();
    }
    fake.accounts.lock().unwrap().push(
        headers
            .get("stripe-account")
            .map(|v| v.to_str().unwrap().to_owned()),
    );
    let num = |k: &str| q.get(k).map(|v| v.parse::<i64>().unwrap());
    let (gte, lt) = (
        num("created[gte]").unwrap_or(i64::MIN),
        num("created[lt]").unwrap_or(i64::MAX),
    );
    let limit = num("limit").unwrap_or(10).clamp(1, 100) as usize;
    let events = fake.events.lock().unwrap();
    let mut matching = events.iter().filter(|e| gte <= e.1 && e.1 < lt).peekable();
    if let Some(after) = q.get("starting_after") {
        for e in matching.by_ref() {
            if &e.0 == after {
                break;
            }
        }
    }
    let page: Vec<_> = matching.by_ref().take(limit).collect();
    let has_more = matching.peek().is_some();
    let data: Vec<_> = page
        .iter()
        .map(|(id, created, ty)| {
            json!({"id": id, "object": "event", "api_version": "2024-06-20", "created": created, "type": ty,
                   "livemode": false, "pending_webhooks": 1, "data": {"object": {"id": format!("obj_{id}")}}})
        })
        .collect();
    Json(json!({"object": "list", "url": "/v1/events", "has_more": has_more, "data": data})).into_response()
}

fn stripe(url: &str, key: &str) -> Arc<dyn Provider> {
    Arc::new(Stripe::new(base(url), key.into(), None).unwrap())
}

/// `n` events spread evenly from `span_ms` ago to six minutes ago (older than the settle time): (id, created
/// seconds, type).
fn stripe_events_over(n: usize, span_ms: i64, prefix: &str) -> Vec<(String, i64, String)> {
    let now = now_ms();
    let step = (span_ms - 360_000) / n as i64;
    (0..n)
        .map(|i| {
            let created = off_the_edges(now, now - 360_000 - i as i64 * step) / 1000;
            (format!("evt_{prefix}{i:05}"), created, "invoice.paid".to_owned())
        })
        .collect()
}

/// `at` moved half a minute off the edges of the default window, where the run's clock and the test's would
/// disagree on which side an event falls.
fn off_the_edges(now: i64, at: i64) -> i64 {
    let edges = [now - LOOKBACK.as_millis() as i64, now - SETTLE.as_millis() as i64];
    match edges.iter().find(|e| (at - **e).abs() < 30_000) {
        Some(e) => e - 30_000,
        None => at,
    }
}

/// The ids created in `[now − lookback, now − settle)`, asserting none is within a few seconds of an edge, where
/// the run's clock and the test's would disagree.
fn in_window(events: &[(String, i64)], lookback: Duration, settle: Duration) -> BTreeSet<String> {
    let now = now_ms();
    let (from, to) = (now - lookback.as_millis() as i64, now - settle.as_millis() as i64);
    for (id, at) in events {
        assert!(
            (at - from).abs() > 5_000 && (at - to).abs() > 5_000,
            "{id} at {} is too close to an edge of the window",
            rfc3339(*at)
        );
    }
    events
        .iter()
        .filter(|(_, at)| from <= *at && *at < to)
        .map(|(id, _)| id.clone())
        .collect()
}

fn no_progress() -> impl FnMut(&inbox_core::reconcile::Progress) + Send {
    |_| {}
}

// ---------------------------------------------------------------------------------------------------------------
// Fake GitHub. https://docs.github.com/en/rest/repos/webhooks#list-deliveries-for-a-repository-webhook :
// `GET /repos/{owner}/{repo}/hooks/{hook_id}/deliveries?per_page=…&cursor=…`, newest first, an array of
// `{id, guid, delivered_at, redelivery, duration, status, status_code, event, action, installation_id,
// repository_id}`, the next page in `Link: <…&cursor=…>; rel="next"`; the detail
// (https://docs.github.com/en/rest/repos/webhooks#get-a-delivery-for-a-repository-webhook) adds
// `request: {headers, payload}` and `response: {headers, payload}`. A bad token is 401 `{"message":"Bad
// credentials"}`; the primary rate limit a 403 with `x-ratelimit-remaining: 0` and `x-ratelimit-reset` (epoch
// seconds) (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api).

#[derive(Clone)]
struct Delivery {
    id: u64,
    guid: String,
    at_ms: i64,
    event: String,
    status_code: u16,
    redelivery: bool,
}

struct FakeGithub {
    /// Newest first.
    deliveries: Mutex<Vec<Delivery>>,
    token: String,
    requests: AtomicUsize,
    detail_requests: AtomicUsize,
    faults: Mutex<Faults>,
    /// Answer 403 without rate-limit headers (a token without access).
    forbidden: bool,
    url: Mutex<String>,
}

impl FakeGithub {
    fn new(deliveries: Vec<Delivery>, forbidden: bool) -> Arc<Self> {
        let mut deliveries = deliveries;
        deliveries.sort_by(|a, b| b.at_ms.cmp(&a.at_ms).then(b.id.cmp(&a.id)));
        Arc::new(FakeGithub {
            deliveries: Mutex::new(deliveries),
            token: "ghp_good".into(),
            requests: AtomicUsize::new(0),
            detail_requests: AtomicUsize::new(0),
            faults: Mutex::new(Faults::default()),
            forbidden,
            url: Mutex::new(String::new()),
        })
    }
    async fn start(self: &Arc<Self>) -> String {
        let router = Router::new()
            .route("/repos/{owner}/{repo}/hooks/{hook}/deliveries", get(github_list))
            .route(
                "/repos/{owner}/{repo}/hooks/{hook}/deliveries/{id}",
                get(github_detail),
            )
            .with_state(self.clone());
        let url = serve(router).await;
        *self.url.lock().unwrap() = url.clone();
        url
    }
    fn gate(&self, headers: &HeaderMap) -> Option<Response> {
        let n = self.requests.fetch_add(1, Ordering::SeqCst) + 1;
        let faults = self.faults.lock().unwrap();
        if faults.fail_request == Some(n) {
            return Some(
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    Json(json!({"message": "Server Error"})),
                )
                    .into_response(),
            );
        }
        if n <= faults.rate_limited {
            let reset = (now_ms() / 1000 + 1).to_string();
            return Some(
                (
                    StatusCode::FORBIDDEN,
                    [
                        ("x-ratelimit-remaining", "0".to_owned()),
                        ("x-ratelimit-reset", reset),
                    ],
                    Json(json!({"message": "API rate limit exceeded"})),
                )
                    .into_response(),
            );
        }
        if headers.get("authorization").and_then(|v| v.to_str().ok())
            != Some(&format!("Bearer {}", self.token))
        {
            return Some(
                (
                    StatusCode::UNAUTHORIZED,
                    Json(json!({"message": "Bad credentials"})),
                )
                    .into_response(),
            );
        }
        if self.forbidden {
            return Some(
                (
                    StatusCode::FORBIDDEN,
                    Json(json!({"message": "Resource not accessible by personal access token"})),
                )
                    .into_response(),
            );
        }
        assert_eq!(headers.get("x-github-api-version").unwrap(), "2022-11-28");
        assert_eq!(headers.get("accept").unwrap(), "application/vnd.github+json");
        assert!(headers.get("user-agent").is_some());
        None
    }
}

fn delivery_json(d: &Delivery) -> serde_json::Value {
    json!({"id": d.id, "guid": d.guid, "delivered_at": rfc3339(d.at_ms), "redelivery": d.redelivery,
           "duration": 0.03, "status": if d.status_code == 200 { "OK" } else { "failed to connect" },
           "status_code": d.status_code, "event": d.event, "action": "opened", "installation_id": null,
           "repository_id": 1})
}

async fn github_list(
    State(fake): State<Arc<FakeGithub>>,
    Path((owner, repo, hook)): Path<(String, String, String)>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Some(r) = fake.gate(&headers) {
        return r;
    }
    let per_page = q
        .get("per_page")
        .map_or(30, |v| v.parse::<usize>().unwrap())
        .min(100);
    let start = q
        .get("cursor")
        .map_or(0, |c| c.strip_prefix("v1_").unwrap().parse::<usize>().unwrap());
    let deliveries = fake.deliveries.lock().unwrap();
    let page: Vec<_> = deliveries
        .iter()
        .skip(start)
        .take(per_page)
        .map(delivery_json)
        .collect();
    let mut response = Json(page).into_response();
    if start + per_page < deliveries.len() {
        let next = format!(
            "<{}/repos/{owner}/{repo}/hooks/{hook}/deliveries?per_page={per_page}&cursor=v1_{}>; rel=\"next\"",
            fake.url.lock().unwrap(),
            start + per_page
        );
        response.headers_mut().insert("link", next.parse().unwrap());
    }
    response
}

async fn github_detail(
    State(fake): State<Arc<FakeGithub>>,
    Path((_, _, _, id)): Path<(String, String, String, u64)>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = fake.gate(&headers) {
        return r;
    }
    fake.detail_requests.fetch_add(1, Ordering::SeqCst);
    let deliveries = fake.deliveries.lock().unwrap();
    let Some(d) = deliveries.iter().find(|d| d.id == id) else {
        return (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"}))).into_response();
    };
    let mut detail = delivery_json(d);
    detail["url"] = json!("https://example.com/webhooks/gh");
    detail["request"] = json!({
        "headers": {"Accept": "*/*", "X-GitHub-Delivery": d.guid, "X-GitHub-Event": d.event,
                    "X-Hub-Signature-256": "sha256=d57c68ca6f92289e6987922ff26938930f6e66a2d161ef06abdf1859230aa23c",
                    "Content-Type": "application/json"},
        "payload": {"action": "opened", "guid": d.guid, "repository": {"id": 1, "full_name": "octo/hello"}},
    });
    detail["response"] = json!({"headers": {}, "payload": null});
    Json(detail).into_response()
}

fn github(url: &str, token: &str) -> Arc<dyn Provider> {
    let hook: GithubHook = "repos/octo/hello/hooks/1".parse().unwrap();
    Arc::new(Github::new(base(url), hook, Auth::token(token.into())).unwrap())
}

/// `guids` events spread over `span_ms` up to a minute ago, each delivered 1–3 times: a first attempt that
/// failed for some, then redeliveries two minutes apart.
fn github_deliveries(guids: usize, span_ms: i64) -> Vec<Delivery> {
    let now = now_ms();
    let step = (span_ms - 10 * 60_000) / guids as i64;
    let events = ["issues", "push", "pull_request"];
    let mut id = 1000;
    let mut out = Vec::new();
    for g in 0..guids {
        let first = now - 10 * 60_000 - g as i64 * step;
        let attempts = 1 + g % 3;
        for a in 0..attempts {
            id += 1;
            out.push(Delivery {
                id,
                guid: format!("58474f00-b361-11eb-836d-{g:012}"),
                at_ms: off_the_edges(now, first + a as i64 * 120_000),
                event: events[g % 3].into(),
                status_code: if a + 1 < attempts { 502 } else { 200 },
                redelivery: a > 0,
            });
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------------------------

#[tokio::test]
async fn stripe_one_run_recovers_exactly_the_window() {
    // GIVEN 260 events over 80 hours, three of them younger than the settle time, every third already delivered as
    // a webhook (some of those before the window).
    let s = source("stripe");
    let mut events = stripe_events_over(257, 80 * HOUR_MS, "");
    for (i, age_s) in [150, 60, 20].into_iter().enumerate() {
        events.push((
            format!("evt_young{i}"),
            now_ms() / 1000 - age_s,
            "invoice.created".into(),
        ));
    }
    let fake = FakeStripe::new(events.clone());
    let url = fake.start().await;
    let ledger = store();
    let mut delivered = BTreeSet::new();
    for (id, _, _) in events.iter().step_by(3) {
        deliver(&*ledger, &s, id, "{\"webhook\":true}").await;
        delivered.insert(id.clone());
    }
    let (queue, mut deliveries) = InProcessQueue::new(10_000);
    let reconciler = Reconciler::new(
        s.clone(),
        "stripe",
        stripe(&url, "sk_test_good"),
        LOOKBACK,
        SETTLE,
    );

    // WHEN one run goes over it
    let mut fractions = Vec::new();
    let summary = reconciler
        .run(&*ledger, queue.as_ref(), RunOptions::default(), &mut |p| {
            fractions.push(p.fraction())
        })
        .await
        .unwrap();

    // THEN the ledger holds the delivered ones plus exactly those created in [now − 72h, now − 5m)
    let created: Vec<_> = events.iter().map(|(id, at, _)| (id.clone(), at * 1000)).collect();
    let wanted = in_window(&created, LOOKBACK, SETTLE);
    let expected: BTreeSet<_> = wanted.union(&delivered).cloned().collect();
    assert_eq!(ledger.ids(&s).await, expected);
    let already = wanted.intersection(&delivered).count() as u64;
    assert_eq!(
        (summary.listed, summary.present, summary.recovered, summary.failed),
        (wanted.len() as u64, already, wanted.len() as u64 - already, 0)
    );
    // … each recovered one enqueued once, stored as the listed event object with its type
    let enqueued = drain(&mut deliveries);
    assert_eq!(enqueued.len() as u64, summary.recovered);
    assert_eq!(enqueued.iter().collect::<HashSet<_>>().len(), enqueued.len());
    let some = wanted.difference(&delivered).next().unwrap();
    let stored = ledger.event(&s, some).await;
    assert_eq!(stored.origin, Origin::Reconciled);
    let body: serde_json::Value = serde_json::from_slice(&stored.payload).unwrap();
    assert_eq!(body["id"], json!(some));
    assert_eq!(stored.event_type.as_deref(), Some("invoice.paid"));
    // … and the checkpoint reached the window's end, with the run recorded.
    let cp = ledger.checkpoint(&s).await.unwrap().unwrap();
    assert!((cp.scanned_to - (now_ms() - SETTLE.as_millis() as i64)).abs() < 60_000);
    assert_eq!(cp.last_run.unwrap().recovered, summary.recovered);
    assert_eq!(summary.pages, (wanted.len() as u64).div_ceil(100), "pages of 100");
    assert!(wanted.len() < 257 && !wanted.contains("evt_young0"));
    assert_eq!(fractions.last().copied(), Some(1.0));
    println!(
        "stripe: 260 events over 80 h, {} delivered; listed {}, already stored {}, recovered {}, requests {}",
        delivered.len(),
        summary.listed,
        summary.present,
        summary.recovered,
        summary.requests
    );
}

#[tokio::test]
async fn github_one_run_recovers_every_missing_guid_with_its_event_name() {
    // GIVEN 150 events over 80 hours, delivered 1-3 times each (failed attempts first), a fifth already stored
    let s = source("gh");
    let deliveries = github_deliveries(150, 80 * HOUR_MS);
    let fake = FakeGithub::new(deliveries.clone(), false);
    let url = fake.start().await;
    let ledger = store();
    let guids: BTreeSet<String> = deliveries.iter().map(|d| d.guid.clone()).collect();
    let delivered: BTreeSet<String> = guids.iter().step_by(5).cloned().collect();
    for g in &delivered {
        deliver(&*ledger, &s, g, "{}").await;
    }
    let (queue, mut enqueued) = InProcessQueue::new(10_000);
    let reconciler = Reconciler::new(s.clone(), "github", github(&url, "ghp_good"), LOOKBACK, SETTLE);

    // WHEN one run goes over it
    let summary = reconciler
        .run(
            &*ledger,
            queue.as_ref(),
            RunOptions::default(),
            &mut no_progress(),
        )
        .await
        .unwrap();

    // THEN every guid with a delivery in the window that the ledger lacked is there, counted once, typed
    let at: Vec<_> = deliveries.iter().map(|d| (d.guid.clone(), d.at_ms)).collect();
    let wanted = in_window(&at, LOOKBACK, SETTLE);
    let expected: BTreeSet<_> = wanted.union(&delivered).cloned().collect();
    assert_eq!(ledger.ids(&s).await, expected);
    let already = wanted.intersection(&delivered).count() as u64;
    assert_eq!(
        summary.listed,
        wanted.len() as u64,
        "a guid counts once however often it was delivered"
    );
    assert_eq!(
        (summary.present, summary.recovered),
        (already, wanted.len() as u64 - already)
    );
    assert_eq!(drain(&mut enqueued).len() as u64, summary.recovered);
    assert_eq!(
        fake.detail_requests.load(Ordering::SeqCst) as u64,
        summary.recovered,
        "one detail per recovered guid"
    );
    for g in wanted.difference(&delivered) {
        let d = deliveries.iter().find(|d| &d.guid == g).unwrap();
        let stored = ledger.event(&s, g).await;
        assert_eq!(stored.origin, Origin::Reconciled);
        assert_eq!(stored.event_type.as_deref(), Some(d.event.as_str()));
        assert!(stored
            .headers
            .contains(&("x-github-event".into(), d.event.clone())));
        let body: serde_json::Value = serde_json::from_slice(&stored.payload).unwrap();
        assert_eq!(body["guid"], json!(g));
    }
    // The walk stopped at the first page past the window: deliveries span 80 h, the window 72 h.
    assert!(summary.pages < (deliveries.len() as u64).div_ceil(100) + 1);
    println!(
        "github: 150 guids / {} deliveries over 80 h; listed {}, already stored {}, recovered {}, pages {}, requests {}",
        deliveries.len(),
        summary.listed,
        summary.present,
        summary.recovered,
        summary.pages,
        summary.requests
    );
}

#[tokio::test]
async fn rate_limits_are_waited_out() {
    // Stripe: two 429s with Retry-After: 1.
    let s = source("stripe");
    let fake = FakeStripe::new(stripe_events_over(150, 24 * HOUR_MS, ""));
    fake.faults.lock().unwrap().rate_limited = 2;
    let url = fake.start().await;
    let ledger = store();
    let (queue, _d) = InProcessQueue::new(10_000);
    let started = std::time::Instant::now();
    let summary = Reconciler::new(
        s.clone(),
        "stripe",
        stripe(&url, "sk_test_good"),
        LOOKBACK,
        SETTLE,
    )
    .run(
        &*ledger,
        queue.as_ref(),
        RunOptions::default(),
        &mut no_progress(),
    )
    .await
    .unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "waited Retry-After twice"
    );
    assert_eq!(summary.recovered, 150);
    assert_eq!(summary.requests, 4, "2 rate-limited + 2 pages");

    // GitHub: a 403 with X-RateLimit-Remaining: 0 and X-RateLimit-Reset a second ahead.
    let g = source("gh");
    let fake = FakeGithub::new(github_deliveries(20, 24 * HOUR_MS), false);
    fake.faults.lock().unwrap().rate_limited = 1;
    let url = fake.start().await;
    let started = std::time::Instant::now();
    let summary = Reconciler::new(g.clone(), "github", github(&url, "ghp_good"), LOOKBACK, SETTLE)
        .run(
            &*ledger,
            queue.as_ref(),
            RunOptions::default(),
            &mut no_progress(),
        )
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "waited until the reset"
    );
    assert_eq!(summary.recovered, 20);

    // A wait past the run's time budget ends the run instead, checkpoint unchanged.
    let h = source("gh2");
    let fake = FakeGithub::new(github_deliveries(20, 24 * HOUR_MS), false);
    fake.faults.lock().unwrap().rate_limited = 1;
    let url = fake.start().await;
    let err = Reconciler::new(h.clone(), "github", github(&url, "ghp_good"), LOOKBACK, SETTLE)
        .with_budget(inbox_core::reconcile::Budget {
            time: Duration::from_millis(100),
            pages: 10,
        })
        .run(
            &*ledger,
            queue.as_ref(),
            RunOptions::default(),
            &mut no_progress(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err.kind, RunErrorKind::RateLimited(_)), "{err}");
    let cp = ledger.checkpoint(&h).await.unwrap().unwrap();
    assert_eq!(cp.scanned_to, 0);
    assert!(cp.last_run.unwrap().error.unwrap().contains("rate limited"));
}

#[tokio::test]
async fn a_failure_mid_walk_keeps_the_checkpoint_and_the_next_run_leaves_no_gap() {
    // GIVEN a first complete run over 100 events, settle 0 so events a second old are listed
    let s = source("stripe");
    let fake = FakeStripe::new(stripe_events_over(100, 24 * HOUR_MS, "a"));
    let url = fake.start().await;
    let ledger = store();
    let (queue, _d) = InProcessQueue::new(10_000);
    let reconciler = Reconciler::new(
        s.clone(),
        "stripe",
        stripe(&url, "sk_test_good"),
        LOOKBACK,
        Duration::ZERO,
    );
    reconciler
        .run(
            &*ledger,
            queue.as_ref(),
            RunOptions::default(),
            &mut no_progress(),
        )
        .await
        .unwrap();
    let before = ledger.checkpoint(&s).await.unwrap().unwrap();

    // WHEN 250 events arrive that no webhook delivered, from just before the checkpoint up to now, and the next
    // run meets a 500 on its second page
    let now = now_ms();
    let fresh: Vec<_> = (0..250)
        .map(|i| {
            (
                format!("evt_b{i:05}"),
                (now - 240_000 + i * 900) / 1000,
                "charge.succeeded".to_owned(),
            )
        })
        .collect();
    fake.add(fresh.clone());
    let served = fake.requests();
    fake.faults.lock().unwrap().fail_request = Some(served + 2);
    let err = reconciler
        .run(
            &*ledger,
            queue.as_ref(),
            RunOptions::default(),
            &mut no_progress(),
        )
        .await
        .unwrap_err();

    // THEN the run says so, the checkpoint has not moved, the failed run is recorded
    assert!(matches!(err.kind, RunErrorKind::Provider(_)), "{err}");
    assert!(err.to_string().contains("stripe"), "{err}");
    let after = ledger.checkpoint(&s).await.unwrap().unwrap();
    assert_eq!(after.scanned_to, before.scanned_to);
    let record = after.last_run.unwrap();
    assert!(record.error.unwrap().contains("500"));
    assert_eq!(
        record.recovered, 100,
        "the first page was recovered before the failure"
    );

    // … and the next run recovers the rest: no gap.
    let summary = reconciler
        .run(
            &*ledger,
            queue.as_ref(),
            RunOptions::default(),
            &mut no_progress(),
        )
        .await
        .unwrap();
    assert_eq!(summary.recovered, 150);
    let ids = ledger.ids(&s).await;
    assert!(fresh.iter().all(|(id, _, _)| ids.contains(id)));
    assert!(ledger.checkpoint(&s).await.unwrap().unwrap().scanned_to > before.scanned_to);
}

#[tokio::test]
async fn bad_credentials_are_a_clear_error_naming_the_source() {
    let ledger = store();
    let (queue, _d) = InProcessQueue::new(100);

    let fake = FakeStripe::new(stripe_events_over(10, HOUR_MS * 2, ""));
    let url = fake.start().await;
    let err = Reconciler::new(
        source("payments"),
        "stripe",
        stripe(&url, "sk_test_WRONGKEY"),
        LOOKBACK,
        SETTLE,
    )
    .run(
        &*ledger,
        queue.as_ref(),
        RunOptions::default(),
        &mut no_progress(),
    )
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err.kind, RunErrorKind::BadCredentials { .. }), "{text}");
    assert!(
        text.contains("payments") && text.contains("stripe") && text.contains("401"),
        "{text}"
    );
    assert!(!text.contains("WRONGKEY"), "{text}");
    println!("{text}");

    let fake = FakeGithub::new(github_deliveries(5, HOUR_MS * 2), false);
    let url = fake.start().await;
    let err = Reconciler::new(
        source("repo-hooks"),
        "github",
        github(&url, "ghp_WRONGTOKEN"),
        LOOKBACK,
        SETTLE,
    )
    .run(
        &*ledger,
        queue.as_ref(),
        RunOptions::default(),
        &mut no_progress(),
    )
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err.kind, RunErrorKind::BadCredentials { .. }), "{text}");
    assert!(
        text.contains("repo-hooks") && !text.contains("WRONGTOKEN"),
        "{text}"
    );
    println!("{text}");

    // A GitHub 403 without rate-limit headers is a refusal, not a wait.
    let fake = FakeGithub::new(github_deliveries(5, HOUR_MS * 2), true);
    let url = fake.start().await;
    let err = Reconciler::new(
        source("org-hooks"),
        "github",
        github(&url, "ghp_good"),
        LOOKBACK,
        SETTLE,
    )
    .run(
        &*ledger,
        queue.as_ref(),
        RunOptions::default(),
        &mut no_progress(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err.kind, RunErrorKind::BadCredentials { .. }), "{err}");
    assert_eq!(fake.requests.load(Ordering::SeqCst), 1, "no retry of a refusal");
}

#[tokio::test]
async fn at_steady_state_a_run_rereads_only_the_overlap() {
    // GIVEN 10,000 events in the 72 h window
    let s = source("stripe");
    let fake = FakeStripe::new(stripe_events_over(10_000, 71 * HOUR_MS, ""));
    let url = fake.start().await;
    let ledger = store();
    let (queue, _d) = InProcessQueue::new(20_000);
    let reconciler = Reconciler::new(
        s.clone(),
        "stripe",
        stripe(&url, "sk_test_good"),
        LOOKBACK,
        SETTLE,
    );

    // WHEN the first run and nine more run
    let mut runs: Vec<Summary> = Vec::new();
    for _ in 0..10 {
        let before = fake.requests();
        let summary = reconciler
            .run(
                &*ledger,
                queue.as_ref(),
                RunOptions::default(),
                &mut no_progress(),
            )
            .await
            .unwrap();
        assert_eq!(summary.requests as usize, fake.requests() - before);
        runs.push(summary);
    }

    // THEN the first reads every page, later ones only the overlap below the checkpoint
    assert_eq!(runs[0].recovered, runs[0].listed);
    assert!(runs[0].listed > 9_950, "{:?}", runs[0]);
    assert_eq!(runs[0].requests, 100);
    for later in &runs[1..] {
        assert_eq!(later.requests, 1, "{later:?}");
        assert!(later.listed < 100, "{later:?}");
        assert_eq!(later.recovered, 0);
    }
    println!(
        "steady state, 10,000 events in the window: run 1 {} requests ({} listed), run 10 {} requests ({} listed); \
         ledger existence reads: run 1 {}, run 10 {}",
        runs[0].requests,
        runs[0].listed,
        runs[9].requests,
        runs[9].listed,
        runs[0].existence_reads,
        runs[9].existence_reads
    );
}

#[tokio::test]
async fn a_dry_run_creates_enqueues_and_saves_nothing() {
    let s = source("stripe");
    let fake = FakeStripe::new(stripe_events_over(30, 10 * HOUR_MS, ""));
    let url = fake.start().await;
    let ledger = store();
    let (queue, mut deliveries) = InProcessQueue::new(100);
    let summary = Reconciler::new(
        s.clone(),
        "stripe",
        stripe(&url, "sk_test_good"),
        LOOKBACK,
        SETTLE,
    )
    .run(
        &*ledger,
        queue.as_ref(),
        RunOptions {
            dry_run: true,
            since: None,
        },
        &mut no_progress(),
    )
    .await
    .unwrap();
    assert_eq!((summary.listed, summary.recovered), (30, 30));
    assert!(summary.dry_run);
    assert!(ledger.ids(&s).await.is_empty());
    assert!(drain(&mut deliveries).is_empty());
    assert_eq!(ledger.checkpoint(&s).await.unwrap(), None);
}

#[tokio::test]
async fn stripe_connect_sends_the_account_and_from_config_resolves_the_key() {
    struct Env;
    #[async_trait]
    impl inbox_core::source::SecretResolver for Env {
        async fn resolve(&self, r: &SecretRef) -> Result<String, String> {
            match r {
                SecretRef::Env(n) if n == "KEY" => Ok("sk_test_good\n".into()),
                _ => Err("the environment variable is not set".into()),
            }
        }
    }
    let fake = FakeStripe::new(stripe_events_over(3, HOUR_MS, ""));
    let url = fake.start().await;
    let mut config = ReconcileConfig {
        provider: ProviderConfig::Stripe {
            api_key: SecretRef::Env("KEY".into()),
            account: Some("acct_123".into()),
        },
        interval: Duration::from_secs(60),
        lookback: LOOKBACK,
        settle: SETTLE,
        api_base: base(&url),
    };
    let s = source("connect");
    let reconciler = Reconciler::from_config(&s, &config, &Env).await.unwrap();
    let ledger = store();
    let (queue, _d) = InProcessQueue::new(100);
    let summary = reconciler
        .run(
            &*ledger,
            queue.as_ref(),
            RunOptions::default(),
            &mut no_progress(),
        )
        .await
        .unwrap();
    assert_eq!(summary.recovered, 3);
    assert_eq!(
        fake.accounts.lock().unwrap().as_slice(),
        &[Some("acct_123".to_owned())]
    );

    // A credential that does not resolve names the field, not a value.
    config.provider = ProviderConfig::Stripe {
        api_key: SecretRef::Env("MISSING".into()),
        account: None,
    };
    let err = Reconciler::from_config(&s, &config, &Env).await.err().unwrap();
    assert_eq!(err.field, "sources.connect.reconcile.api_key");
}
