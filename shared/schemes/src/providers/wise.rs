//! Wise: `X-Signature-SHA256` is base64 SHA256withRSA (PKCS#1 v1.5) over the raw body, checked with the public
//! key Wise publishes (PEM; one for production, one for sandbox). No timestamp. The id is `X-Delivery-Id` (a UUID
//! per notification; the body has none), the type the body's `event_type`; `X-Test-Notification: true` marks a
//! test delivery. No handshake; a 2xx within 5 s.
//! <https://docs.wise.com/api-docs/features/webhooks-notifications/event-handling>

use http::HeaderName;

use crate::families::{Asymmetric, Family, Rsa, RsaAlgorithm, RsaKey, Signature, Template};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;

pub(super) fn preset() -> Preset {
    let family = Family::Rsa(Rsa {
        spec: Asymmetric {
            signature: Signature::header("x-signature-sha256", "", Encoding::Base64),
            signed: Template::body(),
            timestamp: None,
        },
        algorithm: RsaAlgorithm::Pkcs1Sha256,
        key: RsaKey::Configured,
        message: None,
        message_signer: None,
    });
    Preset {
        kept: vec![
            HeaderName::from_static("x-delivery-id"),
            HeaderName::from_static("x-test-notification"),
        ],
        // The signature covers the body only; the id is an unsigned header.
        resendable: true,
        ..Preset::new(
            "wise",
            family,
            Identify::at("header:x-delivery-id", Some("json:/event_type")),
        )
    }
}
