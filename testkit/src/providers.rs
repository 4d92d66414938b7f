//! Local fakes of the providers' APIs that reconciliation reads (Stripe's events, a GitHub hook's deliveries),
//! served by axum on 127.0.0.1:0 and following the documented shapes cited below, with the faults the tests need
//! (401 for a wrong credential, 429/403 rate limits, a 500 in the middle of a walk, a detail that answers 404 or
//! carries no payload). Used against the SQLite
//! ledger (`shared/tests/reconcile.rs`) and against the AWS emulator (`tests/aws.rs`).
// Test-only: a malformed request from the code under test should fail the test loudly.
#![allow(clippy::unwrap_used)]

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

// ---------------------------------------------------------------------------------------------------------------
// Fake Stripe. https://docs.stripe.com/api/events/list : `GET /v1/events` with `created[gte]`, `created[lt]`,
// `limit` (1-100) and `starting_after` (https://docs.stripe.com/api/pagination), newest first, answering
// `{"object":"list","url":"/v1/events","has_more":bool,"data":[event…]}`; an event is
// `{"id":"evt_…","object":"event","type":…,"created":unix seconds,"data":{"object":…},…}`, and
// https://docs.stripe.com/api/events/retrieve `GET /v1/events/{id}` answers one, or a 404 with
// `{"error":{"type":"invalid_request_error","code":"resource_missing",…}}`. A wrong key is a 401
// with `{"error":{"type":"invalid_request_error",…}}`; too many requests a 429 (https://docs.stripe.com/rate-limits).

pub struct FakeStripe {
    /// (id, created seconds, type), kept newest first.
    pub events: Mutex<Vec<(String, i64, String)>>,
    pub key: String,
    pub requests: AtomicUsize,
    pub faults: Mutex<Faults>,
    pub accounts: Mutex<Vec<Option<String>>>,
    /// Extra text in the `data.object` of these events (by id): an API object too large to keep in a record.
    pub padding: Mutex<HashMap<String, String>>,
    /// Events (by id) that `GET /v1/events/{id}` answers 404 for, though the list shows them.
    pub missing: Mutex<HashSet<String>>,
    /// `GET /v1/events/{id}` requests served, by id.
    pub retrieved: Mutex<Vec<String>>,
}

impl FakeStripe {
    pub fn new(events: Vec<(String, i64, String)>) -> Arc<Self> {
        let fake = Arc::new(FakeStripe {
            events: Mutex::new(Vec::new()),
            key: "sk_test_good".into(),
            requests: AtomicUsize::new(0),
            faults: Mutex::new(Faults::default()),
            accounts: Mutex::new(Vec::new()),
            padding: Mutex::new(HashMap::new()),
            missing: Mutex::new(HashSet::new()),
            retrieved: Mutex::new(Vec::new()),
        });
        fake.add(events);
        fake
    }
    pub fn add(&self, more: Vec<(String, i64, String)>) {
        let mut events = self.events.lock().unwrap();
        events.extend(more);
        events.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
    }
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
    pub async fn start(self: &Arc<Self>) -> String {
        serve(
            Router::new()
                .route("/v1/events", get(stripe_events))
                .route("/v1/events/{id}", get(stripe_event))
                .with_state(self.clone()),
        )
        .await
    }
}

impl FakeStripe {
    /// The faults, the key and the account, as every request meets them.
    fn gate(&self, headers: &HeaderMap) -> Option<Response> {
        let n = self.requests.fetch_add(1, Ordering::SeqCst) + 1;
        {
            let faults = self.faults.lock().unwrap();
            if faults.fail_request == Some(n) {
                return Some(
                    (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        Json(json!({"error": {"type": "api_error"}})),
                    )
                        .into_response(),
                );
            }
            if n <= faults.rate_limited {
                return Some(
                    (
                        StatusCode::TOO_MANY_REQUESTS,
                        [("retry-after", "1")],
                        Json(json!({"error": {"type": "rate_limit_error", "message": "Too many requests"}})),
                    )
                        .into_response(),
                );
            }
        }
        if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&format!("Bearer {}", self.key))
        {
            return Some(
                (
                    StatusCode::UNAUTHORIZED,
                    Json(json!({"error": {"type": "invalid_request_error", "message": "Invalid API Key provided"}})),
                )
                    .into_response(),
            );
        }
        self.accounts.lock().unwrap().push(
            headers
                .get("stripe-account")
                .map(|v| v.to_str().unwrap().to_owned()),
        );
        None
    }

    fn event_json(&self, id: &str, created: i64, ty: &str) -> serde_json::Value {
        let mut object = json!({"id": format!("obj_{id}")});
        if let Some(pad) = self.padding.lock().unwrap().get(id) {
            object["description"] = json!(pad);
        }
        json!({"id": id, "object": "event", "api_version": "2024-06-20", "created": created, "type": ty,
               "livemode": false, "pending_webhooks": 1, "data": {"object": object}})
    }
}

async fn stripe_event(
    State(fake): State<Arc<FakeStripe>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = fake.gate(&headers) {
        return r;
    }
    fake.retrieved.lock().unwrap().push(id.clone());
    let found = fake
        .events
        .lock()
        .unwrap()
        .iter()
        .find(|e| e.0 == id)
        .cloned()
        .filter(|_| !fake.missing.lock().unwrap().contains(&id));
    match found {
        Some((id, created, ty)) => Json(fake.event_json(&id, created, &ty)).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            Json(
                json!({"error": {"type": "invalid_request_error", "code": "resource_missing",
                                  "message": format!("No such event: '{id}'")}}),
            ),
        )
            .into_response(),
    }
}

async fn stripe_events(
    State(fake): State<Arc<FakeStripe>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Some(r) = fake.gate(&headers) {
        return r;
    }
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
    let page: Vec<_> = matching.by_ref().take(limit).cloned().collect();
    let has_more = matching.peek().is_some();
    drop(events);
    let data: Vec<_> = page
        .iter()
        .map(|(id, created, ty)| fake.event_json(id, *created, ty))
        .collect();
    Json(json!({"object": "list", "url": "/v1/events", "has_more": has_more, "data": data})).into_response()
}

/// `n` events spread evenly from `span_ms` ago to six minutes ago (older than the settle time): (id, created
/// seconds, type).
pub fn stripe_events_over(n: usize, span_ms: i64, prefix: &str) -> Vec<(String, i64, String)> {
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
pub fn off_the_edges(now: i64, at: i64) -> i64 {
    let edges = [now - LOOKBACK.as_millis() as i64, now - SETTLE.as_millis() as i64];
    match edges.iter().find(|e| (at - **e).abs() < 30_000) {
        Some(e) => e - 30_000,
        None => at,
    }
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

#[derive(Clone, Debug)]
pub struct Delivery {
    pub id: u64,
    pub guid: String,
    pub at_ms: i64,
    pub event: String,
    pub status_code: u16,
    pub redelivery: bool,
}

pub struct FakeGithub {
    /// Newest first.
    pub deliveries: Mutex<Vec<Delivery>>,
    pub token: String,
    pub requests: AtomicUsize,
    pub detail_requests: AtomicUsize,
    pub faults: Mutex<Faults>,
    /// Answer 403 without rate-limit headers (a token without access).
    pub forbidden: bool,
    pub url: Mutex<String>,
    /// Deliveries (by id) whose detail answers 404 though the list shows them.
    pub missing: Mutex<HashSet<u64>>,
    /// Deliveries (by id) whose detail carries `request.payload: null`.
    pub without_payload: Mutex<HashSet<u64>>,
}

impl FakeGithub {
    pub fn new(deliveries: Vec<Delivery>, forbidden: bool) -> Arc<Self> {
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
            missing: Mutex::new(HashSet::new()),
            without_payload: Mutex::new(HashSet::new()),
        })
    }
    pub async fn start(self: &Arc<Self>) -> String {
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
    let Some(d) = deliveries
        .iter()
        .find(|d| d.id == id && !fake.missing.lock().unwrap().contains(&id))
    else {
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
    if fake.without_payload.lock().unwrap().contains(&id) {
        detail["request"]["payload"] = serde_json::Value::Null;
    }
    detail["response"] = json!({"headers": {}, "payload": null});
    Json(detail).into_response()
}

/// `guids` events spread over `span_ms` up to a minute ago, each delivered 1–3 times: a first attempt that
/// failed for some, then redeliveries two minutes apart.
pub fn github_deliveries(guids: usize, span_ms: i64) -> Vec<Delivery> {
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
