//! Paddle Billing: `Paddle-Signature: ts={unix};h1={hex HMAC-SHA256 of "{ts}:{body}"}`, several `h1` while a
//! secret rotates; the key is the whole `pdl_ntfset_...` string; 5 s tolerance, as Paddle's SDKs use. The id is
//! the body's `event_id` (not `notification_id`, which differs per destination), the type `event_type`.
//! <https://developer.paddle.com/webhooks/signature-verification>

use crate::families::{Family, Hmac, SecretEncoding, Signature, Template, Timestamp};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac {
        signature: Signature::pairs("paddle-signature", ';', Some("ts"), &["h1"], Encoding::Hex),
        signed: Template::of("{timestamp}:{body}"),
        algorithm: Algorithm::Sha256,
        timestamp: Some(Timestamp::in_signature()),
        secret: SecretEncoding::Raw,
    });
    Preset {
        tolerance_secs: Some(5),
        ..Preset::new(
            "paddle",
            family,
            Identify::at("json:/event_id", Some("json:/event_type")),
        )
    }
}
