//! Fake Polar: `GET /v1/webhooks/deliveries`, after Polar's OpenAPI and server (`polarsource/polar` commit
//! `c6c3645e639ee8eeaa05aa0835cf8e39e330382f`: `docs/openapi/2026-10.openapi.json` operationId
//! `webhooks:list_webhook_deliveries` and schemas `ListResource_WebhookDelivery_`, `WebhookDelivery`, `WebhookEvent`,
//! `Pagination`; `server/polar/webhook/service.py` `list_deliveries`; `server/polar/webhook/tasks.py`;
//! `server/polar/kit/pagination.py`; `docs/api-reference/2026-10/introduction.mdx` "Pagination", "Rate Limits"):
//! - auth `Authorization: Bearer <token>`; else 401 `{"error":"invalid_token","error_description":…}` with
//!   `WWW-Authenticate` (Authlib's `InvalidTokenError`, `server/polar/oauth2/exception_handlers.py`);
//! - query `endpoint_id` (an endpoint the token cannot see lists nothing), `start_timestamp` / `end_timestamp`
//!   (delivery `created_at` strictly after / before), `succeeded`, `query` (a substring of the delivery's id, its
//!   event's id or its HTTP code), `event_type`, `page` (from 1) and `limit` (default 10, at most 100, larger ones
//!   cut to 100); deliveries newest first by `created_at`; a `page` or `limit` below 1 is a 422;
//! - answer `{"items":[delivery…],"pagination":{"total_count","max_page"}}`, a delivery
//!   `{"created_at","modified_at","id","succeeded","http_code","response","webhook_event":{"created_at",
//!   "modified_at","id","last_http_code","succeeded","skipped","payload","type","is_archived"}}`, `payload` being
//!   the body string POSTed;
//! - rate limit: 429 with `Retry-After` (seconds) and no body (asgi-ratelimit's blocked answer); a 500 is
//!   `{"error":"InternalServerError","detail":"Internal Server Error"}` (`polar_exception_handler`).
//!
//! Deliveries are derived from each event: an attempt a second after it, and for every third event a failed one
//! first (a 503), then the successful retry half a minute later. The webhook is the payload with
//! `webhook-id: <event id>` (`tasks.py` signs `str(event.id)`), so `stored` is the webhook body.

use super::*;

const TOKEN: &str = "polar_oat_good";
const ENDPOINT: &str = "3f1d2c4b-5a69-4e7f-8a9b-0c1d2e3f4a5b";

pub struct FakePolar {
    api: Api,
}

/// Pydantic's datetimes: microseconds and `Z`.
fn at(ms: i64) -> String {
    rfc3339(ms).replace('Z', "000Z")
}

/// One attempt to deliver an event.
struct Delivery {
    id: String,
    created_ms: i64,
    http_code: u16,
    event: Event,
}

impl FakePolar {
    #[allow(clippy::new_ret_no_self)] // The shape every fake has (`fakes()`).
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakePolar { api: Api::default() })
    }

    fn suffix(event: &Event) -> &str {
        &event.id[event.id.len().saturating_sub(12)..]
    }

    /// The body Polar POSTs for the event (`BaseWebhookPayload`: `type`, `timestamp`, `data`).
    fn payload(event: &Event) -> String {
        let body = json!({
            "type": event.event_type,
            "timestamp": at(event.created_ms),
            "data": {"id": format!("0b7e2c1a-0000-4000-8000-{}", Self::suffix(event)), "status": "paid",
                     "created_at": at(event.created_ms), "total_amount": 1000, "currency": "usd"},
        });
        serde_json::to_string(&body).unwrap()
    }

    /// Every attempt to deliver every event, newest first.
    fn deliveries(&self) -> Vec<Delivery> {
        let mut all = Vec::new();
        for event in self.api.events() {
            let suffix = Self::suffix(&event).to_owned();
            let mut attempts = vec![(event.created_ms + 1_000, 200)];
            if (event.created_ms / 1000) % 3 == 0 {
                attempts = vec![(event.created_ms + 1_000, 503), (event.created_ms + 31_000, 200)];
            }
            for (n, (created_ms, http_code)) in attempts.into_iter().enumerate() {
                all.push(Delivery {
                    id: format!("de11e7e0-000{n}-4000-8000-{suffix}"),
                    created_ms,
                    http_code,
                    event: event.clone(),
                });
            }
        }
        all.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then(b.id.cmp(&a.id)));
        all
    }

    fn delivery_json(d: &Delivery, all: &[Delivery]) -> serde_json::Value {
        let last = all
            .iter()
            .filter(|o| o.event.id == d.event.id)
            .max_by_key(|o| o.created_ms)
            .map_or(d.http_code, |o| o.http_code);
        json!({
            "created_at": at(d.created_ms),
            "modified_at": null,
            "id": d.id,
            "succeeded": d.http_code < 300,
            "http_code": d.http_code,
            "response": if d.http_code < 300 { "" } else { "Service Unavailable" },
            "webhook_event": {
                "created_at": at(d.event.created_ms),
                "modified_at": at(d.created_ms),
                "id": d.event.id,
                "last_http_code": last,
                "succeeded": last < 300,
                "skipped": false,
                "payload": Self::payload(&d.event),
                "type": d.event.event_type,
                "is_archived": false,
            },
        })
    }
}

fn unprocessable(field: &str) -> Response {
    let detail =
        json!([{"type": "greater_than", "loc": ["query", field], "msg": "Input should be greater than 0"}]);
    (
        StatusCode::UNPROCESSABLE_ENTITY,
        Json(json!({"error": "RequestValidationError", "detail": detail})),
    )
        .into_response()
}

async fn deliveries(
    State(fake): State<Arc<FakePolar>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    match fake.api.gate() {
        Gate::Fail => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"error": "InternalServerError", "detail": "Internal Server Error"})),
            )
                .into_response()
        }
        Gate::RateLimited => return (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")]).into_response(),
        Gate::Serve => {}
    }
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&format!("Bearer {TOKEN}")) {
        let description =
            "The access token provided is expired, revoked, malformed, or invalid for other reasons.";
        let challenge =
            format!("Bearer realm=\"polar\", error=\"invalid_token\", error_description=\"{description}\"");
        return (
            StatusCode::UNAUTHORIZED,
            [("www-authenticate", challenge)],
            Json(json!({"error": "invalid_token", "error_description": description})),
        )
            .into_response();
    }
    // Each parameter read, or the name of the one that does not parse.
    let number = |k: &'static str, default: u64| match q.get(k).map(|v| v.parse::<u64>()) {
        None => Ok(default),
        Some(Ok(n)) if n >= 1 => Ok(n),
        Some(_) => Err(k),
    };
    let (page, limit) = match (number("page", 1), number("limit", 10)) {
        (Ok(p), Ok(l)) => (p, l.min(100)),
        (Err(k), _) | (_, Err(k)) => return unprocessable(k),
    };
    let time = |k: &'static str| match q.get(k) {
        None => Ok(None),
        Some(v) => parse_rfc3339_ms(v).map(Some).ok_or(k),
    };
    let (start, end) = match (time("start_timestamp"), time("end_timestamp")) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(k), _) | (_, Err(k)) => return bad_request(k),
    };
    let all = fake.deliveries();
    let matching: Vec<&Delivery> = all
        .iter()
        .filter(|_| q.get("endpoint_id").is_none_or(|e| e == ENDPOINT))
        .filter(|d| start.is_none_or(|s| d.created_ms > s) && end.is_none_or(|e| d.created_ms < e))
        .filter(|d| {
            q.get("succeeded")
                .is_none_or(|s| *s == (d.http_code < 300).to_string())
        })
        .filter(|d| q.get("event_type").is_none_or(|t| *t == d.event.event_type))
        .filter(|d| {
            q.get("query").is_none_or(|s| {
                d.id.contains(s.as_str())
                    || d.event.id.contains(s.as_str())
                    || d.http_code.to_string().contains(s.as_str())
            })
        })
        .collect();
    let total = matching.len() as u64;
    let offset = usize::try_from(limit * (page - 1)).unwrap_or(usize::MAX);
    let items: Vec<_> = matching
        .iter()
        .skip(offset)
        .take(limit as usize)
        .map(|d| FakePolar::delivery_json(d, &all))
        .collect();
    Json(json!({"items": items, "pagination": {"total_count": total, "max_page": total.div_ceil(limit)}}))
        .into_response()
}

impl Fake for FakePolar {
    fn provider(&self) -> &'static str {
        "polar"
    }
    fn start(self: Arc<Self>) -> String {
        serve_now(
            Router::new()
                .route("/v1/webhooks/deliveries", get(deliveries))
                .with_state(self),
        )
    }
    fn api(&self) -> &Api {
        &self.api
    }
    /// A UUID, as Polar writes a webhook event's id.
    fn new_id(&self, n: usize) -> String {
        format!("6c0e6a52-0000-4000-8000-{n:012}")
    }
    fn event_type(&self) -> &'static str {
        "order.paid"
    }
    fn webhook(&self, event: &Event) -> Webhook {
        Webhook {
            body: FakePolar::payload(event).into_bytes(),
            content_type: "application/json",
            headers: vec![("webhook-id".to_owned(), event.id.clone())],
        }
    }
    fn block(&self, prefix: &str, wrong: bool) -> (String, Vec<(String, String)>) {
        let token = if wrong { "polar_oat_wrong" } else { TOKEN };
        (
            format!("token = \"env:{prefix}_TOKEN\"\nhook = \"{ENDPOINT}\""),
            vec![(format!("{prefix}_TOKEN"), token.to_owned())],
        )
    }
    fn receiving(&self, prefix: &str) -> Receiving {
        Receiving {
            config: format!("secrets = [\"env:{prefix}_WEBHOOK_SECRET\"]"),
            env: vec![(
                format!("{prefix}_WEBHOOK_SECRET"),
                "polar_whs_test_secret".to_owned(),
            )],
            ..Receiving::default()
        }
    }
    fn page_size(&self) -> usize {
        100
    }
}
