//! Fake Persona: `GET /api/v1/events` and `GET /api/v1/events/{event-id}`, after Persona's OpenAPI 3.1 (version
//! 2023-01-05, as bundled in `hey-jane/persona-openapi-client` commit `fe93953f3f02f76f3a63a35e0bb18464e9961c89`,
//! `openapi-bundled.yaml`: paths `/events`, `/events/{event-id}`, components `pagination-query-params`, `event`,
//! responses `unauthorized`, `not-found`, `too-many-requests`) and the docs
//! (https://docs.withpersona.com/api-reference/events/list-all-events, https://docs.withpersona.com/pagination,
//! https://docs.withpersona.com/reference/rate-limiting):
//! - auth `Authorization: Bearer <API key>`; else 401 `{"errors":[{"title":"Must be authenticated to access this endpoint"}]}`;
//! - query `page[size]` (1 to 100, default 10), `page[after]` / `page[before]` (an object id), `filter[id]`,
//!   `filter[name]` (comma-separated lists); newest first;
//! - answer `{"data":[event…],"links":{"prev","next"}}`, `next` = `/api/v1/events?page%5Bafter%5D=<last id>`, null
//!   at the end; an event is `{"type":"event","id","attributes":{"name","payload":{"data":…},"created-at"}}`;
//!   the single event `{"data": event}`, or 404 `{"errors":[{"title":"Record not found"}]}`;
//! - rate limit: 429 `{"errors":[{"title":"Rate limit exceeded","details":…}]}` with `ratelimit-limit`,
//!   `ratelimit-remaining: 0`, `ratelimit-reset` (seconds until the window resets).
//!
//! The webhook body is `{"data": <event>}` (https://docs.withpersona.com/docs/webhooks, "Example event from webhook"), which the single-event answer
//! is too: `stored` is the webhook body.

use super::*;

const KEY: &str = "persona_sandbox_good";

pub struct FakePersona {
    api: Api,
}

impl FakePersona {
    #[allow(clippy::new_ret_no_self)] // The shape every fake has (`fakes()`).
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakePersona { api: Api::default() })
    }

    /// The event object, as the list, the single-event answer and the webhook carry it.
    fn event_json(event: &Event) -> serde_json::Value {
        let suffix = event.id.trim_start_matches("evt_");
        json!({
            "type": "event",
            "id": event.id,
            "attributes": {
                "name": event.event_type,
                "payload": {"data": {"type": "inquiry", "id": format!("inq_{suffix}"),
                                     "attributes": {"status": "completed", "reference-id": null}}},
                "created-at": rfc3339(event.created_ms),
            },
        })
    }
}

fn errors(status: StatusCode, title: &str, details: Option<&str>) -> Response {
    let mut error = json!({"title": title});
    if let Some(d) = details {
        error["details"] = json!(d);
    }
    (status, Json(json!({"errors": [error]}))).into_response()
}

/// The gate and the key, as every request meets them.
fn refuse(fake: &FakePersona, headers: &HeaderMap) -> Option<Response> {
    match fake.api.gate() {
        Gate::Fail => {
            return Some(errors(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal Server Error",
                None,
            ))
        }
        Gate::RateLimited => {
            let mut r = errors(
                StatusCode::TOO_MANY_REQUESTS,
                "Rate limit exceeded",
                Some("You have hit your rate limit of 300 requests / min. Please reach out to support@withpersona.com if you need this changed."),
            );
            for (k, v) in [
                ("ratelimit-limit", "300"),
                ("ratelimit-remaining", "0"),
                ("ratelimit-reset", "1"),
            ] {
                r.headers_mut().insert(k, v.parse().unwrap());
            }
            return Some(r);
        }
        Gate::Serve => {}
    }
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&format!("Bearer {KEY}")) {
        return Some(errors(
            StatusCode::UNAUTHORIZED,
            "Must be authenticated to access this endpoint",
            None,
        ));
    }
    None
}

async fn events(
    State(fake): State<Arc<FakePersona>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Some(r) = refuse(&fake, &headers) {
        return r;
    }
    let size = match q.get("page[size]").map(|v| v.parse::<usize>()) {
        None => 10,
        Some(Ok(n)) if (1..=100).contains(&n) => n,
        Some(_) => {
            return errors(
                StatusCode::BAD_REQUEST,
                "Bad Request",
                Some("page[size] must be between 1 and 100"),
            )
        }
    };
    let list = |k: &str| {
        q.get(k)
            .map(|v| v.split(',').map(str::to_owned).collect::<HashSet<_>>())
    };
    let (ids, names) = (list("filter[id]"), list("filter[name]"));
    let all: Vec<Event> = fake
        .api
        .events()
        .into_iter()
        .filter(|e| ids.as_ref().is_none_or(|s| s.contains(&e.id)))
        .filter(|e| names.as_ref().is_none_or(|s| s.contains(&e.event_type)))
        .collect();
    let position = |id: &str| all.iter().position(|e| e.id == id);
    let (start, end) = match (q.get("page[after]"), q.get("page[before]")) {
        (Some(after), _) => match position(after) {
            Some(i) => (i + 1, (i + 1 + size).min(all.len())),
            None => {
                return errors(
                    StatusCode::BAD_REQUEST,
                    "Bad Request",
                    Some("page[after] is not a valid cursor"),
                )
            }
        },
        (None, Some(before)) => match position(before) {
            Some(i) => (i.saturating_sub(size), i),
            None => {
                return errors(
                    StatusCode::BAD_REQUEST,
                    "Bad Request",
                    Some("page[before] is not a valid cursor"),
                )
            }
        },
        (None, None) => (0, size.min(all.len())),
    };
    let page = &all[start..end];
    let link = |k: &str, id: Option<&Event>| id.map(|e| format!("/api/v1/events?page%5B{k}%5D={}", e.id));
    let next = if end < all.len() {
        link("after", page.last())
    } else {
        None
    };
    let prev = if start > 0 {
        link("before", page.first())
    } else {
        None
    };
    let data: Vec<_> = page.iter().map(FakePersona::event_json).collect();
    Json(json!({"data": data, "links": {"prev": prev, "next": next}})).into_response()
}

async fn event(State(fake): State<Arc<FakePersona>>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    if let Some(r) = refuse(&fake, &headers) {
        return r;
    }
    match fake.api.find(&id) {
        Some(e) => Json(json!({"data": FakePersona::event_json(&e)})).into_response(),
        None => errors(StatusCode::NOT_FOUND, "Record not found", None),
    }
}

impl Fake for FakePersona {
    fn provider(&self) -> &'static str {
        "persona"
    }
    fn start(self: Arc<Self>) -> String {
        serve_now(
            Router::new()
                .route("/api/v1/events", get(events))
                .route("/api/v1/events/{id}", get(event))
                .with_state(self),
        )
    }
    fn api(&self) -> &Api {
        &self.api
    }
    /// `evt_` and 24 characters, as Persona writes ids.
    fn new_id(&self, n: usize) -> String {
        format!("evt_Fk{n:022}")
    }
    fn event_type(&self) -> &'static str {
        "inquiry.completed"
    }
    fn webhook(&self, event: &Event) -> Webhook {
        Webhook {
            body: serde_json::to_vec(&json!({"data": FakePersona::event_json(event)})).unwrap(),
            content_type: "application/json",
            headers: vec![],
        }
    }
    fn block(&self, prefix: &str, wrong: bool) -> (String, Vec<(String, String)>) {
        let key = if wrong { "persona_sandbox_wrong" } else { KEY };
        (
            format!("api_key = \"env:{prefix}_API_KEY\""),
            vec![(format!("{prefix}_API_KEY"), key.to_owned())],
        )
    }
    fn receiving(&self, prefix: &str) -> Receiving {
        Receiving {
            config: format!("secrets = [\"env:{prefix}_WEBHOOK_SECRET\"]"),
            env: vec![(
                format!("{prefix}_WEBHOOK_SECRET"),
                "wbhsec_test_secret".to_owned(),
            )],
            ..Receiving::default()
        }
    }
    fn page_size(&self) -> usize {
        100
    }
}
