//! Fake GitHub: a hook's deliveries and a delivery's detail (cited below).

use super::*;

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
