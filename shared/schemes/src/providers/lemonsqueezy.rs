//! Lemon Squeezy: `X-Signature` = hex HMAC-SHA256 of the raw body, keyed with the signing secret chosen for the
//! webhook. No timestamp is signed. Lemon Squeezy sends no event id: the id is the hex SHA-256 of the body (what it
//! signs); the type is the `X-Event-Name` header (also `meta.event_name`).
//! <https://docs.lemonsqueezy.com/help/webhooks/signing-requests>

use http::HeaderName;

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("x-signature", "", Encoding::Hex),
        Algorithm::Sha256,
    ));
    Preset {
        kept: vec![HeaderName::from_static("x-event-name")],
        ..Preset::new(
            "lemonsqueezy",
            family,
            Identify::at("sha256", Some("header:x-event-name")),
        )
    }
}
