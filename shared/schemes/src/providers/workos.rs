//! WorkOS: `WorkOS-Signature: t={unix ms}, v1={hex HMAC-SHA256 of "{t}.{raw body}"}`, keyed with the endpoint's
//! secret; 180 s either way, as WorkOS's SDKs default to. The id is the body's `id` (`event_...`), the type its
//! `event`.
//! <https://workos.com/docs/events/data-syncing/webhooks>

use crate::families::{Family, Hmac, SecretEncoding, Signature, Template, Timestamp};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac {
        signature: Signature::pairs("workos-signature", ',', Some("t"), &["v1"], Encoding::Hex),
        signed: Template::of("{timestamp}.{body}"),
        algorithm: Algorithm::Sha256,
        timestamp: Some(Timestamp::in_signature().millis()),
        secret: SecretEncoding::Raw,
    });
    Preset {
        tolerance_secs: Some(180),
        ..Preset::new("workos", family, Identify::at("json:/id", Some("json:/event")))
    }
}
