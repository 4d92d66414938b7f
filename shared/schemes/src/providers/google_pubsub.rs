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
use crate::errors::VerifyError;

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
            kid: key_id,
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

/// Whether a `kid` can be one of Google's: its key ids are 40 hex digits (a SHA-1; e.g. `0ad1fec78504f447bae65bcf5afa
/// edb65eec9e81` in a copy of https://www.googleapis.com/oauth2/v3/certs kept in risc0/demos
/// `bonsai-pay/oidc-validator/src/certs.rs`). Google does not document the shape, so this only bounds it: 1–64
/// letters, digits, `-` and `_` (which also holds a base64url thumbprint, should Google move to one).
fn key_id(kid: &str) -> bool {
    (1..=64).contains(&kid.len()) && kid.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::request::KeyRequest;

    /// A token whose header names `kid` (nothing else in it is read before the key is fetched).
    fn key_request(kid: &str) -> Result<Option<KeyRequest>, VerifyError> {
        let b64 = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        let token = format!(
            "Bearer {}.{}.AAAA",
            b64(serde_json::json!({"alg": "RS256", "kid": kid, "typ": "JWT"})),
            b64(serde_json::json!({"iat": 1})),
        );
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::AUTHORIZATION, token.parse().unwrap());
        let uri = http::Uri::from_static("/webhooks/pubsub");
        crate::Scheme::named("google-pubsub")
            .unwrap()
            .key_request(&Credentials::default(), &Request::post(&uri, &headers, b"{}"))
    }

    /// Google's key set is fetched for a `kid` it may hold; one of no key id's shape is refused without a fetch.
    #[test]
    fn only_a_kid_of_a_key_ids_shape_is_fetched() {
        for kid in ["0ad1fec78504f447bae65bcf5afaedb65eec9e81", "NjVBRjY5MDlCMUIwNzU4RTA2QzZFMDQ4QzQ2MDAyQjVDNjk1RTM2Qg"] {
            assert!(matches!(key_request(kid), Ok(Some(KeyRequest::Jwks { .. }))), "{kid}");
        }
        let long = "a".repeat(65);
        for kid in ["", "../certs?x=1", "a b", "k\u{0}", long.as_str()] {
            assert!(matches!(key_request(kid), Err(VerifyError::UntrustedKey(_))), "{kid:?}");
        }
    }
}
