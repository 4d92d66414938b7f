//! Plaid: `Plaid-Verification` is a JWT, ES256 only, whose `kid` names the key that
//! `POST /webhook_verification_key/get` returns (a JWK; the receiver fetches it with the source's
//! `client_id:secret`, or `public_key` pins a JWK set); its claims are `iat` (refused when older than 5 minutes)
//! and `request_body_sha256`, the hex SHA-256 of the raw body. Plaid sends no event id: the id is the hash of the
//! token (all that it signs, body and time: identical bodies are distinct events); the type is
//! `webhook_type.webhook_code`. No handshake.
//! <https://plaid.com/docs/api/webhooks/webhook-verification/>

use http::HeaderName;
use jsonwebtoken::Algorithm;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::families::jwt::{BodyHash, Jwt, JwtKey};
use crate::families::Family;
use crate::providers::{Identify, Preset};
use crate::request::{Identified, Request};
use crate::{IdError, Identity};

/// Plaid's documented limit on `iat`.
const MAX_AGE_SECS: u64 = 5 * 60;

pub(super) fn preset() -> Preset {
    let family = Family::Jwt(Jwt {
        header: HeaderName::from_static("plaid-verification"),
        prefix: "",
        algorithms: vec![Algorithm::ES256],
        key: JwtKey::Jwks {
            url: "https://production.plaid.com/webhook_verification_key/get",
            hosts: vec!["production.plaid.com"],
            by_post: true,
        },
        issuer: None,
        audience_is_url: false,
        body_hash: Some(BodyHash {
            claim: "request_body_sha256",
            hex: true,
        }),
        max_age_secs: Some(MAX_AGE_SECS),
    });
    Preset {
        tolerance_secs: Some(MAX_AGE_SECS),
        ..Preset::new("plaid", family, Identify::Custom(identify))
    }
}

fn identify(req: &Request) -> Result<Identified, IdError> {
    let value: Value = serde_json::from_slice(req.body).map_err(|_| IdError::MalformedBody)?;
    let text = |name: &str| value.get(name).and_then(Value::as_str).filter(|s| !s.is_empty());
    let event_type = match (text("webhook_type"), text("webhook_code")) {
        (Some(t), Some(code)) => Some(format!("{t}.{code}")),
        (t, code) => t.or(code).map(str::to_owned),
    };
    // Plaid sends no id, and its bodies repeat byte for byte (every SYNC_UPDATES_AVAILABLE of an item after the
    // first): the id is the hash of the whole signed token, which binds the body and its own `iat`, so each
    // delivery is its own event. A retry Plaid signs anew (it must: `iat` ages out in 5 minutes) then runs again,
    // which Plaid tells integrators to expect; a repeat is never lost as a duplicate.
    let token = req
        .header("plaid-verification")
        .ok_or_else(|| IdError::Missing("header plaid-verification".to_owned()))?;
    Ok(Identified::One(Identity {
        event_id: hex::encode(Sha256::digest(token.trim().as_bytes())),
        event_type,
    }))
}
