//! Xero: `x-xero-signature: <base64 HMAC-SHA256 of the body>`, keyed with the webhook key as text (not decoded).
//! No timestamp. A body is `{"events":[...],"firstEventSequence":..,"lastEventSequence":..,"entropy":..}`: a
//! batch whose events carry no id, so each one's id is the hex SHA-256 of its bytes as sent, its type
//! `eventCategory.eventType` (`CONTACT.UPDATE`). Intent to receive is a signed delivery with no events: answered
//! 200, not stored (a wrongly signed one gets the usual 401). Every answer to Xero has no body.
//! <https://developer.xero.com/documentation/webhooks/configuring-your-server>

use serde_json::value::RawValue;

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Example, Identify, Preset, elements, hashed_items};
use crate::request::{Answer, Credentials, Identified, Request};
use crate::encoding::Encoding;
use crate::errors::IdError;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("x-xero-signature", "", Encoding::Base64),
        Algorithm::Sha256,
    ));
    Preset {
        after: Some(intent_to_receive),
        answer: Some(no_body),
        // One `CONTACT.UPDATE` event in `events`.
        example: Some(Example {
            body: r#"{"events":[{"resourceUrl":"https://api.xero.com/api.xro/2.0/Contacts/717f2bfc-c6d4-41fd-b238-3f2f0c0cf777","resourceId":"717f2bfc-c6d4-41fd-b238-3f2f0c0cf777","eventDateUtc":"2025-12-31T23:59:39.902","eventType":"UPDATE","eventCategory":"CONTACT","tenantId":"c2cc9b6e-9458-4c7d-93cc-f02b81b0594f","tenantType":"ORGANISATION"}],"lastEventSequence":1,"firstEventSequence":1,"entropy":"FXNGWLCCGVANWHKILRUB"}"#,
            content_type: "application/json; charset=utf-8",
            headers: &[],
        }),
        // Xero's intent to receive wants a 401 with no body for a wrong signature, as every answer has none.
        bare_refusals: true,
        ..Preset::new("xero", family, Identify::Custom(identify))
    }
}

/// The `events` array's elements, their bytes as sent.
fn events(body: &[u8]) -> Result<Vec<&RawValue>, IdError> {
    elements(body, "/events")
}

/// Intent to receive (and any delivery without events): 200 with no body, nothing stored.
fn intent_to_receive(req: &Request, _: &Credentials) -> Option<Answer> {
    events(req.body).ok().filter(Vec::is_empty).map(|_| Answer::empty(200))
}

/// Xero wants no body in any answer.
fn no_body(_: &Request) -> Answer {
    Answer::empty(200)
}

fn identify(req: &Request) -> Result<Identified, IdError> {
    hashed_items(events(req.body)?, |event| {
        let field = |name: &str| event.get(name).and_then(serde_json::Value::as_str);
        match (field("eventCategory"), field("eventType")) {
            (Some(category), Some(kind)) => Some(format!("{category}.{kind}")),
            _ => None,
        }
    })
}
