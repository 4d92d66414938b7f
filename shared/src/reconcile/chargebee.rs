//! Chargebee: `GET {site}.chargebee.com/api/v2/events?occurred_at[after]=S&occurred_at[before]=S&limit=100
//! &sort_by[desc]=occurred_at[&offset=…]` (https://apidocs.chargebee.com/docs/api/events#list_events; the official
//! OpenAPI `chargebee/openapi` and the SDK generated from it, `chargebee/chargebee-node`
//! `types/resources/Event.d.ts`), HTTP Basic with the API key as the user and no password
//! (https://apidocs.chargebee.com/docs/api/auth). `api_base` is the site's `/api/v2` root.
//! - Paging: `next_offset`, present "only if more resources are present", sent back verbatim as `offset` with the
//!   same filters. Page size: `limit`, 100 at most.
//! - Window: `occurred_at[after]` / `[before]` in unix seconds, both exclusive: asked one second wider below (the
//!   run drops what falls outside). Order: `sort_by[desc]=occurred_at`, newest first.
//! - Retention: not stated for the API; Chargebee's FAQ: "Events older than 90 days will not be visible in the UI"
//!   (https://chargebee.com/docs/1.0/site-configuration/articles-and-faq/can-i-filter-events-for-a-specific-customer-using-api.html),
//!   so 90 days.
//! - Credential: a read-only API key of the site ("Read All", or "Restricted" to transactional data;
//!   https://www.chargebee.com/docs/api_keys.html).
//! - Shape: the list wraps each event, `list[i].event`; the webhook's body is the bare `Event`, so the event is
//!   unwrapped. The listed event also carries what the webhook could not know when it was sent: `webhooks[]` (each
//!   endpoint's delivery status), `webhook_failure_reason`, and `webhook_status` as it is now (`failed`,
//!   `succeeded`) where the delivered body said `scheduled`. Those three are dropped, so the handler sees the
//!   webhook's fields less `webhook_status` (which no handler should read). Our scheme reads `json:/id` and
//!   `json:/event_type`. An event an earlier run could not store is fetched alone, `GET /api/v2/events/{id}`.
//! - Rate limits: 429 `api_request_limit_exceeded`; the official SDK waits the `Retry-After` seconds
//!   (`src/RequestWrapper.ts`); no `X-RateLimit-*` headers are documented.

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::api::{self, json_headers, send, to_payload, url, Refusals};
use super::{api_client, json, Fetched, Listed, Page, Provider, ProviderError, Window};

const REFUSALS: Refusals = Refusals {
    unauthorized:
        "Chargebee refused the API key (keys are per site: a test site's key differs from the live one's)",
    forbidden: "the API key may not read events (a read-only key needs \"Read All\" or transactional data)",
    missing: "Chargebee no longer has it, or never did (or the site is not this one)",
};

/// The fields of a listed event that a delivered webhook does not carry as listed (see the module doc).
const NOT_IN_THE_WEBHOOK: [&str; 3] = ["webhooks", "webhook_failure_reason", "webhook_status"];

#[derive(Debug)]
pub struct Chargebee {
    client: reqwest::Client,
    events_url: reqwest::Url,
    api_key: SecretString,
}

#[derive(Deserialize)]
struct List {
    #[serde(default)]
    list: Vec<Wrapped>,
    next_offset: Option<String>,
}

#[derive(Deserialize)]
struct Wrapped {
    event: serde_json::Value,
}

impl Chargebee {
    /// `api_base`: the site's API root, `https://{site}.chargebee.com/api/v2`; `api_key`: a read-only key.
    pub fn new(api_base: reqwest::Url, api_key: String) -> Result<Chargebee, String> {
        Ok(Chargebee {
            client: api_client()?,
            events_url: url(&api_base, "events")?,
            api_key: SecretString::from(api_key),
        })
    }

    async fn get(&self, url: reqwest::Url, what: &str) -> Result<reqwest::Response, ProviderError> {
        let request = self
            .client
            .get(url)
            .basic_auth(self.api_key.expose_secret(), Some(""))
            .header("Accept", "application/json");
        send(request, what, &REFUSALS).await
    }

    /// One page's URL: the window in whole seconds, one second wider below (`after` is exclusive).
    fn page_url(&self, window: Window, offset: Option<&str>) -> reqwest::Url {
        let mut url = self.events_url.clone();
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("limit", "100")
                .append_pair(
                    "occurred_at[after]",
                    &(window.from_ms.div_euclid(1000) - 1).to_string(),
                )
                .append_pair("occurred_at[before]", &api::ceil_secs(window.to_ms).to_string())
                .append_pair("sort_by[desc]", "occurred_at");
            if let Some(offset) = offset {
                query.append_pair("offset", offset);
            }
        }
        url
    }
}

/// A listed (or fetched) event, unwrapped: its id, type and time, and the event less what the webhook lacks.
fn listed(mut event: serde_json::Value, what: &str) -> Result<Listed, ProviderError> {
    let id = event
        .get("id")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned);
    let occurred = event.get("occurred_at").and_then(serde_json::Value::as_i64);
    let (Some(id), Some(occurred)) = (id, occurred) else {
        return Err(ProviderError::Failed(format!(
            "{what}: an event without an id or an occurred_at"
        )));
    };
    let event_type = event
        .get("event_type")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned);
    if let Some(fields) = event.as_object_mut() {
        for field in NOT_IN_THE_WEBHOOK {
            fields.remove(field);
        }
    }
    Ok(Listed {
        handle: id.clone(),
        id,
        event_type,
        created_ms: occurred.saturating_mul(1000),
        payload: Some(to_payload(&event)?),
        headers: json_headers(),
    })
}

#[async_trait]
impl Provider for Chargebee {
    async fn list(&self, window: Window, cursor: Option<&str>) -> Result<Page, ProviderError> {
        let what = "GET /api/v2/events";
        let page: List = json(self.get(self.page_url(window, cursor), what).await?, what).await?;
        let items = page
            .list
            .into_iter()
            .map(|w| listed(w.event, what))
            .collect::<Result<Vec<_>, _>>()?;
        let next = page.next_offset.filter(|o| !o.is_empty() && !items.is_empty());
        Ok(Page { items, next })
    }

    async fn fetch(&self, item: &Listed) -> Result<Fetched, ProviderError> {
        let what = format!("GET /api/v2/events/{}", item.handle);
        let url = api::child(&self.events_url, &item.handle)?;
        let wrapped: Wrapped = json(self.get(url, &what).await?, &what).await?;
        let found = listed(wrapped.event, &what)?;
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chargebee() -> Chargebee {
        let base = reqwest::Url::parse("https://acme-test.chargebee.com/api/v2").unwrap();
        Chargebee::new(base, "test_cdJ6sV9kbfNNcu".into()).unwrap()
    }

    #[test]
    fn a_page_asks_the_window_in_seconds_newest_first() {
        let window = Window {
            from_ms: 1_700_000_000_500,
            to_ms: 1_700_003_600_001,
        };
        assert_eq!(
            chargebee().page_url(window, None).as_str(),
            "https://acme-test.chargebee.com/api/v2/events?limit=100&occurred_at%5Bafter%5D=1699999999\
             &occurred_at%5Bbefore%5D=1700003601&sort_by%5Bdesc%5D=occurred_at"
        );
        let next = chargebee().page_url(window, Some(r#"["1700000100000","230"]"#));
        assert!(
            next.as_str()
                .ends_with("&offset=%5B%221700000100000%22%2C%22230%22%5D"),
            "{next}"
        );
    }

    #[test]
    fn debug_shows_no_key() {
        assert!(!format!("{:?}", chargebee()).contains("cdJ6sV9"));
    }

    #[test]
    fn the_event_is_unwrapped_and_loses_what_the_webhook_could_not_know() {
        let page: List = serde_json::from_value(json!({"list": [{"event": {
            "id": "ev_AzZTlmUVuxqH7000003", "occurred_at": 1_700_000_000, "object": "event", "api_version": "v2",
            "event_type": "customer_created", "source": "admin_console", "content": {"customer": {"id": "cust_1"}},
            "webhook_status": "failed", "webhook_failure_reason": "timeout",
            "webhooks": [{"id": "whv2_1", "webhook_status": "failed", "object": "webhook"}]}}],
            "next_offset": "[\"1700000000000\",\"1\"]"}))
        .unwrap();
        let item = listed(page.list.into_iter().next().unwrap().event, "t").unwrap();
        assert_eq!(item.created_ms, 1_700_000_000_000);
        let stored: serde_json::Value = serde_json::from_slice(item.payload.as_deref().unwrap()).unwrap();
        assert_eq!(
            stored,
            json!({"id": "ev_AzZTlmUVuxqH7000003", "occurred_at": 1_700_000_000, "object": "event",
                   "api_version": "v2", "event_type": "customer_created", "source": "admin_console",
                   "content": {"customer": {"id": "cust_1"}}})
        );
    }

    /// A webhook body as Chargebee sends it (the fake's rendering, copied): the listed id and type are the ones
    /// our scheme reads.
    #[test]
    fn the_listed_id_and_type_are_the_ones_the_scheme_reads() {
        let body = br#"{"api_version":"v2","content":{"customer":{"id":"cust_AzZTlmUVuxqH7","object":"customer"}},"event_type":"customer_created","id":"ev_AzZTlmUVuxqH7000003","object":"event","occurred_at":1796119200,"source":"admin_console","user":"ops@example.com","webhook_status":"scheduled"}"#;
        let item = listed(serde_json::from_slice(body).unwrap(), "t").unwrap();
        let scheme = crate::schemes::Scheme::named("chargebee").unwrap();
        let identity = scheme.identify(&http::HeaderMap::new(), body).unwrap();
        assert_eq!(identity.event_id, item.id);
        assert_eq!(identity.event_type, item.event_type);
    }
}
