//! X (Account Activity webhooks): `x-twitter-webhooks-signature: sha256={base64 HMAC-SHA256 of the raw body}`,
//! keyed with the app's consumer secret; no timestamp. X sends no event id: the id is the body's hex SHA-256; the
//! type is the top-level key naming the events (`tweet_create_events`, `favorite_events`, ..., `user_event`).
//! The CRC is an unsigned `GET ?crc_token=T` answered `{"response_token": "sha256=" + base64 HMAC-SHA256(secret,
//! T)}`; as that answer is the signature a body `T` would carry, only tokens that cannot be a JSON body are
//! answered (no `{ } [ ] "`, at most 256 bytes).
//! <https://docs.x.com/x-api/webhooks/quickstart>

use base64::Engine as _;
use http::Method;

use crate::families::{Family, Hmac, SecretEncoding, Signature, Template};
use crate::providers::{Identify, Preset};
use crate::request::{Answer, Credentials, Identified, Request};
use crate::encoding::Encoding;
use crate::errors::{IdError, VerifyError};
use crate::identity::Identity;
use crate::mac::{mac, Algorithm};

/// The longest `crc_token` answered; X's are UUID-sized.
const MAX_CRC_TOKEN: usize = 256;

fn crc(req: &Request, creds: &Credentials) -> Option<Result<Answer, VerifyError>> {
    if *req.method != Method::GET {
        return None;
    }
    let Some(token) = req.query("crc_token") else {
        return Some(Err(VerifyError::MissingHeader("query crc_token".to_owned())));
    };
    let could_be_a_body = token.is_empty()
        || token.len() > MAX_CRC_TOKEN
        || token.chars().any(|c| matches!(c, '{' | '}' | '[' | ']' | '"') || c.is_control());
    if could_be_a_body {
        return Some(Err(VerifyError::MalformedHeader("query crc_token".to_owned())));
    }
    // X signs with one consumer secret: the first configured one answers.
    let Some(key) = creds.secrets.first() else {
        return Some(Err(VerifyError::Mismatch));
    };
    let tag = mac(Algorithm::Sha256, key, &[token.as_bytes()]);
    let response_token = format!(
        "sha256={}",
        base64::engine::general_purpose::STANDARD.encode(tag)
    );
    Some(Ok(Answer::json(
        &serde_json::json!({ "response_token": response_token }),
    )))
}

/// The id is the body's hash; the type the key that holds the events.
fn identify(req: &Request) -> Result<Identified, IdError> {
    let value: serde_json::Value = serde_json::from_slice(req.body).map_err(|_| IdError::MalformedBody)?;
    let object = value.as_object().ok_or(IdError::MalformedBody)?;
    let event_type = object
        .keys()
        .find(|k| k.ends_with("_events") || k.as_str() == "user_event")
        .cloned();
    let event_id = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(req.body));
    Ok(Identified::One(Identity {
        event_id,
        event_type,
    }))
}

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac {
        signature: Signature::header("x-twitter-webhooks-signature", "sha256=", Encoding::Base64),
        signed: Template::body(),
        algorithm: Algorithm::Sha256,
        timestamp: None,
        secret: SecretEncoding::Raw,
    });
    Preset {
        before: Some(crc),
        get: true,
        ..Preset::new("x", family, Identify::Custom(identify))
    }
}
