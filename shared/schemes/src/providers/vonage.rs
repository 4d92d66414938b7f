//! Vonage (Messages API signed webhooks): `Authorization: Bearer {JWT}`, HS256 keyed with the account's signature
//! secret, claims `iat`, `jti`, `iss: "Vonage"`, `payload_hash` (hex SHA-256 of the raw body, which must match),
//! `api_key`, `application_id`; no `exp`, so `iat` is held to 300 s (Vonage documents no tolerance). Vonage sends
//! no event id (`jti` changes on every attempt): the id is the body's hex SHA-256, the `payload_hash` it signs;
//! the type is a status webhook's `status`, else an inbound message's `message_type`.
//! <https://developer.vonage.com/en/messages/concepts/signed-webhooks>

use crate::families::jwt::{BodyHash, Jwt, JwtKey};
use crate::families::Family;
use crate::providers::{Identify, Preset};
use crate::request::{Answer, Credentials, Identified, Request};
use crate::errors::{IdError, VerifyError};
use crate::identity::Identity;

/// How old `iat` may be (and how far ahead): 300 s, the receiver's default, as Vonage names none.
const MAX_AGE_SECS: u64 = 300;

fn identify(req: &Request) -> Result<Identified, IdError> {
    let value: serde_json::Value = serde_json::from_slice(req.body).map_err(|_| IdError::MalformedBody)?;
    let text = |name: &str| match value.get(name) {
        Some(serde_json::Value::String(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    };
    Ok(Identified::One(Identity {
        event_id: hex::encode(<sha2::Sha256 as sha2::Digest>::digest(req.body)),
        event_type: text("status").or_else(|| text("message_type")),
    }))
}

pub(super) fn preset() -> Preset {
    let family = Family::Jwt(Jwt {
        header: http::header::AUTHORIZATION,
        prefix: "Bearer ",
        algorithms: vec![jsonwebtoken::Algorithm::HS256],
        key: JwtKey::Secret,
        issuer: Some("Vonage"),
        audience_is_url: false,
        body_hash: Some(BodyHash {
            claim: "payload_hash",
            hex: true,
        }),
        max_age_secs: Some(MAX_AGE_SECS),
    });
    Preset {
        before: Some(unsigned_callback),
        tolerance_secs: Some(MAX_AGE_SECS),
        ..Preset::new("vonage", family, Identify::Custom(identify))
    }
}

/// Vonage documents that in a rare internal error it sends a callback unsigned, and retries it when answered 5xx:
/// such a request is answered 503, never stored, so the signed retry is the one kept.
fn unsigned_callback(req: &Request, _: &Credentials) -> Option<Result<Answer, VerifyError>> {
    (*req.method == http::Method::POST && !req.headers.contains_key(http::header::AUTHORIZATION))
        .then(|| Ok(Answer::empty(503)))
}
