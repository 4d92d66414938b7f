//! OpenAI: Standard Webhooks. `webhook-signature` lists `v1,<base64 HMAC-SHA256 of
//! "<webhook-id>.<webhook-timestamp>.<body>">` (space-separated, any may match), keyed with the base64 after
//! `whsec_`; 5 minutes both ways, as OpenAI's SDKs check. The id is the body's `id` (`evt_...`, the event's;
//! `webhook-id` is the delivery's), the type the body's `type`. No handshake.
//! <https://platform.openai.com/docs/guides/webhooks>

use crate::families::SecretEncoding;
use crate::providers::{Identify, Preset, StandardHeaders};

pub(super) fn preset() -> Preset {
    Preset::standard_webhooks(
        "openai",
        StandardHeaders::Webhook,
        SecretEncoding::Whsec,
        Identify::at("json:/id", Some("json:/type")),
    )
}
