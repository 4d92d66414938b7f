//! PayPal: `GET /v1/notifications/webhooks-events?start_time=…&end_time=…&page_size=100`
//! (https://developer.paypal.com/api/webhooks/v1/webhooks-events-list; OpenAPI `paypal/paypal-rest-api-specifications`
//! `openapi/notifications_webhooks_v1.json`, operation `webhooks-events.list`), authenticated with an OAuth2
//! client-credentials token: `POST /v1/oauth2/token` with HTTP Basic `client_id:client_secret` and
//! `grant_type=client_credentials` (https://developer.paypal.com/api/rest/authentication/), kept until shortly
//! before its `expires_in` (PayPal: asking a token per call is the way to get rate limited), and asked again once
//! when a call answers 401 with a kept token (it may have been revoked or expired early).
//! - Paging: HATEOAS only, the answer's `links[]` entry with `rel: "next"`, followed verbatim (its query is opaque);
//!   no link, or an empty page, is the end.
//! - Window: `start_time` and `end_time`, RFC 3339, both inclusive: asked in whole seconds around the window (the
//!   run drops what falls outside). Order: undocumented (newest first as observed); the run needs none.
//! - Page size: the spec gives `page_size` a default of 10 and no maximum; 100 is asked (unverified above).
//! - Retention: not stated for the API; the Events dashboard says "The range must be in the last 30 days"
//!   (https://developer.paypal.com/api/rest/webhooks/events-dashboard), so 30 days.
//! - Credential: the REST app that owns the webhook (events are per app), with the spec's only scope for this
//!   resource, `https://uri.paypal.com/services/applications/webhooks`; PayPal has no read-only variant of it.
//! - Shape: the webhook's body is the same `event` object the list shows (`id` `WH-…`, `event_type`,
//!   `create_time`, `resource`, …, no envelope), so the listed object is stored as it is; our scheme reads
//!   `json:/id` and `json:/event_type` from it. The transmission headers (`paypal-transmission-id`, `-time`) have
//!   no counterpart in the API and are not kept. An event an earlier run could not store is fetched alone:
//!   `GET /v1/notifications/webhooks-events/{id}` (`webhooks-events.get`).
//! - Rate limits: PayPal publishes neither limits nor rate-limit headers (429 `RATE_LIMIT_REACHED`;
//!   https://developer.paypal.com/reference/guidelines/rate-limiting); a `Retry-After` is honoured where present.

use std::time::Duration;

use tokio::time::Instant;

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::api::{self, json_headers, rfc3339_ms, send, to_payload, url, Refusals};
use super::{api_client, json, Fetched, Listed, Page, Provider, ProviderError, Window};

const REFUSALS: Refusals = Refusals {
    unauthorized: "PayPal refused the REST app's client id and secret (or its token)",
    forbidden: "the REST app may not read webhook events (scope https://uri.paypal.com/services/applications/webhooks)",
    missing: "PayPal no longer has it (it keeps events 30 days), or never did",
};

/// How long before its end a kept token is asked again (clocks and the request's own time).
const TOKEN_MARGIN: Duration = Duration::from_secs(120);

#[derive(Debug)]
pub struct Paypal {
    client: reqwest::Client,
    token_url: reqwest::Url,
    events_url: reqwest::Url,
    /// Not a secret by itself, but read from a secret reference like the secret: kept out of `Debug` as well.
    client_id: SecretString,
    client_secret: SecretString,
    /// The access token and when it stops being used.
    token: tokio::sync::Mutex<Option<(SecretString, Instant)>>,
}

#[derive(Deserialize)]
struct Token {
    access_token: String,
    /// Seconds.
    expires_in: Option<u64>,
}

#[derive(Deserialize)]
struct EventList {
    #[serde(default)]
    events: Vec<serde_json::Value>,
    #[serde(default)]
    links: Vec<Link>,
}

#[derive(Deserialize)]
struct Link {
    href: String,
    rel: String,
}

impl Paypal {
    /// `client_id` + `client_secret`: the REST app whose webhooks these are.
    pub fn new(api_base: reqwest::Url, client_id: String, client_secret: String) -> Result<Paypal, String> {
        Ok(Paypal {
            client: api_client()?,
            token_url: url(&api_base, "v1/oauth2/token")?,
            events_url: url(&api_base, "v1/notifications/webhooks-events")?,
            client_id: SecretString::from(client_id),
            client_secret: SecretString::from(client_secret),
            token: tokio::sync::Mutex::new(None),
        })
    }

    /// The kept token, or a new one. Held under the lock so that concurrent calls ask once.
    async fn token(&self) -> Result<(SecretString, bool), ProviderError> {
        let mut kept = self.token.lock().await;
        if let Some((token, until)) = kept.as_ref() {
            if Instant::now() < *until {
                return Ok((token.clone(), true));
            }
        }
        let what = "POST /v1/oauth2/token";
        let request = self
            .client
            .post(self.token_url.clone())
            .basic_auth(
                self.client_id.expose_secret(),
                Some(self.client_secret.expose_secret()),
            )
            .header("Accept", "application/json")
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body("grant_type=client_credentials");
        let answer: Token = json(send(request, what, &REFUSALS).await?, what).await?;
        let lasts = Duration::from_secs(answer.expires_in.unwrap_or(0)).saturating_sub(TOKEN_MARGIN);
        let token = SecretString::from(answer.access_token);
        *kept = Some((token.clone(), Instant::now() + lasts));
        Ok((token, false))
    }

    /// One GET with the token; a 401 with a kept token asks a new one and tries once more.
    async fn get(&self, url: &reqwest::Url, what: &str) -> Result<reqwest::Response, ProviderError> {
        let (token, was_kept) = self.token().await?;
        let request = |token: &SecretString| {
            self.client
                .get(url.clone())
                .bearer_auth(token.expose_secret())
                .header("Accept", "application/json")
        };
        match send(request(&token), what, &REFUSALS).await {
            Err(ProviderError::BadCredentials(_)) if was_kept => {
                *self.token.lock().await = None;
                let (token, _) = self.token().await?;
                send(request(&token), what, &REFUSALS).await
            }
            other => other,
        }
    }

    /// The first page's URL: the window in whole seconds around it, both ends inclusive.
    fn first_page(&self, window: Window) -> reqwest::Url {
        let mut url = self.events_url.clone();
        url.query_pairs_mut()
            .append_pair("start_time", &rfc3339_secs(window.from_ms.div_euclid(1000)))
            .append_pair("end_time", &rfc3339_secs(api::ceil_secs(window.to_ms)))
            .append_pair("page_size", "100");
        url
    }
}

/// `2026-12-02T06:00:00Z`.
fn rfc3339_secs(secs: i64) -> String {
    let text = crate::time::rfc3339(secs.saturating_mul(1000));
    // `…:00.000Z` → `…:00Z`: the spec's examples are whole seconds.
    match text.strip_suffix(".000Z") {
        Some(head) => format!("{head}Z"),
        None => text,
    }
}

/// A listed (or fetched) event: its id, type and creation time, and the object itself as the payload.
fn listed(event: &serde_json::Value, what: &str) -> Result<Listed, ProviderError> {
    let text = |k: &str| event.get(k).and_then(serde_json::Value::as_str);
    let (Some(id), Some(created)) = (text("id"), text("create_time")) else {
        return Err(ProviderError::Failed(format!(
            "{what}: an event without an id or a create_time"
        )));
    };
    Ok(Listed {
        id: id.to_owned(),
        event_type: text("event_type").map(str::to_owned),
        created_ms: rfc3339_ms(created, what)?,
        payload: Some(to_payload(event)?),
        headers: json_headers(),
        handle: id.to_owned(),
    })
}

#[async_trait]
impl Provider for Paypal {
    async fn list(&self, window: Window, cursor: Option<&str>) -> Result<Page, ProviderError> {
        let what = "GET /v1/notifications/webhooks-events";
        let url = match cursor {
            None => self.first_page(window),
            // The `next` link's query on our own list URL: PayPal writes its links on other hosts than the one
            // asked (`api.paypal.com` for `api-m.paypal.com`), and the token goes nowhere but `api_base`.
            Some(next) => {
                let link = reqwest::Url::parse(next)
                    .map_err(|_| ProviderError::Failed(format!("{what}: the next link is not a URL")))?;
                let mut url = self.events_url.clone();
                url.set_query(link.query());
                url
            }
        };
        let list: EventList = json(self.get(&url, what).await?, what).await?;
        let items = list
            .events
            .iter()
            .map(|e| listed(e, what))
            .collect::<Result<Vec<_>, _>>()?;
        let next = if items.is_empty() {
            None
        } else {
            list.links.into_iter().find(|l| l.rel == "next").map(|l| l.href)
        };
        Ok(Page { items, next })
    }

    async fn fetch(&self, item: &Listed) -> Result<Fetched, ProviderError> {
        let what = format!("GET /v1/notifications/webhooks-events/{}", item.handle);
        let url = api::child(&self.events_url, &item.handle)?;
        let event: serde_json::Value = json(self.get(&url, &what).await?, &what).await?;
        let found = listed(&event, &what)?;
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

    fn paypal() -> Paypal {
        let base = reqwest::Url::parse("https://api-m.paypal.com").unwrap();
        Paypal::new(base, "AYSq3RDGsmBLJE".into(), "EGnHDxD_qRPdaLdZz8i".into()).unwrap()
    }

    #[test]
    fn the_first_page_asks_the_window_in_whole_seconds_around_it() {
        let url = paypal().first_page(Window {
            from_ms: 1_700_000_000_500,
            to_ms: 1_700_003_600_001,
        });
        assert_eq!(
            url.as_str(),
            "https://api-m.paypal.com/v1/notifications/webhooks-events?start_time=2023-11-14T22%3A13%3A20Z\
             &end_time=2023-11-14T23%3A13%3A21Z&page_size=100"
        );
    }

    #[test]
    fn debug_shows_no_credential() {
        let text = format!("{:?}", paypal());
        assert!(!text.contains("AYSq3") && !text.contains("EGnHD"), "{text}");
    }

    /// A webhook body as PayPal sends it (the fake's rendering, copied): the id and type the list gives are the
    /// ones our scheme reads from the webhook.
    #[test]
    fn the_listed_id_and_type_are_the_ones_the_scheme_reads() {
        let body = br#"{"id":"WH-7YX49823S2290830K-00000000000000003","create_time":"2026-12-01T10:00:00.250Z","resource_type":"capture","event_type":"PAYMENT.CAPTURE.COMPLETED","event_version":"1.0","resource_version":"2.0","summary":"Payment completed for $ 13.00 USD","resource":{"id":"5O190127TN364715T","status":"COMPLETED"},"links":[]}"#;
        let event: serde_json::Value = serde_json::from_slice(body).unwrap();
        let item = listed(&event, "test").unwrap();
        let scheme = crate::schemes::Scheme::named("paypal").unwrap();
        let identity = scheme.identify(&http::HeaderMap::new(), body).unwrap();
        assert_eq!(identity.event_id, item.id);
        assert_eq!(identity.event_type, item.event_type);
        assert_eq!(item.created_ms, 1_796_119_200_250);
        assert_eq!(
            item.payload
                .as_deref()
                .map(|p| serde_json::from_slice::<serde_json::Value>(p).unwrap()),
            Some(event)
        );
    }

    #[test]
    fn an_event_without_an_id_fails_the_page() {
        let event = serde_json::json!({"create_time": "2026-12-01T10:00:00Z"});
        assert!(matches!(listed(&event, "x"), Err(ProviderError::Failed(_))));
    }
}
