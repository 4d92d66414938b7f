//! Square: `x-square-hmacsha256-signature` = base64 HMAC-SHA256 of the notification URL exactly as registered
//! (`url`, query included) followed by the raw body; the key is the subscription's signature key as shown. No
//! timestamp is signed. The id is the body's `event_id` (Square's idempotency value), the type `type`. The legacy
//! `x-square-signature` (HMAC-SHA1) is not read.
//! <https://developer.squareup.com/docs/webhooks/step3validate>

use http::HeaderName;

use crate::families::{Family, Hmac, SecretEncoding, Signature, Template};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac {
        signature: Signature::header("x-square-hmacsha256-signature", "", Encoding::Base64),
        signed: Template::of("{url}{body}"),
        algorithm: Algorithm::Sha256,
        timestamp: None,
        secret: SecretEncoding::Raw,
    });
    Preset {
        kept: vec![
            HeaderName::from_static("square-initial-delivery-timestamp"),
            HeaderName::from_static("square-retry-number"),
        ],
        ..Preset::new(
            "square",
            family,
            Identify::at("json:/event_id", Some("json:/type")),
        )
    }
}
