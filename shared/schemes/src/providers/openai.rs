//! OpenAI: Standard Webhooks. `webhook-signature` lists `v1,<base64 HMAC-SHA256 of
//! "<webhook-id>.<webhook-timestamp>.<body>">` (space-separated, any may match), keyed with the base64 after
//! `whsec_`; 5 minutes both ways, as OpenAI's SDKs check. The id is the body's `id` (`evt_...`, the event's;
//! `webhook-id` is the delivery's), the type the body's `type`. No handshake.
//! <https://platform.openai.com/docs/guides/webhooks>

use http::HeaderName;

use crate::families::{Family, Hmac, SecretEncoding, Signature, Template, Timestamp};
use crate::providers::{Identify, Preset};
use crate::{Algorithm, Encoding};

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac {
        signature: Signature::list("webhook-signature", ' ', "v1,", Encoding::Base64),
        signed: Template::of("{header:webhook-id}.{timestamp}.{body}"),
        algorithm: Algorithm::Sha256,
        timestamp: Some(Timestamp::header("webhook-timestamp")),
        secret: SecretEncoding::Whsec,
    });
    Preset {
        tolerance_secs: Some(300),
        kept: vec![
            HeaderName::from_static("webhook-id"),
            HeaderName::from_static("webhook-timestamp"),
        ],
        ..Preset::new("openai", family, Identify::at("json:/id", Some("json:/type")))
    }
}
