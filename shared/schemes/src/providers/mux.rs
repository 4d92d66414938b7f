//! Mux: `mux-signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, several `v1` possible, keyed with the
//! webhook's signing secret as text; 5 minutes of tolerance, as Mux's SDKs allow. Id and type are the body's
//! `id` and `type`. No handshake.
//! <https://mux.com/docs/core/verify-webhook-signatures>

use crate::families::{Family, Hmac, SecretEncoding, Signature, Template, Timestamp};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac {
        signature: Signature::pairs("mux-signature", ',', Some("t"), &["v1"], Encoding::Hex),
        signed: Template::of("{timestamp}.{body}"),
        algorithm: Algorithm::Sha256,
        timestamp: Some(Timestamp::in_signature()),
        secret: SecretEncoding::Raw,
    });
    Preset {
        tolerance_secs: Some(300),
        ..Preset::new("mux", family, Identify::at("json:/id", Some("json:/type")))
    }
}
