//! Squarespace: `Squarespace-Signature` is the hex HMAC-SHA256 of the raw body under the subscription's secret,
//! which is hex: the key is its decoded bytes; no timestamp. The id is the notification's `id`, the type its
//! `topic` (`order.create`, `order.update`, `extension.uninstall`). Test notifications are ordinary signed ones.
//! <https://developers.squarespace.com/commerce-apis/webhooks/verifying-notifications>

use crate::families::{Family, Hmac, SecretEncoding, Signature, Template};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac {
        signature: Signature::header("squarespace-signature", "", Encoding::Hex),
        signed: Template::body(),
        algorithm: Algorithm::Sha256,
        timestamp: None,
        secret: SecretEncoding::Hex,
    });
    Preset::new(
        "squarespace",
        family,
        Identify::at("json:/id", Some("json:/topic")),
    )
}
