//! Mailchimp Transactional (Mandrill): `X-Mandrill-Signature` = base64 HMAC-SHA1 of the webhook URL exactly as
//! registered (`url`) followed by each POST field sorted by name, name then value; the key is the webhook's key.
//! The one field, `mandrill_events`, is a JSON array of up to 1000 events: a batch. Events carry no unique id
//! (`_id` is the message's, shared by its send, open and click), so each item's id is the hex SHA-256 of its exact
//! JSON text; its type is `event`, or `type` for sync events. Adding a webhook sends a HEAD, then (if that fails)
//! an empty batch signed with the generic key `test-webhook`: both answered 200, never stored.
//! <https://mailchimp.com/developer/transactional/guides/track-respond-activity-webhooks/#authenticating-webhook-requests>

use http::Method;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::families::{Family, Hmac, SecretEncoding, Signature, Template};
use crate::providers::{Example, Identify, Preset, MAX_BATCH_ITEMS};
use crate::request::{Answer, Credentials, Identified, Item, Request};
use crate::clock::Clock;
use crate::encoding::Encoding;
use crate::errors::IdError;
use crate::identity::Identity;
use crate::key::Key;
use crate::mac::Algorithm;

const FIELD: &str = "mandrill_events";

fn hmac() -> Hmac {
    Hmac {
        signature: Signature::header("x-mandrill-signature", "", Encoding::Base64),
        signed: Template::of("{url}{params}"),
        algorithm: Algorithm::Sha1,
        timestamp: None,
        secret: SecretEncoding::Raw,
    }
}

pub(super) fn preset() -> Preset {
    Preset {
        before: Some(webhook_check),
        after: Some(empty_batch),
        // One `send` event in the `mandrill_events` field (the JSON array, form-encoded).
        example: Some(Example {
            body: "mandrill_events=%5B%7B%22event%22%3A%22{type}%22%2C%22msg%22%3A%7B%22ts%22%3A{now}\
                   %2C%22subject%22%3A%22Your%20order%20has%20shipped%22\
                   %2C%22email%22%3A%22kate%40example.com%22%2C%22sender%22%3A%22shop%40example.com%22\
                   %2C%22tags%22%3A%5B%22shipping%22%5D%2C%22state%22%3A%22sent%22\
                   %2C%22_id%22%3A%22a1b2c3d4e5f60718293a4b5c6d7e8f90%22%7D\
                   %2C%22_id%22%3A%22a1b2c3d4e5f60718293a4b5c6d7e8f90%22%2C%22ts%22%3A{now}%7D%5D",
            content_type: "application/x-www-form-urlencoded",
            headers: &[],
        }),
        ..Preset::new("mandrill", Family::Hmac(hmac()), Identify::Custom(identify))
    }
}

/// The checks Mandrill makes when a webhook is added: a HEAD, or an empty batch signed with `test-webhook`.
fn webhook_check(req: &Request, creds: &Credentials) -> Option<Result<Answer, crate::errors::VerifyError>> {
    if req.method == Method::HEAD {
        return Some(Ok(Answer::empty(200)));
    }
    if req.form(FIELD)?.trim() != "[]" {
        return None;
    }
    let generic = [Key::new(b"test-webhook".to_vec())];
    // Signed with the generic key: answered; otherwise it is an ordinary delivery, verified with the real key.
    let clock = Clock {
        now_unix: 0,
        tolerance_secs: 0,
    };
    hmac()
        .verify(&generic, req, creds, clock)
        .ok()
        .map(|()| Ok(Answer::empty(200)))
}

/// A verified delivery with no events (the same check signed with the webhook's own key).
fn empty_batch(req: &Request, _: &Credentials) -> Option<Answer> {
    (req.form(FIELD)?.trim() == "[]").then(|| Answer::empty(200))
}

/// One event per element of `mandrill_events`, under the hex SHA-256 of its JSON text.
fn identify(req: &Request) -> Result<Identified, IdError> {
    let json = req
        .form(FIELD)
        .ok_or_else(|| IdError::Missing(format!("form {FIELD}")))?;
    let elements: Vec<&RawValue> = serde_json::from_str(&json).map_err(|_| IdError::MalformedBody)?;
    if elements.is_empty() {
        return Err(IdError::Missing(format!("form {FIELD} holds no events")));
    }
    if elements.len() > MAX_BATCH_ITEMS {
        return Err(IdError::Invalid(format!(
            "more than {MAX_BATCH_ITEMS} events in one delivery"
        )));
    }
    #[derive(serde::Deserialize)]
    struct Kind {
        event: Option<String>,
        #[serde(rename = "type")]
        sync: Option<String>,
    }
    let mut items = Vec::with_capacity(elements.len());
    for element in elements {
        let text = element.get();
        let kind: Kind = serde_json::from_str(text).map_err(|_| IdError::MalformedBody)?;
        items.push(Item {
            identity: Identity {
                event_id: hex::encode(Sha256::digest(text.as_bytes())),
                event_type: kind.event.or(kind.sync).filter(|t| !t.is_empty()),
            },
            payload: text.as_bytes().to_vec(),
        });
    }
    Ok(Identified::Batch(items))
}

