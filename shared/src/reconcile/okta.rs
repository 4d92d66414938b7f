//! Okta: the System Log, `GET /api/v1/logs` (`Authorization: SSWS <token>`), as a bounded request: `since` and
//! `until` (ISO 8601, on `published`) = the window, `sortOrder=DESCENDING` (newest first), `limit=1000` (the
//! OAS maximum), `filter=eventType eq "a" or eventType eq "b"` for the types the event hook subscribes to (the
//! System Log holds every event of the org; a hook delivers only its subscribed types). The next page is the
//! `Link` header's `rel="next"` URL (carrying `after`), absent on a bounded request's last page; an empty page ends
//! the walk too.
//! - OAS: `okta/okta-management-openapi-spec` @ fdda229, `dist/current/management-minimal.yaml`, `/api/v1/logs`
//!   (`listLogEvents`)
//! - https://developer.okta.com/docs/reference/system-log-query/ ("Bounded requests": `since` and `until`
//!   specified, "guaranteed to be in order according to the `published` field", "a finite number of pages"; its
//!   own `Link` example is `sortOrder=DESCENDING` with `since` and `until`)
//!
//! Retention: 90 days, "System Log data older than 90 days isn't returned, in accordance with Okta's Data
//! Retention Policy" (same page, "Data retention").
//!
//! Credential: the narrowest is an OAuth service app granted only `okta.logs.read`; the config takes an API token
//! (SSWS), which has its admin's rights: make it a read-only administrator's.
//!
//! An event hook POSTs an envelope (`{"eventType":"com.okta.event_hook", "eventId": <the delivery>, …,
//! "data":{"events":[<LogEvent>…]}}`) that batches several log events; our `okta` scheme stores each item of
//! `data.events` as its own event, its id the item's `uuid`, its type its `eventType`
//! (https://developer.okta.com/docs/concepts/event-hooks/: "This is the same object that the System Log API
//! defines"; dedupe "the `data.events.uuid` value"). The System Log lists those same objects, so what is stored
//! is the log event's bytes as listed: what the batch path stores per item. (A hook's items may also carry
//! `"insertionTimestamp": null`, which the API's object lacks.)
//!
//! There is no endpoint for one log event: an event an earlier run could not store is found again with
//! `filter=uuid eq "<uuid>"` over the two seconds around its `published`.

use async_trait::async_trait;
use bytes::Bytes;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::api::{json_headers, rfc3339_ms, send, url, Refusals};
use super::{api_client, json, Fetched, Listed, Page, Provider, ProviderError, Window};
use crate::time::rfc3339;

/// The most events a page holds (the OAS's maximum for `limit`).
const PAGE: &str = "1000";
const WHAT: &str = "GET /api/v1/logs";

const REFUSALS: Refusals = Refusals {
    unauthorized: "Okta refused the API token (E0000011: revoked, expired, or of another org)",
    forbidden: "the token may not read the System Log (its admin needs a role that reads logs; OAuth: okta.logs.read)",
    missing: "no System Log here: check api_base and domain",
};

#[derive(Debug)]
pub struct Okta {
    client: reqwest::Client,
    logs_url: reqwest::Url,
    /// The org's root, to check that a `Link` URL stays on it before the token is sent there.
    origin: String,
    /// `eventType eq "a" or eventType eq "b"`.
    filter: String,
    api_key: SecretString,
}

/// The fields of a log event read here; the event is stored as its bytes.
#[derive(Deserialize)]
struct LogEvent {
    uuid: String,
    #[serde(rename = "eventType")]
    event_type: Option<String>,
    published: String,
}

/// A SCIM string literal's content: the characters that cannot end or escape it are refused.
fn literal(value: &str) -> Option<&str> {
    (!value.is_empty() && !value.contains(['"', '\\'])).then_some(value)
}

/// `eventType eq "a" or eventType eq "b"`.
fn type_filter(event_types: &[String]) -> Result<String, String> {
    event_types
        .iter()
        .map(|t| {
            literal(t)
                .map(|t| format!("eventType eq \"{t}\""))
                .ok_or_else(|| format!("event type {t:?} cannot be written in a filter"))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(|all| all.join(" or "))
}

/// The `rel="next"` URL among a response's `Link` headers (Okta sends `self` and `next` as separate headers; a
/// comma-joined list is read the same way).
fn next_link(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get_all("link")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .find_map(|part| {
            let (url, params) = part.trim().split_once(';')?;
            let url = url.trim().strip_prefix('<')?.strip_suffix('>')?;
            params
                .split(';')
                .any(|p| matches!(p.trim(), "rel=\"next\"" | "rel=next"))
                .then(|| url.to_owned())
        })
}

impl Okta {
    /// `event_types`: the event hook's subscribed types; `api_key`: an API token (SSWS).
    pub fn new(api_base: reqwest::Url, event_types: &[String], api_key: String) -> Result<Okta, String> {
        Ok(Okta {
            client: api_client()?,
            logs_url: url(&api_base, "api/v1/logs")?,
            origin: api_base.origin().ascii_serialization(),
            filter: type_filter(event_types)?,
            api_key: SecretString::from(api_key),
        })
    }

    /// A bounded, newest-first query of `[from_ms, to_ms]` with `filter`.
    fn query(&self, from_ms: i64, to_ms: i64, filter: &str) -> reqwest::Url {
        let mut url = self.logs_url.clone();
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("since", &rfc3339(from_ms))
                .append_pair("until", &rfc3339(to_ms))
                .append_pair("sortOrder", "DESCENDING")
                .append_pair("limit", PAGE);
            if !filter.is_empty() {
                q.append_pair("filter", filter);
            }
        }
        url
    }

    /// One page of `url`: its events as stored, and the next page's URL.
    async fn page(&self, url: &str) -> Result<Page, ProviderError> {
        let request = self
            .client
            .get(url)
            .header("Accept", "application/json")
            .header("Authorization", format!("SSWS {}", self.api_key.expose_secret()));
        let response = send(request, WHAT, &REFUSALS).await?;
        let link = next_link(response.headers());
        let events: Vec<Box<RawValue>> = json(response, WHAT).await?;
        let items = events
            .iter()
            .map(|raw| listed(raw))
            .collect::<Result<Vec<_>, _>>()?;
        let next = if items.is_empty() { None } else { link };
        if let Some(n) = &next {
            if !n.starts_with(&format!("{}/", self.origin)) {
                return Err(ProviderError::Failed(format!(
                    "{WHAT}: the next page's link leaves the org's origin"
                )));
            }
        }
        Ok(Page { items, next })
    }
}

/// A log event as listed: stored as its bytes, what the hook's batch path stores per item.
fn listed(raw: &RawValue) -> Result<Listed, ProviderError> {
    let event: LogEvent = serde_json::from_str(raw.get()).map_err(|e| {
        ProviderError::Failed(format!(
            "{WHAT}: a log event without its uuid or published time: {e}"
        ))
    })?;
    Ok(Listed {
        created_ms: rfc3339_ms(&event.published, WHAT)?,
        handle: event.uuid.clone(),
        id: event.uuid,
        event_type: event.event_type.filter(|t| !t.is_empty()),
        payload: Some(Bytes::from(raw.get().as_bytes().to_vec())),
        headers: json_headers(),
    })
}

#[async_trait]
impl Provider for Okta {
    async fn list(&self, window: Window, cursor: Option<&str>) -> Result<Page, ProviderError> {
        let url = match cursor {
            Some(next) => next.to_owned(),
            None => self.query(window.from_ms, window.to_ms, &self.filter).to_string(),
        };
        self.page(&url).await
    }

    /// No endpoint gives one log event: `filter=uuid eq "…"` over the two seconds around its time finds it.
    async fn fetch(&self, item: &Listed) -> Result<Fetched, ProviderError> {
        if item.handle.is_empty() || !item.handle.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
            return Err(ProviderError::Failed(format!(
                "{:?} is not a log event's uuid",
                item.handle
            )));
        }
        let filter = format!("uuid eq \"{}\"", item.handle);
        let url = self.query(item.created_ms - 1000, item.created_ms + 1000, &filter);
        let page = self.page(url.as_str()).await?;
        let found = page
            .items
            .into_iter()
            .find(|l| l.id == item.handle)
            .ok_or_else(|| {
                ProviderError::Failed(format!(
                    "log event {} is no longer in the System Log (kept 90 days), or never was",
                    item.handle
                ))
            })?;
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

    fn okta() -> Okta {
        Okta::new(
            reqwest::Url::parse("https://acme.okta.com").unwrap(),
            &["user.lifecycle.create".into(), "user.lifecycle.deactivate".into()],
            "00secret-token".into(),
        )
        .unwrap()
    }

    #[test]
    fn the_query_is_bounded_newest_first_and_filtered_by_the_hooks_types() {
        let url = okta().query(1_700_000_000_000, 1_700_000_360_500, &okta().filter);
        let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        assert_eq!(url.path(), "/api/v1/logs");
        assert_eq!(
            pairs,
            [
                ("since", "2023-11-14T22:13:20.000Z"),
                ("until", "2023-11-14T22:19:20.500Z"),
                ("sortOrder", "DESCENDING"),
                ("limit", "1000"),
                (
                    "filter",
                    "eventType eq \"user.lifecycle.create\" or eventType eq \"user.lifecycle.deactivate\""
                ),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
        assert!(type_filter(&["a\" or uuid pr".into()]).is_err());
    }

    #[test]
    fn the_next_link_is_found_among_separate_link_headers() {
        let mut headers = http::HeaderMap::new();
        headers.append(
            "link",
            "<https://acme.okta.com/api/v1/logs?limit=2>; rel=\"self\""
                .parse()
                .unwrap(),
        );
        headers.append(
            "link",
            "<https://acme.okta.com/api/v1/logs?limit=2&after=abc>; rel=\"next\""
                .parse()
                .unwrap(),
        );
        assert_eq!(
            next_link(&headers).as_deref(),
            Some("https://acme.okta.com/api/v1/logs?limit=2&after=abc")
        );
        headers.remove("link");
        headers.append("link", "<https://acme.okta.com/x>; rel=\"self\"".parse().unwrap());
        assert_eq!(next_link(&headers), None);
    }

    /// A delivery as `testkit`'s fake Okta renders it (one log event; Okta batches several).
    const HOOK: &str = r#"{"eventType":"com.okta.event_hook","eventTypeVersion":"1.0","cloudEventsVersion":"0.1","source":"https://acme.okta.com/api/v1/eventHooks/who8tiyv6ctKbRp2z1d7","eventId":"4b1a0c2e-0000-4000-8000-000000000007","data":{"events":[{"uuid":"dc9fd3c0-598c-11ef-8478-000000000007","published":"2024-08-13T15:58:20.353Z","eventType":"user.lifecycle.create","version":"0","severity":"INFO","insertionTimestamp":null}]},"eventTime":"2024-08-13T15:58:22.353Z","contentType":"application/json"}"#;

    #[test]
    fn a_log_event_is_stored_as_the_hooks_batch_path_stores_its_item() {
        let item = r#"{"uuid":"dc9fd3c0-598c-11ef-8478-000000000007","published":"2024-08-13T15:58:20.353Z","eventType":"user.lifecycle.create","version":"0","severity":"INFO"}"#;
        let raw: Box<RawValue> = serde_json::from_str(item).unwrap();
        let listed = listed(&raw).unwrap();
        let scheme = crate::schemes::Scheme::named("okta").unwrap();
        let (uri, headers) = (http::Uri::from_static("/"), http::HeaderMap::new());
        let identified = scheme
            .identify_request(&crate::schemes::Request::post(&uri, &headers, HOOK.as_bytes()))
            .unwrap();
        let crate::schemes::Identified::Batch(items) = identified else {
            panic!("not a batch");
        };
        assert_eq!(items.len(), 1);
        assert_eq!(listed.id, items[0].identity.event_id);
        assert_eq!(listed.event_type, items[0].identity.event_type);
        assert_eq!(listed.created_ms, 1_723_564_700_353);
        // The same object as the hook's item, which also carries `insertionTimestamp: null`.
        let ours: serde_json::Value = serde_json::from_slice(listed.payload.as_ref().unwrap()).unwrap();
        let mut theirs: serde_json::Value = serde_json::from_slice(&items[0].payload).unwrap();
        theirs.as_object_mut().unwrap().remove("insertionTimestamp");
        assert_eq!(ours, theirs);
    }

    #[test]
    fn debug_never_shows_the_token() {
        let text = format!("{:?}", okta());
        assert!(!text.contains("00secret") && text.contains("REDACTED"), "{text}");
    }
}
