//! Fake Chargebee, from its published API description: repository `chargebee/openapi` (the v2 spec,
//! `spec/chargebee_api_v2_pc_v2_spec.yaml` at commit `06f6ff8a4dd98577961acb29bf1d2d0c41684748`: servers
//! `https://{site}.chargebee.com/api/v2`, tag `events`; the `GET /events` operation, Event object and error schemas
//! read in `spec/chargebee_api_v1_spec.json` at `c5273cae89b2ead4cedd3fa5daf37e45ebeedc45`), and the official SDK
//! generated from the v2 spec, `chargebee/chargebee-node` commit `31f906ad9293cf919d455f67f38ea622169067a8`
//! (`types/resources/Event.d.ts`: list parameters and answer; `src/RequestWrapper.ts`: auth, 429 `Retry-After`).
//! - `GET /api/v2/events`: HTTP Basic `api_key:` (else 401 `api_authentication_failed`), `limit` 1..100 (default 10;
//!   above 100 a 400 `param_wrong_value`), `offset` = the previous `next_offset`, `occurred_at[after]` /
//!   `[before]` (unix seconds, exclusive), `sort_by[asc]` / `sort_by[desc]` = `occurred_at` (default newest first);
//!   answers `{"list":[{"event":{…}}…],"next_offset":"[\"…\",\"…\"]"}`, `next_offset` only while more remain.
//! - `GET /api/v2/events/{id}`: `{"event":{…}}`, or 404 `resource_not_found`.
//! - Faults: 429 `api_request_limit_exceeded` with `Retry-After: 1`, 500 `internal_error`, in Chargebee's error
//!   shape (`message`, `type`, `api_error_code`, `http_status_code`).
//!
//! The webhook's body is the bare event (https://apidocs.chargebee.com/docs/api/events), sent with
//! `webhook_status: "scheduled"` and no `webhooks[]`; the API lists the same event with its status as it is now
//! (`failed`, for an event the webhook path lost), its endpoints' statuses and the failure's reason. What
//! reconciliation stores ([`Fake::stored`]) is the webhook's body without `webhook_status`: the provider drops the
//! fields the two disagree on (see `shared/src/reconcile/chargebee.rs`).

use base64::Engine;

use super::*;

const API_KEY: &str = "live_cdJ6sV9kbfNNcuJ0gAqF2W1nLtcuJFYI";

pub struct FakeChargebee {
    api: Api,
}

impl FakeChargebee {
    #[allow(clippy::new_ret_no_self)] // the `fakes()` list takes trait objects
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakeChargebee { api: Api::default() })
    }

    /// The event as both carry it, before what differs: a customer created in the admin console.
    fn event_json(e: &Event) -> serde_json::Value {
        let at = e.created_ms.div_euclid(1000);
        let customer = format!("cust_{}", &e.id["ev_".len().min(e.id.len())..]);
        json!({
            "id": e.id,
            "occurred_at": at,
            "source": "admin_console",
            "user": "ops@example.com",
            "object": "event",
            "api_version": "v2",
            "event_type": e.event_type,
            "content": {"customer": {
                "id": customer,
                "first_name": "Ada",
                "email": "ada@example.com",
                "auto_collection": "on",
                "net_term_days": 0,
                "allow_direct_debit": false,
                "created_at": at,
                "updated_at": at,
                "taxability": "taxable",
                "resource_version": e.created_ms,
                "deleted": false,
                "object": "customer",
                "card_status": "no_card",
                "promotional_credits": 0,
                "refundable_credits": 0,
                "excess_payments": 0,
                "unbilled_charges": 0,
                "preferred_currency_code": "USD"
            }}
        })
    }

    /// As the API lists it: its webhook failed.
    fn listed_json(e: &Event) -> serde_json::Value {
        let mut event = FakeChargebee::event_json(e);
        event["webhook_status"] = json!("failed");
        event["webhook_failure_reason"] = json!("{\"message\":\"Connection refused\"}");
        event["webhooks"] =
            json!([{"id": "whv2_AzqRMnTdHeeCl2wZ", "webhook_status": "failed", "object": "webhook"}]);
        event
    }
}

/// Chargebee's error body.
fn error(status: StatusCode, kind: &str, code: &str, message: &str) -> Response {
    (
        status,
        Json(
            json!({"message": message, "type": kind, "api_error_code": code, "error_code": code,
                    "error_msg": message, "http_status_code": status.as_u16()}),
        ),
    )
        .into_response()
}

/// The gate's fault, or a refused key, in Chargebee's shape.
fn refused(fake: &FakeChargebee, headers: &HeaderMap) -> Option<Response> {
    match fake.api.gate() {
        Gate::Serve => {}
        Gate::Fail => {
            return Some(error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "operation_failed",
                "internal_error",
                "Sorry, Something went wrong when trying to process the request.",
            ))
        }
        Gate::RateLimited => {
            let mut r = error(
                StatusCode::TOO_MANY_REQUESTS,
                "operation_failed",
                "api_request_limit_exceeded",
                "Sorry, access has been blocked temporarily due to request count exceeding acceptable limits.",
            );
            r.headers_mut().insert("retry-after", "1".parse().unwrap());
            return Some(r);
        }
    }
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{API_KEY}:"));
    (headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&format!("Basic {basic}"))).then(
        || {
            error(
                StatusCode::UNAUTHORIZED,
                "untyped",
                "api_authentication_failed",
                "Sorry, authentication failed. Invalid api key",
            )
        },
    )
}

async fn events(
    State(fake): State<Arc<FakeChargebee>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Some(r) = refused(&fake, &headers) {
        return r;
    }
    let wrong = |param: &str| {
        error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "param_wrong_value",
            &format!("{param} : invalid value"),
        )
    };
    let number = |k: &str| q.get(k).map(|v| v.parse::<i64>().map_err(|_| k.to_owned()));
    let (after, before, limit) = match (
        number("occurred_at[after]").transpose(),
        number("occurred_at[before]").transpose(),
        number("limit").transpose(),
    ) {
        (Ok(a), Ok(b), Ok(l)) => (a.unwrap_or(i64::MIN), b.unwrap_or(i64::MAX), l.unwrap_or(10)),
        (Err(k), _, _) | (_, Err(k), _) | (_, _, Err(k)) => return wrong(&k),
    };
    if !(1..=100).contains(&limit) {
        return wrong("limit");
    }
    let offset = match q.get("offset") {
        None => 0,
        Some(o) => match serde_json::from_str::<Vec<String>>(o)
            .ok()
            .and_then(|v| v.get(1)?.parse().ok())
        {
            Some(n) => n,
            None => return wrong("offset"),
        },
    };
    let mut matching: Vec<Event> = fake
        .api
        .events()
        .into_iter()
        .filter(|e| after < e.created_ms.div_euclid(1000) && e.created_ms.div_euclid(1000) < before)
        .collect();
    match (q.get("sort_by[asc]"), q.get("sort_by[desc]")) {
        (Some(f), None) if f == "occurred_at" => matching.reverse(),
        (None, Some(f)) if f == "occurred_at" => {}
        (None, None) => {}
        _ => return wrong("sort_by"),
    }
    let limit = limit as usize;
    let page: Vec<&Event> = matching.iter().skip(offset).take(limit).collect();
    let mut answer = json!({"list": page.iter().map(|e| json!({"event": FakeChargebee::listed_json(e)})).collect::<Vec<_>>()});
    if let (true, Some(last)) = (offset + limit < matching.len(), page.last()) {
        answer["next_offset"] = json!(format!("[\"{}\",\"{}\"]", last.created_ms, offset + limit));
    }
    Json(answer).into_response()
}

async fn event(
    State(fake): State<Arc<FakeChargebee>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = refused(&fake, &headers) {
        return r;
    }
    match fake.api.find(&id) {
        Some(e) => Json(json!({"event": FakeChargebee::listed_json(&e)})).into_response(),
        None => error(
            StatusCode::NOT_FOUND,
            "invalid_request",
            "resource_not_found",
            &format!("Sorry, we couldn't find that resource {id}"),
        ),
    }
}

impl Fake for FakeChargebee {
    fn provider(&self) -> &'static str {
        "chargebee"
    }
    /// The site's API root, as `api_base` is written (`https://{site}.chargebee.com/api/v2`).
    fn start(self: Arc<Self>) -> String {
        let base = serve_now(
            Router::new()
                .route("/api/v2/events", get(events))
                .route("/api/v2/events/{id}", get(event))
                .with_state(self),
        );
        format!("{base}/api/v2")
    }
    fn api(&self) -> &Api {
        &self.api
    }
    fn new_id(&self, n: usize) -> String {
        format!("ev_AzZTlmUVuxqH7{n:07}")
    }
    fn event_type(&self) -> &'static str {
        "customer_created"
    }
    fn webhook(&self, event: &Event) -> Webhook {
        let mut body = FakeChargebee::event_json(event);
        body["webhook_status"] = json!("scheduled");
        Webhook {
            body: serde_json::to_vec(&body).unwrap(),
            content_type: "application/json",
            headers: Vec::new(),
        }
    }
    /// The webhook's body less `webhook_status`, which the listing holds as it is now, not as it was sent.
    fn stored(&self, event: &Event) -> serde_json::Value {
        FakeChargebee::event_json(event)
    }
    fn block(&self, prefix: &str, wrong: bool) -> (String, Vec<(String, String)>) {
        let key = if wrong {
            "live_wrongKeyOfAnotherSite0000000000"
        } else {
            API_KEY
        };
        (
            format!("api_key = \"env:{prefix}_API_KEY\"\nsite = \"acme\""),
            vec![(format!("{prefix}_API_KEY"), key.into())],
        )
    }
    /// The webhook URL's Basic credentials (`user:password`) are the token.
    fn receiving(&self, prefix: &str) -> Receiving {
        Receiving {
            config: format!("secrets = [\"env:{prefix}_SECRET\"]"),
            env: vec![(format!("{prefix}_SECRET"), "inbox:chargebee-test-password".into())],
            ..Receiving::default()
        }
    }
    fn page_size(&self) -> usize {
        100
    }
}
