//! Fake Paddle Billing: `GET /events`, after Paddle's OpenAPI (`PaddleHQ/paddle-openapi`, `v1/openapi.yaml`, read at
//! commit `1ea004be7e7394b72ad8aed5e99362e71cb56041`, operationId `list-events`) and the Node SDK
//! (`PaddleHQ/paddle-node-sdk` commit `b8ee4b12741d88abe5a33f5c8a74735c9ac3653f`,
//! `src/resources/events/operations/list-events-query-parameters.ts`, `src/types/events/events-response.ts`):
//! - auth `Authorization: Bearer <API key>`; anything else is a 401
//!   `{"error":{"type":"request_error","code":"invalid_token",…},"meta":{"request_id"}}`;
//! - query `order_by` (`id[ASC]` | `id[DESC]`), `per_page` (default 50, at most 200: "Paddle returns the maximum
//!   number of results if a number greater than the maximum is requested"), `after` (entities after this id in
//!   that order); no time filter;
//! - answer `{"data":[event…],"meta":{"request_id","pagination":{"per_page","estimated_total","next","has_more"}}}`,
//!   `next` = this URL with `after=<last id>`, present on the last page too; an event is
//!   `{"event_id","event_type","occurred_at"(RFC 3339, microseconds),"data"}` without `notification_id`;
//! - rate limit: 429 with `Retry-After` seconds and `{"error":{"type":"api_error","code":"too_many_requests",…}}`
//!   (https://developer.paddle.com/api-reference/about/rate-limiting); a 500 is `type: api_error`,
//!   `code: internal_error` in the same envelope.
//!
//! Event ids are time-ordered in Paddle (ULIDs); here the id order is the order `Api` keeps (newest first).
//! The webhook (https://developer.paddle.com/webhooks/overview) is the same event with `notification_id`, which
//! the list lacks: `stored` is the webhook body without it.

use super::*;

const KEY: &str = "pdl_sdbx_apikey_01good";

pub struct FakePaddle {
    api: Api,
}

impl FakePaddle {
    #[allow(clippy::new_ret_no_self)] // The shape every fake has (`fakes()`).
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakePaddle { api: Api::default() })
    }

    /// The event as the list shows it.
    fn listed(event: &Event) -> serde_json::Value {
        let suffix = event.id.trim_start_matches("evt_");
        // Paddle writes microseconds: `2024-04-12T13:15:50.037665Z`.
        let at = rfc3339(event.created_ms).replace('Z', "000Z");
        json!({
            "event_id": event.id,
            "event_type": event.event_type,
            "occurred_at": at,
            "data": {"id": format!("txn_{suffix}"), "status": "completed", "currency_code": "USD",
                     "created_at": at, "updated_at": at},
        })
    }
}

fn error(status: StatusCode, kind: &str, code: &str, detail: &str) -> Response {
    let body = json!({
        "error": {"type": kind, "code": code, "detail": detail,
                  "documentation_url": format!("https://developer.paddle.com/errors/shared/{code}")},
        "meta": {"request_id": "8b3d4e21-0e0b-4f4c-9c7a-2f6f3e0c1a11"},
    });
    (status, Json(body)).into_response()
}

async fn events(
    State(fake): State<Arc<FakePaddle>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    match fake.api.gate() {
        Gate::Fail => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "api_error",
                "internal_error",
                "An internal error has occurred.",
            )
        }
        Gate::RateLimited => {
            let mut r = error(
                StatusCode::TOO_MANY_REQUESTS,
                "api_error",
                "too_many_requests",
                "IP address exceeded the allowed rate limit. Retry after the number of seconds in the Retry-After header.",
            );
            r.headers_mut().insert("retry-after", "1".parse().unwrap());
            return r;
        }
        Gate::Serve => {}
    }
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&format!("Bearer {KEY}")) {
        return error(
            StatusCode::UNAUTHORIZED,
            "request_error",
            "invalid_token",
            "Authentication token is invalid.",
        );
    }
    let per_page = match q.get("per_page").map(|v| v.parse::<usize>()) {
        None => 50,
        Some(Ok(n)) if n >= 1 => n.min(200),
        Some(_) => return bad_request("per_page"),
    };
    let mut all = fake.api.events();
    match q.get("order_by").map(String::as_str) {
        None | Some("id[DESC]") => {}
        Some("id[ASC]") => all.reverse(),
        Some(_) => return bad_request("order_by"),
    }
    let start = match q.get("after") {
        None => 0,
        Some(after) => match all.iter().position(|e| &e.id == after) {
            Some(i) => i + 1,
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "request_error",
                    "invalid_field",
                    "after is not a listed id",
                )
            }
        },
    };
    let page: Vec<_> = all.iter().skip(start).take(per_page).collect();
    let has_more = start + page.len() < all.len();
    let host = headers
        .get("host")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("127.0.0.1");
    let last = page
        .last()
        .map_or_else(|| q.get("after").cloned().unwrap_or_default(), |e| e.id.clone());
    let order = q.get("order_by").map_or("id[DESC]", String::as_str);
    let next = format!("http://{host}/events?after={last}&order_by={order}&per_page={per_page}");
    let data: Vec<_> = page.iter().map(|e| FakePaddle::listed(e)).collect();
    Json(json!({
        "data": data,
        "meta": {"request_id": "4f6f0d3a-6c1e-4b7e-9a35-0d9c2b1c7e55",
                 "pagination": {"per_page": per_page, "estimated_total": all.len(), "next": next, "has_more": has_more}},
    }))
    .into_response()
}

impl Fake for FakePaddle {
    fn provider(&self) -> &'static str {
        "paddle"
    }
    fn start(self: Arc<Self>) -> String {
        serve_now(Router::new().route("/events", get(events)).with_state(self))
    }
    fn api(&self) -> &Api {
        &self.api
    }
    /// `evt_` and 26 lowercase base-32 characters, as Paddle writes ids.
    fn new_id(&self, n: usize) -> String {
        format!("evt_01{n:024}")
    }
    fn event_type(&self) -> &'static str {
        "transaction.completed"
    }
    fn webhook(&self, event: &Event) -> Webhook {
        let mut body = FakePaddle::listed(event);
        let suffix = event.id.trim_start_matches("evt_");
        body["notification_id"] = json!(format!("ntf_{suffix}"));
        Webhook {
            body: serde_json::to_vec(&body).unwrap(),
            content_type: "application/json",
            headers: vec![],
        }
    }
    /// The listed event: the webhook's body without `notification_id`, which `GET /events` does not carry.
    fn stored(&self, event: &Event) -> serde_json::Value {
        FakePaddle::listed(event)
    }
    fn block(&self, prefix: &str, wrong: bool) -> (String, Vec<(String, String)>) {
        let key = if wrong { "pdl_sdbx_apikey_01wrong" } else { KEY };
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
                "pdl_ntfset_01test_secret".to_owned(),
            )],
            ..Receiving::default()
        }
    }
    fn page_size(&self) -> usize {
        200
    }
}
