//! Stripe: `GET /v1/events?created[gte]=S&created[lt]=S&limit=100[&starting_after=ID]`, newest first
//! (https://docs.stripe.com/api/events/list), cursor = the last id of the previous page while `has_more`
//! (https://docs.stripe.com/api/pagination). Stripe keeps events 30 days. The payload stored is the event object
//! as listed; a webhook of the same id arriving later is a duplicate. An event an earlier run could not store is
//! fetched again alone, `GET /v1/events/{id}` (https://docs.stripe.com/api/events/retrieve).

use async_trait::async_trait;
use bytes::Bytes;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::{
    api, api_client, endpoint, json, rate_limit_wait, transport_error, Fetched, Listed, Page, Provider,
    ProviderError, Window,
};

#[derive(Debug)]
pub struct Stripe {
    client: reqwest::Client,
    events_url: reqwest::Url,
    api_key: SecretString,
    account: Option<String>,
}

#[derive(Deserialize)]
struct List {
    data: Vec<serde_json::Value>,
    has_more: bool,
}

impl Stripe {
    /// `api_key`: a secret or restricted key with read access to events. `account`: Connect's `Stripe-Account`.
    pub fn new(api_base: reqwest::Url, api_key: String, account: Option<String>) -> Result<Stripe, String> {
        Ok(Stripe {
            client: api_client()?,
            events_url: reqwest::Url::parse(&endpoint(&api_base, "v1/events"))
                .map_err(|e| format!("api_base: {e}"))?,
            api_key: SecretString::from(api_key),
            account,
        })
    }
}

impl Stripe {
    /// One GET with the key (and the Connect account), its status read as the list and the retrieve share it;
    /// `missing` says what a 404 means here.
    async fn get(
        &self,
        url: reqwest::Url,
        what: &str,
        missing: &str,
    ) -> Result<reqwest::Response, ProviderError> {
        let mut request = self.client.get(url).bearer_auth(self.api_key.expose_secret());
        if let Some(account) = &self.account {
            request = request.header("Stripe-Account", account);
        }
        let response = request.send().await.map_err(transport_error)?;
        match response.status().as_u16() {
            200 => Ok(response),
            401 => Err(ProviderError::BadCredentials(
                "401: the API key is not valid".into(),
            )),
            403 => Err(ProviderError::BadCredentials(
                "403: the key may not read events (a restricted key needs read access to Events)".into(),
            )),
            // https://docs.stripe.com/rate-limits: back off on 429; Stripe does not promise a Retry-After.
            429 => Err(ProviderError::RateLimited {
                wait: rate_limit_wait(response.headers(), api::provider_now_secs()),
            }),
            404 => Err(ProviderError::Failed(format!("{what} answered 404: {missing}"))),
            s => Err(ProviderError::Failed(format!("{what} answered {s}"))),
        }
    }
}

#[async_trait]
impl Provider for Stripe {
    async fn list(&self, window: Window, cursor: Option<&str>) -> Result<Page, ProviderError> {
        let mut url = self.events_url.clone();
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("created[gte]", &api::ceil_secs(window.from_ms).to_string())
                .append_pair("created[lt]", &api::ceil_secs(window.to_ms).to_string())
                .append_pair("limit", "100");
            if let Some(after) = cursor {
                query.append_pair("starting_after", after);
            }
        }
        let response = self.get(url, "GET /v1/events", "check api_base").await?;
        let list: List = json(response, "GET /v1/events").await?;
        let mut items = Vec::with_capacity(list.data.len());
        for event in &list.data {
            let id = event.get("id").and_then(|v| v.as_str());
            let created = event.get("created").and_then(serde_json::Value::as_i64);
            let (Some(id), Some(created)) = (id, created) else {
                return Err(ProviderError::Failed(
                    "GET /v1/events: an event without an id or a created time".into(),
                ));
            };
            let payload = serde_json::to_vec(event)
                .map_err(|e| ProviderError::Failed(format!("cannot serialise an event: {e}")))?;
            items.push(Listed {
                id: id.to_owned(),
                event_type: event.get("type").and_then(|v| v.as_str()).map(str::to_owned),
                created_ms: created.saturating_mul(1000),
                payload: Some(Bytes::from(payload)),
                headers: vec![("content-type".into(), "application/json".into())],
                handle: id.to_owned(),
            });
        }
        let next = match (list.has_more, items.last()) {
            (true, Some(last)) => Some(last.id.clone()),
            (true, None) => {
                return Err(ProviderError::Failed(
                    "GET /v1/events: has_more with an empty page".into(),
                ))
            }
            (false, _) => None,
        };
        Ok(Page { items, next })
    }

    /// The list carries every event whole: only an event kept from an earlier run is fetched, alone.
    async fn fetch(&self, item: &Listed) -> Result<Fetched, ProviderError> {
        let what = format!("GET /v1/events/{}", item.handle);
        let url = api::child(&self.events_url, &item.handle)?;
        let event: serde_json::Value = json(
            self.get(
                url,
                &what,
                "Stripe no longer has it (it keeps events 30 days), or never did",
            )
            .await?,
            &what,
        )
        .await?;
        if event.get("id").and_then(|v| v.as_str()) != Some(item.id.as_str()) {
            return Err(ProviderError::Failed(format!(
                "{what}: the answer is another event"
            )));
        }
        let payload = serde_json::to_vec(&event)
            .map_err(|e| ProviderError::Failed(format!("cannot serialise an event: {e}")))?;
        Ok(Fetched {
            payload: Bytes::from(payload),
            event_type: event.get("type").and_then(|v| v.as_str()).map(str::to_owned),
            headers: vec![("content-type".into(), "application/json".into())],
        })
    }
}
