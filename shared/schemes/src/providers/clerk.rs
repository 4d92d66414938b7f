//! Clerk delivers through Svix: `svix-signature` lists `v1,{base64 HMAC-SHA256 of "{svix-id}.{svix-timestamp}.{raw
//! body}"}` (any may match, as during rotation), keyed with the base64 after `whsec_`; 5 minutes either way. The
//! id is `svix-id` (the same on every retry), the type the body's `type`.
//! <https://clerk.com/docs/guides/development/webhooks/overview>

use http::HeaderName;

use crate::families::{Family, Hmac, SecretEncoding, Signature, Template, Timestamp};
use crate::providers::{Identify, Preset};
use crate::{Algorithm, Encoding};

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac {
        signature: Signature::list("svix-signature", ' ', "v1,", Encoding::Base64),
        signed: Template::of("{header:svix-id}.{timestamp}.{body}"),
        algorithm: Algorithm::Sha256,
        timestamp: Some(Timestamp::header("svix-timestamp")),
        secret: SecretEncoding::Whsec,
    });
    Preset {
        tolerance_secs: Some(300),
        kept: vec![
            HeaderName::from_static("svix-id"),
            HeaderName::from_static("svix-timestamp"),
        ],
        ..Preset::new(
            "clerk",
            family,
            Identify::at("header:svix-id", Some("json:/type")),
        )
    }
}
