//! Fake Stripe: the events list and retrieve (cited below).

use super::*;

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
