//! Calendly: `Calendly-Webhook-Signature: t={unix},v1={hex HMAC-SHA256 of "{t}.{body}"}`, keyed by the webhook
//! signing key as written; the docs' verification rejects a `t` more than 3 minutes old. Calendly sends no event
//! id and `t` changes per delivery, so the id is the hex SHA-256 of the body (the signed event without its
//! delivery time); the type is the body's `event` (`invitee.created`). No handshake, no required answer.
//! <https://developer.calendly.com/api-docs/overview/webhooks/webhook-signatures>

use crate::families::{Family, Hmac, SecretEncoding, Signature, Template, Timestamp};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac {
        signature: Signature::pairs("calendly-webhook-signature", ',', Some("t"), &["v1"], Encoding::Hex),
        signed: Template::of("{timestamp}.{body}"),
        algorithm: Algorithm::Sha256,
        timestamp: Some(Timestamp::in_signature()),
        secret: SecretEncoding::Raw,
    });
    Preset {
        tolerance_secs: Some(180),
        ..Preset::new("calendly", family, Identify::at("sha256", Some("json:/event")))
    }
}
