//! Mailgun: the Events API, `GET /v3/{domain}/events` (Basic auth, user `api`, password the API key), newest first:
//! `begin` = the window's end and `end` = its start, in epoch seconds (`end` below `begin` is a descending
//! traversal, and `ascending=no` must agree with it), `limit=300` (the OAS maximum), `event` = the event types the
//! domain's webhooks are registered for joined with ` OR ` (the API lists every event of the domain, `accepted`
//! included, which no webhook sends). The next page is the full URL `paging.next`, always given, even past the end:
//! the walk stops at the first empty `items`.
//! - https://documentation.mailgun.com/docs/mailgun/api-reference/send/mailgun/events/get-v3-domain_name-events
//!   (the OAS marks the endpoint deprecated in favour of the Logs API, with no shutdown date)
//! - https://documentation.mailgun.com/docs/mailgun/user-manual/events/ (paging: "keep requesting the next page
//!   until an empty page is returned"; `mailgun/documentation` `source/api-events.rst` @ 047a03d: "If end is less
//!   than begin, then traversal is performed in the timestamp descending order")
//!
//! Retention depends on the plan: "for one day for free accounts and up to 30 days for paid accounts" (user
//! manual), "at least 3 days" (OAS): the config's 3 days is the floor of the paid plans.
//!
//! Credential: an RBAC API key with the Analyst role (reads Events, writes nothing;
//! https://documentation.mailgun.com/docs/mailgun/user-manual/mg_security); a Domain Sending Key cannot read events.
//!
//! The API's item is the webhook's `event-data` unwrapped (the same object: `id`, `timestamp`, `event`, …). What is
//! stored is `{"event-data": <the item's bytes as listed>}`: the webhook's shape without its `signature` object,
//! which covers only a timestamp and a token chosen at delivery, so no API can give it (the event is reconciled, not
//! verified). The item's bytes are kept as sent (the timestamp is a float of microseconds, `1529692199.626182`,
//! which a round trip through a JSON value could rewrite). The id, `event-data.id:event-data.timestamp`, and the
//! type are read from the stored body by our `mailgun` scheme itself, so they are what it reads from the webhook
//! (it writes the timestamp as its `f64` prints: `1796180097.331800` is `1796180097.3318` in the id).
//!
//! There is no endpoint for one event: an event an earlier run could not store is found again by listing the two
//! seconds around its timestamp (with the same type filter) and matching its id.

use async_trait::async_trait;
use bytes::Bytes;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::api::{json_headers, send, url, Refusals};
use super::{api_client, json, Fetched, Listed, Page, Provider, ProviderError, Window};
use crate::schemes::request::{Identified, Request};
use crate::schemes::Scheme;

/// The most events a page holds (the OAS's maximum for `limit`).
const PAGE: &str = "300";
/// The most pages a search for one event reads (two seconds of one domain's events of the registered types).
const FETCH_PAGES: usize = 20;

const REFUSALS: Refusals = Refusals {
    unauthorized:
        "Mailgun refused the API key (is it the domain's region: api.mailgun.net or api.eu.mailgun.net?)",
    forbidden: "the API key's role may not read events (the Analyst role can; a Domain Sending Key cannot)",
    missing: "no such domain in this account and region",
};

#[derive(Debug)]
pub struct Mailgun {
    client: reqwest::Client,
    events_url: reqwest::Url,
    /// The API root, to check that a `paging.next` URL stays on it before the key is sent there.
    origin: String,
    /// `delivered OR failed`: the registered types as one filter expression.
    event_filter: String,
    api_key: SecretString,
    scheme: Scheme,
}

/// A page of `GET /v3/{domain}/events`: the items kept as their bytes.
#[derive(Deserialize)]
struct Events {
    items: Vec<Box<RawValue>>,
    #[serde(default)]
    paging: Paging,
}

#[derive(Deserialize, Default)]
struct Paging {
    next: Option<String>,
}

/// The one field of an item read here beside what the scheme reads: its time, as written.
#[derive(Deserialize)]
struct Stamp<'a> {
    #[serde(borrow)]
    timestamp: Option<&'a RawValue>,
}

impl Mailgun {
    /// `domain`: the sending domain whose events are listed; `event_types`: the events its webhooks are registered
    /// for; `api_key`: a key that can read the domain's events.
    pub fn new(
        api_base: reqwest::Url,
        domain: &str,
        event_types: &[String],
        api_key: String,
    ) -> Result<Mailgun, String> {
        Ok(Mailgun {
            client: api_client()?,
            events_url: url(&api_base, &format!("v3/{domain}/events"))?,
            origin: api_base.origin().ascii_serialization(),
            event_filter: event_types.join(" OR "),
            api_key: SecretString::from(api_key),
            scheme: Scheme::named("mailgun").ok_or("the mailgun scheme is missing")?,
        })
    }

    /// The first page's URL of a descending walk from `begin` down to `end` (epoch seconds).
    fn query(&self, begin: i64, end: i64) -> reqwest::Url {
        let mut url = self.events_url.clone();
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("begin", &begin.to_string())
                .append_pair("end", &end.to_string())
                .append_pair("ascending", "no")
                .append_pair("limit", PAGE);
            if !self.event_filter.is_empty() {
                q.append_pair("event", &self.event_filter);
            }
        }
        url
    }

    /// One page: `cursor` is a `paging.next` URL, else the first page of `begin`..`end`.
    async fn page(
        &self,
        cursor: Option<&str>,
        begin: i64,
        end: i64,
    ) -> Result<(Vec<Listed>, Option<String>), ProviderError> {
        let url = match cursor {
            Some(next) if next.starts_with(&format!("{}/", self.origin)) => next.to_owned(),
            Some(_) => {
                return Err(ProviderError::Failed(
                    "GET /v3/{domain}/events: the next page's URL leaves the API's origin".into(),
                ))
            }
            None => self.query(begin, end).to_string(),
        };
        let what = "GET /v3/{domain}/events";
        let request = self
            .client
            .get(url)
            .basic_auth("api", Some(self.api_key.expose_secret()));
        let events: Events = json(send(request, what, &REFUSALS).await?, what).await?;
        let items = events
            .items
            .iter()
            .map(|raw| self.listed(raw))
            .collect::<Result<Vec<_>, _>>()?;
        // `paging.next` is given even past the end: an empty page is the end.
        let next = if items.is_empty() {
            None
        } else {
            events.paging.next
        };
        Ok((items, next))
    }

    /// An item as stored (`{"event-data": item}`), with the id and type our scheme reads from that body.
    fn listed(&self, item: &RawValue) -> Result<Listed, ProviderError> {
        let what = "GET /v3/{domain}/events";
        let payload = wrap(item);
        let (id, event_type) = identify(&self.scheme, &payload)
            .map_err(|e| ProviderError::Failed(format!("{what}: an event without its id: {e}")))?;
        let stamp: Stamp = serde_json::from_str(item.get())
            .map_err(|e| ProviderError::Failed(format!("{what}: an event does not parse: {e}")))?;
        let created_ms = stamp
            .timestamp
            .and_then(|t| timestamp_ms(t.get()))
            .ok_or_else(|| ProviderError::Failed(format!("{what}: event {id} has no valid timestamp")))?;
        Ok(Listed {
            handle: id.clone(),
            id,
            event_type,
            created_ms,
            payload: Some(Bytes::from(payload)),
            headers: json_headers(),
        })
    }
}

/// `{"event-data": item}`, the item's bytes untouched.
fn wrap(item: &RawValue) -> Vec<u8> {
    format!("{{\"event-data\":{}}}", item.get()).into_bytes()
}

/// The id and type `scheme` finds in a webhook body, as the receiver would.
fn identify(scheme: &Scheme, body: &[u8]) -> Result<(String, Option<String>), String> {
    let (uri, headers) = (http::Uri::from_static("/"), http::HeaderMap::new());
    match scheme.identify_request(&Request::post(&uri, &headers, body)) {
        Ok(Identified::One(identity)) => Ok((identity.event_id, identity.event_type)),
        Ok(Identified::Batch(_)) => Err("read as a batch".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// UTC milliseconds of a Mailgun timestamp as written: epoch seconds with a fraction (`1529692199.626182`), read
/// from the text (no `f64` rounding), or a string of the same; an exponent form is read as a float.
fn timestamp_ms(text: &str) -> Option<i64> {
    let text = text.trim().trim_matches('"');
    if text.contains(['e', 'E']) {
        let secs: f64 = text.parse().ok()?;
        return secs.is_finite().then(|| (secs * 1000.0).floor() as i64);
    }
    let (secs, frac) = text.split_once('.').unwrap_or((text, ""));
    if secs.is_empty()
        || !secs.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let millis: String = frac.chars().chain("000".chars()).take(3).collect();
    secs.parse::<i64>()
        .ok()?
        .checked_mul(1000)?
        .checked_add(millis.parse::<i64>().ok()?)
}

/// Whole seconds covering `[from_ms, to_ms)`: `begin` (the later end) rounded up, `end` rounded down. The run drops
/// what falls outside the window.
fn seconds(window: Window) -> (i64, i64) {
    let begin = window.to_ms.div_euclid(1000) + i64::from(window.to_ms.rem_euclid(1000) != 0);
    (begin, window.from_ms.div_euclid(1000))
}

#[async_trait]
impl Provider for Mailgun {
    async fn list(&self, window: Window, cursor: Option<&str>) -> Result<Page, ProviderError> {
        let (begin, end) = seconds(window);
        let (items, next) = self.page(cursor, begin, end).await?;
        Ok(Page { items, next })
    }

    /// No endpoint gives one event: the two seconds around its timestamp are listed and searched for its id.
    async fn fetch(&self, item: &Listed) -> Result<Fetched, ProviderError> {
        let at = item.created_ms.div_euclid(1000);
        let mut cursor: Option<String> = None;
        for _ in 0..FETCH_PAGES {
            let (items, next) = self.page(cursor.as_deref(), at + 2, at - 1).await?;
            if let Some(found) = items.into_iter().find(|l| l.id == item.id) {
                return Ok(Fetched {
                    payload: found.payload.unwrap_or_default(),
                    event_type: found.event_type,
                    headers: found.headers,
                });
            }
            match next {
                Some(n) => cursor = Some(n),
                None => break,
            }
        }
        Err(ProviderError::Failed(format!(
            "event {} is no longer among Mailgun's events (kept 1 to 30 days by plan), or was never of the \
             registered types",
            item.id
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mailgun() -> Mailgun {
        Mailgun::new(
            reqwest::Url::parse("https://api.mailgun.net").unwrap(),
            "mg.example.com",
            &["delivered".into(), "failed".into()],
            "key-secret".into(),
        )
        .unwrap()
    }

    /// A webhook body as `testkit`'s fake Mailgun renders it (before the harness signs it).
    const WEBHOOK: &str = r#"{"event-data":{"timestamp":1529692199.626182,"event":"delivered","id":"W3X4JOhFT-OZidZGKKr9iA","log-level":"info","recipient":"alice@example.com"}}"#;

    #[test]
    fn the_query_walks_newest_first_with_the_registered_types() {
        let (begin, end) = seconds(Window {
            from_ms: 1_000_500,
            to_ms: 2_000_001,
        });
        assert_eq!((begin, end), (2001, 1000));
        let url = mailgun().query(begin, end);
        assert_eq!(
            url.as_str(),
            "https://api.mailgun.net/v3/mg.example.com/events?begin=2001&end=1000&ascending=no&limit=300&event=delivered+OR+failed"
        );
    }

    #[test]
    fn an_item_is_stored_in_the_webhooks_shape_with_the_schemes_id() {
        let item = r#"{"timestamp":1529692199.626182,"event":"delivered","id":"W3X4JOhFT-OZidZGKKr9iA","log-level":"info","recipient":"alice@example.com"}"#;
        let raw: Box<RawValue> = serde_json::from_str(item).unwrap();
        let listed = mailgun().listed(&raw).unwrap();
        // The id the receiver finds in the webhook, from the scheme itself.
        let (webhook_id, webhook_type) =
            identify(&Scheme::named("mailgun").unwrap(), WEBHOOK.as_bytes()).unwrap();
        assert_eq!(webhook_id, "W3X4JOhFT-OZidZGKKr9iA:1529692199.626182");
        assert_eq!(listed.id, webhook_id);
        assert_eq!(listed.event_type, webhook_type);
        assert_eq!(listed.event_type.as_deref(), Some("delivered"));
        assert_eq!(listed.created_ms, 1_529_692_199_626);
        // The item's bytes untouched: the timestamp's text survives.
        let payload = String::from_utf8(listed.payload.unwrap().to_vec()).unwrap();
        assert_eq!(payload, format!("{{\"event-data\":{item}}}"));
    }

    #[test]
    fn timestamps_are_read_from_their_text() {
        assert_eq!(timestamp_ms("1529692199.626182"), Some(1_529_692_199_626));
        assert_eq!(timestamp_ms("1529692199.6"), Some(1_529_692_199_600));
        assert_eq!(timestamp_ms("1529692199"), Some(1_529_692_199_000));
        assert_eq!(timestamp_ms("\"1529692199.5\""), Some(1_529_692_199_500));
        assert_eq!(timestamp_ms("1.5292e9"), Some(1_529_200_000_000));
        assert_eq!(timestamp_ms("-1.5"), None);
        assert_eq!(timestamp_ms("null"), None);
    }

    #[test]
    fn debug_never_shows_the_key() {
        let text = format!("{:?}", mailgun());
        assert!(
            !text.contains("key-secret") && text.contains("REDACTED"),
            "{text}"
        );
    }
}
