//! Logging in with the console's token (a session of this process, its id in a cookie) and logging out.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use serde::Deserialize;

use crate::error::ConsoleError;
use crate::guard::{anonymous, check_csrf, host_of, Session, Via};
use crate::pages;
use crate::router::Console;

pub(crate) async fn login_page(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    let host = host_of(&headers);
    // The anonymous session's token, whoever asks: that is what the login checks, a browser logged in already
    // included.
    pages::login(&pages::Login {
        csrf: &console.csrf(&anonymous()),
        required: console.token.is_some(),
        ended: false,
        plain_http: console.token.is_some() && console.plain_http_elsewhere(&headers, host),
    })
    .into_response()
}

#[derive(Debug, Deserialize)]
pub(crate) struct LoginForm {
    #[serde(default)]
    token: String,
    csrf: Option<String>,
}

pub(crate) async fn login(
    State(console): State<Arc<Console>>,
    axum::Extension(session): axum::Extension<Session>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Result<Response, ConsoleError> {
    // The login form is the anonymous session's, whoever posts it.
    check_csrf(&console, &anonymous(), form.csrf.as_deref())?;
    if !console.token_matches(&form.token) {
        tracing::warn!("console: a login with a wrong token");
        let host = host_of(&headers);
        let login = pages::Login {
            csrf: &console.csrf(&anonymous()),
            required: true,
            ended: false,
            plain_http: console.plain_http_elsewhere(&headers, host),
        };
        return Ok((StatusCode::UNAUTHORIZED, pages::login(&login)).into_response());
    }
    // A login from a browser that was logged in already replaces its session rather than leave it live.
    if session.via == Via::Cookie {
        console.sessions.end(&session.id);
    }
    let id = console.sessions.open(&console.policy, std::time::Instant::now());
    tracing::info!("console: logged in");
    let mut response = Redirect::to("/").into_response();
    if let Some(v) = console.set_cookie(Some(&id)) {
        response.headers_mut().insert(header::SET_COOKIE, v);
    }
    Ok(response)
}

#[derive(Debug, Deserialize)]
pub(crate) struct LogoutForm {
    csrf: Option<String>,
}

/// Ends the session here, so its cookie lets nothing in any more (a copy of it included), and drops it from the
/// browser.
pub(crate) async fn logout(
    State(console): State<Arc<Console>>,
    axum::Extension(session): axum::Extension<Session>,
    Form(form): Form<LogoutForm>,
) -> Result<Response, ConsoleError> {
    check_csrf(&console, &session, form.csrf.as_deref())?;
    let mut response = Redirect::to("/login").into_response();
    if session.via == Via::Cookie {
        console.sessions.end(&session.id);
        tracing::info!("console: logged out");
        if let Some(clear) = console.set_cookie(None) {
            response.headers_mut().insert(header::SET_COOKIE, clear);
        }
    }
    Ok(response)
}
