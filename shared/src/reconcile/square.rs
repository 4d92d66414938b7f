//! Square: `POST /v2/events` (SearchEvents, BETA; https://developer.squareup.com/reference/square/events-api/SearchEvents;
//! OpenAPI `square/connect-api-specification` `api.json`, schemas `SearchEventsRequest`, `SearchEventsResponse`)
//! with `{"limit":100,"query":{"filter":{"created_at":{"start_at","end_at"}},"sort":{"field":"DEFAULT","order":"DESC"}}}`.
//! - Paging: the answer's `cursor`, sent back with the same query ("you must use the original query"); none, or
//!   an empty one, is the end. Page size: `limit`, 100 at most (the spec's maximum and default).
//! - Window: `created_at` as a `TimeRange` in RFC 3339 (its inclusivity is "endpoint-specific" and not stated for
//!   SearchEvents: the run drops what falls outside). Order: newest first, asked.
//! - Retention: "You can only retrieve events that occurred within the past 28 days", and only events that
//!   occurred while searching was enabled (`PUT /v2/events/enable`, once, at setup: events are disabled by default)
//!   (https://developer.squareup.com/docs/events-api/overview).
//! - Credential: the application's personal access token; "you cannot use OAuth access tokens with the Events
//!   API" (same page). Square has no read-only or scoped variant of it.
//! - Shape: the webhook's body is the same `Event` object (`merchant_id`, `location_id`, `type`, `event_id`,
//!   `created_at`, `data`), so `events[i]` is stored unchanged; our scheme reads `json:/event_id` and `json:/type`.
//!   The listing's `metadata[i].api_version` is not merged in. A webhook renders `data.object` at its
//!   subscription's API version, the listing at the application's version when the event occurred: they differ
//!   only where a subscription pins another version.
//! - No detail endpoint exists: an event an earlier run could not store is searched again in the second of its
//!   creation (and of its type), walking that narrow search's pages for its id.
//! - Rate limits: Square documents neither limits nor headers (429 `RATE_LIMITED`: "use a retry mechanism with an
//!   exponential backoff"); a `Retry-After` is honoured where present.

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::json;

use super::api::{json_headers, rfc3339_ms, send, to_payload, url, Refusals};
use super::{api_client, json, Fetched, Listed, Page, Provider, ProviderError, Window};

/// The API version asked (the spec's release read for this file).
const SQUARE_VERSION: &str = "2025-08-20";

/// Pages a narrow search for one event may walk before it gives up.
const FETCH_PAGES: usize = 10;

const REFUSALS: Refusals = Refusals {
    unauthorized:
        "Square refused the token (the Events API takes only the application's personal access token, \
                   not an OAuth token)",
    forbidden: "the token may not search events",
    missing: "check api_base",
};

#[derive(Debug)]
pub struct Square {
    client: reqwest::Client,
    events_url: reqwest::Url,
    token: SecretString,
}

#[derive(Deserialize)]
struct SearchEventsResponse {
    #[serde(default)]
    events: Vec<serde_json::Value>,
    cursor: Option<String>,
}

impl Square {
    /// `token`: the application's personal access token.
    pub fn new(api_base: reqwest::Url, token: String) -> Result<Square, String> {
        Ok(Square {
            client: api_client()?,
            events_url: url(&api_base, "v2/events")?,
            token: SecretString::from(token),
        })
    }

    /// One SearchEvents page.
    async fn search(&self, body: &serde_json::Value) -> Result<SearchEventsResponse, ProviderError> {
        let what = "POST /v2/events";
        let request = self
            .client
            .post(self.events_url.clone())
            .bearer_auth(self.token.expose_secret())
            .header("Square-Version", SQUARE_VERSION)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json")
            .body(serde_json::to_vec(body).unwrap_or_default());
        json(send(request, what, &REFUSALS).await?, what).await
    }
}

/// The SearchEvents body: the window's events of `types` (all where empty), newest first, 100 a page.
fn search_body(from_ms: i64, to_ms: i64, types: &[&str], cursor: Option<&str>) -> serde_json::Value {
    let mut filter = json!({"created_at": {
        "start_at": crate::time::rfc3339(from_ms),
        "end_at": crate::time::rfc3339(to_ms),
    }});
    if !types.is_empty() {
        filter["event_types"] = json!(types);
    }
    let mut body = json!({
        "limit": 100,
        "query": {"filter": filter, "sort": {"field": "DEFAULT", "order": "DESC"}},
    });
    if let Some(cursor) = cursor {
        body["cursor"] = json!(cursor);
    }
    body
}

/// `created_at` as Square writes it: RFC 3339, though the spec's own example has no offset (read as UTC) and some
/// answers write `+00:00`.
fn created_ms(text: &str, what: &str) -> Result<i64, ProviderError> {
    let utc = match text.strip_suffix("+00:00") {
        Some(head) => format!("{head}Z"),
        None if text.ends_with('Z') || text.ends_with('z') => text.to_owned(),
        None if text.len() >= 19 && !text[19..].contains(['+', '-']) => format!("{text}Z"),
        None => text.to_owned(),
    };
    rfc3339_ms(&utc, what)
}

/// A listed event: its id, type and creation time, and the object itself as the payload.
fn listed(event: &serde_json::Value, what: &str) -> Result<Listed, ProviderError> {
    let text = |k: &str| event.get(k).and_then(serde_json::Value::as_str);
    let (Some(id), Some(created)) = (text("event_id"), text("created_at")) else {
        return Err(ProviderError::Failed(format!(
            "{what}: an event without an event_id or a created_at"
        )));
    };
    Ok(Listed {
        id: id.to_owned(),
        event_type: text("type").map(str::to_owned),
        created_ms: created_ms(created, what)?,
        payload: Some(to_payload(event)?),
        headers: json_headers(),
        handle: id.to_owned(),
    })
}

#[async_trait]
impl Provider for Square {
    async fn list(&self, window: Window, cursor: Option<&str>) -> Result<Page, ProviderError> {
        let answer = self
            .search(&search_body(window.from_ms, window.to_ms, &[], cursor))
            .await?;
        let items = answer
            .events
            .iter()
            .map(|e| listed(e, "POST /v2/events"))
            .collect::<Result<Vec<_>, _>>()?;
        let next = answer.cursor.filter(|c| !c.is_empty() && !items.is_empty());
        Ok(Page { items, next })
    }

    /// No GET by id: the second of the event's creation searched again, its pages walked for the id.
    async fn fetch(&self, item: &Listed) -> Result<Fetched, ProviderError> {
        let from = item.created_ms.div_euclid(1000) * 1000;
        let types: Vec<&str> = item.event_type.as_deref().into_iter().collect();
        let mut cursor: Option<String> = None;
        for _ in 0..FETCH_PAGES {
            let answer = self
                // A second wider each side: Square does not say whether `start_at` and `end_at` are inclusive.
                .search(&search_body(from - 1000, from + 2000, &types, cursor.as_deref()))
                .await?;
            for event in &answer.events {
                let found = listed(event, "POST /v2/events")?;
                if found.id == item.id {
                    return Ok(Fetched {
                        payload: found.payload.unwrap_or_default(),
                        event_type: found.event_type,
                        headers: found.headers,
                    });
                }
            }
            match answer.cursor.filter(|c| !c.is_empty()) {
                Some(next) if !answer.events.is_empty() => cursor = Some(next),
                _ => break,
            }
        }
        Err(ProviderError::Failed(format!(
            "Square's search no longer finds event {} (it keeps events 28 days)",
            item.id
        )))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_search_asks_the_window_newest_first_and_keeps_the_query_with_the_cursor() {
        let first = search_body(1_700_000_000_000, 1_700_003_600_500, &[], None);
        assert_eq!(
            first,
            json!({"limit": 100, "query": {
                "filter": {"created_at": {"start_at": "2023-11-14T22:13:20.000Z", "end_at": "2023-11-14T23:13:20.500Z"}},
                "sort": {"field": "DEFAULT", "order": "DESC"}}})
        );
        let next = search_body(
            1_700_000_000_000,
            1_700_003_600_500,
            &[],
            Some("6b571fc9773647f="),
        );
        assert_eq!(next["query"], first["query"]);
        assert_eq!(next["cursor"], "6b571fc9773647f=");
        let one = search_body(0, 1000, &["payment.updated"], None);
        assert_eq!(one["query"]["filter"]["event_types"], json!(["payment.updated"]));
    }

    #[test]
    fn created_at_reads_with_or_without_an_offset() {
        assert_eq!(
            created_ms("2023-11-14T22:13:20.250Z", "t").unwrap(),
            1_700_000_000_250
        );
        assert_eq!(
            created_ms("2023-11-14T22:13:20.250+00:00", "t").unwrap(),
            1_700_000_000_250
        );
        // The spec's example: microseconds, no offset.
        assert_eq!(
            created_ms("2023-11-14T22:13:20.454726", "t").unwrap(),
            1_700_000_000_454
        );
        assert!(created_ms("yesterday", "t").is_err());
    }

    #[test]
    fn debug_shows_no_token() {
        let square = Square::new(
            reqwest::Url::parse("https://connect.squareup.com").unwrap(),
            "EAAAl-secret".into(),
        )
        .unwrap();
        assert!(!format!("{square:?}").contains("EAAAl"));
    }

    /// A webhook body as Square sends it (the fake's rendering, copied): the listed id and type are the ones our
    /// scheme reads.
    #[test]
    fn the_listed_id_and_type_are_the_ones_the_scheme_reads() {
        let body = br#"{"created_at":"2026-12-01T10:00:00.250Z","data":{"id":"bP9mAsEMYPUGjjGNaNO5ZDVyLhSZY","object":{"payment":{"id":"bP9mAsEMYPUGjjGNaNO5ZDVyLhSZY","status":"COMPLETED"}},"type":"payment"},"event_id":"73ecd468-0aba-424f-b862-000000000003","location_id":"L88917AVBK2S5","merchant_id":"6SSW7HV8K2ST5","type":"payment.updated"}"#;
        let event: serde_json::Value = serde_json::from_slice(body).unwrap();
        let item = listed(&event, "t").unwrap();
        let scheme = crate::schemes::Scheme::named("square").unwrap();
        let identity = scheme.identify(&http::HeaderMap::new(), body).unwrap();
        assert_eq!(identity.event_id, item.id);
        assert_eq!(identity.event_type, item.event_type);
        assert_eq!(item.created_ms, 1_796_119_200_250);
    }
}
