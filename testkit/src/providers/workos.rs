//! Fake WorkOS: the Events API as WorkOS's OpenAPI describes it (repository `workos/openapi-spec`, commit
//! `7fd8359944a048bfca3177ca9399b0eacda3a764`, `spec/open-api-spec.yaml`: path `/events`, operation
//! `EventsController_list`, schemas `EventList`, `EventSchema`, `ListMetadata`, `PaginationOrder`;
//! `securitySchemes.bearer`).
//! - `GET /events` with `Authorization: Bearer sk_…`; a wrong key is a 401 (the spec gives it no body; we answer
//!   `{"message":"Unauthorized"}`).
//! - Query: `range_start` / `range_end`, ISO 8601, events created "after" / "before" the date (read strictly: both
//!   ends exclusive); `limit` 1 to 100, default 10 (422 outside, the spec's `{"message":"Validation failed.",
//!   "errors":[{"code","field"}]}`); `order` `desc` (the default) or `asc`; `after` (an event id: the page
//!   continues past it in that order); `events`, comma-separated types (`style: form, explode: false`).
//! - Answer: `{"object":"list","data":[event…],"list_metadata":{"before":…,"after":…}}`, `after` the last id while
//!   more follow, else `null`; an event is `{"object":"event","id","event","data","created_at"}`.
//! - Too many requests: 429 `{"message":"Too many requests.","code":"rate_limit_exceeded"}` with `Retry-After`
//!   in seconds (https://workos.com/docs/reference/rate-limits); a 500 is `{"message":"Internal Server Error"}`.
//!
//! The webhook (https://workos.com/docs/events/data-syncing/webhooks) is the event without `"object"`: `id`,
//! `event`, `data`, `created_at`; "The Event IDs passed in webhook bodies are the same as those returned by the
//! Events API" (https://workos.com/docs/events/quick-start).

use super::*;

const KEY: &str = "sk_test_inbox_workos_events_read";
const WRONG_KEY: &str = "sk_test_inbox_workos_revoked";

pub struct FakeWorkos {
    api: Api,
}

impl FakeWorkos {
    #[allow(clippy::new_ret_no_self)]
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakeWorkos { api: Api::default() })
    }

    /// The event as the webhook carries it (no `object`), rendered from the event alone.
    fn body(event: &Event) -> serde_json::Value {
        let tail = event.id.trim_start_matches("event_");
        json!({
            "id": event.id,
            "event": event.event_type,
            "data": {
                "object": "directory_user",
                "id": format!("directory_user_{tail}"),
                "directory_id": "directory_01J9INBOX0000000000000000",
                "organization_id": "org_01J9INBOX0000000000000000",
                "idp_id": tail,
                "first_name": "Ada",
                "last_name": "Lovelace",
                "emails": [{"primary": true, "type": "work", "value": format!("ada+{tail}@example.com")}],
                "state": "active",
                "created_at": rfc3339(event.created_ms),
                "updated_at": rfc3339(event.created_ms),
            },
            "created_at": rfc3339(event.created_ms),
        })
    }
}

fn message(status: StatusCode, body: serde_json::Value) -> Response {
    (status, Json(body)).into_response()
}

async fn events(
    State(fake): State<Arc<FakeWorkos>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    match fake.api.gate() {
        Gate::Fail => {
            return message(
                StatusCode::INTERNAL_SERVER_ERROR,
                json!({"message": "Internal Server Error"}),
            )
        }
        Gate::RateLimited => {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [("retry-after", "1")],
                Json(json!({"message": "Too many requests.", "code": "rate_limit_exceeded"})),
            )
                .into_response()
        }
        Gate::Serve => {}
    }
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&format!("Bearer {KEY}")) {
        return message(StatusCode::UNAUTHORIZED, json!({"message": "Unauthorized"}));
    }
    let invalid = |field: &str| {
        message(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"message": "Validation failed.", "errors": [{"code": "invalid", "field": field}]}),
        )
    };
    let time = |k: &str| q.get(k).map(|v| parse_rfc3339_ms(v).ok_or(()));
    let (Ok(start), Ok(end)) = (time("range_start").transpose(), time("range_end").transpose()) else {
        return invalid("range_start");
    };
    let limit = match q.get("limit").map(|v| v.parse::<usize>()) {
        None => 10,
        Some(Ok(n)) if (1..=100).contains(&n) => n,
        Some(_) => return invalid("limit"),
    };
    let ascending = match q.get("order").map(String::as_str) {
        None | Some("desc") => false,
        Some("asc") => true,
        Some(_) => return invalid("order"),
    };
    let types: Option<Vec<&str>> = q.get("events").map(|t| t.split(',').collect());
    let mut listed: Vec<Event> = fake
        .api
        .events()
        .into_iter()
        .filter(|e| start.is_none_or(|s| e.created_ms > s) && end.is_none_or(|t| e.created_ms < t))
        .filter(|e| types.as_ref().is_none_or(|t| t.contains(&e.event_type.as_str())))
        .collect();
    if ascending {
        listed.reverse();
    }
    let from = match q.get("after") {
        Some(after) => listed
            .iter()
            .position(|e| &e.id == after)
            .map_or(listed.len(), |i| i + 1),
        None => 0,
    };
    let page: Vec<&Event> = listed.iter().skip(from).take(limit).collect();
    let more = from + page.len() < listed.len();
    let data: Vec<_> = page
        .iter()
        .map(|e| {
            let mut event = FakeWorkos::body(e);
            event["object"] = json!("event");
            event
        })
        .collect();
    let after = page.last().filter(|_| more).map(|e| e.id.clone());
    let before = page.first().filter(|_| from > 0).map(|e| e.id.clone());
    Json(json!({"object": "list", "data": data, "list_metadata": {"before": before, "after": after}}))
        .into_response()
}

impl Fake for FakeWorkos {
    fn provider(&self) -> &'static str {
        "workos"
    }
    fn start(self: Arc<Self>) -> String {
        serve_now(Router::new().route("/events", get(events)).with_state(self))
    }
    fn api(&self) -> &Api {
        &self.api
    }
    /// A ULID-shaped id, `event_` and 26 characters.
    fn new_id(&self, n: usize) -> String {
        format!("event_01J9{n:022}")
    }
    fn event_type(&self) -> &'static str {
        "dsync.user.created"
    }
    fn webhook(&self, event: &Event) -> Webhook {
        Webhook {
            body: serde_json::to_vec(&FakeWorkos::body(event)).unwrap(),
            content_type: "application/json",
            headers: vec![],
        }
    }
    fn block(&self, prefix: &str, wrong: bool) -> (String, Vec<(String, String)>) {
        let var = format!("{prefix}_API_KEY");
        let key = if wrong { WRONG_KEY } else { KEY };
        (format!("api_key = \"env:{var}\""), vec![(var, key.to_owned())])
    }
    fn receiving(&self, prefix: &str) -> Receiving {
        let var = format!("{prefix}_WEBHOOK_SECRET");
        Receiving {
            config: format!("secrets = [\"env:{var}\"]"),
            env: vec![(var, "workos-inbox-test-webhook-secret".to_owned())],
            ..Receiving::default()
        }
    }
    fn page_size(&self) -> usize {
        100
    }
}
