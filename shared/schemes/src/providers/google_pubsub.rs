//! Google Cloud Pub/Sub push with authentication: `Authorization: Bearer` an OIDC ID token, RS256 signed by
//! Google (keys by `kid` from its JWK set), `iss` `accounts.google.com`, `aud` the subscription's audience (by
//! default the push endpoint: the source's `url`), `iat` at most an hour old, and `email` one of the source's
//! `secrets` (the push service accounts) with `email_verified`: without that check any Google account could mint
//! a token for this audience. The token does not cover the body. Id `message.messageId` (kept by retries), no
//! type. No handshake.
//! <https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions>

use base64::Engine as _;
use jsonwebtoken::Algorithm;
use serde_json::Value;

use crate::families::jwt::{Jwt, JwtKey};
use crate::families::Family;
use crate::providers::{Identify, Preset};
use crate::request::{Answer, Credentials, Request};
use crate::VerifyError;

/// A Google ID token lives an hour.
const MAX_AGE_SECS: u64 = 3600;

pub(super) fn preset() -> Preset {
    let family = Family::Jwt(Jwt {
        header: http::header::AUTHORIZATION,
        prefix: "Bearer ",
        algorithms: vec![Algorithm::RS256],
        key: JwtKey::Jwks {
            url: "https://www.googleapis.com/oauth2/v3/certs",
            hosts: vec!["www.googleapis.com"],
            by_post: false,
        },
        issuer: Some("accounts.google.com"),
        audience_is_url: true,
        body_hash: None,
        max_age_secs: Some(MAX_AGE_SECS),
    });
    Preset {
        before: Some(service_account),
        ..Preset::new(
            "google-pubsub",
            family,
            Identify::at("json:/message/messageId", None),
        )
    }
}

/// Refuses a token whose `email` is not a configured service account (or not verified), before the signature
/// check; that check then covers the claim, so only a Google-signed token for one of them is accepted. Not a
/// handshake: a token that passes goes on to be verified (`None`).
fn service_account(req: &Request, creds: &Credentials) -> Option<Result<Answer, VerifyError>> {
    let claims = req
        .header("authorization")
        .filter(|v| v.get(..7).is_some_and(|p| p.eq_ignore_ascii_case("bearer ")))
        .and_then(|v| v.get(7..))
        .and_then(|token| token.trim().split('.').nth(1))
        .and_then(|payload| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).ok())
        .and_then(|json| serde_json::from_slice::<Value>(&json).ok())?; // not a JWT: verification refuses it
    let email = claims.get("email").and_then(Value::as_str).unwrap_or("");
    let verified = claims.get("email_verified").and_then(Value::as_bool) == Some(true);
    let known = creds
        .secrets
        .iter()
        .any(|s| s.expose().eq_ignore_ascii_case(email.as_bytes()));
    if verified && known && !email.is_empty() {
        None
    } else {
        Some(Err(VerifyError::Mismatch))
    }
}
