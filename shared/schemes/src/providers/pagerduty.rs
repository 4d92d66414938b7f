//! PagerDuty V3 webhooks: `X-PagerDuty-Signature` is a comma-separated list of `v1=<hex HMAC-SHA256 of the raw
//! body>`, one per active secret of the subscription (so any may match while a secret rotates). No timestamp is
//! signed. One event per request: the id is the body's `event.id` (signed; `X-Webhook-Id` is the unsigned
//! delivery id), the type `event.event_type` (`incident.triggered`; `pagey.ping` is the test event).
//! <https://developer.pagerduty.com/docs/webhooks-overview>
//! <https://github.com/PagerDuty/developer-docs/blob/main/docs/webhooks/04-Signatures.md>

use http::HeaderName;

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::pairs("x-pagerduty-signature", ',', None, &["v1"], Encoding::Hex),
        Algorithm::Sha256,
    ));
    Preset {
        kept: vec![
            HeaderName::from_static("x-webhook-id"),
            HeaderName::from_static("x-webhook-subscription"),
        ],
        ..Preset::new(
            "pagerduty",
            family,
            Identify::at("json:/event/id", Some("json:/event/event_type")),
        )
    }
}
