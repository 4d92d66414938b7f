//! Asana: `X-Hook-Signature: <hex HMAC-SHA256 of the body>`, keyed with the `X-Hook-Secret` of the webhook's
//! handshake as text; no timestamp. The handshake (a POST carrying `X-Hook-Secret`, unsigned) is answered 200 and
//! never stored; the user configures that secret from the `X-Hook-Secret` field `POST /webhooks` returns. A body
//! is `{"events":[...]}`: a batch whose events carry no id, so each one's id is the hex SHA-256 of its bytes as
//! sent, its type `resource.resource_type` + `.` + `action` (`task.changed`); the signed empty heartbeat (every
//! 8 h) is answered 200, not stored. <https://developers.asana.com/docs/webhooks-guide>

use http::HeaderName;
use serde_json::value::RawValue;

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Example, Identify, Preset, elements, hashed_items};
use crate::request::{Answer, Credentials, Identified, Request};
use crate::encoding::Encoding;
use crate::errors::{IdError, VerifyError};
use crate::mac::Algorithm;

const HOOK_SECRET: HeaderName = HeaderName::from_static("x-hook-secret");

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("x-hook-signature", "", Encoding::Hex),
        Algorithm::Sha256,
    ));
    Preset {
        before: Some(handshake),
        after: Some(heartbeat),
        // One `task.changed` event in `events`.
        example: Some(Example {
            body: r#"{"events":[{"user":{"gid":"1201234567890123","resource_type":"user"},"created_at":"2025-12-31T23:59:57.120Z","action":"changed","resource":{"gid":"1209876543210987","resource_type":"task","resource_subtype":"default_task"},"parent":null,"change":{"field":"due_on","action":"changed"}}]}"#,
            content_type: "application/json; charset=utf-8",
            headers: &[],
        }),
        ..Preset::new("asana", family, Identify::Custom(identify))
    }
}

/// The handshake: Asana waits for 200 (or 204) with the same `X-Hook-Secret` echoed in the answer's headers.
/// The secret is not kept here: adopting it would let whoever posts a handshake first choose the key.
fn handshake(req: &Request, _: &Credentials) -> Option<Result<Answer, VerifyError>> {
    let secret = req.header(HOOK_SECRET.as_str())?;
    Some(Ok(Answer::empty(200).with_header(HOOK_SECRET, secret)))
}

/// The `events` array's elements, their bytes as sent.
fn events(body: &[u8]) -> Result<Vec<&RawValue>, IdError> {
    elements(body, "/events")
}

/// The heartbeat: a signed delivery with no events, answered 200 and not stored.
fn heartbeat(req: &Request, _: &Credentials) -> Option<Answer> {
    events(req.body).ok().filter(Vec::is_empty).map(|_| Answer::empty(200))
}

fn identify(req: &Request) -> Result<Identified, IdError> {
    hashed_items(events(req.body)?, |event| {
        let resource = event.pointer("/resource/resource_type").and_then(serde_json::Value::as_str);
        match (resource, event.get("action").and_then(serde_json::Value::as_str)) {
            (Some(resource), Some(action)) => Some(format!("{resource}.{action}")),
            (None, Some(action)) => Some(action.to_owned()),
            _ => None,
        }
    })
}
