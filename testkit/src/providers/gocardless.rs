//! Fake GoCardless: the events API as GoCardless's official generated client describes it (GoCardless publishes
//! no OpenAPI; repository `gocardless/gocardless-pro-go`, commit `553b873c5d31d0370a188dbcd02adbae1612042f`:
//! `event_service.go` for the routes, params and models, `gc.go` and `retries.go` for the error envelope and the
//! rate-limit headers, `testdata/events.json` and `testdata/webhook_request.json` for the shapes), and
//! https://developer.gocardless.com/api-reference#core-endpoints-events.
//! - `GET /events` and `GET /events/{id}` with `Authorization: Bearer <token>` and `GoCardless-Version:
//!   2015-07-06` (the client sets both on every request); a wrong token is a 401 in the error envelope
//!   `{"error":{"message","type":"invalid_api_usage","code":401,"documentation_url","request_id","errors":[…]}}`.
//! - Query: `created_at[gte]`, `[gt]`, `[lt]`, `[lte]` (RFC 3339), `limit` (at most 500, default 50), `after` (an
//!   event id: the next, older, page), `resource_type`, `action`. Newest first.
//! - Answer: `{"events":[…],"meta":{"cursors":{"before":…,"after":…},"limit":N},"linked":{}}`, `after` the last
//!   id while older events follow, else `null`; `GET /events/{id}` answers `{"events":{…}}`, or a 404
//!   `resource_not_found`.
//! - Too many requests: 429 `rate_limit_exceeded` with `RateLimit-Limit`, `RateLimit-Remaining: 0` and
//!   `RateLimit-Reset` as an HTTP date, the time the limit resets (`retries.go` sleeps until then; here at once, so
//!   a test waits about a second); a 500 is the envelope with `type: "gocardless"`.
//!
//! The webhook (https://developer.gocardless.com/getting-started/api/staying-up-to-date-with-webhooks) is a batch,
//! `{"events":[event…],"meta":{"webhook_id":"WB…"}}`: here one event per delivery. The receiver stores each
//! element alone, so [`Fake::stored`] is the event object, not the batch.

use super::*;

const TOKEN: &str = "sandbox_inbox-test-read-only-token";
const WRONG_TOKEN: &str = "sandbox_inbox-test-revoked-token";
const VERSION: &str = "2015-07-06";

pub struct FakeGocardless {
    api: Api,
}

impl FakeGocardless {
    #[allow(clippy::new_ret_no_self)]
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakeGocardless { api: Api::default() })
    }

    /// The event object, as the API lists it and a webhook's `events` holds it, rendered from the event alone.
    fn event(event: &Event) -> serde_json::Value {
        let tail = event.id.trim_start_matches("EV");
        let (resource, action) = event.event_type.split_once('.').unwrap();
        json!({
            "id": event.id,
            "created_at": rfc3339(event.created_ms),
            "resource_type": resource,
            "action": action,
            "links": {"payment": format!("PM{tail}"), "organisation": "OR000INBOX0001"},
            "details": {
                "origin": "gocardless",
                "cause": "payment_confirmed",
                "description": "Payment was confirmed as collected.",
            },
            "metadata": {},
        })
    }
}

/// GoCardless's error envelope (`gc.go` `APIError`).
fn error(status: StatusCode, kind: &str, reason: &str, message: &str) -> Response {
    let code = status.as_u16();
    let body = json!({"error": {
        "message": message,
        "type": kind,
        "code": code,
        "documentation_url": format!("https://developer.gocardless.com/api-reference#{kind}_{reason}"),
        "request_id": "00000000-inbox-fake-request",
        "errors": [{"reason": reason, "message": message}],
    }});
    (status, Json(body)).into_response()
}

/// An HTTP date (`Thu, 01 Jan 2026 00:00:00 GMT`) of epoch seconds.
fn http_date(secs: i64) -> String {
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][days.rem_euclid(7) as usize];
    let ymd = rfc3339_secs(days * 86_400_000);
    let (y, m, d) = (&ymd[0..4], &ymd[5..7], &ymd[8..10]);
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][m.parse::<usize>().unwrap() - 1];
    format!(
        "{weekday}, {d} {month} {y} {:02}:{:02}:{:02} GMT",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// The gate, the token and the version header, as every request meets them.
fn refused(fake: &FakeGocardless, headers: &HeaderMap) -> Option<Response> {
    match fake.api.gate() {
        Gate::Fail => {
            return Some(error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "gocardless",
                "internal_server_error",
                "Uh-oh! Something went wrong",
            ))
        }
        Gate::RateLimited => {
            let mut response = error(
                StatusCode::TOO_MANY_REQUESTS,
                "invalid_api_usage",
                "rate_limit_exceeded",
                "Rate limit exceeded",
            );
            let h = response.headers_mut();
            h.insert("ratelimit-limit", "1000".parse().unwrap());
            h.insert("ratelimit-remaining", "0".parse().unwrap());
            h.insert("ratelimit-reset", http_date(now_ms() / 1000).parse().unwrap());
            return Some(response);
        }
        Gate::Serve => {}
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if header("authorization") != Some(&format!("Bearer {TOKEN}")) {
        return Some(error(
            StatusCode::UNAUTHORIZED,
            "invalid_api_usage",
            "access_token_not_found",
            "Access token not found",
        ));
    }
    if header("gocardless-version") != Some(VERSION) {
        return Some(error(
            StatusCode::BAD_REQUEST,
            "invalid_api_usage",
            "version_not_found",
            "Version not found",
        ));
    }
    None
}

async fn list(
    State(fake): State<Arc<FakeGocardless>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Some(r) = refused(&fake, &headers) {
        return r;
    }
    let mut bounds = Vec::new();
    for op in ["gt", "gte", "lt", "lte"] {
        if let Some(v) = q.get(&format!("created_at[{op}]")) {
            match parse_rfc3339_ms(v) {
                Some(at) => bounds.push((op, at)),
                None => {
                    return error(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "validation_failed",
                        "invalid_type",
                        "created_at is invalid",
                    )
                }
            }
        }
    }
    let limit = match q.get("limit").map(|v| v.parse::<usize>()) {
        None => 50,
        Some(Ok(n)) if (1..=500).contains(&n) => n,
        Some(_) => {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "validation_failed",
                "invalid_type",
                "limit must be at most 500",
            )
        }
    };
    let within = |e: &Event| {
        bounds.iter().all(|&(op, at)| match op {
            "gt" => e.created_ms > at,
            "gte" => e.created_ms >= at,
            "lt" => e.created_ms < at,
            _ => e.created_ms <= at,
        })
    };
    let matching: Vec<Event> = fake
        .api
        .events()
        .into_iter()
        .filter(within)
        .filter(|e| {
            q.get("resource_type")
                .is_none_or(|r| e.event_type.starts_with(&format!("{r}.")))
        })
        .filter(|e| {
            q.get("action")
                .is_none_or(|a| e.event_type.ends_with(&format!(".{a}")))
        })
        .collect();
    let from = match q.get("after") {
        Some(after) => matching
            .iter()
            .position(|e| &e.id == after)
            .map_or(matching.len(), |i| i + 1),
        None => 0,
    };
    let page: Vec<&Event> = matching.iter().skip(from).take(limit).collect();
    let after = page
        .last()
        .filter(|_| from + page.len() < matching.len())
        .map(|e| e.id.clone());
    let before = page.first().filter(|_| from > 0).map(|e| e.id.clone());
    let events: Vec<_> = page.iter().map(|e| FakeGocardless::event(e)).collect();
    Json(json!({"events": events, "meta": {"cursors": {"before": before, "after": after}, "limit": limit}, "linked": {}}))
        .into_response()
}

async fn one(
    State(fake): State<Arc<FakeGocardless>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = refused(&fake, &headers) {
        return r;
    }
    match fake.api.find(&id) {
        Some(e) => Json(json!({"events": FakeGocardless::event(&e)})).into_response(),
        None => error(
            StatusCode::NOT_FOUND,
            "invalid_api_usage",
            "resource_not_found",
            "Resource not found",
        ),
    }
}

impl Fake for FakeGocardless {
    fn provider(&self) -> &'static str {
        "gocardless"
    }
    fn start(self: Arc<Self>) -> String {
        serve_now(
            Router::new()
                .route("/events", get(list))
                .route("/events/{id}", get(one))
                .with_state(self),
        )
    }
    fn api(&self) -> &Api {
        &self.api
    }
    /// `EV` and 12 characters.
    fn new_id(&self, n: usize) -> String {
        format!("EV{n:012}")
    }
    fn event_type(&self) -> &'static str {
        "payments.confirmed"
    }
    fn webhook(&self, event: &Event) -> Webhook {
        let tail = event.id.trim_start_matches("EV");
        let body =
            json!({"events": [FakeGocardless::event(event)], "meta": {"webhook_id": format!("WB{tail}")}});
        Webhook {
            body: serde_json::to_vec(&body).unwrap(),
            content_type: "application/json",
            headers: vec![],
        }
    }
    /// The batch's one element: the receiver stores each event of a delivery alone.
    fn stored(&self, event: &Event) -> serde_json::Value {
        FakeGocardless::event(event)
    }
    fn block(&self, prefix: &str, wrong: bool) -> (String, Vec<(String, String)>) {
        let var = format!("{prefix}_TOKEN");
        let token = if wrong { WRONG_TOKEN } else { TOKEN };
        (format!("token = \"env:{var}\""), vec![(var, token.to_owned())])
    }
    fn receiving(&self, prefix: &str) -> Receiving {
        let var = format!("{prefix}_WEBHOOK_SECRET");
        Receiving {
            config: format!("secrets = [\"env:{var}\"]"),
            env: vec![(var, "gc-inbox-test-webhook-endpoint-secret-0001".to_owned())],
            ..Receiving::default()
        }
    }
    fn page_size(&self) -> usize {
        500
    }
}

#[cfg(test)]
mod tests {
    use super::http_date;

    #[test]
    fn http_dates_are_written_as_rfc_9110_says() {
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(1_767_225_601), "Thu, 01 Jan 2026 00:00:01 GMT");
    }
}
