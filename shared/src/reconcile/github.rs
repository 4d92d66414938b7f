//! GitHub: a hook's deliveries, newest first, `per_page=100`, the next page's URL in the `Link` header, no time
//! filter (so a walk stops at the first delivery older than its window). Each event (`guid` = the webhook's
//! `X-GitHub-Delivery`) may have several deliveries, some failed; the run counts a guid once. The payload and the
//! event name come from one delivery's detail (`request.headers`, `request.payload`). GitHub keeps deliveries
//! 3 days.
//! - https://docs.github.com/en/rest/repos/webhooks#list-deliveries-for-a-repository-webhook
//! - https://docs.github.com/en/rest/orgs/webhooks#list-deliveries-for-an-organization-webhook
//! - https://docs.github.com/en/rest/apps/webhooks#list-deliveries-for-an-app-webhook (JWT only)
//! - https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api

use async_trait::async_trait;
use bytes::Bytes;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use super::{
    api_client, endpoint, json, rate_limit_wait, transport_error, Fetched, Listed, Page, Provider,
    ProviderError, Window,
};
use crate::config::GithubHook;
use crate::time::parse_rfc3339;

const API_VERSION: &str = "2022-11-28";
const ACCEPT: &str = "application/vnd.github+json";

/// How requests are authenticated. `Debug` never prints the token or the key.
pub enum Auth {
    Token(SecretString),
    /// A GitHub App: each request carries a fresh JWT (RS256, `iss` = the App id, `iat` = now − 60 s against
    /// clock drift, `exp` = now + 9 min, under GitHub's 10 min limit).
    /// https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-json-web-token-jwt-for-a-github-app
    App {
        app_id: u64,
        key: jsonwebtoken::EncodingKey,
    },
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::Token(_) => f.write_str("Token([redacted])"),
            Auth::App { app_id, .. } => write!(f, "App {{ app_id: {app_id}, key: [redacted] }}"),
        }
    }
}

#[derive(Serialize)]
struct Claims {
    iat: i64,
    exp: i64,
    iss: String,
}

impl Auth {
    pub fn token(token: String) -> Auth {
        Auth::Token(SecretString::from(token))
    }

    /// The App's PEM private key (PKCS#1 as GitHub hands it out, or PKCS#8). The error never quotes the key.
    pub fn app(app_id: u64, pem: &str) -> Result<Auth, String> {
        let key = jsonwebtoken::EncodingKey::from_rsa_pem(pem.as_bytes())
            .map_err(|_| "not an RSA private key in PEM form".to_owned())?;
        let auth = Auth::App { app_id, key };
        // Sign once now, so a key the signer refuses fails at start rather than at the first run.
        auth.bearer()?;
        Ok(auth)
    }

    fn bearer(&self) -> Result<SecretString, String> {
        match self {
            Auth::Token(token) => Ok(token.clone()),
            Auth::App { app_id, key } => {
                let now = super::api::provider_now_secs();
                let claims = Claims {
                    iat: now - 60,
                    exp: now + 9 * 60,
                    iss: app_id.to_string(),
                };
                jsonwebtoken::encode(
                    &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
                    &claims,
                    key,
                )
                .map(SecretString::from)
                .map_err(|e| format!("cannot sign the App's JWT: {e}"))
            }
        }
    }
}

#[derive(Debug)]
pub struct Github {
    client: reqwest::Client,
    /// The API root, to check that a `Link` URL stays on it before the credentials are sent there.
    origin: String,
    deliveries_url: String,
    auth: Auth,
}

/// A delivery as the list shows it (the fields the run needs).
#[derive(Deserialize)]
struct Delivery {
    id: u64,
    guid: String,
    delivered_at: String,
    event: Option<String>,
}

/// A delivery's detail: the request GitHub sent.
#[derive(Deserialize)]
struct Detail {
    event: Option<String>,
    request: DetailRequest,
}

#[derive(Deserialize)]
struct DetailRequest {
    #[serde(default)]
    headers: serde_json::Map<String, serde_json::Value>,
    payload: Option<serde_json::Value>,
}

impl Github {
    pub fn new(api_base: reqwest::Url, hook: GithubHook, auth: Auth) -> Result<Github, String> {
        Ok(Github {
            client: api_client()?,
            origin: api_base.origin().ascii_serialization(),
            deliveries_url: endpoint(&api_base, &hook.deliveries_path()),
            auth,
        })
    }

    /// One GET; `missing` says what a 404 means here.
    async fn get(&self, url: &str, what: &str, missing: &str) -> Result<reqwest::Response, ProviderError> {
        let bearer = self.auth.bearer().map_err(ProviderError::Failed)?;
        let response = self
            .client
            .get(url)
            .header("Accept", ACCEPT)
            .header("X-GitHub-Api-Version", API_VERSION)
            .bearer_auth(bearer.expose_secret())
            .send()
            .await
            .map_err(transport_error)?;
        let status = response.status().as_u16();
        if status == 200 {
            return Ok(response);
        }
        let headers = response.headers().clone();
        let now = super::api::provider_now_secs();
        Err(match status {
            401 => ProviderError::BadCredentials(format!("{what}: 401 Bad credentials")),
            // A primary or secondary rate limit is a 403 or a 429: wait `Retry-After`, else until
            // `X-RateLimit-Reset` when `X-RateLimit-Remaining` is 0, else (a secondary limit that says nothing)
            // at least a minute. A 403 that is none of these is a permission refusal.
            403 | 429 => match rate_limit_wait(&headers, now) {
                Some(wait) => ProviderError::RateLimited { wait: Some(wait) },
                None => {
                    let body = response.text().await.unwrap_or_default().to_ascii_lowercase();
                    if status == 429 || body.contains("rate limit") {
                        ProviderError::RateLimited {
                            wait: Some(std::time::Duration::from_secs(60)),
                        }
                    } else {
                        ProviderError::BadCredentials(format!(
                            "{what}: 403: the credentials may not read this hook's deliveries"
                        ))
                    }
                }
            },
            404 => ProviderError::Failed(format!("{what}: 404: {missing}")),
            s => ProviderError::Failed(format!("{what}: answered {s}")),
        })
    }
}

/// The `rel="next"` URL of a `Link` header: `<https://…&cursor=v1_2>; rel="next", <…>; rel="prev"`.
fn next_link(link: &str) -> Option<&str> {
    link.split(',').find_map(|part| {
        let (url, params) = part.trim().split_once(';')?;
        let url = url.trim().strip_prefix('<')?.strip_suffix('>')?;
        params
            .split(';')
            .any(|p| matches!(p.trim(), "rel=\"next\"" | "rel=next"))
            .then_some(url)
    })
}

#[async_trait]
impl Provider for Github {
    async fn list(&self, window: Window, cursor: Option<&str>) -> Result<Page, ProviderError> {
        let url = match cursor {
            Some(next) => {
                // The cursor is the Link URL GitHub gave; the credentials go nowhere else.
                if !next.starts_with(&format!("{}/", self.origin)) {
                    return Err(ProviderError::Failed(
                        "the next page's link leaves the API's origin".into(),
                    ));
                }
                next.to_owned()
            }
            None => format!("{}?per_page=100", self.deliveries_url),
        };
        let response = self
            .get(
                &url,
                "list deliveries",
                "no such hook, or the credentials cannot see it",
            )
            .await?;
        let link = response
            .headers()
            .get("link")
            .and_then(|v| v.to_str().ok())
            .and_then(next_link)
            .map(str::to_owned);
        let deliveries: Vec<Delivery> = json(response, "list deliveries").await?;
        let mut items = Vec::with_capacity(deliveries.len());
        let mut passed = false;
        for d in deliveries {
            let Some(at) = parse_rfc3339(&d.delivered_at) else {
                return Err(ProviderError::Failed(format!(
                    "list deliveries: delivery {} has no valid delivered_at",
                    d.id
                )));
            };
            // Newest first: once a delivery is older than the window, every later one is too.
            if at < window.from_ms {
                passed = true;
                continue;
            }
            items.push(Listed {
                id: d.guid,
                event_type: d.event,
                created_ms: at,
                payload: None,
                headers: Vec::new(),
                handle: d.id.to_string(),
            });
        }
        Ok(Page {
            items,
            next: if passed { None } else { link },
        })
    }

    async fn fetch(&self, item: &Listed) -> Result<Fetched, ProviderError> {
        if item.handle.is_empty() || !item.handle.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ProviderError::Failed("a delivery id is not a number".into()));
        }
        let url = format!("{}/{}", self.deliveries_url, item.handle);
        let what = format!("get delivery {}", item.handle);
        let response = self
            .get(&url, &what, "GitHub no longer has it, or never did")
            .await?;
        let detail: Detail = json(response, &what).await?;
        let payload = detail
            .request
            .payload
            .ok_or_else(|| ProviderError::Failed(format!("{what}: the delivery has no request payload")))?;
        let header = |name: &str| {
            detail
                .request
                .headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .and_then(|(_, v)| v.as_str())
        };
        let event_type = header("x-github-event")
            .map(str::to_owned)
            .or(detail.event.clone())
            .or(item.event_type.clone());
        // Kept as the receiver keeps a webhook's: the stored body is JSON, whatever the hook's content type.
        let mut headers = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("x-github-delivery".to_owned(), item.id.clone()),
        ];
        if let Some(t) = &event_type {
            headers.push(("x-github-event".to_owned(), t.clone()));
        }
        let payload = serde_json::to_vec(&payload)
            .map_err(|e| ProviderError::Failed(format!("cannot serialise a payload: {e}")))?;
        Ok(Fetched {
            payload: Bytes::from(payload),
            event_type,
            headers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{next_link, Auth};

    #[test]
    fn an_app_key_that_is_not_a_key_is_refused_without_quoting_it() {
        let pem =
            "-----BEGIN RSA PRIVATE KEY-----\nc2VjcmV0LWJ1dC1ub3QtYS1rZXk=\n-----END RSA PRIVATE KEY-----\n";
        let err = Auth::app(42, pem).err().unwrap_or_default();
        assert!(err.contains("not an RSA private key"), "{err}");
        assert!(!err.contains("c2VjcmV0"), "{err}");
        assert_eq!(
            format!("{:?}", Auth::token("ghp_secret".into())),
            "Token([redacted])"
        );
    }

    #[test]
    fn the_next_link_is_found_among_others() {
        let link = r#"<https://api.github.com/repos/o/r/hooks/1/deliveries?per_page=100&cursor=v1_9>; rel="next", <https://api.github.com/x?cursor=v1_1>; rel="prev""#;
        assert_eq!(
            next_link(link),
            Some("https://api.github.com/repos/o/r/hooks/1/deliveries?per_page=100&cursor=v1_9")
        );
        assert_eq!(next_link(r#"<https://a/x>; rel="prev""#), None);
        assert_eq!(next_link(""), None);
    }
}
