//! What every provider's HTTP calls share: one client with bounded waits, URLs joined under `api_base`, a status
//! read into a [`ProviderError`] the same way for every provider, the rate-limit waits the providers document,
//! and JSON bodies parsed with our own words in the error (never the provider's text, never a credential).

use std::time::Duration;

use http::HeaderMap;

use super::ProviderError;

/// The HTTP client the providers share: bounded waits, so a hung provider cannot hold a run past its budget.
pub(crate) fn api_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(30))
        .user_agent(concat!("webhook-inbox-reconciler/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// `api_base` joined with `path`, whatever slashes either has.
pub(crate) fn endpoint(api_base: &reqwest::Url, path: &str) -> String {
    format!(
        "{}/{}",
        api_base.as_str().trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

/// [`endpoint`] parsed, for a provider's constructor (`api_base` was checked by the config; the path is ours).
pub(crate) fn url(api_base: &reqwest::Url, path: &str) -> Result<reqwest::Url, String> {
    reqwest::Url::parse(&endpoint(api_base, path)).map_err(|e| format!("api_base: {e}"))
}

/// `base` with one more path segment (an id, escaped as a segment): a single item's URL under its list's.
pub(crate) fn child(base: &reqwest::Url, segment: &str) -> Result<reqwest::Url, ProviderError> {
    let mut url = base.clone();
    url.path_segments_mut()
        .map_err(|()| ProviderError::Failed("api_base cannot take a path".into()))?
        .push(segment);
    Ok(url)
}

/// Whole seconds `s` with `s * 1000 >= ms`: the window's edges for an API that takes seconds (Stripe, Chargebee,
/// PayPal), ours being milliseconds.
pub(crate) fn ceil_secs(ms: i64) -> i64 {
    ms.div_euclid(1000) + i64::from(ms.rem_euclid(1000) != 0)
}

/// What a provider's refusals mean, in words for the operator: the hint a 401 and a 403 carry (which credential,
/// which scope), and what a 404 means for this request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Refusals {
    pub unauthorized: &'static str,
    pub forbidden: &'static str,
    pub missing: &'static str,
}

/// Sends `request` and reads its status the way every provider's is read: a 2xx is the answer; 429 (and a 403
/// whose rate-limit headers say none remain) waits as told; 401 and any other 403 are bad credentials; 404 and the
/// rest fail the request. `what` names the request in errors (`GET /events`).
pub(crate) async fn send(
    request: reqwest::RequestBuilder,
    what: &str,
    refusals: &Refusals,
) -> Result<reqwest::Response, ProviderError> {
    let response = request.send().await.map_err(transport_error)?;
    let status = response.status().as_u16();
    if response.status().is_success() {
        return Ok(response);
    }
    let wait = rate_limit_wait(response.headers(), provider_now_secs());
    Err(match status {
        429 => ProviderError::RateLimited { wait },
        403 if wait.is_some() => ProviderError::RateLimited { wait },
        401 => ProviderError::BadCredentials(format!("401: {}", refusals.unauthorized)),
        403 => ProviderError::BadCredentials(format!("403: {}", refusals.forbidden)),
        404 => ProviderError::Failed(format!("{what} answered 404: {}", refusals.missing)),
        s => ProviderError::Failed(format!("{what} answered {s}")),
    })
}

/// Now, in epoch seconds, as a provider's own clock has it: the system's (the real time its reset times and its
/// tokens' `iat`/`exp` are written in), whatever clock the runtime's decisions run on.
pub(crate) fn provider_now_secs() -> i64 {
    use crate::clock::Clock;
    crate::clock::SystemClock.now_ms() / 1000
}

/// How long the provider asked us to wait, from the headers of a 403/429:
/// - `Retry-After`, in seconds or as an HTTP date (RFC 9110 §10.2.3), first, as GitHub documents
///   (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api);
/// - else a reset time when its remaining count is 0: `X-RateLimit-Reset` (GitHub, Mailgun), `RateLimit-Reset`
///   (GitLab, GoCardless) or `X-Rate-Limit-Reset` (Okta), beside `…-Remaining`. Providers write the reset as epoch
///   seconds (GitHub, GitLab, Okta), epoch milliseconds, seconds from now (the IETF RateLimit fields) or an HTTP
///   date (GoCardless); the value tells which.
pub fn rate_limit_wait(headers: &HeaderMap, now_unix: i64) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(after) = header("retry-after") {
        if let Ok(secs) = after.parse::<u64>() {
            return Some(Duration::from_secs(secs));
        }
        return until(http_date(after)?, now_unix);
    }
    for prefix in ["x-ratelimit", "ratelimit", "x-rate-limit"] {
        if header(&format!("{prefix}-remaining")) != Some("0") {
            continue;
        }
        let reset = header(&format!("{prefix}-reset"))?;
        return match reset.parse::<i64>() {
            // Seconds from now: no epoch time is this small.
            Ok(n) if (0..1_000_000_000).contains(&n) => Some(Duration::from_secs(n.unsigned_abs().max(1))),
            Ok(n) if n >= 100_000_000_000 => until(n / 1000, now_unix),
            Ok(n) => until(n, now_unix),
            Err(_) => until(http_date(reset)?, now_unix),
        };
    }
    None
}

/// The wait until epoch second `reset`: one second more (the reset is a whole second and clocks differ a little),
/// and at least one second (a reset already past still waits a moment rather than hammering).
fn until(reset: i64, now_unix: i64) -> Option<Duration> {
    let wait = reset.saturating_sub(now_unix).saturating_add(1).max(1);
    Some(Duration::from_secs(u64::try_from(wait).unwrap_or(1)))
}

/// Epoch seconds of an HTTP date (`Thu, 01 May 2014 16:00:00 GMT`).
fn http_date(text: &str) -> Option<i64> {
    let at = httpdate::parse_http_date(text).ok()?;
    let secs = at.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
    i64::try_from(secs).ok()
}

/// A transport error's text with its causes, for the log; reqwest's own text leaves the cause out. Our request
/// URLs hold no credential (they travel in headers), but the URL is dropped anyway.
pub(crate) fn transport_error(e: reqwest::Error) -> ProviderError {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    ProviderError::Failed(format!("request failed: {text}"))
}

/// A 200's JSON body.
pub(crate) async fn json<T: serde::de::DeserializeOwned>(
    response: reqwest::Response,
    what: &str,
) -> Result<T, ProviderError> {
    let body = response.bytes().await.map_err(transport_error)?;
    serde_json::from_slice(&body)
        .map_err(|e| ProviderError::Failed(format!("{what}: the answer does not parse: {e}")))
}

/// A JSON value serialised for storing (the payload a handler reads).
pub(crate) fn to_payload(value: &serde_json::Value) -> Result<bytes::Bytes, ProviderError> {
    serde_json::to_vec(value)
        .map(bytes::Bytes::from)
        .map_err(|e| ProviderError::Failed(format!("cannot serialise an event: {e}")))
}

/// The milliseconds of an RFC 3339 time a provider wrote, or a failure naming `what`.
pub(crate) fn rfc3339_ms(text: &str, what: &str) -> Result<i64, ProviderError> {
    crate::time::parse_rfc3339(text)
        .ok_or_else(|| ProviderError::Failed(format!("{what}: {text:?} is not an RFC 3339 time")))
}

/// The `Content-Type: application/json` a JSON webhook carries, kept with a reconciled event as with a webhook.
pub(crate) fn json_headers() -> crate::model::KeptHeaders {
    vec![("content-type".into(), "application/json".into())]
}

#[cfg(test)]
mod tests {
    use super::ceil_secs;

    #[test]
    fn window_edges_round_up_to_whole_seconds() {
        assert_eq!(ceil_secs(5_000), 5);
        assert_eq!(ceil_secs(5_001), 6);
        assert_eq!(ceil_secs(4_999), 5);
        assert_eq!(ceil_secs(-1), 0);
    }
}
