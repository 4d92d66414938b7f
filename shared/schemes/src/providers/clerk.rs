//! Clerk delivers through Svix: `svix-signature` lists `v1,{base64 HMAC-SHA256 of "{svix-id}.{svix-timestamp}.{raw
//! body}"}` (any may match, as during rotation), keyed with the base64 after `whsec_`; 5 minutes either way. The
//! id is `svix-id` (the same on every retry), the type the body's `type`.
//! <https://clerk.com/docs/guides/development/webhooks/overview>

use crate::families::SecretEncoding;
use crate::providers::{Identify, Preset, StandardHeaders};

pub(super) fn preset() -> Preset {
    Preset::standard_webhooks(
        "clerk",
        StandardHeaders::Svix,
        SecretEncoding::Whsec,
        Identify::at("header:svix-id", Some("json:/type")),
    )
}
