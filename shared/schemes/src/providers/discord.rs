//! Discord: `X-Signature-Ed25519` (hex) is Ed25519 over `X-Signature-Timestamp` + the raw body, checked with the
//! app's public key (hex); no documented tolerance (300 s). One app signs two kinds of request. Interactions (the
//! body has a `token`): id `id`, type the numeric `type`; PING (type 1) answered `{"type":1}`, every other one
//! with a deferred response at once, as Discord wants one within 3 s. Webhook events (no `token`): no id, so the
//! body's SHA-256, type `event.type`; PING (type 0) and events answered 204.
//! <https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-security-request-headers>
//! <https://discord.com/developers/docs/events/webhook-events>

use http::HeaderName;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::families::{Asymmetric, Family, Signature, Template, Timestamp};
use crate::providers::{Example, Identify, Preset};
use crate::request::{Answer, Credentials, Identified, Request};
use crate::encoding::Encoding;
use crate::errors::IdError;
use crate::identity::Identity;

pub(super) fn preset() -> Preset {
    let family = Family::Ed25519(Asymmetric {
        signature: Signature::header("x-signature-ed25519", "", Encoding::Hex),
        signed: Template::of("{timestamp}{body}"),
        timestamp: Some(Timestamp::header("x-signature-timestamp")),
    });
    Preset {
        kept: vec![HeaderName::from_static("x-signature-timestamp")],
        after: Some(ping),
        answer: Some(answer),
        // A slash command (APPLICATION_COMMAND, type 2) as an interactions endpoint receives it.
        example: Some(Example {
            body: r#"{"application_id":"1173000000000000001","channel_id":"1171000000000000002","data":{"id":"1173000000000000010","name":"ping","type":1},"guild_id":"1171000000000000001","id":"{id}","member":{"permissions":"2248473465835073","roles":[],"user":{"global_name":"Test User","id":"1172000000000000001","username":"testuser"}},"token":"aW50ZXJhY3Rpb246c2FtcGxlOnRlc3QtdG9rZW4","type":2,"version":1}"#,
            content_type: "application/json",
            headers: &[],
        }),
        ..Preset::new("discord", family, Identify::Custom(identify))
    }
}

/// What a Discord request is: an interaction (its numeric type) or a webhook event (its `type`: 0 PING, 1 event).
enum Kind {
    Interaction(i64),
    WebhookEvent(i64),
}

fn kind(body: &[u8]) -> Option<(Kind, Value)> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let t = value.get("type")?.as_i64()?;
    let kind = if value.get("token").is_some() {
        Kind::Interaction(t)
    } else {
        Kind::WebhookEvent(t)
    };
    Some((kind, value))
}

fn ping(req: &Request, _creds: &Credentials) -> Option<Answer> {
    match kind(req.body)?.0 {
        Kind::Interaction(1) => Some(Answer::json(&json!({ "type": 1 }))),
        Kind::WebhookEvent(0) => Some(Answer::empty(204)),
        _ => None,
    }
}

/// The answer Discord needs at once: a deferred response for an interaction (its handler follows up later with
/// the interaction token), 204 for a webhook event.
fn answer(req: &Request) -> Answer {
    match kind(req.body).map(|(k, _)| k) {
        Some(Kind::Interaction(3)) => Answer::json(&json!({ "type": 6 })), // component: deferred update
        Some(Kind::Interaction(4)) => Answer::json(&json!({ "type": 8, "data": { "choices": [] } })),
        Some(Kind::Interaction(_)) => Answer::json(&json!({ "type": 5 })), // deferred channel message
        _ => Answer::empty(204),
    }
}

fn identify(req: &Request) -> Result<Identified, IdError> {
    let (kind, value) = kind(req.body).ok_or(IdError::MalformedBody)?;
    let identity = match kind {
        Kind::Interaction(t) => Identity {
            event_id: crate::identity::valid_id(
                "json /id",
                value
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| IdError::Missing("json /id".to_owned()))?
                    .to_owned(),
            )?,
            event_type: Some(t.to_string()),
        },
        Kind::WebhookEvent(_) => Identity {
            event_id: hex::encode(Sha256::digest(req.body)),
            event_type: value
                .pointer("/event/type")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_owned),
        },
    };
    Ok(Identified::One(identity))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use http::{HeaderMap, Uri};

    use super::*;

    fn answer_to(body: &str) -> Answer {
        let (uri, headers) = (Uri::from_static("/"), HeaderMap::new());
        answer(&Request::post(&uri, &headers, body.as_bytes()))
    }

    #[test]
    fn each_interaction_gets_the_deferred_answer_it_allows() {
        let body = |t: i64| format!(r#"{{"id":"1","token":"t","type":{t}}}"#);
        let json = |a: Answer| serde_json::from_slice::<Value>(&a.body).unwrap();
        assert_eq!(json(answer_to(&body(2))), json!({ "type": 5 }));
        assert_eq!(json(answer_to(&body(3))), json!({ "type": 6 }));
        assert_eq!(json(answer_to(&body(4))), json!({ "type": 8, "data": { "choices": [] } }));
        assert_eq!(json(answer_to(&body(5))), json!({ "type": 5 }));
        assert_eq!(answer_to(r#"{"version":1,"type":1,"event":{}}"#).status, 204);
    }
}
