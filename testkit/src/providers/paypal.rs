//! Fake PayPal, from its published OpenAPI description: repository `paypal/paypal-rest-api-specifications`, commit
//! `ec4d8f36a6ab0abcc3865e1072aaddc85ea14d5c`, `openapi/notifications_webhooks_v1.json` ("Webhooks Management"
//! 1.11), operations `webhooks-events.list` and `webhooks-events.get`, schemas `event`, `link_description` and
//! `error`; the token from https://developer.paypal.com/api/rest/authentication/ (the spec's `Oauth2`
//! client-credentials flow, `tokenUrl: /v1/oauth2/token`).
//! - `POST /v1/oauth2/token`: HTTP Basic `client_id:client_secret`, form body `grant_type=client_credentials`;
//!   answers `{"scope","access_token","token_type":"Bearer","app_id","expires_in","nonce"}`, a wrong pair 401
//!   `{"error":"invalid_client","error_description":"Client Authentication failed"}`.
//! - `GET /v1/notifications/webhooks-events`: `Authorization: Bearer <token>` (else 401 `AUTHENTICATION_FAILURE`),
//!   `start_time` / `end_time` (RFC 3339, both inclusive), `page_size` (default 10; the spec gives no maximum, so
//!   none is applied), newest first; answers `{"events":[event…],"count":n,"links":[…]}` with a `rel: "next"` link
//!   while more remain. The next link's query is undocumented: this fake carries `move_to=next&offset=N` (as seen in
//!   public examples of PayPal's answers).
//! - `GET /v1/notifications/webhooks-events/{id}`: one event, or 404 `RESOURCE_NOT_FOUND`.
//! - Faults: 429 `RATE_LIMIT_REACHED` (PayPal documents no rate-limit headers, so none: the run backs off on its
//!   own), 500 `INTERNAL_SERVER_ERROR`, in the spec's `error` shape (`name`, `message`, `debug_id`, `links`).
//!
//! The webhook's body is the same `event` object (https://developer.paypal.com/api/rest/webhooks/rest/), so what
//! reconciliation stores is the webhook's body. Its headers besides the signature: `paypal-transmission-id`,
//! `paypal-auth-algo` and `paypal-cert-url` (the certificate, `tests/data/keys/signer.pem`, served from
//! api-m.paypal.com by the harness). `paypal-transmission-time` and `paypal-transmission-sig` are the signer's:
//! the time is the moment of sending, which it signs with the id.

use axum::body::Bytes;
use axum::routing::post;
use base64::Engine;

use super::*;

const CLIENT_ID: &str = "AeEj2GcBlyhUxnvHQkvpamxSpEqy0wmvVDmF4p1YaXKeRAl1OjHGZHTZ";
const CLIENT_SECRET: &str = "EGnHDxD_qRPdaLdZz8iCr8N7_MzF-YHPTkjs6NKYQvQSBngp4PTTVWkPZRbL";
const TOKEN: &str = "A21AAJ8lYj9vUUIjyUbd4KSj8dB1Yy2Z0v3nWq2F2bTX-test-token";
const CERT_PATH: &str = "/v1/notifications/certs/CERT-360caa42-fca2a594-a5cafa77";
const SIGNER_KEY: &str = include_str!("../../../tests/data/keys/signer.key");
const SIGNER_CERT: &str = include_str!("../../../tests/data/keys/signer.pem");

pub struct FakePaypal {
    api: Api,
}

impl FakePaypal {
    #[allow(clippy::new_ret_no_self)] // the `fakes()` list takes trait objects
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakePaypal { api: Api::default() })
    }

    /// The `event` object, as the list, the detail and the webhook carry it.
    fn event_json(e: &Event) -> serde_json::Value {
        let at = rfc3339(e.created_ms);
        let capture = format!("{:017X}", hash(&e.id));
        let cents = 100 + hash(&e.id) % 90_000;
        let amount = format!("{}.{:02}", cents / 100, cents % 100);
        let host = "https://api.paypal.com";
        json!({
            "id": e.id,
            "event_version": "1.0",
            "create_time": at,
            "resource_type": "capture",
            "resource_version": "2.0",
            "event_type": e.event_type,
            "summary": format!("Payment completed for $ {amount} USD"),
            "resource": {
                "id": capture,
                "status": "COMPLETED",
                "amount": {"currency_code": "USD", "value": amount},
                "final_capture": true,
                "create_time": at,
                "update_time": at,
                "links": [
                    {"href": format!("{host}/v2/payments/captures/{capture}"), "rel": "self", "method": "GET"},
                    {"href": format!("{host}/v2/payments/captures/{capture}/refund"), "rel": "refund", "method": "POST"}
                ]
            },
            "links": [
                {"href": format!("{host}/v1/notifications/webhooks-events/{}", e.id), "rel": "self", "method": "GET"},
                {"href": format!("{host}/v1/notifications/webhooks-events/{}/resend", e.id), "rel": "resend", "method": "POST"}
            ]
        })
    }
}

/// FNV-1a, for values derived from an event's id (deterministic, unlike std's hasher).
fn hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The spec's `error` body.
fn error(status: StatusCode, name: &str, message: &str) -> Response {
    (
        status,
        Json(
            json!({"name": name, "message": message, "debug_id": "f3e2a1b0c9d8e",
                    "information_link": "https://developer.paypal.com/api/rest/reference/orders/v2/errors/",
                    "details": [], "links": []}),
        ),
    )
        .into_response()
}

/// A fault the gate decided, in PayPal's shape.
fn fault(gate: Gate) -> Option<Response> {
    match gate {
        Gate::Serve => None,
        Gate::Fail => Some(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "INTERNAL_SERVER_ERROR",
            "An internal server error occurred.",
        )),
        Gate::RateLimited => Some(error(
            StatusCode::TOO_MANY_REQUESTS,
            "RATE_LIMIT_REACHED",
            "Too many requests. Blocked due to rate limiting.",
        )),
    }
}

fn bearer_refused(headers: &HeaderMap) -> Option<Response> {
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok());
    (auth != Some(&format!("Bearer {TOKEN}"))).then(|| {
        error(
            StatusCode::UNAUTHORIZED,
            "AUTHENTICATION_FAILURE",
            "Authentication failed due to missing authorization header, or invalid authentication credentials.",
        )
    })
}

async fn token(State(fake): State<Arc<FakePaypal>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(r) = fault(fake.api.gate()) {
        return r;
    }
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{CLIENT_ID}:{CLIENT_SECRET}"));
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&format!("Basic {basic}")) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "invalid_client", "error_description": "Client Authentication failed"})),
        )
            .into_response();
    }
    if !String::from_utf8_lossy(&body)
        .split('&')
        .any(|p| p == "grant_type=client_credentials")
    {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "unsupported_grant_type", "error_description": "Grant Type is NULL"})),
        )
            .into_response();
    }
    Json(json!({
        "scope": "https://uri.paypal.com/services/applications/webhooks",
        "access_token": TOKEN,
        "token_type": "Bearer",
        "app_id": "APP-80W284485P519543T",
        "expires_in": 32_400,
        "nonce": "2026-12-02T06:00:00ZFzvwCfA3nm0WQNSWBqTH8Zz4oVs4nFEYKrzHr_4mV0I"
    }))
    .into_response()
}

async fn events(
    State(fake): State<Arc<FakePaypal>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Some(r) = fault(fake.api.gate()).or_else(|| bearer_refused(&headers)) {
        return r;
    }
    let time = |k: &'static str| q.get(k).map(move |v| parse_rfc3339_ms(v).ok_or(k));
    let (start, end) = match (time("start_time").transpose(), time("end_time").transpose()) {
        (Ok(s), Ok(e)) => (s.unwrap_or(i64::MIN), e.unwrap_or(i64::MAX)),
        (Err(k), _) | (_, Err(k)) => {
            return error(
                StatusCode::BAD_REQUEST,
                "INVALID_REQUEST",
                &format!("{k} is not a valid date-time"),
            )
        }
    };
    let number = |k: &str, default: usize| q.get(k).map_or(Some(default), |v| v.parse().ok());
    let (Some(size), Some(offset)) = (number("page_size", 10), number("offset", 0)) else {
        return error(
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
            "page_size or offset is not a number",
        );
    };
    let size = size.max(1);
    let matching: Vec<Event> = fake
        .api
        .events()
        .into_iter()
        .filter(|e| start <= e.created_ms && e.created_ms <= end)
        .collect();
    let page: Vec<serde_json::Value> = matching
        .iter()
        .skip(offset)
        .take(size)
        .map(FakePaypal::event_json)
        .collect();
    let host = headers
        .get("host")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("localhost");
    let encode = |v: &str| v.replace('%', "%25").replace(':', "%3A").replace('+', "%2B");
    let mut links = Vec::new();
    if offset + size < matching.len() {
        let mut query = vec![format!("page_size={size}")];
        for k in ["start_time", "end_time"] {
            if let Some(v) = q.get(k) {
                query.push(format!("{k}={}", encode(v)));
            }
        }
        query.push(format!("move_to=next&offset={}", offset + size));
        links.push(
            json!({"href": format!("http://{host}/v1/notifications/webhooks-events?{}", query.join("&")),
                          "rel": "next", "method": "GET"}),
        );
    }
    Json(json!({"events": page, "count": page.len(), "links": links})).into_response()
}

async fn event(State(fake): State<Arc<FakePaypal>>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    if let Some(r) = fault(fake.api.gate()).or_else(|| bearer_refused(&headers)) {
        return r;
    }
    match fake.api.find(&id) {
        Some(e) => Json(FakePaypal::event_json(&e)).into_response(),
        None => error(
            StatusCode::NOT_FOUND,
            "RESOURCE_NOT_FOUND",
            "The specified resource does not exist.",
        ),
    }
}

impl Fake for FakePaypal {
    fn provider(&self) -> &'static str {
        "paypal"
    }
    fn start(self: Arc<Self>) -> String {
        serve_now(
            Router::new()
                .route("/v1/oauth2/token", post(token))
                .route("/v1/notifications/webhooks-events", get(events))
                .route("/v1/notifications/webhooks-events/{id}", get(event))
                .with_state(self),
        )
    }
    fn api(&self) -> &Api {
        &self.api
    }
    /// As PayPal writes them: `WH-` and two groups of 17 upper-case letters and digits.
    fn new_id(&self, n: usize) -> String {
        format!("WH-7YX49823S2290830K-{n:017}")
    }
    fn event_type(&self) -> &'static str {
        "PAYMENT.CAPTURE.COMPLETED"
    }
    fn webhook(&self, event: &Event) -> Webhook {
        let h = hash(&event.id);
        let transmission = format!(
            "{:08x}-{:04x}-11ef-{:04x}-{:012x}",
            h >> 32,
            (h >> 16) & 0xFFFF,
            h & 0xFFFF,
            event.created_ms
        );
        Webhook {
            body: serde_json::to_vec(&FakePaypal::event_json(event)).unwrap(),
            content_type: "application/json",
            headers: vec![
                ("paypal-transmission-id".into(), transmission),
                ("paypal-auth-algo".into(), "SHA256withRSA".into()),
                (
                    "paypal-cert-url".into(),
                    format!("https://api-m.paypal.com{CERT_PATH}"),
                ),
            ],
        }
    }
    fn block(&self, prefix: &str, wrong: bool) -> (String, Vec<(String, String)>) {
        let secret = if wrong {
            "EBxW-wrong-secret-of-another-app"
        } else {
            CLIENT_SECRET
        };
        (
            format!("client_id = \"env:{prefix}_CLIENT_ID\"\nclient_secret = \"env:{prefix}_CLIENT_SECRET\""),
            vec![
                (format!("{prefix}_CLIENT_ID"), CLIENT_ID.into()),
                (format!("{prefix}_CLIENT_SECRET"), secret.into()),
            ],
        )
    }
    /// The webhook's id (PayPal's app settings show it) is the secret; the certificate comes from PayPal's host.
    fn receiving(&self, prefix: &str) -> Receiving {
        Receiving {
            config: format!("secrets = [\"env:{prefix}_WEBHOOK_ID\"]"),
            env: vec![(format!("{prefix}_WEBHOOK_ID"), "8PT597110X687430LKGECATA".into())],
            private_key: Some((
                SIGNER_KEY.to_owned(),
                Some(format!("https://api-m.paypal.com{CERT_PATH}")),
            )),
            key_host: Some(KeyHost {
                host: "api-m.paypal.com",
                path: CERT_PATH.to_owned(),
                body: SIGNER_CERT.as_bytes().to_vec(),
            }),
        }
    }
    /// What the provider asks (`page_size=100`); PayPal states no maximum.
    fn page_size(&self) -> usize {
        100
    }
}
