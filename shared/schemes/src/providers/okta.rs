//! Okta event hooks sign nothing: the hook's `authScheme` value is sent verbatim in `Authorization` (for Basic,
//! the value typed is `Basic base64(user:password)`), compared in constant time with the configured secret.
//! A delivery batches `data.events[]`: each item's id is its `uuid`, its type its `eventType`. The one-time
//! verification `GET` carries `X-Okta-Verification-Challenge` (and the same `Authorization`), answered
//! `{"verification": value}` and never stored.
//! <https://developer.okta.com/docs/concepts/event-hooks/>, <https://developer.okta.com/docs/guides/secure-hooks/>

use http::Method;

use crate::families::{Family, Token};
use crate::providers::{Batch, Identify, Preset};
use crate::request::{Answer, Credentials, Request};
use crate::errors::VerifyError;

/// Okta sends the `authScheme` key as the header name; `Authorization` is what its docs and console use.
fn token() -> Token {
    Token::header("authorization")
}

/// The one-time verification request: the token must match before the challenge is echoed.
fn verification(req: &Request, creds: &Credentials) -> Option<Result<Answer, VerifyError>> {
    if *req.method != Method::GET {
        return None;
    }
    let Some(challenge) = req.header("x-okta-verification-challenge") else {
        return Some(Err(VerifyError::MissingHeader(
            "x-okta-verification-challenge".to_owned(),
        )));
    };
    Some(
        token()
            .verify(&creds.secrets, req)
            .map(|()| Answer::json(&serde_json::json!({ "verification": challenge }))),
    )
}

pub(super) fn preset() -> Preset {
    let identify = Identify::Batch(Batch {
        form: None,
        items: "/data/events",
        item: "",
        id: "/uuid",
        event_type: Some("/eventType"),
    });
    Preset {
        before: Some(verification),
        get: true,
        ..Preset::new("okta", Family::Token(token()), identify)
    }
}
