//! GitLab: a hook's events ("hook logs"), `GET /projects/:id/hooks/:hook_id/events` or
//! `GET /groups/:id/hooks/:hook_id/events` (GitLab 17.3+) with `PRIVATE-TOKEN`
//! (https://docs.gitlab.com/api/project_webhooks/#get-a-list-of-project-webhook-events,
//! https://docs.gitlab.com/api/group_webhooks/; the route `lib/api/hooks/events.rb`). Offset paging,
//! `per_page` at most 20 (`values: 1..20` in events.rb), the next page's number in `X-Next-Page` (empty on the
//! last), newest first (`order(created_at: :desc)`), and no time filter: the walk stops at the first row older
//! than its window. GitLab lists "events for a specific project webhook in the past 7 days"
//! (`WebHookLog::MAX_RECENT_DAYS = 7`): run it at least daily.
//!
//! Credential: a project (group) access token with the Maintainer (Owner) role and the `read_api` scope.
//!
//! Shape: one row is one delivery attempt, not one event (a retry or a manual resend is a row of its own), and it
//! wraps the request GitLab sent: `request_headers` as sent (the secret token shown `[REDACTED]`) and
//! `request_data`, the body parsed. Rows are grouped by `Idempotency-Key`, the id our scheme takes (the same on
//! every retry and resend); a row without one (written before GitLab 17.4) is skipped and counted nowhere: the
//! receiver's id for it is the SHA-256 of the body's exact bytes, which a re-serialised body cannot give. The
//! payload is `request_data` re-serialised (key order and spacing differ from the webhook's bytes, and GitLab
//! stores every e-mail address in it as `"[REDACTED]"`); the headers kept are those the receiver keeps
//! (`Idempotency-Key`, `X-Gitlab-Event`, `X-Gitlab-Event-UUID`, `X-Gitlab-Webhook-UUID`), the type
//! `X-Gitlab-Event`. A body GitLab did not keep (`{"oversize":true}`) fails that event alone.
//!
//! There is no endpoint for one row: an event kept failed by an earlier run is found again by paging the list
//! down to its creation time.

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::api::{json_headers, send, to_payload, url, Refusals};
use super::{api_client, json, Fetched, Listed, Page, Provider, ProviderError, Window};
use crate::config::GitlabHook;

const WHAT: &str = "list hook events";

const REFUSALS: Refusals = Refusals {
    unauthorized: "the token is not valid",
    forbidden: "the token may not read this hook's events (it needs read_api and the Maintainer role on the \
                project, Owner on the group)",
    missing: "no such hook, the token cannot see it, or GitLab is older than 17.3",
};

/// The request headers kept with an event, as the receiver keeps a webhook's (lower-case).
const KEPT: [&str; 4] = [
    "idempotency-key",
    "x-gitlab-event",
    "x-gitlab-event-uuid",
    "x-gitlab-webhook-uuid",
];

#[derive(Debug)]
pub struct Gitlab {
    client: reqwest::Client,
    events_url: reqwest::Url,
    token: SecretString,
}

/// A row of the list (`API::Entities::Hooks::WebHookLog`): the fields the run needs.
#[derive(Deserialize)]
struct Row {
    id: u64,
    #[serde(default)]
    request_headers: Map<String, Value>,
    #[serde(default)]
    request_data: Value,
    created_at: String,
}

impl Gitlab {
    pub fn new(api_base: reqwest::Url, hook: &GitlabHook, token: String) -> Result<Gitlab, String> {
        Ok(Gitlab {
            client: api_client()?,
            events_url: url(&api_base, &hook.events_path())?,
            token: SecretString::from(token),
        })
    }

    /// One page of rows, newest first, and the next page's number.
    async fn page(&self, page: u32) -> Result<(Vec<Row>, Option<u32>), ProviderError> {
        let mut url = self.events_url.clone();
        url.query_pairs_mut()
            .append_pair("per_page", "20")
            .append_pair("page", &page.to_string());
        let request = self
            .client
            .get(url)
            .header("PRIVATE-TOKEN", self.token.expose_secret());
        let response = send(request, WHAT, &REFUSALS).await?;
        let next = next_page(response.headers(), page);
        let rows: Vec<Row> = json(response, WHAT).await?;
        // A page shorter than asked is the last, whatever the headers say.
        let next = next.filter(|_| rows.len() == 20);
        Ok((rows, next))
    }
}

/// `X-Next-Page`: the next page's number, empty on the last page. Where a proxy dropped the header, the next
/// number is asked for (a short page ends the walk).
fn next_page(headers: &http::HeaderMap, page: u32) -> Option<u32> {
    match headers.get("x-next-page").map(|v| v.to_str().map(str::trim)) {
        Some(Ok("")) => None,
        Some(Ok(n)) => n.parse().ok(),
        Some(Err(_)) => None,
        None => page.checked_add(1),
    }
}

/// A page number as our cursor carries it.
fn cursor_page(cursor: Option<&str>) -> Result<u32, ProviderError> {
    match cursor {
        None => Ok(1),
        Some(c) => c
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| ProviderError::Failed(format!("{WHAT}: {c:?} is not a page number"))),
    }
}

/// A request header of a row, by name in any case.
fn header<'a>(headers: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .and_then(|(_, v)| v.as_str())
}

/// A row as an event: `None` for a row without `Idempotency-Key`. Its payload is `None` where GitLab did not keep
/// the body (`{"oversize": true}`).
fn row_event(row: &Row) -> Result<Option<Listed>, ProviderError> {
    let Some(key) = header(&row.request_headers, "idempotency-key").filter(|k| !k.is_empty()) else {
        return Ok(None);
    };
    let created_ms = lenient_ms(&row.created_at).ok_or_else(|| {
        ProviderError::Failed(format!(
            "{WHAT}: row {}: {:?} is not a time",
            row.id, row.created_at
        ))
    })?;
    let oversize = row.request_data.get("oversize") == Some(&Value::Bool(true));
    let payload = match &row.request_data {
        Value::Object(_) if !oversize => Some(to_payload(&row.request_data)?),
        _ => None,
    };
    let mut headers = json_headers();
    for name in KEPT {
        if let Some(v) = header(&row.request_headers, name) {
            headers.push((name.to_owned(), v.to_owned()));
        }
    }
    Ok(Some(Listed {
        id: key.to_owned(),
        event_type: header(&row.request_headers, "x-gitlab-event").map(str::to_owned),
        created_ms,
        payload,
        headers,
        handle: row.id.to_string(),
    }))
}

#[async_trait]
impl Provider for Gitlab {
    async fn list(&self, window: Window, cursor: Option<&str>) -> Result<Page, ProviderError> {
        let (rows, next) = self.page(cursor_page(cursor)?).await?;
        let mut items = Vec::with_capacity(rows.len());
        let mut passed = false;
        for row in &rows {
            // Newest first: once a row is older than the window, every later one is too.
            if lenient_ms(&row.created_at).is_some_and(|at| at < window.from_ms) {
                passed = true;
                break;
            }
            // Every attempt of a key is listed: the run takes the first inside its window and counts the id once.
            if let Some(item) = row_event(row)? {
                items.push(item);
            }
        }
        let next = if passed { None } else { next.map(|n| n.to_string()) };
        Ok(Page { items, next })
    }

    /// A listed row carries its body; an event kept from an earlier run is looked for again, page by page, down to
    /// the time it was listed at.
    async fn fetch(&self, item: &Listed) -> Result<Fetched, ProviderError> {
        let fetched = |payload, found: &Listed| Fetched {
            payload,
            event_type: found.event_type.clone().or(item.event_type.clone()),
            headers: found.headers.clone(),
        };
        let mut page = Some(1);
        while let Some(n) = page {
            let (rows, next) = self.page(n).await?;
            for row in &rows {
                let Some(found) = row_event(row)? else { continue };
                // One second below: GitLab's times may be whole seconds where ours kept milliseconds.
                if found.created_ms < item.created_ms - 1000 {
                    return Err(gone(item));
                }
                if found.id == item.id {
                    return match &found.payload {
                        Some(p) => Ok(fetched(p.clone(), &found)),
                        None => Err(ProviderError::Failed(format!(
                            "{WHAT}: GitLab did not keep event {}'s body (oversize)",
                            item.id
                        ))),
                    };
                }
            }
            page = next;
        }
        Err(gone(item))
    }
}

fn gone(item: &Listed) -> ProviderError {
    ProviderError::Failed(format!(
        "{WHAT}: event {} is no longer listed (GitLab shows 7 days)",
        item.id
    ))
}

/// The UTC milliseconds of an ISO 8601 time as APIs write it: RFC 3339 with `Z` or an offset (`-07:00`), or
/// without a zone (taken as UTC), `T` or a space between date and time.
pub(super) fn lenient_ms(text: &str) -> Option<i64> {
    let text = text.trim();
    let (local, offset_ms) = match text
        .len()
        .checked_sub(6)
        .and_then(|i| text.get(i..).map(|z| (i, z)))
    {
        Some((i, zone)) if matches!(zone.as_bytes(), [b'+' | b'-', _, _, b':', _, _]) => {
            let hours: i64 = zone.get(1..3)?.parse().ok()?;
            let minutes: i64 = zone.get(4..6)?.parse().ok()?;
            let sign = if zone.starts_with('-') { -1 } else { 1 };
            (text.get(..i)?, sign * (hours * 60 + minutes) * 60_000)
        }
        _ => (text, 0),
    };
    let at = humantime::parse_rfc3339_weak(local).ok()?;
    let ms = i64::try_from(at.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis()).ok()?;
    Some(ms - offset_ms)
}

/// Test support for the providers of this batch: a listed event of `fake`'s API kept as a failed event would be
/// (no payload, no headers), fetched again alone, must be the payload the fake says is stored; an id the API does
/// not have fails that item alone.
#[cfg(test)]
pub(super) async fn a_kept_event_is_fetched_again_alone(
    name: &str,
    build: impl Fn(reqwest::Url, String) -> Box<dyn Provider>,
) {
    use testkit::providers::{events_over, fakes, now_ms};
    let fake = fakes().into_iter().find(|f| f.provider() == name).unwrap();
    let base = reqwest::Url::parse(&fake.clone().start()).unwrap();
    let events = events_over(fake.as_ref(), fake.page_size() * 3 / 2, 10 * 3_600_000, 0);
    fake.api().add_all(events.clone());
    let credential = fake.block("KEPT", false).1.remove(0).1;
    let provider = build(base, credential);
    let window = Window {
        from_ms: now_ms() - 11 * 3_600_000,
        to_ms: now_ms(),
    };
    // The oldest event, on the last page: listed as a run lists it, then kept without its payload.
    let wanted = events.last().unwrap();
    let mut cursor: Option<String> = None;
    let listed = loop {
        let page = provider.list(window, cursor.as_deref()).await.unwrap();
        if let Some(hit) = page.items.into_iter().find(|i| i.id == wanted.id) {
            break hit;
        }
        cursor = Some(page.next.expect("the event is listed"));
    };
    let kept = Listed {
        payload: None,
        headers: Vec::new(),
        ..listed.clone()
    };
    let fetched = provider.fetch(&kept).await.unwrap();
    let payload: Value = serde_json::from_slice(&fetched.payload).unwrap();
    assert_eq!(payload, fake.stored(wanted), "{name}");
    assert_eq!(fetched.event_type, listed.event_type, "{name}");
    assert_eq!(fetched.headers, listed.headers, "{name}");
    let unknown = Listed {
        id: fake.new_id(999_999),
        handle: fake.new_id(999_999),
        ..kept
    };
    let err = provider.fetch(&unknown).await.unwrap_err();
    assert!(matches!(err, ProviderError::Failed(_)), "{name}: {err:?}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schemes::Scheme;

    fn rows(json: &str) -> Vec<Row> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn times_are_read_with_a_zone_an_offset_or_none() {
        assert_eq!(lenient_ms("2026-01-01T00:00:01.250Z"), Some(1_767_225_601_250));
        assert_eq!(
            lenient_ms("2025-12-31T17:00:01.250-07:00"),
            Some(1_767_225_601_250)
        );
        assert_eq!(lenient_ms("2026-01-01T05:30:01+05:30"), Some(1_767_225_601_000));
        assert_eq!(lenient_ms("2026-01-01 00:00:01.250"), Some(1_767_225_601_250));
        assert_eq!(lenient_ms("yesterday"), None);
    }

    #[test]
    fn the_next_page_comes_from_x_next_page() {
        let mut h = http::HeaderMap::new();
        assert_eq!(next_page(&h, 4), Some(5), "no header: ask, a short page ends it");
        h.insert("x-next-page", "".parse().unwrap());
        assert_eq!(next_page(&h, 4), None);
        h.insert("x-next-page", "5".parse().unwrap());
        assert_eq!(next_page(&h, 4), Some(5));
        assert_eq!(cursor_page(None).unwrap(), 1);
        assert_eq!(cursor_page(Some("3")).unwrap(), 3);
        assert!(cursor_page(Some("0")).is_err());
    }

    #[test]
    fn a_row_is_the_webhook_it_logged_and_a_row_without_a_key_is_skipped() {
        let page = rows(
            r#"[{"id":7,"trigger":"push_hooks","request_headers":{"Content-Type":"application/json",
                 "Idempotency-Key":"5c0d7b3e-9a0f-4c42-8e0b-7e6f3a2d1c90","X-Gitlab-Event":"Push Hook",
                 "X-Gitlab-Event-UUID":"e1","X-Gitlab-Webhook-UUID":"w1","X-Gitlab-Instance":"https://gitlab.example.com",
                 "X-Gitlab-Token":"[REDACTED]"},
                 "request_data":{"object_kind":"push","ref":"refs/heads/main","user_email":"[REDACTED]"},
                 "response_status":"500","created_at":"2026-01-01T00:00:01.250Z"},
                {"id":6,"request_headers":{"X-Gitlab-Event":"Push Hook"},"request_data":{"object_kind":"push"},
                 "response_status":"200","created_at":"2026-01-01T00:00:00.000Z"},
                {"id":5,"request_headers":{"Idempotency-Key":"k2","X-Gitlab-Event":"Note Hook"},
                 "request_data":{"oversize":true},"response_status":"200","created_at":"2026-01-01T00:00:00.000Z"}]"#,
        );
        let item = row_event(&page[0]).unwrap().unwrap();
        assert_eq!(item.id, "5c0d7b3e-9a0f-4c42-8e0b-7e6f3a2d1c90");
        assert_eq!(item.event_type.as_deref(), Some("Push Hook"));
        assert_eq!(item.handle, "7");
        assert_eq!(item.created_ms, 1_767_225_601_250);
        assert_eq!(
            item.headers,
            vec![
                ("content-type".to_owned(), "application/json".to_owned()),
                ("idempotency-key".to_owned(), item.id.clone()),
                ("x-gitlab-event".to_owned(), "Push Hook".to_owned()),
                ("x-gitlab-event-uuid".to_owned(), "e1".to_owned()),
                ("x-gitlab-webhook-uuid".to_owned(), "w1".to_owned()),
            ],
            "the token and the instance are not kept"
        );
        let stored: Value = serde_json::from_slice(item.payload.as_deref().unwrap()).unwrap();
        assert_eq!(stored, page[0].request_data);
        assert!(
            row_event(&page[1]).unwrap().is_none(),
            "no Idempotency-Key: skipped"
        );
        let oversize = row_event(&page[2]).unwrap().unwrap();
        assert!(oversize.payload.is_none(), "no body kept: fetch fails it");

        // The webhook this row logged: the scheme's id and type are the ones listed.
        let mut headers = http::HeaderMap::new();
        headers.insert(
            "idempotency-key",
            "5c0d7b3e-9a0f-4c42-8e0b-7e6f3a2d1c90".parse().unwrap(),
        );
        headers.insert("x-gitlab-event", "Push Hook".parse().unwrap());
        let body = br#"{"object_kind":"push","ref":"refs/heads/main","user_email":"jsmith@example.com"}"#;
        let identity = Scheme::named("gitlab").unwrap().identify(&headers, body).unwrap();
        assert_eq!(identity.event_id, item.id);
        assert_eq!(identity.event_type, item.event_type);
    }

    #[test]
    fn the_token_is_not_in_debug() {
        let hook: GitlabHook = "projects/7/hooks/11".parse().unwrap();
        let p = Gitlab::new(
            reqwest::Url::parse("https://gitlab.com/api/v4").unwrap(),
            &hook,
            "glpat-secret".into(),
        )
        .unwrap();
        let debug = format!("{p:?}");
        assert!(!debug.contains("glpat-secret"), "{debug}");
        assert!(debug.contains("/api/v4/projects/7/hooks/11/events"), "{debug}");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_kept_event_is_fetched_again_from_the_fake() {
        super::super::gitlab::a_kept_event_is_fetched_again_alone("gitlab", |base, credential| {
            Box::new(Gitlab::new(base, &"projects/7/hooks/11".parse().unwrap(), credential).unwrap())
        })
        .await;
    }
}
