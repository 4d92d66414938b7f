//! The security layer around every route, in the order a request meets it: the host, then the token or the session
//! (a bearer header, or the login form's cookie), then for a state change the Origin; the handlers check the CSRF
//! token of each form ([`check_csrf`]); and every answer, a refusal too, carries the headers of [`guard`].

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, Mac};
use secrecy::ExposeSecret;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::error::ConsoleError;
use crate::pages;
use crate::router::Console;
use crate::CSP;

/// The session cookie's name.
const COOKIE: &str = "inbox_console";

type HmacSha256 = Hmac<Sha256>;

impl Console {
    fn mac(&self, purpose: &str, value: &str) -> String {
        // `new_from_slice` accepts any key length for HMAC; the fallback is never taken.
        let Ok(mut mac) = HmacSha256::new_from_slice(&self.key) else {
            return String::new();
        };
        mac.update(purpose.as_bytes());
        mac.update(b"\0");
        mac.update(value.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    /// The CSRF token of a session: what every form of its pages carries.
    pub(crate) fn csrf(&self, session: &Session) -> String {
        self.mac("csrf", &session.id)
    }

    /// The `Set-Cookie` of a session: the id itself, or (`None`) the empty value that makes a browser drop it.
    pub(crate) fn set_cookie(&self, id: Option<&str>) -> Option<HeaderValue> {
        let max_age = id.map_or(0, |_| self.policy.lifetime.as_secs());
        let secure = if self.policy.secure_cookie { "; Secure" } else { "" };
        let value = format!(
            "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={max_age}{secure}",
            id.unwrap_or("")
        );
        HeaderValue::from_str(&value).ok()
    }

    pub(crate) fn token_matches(&self, offered: &str) -> bool {
        self.token
            .as_ref()
            .is_some_and(|t| bool::from(t.expose_secret().as_bytes().ct_eq(offered.as_bytes())))
    }
}

/// Who is asking: the session the CSRF token is bound to, and how the request proved it may ask. No `Debug`: a
/// cookie session's id is its secret.
#[derive(Clone)]
pub(crate) struct Session {
    pub(crate) id: String,
    pub(crate) via: Via,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    /// A loopback console without a token, or the login form.
    Anonymous,
    /// The token as a bearer header: one no browser adds by itself, so such a request needs neither Origin nor
    /// CSRF token.
    Bearer,
    /// A live session's cookie, set by the login form: `id` is the cookie's value, which logout ends.
    Cookie,
}

tokio::task_local! {
    /// The CSRF token of the logged-in session a page is drawn for, if any: every page then carries a logout
    /// button. Set around each request by [`guard`], so error pages carry it too.
    static LOGOUT: Option<String>;
}

/// The logout form's CSRF token, while drawing a page of a logged-in session.
pub(crate) fn logout_csrf() -> Option<String> {
    LOGOUT.try_with(Clone::clone).ok().flatten()
}

/// The anonymous session: a loopback console without a token, or the login form.
const ANONYMOUS: &str = "anonymous";

/// The security layer: host, authentication, origin; then the headers every answer carries.
pub(crate) async fn guard(State(console): State<Arc<Console>>, mut request: Request, next: Next) -> Response {
    let mut response = match admit(&console, &request) {
        Ok(session) => {
            let logout = (session.via == Via::Cookie).then(|| console.csrf(&session));
            request.extensions_mut().insert(session);
            LOGOUT.scope(logout, next.run(request)).await
        }
        Err(refused) => *refused,
    };
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Not `no-referrer`: under it a browser posts `Origin: null`, and the origin check would refuse every form.
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Decides whether a request may reach its page, and as which session.
fn admit(console: &Console, request: &Request) -> Result<Session, Box<Response>> {
    let headers = request.headers();
    let host = host_of(headers);
    if console.token.is_none() && !is_loopback_host(host) {
        return Err(Box::new(forbidden(
            "This console answers only to a loopback host name.",
        )));
    }
    let path = request.uri().path();
    let open_path = path == "/login" || path == "/style.css";
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .is_some_and(|t| console.token_matches(t));
    let presented = cookie(headers, COOKIE).filter(|v| !v.is_empty());
    let session = if bearer {
        Session {
            id: ANONYMOUS.to_owned(),
            via: Via::Bearer,
        }
    } else if console.token.is_none() {
        anonymous()
    } else if let Some(id) = presented.filter(|id| {
        console
            .sessions
            .touch(id, &console.policy, std::time::Instant::now())
    }) {
        Session {
            id: id.to_owned(),
            via: Via::Cookie,
        }
    } else if open_path {
        anonymous()
    } else {
        // No session, or one that ended (logged out, idle, too old, or from before a restart): the login page,
        // and the dead cookie dropped from the browser.
        let login = pages::Login {
            csrf: &console.csrf(&anonymous()),
            required: true,
            ended: presented.is_some(),
            plain_http: console.plain_http_elsewhere(headers, host),
        };
        let mut page = (StatusCode::UNAUTHORIZED, pages::login(&login)).into_response();
        if presented.is_some() {
            if let Some(clear) = console.set_cookie(None) {
                page.headers_mut().insert(header::SET_COOKIE, clear);
            }
        }
        return Err(Box::new(page));
    };
    if request.method() != Method::GET && request.method() != Method::HEAD && session.via != Via::Bearer {
        same_origin(headers, host).map_err(|why| Box::new(forbidden(why)))?;
    }
    Ok(session)
}

pub(crate) fn anonymous() -> Session {
    Session {
        id: ANONYMOUS.to_owned(),
        via: Via::Anonymous,
    }
}

impl Console {
    /// Whether this request looks like plain HTTP to a host other than loopback: a browser there drops a `Secure`
    /// cookie, so the login page says what to do instead. Behind a TLS proxy, `X-Forwarded-Proto: https` says not.
    pub(crate) fn plain_http_elsewhere(&self, headers: &HeaderMap, host: &str) -> bool {
        let https = headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"));
        self.policy.secure_cookie && !https && !is_loopback_host(host)
    }
}

/// A state change must come from one of the console's own pages: the browser says where it was sent from.
fn same_origin(headers: &HeaderMap, host: &str) -> Result<(), &'static str> {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        if site != "same-origin" && site != "none" {
            return Err("Refused: this request came from another site.");
        }
    }
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .ok_or("Refused: a state change needs an Origin header.")?;
    let matches = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|o| !host.is_empty() && o.eq_ignore_ascii_case(host));
    if matches {
        Ok(())
    } else {
        Err("Refused: this request came from another origin.")
    }
}

fn forbidden(why: &str) -> Response {
    (StatusCode::FORBIDDEN, pages::message("403", why)).into_response()
}

pub(crate) fn host_of(headers: &HeaderMap) -> &str {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
}

pub(crate) fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// A form's CSRF token must be the one the session's pages carry.
pub(crate) fn check_csrf(
    console: &Console,
    session: &Session,
    offered: Option<&str>,
) -> Result<(), ConsoleError> {
    if session.via == Via::Bearer {
        return Ok(());
    }
    let expected = console.csrf(session);
    match offered {
        Some(t) if bool::from(expected.as_bytes().ct_eq(t.as_bytes())) => Ok(()),
        _ => Err(ConsoleError::Forbidden(
            "Refused: the form's CSRF token is missing or wrong. Reload the page and try again.",
        )),
    }
}
