//! Zoom: `x-zm-signature` = `v0=` + hex HMAC-SHA256 of `v0:{x-zm-request-timestamp}:{body}` with the app's
//! Secret Token; no tolerance is documented (300 s). `endpoint.url_validation` (on setup and every 72 hours) is
//! signed like any event and answered 200 JSON `{plainToken, encryptedToken}` (hex HMAC-SHA256 of plainToken),
//! never stored. Zoom sends no event id: the id is the hex SHA-256 of the body; the type is `event`.
//! <https://developers.zoom.us/docs/api/webhooks/#verify-webhook-events>

use http::HeaderName;
use subtle::ConstantTimeEq;

use crate::families::{Family, Hmac, SecretEncoding, Signature, Template, Timestamp};
use crate::providers::{Identify, Preset};
use crate::request::{Answer, Credentials, Request};
use crate::encoding::Encoding;
use crate::key::Key;
use crate::mac::{mac, Algorithm};

const TIMESTAMP: &str = "x-zm-request-timestamp";

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac {
        signature: Signature::header("x-zm-signature", "v0=", Encoding::Hex),
        signed: Template::of("v0:{timestamp}:{body}"),
        algorithm: Algorithm::Sha256,
        timestamp: Some(Timestamp::header(TIMESTAMP)),
        secret: SecretEncoding::Raw,
    });
    Preset {
        kept: vec![HeaderName::from_static(TIMESTAMP)],
        after: Some(url_validation),
        ..Preset::new("zoom", family, Identify::at("sha256", Some("json:/event")))
    }
}

/// The answer to a verified `endpoint.url_validation`, with the secret that signed it.
fn url_validation(req: &Request, creds: &Credentials) -> Option<Answer> {
    #[derive(serde::Deserialize)]
    struct Event {
        event: String,
        payload: Payload,
    }
    #[derive(serde::Deserialize)]
    struct Payload {
        #[serde(rename = "plainToken")]
        plain_token: String,
    }
    let event: Event = serde_json::from_slice(req.body).ok()?;
    if event.event != "endpoint.url_validation" {
        return None;
    }
    let key = signing_key(req, &creds.secrets)?;
    let encrypted = hex::encode(mac(Algorithm::Sha256, key, &[event.payload.plain_token.as_bytes()]));
    // Written by hand to keep Zoom's documented order (serde_json's maps sort their keys).
    let body = format!(
        "{{\"plainToken\":{},\"encryptedToken\":\"{encrypted}\"}}",
        serde_json::Value::String(event.payload.plain_token)
    );
    Some(Answer {
        body: body.into_bytes(),
        ..Answer::json(&serde_json::Value::Null)
    })
}

/// Which configured secret signed the request (several while a token rotates).
fn signing_key<'a>(req: &Request, keys: &'a [Key]) -> Option<&'a Key> {
    let timestamp = req.header(TIMESTAMP)?;
    let signature = hex::decode(req.header("x-zm-signature")?.trim().strip_prefix("v0=")?).ok()?;
    keys.iter().find(|key| {
        let expected = mac(
            Algorithm::Sha256,
            key,
            &[b"v0:", timestamp.as_bytes(), b":", req.body],
        );
        bool::from(expected.as_slice().ct_eq(&signature))
    })
}
