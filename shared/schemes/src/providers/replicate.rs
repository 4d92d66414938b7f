//! Replicate: Standard Webhooks. `webhook-signature` lists `v1,<base64 HMAC-SHA256 of
//! "<webhook-id>.<webhook-timestamp>.<body>">`, keyed with the base64 after `whsec_` (the secret from
//! `GET /v1/webhooks/default/secret`); Replicate asks for a timestamp check without a window: 5 minutes, as
//! Standard Webhooks. The body is the prediction (or training) itself and one prediction sends several webhooks,
//! so the id is `webhook-id` (the same across retries) and the type the object's `status`. No handshake.
//! <https://replicate.com/docs/topics/webhooks/verify-webhook>

use http::HeaderName;

use crate::families::{Family, Hmac, SecretEncoding, Signature, Template, Timestamp};
use crate::providers::{Identify, Preset};
use crate::{Algorithm, Encoding};

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac {
        signature: Signature::list("webhook-signature", ' ', "v1,", Encoding::Base64),
        signed: Template::of("{header:webhook-id}.{timestamp}.{body}"),
        algorithm: Algorithm::Sha256,
        timestamp: Some(Timestamp::header("webhook-timestamp")),
        secret: SecretEncoding::Whsec,
    });
    Preset {
        tolerance_secs: Some(300),
        kept: vec![
            HeaderName::from_static("webhook-id"),
            HeaderName::from_static("webhook-timestamp"),
        ],
        ..Preset::new(
            "replicate",
            family,
            Identify::at("header:webhook-id", Some("json:/status")),
        )
    }
}
