//! Paddle Billing: `GET /events?order_by=id[DESC]&per_page=200[&after=evt_…]`, `Authorization: Bearer <API key>`
//! (https://developer.paddle.com/api-reference/events/list-events; OpenAPI `PaddleHQ/paddle-openapi` `v1/openapi.yaml`,
//! operationId `list-events`). `per_page` is at most 200 ("Default: 50; Maximum: 200"); the next page is
//! `meta.pagination.next`, a URL whose `after=` is the cursor, while `meta.pagination.has_more` is true (`next` is
//! there on the last page too). The list takes no time filter, so a walk pages newest first (event ids are
//! time-ordered, `id[DESC]`) and stops at the first event whose `occurred_at` is older than its window.
//! Retention: "Returns a paginated list of events that have occurred in the last 90 days … Events older than 90
//! days aren't retained" (the spec's `list-events`; https://developer.paddle.com/changelog/2024/event-notification-retention-changes).
//! Credential: an API key with the permission to read events (keys made since 2025-05-06 have per-entity
//! permissions; a missing one answers 403); a sandbox key works only against `https://sandbox-api.paddle.com`.
//! Rate limit: 429 with `Retry-After` in seconds (https://developer.paddle.com/api-reference/about/rate-limiting).
//!
//! Webhook vs API: the webhook body is the event plus `notification_id` (`ntf_…`, one per destination and per
//! replay); the listed event is the same object without it (`event_id`, `event_type`, `occurred_at`, `data`).
//! The id (our scheme: `json:/event_id`) and the type (`json:/event_type`) are the same in both. We store the
//! listed event as it comes, so a reconciled payload lacks only `notification_id`.
//!
//! Paddle has no single-event endpoint. An event kept as failed by an earlier run is found again by a narrow list
//! query: `handle` is the id listed just before it (newer), so `GET /events?order_by=id[DESC]&after=<handle>`
//! starts at it.

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::api::{self, Refusals};
use super::{api_client, json, Fetched, Listed, Page, Provider, ProviderError, Window};

/// The most events a page holds (the SDKs and the reference: "Maximum: 200").
const PER_PAGE: &str = "200";

/// How far past an edge a walk goes on: the list is in id order, and ids follow time only to within moments, so an
/// event a little older than the one that passed the edge may still come after it.
const SLACK_MS: i64 = 5 * 60 * 1000;

/// The most pages a kept event's fetch reads looking for it.
const FETCH_PAGES: usize = 20;

const REFUSALS: Refusals = Refusals {
    unauthorized: "the API key is not valid (a sandbox key works only against sandbox-api.paddle.com)",
    forbidden: "the API key lacks the permission to read events",
    missing: "check api_base",
};

#[derive(Debug)]
pub struct Paddle {
    client: reqwest::Client,
    events_url: reqwest::Url,
    api_key: SecretString,
}

#[derive(Deserialize)]
struct List {
    data: Vec<serde_json::Value>,
    meta: Meta,
}

#[derive(Deserialize)]
struct Meta {
    pagination: Pagination,
}

#[derive(Deserialize)]
struct Pagination {
    #[serde(default)]
    has_more: bool,
    next: Option<String>,
}

impl Paddle {
    /// `api_key`: a Paddle API key (`pdl_live_apikey_…` or `pdl_sdbx_apikey_…`) that may read events.
    pub fn new(api_base: reqwest::Url, api_key: String) -> Result<Paddle, String> {
        Ok(Paddle {
            client: api_client()?,
            events_url: api::url(&api_base, "events")?,
            api_key: SecretString::from(api_key),
        })
    }

    /// `GET /events`, newest first, after `after` when given.
    async fn events(&self, after: Option<&str>) -> Result<List, ProviderError> {
        let request = self
            .client
            .get(events_query(&self.events_url, after))
            .bearer_auth(self.api_key.expose_secret())
            .header("Paddle-Version", "1")
            .header("Accept", "application/json");
        json(api::send(request, "GET /events", &REFUSALS).await?, "GET /events").await
    }
}

/// The list's URL: newest first, the most per page, after the cursor.
fn events_query(events_url: &reqwest::Url, after: Option<&str>) -> reqwest::Url {
    let mut url = events_url.clone();
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("order_by", "id[DESC]")
            .append_pair("per_page", PER_PAGE);
        if let Some(after) = after {
            query.append_pair("after", after);
        }
    }
    url
}

/// The `after` of a `meta.pagination.next` URL: only the cursor is taken, the request stays on our `api_base`.
fn after_of(next: &str) -> Option<String> {
    let url = reqwest::Url::parse(next).ok()?;
    let after = url.query_pairs().find(|(k, _)| k == "after")?.1;
    Some(after.into_owned())
}

/// One listed event's id, type and time, or a failure naming what is missing.
fn fields(event: &serde_json::Value) -> Result<(&str, Option<String>, i64), ProviderError> {
    let text = |k: &str| event.get(k).and_then(serde_json::Value::as_str);
    let (Some(id), Some(at)) = (text("event_id"), text("occurred_at")) else {
        return Err(ProviderError::Failed(
            "GET /events: an event without an event_id or an occurred_at".into(),
        ));
    };
    let at = api::rfc3339_ms(at, "GET /events: occurred_at")?;
    Ok((id, text("event_type").map(str::to_owned), at))
}

/// A page read into the run's items: those from the window's start on (newer ones are dropped by the run), each
/// with the id listed before it as its handle (`before`: the page's cursor, none at the top), and whether the walk
/// passed the window's start.
fn items(
    data: &[serde_json::Value],
    window: Window,
    before: Option<&str>,
) -> Result<(Vec<Listed>, bool), ProviderError> {
    let mut items = Vec::with_capacity(data.len());
    let mut before = before.unwrap_or_default().to_owned();
    for event in data {
        let (id, event_type, at) = fields(event)?;
        // Newest first: once an event is older than the window by more than the slack, every later one is too
        // (those between are listed and dropped by the run).
        if at < window.from_ms - SLACK_MS {
            return Ok((items, true));
        }
        items.push(Listed {
            id: id.to_owned(),
            event_type,
            created_ms: at,
            payload: Some(api::to_payload(event)?),
            headers: api::json_headers(),
            handle: std::mem::replace(&mut before, id.to_owned()),
        });
    }
    Ok((items, false))
}

#[async_trait]
impl Provider for Paddle {
    async fn list(&self, window: Window, cursor: Option<&str>) -> Result<Page, ProviderError> {
        let list = self.events(cursor).await?;
        let (items, passed) = items(&list.data, window, cursor)?;
        let last = list
            .data
            .last()
            .and_then(|e| e.get("event_id"))
            .and_then(|v| v.as_str());
        let next = match (passed, list.meta.pagination.has_more) {
            (false, true) => {
                let next = list.meta.pagination.next.as_deref().and_then(after_of);
                match next.or(last.map(str::to_owned)) {
                    Some(after) => Some(after),
                    None => {
                        return Err(ProviderError::Failed(
                            "GET /events: has_more with an empty page".into(),
                        ))
                    }
                }
            }
            _ => None,
        };
        Ok(Page { items, next })
    }

    /// The list carries every event whole: only an event kept from an earlier run is fetched, paging down from
    /// the id listed just before it (from the top where none was) until past its time.
    async fn fetch(&self, item: &Listed) -> Result<Fetched, ProviderError> {
        let mut after = Some(item.handle.clone()).filter(|h| !h.is_empty());
        for _ in 0..FETCH_PAGES {
            let list = self.events(after.as_deref()).await?;
            for event in &list.data {
                let (id, event_type, at) = fields(event)?;
                if id == item.id {
                    return Ok(Fetched {
                        payload: api::to_payload(event)?,
                        event_type,
                        headers: api::json_headers(),
                    });
                }
                if at < item.created_ms - SLACK_MS {
                    break;
                }
            }
            let last = list
                .data
                .last()
                .and_then(|e| e.get("event_id"))
                .and_then(|v| v.as_str());
            match (list.meta.pagination.has_more, last) {
                (true, Some(last)) if after.as_deref() != Some(last) => after = Some(last.to_owned()),
                _ => break,
            }
        }
        Err(ProviderError::Failed(format!(
            "GET /events: {} is no longer listed where it was (Paddle keeps events 90 days)",
            item.id
        )))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn event(id: &str, at: &str) -> serde_json::Value {
        serde_json::json!({"event_id": id, "event_type": "transaction.completed", "occurred_at": at,
                           "data": {"id": "txn_01"}})
    }

    #[test]
    fn the_query_asks_newest_first_for_the_most_after_the_cursor() {
        let base = reqwest::Url::parse("https://api.paddle.com/events").unwrap();
        assert_eq!(
            events_query(&base, Some("evt_01h")).as_str(),
            "https://api.paddle.com/events?order_by=id%5BDESC%5D&per_page=200&after=evt_01h"
        );
        assert_eq!(
            events_query(&base, None).as_str(),
            "https://api.paddle.com/events?order_by=id%5BDESC%5D&per_page=200"
        );
    }

    #[test]
    fn the_cursor_is_the_after_of_the_next_url() {
        assert_eq!(
            after_of("https://api.paddle.com/events?after=evt_01hv976dvatn4n7hyezq5jatef").as_deref(),
            Some("evt_01hv976dvatn4n7hyezq5jatef")
        );
        assert_eq!(after_of("https://api.paddle.com/events?per_page=5"), None);
        assert_eq!(after_of("not a url"), None);
    }

    #[test]
    fn a_page_stops_at_the_window_start_and_hands_each_item_its_newer_neighbour() {
        let data = [
            event("evt_3", "2024-04-12T13:15:50.037665Z"),
            event("evt_2", "2024-04-12T13:15:40.000000Z"),
            event("evt_1", "2024-04-12T13:15:30.000000Z"),
            event("evt_0", "2024-04-12T13:05:00.000000Z"),
        ];
        let from_ms = crate::time::parse_rfc3339("2024-04-12T13:15:35Z").unwrap();
        let window = Window {
            from_ms,
            to_ms: i64::MAX,
        };
        let (items, passed) = items(&data, window, Some("evt_4")).unwrap();
        assert!(passed);
        let got: Vec<_> = items.iter().map(|i| (i.id.as_str(), i.handle.as_str())).collect();
        // evt_1 is older than the window but within the slack (the run drops it); evt_0 is past it: the walk stops.
        assert_eq!(got, [("evt_3", "evt_4"), ("evt_2", "evt_3"), ("evt_1", "evt_2")]);
        assert_eq!(items[0].created_ms, 1_712_927_750_037);
        assert_eq!(items[0].event_type.as_deref(), Some("transaction.completed"));
        let stored: serde_json::Value = serde_json::from_slice(items[0].payload.as_ref().unwrap()).unwrap();
        assert_eq!(stored, data[0]);
        let (top, _) = super::items(&data[..1], window, None).unwrap();
        assert_eq!(top[0].handle, "");
        assert!(super::items(&[serde_json::json!({"event_id": "evt_x"})], window, None).is_err());
    }

    #[test]
    fn the_listed_id_and_type_are_those_the_scheme_reads_from_the_webhook() {
        // A webhook as the fake (and Paddle) sends it: the listed event plus `notification_id`.
        let body = br#"{"event_id":"evt_01000000000000000000000007","event_type":"transaction.completed","occurred_at":"2024-04-12T13:15:50.037000Z","notification_id":"ntf_01000000000000000000000007","data":{"id":"txn_01000000000000000000000007","status":"completed"}}"#;
        let scheme = crate::schemes::Scheme::named("paddle").unwrap();
        let (uri, headers) = (http::Uri::from_static("/"), http::HeaderMap::new());
        let identified = scheme
            .identify_request(&crate::schemes::Request::post(&uri, &headers, body))
            .unwrap();
        let crate::schemes::Identified::One(identity) = identified else {
            panic!("one event")
        };
        let mut listed: serde_json::Value = serde_json::from_slice(body).unwrap();
        listed.as_object_mut().unwrap().remove("notification_id");
        let window = Window {
            from_ms: 0,
            to_ms: i64::MAX,
        };
        let (items, _) = items(&[listed], window, None).unwrap();
        assert_eq!(items[0].id, identity.event_id);
        assert_eq!(items[0].event_type, identity.event_type);
    }

    #[test]
    fn debug_hides_the_key() {
        let p = Paddle::new(
            reqwest::Url::parse("https://api.paddle.com").unwrap(),
            "pdl_secret".into(),
        )
        .unwrap();
        assert!(!format!("{p:?}").contains("pdl_secret"));
    }

    /// The fake of `name`, served, with `n` events over the last ten hours; its base URL and good credential.
    async fn served(
        name: &str,
        n: usize,
    ) -> (std::sync::Arc<dyn testkit::providers::Fake>, reqwest::Url, String) {
        let (fake, base, credential) = testkit::providers::served(name, n);
        (fake, reqwest::Url::parse(&base).unwrap(), credential)
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_kept_event_is_found_again_after_its_newer_neighbour() {
        let (_fake, base, key) = served("paddle", 450).await;
        let p = Paddle::new(base, key).unwrap();
        let window = Window {
            from_ms: 0,
            to_ms: i64::MAX,
        };
        let first = p.list(window, None).await.unwrap();
        let second = p.list(window, first.next.as_deref()).await.unwrap();
        assert_eq!((first.items.len(), second.items.len()), (200, 200));
        for listed in [
            &first.items[0],
            &first.items[150],
            &second.items[0],
            &second.items[199],
        ] {
            let kept = Listed {
                payload: None,
                headers: vec![],
                ..listed.clone()
            };
            let got = p.fetch(&kept).await.unwrap();
            assert_eq!(Some(&got.payload), listed.payload.as_ref(), "{}", listed.id);
            assert_eq!(got.event_type, listed.event_type);
        }
        let gone = Listed {
            id: "evt_01gone".into(),
            payload: None,
            ..first.items[3].clone()
        };
        assert!(matches!(p.fetch(&gone).await, Err(ProviderError::Failed(_))));
    }
}
