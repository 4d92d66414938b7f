//! Polar: Standard Webhooks (`webhook-id`, `webhook-timestamp` in seconds, `webhook-signature: v1,{base64} ...`
//! over `{id}.{timestamp}.{body}`), except that the HMAC key is the secret as shown (`polar_whs_...`) taken as its
//! UTF-8 bytes, not base64-decoded (Polar's SDKs hand the standard library base64 of the secret); 5 minutes
//! tolerance, as its SDKs check. The id is `webhook-id`, the type the body's `type`. No handshake.
//! <https://polar.sh/docs/integrate/webhooks/delivery>

use crate::families::SecretEncoding;
use crate::providers::{Identify, Preset, StandardHeaders};

pub(super) fn preset() -> Preset {
    Preset::standard_webhooks(
        "polar",
        StandardHeaders::Webhook,
        SecretEncoding::Raw,
        Identify::at("header:webhook-id", Some("json:/type")),
    )
}
