//! Polar: Standard Webhooks (`webhook-id`, `webhook-timestamp` in seconds, `webhook-signature: v1,{base64} ...`
//! over `{id}.{timestamp}.{body}`), except that the HMAC key is the secret as shown (`polar_whs_...`) taken as its
//! UTF-8 bytes, not base64-decoded (Polar's SDKs hand the standard library base64 of the secret); 5 minutes
//! tolerance, as its SDKs check. The id is `webhook-id`, the type the body's `type`. No handshake.
//! <https://polar.sh/docs/integrate/webhooks/delivery>

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
        secret: SecretEncoding::Raw,
    });
    Preset {
        tolerance_secs: Some(300),
        kept: vec![
            HeaderName::from_static("webhook-id"),
            HeaderName::from_static("webhook-timestamp"),
        ],
        ..Preset::new(
            "polar",
            family,
            Identify::at("header:webhook-id", Some("json:/type")),
        )
    }
}
