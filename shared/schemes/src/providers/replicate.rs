//! Replicate: Standard Webhooks. `webhook-signature` lists `v1,<base64 HMAC-SHA256 of
//! "<webhook-id>.<webhook-timestamp>.<body>">`, keyed with the base64 after `whsec_` (the secret from
//! `GET /v1/webhooks/default/secret`); Replicate asks for a timestamp check without a window: 5 minutes, as
//! Standard Webhooks. The body is the prediction (or training) itself and one prediction sends several webhooks,
//! so the id is `webhook-id` (the same across retries) and the type the object's `status`. No handshake.
//! <https://replicate.com/docs/topics/webhooks/verify-webhook>

use crate::families::SecretEncoding;
use crate::providers::{Identify, Preset, StandardHeaders};

pub(super) fn preset() -> Preset {
    Preset::standard_webhooks(
        "replicate",
        StandardHeaders::Webhook,
        SecretEncoding::Whsec,
        Identify::at("header:webhook-id", Some("json:/status")),
    )
}
