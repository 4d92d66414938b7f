//! GoCardless: `GET /events?created_at[gte]=T&created_at[lt]=T&limit=500[&after=EV…]`, with
//! `Authorization: Bearer` and `GoCardless-Version: 2015-07-06`
//! (https://developer.gocardless.com/api-reference#core-endpoints-events; the official generated client
//! `gocardless/gocardless-pro-go` `event_service.go`). Newest first; the next (older) page's cursor is
//! `meta.cursors.after`, `null` at the end (https://developer.gocardless.com/api-reference#api-usage-cursor-pagination);
//! `limit` is at most 500. The window is asked for as it is, in RFC 3339 with milliseconds.
//!
//! Retention: the client's `event_service.go` says the endpoint "will no longer return events older than 18
//! months" (from 1 October 2026 in live): 540 days here; `retention_days` bounds the lookback further.
//!
//! Credential: an access token with "Read-only access" (Dashboard → Developers → Create → Access token).
//!
//! Shape: a webhook is a batch, `{"events":[event…],"meta":{"webhook_id":"WB…"}}`, and our scheme stores each
//! element of `events` as its own event (id `id`, type `resource_type.action`). The API lists the same event
//! objects under the same ids, so each listed event, as the API renders it, is the stored payload: the unit the
//! receiver stores, not a one-event batch. The API's rendering may carry fields the webhook's lacks
//! (`resource_metadata`, `source`…); the handler sees one event either way. An event kept failed by an earlier
//! run is fetched alone, `GET /events/{id}`, answering `{"events":{…}}`.

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::Value;

use super::api::{self, json_headers, rfc3339_ms, send, to_payload, url, Refusals};
use super::{api_client, json, Fetched, Listed, Page, Provider, ProviderError, Window};
use crate::time::rfc3339;

const VERSION: &str = "2015-07-06";

const REFUSALS: Refusals = Refusals {
    unauthorized: "the access token is not valid",
    forbidden: "the access token may not read events",
    missing: "GoCardless does not have it (or never did), or api_base is wrong",
};

#[derive(Debug)]
pub struct Gocardless {
    client: reqwest::Client,
    events_url: reqwest::Url,
    token: SecretString,
}

#[derive(Deserialize)]
struct List {
    events: Vec<Value>,
    meta: Meta,
}

#[derive(Deserialize)]
struct Meta {
    cursors: Cursors,
}

#[derive(Deserialize)]
struct Cursors {
    after: Option<String>,
}

/// `GET /events/{id}`: one event, under the plural key.
#[derive(Deserialize)]
struct One {
    events: Value,
}

impl Gocardless {
    pub fn new(api_base: reqwest::Url, token: String) -> Result<Gocardless, String> {
        Ok(Gocardless {
            client: api_client()?,
            events_url: url(&api_base, "events")?,
            token: SecretString::from(token),
        })
    }

    async fn get(&self, url: reqwest::Url, what: &str) -> Result<reqwest::Response, ProviderError> {
        let request = self
            .client
            .get(url)
            .bearer_auth(self.token.expose_secret())
            .header("GoCardless-Version", VERSION)
            .header("Accept", "application/json");
        send(request, what, &REFUSALS).await
    }
}

fn events_query(base: &reqwest::Url, window: Window, cursor: Option<&str>) -> reqwest::Url {
    let mut url = base.clone();
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("created_at[gte]", &rfc3339(window.from_ms))
            .append_pair("created_at[lt]", &rfc3339(window.to_ms))
            .append_pair("limit", "500");
        if let Some(after) = cursor {
            q.append_pair("after", after);
        }
    }
    url
}

/// One event as the receiver stores a webhook's element: the object itself, its id and `resource_type.action`.
fn listed(event: &Value, what: &str) -> Result<Listed, ProviderError> {
    let text = |k: &str| event.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    let (Some(id), Some(created)) = (text("id"), text("created_at")) else {
        return Err(ProviderError::Failed(format!(
            "{what}: an event without an id or a created_at"
        )));
    };
    let event_type = text("resource_type")
        .zip(text("action"))
        .map(|(resource, action)| format!("{resource}.{action}"));
    Ok(Listed {
        id: id.to_owned(),
        event_type,
        created_ms: rfc3339_ms(created, what)?,
        payload: Some(to_payload(event)?),
        headers: json_headers(),
        handle: id.to_owned(),
    })
}

#[async_trait]
impl Provider for Gocardless {
    async fn list(&self, window: Window, cursor: Option<&str>) -> Result<Page, ProviderError> {
        let what = "GET /events";
        let response = self
            .get(events_query(&self.events_url, window, cursor), what)
            .await?;
        let list: List = json(response, what).await?;
        let items = list
            .events
            .iter()
            .map(|e| listed(e, what))
            .collect::<Result<Vec<_>, _>>()?;
        let next = list
            .meta
            .cursors
            .after
            .filter(|a| !a.is_empty() && !items.is_empty());
        Ok(Page { items, next })
    }

    async fn fetch(&self, item: &Listed) -> Result<Fetched, ProviderError> {
        let what = format!("GET /events/{}", item.handle);
        let url = api::child(&self.events_url, &item.handle)?;
        let one: One = json(self.get(url, &what).await?, &what).await?;
        let found = listed(&one.events, &what)?;
        if found.id != item.id {
            return Err(ProviderError::Failed(format!(
                "{what}: the answer is another event"
            )));
        }
        Ok(Fetched {
            payload: found.payload.unwrap_or_default(),
            event_type: found.event_type,
            headers: found.headers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schemes::request::Identified;
    use crate::schemes::Scheme;

    #[test]
    fn the_query_asks_for_the_window_and_the_most_per_page() {
        let base = reqwest::Url::parse("https://api.gocardless.com/events").unwrap();
        let window = Window {
            from_ms: 1_767_225_600_000,
            to_ms: 1_767_229_200_500,
        };
        assert_eq!(
            events_query(&base, window, Some("EV0000000042")).as_str(),
            "https://api.gocardless.com/events?created_at%5Bgte%5D=2026-01-01T00%3A00%3A00.000Z\
             &created_at%5Blt%5D=2026-01-01T01%3A00%3A00.500Z&limit=500&after=EV0000000042"
        );
    }

    #[test]
    fn a_listed_event_is_the_element_the_scheme_stores() {
        let event = r#"{"id":"EV0000000042","created_at":"2026-01-01T00:13:20.000Z","resource_type":"payments","action":"confirmed","links":{"payment":"PM0000000042"},"details":{"origin":"gocardless","cause":"payment_confirmed"},"metadata":{}}"#;
        let item = listed(&serde_json::from_str(event).unwrap(), "GET /events").unwrap();
        assert_eq!(item.event_type.as_deref(), Some("payments.confirmed"));
        assert_eq!(item.created_ms, 1_767_226_400_000);

        // The fake's one-event webhook of this event: the scheme splits it into the same id, type and element.
        let body = format!(r#"{{"events":[{event}],"meta":{{"webhook_id":"WB0000000042"}}}}"#);
        let scheme = Scheme::named("gocardless").unwrap();
        let uri = http::Uri::from_static("/");
        let headers = http::HeaderMap::new();
        let request = crate::schemes::request::Request::post(&uri, &headers, body.as_bytes());
        let Ok(Identified::Batch(items)) = scheme.identify_request(&request) else {
            panic!("not a batch");
        };
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].identity.event_id, item.id);
        assert_eq!(items[0].identity.event_type, item.event_type);
        let element: Value = serde_json::from_slice(&items[0].payload).unwrap();
        let stored: Value = serde_json::from_slice(item.payload.as_deref().unwrap()).unwrap();
        assert_eq!(stored, element);
    }

    #[test]
    fn an_event_without_a_type_is_listed_without_one() {
        let item = listed(
            &serde_json::json!({"id": "EV1", "created_at": "2026-01-01T00:00:00.000Z", "action": "created"}),
            "GET /events",
        )
        .unwrap();
        assert_eq!(item.event_type, None);
    }

    #[test]
    fn the_token_is_not_in_debug() {
        let p = Gocardless::new(
            reqwest::Url::parse("https://api.gocardless.com").unwrap(),
            "live_secret".into(),
        )
        .unwrap();
        assert!(!format!("{p:?}").contains("live_secret"));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_kept_event_is_fetched_again_from_the_fake() {
        super::super::gitlab::a_kept_event_is_fetched_again_alone("gocardless", |base, credential| {
            Box::new(Gocardless::new(base, credential).unwrap())
        })
        .await;
    }
}
