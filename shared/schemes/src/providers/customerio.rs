//! Customer.io reporting webhooks: `X-CIO-Signature` = hex HMAC-SHA256 of `v0:{X-CIO-Timestamp}:{body}` with the
//! webhook signing key. No tolerance is documented (300 s). The id is the body's `event_id`, the type its `metric`
//! (`delivered`, `opened`, ...; the channel is in `object_type`). No handshake.
//! <https://docs.customer.io/api/webhooks/#section/Securely-Verifying-Requests>

use http::HeaderName;

use crate::families::{Family, Hmac, SecretEncoding, Signature, Template, Timestamp};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac {
        signature: Signature::header("x-cio-signature", "", Encoding::Hex),
        signed: Template::of("v0:{timestamp}:{body}"),
        algorithm: Algorithm::Sha256,
        timestamp: Some(Timestamp::header("x-cio-timestamp")),
        secret: SecretEncoding::Raw,
    });
    Preset {
        kept: vec![HeaderName::from_static("x-cio-timestamp")],
        ..Preset::new(
            "customerio",
            family,
            Identify::at("json:/event_id", Some("json:/metric")),
        )
    }
}
