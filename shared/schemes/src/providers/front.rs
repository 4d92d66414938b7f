//! Front application webhooks: `X-Front-Signature` = base64 HMAC-SHA256 of `{timestamp}:{raw body}`, keyed with the
//! app secret, where the timestamp is `X-Front-Request-Timestamp` in milliseconds (5 minutes, as Front
//! recommends). The id is `payload.id` (`evt_...`), the type the top-level `type`. Saving the webhook sends a
//! signed `{"type":"sync"}` with `X-Front-Challenge`, answered `{"challenge": value}` and never stored. (Rule
//! webhooks, base64 HMAC-SHA1 of the body with the API secret, are not this scheme.)
//! <https://dev.frontapp.com/docs/application-webhooks>

use http::HeaderName;

use crate::families::{Family, Hmac, SecretEncoding, Signature, Template, Timestamp};
use crate::providers::{Identify, Preset};
use crate::request::{Answer, Credentials, Request};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

const TIMESTAMP: &str = "x-front-request-timestamp";

/// The validation request: echo `X-Front-Challenge` (after the signature has been checked).
fn challenge(req: &Request, _creds: &Credentials) -> Option<Answer> {
    let value = req.header("x-front-challenge")?;
    Some(Answer::json(&serde_json::json!({ "challenge": value })))
}

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac {
        signature: Signature::header("x-front-signature", "", Encoding::Base64),
        signed: Template::of("{timestamp}:{body}"),
        algorithm: Algorithm::Sha256,
        timestamp: Some(Timestamp::header(TIMESTAMP).millis()),
        secret: SecretEncoding::Raw,
    });
    Preset {
        tolerance_secs: Some(300),
        kept: vec![HeaderName::from_static(TIMESTAMP)],
        after: Some(challenge),
        ..Preset::new(
            "front",
            family,
            Identify::at("json:/payload/id", Some("json:/type")),
        )
    }
}
