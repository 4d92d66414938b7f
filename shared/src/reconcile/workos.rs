//! WorkOS: `GET /events?range_start=T&range_end=T&limit=100&order=desc[&after=ID]`, Bearer API key
//! (https://workos.com/docs/reference/events; OpenAPI `workos/openapi-spec` `spec/open-api-spec.yaml`,
//! `EventsController_list`). Newest first (`order=desc`); the next page's cursor is `list_metadata.after`, `null`
//! at the end; `limit` is 1 to 100. "The Events API returns events up to 30 days old"
//! (https://workos.com/docs/events).
//!
//! Window: `range_start` and `range_end` are documented as events created "after" and "before" a date, without
//! saying whether either end is inclusive: we ask for `(from − 1 ms, to)`, which holds `[from, to)` either way (the
//! run drops what lies outside the window). No `events` type filter is sent: the current OpenAPI makes it
//! optional; an API that still requires it answers 422, which fails the run naming the parameter.
//!
//! Credential: a secret API key (`sk_…`) of the environment whose webhooks these are; where the dashboard scopes
//! keys, one with only the Events read permission.
//!
//! Shape: the webhook body is `{"id","event","data","created_at"[,"context"]}`; the API's event is the same object
//! with `"object":"event"` added ("The Event IDs passed in webhook bodies are the same as those returned by the
//! Events API", https://workos.com/docs/events/quick-start). We store the listed event without `object`, so the
//! handler sees the webhook's shape; the id is `id` and the type `event`, where our scheme finds them.
//!
//! There is no `GET /events/{id}`: an event kept failed by an earlier run is found again by a list query over the
//! millisecond it was created at, narrowed to its type.

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::Value;

use super::api::{json_headers, send, to_payload, url, Refusals};
use super::gitlab::lenient_ms;
use super::{api_client, json, Fetched, Listed, Page, Provider, ProviderError, Window};
use crate::time::rfc3339;

const WHAT: &str = "GET /events";

const REFUSALS: Refusals = Refusals {
    unauthorized: "the API key is not valid",
    forbidden: "the API key may not read events (it needs the Events read permission)",
    missing: "no events API there: check api_base",
};

#[derive(Debug)]
pub struct Workos {
    client: reqwest::Client,
    events_url: reqwest::Url,
    api_key: SecretString,
}

#[derive(Deserialize)]
struct List {
    data: Vec<Value>,
    list_metadata: ListMetadata,
}

#[derive(Deserialize)]
struct ListMetadata {
    after: Option<String>,
}

impl Workos {
    pub fn new(api_base: reqwest::Url, api_key: String) -> Result<Workos, String> {
        Ok(Workos {
            client: api_client()?,
            events_url: url(&api_base, "events")?,
            api_key: SecretString::from(api_key),
        })
    }

    /// One page of `GET /events` over `(after_ms, before_ms)`, optionally of one type.
    async fn page(
        &self,
        after_ms: i64,
        before_ms: i64,
        event_type: Option<&str>,
        cursor: Option<&str>,
    ) -> Result<(Vec<Listed>, Option<String>), ProviderError> {
        let url = events_query(&self.events_url, after_ms, before_ms, event_type, cursor);
        let request = self.client.get(url).bearer_auth(self.api_key.expose_secret());
        let response = match send(request, WHAT, &REFUSALS).await {
            Err(ProviderError::Failed(text)) if text.contains("422") => {
                return Err(ProviderError::Failed(format!(
                    "{text}: the API wants the `events` type filter, which this provider does not send"
                )))
            }
            other => other?,
        };
        let list: List = json(response, WHAT).await?;
        let items = list.data.iter().map(listed).collect::<Result<Vec<_>, _>>()?;
        let next = list
            .list_metadata
            .after
            .filter(|a| !a.is_empty() && !items.is_empty());
        Ok((items, next))
    }
}

/// The list URL: the window as WorkOS takes it (`range_start` one millisecond early: see the module doc), the most
/// per page, newest first.
fn events_query(
    base: &reqwest::Url,
    after_ms: i64,
    before_ms: i64,
    event_type: Option<&str>,
    cursor: Option<&str>,
) -> reqwest::Url {
    let mut url = base.clone();
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("range_start", &rfc3339(after_ms))
            .append_pair("range_end", &rfc3339(before_ms))
            .append_pair("limit", "100")
            .append_pair("order", "desc");
        if let Some(t) = event_type {
            q.append_pair("events", t);
        }
        if let Some(after) = cursor {
            q.append_pair("after", after);
        }
    }
    url
}

/// One listed event, stored without the API's `"object":"event"` (the webhook's body has none).
fn listed(event: &Value) -> Result<Listed, ProviderError> {
    let text = |k: &str| event.get(k).and_then(Value::as_str);
    let (Some(id), Some(created)) = (text("id"), text("created_at")) else {
        return Err(ProviderError::Failed(format!(
            "{WHAT}: an event without an id or a created_at"
        )));
    };
    let created_ms = lenient_ms(created)
        .ok_or_else(|| ProviderError::Failed(format!("{WHAT}: event {id}: {created:?} is not a time")))?;
    let mut body = event.clone();
    if let Some(object) = body.as_object_mut() {
        object.remove("object");
    }
    Ok(Listed {
        id: id.to_owned(),
        event_type: text("event").map(str::to_owned),
        created_ms,
        payload: Some(to_payload(&body)?),
        headers: json_headers(),
        handle: id.to_owned(),
    })
}

#[async_trait]
impl Provider for Workos {
    async fn list(&self, window: Window, cursor: Option<&str>) -> Result<Page, ProviderError> {
        let (items, next) = self.page(window.from_ms - 1, window.to_ms, None, cursor).await?;
        Ok(Page { items, next })
    }

    /// A listed event carries its payload; one kept from an earlier run is looked for over the millisecond it was
    /// created at, of its type (no endpoint gets one event).
    async fn fetch(&self, item: &Listed) -> Result<Fetched, ProviderError> {
        let found = match &item.payload {
            Some(_) => Some(item.clone()),
            None => {
                let mut cursor: Option<String> = None;
                loop {
                    let (items, next) = self
                        .page(
                            item.created_ms - 1,
                            item.created_ms + 1,
                            item.event_type.as_deref(),
                            cursor.as_deref(),
                        )
                        .await?;
                    if let Some(hit) = items.into_iter().find(|i| i.id == item.id) {
                        break Some(hit);
                    }
                    match next {
                        Some(n) => cursor = Some(n),
                        None => break None,
                    }
                }
            }
        };
        match found {
            Some(Listed {
                payload: Some(payload),
                event_type,
                headers,
                ..
            }) => Ok(Fetched {
                payload,
                event_type,
                headers,
            }),
            _ => Err(ProviderError::Failed(format!(
                "{WHAT}: event {} is no longer listed (WorkOS keeps events 30 days)",
                item.id
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schemes::Scheme;

    #[test]
    fn the_query_asks_for_the_window_newest_first_and_the_most_per_page() {
        let base = reqwest::Url::parse("https://api.workos.com/events").unwrap();
        let url = events_query(
            &base,
            1_767_225_599_999,
            1_767_229_200_000,
            None,
            Some("event_01X"),
        );
        assert_eq!(
            url.as_str(),
            "https://api.workos.com/events?range_start=2025-12-31T23%3A59%3A59.999Z\
             &range_end=2026-01-01T01%3A00%3A00.000Z&limit=100&order=desc&after=event_01X"
        );
        let narrow = events_query(&base, 0, 2, Some("dsync.user.created"), None);
        assert!(narrow.as_str().contains("&events=dsync.user.created"), "{narrow}");
    }

    #[test]
    fn a_listed_event_is_stored_as_the_webhook_carries_it() {
        let api: Value = serde_json::from_str(
            r#"{"object":"event","id":"event_01J0000000000000000000042","event":"dsync.user.created",
                "data":{"id":"directory_user_01","object":"directory_user"},"created_at":"2026-01-01T00:00:01.250Z"}"#,
        )
        .unwrap();
        let item = listed(&api).unwrap();
        assert_eq!(item.id, "event_01J0000000000000000000042");
        assert_eq!(item.event_type.as_deref(), Some("dsync.user.created"));
        assert_eq!(item.created_ms, 1_767_225_601_250);
        let stored: Value = serde_json::from_slice(item.payload.as_deref().unwrap()).unwrap();
        assert_eq!(stored.get("object"), None);
        assert_eq!(
            stored["data"]["object"], "directory_user",
            "only the event's own object is dropped"
        );

        // The webhook the fake renders for this event: the scheme finds the id and type we list.
        let body = br#"{"id":"event_01J0000000000000000000042","event":"dsync.user.created","data":{"id":"directory_user_01","object":"directory_user"},"created_at":"2026-01-01T00:00:01.250Z"}"#;
        let scheme = Scheme::named("workos").unwrap();
        let identity = scheme.identify(&http::HeaderMap::new(), body).unwrap();
        assert_eq!(identity.event_id, item.id);
        assert_eq!(identity.event_type, item.event_type);
        assert_eq!(stored, serde_json::from_slice::<Value>(body).unwrap());
    }

    #[test]
    fn an_event_without_an_id_fails_the_page() {
        let err =
            listed(&serde_json::json!({"event": "x", "created_at": "2026-01-01T00:00:00Z"})).unwrap_err();
        assert!(matches!(err, ProviderError::Failed(_)));
    }

    #[test]
    fn the_key_is_not_in_debug() {
        let p = Workos::new(
            reqwest::Url::parse("https://api.workos.com").unwrap(),
            "sk_test_secret".into(),
        )
        .unwrap();
        assert!(!format!("{p:?}").contains("sk_test_secret"));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_kept_event_is_fetched_again_from_the_fake() {
        super::super::gitlab::a_kept_event_is_fetched_again_alone("workos", |base, credential| {
            Box::new(Workos::new(base, credential).unwrap())
        })
        .await;
    }
}
