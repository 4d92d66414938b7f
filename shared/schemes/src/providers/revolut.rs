//! Revolut Business (the Merchant API signs the same way): `Revolut-Signature: v1={hex HMAC-SHA256 of
//! "v1.{Revolut-Request-Timestamp}.{body}"}`, several `v1=` comma-separated while a rotated secret stays valid; the
//! key is the `wsk_...` string; the timestamp is in milliseconds, 5 minutes tolerance. The body carries no id and
//! the signed timestamp changes on every retry, so the id is the body's SHA-256; the type is `event`. No handshake.
//! <https://developer.revolut.com/docs/guides/manage-accounts/webhooks/verify-the-payload-signature>

use http::HeaderName;

use crate::families::{Family, Hmac, SecretEncoding, Signature, Template, Timestamp};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac {
        signature: Signature::list("revolut-signature", ',', "v1=", Encoding::Hex),
        signed: Template::of("v1.{timestamp}.{body}"),
        algorithm: Algorithm::Sha256,
        timestamp: Some(Timestamp::header("revolut-request-timestamp").millis()),
        secret: SecretEncoding::Raw,
    });
    Preset {
        tolerance_secs: Some(300),
        kept: vec![HeaderName::from_static("revolut-request-timestamp")],
        ..Preset::new("revolut", family, Identify::at("sha256", Some("json:/event")))
    }
}
