//! Resend signs with Svix: `svix-signature` lists `v1,{base64 HMAC-SHA256}` (space-separated, any may match) of
//! `{svix-id}.{svix-timestamp}.{body}`, keyed with the base64 after `whsec_`; 5 minutes' tolerance (Svix's and
//! the Resend SDK's). The id is `svix-id`, the type the body's `type` (`email.delivered`, ...). No handshake.
//! <https://resend.com/docs/webhooks/verify-webhooks-requests>

use crate::families::SecretEncoding;
use crate::providers::{Identify, Preset, StandardHeaders};

pub(super) fn preset() -> Preset {
    Preset::standard_webhooks(
        "resend",
        StandardHeaders::Svix,
        SecretEncoding::Whsec,
        Identify::at("header:svix-id", Some("json:/type")),
    )
}
