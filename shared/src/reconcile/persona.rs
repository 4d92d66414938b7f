//! Persona: `GET /api/v1/events?page[size]=100[&page[after]=evt_…]`, `Authorization: Bearer <API key>`
//! (https://docs.withpersona.com/api-reference/events/list-all-events: "Results are returned in reverse
//! chronological order, with the most recently created objects first"). Paging is JSON:API: `page[size]` "can range
//! between 1 and 100 (default is 10)", `page[after]` is "the object ID that defines your place in the list", and
//! `links.next` (`/api/v1/events?page%5Bafter%5D=evt_…`, null at the end) says a next page exists
//! (https://docs.withpersona.com/pagination). The list's filters are `filter[name]`, `filter[object-id]` and
//! `filter[id]` (Persona's OpenAPI, version 2023-01-05, operationId `list-all-events`): no time filter, so a walk
//! stops at the first event older than its window. Retention: "Events up to 3 months old can be viewed"
//! (https://docs.withpersona.com/events). Credential: an API key whose permissions include reading events (a key
//! without them answers 403). Rate limit: 429 with `ratelimit-remaining` and `ratelimit-reset` (seconds until the
//! window resets; https://docs.withpersona.com/reference/rate-limiting).
//!
//! Webhook vs API: the webhook body is `{"data": <event>}`, the event being the JSON:API object the list returns
//! (`{"type":"event","id":"evt_…","attributes":{"name","payload","created-at"}}`). Our scheme takes the id at
//! `data.id` and the type at `data.attributes.name`, so we store each listed event wrapped as `{"data": event}`:
//! the webhook's shape (https://docs.withpersona.com/docs/webhooks, "Example event from webhook"). Where they can
//! still differ: the keys' casing follows `Key-Inflection` (kebab by default, as a webhook's by default; we send
//! none), the payload's schema follows the API version (the key's default here, the webhook's own there), and a
//! webhook's allowlist / attribute blocklist can add `included` objects or drop attributes that the API shows. An event kept as failed by an earlier run is fetched alone, `GET /api/v1/events/{id}`
//! (https://docs.withpersona.com/api-reference/events/retrieve-an-event), whose answer is that same `{"data"}`.

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::api::{self, Refusals};
use super::{api_client, json, Fetched, Listed, Page, Provider, ProviderError, Window};

const REFUSALS: Refusals = Refusals {
    unauthorized: "the API key is not valid (sandbox and production keys each work in their own environment)",
    forbidden: "the API key may not read events, or this IP address is not allowed",
    missing: "Persona no longer has it (it keeps events about 3 months), or never did",
};

#[derive(Debug)]
pub struct Persona {
    client: reqwest::Client,
    events_url: reqwest::Url,
    api_key: SecretString,
}

#[derive(Deserialize)]
struct List {
    data: Vec<serde_json::Value>,
    #[serde(default)]
    links: Links,
}

#[derive(Deserialize, Default)]
struct Links {
    next: Option<String>,
}

#[derive(Deserialize)]
struct One {
    data: serde_json::Value,
}

impl Persona {
    /// `api_key`: a Persona API key (`persona_production_…` or `persona_sandbox_…`) that may read events.
    pub fn new(api_base: reqwest::Url, api_key: String) -> Result<Persona, String> {
        Ok(Persona {
            client: api_client()?,
            events_url: api::url(&api_base, "api/v1/events")?,
            api_key: SecretString::from(api_key),
        })
    }

    async fn get(&self, url: reqwest::Url, what: &str) -> Result<reqwest::Response, ProviderError> {
        let request = self
            .client
            .get(url)
            .bearer_auth(self.api_key.expose_secret())
            .header("Accept", "application/json");
        api::send(request, what, &REFUSALS).await
    }
}

/// The list's URL: the most per page, after the cursor.
fn events_query(events_url: &reqwest::Url, after: Option<&str>) -> reqwest::Url {
    let mut url = events_url.clone();
    {
        let mut query = url.query_pairs_mut();
        query.append_pair("page[size]", "100");
        if let Some(after) = after {
            query.append_pair("page[after]", after);
        }
    }
    url
}

/// The `page[after]` of a `links.next` (a path with its query, or a whole URL): only the cursor is taken.
fn after_of(next: &str) -> Option<String> {
    let base = reqwest::Url::parse("https://api.withpersona.com/").ok()?;
    let url = base.join(next).ok()?;
    let after = url.query_pairs().find(|(k, _)| k == "page[after]")?.1;
    Some(after.into_owned())
}

/// An event's id, name and creation time (`created-at`, or the same key in another inflection).
fn fields(event: &serde_json::Value, what: &str) -> Result<(String, Option<String>, i64), ProviderError> {
    let attributes = event.get("attributes");
    let at = ["created-at", "createdAt", "created_at"].iter().find_map(|k| {
        attributes
            .and_then(|a| a.get(*k))
            .and_then(serde_json::Value::as_str)
    });
    let (Some(id), Some(at)) = (event.get("id").and_then(serde_json::Value::as_str), at) else {
        return Err(ProviderError::Failed(format!(
            "{what}: an event without an id or a created-at"
        )));
    };
    let name = attributes
        .and_then(|a| a.get("name"))
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned);
    Ok((id.to_owned(), name, api::rfc3339_ms(at, what)?))
}

/// An event in the webhook's shape: `{"data": event}`.
fn webhook_shape(event: &serde_json::Value) -> Result<bytes::Bytes, ProviderError> {
    api::to_payload(&serde_json::json!({ "data": event }))
}

#[async_trait]
impl Provider for Persona {
    async fn list(&self, window: Window, cursor: Option<&str>) -> Result<Page, ProviderError> {
        let what = "GET /api/v1/events";
        let list: List = json(
            self.get(events_query(&self.events_url, cursor), what).await?,
            what,
        )
        .await?;
        let mut items = Vec::with_capacity(list.data.len());
        let mut passed = false;
        for event in &list.data {
            let (id, name, at) = fields(event, what)?;
            // Newest first: once an event is older than the window, every later one is too.
            if at < window.from_ms {
                passed = true;
                break;
            }
            items.push(Listed {
                handle: id.clone(),
                id,
                event_type: name,
                created_ms: at,
                payload: Some(webhook_shape(event)?),
                headers: api::json_headers(),
            });
        }
        let next = match (&list.links.next, list.data.last()) {
            (Some(next), Some(last)) if !passed => Some(match after_of(next) {
                Some(after) => after,
                None => fields(last, what)?.0,
            }),
            _ => None,
        };
        Ok(Page { items, next })
    }

    /// The list carries every event whole: only an event kept from an earlier run is fetched, alone.
    async fn fetch(&self, item: &Listed) -> Result<Fetched, ProviderError> {
        let what = format!("GET /api/v1/events/{}", item.handle);
        let url = api::child(&self.events_url, &item.handle)?;
        let one: One = json(self.get(url, &what).await?, &what).await?;
        let (id, name, _) = fields(&one.data, &what)?;
        if id != item.id {
            return Err(ProviderError::Failed(format!(
                "{what}: the answer is another event"
            )));
        }
        Ok(Fetched {
            payload: webhook_shape(&one.data)?,
            event_type: name,
            headers: api::json_headers(),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_query_asks_for_the_most_after_the_cursor() {
        let base = reqwest::Url::parse("https://api.withpersona.com/api/v1/events").unwrap();
        assert_eq!(
            events_query(&base, Some("evt_A1")).as_str(),
            "https://api.withpersona.com/api/v1/events?page%5Bsize%5D=100&page%5Bafter%5D=evt_A1"
        );
    }

    #[test]
    fn the_cursor_is_the_page_after_of_the_next_link() {
        assert_eq!(
            after_of("/api/v1/events?page%5Bafter%5D=evt_ABC123").as_deref(),
            Some("evt_ABC123")
        );
        assert_eq!(
            after_of("https://api.withpersona.com/api/v1/events?page[size]=100&page[after]=evt_B").as_deref(),
            Some("evt_B")
        );
        assert_eq!(after_of("/api/v1/events?page%5Bbefore%5D=evt_ABC123"), None);
    }

    #[test]
    fn the_listed_event_is_stored_as_the_webhook_carries_it_under_the_id_the_scheme_reads() {
        // A webhook as the fake (and Persona) sends it.
        let body = br#"{"data":{"type":"event","id":"evt_Fk0000000000000000000007","attributes":{"name":"inquiry.completed","payload":{"data":{"type":"inquiry","id":"inq_Fk0000000000000000000007","attributes":{"status":"completed"}}},"created-at":"2024-04-12T13:15:50.037Z"}}}"#;
        let webhook: serde_json::Value = serde_json::from_slice(body).unwrap();
        let scheme = crate::schemes::Scheme::named("persona").unwrap();
        let (uri, headers) = (http::Uri::from_static("/"), http::HeaderMap::new());
        let crate::schemes::Identified::One(identity) = scheme
            .identify_request(&crate::schemes::Request::post(&uri, &headers, body))
            .unwrap()
        else {
            panic!("one event")
        };
        let listed = &webhook["data"];
        let (id, name, at) = fields(listed, "test").unwrap();
        assert_eq!(id, identity.event_id);
        assert_eq!(name, identity.event_type);
        assert_eq!(at, 1_712_927_750_037);
        let stored: serde_json::Value = serde_json::from_slice(&webhook_shape(listed).unwrap()).unwrap();
        assert_eq!(stored, webhook);
        assert!(fields(&serde_json::json!({"id": "evt_1", "attributes": {}}), "test").is_err());
    }

    #[test]
    fn debug_hides_the_key() {
        let p = Persona::new(
            reqwest::Url::parse("https://api.withpersona.com").unwrap(),
            "persona_secret".into(),
        )
        .unwrap();
        assert!(!format!("{p:?}").contains("persona_secret"));
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
    async fn a_kept_event_is_fetched_again_alone() {
        let (_fake, base, key) = served("persona", 150).await;
        let p = Persona::new(base, key).unwrap();
        let window = Window {
            from_ms: 0,
            to_ms: i64::MAX,
        };
        let first = p.list(window, None).await.unwrap();
        assert_eq!(first.items.len(), 100);
        let second = p.list(window, first.next.as_deref()).await.unwrap();
        assert_eq!((second.items.len(), second.next.as_deref()), (50, None));
        let listed = &second.items[7];
        let kept = Listed {
            payload: None,
            headers: vec![],
            ..listed.clone()
        };
        let got = p.fetch(&kept).await.unwrap();
        assert_eq!(Some(&got.payload), listed.payload.as_ref());
        assert_eq!(got.event_type, listed.event_type);
        let gone = Listed {
            id: "evt_gone".into(),
            handle: "evt_gone".into(),
            ..kept
        };
        assert!(matches!(p.fetch(&gone).await, Err(ProviderError::Failed(_))));
    }
}
