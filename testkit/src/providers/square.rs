//! Fake Square, from its published OpenAPI description: repository `square/connect-api-specification`, commit
//! `5733f6624e9a5b930a8426f0e02a6bf7e35c6c0f`, `api.json`, operation `SearchEvents` (`POST /v2/events`), schemas
//! `SearchEventsRequest`, `SearchEventsFilter`, `SearchEventsSort`, `TimeRange`, `SearchEventsResponse`, `Event`,
//! `EventData`, `EventMetadata`, `Error`; errors from https://developer.squareup.com/docs/build-basics/handling-errors.
//! - `Authorization: Bearer <personal access token>`, else 401 `{"errors":[{"category":"AUTHENTICATION_ERROR",
//!   "code":"UNAUTHORIZED",…}]}`.
//! - Body: `limit` 1..100 (default 100; above is a 400 `INVALID_VALUE`), `cursor` (valid only with the query it came
//!   from: another query is a 400 `INVALID_CURSOR`), `query.filter.created_at` `{start_at, end_at}` (here start
//!   inclusive, end exclusive: the spec leaves it to the endpoint and SearchEvents does not say), `event_types`,
//!   `query.sort.order` `ASC` | `DESC` (default here `ASC`; unstated).
//! - Answer: `{"events":[…],"metadata":[{"event_id","api_version"}…],"cursor"}`, the cursor only while more remain.
//! - Faults: 429 `RATE_LIMITED` / `RATE_LIMIT_ERROR` (Square documents no rate-limit headers, so none: the run backs
//!   off on its own), 500 `INTERNAL_SERVER_ERROR` / `API_ERROR`, both in the `errors[]` shape.
//!
//! The webhook's body is the same `Event` object (https://developer.squareup.com/docs/webhooks/overview), so what
//! reconciliation stores is the webhook's body. Its headers besides the signature: `square-environment` and
//! `square-initial-delivery-timestamp`.

use axum::body::Bytes;
use axum::routing::post;
use base64::Engine;

use super::*;

const TOKEN: &str = "EAAAEOuLQObrVwJvCvoio-test-personal-access-token";
const API_VERSION: &str = "2025-08-20";

pub struct FakeSquare {
    api: Api,
}

impl FakeSquare {
    #[allow(clippy::new_ret_no_self)] // the `fakes()` list takes trait objects
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakeSquare { api: Api::default() })
    }

    /// The `Event` object, as the search and the webhook carry it: a payment of the seller's one location.
    fn event_json(e: &Event) -> serde_json::Value {
        let at = rfc3339(e.created_ms);
        let h = hash(&e.id);
        let payment = format!("bP9mAsEMYPUGjjGNaNO5{:09X}", h % 0xF_FFFF_FFFF);
        let amount = 100 + h % 90_000;
        json!({
            "merchant_id": "6SSW7HV8K2ST5",
            "location_id": "L88917AVBK2S5",
            "type": e.event_type,
            "event_id": e.id,
            "created_at": at,
            "data": {
                "type": "payment",
                "id": payment,
                "object": {"payment": {
                    "id": payment,
                    "created_at": at,
                    "updated_at": at,
                    "amount_money": {"amount": amount, "currency": "USD"},
                    "total_money": {"amount": amount, "currency": "USD"},
                    "status": "COMPLETED",
                    "source_type": "CARD",
                    "location_id": "L88917AVBK2S5",
                    "order_id": format!("{payment}ORD"),
                    "version": 3
                }}
            }
        })
    }
}

/// FNV-1a, for values derived from an event's id (deterministic, unlike std's hasher).
fn hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Square's error body: `errors[]` of `{category, code, detail, field?}`.
fn error(status: StatusCode, category: &str, code: &str, detail: &str) -> Response {
    (
        status,
        Json(json!({"errors": [{"category": category, "code": code, "detail": detail}]})),
    )
        .into_response()
}

async fn search(State(fake): State<Arc<FakeSquare>>, headers: HeaderMap, body: Bytes) -> Response {
    match fake.api.gate() {
        Gate::Serve => {}
        Gate::Fail => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "API_ERROR",
                "INTERNAL_SERVER_ERROR",
                "An internal error has occurred, and the API was unable to service your request.",
            )
        }
        Gate::RateLimited => {
            return error(
                StatusCode::TOO_MANY_REQUESTS,
                "RATE_LIMIT_ERROR",
                "RATE_LIMITED",
                "This request was rate limited. Please retry later.",
            )
        }
    }
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&format!("Bearer {TOKEN}")) {
        return error(
            StatusCode::UNAUTHORIZED,
            "AUTHENTICATION_ERROR",
            "UNAUTHORIZED",
            "This request could not be authorized.",
        );
    }
    let invalid =
        |code: &str, detail: &str| error(StatusCode::BAD_REQUEST, "INVALID_REQUEST_ERROR", code, detail);
    let Ok(request) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return invalid("INVALID_REQUEST_ERROR", "The request body is not valid JSON.");
    };
    let limit = request.get("limit").map_or(Some(100), serde_json::Value::as_u64);
    let limit = match limit {
        Some(l @ 1..=100) => l as usize,
        _ => return invalid("INVALID_VALUE", "`limit` must be between 1 and 100."),
    };
    let query = request.get("query").cloned().unwrap_or(serde_json::Value::Null);
    let query_hash = hash(&query.to_string());
    let offset = match request.get("cursor").and_then(serde_json::Value::as_str) {
        None => 0,
        Some(cursor) => {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(cursor)
                .ok()
                .and_then(|b| String::from_utf8(b).ok());
            let parsed = decoded
                .as_deref()
                .and_then(|d| d.split_once('|'))
                .and_then(|(o, h)| Some((o.parse::<usize>().ok()?, h.parse::<u64>().ok()?)));
            match parsed {
                Some((offset, h)) if h == query_hash => offset,
                _ => return invalid("INVALID_CURSOR", "The cursor is not valid for this query."),
            }
        }
    };
    let filter = &query["filter"];
    let time = |k: &str| filter["created_at"][k].as_str().map(parse_rfc3339_ms);
    let (start, end) = match (time("start_at"), time("end_at")) {
        (Some(None), _) | (_, Some(None)) => return invalid("INVALID_TIME", "created_at is not RFC 3339."),
        (s, e) => (s.flatten().unwrap_or(i64::MIN), e.flatten().unwrap_or(i64::MAX)),
    };
    let types: Option<Vec<&str>> = filter["event_types"]
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect());
    let mut matching: Vec<Event> = fake
        .api
        .events()
        .into_iter()
        .filter(|e| start <= e.created_ms && e.created_ms < end)
        .filter(|e| types.as_ref().is_none_or(|t| t.contains(&e.event_type.as_str())))
        .collect();
    match query["sort"]["order"].as_str() {
        None | Some("ASC") => matching.reverse(),
        Some("DESC") => {}
        Some(_) => return invalid("INVALID_ENUM_VALUE", "`sort.order` must be ASC or DESC."),
    }
    let page: Vec<&Event> = matching.iter().skip(offset).take(limit).collect();
    let mut answer = json!({
        "events": page.iter().map(|e| FakeSquare::event_json(e)).collect::<Vec<_>>(),
        "metadata": page.iter().map(|e| json!({"event_id": e.id, "api_version": API_VERSION})).collect::<Vec<_>>(),
    });
    if offset + limit < matching.len() {
        let cursor = format!("{}|{query_hash}", offset + limit);
        answer["cursor"] = json!(base64::engine::general_purpose::STANDARD.encode(cursor));
    }
    Json(answer).into_response()
}

impl Fake for FakeSquare {
    fn provider(&self) -> &'static str {
        "square"
    }
    fn start(self: Arc<Self>) -> String {
        serve_now(Router::new().route("/v2/events", post(search)).with_state(self))
    }
    fn api(&self) -> &Api {
        &self.api
    }
    /// A UUID, as Square writes `event_id`.
    fn new_id(&self, n: usize) -> String {
        format!("73ecd468-0aba-424f-b862-{n:012x}")
    }
    fn event_type(&self) -> &'static str {
        "payment.updated"
    }
    fn webhook(&self, event: &Event) -> Webhook {
        Webhook {
            body: serde_json::to_vec(&FakeSquare::event_json(event)).unwrap(),
            content_type: "application/json",
            headers: vec![
                ("square-environment".into(), "Production".into()),
                (
                    "square-initial-delivery-timestamp".into(),
                    rfc3339(event.created_ms),
                ),
            ],
        }
    }
    fn block(&self, prefix: &str, wrong: bool) -> (String, Vec<(String, String)>) {
        let token = if wrong {
            "EAAAEOuLQ-revoked-or-oauth-token"
        } else {
            TOKEN
        };
        (
            format!("token = \"env:{prefix}_TOKEN\""),
            vec![(format!("{prefix}_TOKEN"), token.into())],
        )
    }
    /// The subscription's signature key, and the notification URL as registered (Square signs it).
    fn receiving(&self, prefix: &str) -> Receiving {
        Receiving {
            config: format!(
                "secrets = [\"env:{prefix}_SIGNATURE_KEY\"]\nurl = \"https://hooks.example.com/webhooks/square\""
            ),
            env: vec![(format!("{prefix}_SIGNATURE_KEY"), "asdf1234-test-signature-key".into())],
            ..Receiving::default()
        }
    }
    fn page_size(&self) -> usize {
        100
    }
}
