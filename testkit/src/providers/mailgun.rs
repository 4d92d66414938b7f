//! Fake Mailgun: the Events API, `GET /v3/{domain}/events` and its paging URLs `GET /v3/{domain}/events/{token}`.
//!
//! Built from Mailgun's API reference (Redocly, from its OAS `mailgun.yaml`, which is not on GitHub):
//! https://documentation.mailgun.com/docs/mailgun/api-reference/send/mailgun/events/get-v3-domain_name-events, and
//! the legacy docs repository `mailgun/documentation` @ 047a03d161133f70ac0c1d74909de6ea1f5e7d33,
//! `source/api-events.rst` (query, paging, filter expressions, sample items) and `source/api-intro.rst` @
//! 04420ebb9dfc2a0d44e232aa7b3dadb79861cfad (Basic auth `api:<key>`, errors); rate-limit headers as the official
//! client `mailgun/mailgun-go` @ d7f2dd4369c9bb5ac8291b4851b89b3f0d534f7b `errors.go` reads them
//! (`X-RateLimit-Reset`, epoch seconds). What it follows:
//! - auth: `Authorization: Basic base64("api:<key>")`, else 401 with the plain-text body `Forbidden`; an unknown
//!   domain is a 404 `{"message":"Domain not found: …"}`;
//! - `begin`, `end` in epoch seconds (a fraction allowed); `end < begin` walks newest first; `ascending` (`yes` or
//!   `no`) must agree with them, else 400 `{"message":…}`; without `end` the direction is `ascending`'s (default
//!   `no`); `limit` defaults to 100, at most 300 (400 above); `event` is a filter expression of terms joined with
//!   `OR` (what this fake reads of the expression language; anything else is a 400 here, not in Mailgun);
//! - the answer `{"items":[…],"paging":{"next":URL,"previous":URL}}`, `next` and `previous` always given (even past
//!   the end, where `items` is empty), each a full URL whose token carries the query;
//! - 429 with `X-RateLimit-Limit`, `X-RateLimit-Remaining: 0`, `X-RateLimit-Reset` (the next second) and the body
//!   `Too Many Requests`; a 500 `{"message":"Internal Server Error"}` on a scheduled fault.
//!
//! Items are the webhook's `event-data` objects (same `id`, `timestamp`, `event`). The domain's log also holds an
//! `accepted` event before each message's event, of a type no webhook of this source is registered for: a listing
//! that forgets the `event` filter lists it and recovers events no webhook would send. Ids: an event's id is
//! `event-data.id:event-data.timestamp` (our scheme's), the timestamp with microseconds as Mailgun writes it
//! (`1529692199.626182`), its millisecond the event's `created_ms`.

use super::*;

const DOMAIN: &str = "mg.example.com";
const KEY: &str = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0";
const WRONG_KEY: &str = "key-00000000000000000000000000000000";
/// The events the domain's webhooks are registered for (the block's `event_types`).
const TYPES: [&str; 3] = ["delivered", "failed", "opened"];
const MAX_LIMIT: usize = 300;

pub struct FakeMailgun {
    api: Api,
}

impl FakeMailgun {
    // The shape every fake's constructor has (`fakes()` lists them as `Arc<dyn Fake>`).
    #[allow(clippy::new_ret_no_self)]
    pub fn new() -> Arc<dyn Fake> {
        Arc::new(FakeMailgun { api: Api::default() })
    }
}

/// One record of the domain's event log, as the fake lists it.
#[derive(Clone)]
struct Record {
    id: String,
    timestamp: String,
    event: String,
    created_ms: i64,
}

impl Record {
    /// The log record an event is, with the `accepted` record of its message a millisecond before it.
    fn of(event: &Event) -> [Record; 2] {
        let id = event
            .id
            .split_once(':')
            .map_or(event.id.as_str(), |(id, _)| id)
            .to_owned();
        let accepted_id = mailgun_id(mix(seed(&id) ^ 0xacce_97ed));
        let accepted_ms = event.created_ms - 1;
        [
            Record {
                timestamp: timestamp(event.created_ms, &id),
                id,
                event: event.event_type.clone(),
                created_ms: event.created_ms,
            },
            Record {
                timestamp: timestamp(accepted_ms, &accepted_id),
                id: accepted_id,
                event: "accepted".into(),
                created_ms: accepted_ms,
            },
        ]
    }

    /// The item's JSON text, its `timestamp` written as Mailgun writes it (a float with microseconds, which a JSON
    /// value would re-emit through `f64`).
    fn json(&self) -> String {
        let n = seed(&self.id);
        let recipient = format!("user{}@example.com", n % 10_000);
        let mut item = json!({
            "id": self.id,
            "event": self.event,
            "log-level": if self.event == "failed" { "error" } else { "info" },
            "recipient": recipient,
            "recipient-domain": "example.com",
            "envelope": {"transport": "smtp", "sender": format!("postmaster@{DOMAIN}"), "sending-ip": "198.51.100.7",
                         "targets": recipient},
            "message": {
                "headers": {"message-id": format!("{:016x}.{}@{DOMAIN}", n, n % 97), "from": format!("Shop <shop@{DOMAIN}>"),
                            "to": recipient, "subject": format!("Order {}", n % 100_000)},
                "attachments": [], "size": 1024 + n % 4096
            },
            "flags": {"is-routed": false, "is-authenticated": true, "is-system-test": false, "is-test-mode": false},
            "tags": [], "campaigns": [], "user-variables": {},
            "storage": {"url": format!("https://storage.eu.mailgun.net/v3/domains/{DOMAIN}/messages/{:x}", n),
                        "key": format!("{:x}", n)}
        });
        if self.event == "delivered" {
            item["delivery-status"] = json!({"code": 250, "message": "OK", "attempt-no": 1, "description": "",
                                             "tls": true, "certificate-verified": true});
        }
        let rest = item.to_string();
        format!("{{\"timestamp\":{},{}", self.timestamp, &rest[1..])
    }
}

/// `created_ms` as Mailgun's float seconds with microseconds, the microseconds below the millisecond drawn from the
/// event's id (deterministic; Mailgun's are the clock's).
fn timestamp(created_ms: i64, id: &str) -> String {
    format!(
        "{}.{:03}{:03}",
        created_ms.div_euclid(1000),
        created_ms.rem_euclid(1000),
        seed(id) % 1000
    )
}

/// A 64-bit mix (splitmix64), for ids and details drawn from a number.
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

/// 22 characters of URL-safe base64, as Mailgun's event ids (`W3X4JOhFT-OZidZGKKr9iA`).
fn mailgun_id(x: u64) -> String {
    let bytes: Vec<u8> = [x, mix(x)].iter().flat_map(|v| v.to_be_bytes()).collect();
    base64(
        &bytes,
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
        false,
    )
}

/// Base64 of `bytes` in `alphabet`, padded or not.
fn base64(bytes: &[u8], alphabet: &[u8; 64], pad: bool) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(alphabet[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
        if pad {
            out.extend(std::iter::repeat_n('=', 3 - chunk.len()));
        }
    }
    out
}

/// What a page URL's token carries: the query, and where the last page ended.
#[derive(Clone)]
struct PageQuery {
    /// Inclusive bounds in ms, the lower first.
    low: i64,
    high: i64,
    descending: bool,
    limit: usize,
    events: Option<Vec<String>>,
    /// The last record served: `(created_ms, id)`.
    after: Option<(i64, String)>,
}

impl PageQuery {
    /// Opaque to the client: hex of the query's JSON.
    fn token(&self) -> String {
        let value = json!({"low": self.low, "high": self.high, "descending": self.descending, "limit": self.limit,
                           "events": self.events, "after": self.after});
        value.to_string().bytes().map(|b| format!("{b:02x}")).collect()
    }
    fn from_token(token: &str) -> Option<PageQuery> {
        let bytes: Option<Vec<u8>> = (0..token.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(token.get(i..i + 2)?, 16).ok())
            .collect();
        let v: serde_json::Value = serde_json::from_slice(&bytes?).ok()?;
        let events = match &v["events"] {
            serde_json::Value::Null => None,
            e => Some(
                e.as_array()?
                    .iter()
                    .map(|t| t.as_str().map(str::to_owned))
                    .collect::<Option<_>>()?,
            ),
        };
        let after = match &v["after"] {
            serde_json::Value::Null => None,
            a => Some((a[0].as_i64()?, a[1].as_str()?.to_owned())),
        };
        Some(PageQuery {
            low: v["low"].as_i64()?,
            high: v["high"].as_i64()?,
            descending: v["descending"].as_bool()?,
            limit: usize::try_from(v["limit"].as_u64()?).ok()?,
            events,
            after,
        })
    }
}

fn message(status: StatusCode, text: String) -> Response {
    (status, Json(json!({ "message": text }))).into_response()
}

/// Epoch seconds (a fraction allowed) in ms.
fn epoch_ms(text: &str) -> Option<i64> {
    let secs: f64 = text.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| (secs * 1000.0).round() as i64)
}

/// The first page's query from the request's parameters, or the text of Mailgun's 400.
fn parse_query(q: &HashMap<String, String>) -> Result<PageQuery, String> {
    let bad = |what: &str| what.to_owned();
    let begin = match q.get("begin") {
        Some(b) => {
            epoch_ms(b).ok_or_else(|| bad("Invalid begin: must be epoch seconds or an RFC 2822 date"))?
        }
        None => now_ms(),
    };
    let end = match q.get("end") {
        Some(e) => {
            Some(epoch_ms(e).ok_or_else(|| bad("Invalid end: must be epoch seconds or an RFC 2822 date"))?)
        }
        None => None,
    };
    let ascending = match q.get("ascending").map(String::as_str) {
        None => None,
        Some("yes") => Some(true),
        Some("no") => Some(false),
        Some(_) => return Err(bad("Invalid ascending: must be yes or no")),
    };
    let descending = match (end, ascending) {
        (Some(end), Some(asc)) if (end < begin) == asc => {
            return Err(bad("Invalid range: begin and end disagree with ascending"))
        }
        (Some(end), _) => end < begin,
        (None, asc) => !asc.unwrap_or(false),
    };
    let (low, high) = match (end, descending) {
        (Some(end), true) => (end, begin),
        (Some(end), false) => (begin, end),
        (None, true) => (i64::MIN, begin),
        (None, false) => (begin, i64::MAX),
    };
    let limit = match q.get("limit") {
        Some(l) => match l.parse::<usize>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => return Err(bad("Invalid limit: must be between 1 and 300")),
        },
        None => 100,
    };
    let events = match q.get("event") {
        Some(expr) => {
            let terms: Vec<&str> = expr.split_whitespace().filter(|t| *t != "OR").collect();
            if terms.is_empty()
                || terms
                    .iter()
                    .any(|t| *t == "AND" || t.starts_with(['-', '"', '>', '<']))
            {
                return Err(bad("Invalid event filter (this fake reads terms joined with OR)"));
            }
            Some(terms.into_iter().map(str::to_owned).collect())
        }
        None => None,
    };
    Ok(PageQuery {
        low,
        high,
        descending,
        limit,
        events,
        after: None,
    })
}

impl FakeMailgun {
    /// The gate, the key and the domain, as every request meets them.
    fn check(&self, headers: &HeaderMap, domain: &str) -> Option<Response> {
        match self.api.gate() {
            Gate::Fail => {
                return Some(message(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Internal Server Error".into(),
                ))
            }
            Gate::RateLimited => {
                let reset = (now_ms() / 1000 + 1).to_string();
                return Some(
                    (
                        StatusCode::TOO_MANY_REQUESTS,
                        [
                            ("x-ratelimit-limit", "300".to_owned()),
                            ("x-ratelimit-remaining", "0".to_owned()),
                            ("x-ratelimit-reset", reset),
                        ],
                        "Too Many Requests",
                    )
                        .into_response(),
                );
            }
            Gate::Serve => {}
        }
        let want = format!("Basic {}", basic(KEY));
        if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(want.as_str()) {
            return Some((StatusCode::UNAUTHORIZED, "Forbidden").into_response());
        }
        if domain != DOMAIN {
            return Some(message(
                StatusCode::NOT_FOUND,
                format!("Domain not found: {domain}"),
            ));
        }
        None
    }

    /// One page of `query`, with the next and previous pages' URLs.
    fn page(&self, headers: &HeaderMap, query: PageQuery) -> Response {
        let mut records: Vec<Record> = self
            .api
            .events()
            .iter()
            .flat_map(Record::of)
            .filter(|r| query.low <= r.created_ms && r.created_ms <= query.high)
            .filter(|r| query.events.as_ref().is_none_or(|e| e.contains(&r.event)))
            .collect();
        let key = |r: &Record| (r.created_ms, r.id.clone());
        records.sort_by_key(key);
        if query.descending {
            records.reverse();
        }
        let start = match &query.after {
            None => 0,
            Some(after) => records
                .iter()
                .position(|r| {
                    if query.descending {
                        key(r) < *after
                    } else {
                        key(r) > *after
                    }
                })
                .unwrap_or(records.len()),
        };
        let page: Vec<&Record> = records[start..].iter().take(query.limit).collect();
        let host = headers
            .get("host")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("127.0.0.1");
        let url = |q: &PageQuery| format!("http://{host}/v3/{DOMAIN}/events/{}", q.token());
        let next = PageQuery {
            after: page.last().map(|r| key(r)).or(query.after.clone()),
            ..query.clone()
        };
        let first = PageQuery { after: None, ..query };
        let items: Vec<String> = page.iter().map(|r| r.json()).collect();
        let body = format!(
            "{{\"items\":[{}],\"paging\":{}}}",
            items.join(","),
            json!({"next": url(&next), "previous": url(&first)})
        );
        ([("content-type", "application/json")], body).into_response()
    }
}

/// Base64 (standard, padded) of `api:<key>`.
fn basic(key: &str) -> String {
    base64(
        format!("api:{key}").as_bytes(),
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
        true,
    )
}

async fn events(
    State(fake): State<Arc<FakeMailgun>>,
    Path(domain): Path<String>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Some(r) = fake.check(&headers, &domain) {
        return r;
    }
    match parse_query(&q) {
        Ok(query) => fake.page(&headers, query),
        Err(text) => message(StatusCode::BAD_REQUEST, text),
    }
}

async fn events_page(
    State(fake): State<Arc<FakeMailgun>>,
    Path((domain, token)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = fake.check(&headers, &domain) {
        return r;
    }
    match PageQuery::from_token(&token) {
        Some(query) => fake.page(&headers, query),
        None => message(StatusCode::BAD_REQUEST, "Invalid page token".into()),
    }
}

impl Fake for FakeMailgun {
    fn provider(&self) -> &'static str {
        "mailgun"
    }
    fn start(self: Arc<Self>) -> String {
        serve_now(
            Router::new()
                .route("/v3/{domain}/events", get(events))
                .route("/v3/{domain}/events/{token}", get(events_page))
                .with_state(self),
        )
    }
    fn api(&self) -> &Api {
        &self.api
    }
    /// `event-data.id` alone; [`Fake::event_id`] adds the timestamp.
    fn new_id(&self, n: usize) -> String {
        mailgun_id(mix(n as u64))
    }
    /// `event-data.id:event-data.timestamp`, as our scheme reads the webhook: the timestamp as a JSON number
    /// (`f64`) writes it again, so `1796180097.331800` is `1796180097.3318` in the id.
    fn event_id(&self, n: usize, created_ms: i64) -> String {
        let id = self.new_id(n);
        let secs: f64 = timestamp(created_ms, &id).parse().unwrap();
        format!("{id}:{}", serde_json::Number::from_f64(secs).unwrap())
    }
    fn event_type(&self) -> &'static str {
        TYPES[0]
    }
    /// `{"event-data": <the event>}`: the harness signs it with our scheme, which writes the `signature` object
    /// (`timestamp`, `token`, `signature`) into the body as Mailgun does.
    fn webhook(&self, event: &Event) -> Webhook {
        let [record, _] = Record::of(event);
        Webhook {
            body: format!("{{\"event-data\":{}}}", record.json()).into_bytes(),
            content_type: "application/json",
            headers: Vec::new(),
        }
    }
    /// `{"event-data": <the item as listed>}`: the webhook's shape without its `signature` object, which signs a
    /// timestamp and token chosen at delivery and which the Events API therefore cannot give.
    fn stored(&self, event: &Event) -> serde_json::Value {
        let [record, _] = Record::of(event);
        serde_json::from_str(&format!("{{\"event-data\":{}}}", record.json())).unwrap()
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
                if wrong { WRONG_KEY } else { KEY }.to_owned(),
            )],
        )
    }
    /// The webhook signing key (HTTP webhook signing key of the account).
    fn receiving(&self, prefix: &str) -> Receiving {
        Receiving {
            config: format!("secrets = [\"env:{prefix}_SIGNING_KEY\"]"),
            env: vec![(
                format!("{prefix}_SIGNING_KEY"),
                "5a3d1c9b0e7f4a2d8c6b1e0f9a8d7c6b".to_owned(),
            )],
            ..Receiving::default()
        }
    }
    fn page_size(&self) -> usize {
        MAX_LIMIT
    }
}
