//! Fake Okta: the System Log, `GET /api/v1/logs`.
//!
//! Built from Okta's OpenAPI description, `okta/okta-management-openapi-spec` @
//! fdda229e82940cf5af4611ad673ca6a27974e31b, `dist/current/management-minimal.yaml` (path `/api/v1/logs`,
//! `listLogEvents`; schema `LogEvent`; responses `ErrorInvalidTokenProvided`, `ErrorTooManyRequests429`), and its
//! companion guide https://developer.okta.com/docs/reference/system-log-query/ (`okta/okta-developer-docs`,
//! `packages/@okta/vuepress-site/docs/reference/system-log-query/index.md`: request kinds, `Link` headers, errors,
//! retention); rate-limit headers per https://developer.okta.com/docs/reference/rl-best-practices/. What it follows:
//! - auth: `Authorization: SSWS <token>`, else 401 `{"errorCode":"E0000011","errorSummary":"Invalid token
//!   provided",…}`;
//! - `since`, `until` (ISO 8601, on `published`), `filter` (SCIM; this fake reads `eventType eq "…"` and
//!   `uuid eq "…"` joined with `or`, and answers 400 `E0000053` to anything else), `limit` (0..=1000, default 100,
//!   else 400 `E0000001`), `sortOrder` (`ASCENDING`, the default, or `DESCENDING`), `after` (the cursor its own
//!   `next` links carry). With `since` and `until` a request is *bounded*: ordered by `published`, its last page
//!   without a `next` link. Without `until` and ascending it is *polling*: `until` is now and a `next` link is
//!   always given, even on an empty page. `since` defaults to 7 days before `until`; older than 180 days is a 400
//!   `E0000053`; events older than 90 days are not returned (retention);
//! - the answer: a bare JSON array of log events, `link: <…>; rel="self"` always and `link: <…>; rel="next"` as
//!   separate headers;
//! - 429 `E0000047` with `X-Rate-Limit-Limit`, `X-Rate-Limit-Remaining: 0`, `X-Rate-Limit-Reset` (UTC epoch
//!   seconds: the next second); a 500 `E0000009` (a query that took too long) on a scheduled fault.
//!
//! The org's log holds more than the hook's types: beside each event, a `user.authentication.sso` of another uuid
//! a millisecond earlier, which the event hook (subscribed to `user.lifecycle.*` only) never delivers; a listing
//! that forgets the type filter lists it. The webhook is the event hook's envelope
//! (https://developer.okta.com/docs/concepts/event-hooks/), one log event per delivery here (Okta batches those
//! close in time); its item carries `"insertionTimestamp": null` as the sample deliveries do, which the API's
//! object lacks.

use super::*;

const DOMAIN: &str = "acme.okta.com";
const TOKEN: &str = "00Qh3Vv9aXyC2bF5mK8pR1tW4zD7gJ0nL6sE3uH9iO";
const WRONG_TOKEN: &str = "00AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
/// The event hook's subscribed types (the block's `event_types`).
const TYPES: [&str; 2] = ["user.lifecycle.create", "user.lifecycle.deactivate"];
const HOOK: &str = "who8tiyv6ctKbRp2z1d7";
const MAX_LIMIT: usize = 1000;
const DAY_MS: i64 = 86_400_000;

pub struct FakeOkta {
    api: Api,
}

impl FakeOkta {
    // The shape every fake's constructor has (`fakes()` lists them as `Arc<dyn Fake>`).
    #[allow(clippy::new_ret_no_self)]
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakeOkta { api: Api::default() })
    }
}

/// A 64-bit mix (splitmix64), for details drawn from a number.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn seed(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// A version-1-shaped UUID as Okta's log event uuids are (`dc9fd3c0-598c-11ef-8478-2b7584bf8d5a`).
fn uuid(x: u64, node: u64) -> String {
    format!(
        "{:08x}-{:04x}-11ef-{:04x}-{:012x}",
        x >> 32,
        (x >> 16) & 0xffff,
        0x8000 | (x & 0x3fff),
        node & 0xffff_ffff_ffff
    )
}

/// A log event as the System Log writes it (the fields of the OAS's `LogEvent`).
fn log_event(id: &str, event_type: &str, created_ms: i64) -> serde_json::Value {
    let n = seed(id);
    let user = format!("00u{:017x}", mix(n) >> 4);
    let (message, legacy, target_type) = match event_type {
        "user.lifecycle.create" => (
            "Create Okta user",
            "core.user.config.user_creation.success",
            "User",
        ),
        "user.lifecycle.deactivate" => (
            "Deactivate Okta user",
            "core.user.config.user_deactivated",
            "User",
        ),
        _ => ("User single sign on to app", "app.auth.sso", "AppInstance"),
    };
    json!({
        "actor": {"id": "00uttidj01jqL21aM1d6", "type": "User", "alternateId": "admin@acme.example",
                  "displayName": "Acme Admin", "detailEntry": null},
        "client": {"userAgent": {"rawUserAgent": "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7)", "os": "Mac OS X",
                                 "browser": "CHROME"},
                   "zone": "null", "device": "Computer", "id": null, "ipAddress": "198.51.100.23",
                   "geographicalContext": {"city": "Berlin", "state": "Land Berlin", "country": "Germany",
                                           "postalCode": "10117", "geolocation": {"lat": 52.52, "lon": 13.405}}},
        "device": null,
        "authenticationContext": {"authenticationProvider": null, "credentialProvider": null, "credentialType": null,
                                  "issuer": null, "interface": null, "authenticationStep": 0,
                                  "externalSessionId": format!("102{:022x}", mix(n ^ 1) >> 8)},
        "displayMessage": message,
        "eventType": event_type,
        "outcome": {"result": "SUCCESS", "reason": null},
        "published": rfc3339(created_ms),
        "securityContext": {"asNumber": 64496, "asOrg": "example transit", "isp": "example isp", "domain": null,
                            "isProxy": false},
        "severity": "INFO",
        "debugContext": {"debugData": {"requestId": format!("Z{:x}AAAB{}", mix(n ^ 2) >> 12, n % 100),
                                       "requestUri": "/api/v1/users", "url": "/api/v1/users?activate=true"}},
        "legacyEventType": legacy,
        "transaction": {"type": "WEB", "id": format!("Z{:x}", mix(n ^ 3) >> 8), "detail": {}},
        "uuid": id,
        "version": "0",
        "request": {"ipChain": [{"ip": "198.51.100.23", "geographicalContext": {"city": "Berlin",
                                 "country": "Germany"}, "version": "V4", "source": null}]},
        "target": [{"id": user, "type": target_type, "alternateId": format!("user{}@acme.example", n % 10_000),
                    "displayName": format!("User {}", n % 10_000), "detailEntry": null}]
    })
}

/// The log records an event is: itself, and a sign-on of another uuid a millisecond before it.
fn records(event: &Event) -> [(i64, String, String); 2] {
    let sso = uuid(
        mix(seed(&event.id) ^ 0x55_0000),
        seed(&event.id) ^ 0x9000_0000_0000,
    );
    [
        (event.created_ms, event.id.clone(), event.event_type.clone()),
        (event.created_ms - 1, sso, "user.authentication.sso".into()),
    ]
}

/// An Okta error body (schema `Error`).
fn error(status: StatusCode, code: &str, summary: &str) -> Response {
    let body = json!({"errorCode": code, "errorSummary": summary, "errorLink": code,
                      "errorId": format!("oae{:019x}", mix(now_ms() as u64) >> 4), "errorCauses": []});
    (status, Json(body)).into_response()
}

fn invalid(summary: &str) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        "E0000001",
        &format!("Api validation failed: {summary}"),
    )
}

/// Percent-encoding of a query value (everything but the unreserved characters).
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The SCIM filters this fake reads: `attr eq "value"` terms joined with `or`, on `eventType` or `uuid`.
fn parse_filter(filter: &str) -> Option<Vec<(&str, &str)>> {
    filter
        .split(" or ")
        .map(|term| {
            let (attr, value) = term.trim().split_once(" eq ")?;
            let value = value.trim().strip_prefix('"')?.strip_suffix('"')?;
            (matches!(attr.trim(), "eventType" | "uuid") && !value.contains('"'))
                .then(|| (attr.trim(), value))
        })
        .collect()
}

async fn logs(
    State(fake): State<Arc<FakeOkta>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    match fake.api.gate() {
        Gate::Fail => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "E0000009",
                "Your last request took too long to complete. This is likely due to a load issue on our side. \
                 We've logged this and will work to address it. Please either simplify your query or wait a few \
                 minutes and try again.",
            )
        }
        Gate::RateLimited => {
            let mut r = error(
                StatusCode::TOO_MANY_REQUESTS,
                "E0000047",
                "API call exceeded rate limit due to too many requests.",
            );
            let h = r.headers_mut();
            h.insert("x-rate-limit-limit", "120".parse().unwrap());
            h.insert("x-rate-limit-remaining", "0".parse().unwrap());
            h.insert("x-rate-limit-reset", (now_ms() / 1000 + 1).to_string().parse().unwrap());
            return r;
        }
        Gate::Serve => {}
    }
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(format!("SSWS {TOKEN}").as_str()) {
        return error(StatusCode::UNAUTHORIZED, "E0000011", "Invalid token provided");
    }
    let now = now_ms();
    let time = |name: &str| -> Result<Option<i64>, String> {
        match q.get(name).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) => parse_rfc3339_ms(v).map(Some).ok_or_else(|| {
                format!(
                    "'{name}': The date format in your query is not recognized. Please enter dates using ISO8601 \
                     string format."
                )
            }),
        }
    };
    let (since, until) = match (time("since"), time("until")) {
        (Ok(s), Ok(u)) => (s, u),
        (Err(text), _) | (_, Err(text)) => return invalid(&text),
    };
    let ascending = match q.get("sortOrder").map(String::as_str) {
        None | Some("ASCENDING") => true,
        Some("DESCENDING") => false,
        Some(_) => return invalid("'sortOrder': must be ASCENDING or DESCENDING"),
    };
    let limit = match q.get("limit").map(|l| l.parse::<usize>()) {
        None => 100,
        Some(Ok(n)) if n <= MAX_LIMIT => n,
        Some(_) => return invalid("'limit': must be between 0 and 1000"),
    };
    let filter = match q.get("filter") {
        None => None,
        Some(f) => match parse_filter(f) {
            Some(terms) => Some(terms),
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "E0000053",
                    &format!("Invalid filter '{f}'"),
                )
            }
        },
    };
    let polling = until.is_none() && ascending;
    let until_ms = until.unwrap_or(now);
    let since_ms = since.unwrap_or(until_ms - 7 * DAY_MS);
    if since_ms < now - 180 * DAY_MS {
        return error(
            StatusCode::BAD_REQUEST,
            "E0000053",
            "Invalid parameter: The since parameter is over 180 days prior to the current day.",
        );
    }
    let kept_from = since_ms.max(now - 90 * DAY_MS);
    let mut all: Vec<(i64, String, String)> = fake
        .api
        .events()
        .iter()
        .flat_map(records)
        .filter(|(at, _, _)| kept_from <= *at && *at < until_ms)
        .filter(|(_, id, ty)| {
            filter.as_ref().is_none_or(|terms| {
                terms
                    .iter()
                    .any(|(attr, v)| if *attr == "uuid" { id == v } else { ty == v })
            })
        })
        .collect();
    all.sort();
    if !ascending {
        all.reverse();
    }
    let start = match q.get("after") {
        None => 0,
        Some(after) => match all.iter().position(|(_, id, _)| id == after) {
            Some(i) => i + 1,
            None => return invalid("'after': not a cursor of this query"),
        },
    };
    let page: Vec<&(i64, String, String)> = all[start..].iter().take(limit).collect();
    let more = start + page.len() < all.len();
    let body: Vec<serde_json::Value> = page.iter().map(|(at, id, ty)| log_event(id, ty, *at)).collect();

    let host = headers
        .get("host")
        .and_then(|v| v.to_str().ok())
        .unwrap_or(DOMAIN);
    let link = |after: Option<&str>| {
        let mut pairs: Vec<(&str, String)> = q
            .iter()
            .filter(|(k, _)| k.as_str() != "after")
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        pairs.sort();
        if let Some(a) = after {
            pairs.push(("after", a.to_owned()));
        }
        let query: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect();
        format!("http://{host}/api/v1/logs?{}", query.join("&"))
    };
    let mut response = Json(body).into_response();
    let self_link = format!("<{}>; rel=\"self\"", link(q.get("after").map(String::as_str)));
    response.headers_mut().append("link", self_link.parse().unwrap());
    if more || polling {
        let after = page
            .last()
            .map(|(_, id, _)| id.as_str())
            .or(q.get("after").map(String::as_str));
        let next = format!("<{}>; rel=\"next\"", link(after));
        response.headers_mut().append("link", next.parse().unwrap());
    }
    response
}

impl Fake for FakeOkta {
    fn provider(&self) -> &'static str {
        "okta"
    }
    fn start(self: Arc<Self>) -> String {
        serve_now(Router::new().route("/api/v1/logs", get(logs)).with_state(self))
    }
    fn api(&self) -> &Api {
        &self.api
    }
    fn new_id(&self, n: usize) -> String {
        uuid(mix(n as u64), n as u64)
    }
    fn event_type(&self) -> &'static str {
        TYPES[0]
    }
    /// The event hook's envelope around the log event; the harness adds the `Authorization` value the hook sends.
    fn webhook(&self, event: &Event) -> Webhook {
        let mut item = log_event(&event.id, &event.event_type, event.created_ms);
        item["insertionTimestamp"] = serde_json::Value::Null;
        let body = json!({
            "eventType": "com.okta.event_hook",
            "eventTypeVersion": "1.0",
            "cloudEventsVersion": "0.1",
            "source": format!("https://{DOMAIN}/api/v1/eventHooks/{HOOK}"),
            "eventId": uuid(mix(seed(&event.id) ^ 0xde11_7e27), seed(&event.id)),
            "data": {"events": [item]},
            "eventTime": rfc3339(event.created_ms + 2_000),
            "contentType": "application/json"
        });
        Webhook {
            body: body.to_string().into_bytes(),
            content_type: "application/json",
            headers: Vec::new(),
        }
    }
    /// The log event alone, as the System Log lists it: our `okta` scheme stores each item of `data.events` as its
    /// own event, so the envelope is never stored; and the API's object lacks the hook item's
    /// `insertionTimestamp`.
    fn stored(&self, event: &Event) -> serde_json::Value {
        log_event(&event.id, &event.event_type, event.created_ms)
    }
    fn block(&self, prefix: &str, wrong: bool) -> (String, Vec<(String, String)>) {
        let types: Vec<String> = TYPES.iter().map(|t| format!("{t:?}")).collect();
        (
            format!(
                "api_key = \"env:{prefix}_API_KEY\"\ndomain = \"{DOMAIN}\"\nevent_types = [{}]",
                types.join(", ")
            ),
            vec![(
                format!("{prefix}_API_KEY"),
                if wrong { WRONG_TOKEN } else { TOKEN }.to_owned(),
            )],
        )
    }
    /// The event hook's `Authorization` value (its `authScheme` key).
    fn receiving(&self, prefix: &str) -> Receiving {
        Receiving {
            config: format!("secrets = [\"env:{prefix}_HOOK_AUTH\"]"),
            env: vec![(
                format!("{prefix}_HOOK_AUTH"),
                "okta-hook-7c1f9e2a4b6d8e0f".to_owned(),
            )],
            ..Receiving::default()
        }
    }
    fn page_size(&self) -> usize {
        MAX_LIMIT
    }
}
