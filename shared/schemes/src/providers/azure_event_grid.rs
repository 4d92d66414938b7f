//! Azure Event Grid (Event Grid schema) signs nothing; of the documented ways to authenticate a webhook
//! delivery, the plain token is a client secret in the subscription's URL query: the receiver's URL plus
//! `?code=SECRET` (a source secret). A static `Authorization: Bearer SECRET` set as a delivery property is accepted
//! too. The body is a JSON array, one event per item: id `id`, type `eventType`. The validation handshake
//! (`aeg-event-type: SubscriptionValidation`, a `Microsoft.EventGrid.SubscriptionValidationEvent`) is answered,
//! once the token checks, with `{"validationResponse": data.validationCode}`. The CloudEvents schema (an OPTIONS
//! handshake answered with a header) and Entra ID tokens are not covered.
//! <https://learn.microsoft.com/en-us/azure/event-grid/security-authentication>
//! <https://learn.microsoft.com/en-us/azure/event-grid/webhook-event-delivery>

use http::HeaderName;
use serde_json::{json, Value};

use crate::families::{Custom, Family, Signer, Token, TokenAt};
use crate::providers::{Batch, Identify, Preset};
use crate::request::{Answer, Credentials, Request, Signed};
use crate::clock::Clock;
use crate::errors::VerifyError;
use crate::identity::Identity;

/// The query parameter that carries the secret.
const QUERY: &str = "code";

pub(super) fn preset() -> Preset {
    let family = Family::Custom(Custom {
        verify,
        has_timestamp: false,
        sign: Some(sign),
    });
    let identify = Identify::Batch(Batch {
        form: None,
        items: "",
        item: "",
        id: "/id",
        event_type: Some("/eventType"),
    });
    Preset {
        kept: vec![
            HeaderName::from_static("aeg-event-type"),
            HeaderName::from_static("aeg-subscription-name"),
            HeaderName::from_static("aeg-delivery-count"),
        ],
        after: Some(validation),
        ..Preset::new("azure-event-grid", family, identify)
    }
}

/// The query key where the URL has one, else the bearer header.
fn verify(creds: &Credentials, req: &Request, _clock: Clock) -> Result<(), VerifyError> {
    let token = if req.query(QUERY).is_some() {
        Token {
            at: TokenAt::Query(QUERY.to_owned()),
        }
    } else {
        Token::bearer()
    };
    token.verify(&creds.secrets, req)
}

/// Sends the secret as the delivery-property header (a query key is the caller's URL).
fn sign(signer: &Signer, _: &Credentials, _req: &Request, _identity: &Identity, _now_unix: i64) -> Signed {
    match signer {
        Signer::Secret(key) => Token::bearer().sign(key),
        Signer::Private { .. } => Signed::default(),
    }
}

fn validation(req: &Request, _creds: &Credentials) -> Option<Answer> {
    if req.header("aeg-event-type") != Some("SubscriptionValidation") {
        return None;
    }
    // A validation request is never stored: one without a code is refused.
    let events: Vec<Value> = serde_json::from_slice(req.body).unwrap_or_default();
    let code = events
        .iter()
        .find(|e| {
            e.get("eventType").and_then(Value::as_str) == Some("Microsoft.EventGrid.SubscriptionValidationEvent")
        })
        .and_then(|e| e.pointer("/data/validationCode"))
        .and_then(Value::as_str);
    Some(match code {
        Some(code) => Answer::json(&json!({ "validationResponse": code })),
        None => Answer::empty(400),
    })
}
