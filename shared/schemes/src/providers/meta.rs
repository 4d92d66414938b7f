//! Meta (Graph API webhooks: Pages, Instagram, WhatsApp Cloud API): `X-Hub-Signature-256: sha256={hex
//! HMAC-SHA256 of the raw body}`, keyed with the app secret; no timestamp (the older `X-Hub-Signature`, SHA-1, is
//! not checked). A delivery batches `entry[]`, one event per entry; Meta sends no event id, so each entry's id is
//! the hex SHA-256 of its bytes as sent, and its type the entry's `changes[0].field` (`messaging` for Messenger
//! entries). The subscription check is an unsigned `GET ?hub.mode=subscribe&hub.challenge=C&hub.verify_token=T`:
//! `C` as text when `T` is the configured `verify_token`, refused otherwise.
//! <https://developers.facebook.com/docs/graph-api/webhooks/getting-started>

use sha2::{Digest as _, Sha256};
use http::Method;
use serde_json::value::RawValue;
use subtle::ConstantTimeEq;

use crate::families::{Family, Hmac, SecretEncoding, Signature, Template};
use crate::providers::{raw_at, Example, Identify, Preset, MAX_BATCH_ITEMS};
use crate::request::{Answer, Credentials, Identified, Item, Request};
use crate::encoding::Encoding;
use crate::errors::{IdError, VerifyError};
use crate::identity::{valid_id, Identity};
use crate::mac::Algorithm;

/// The longest `hub.challenge` echoed (Meta's are short integers).
const MAX_CHALLENGE: usize = 256;

fn subscribe(req: &Request, creds: &Credentials) -> Option<Result<Answer, VerifyError>> {
    if *req.method != Method::GET {
        return None;
    }
    let refuse = Some(Err(VerifyError::Mismatch));
    if req.query("hub.mode").as_deref() != Some("subscribe") {
        return refuse;
    }
    let (Some(expected), Some(token)) = (&creds.verify_token, req.query("hub.verify_token")) else {
        return refuse;
    };
    // Compared as digests, so neither the token's bytes nor its length show in the time taken.
    let (expected, token) = (Sha256::digest(expected.expose()), Sha256::digest(token.as_bytes()));
    if !bool::from(expected.as_slice().ct_eq(token.as_slice())) {
        return refuse;
    }
    match req.query("hub.challenge") {
        Some(c) if !c.is_empty() && c.len() <= MAX_CHALLENGE && !c.chars().any(char::is_control) => {
            Some(Ok(Answer::text(c)))
        }
        _ => Some(Err(VerifyError::MissingHeader("query hub.challenge".to_owned()))),
    }
}

/// One event per `entry[]` element, each under the hash of its own bytes.
fn identify(req: &Request) -> Result<Identified, IdError> {
    let text = std::str::from_utf8(req.body).map_err(|_| IdError::MalformedBody)?;
    let root: &RawValue = serde_json::from_str(text).map_err(|_| IdError::MalformedBody)?;
    let entries = raw_at(root, "/entry").ok_or_else(|| IdError::Missing("json /entry".to_owned()))?;
    let entries: Vec<&RawValue> = serde_json::from_str(entries.get())
        .map_err(|_| IdError::Missing("json /entry (an array)".to_owned()))?;
    if entries.is_empty() {
        return Err(IdError::Missing("json /entry holds no events".to_owned()));
    }
    if entries.len() > MAX_BATCH_ITEMS {
        return Err(IdError::Invalid(format!(
            "more than {MAX_BATCH_ITEMS} events in one delivery"
        )));
    }
    let mut items = Vec::with_capacity(entries.len());
    for (i, entry) in entries.into_iter().enumerate() {
        let value: serde_json::Value = serde_json::from_str(entry.get()).map_err(|_| IdError::MalformedBody)?;
        if !value.is_object() {
            return Err(IdError::Missing(format!("item {i}: an object")));
        }
        let event_type = match value.pointer("/changes/0/field") {
            Some(serde_json::Value::String(field)) if !field.is_empty() => Some(field.clone()),
            _ => value.get("messaging").map(|_| "messaging".to_owned()),
        };
        let bytes = entry.get().as_bytes();
        let event_id = valid_id(
            &format!("item {i}"),
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(bytes)),
        )?;
        items.push(Item {
            identity: Identity {
                event_id,
                event_type,
            },
            payload: bytes.to_vec(),
        });
    }
    Ok(Identified::Batch(items))
}

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac {
        signature: Signature::header("x-hub-signature-256", "sha256=", Encoding::Hex),
        signed: Template::body(),
        algorithm: Algorithm::Sha256,
        timestamp: None,
        secret: SecretEncoding::Raw,
    });
    Preset {
        before: Some(subscribe),
        get: true,
        needs_verify_token: true,
        // A WhatsApp Cloud API inbound message: one entry, its type the change's `field`.
        example: Some(Example {
            body: r#"{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},"contacts":[{"profile":{"name":"Ada"},"wa_id":"16505551234"}],"messages":[{"from":"16505551234","id":"wamid.{id}","timestamp":"{now}","text":{"body":"Hello"},"type":"text"}]},"field":"{type}"}]}]}"#,
            content_type: "application/json",
            headers: &[],
        }),
        ..Preset::new("meta", family, Identify::Custom(identify))
    }
}
