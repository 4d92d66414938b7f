//! Resend signs with Svix: `svix-signature` lists `v1,{base64 HMAC-SHA256}` (space-separated, any may match) of
//! `{svix-id}.{svix-timestamp}.{body}`, keyed with the base64 after `whsec_`; 5 minutes' tolerance (Svix's and
//! the Resend SDK's). The id is `svix-id`, the type the body's `type` (`email.delivered`, ...). No handshake.
//! <https://resend.com/docs/webhooks/verify-webhooks-requests>

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
        ..Preset::new("resend", family, Identify::at("header:svix-id", Some("json:/type")))
    }
}
