//! Polar: a webhook endpoint's deliveries, `GET /v1/webhooks/deliveries?endpoint_id=<hook>&start_timestamp=…&limit=100
//! &page=N`, `Authorization: Bearer <organization access token>` with the `webhooks:read` scope (Polar's OpenAPI,
//! `polarsource/polar` commit `c6c3645e639ee8eeaa05aa0835cf8e39e330382f`, `docs/openapi/2026-10.openapi.json`,
//! operationId `webhooks:list_webhook_deliveries`; the route in `server/polar/webhook/endpoints.py`). Paging is by
//! page number, `limit` "Maximum is 100", until `pagination.max_page` (`docs/api-reference/2026-10/introduction.mdx`,
//! "Pagination"; https://polar.sh/docs/api-reference/introduction). Deliveries come
//! newest first by their own `created_at` (`server/polar/webhook/service.py` `list_deliveries`), which
//! `start_timestamp` / `end_timestamp` bound (strictly). A delivery is recorded after its attempt, at or after its
//! event's creation, so `start_timestamp` = the window's start finds every event created in the window; the end
//! is left open, since an attempt can come well after the event (Polar holds one back behind its endpoint's earlier
//! undelivered events, and retries up to 10 times with backoff); the run drops the events outside the window.
//! Each event (`webhook_event.id`) has one delivery per attempt: the run counts an id once.
//! Retention: events are archived after `WEBHOOK_EVENT_RETENTION_PERIOD` (`server/polar/config.py`: 90 days since
//! 2026-02, 30 before), after which "the payload is not accessible anymore" (`is_archived`, `payload: null`).
//! Only events Polar attempted to deliver are listed (none while the endpoint is disabled: those are `skipped`).
//! Rate limit: 429 with `Retry-After` (the same introduction, "Rate Limits").
//!
//! Webhook vs API: `webhook_event.payload` is the exact body string Polar POSTs (`server/polar/webhook/tasks.py`:
//! `client.post(url, content=event.payload, …)`), with `webhook-id: str(event.id)`, the id our scheme takes
//! (`header:webhook-id`); the type is the body's `type`. We store the payload's bytes unchanged, with the
//! `webhook-id` header kept as the receiver keeps it. An event kept as failed by an earlier run is found again by
//! the list's `query` (which matches a delivery's event id), there being no single-event endpoint.

use async_trait::async_trait;
use bytes::Bytes;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::api::{self, Refusals};
use super::{api_client, json, Fetched, Listed, Page, Provider, ProviderError, Window};

const REFUSALS: Refusals = Refusals {
    unauthorized: "the access token is not valid (sandbox tokens work only against sandbox-api.polar.sh)",
    forbidden: "the access token lacks the webhooks:read scope",
    missing: "check api_base",
};

const WHAT: &str = "GET /v1/webhooks/deliveries";

#[derive(Debug)]
pub struct Polar {
    client: reqwest::Client,
    deliveries_url: reqwest::Url,
    endpoint: String,
    token: SecretString,
}

#[derive(Deserialize)]
struct List {
    items: Vec<Delivery>,
    pagination: Pagination,
}

#[derive(Deserialize)]
struct Pagination {
    max_page: u64,
}

#[derive(Deserialize)]
struct Delivery {
    /// When Polar recorded this delivery attempt: the list's filter and order are on it.
    created_at: String,
    webhook_event: WebhookEvent,
}

#[derive(Deserialize)]
struct WebhookEvent {
    id: String,
    #[serde(rename = "type")]
    event_type: Option<String>,
    payload: Option<String>,
}

/// What a listing asks for: the window's deliveries page by page, or the deliveries of one event.
enum Ask<'a> {
    Window { from_ms: i64, page: u64 },
    Event(&'a str),
}

impl Polar {
    /// `endpoint`: the webhook endpoint's id; `token`: an organization access token with `webhooks:read`.
    pub fn new(api_base: reqwest::Url, endpoint: &str, token: String) -> Result<Polar, String> {
        Ok(Polar {
            client: api_client()?,
            deliveries_url: api::url(&api_base, "v1/webhooks/deliveries")?,
            endpoint: endpoint.to_owned(),
            token: SecretString::from(token),
        })
    }

    async fn deliveries(&self, ask: Ask<'_>) -> Result<List, ProviderError> {
        let request = self
            .client
            .get(deliveries_query(&self.deliveries_url, &self.endpoint, &ask))
            .bearer_auth(self.token.expose_secret())
            .header("Accept", "application/json");
        json(api::send(request, WHAT, &REFUSALS).await?, WHAT).await
    }
}

fn deliveries_query(url: &reqwest::Url, endpoint: &str, ask: &Ask<'_>) -> reqwest::Url {
    let mut url = url.clone();
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("endpoint_id", endpoint)
            .append_pair("limit", "100");
        match ask {
            // Strictly after: a millisecond before the window's start.
            Ask::Window { from_ms, page } => query
                .append_pair("start_timestamp", &crate::time::rfc3339(from_ms - 1))
                .append_pair("page", &page.to_string()),
            Ask::Event(id) => query.append_pair("query", id).append_pair("page", "1"),
        };
    }
    url
}

/// A delivery's event as the run lists it: the payload where Polar still has it, at the delivery's time (the list
/// is filtered and ordered by it, and Polar holds an event's first attempt back behind earlier undelivered ones, so
/// an event's own creation may lie far below the window its delivery falls in).
fn listed(delivery: &Delivery) -> Result<Listed, ProviderError> {
    let event = &delivery.webhook_event;
    let created_ms = api::rfc3339_ms(&delivery.created_at, "created_at")?;
    let mut headers = api::json_headers();
    headers.push(("webhook-id".into(), event.id.clone()));
    Ok(Listed {
        id: event.id.clone(),
        event_type: event.event_type.clone(),
        created_ms,
        payload: event
            .payload
            .as_ref()
            .map(|p| Bytes::from(p.clone().into_bytes())),
        headers,
        handle: event.id.clone(),
    })
}

#[async_trait]
impl Provider for Polar {
    async fn list(&self, window: Window, cursor: Option<&str>) -> Result<Page, ProviderError> {
        let page = match cursor {
            None => 1,
            Some(c) => c
                .parse::<u64>()
                .map_err(|_| ProviderError::Failed("a page cursor is not a number".into()))?,
        };
        let list = self
            .deliveries(Ask::Window {
                from_ms: window.from_ms,
                page,
            })
            .await?;
        let items = list.items.iter().map(listed).collect::<Result<Vec<_>, _>>()?;
        let next =
            (page < list.pagination.max_page && !list.items.is_empty()).then(|| (page + 1).to_string());
        Ok(Page { items, next })
    }

    /// Only an archived event (its payload gone) or one kept from an earlier run gets here: its deliveries are
    /// looked up by its id.
    async fn fetch(&self, item: &Listed) -> Result<Fetched, ProviderError> {
        let list = self.deliveries(Ask::Event(&item.handle)).await?;
        let delivery = list
            .items
            .iter()
            .find(|d| d.webhook_event.id == item.id)
            .ok_or_else(|| ProviderError::Failed(format!("{WHAT}: no delivery of {} is listed", item.id)))?;
        let found = listed(delivery)?;
        let payload = found.payload.ok_or_else(|| {
            ProviderError::Failed(format!(
                "{WHAT}: {} is archived, its payload is no longer accessible",
                item.id
            ))
        })?;
        Ok(Fetched {
            payload,
            event_type: found.event_type,
            headers: found.headers,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_query_names_the_endpoint_the_most_per_page_and_the_window_start() {
        let base = reqwest::Url::parse("https://api.polar.sh/v1/webhooks/deliveries").unwrap();
        let from_ms = crate::time::parse_rfc3339("2026-01-02T03:04:05.006Z").unwrap();
        assert_eq!(
            deliveries_query(&base, "4f3c", &Ask::Window { from_ms, page: 2 }).as_str(),
            "https://api.polar.sh/v1/webhooks/deliveries?endpoint_id=4f3c&limit=100\
             &start_timestamp=2026-01-02T03%3A04%3A05.005Z&page=2"
        );
        assert_eq!(
            deliveries_query(&base, "4f3c", &Ask::Event("9a1b")).as_str(),
            "https://api.polar.sh/v1/webhooks/deliveries?endpoint_id=4f3c&limit=100&query=9a1b&page=1"
        );
    }

    #[test]
    fn the_stored_payload_is_the_posted_body_under_the_id_the_scheme_reads() {
        // A delivery as the fake (and Polar) lists it; its payload is the body the webhook carried.
        let body = r#"{"type":"order.paid","timestamp":"2026-01-02T03:04:05.006000Z","data":{"id":"0b7e2c1a-0000-4000-8000-000000000007","status":"paid"}}"#;
        let delivery = serde_json::json!({
            "created_at": "2026-01-02T03:04:06.100000Z", "modified_at": null, "id": "d1", "succeeded": true,
            "http_code": 200, "response": "", "webhook_event": {
                "created_at": "2026-01-02T03:04:05.006000Z", "modified_at": null,
                "id": "6c0e6a52-0000-4000-8000-000000000007", "last_http_code": 200, "succeeded": true,
                "skipped": false, "payload": body, "type": "order.paid", "is_archived": false}});
        let delivery: Delivery = serde_json::from_value(delivery).unwrap();
        let item = listed(&delivery).unwrap();
        assert_eq!(item.payload.as_deref(), Some(body.as_bytes()));
        // At the delivery's time, which the list's window is on.
        assert_eq!(
            item.created_ms,
            crate::time::parse_rfc3339("2026-01-02T03:04:06.100Z").unwrap()
        );

        let scheme = crate::schemes::Scheme::named("polar").unwrap();
        let mut headers = http::HeaderMap::new();
        headers.insert(
            "webhook-id",
            "6c0e6a52-0000-4000-8000-000000000007".parse().unwrap(),
        );
        let uri = http::Uri::from_static("/");
        let crate::schemes::Identified::One(identity) = scheme
            .identify_request(&crate::schemes::Request::post(&uri, &headers, body.as_bytes()))
            .unwrap()
        else {
            panic!("one event")
        };
        assert_eq!(item.id, identity.event_id);
        assert_eq!(item.event_type, identity.event_type);
        assert!(item
            .headers
            .iter()
            .any(|(k, v)| k == "webhook-id" && *v == item.id));
    }

    #[test]
    fn debug_hides_the_token() {
        let p = Polar::new(
            reqwest::Url::parse("https://api.polar.sh").unwrap(),
            "4f3c",
            "polar_oat_secret".into(),
        )
        .unwrap();
        assert!(!format!("{p:?}").contains("polar_oat_secret"));
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
    async fn a_kept_event_is_found_again_by_its_id() {
        let (_fake, base, token) = served("polar", 150).await;
        let p = Polar::new(base, "3f1d2c4b-5a69-4e7f-8a9b-0c1d2e3f4a5b", token).unwrap();
        let window = Window {
            from_ms: 0,
            to_ms: i64::MAX,
        };
        let mut pages = vec![p.list(window, None).await.unwrap()];
        while let Some(next) = pages.last().unwrap().next.clone() {
            pages.push(p.list(window, Some(&next)).await.unwrap());
        }
        let ids: std::collections::HashSet<_> = pages.iter().flat_map(|p| &p.items).map(|i| &i.id).collect();
        assert_eq!(ids.len(), 150);
        let listed = &pages[1].items[5];
        let kept = Listed {
            payload: None,
            headers: vec![],
            ..listed.clone()
        };
        let got = p.fetch(&kept).await.unwrap();
        assert_eq!(Some(&got.payload), listed.payload.as_ref());
        assert_eq!(got.headers, listed.headers);
        let gone = Listed {
            id: "6c0e6a52-dead".into(),
            handle: "6c0e6a52-dead".into(),
            ..kept
        };
        assert!(matches!(p.fetch(&gone).await, Err(ProviderError::Failed(_))));
    }
}
