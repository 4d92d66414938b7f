//! SendGrid Event Webhook: `X-Twilio-Email-Event-Webhook-Signature` is base64 DER ECDSA P-256/SHA-256 over
//! `X-Twilio-Email-Event-Webhook-Timestamp` + the raw body (a JSON array, CRLF after each event), checked with
//! the verification key SendGrid shows (base64 DER); no documented tolerance (300 s). A batch: one event per
//! array item, id `sg_event_id`, type `event`. No handshake.
//! <https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features>

use http::HeaderName;

use crate::families::{Asymmetric, Family, Signature, Template, Timestamp};
use crate::providers::{Batch, Identify, Preset};
use crate::encoding::Encoding;

pub(super) fn preset() -> Preset {
    let family = Family::Ecdsa(Asymmetric {
        signature: Signature::header("x-twilio-email-event-webhook-signature", "", Encoding::Base64),
        signed: Template::of("{timestamp}{body}"),
        timestamp: Some(Timestamp::header("x-twilio-email-event-webhook-timestamp")),
    });
    let identify = Identify::Batch(Batch {
        form: None,
        items: "",
        item: "",
        id: "/sg_event_id",
        event_type: Some("/event"),
    });
    Preset {
        kept: vec![HeaderName::from_static("x-twilio-email-event-webhook-timestamp")],
        ..Preset::new("sendgrid", family, identify)
    }
}
