//! LINE Messaging API: `x-line-signature` = base64 HMAC-SHA256 of the raw body, keyed with the channel secret's
//! text. The body `{destination, events[]}` is a batch: each event's id is its `webhookEventId` (kept on
//! redelivery), its type `type`. The console's Verify button sends a signed body with no events: answered 200,
//! never stored. No timestamp is signed.
//! <https://developers.line.biz/en/docs/messaging-api/verify-webhook-signature/>

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Batch, Identify, Preset};
use crate::request::{Answer, Credentials, Request};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("x-line-signature", "", Encoding::Base64),
        Algorithm::Sha256,
    ));
    let batch = Batch {
        form: None,
        items: "/events",
        item: "",
        id: "/webhookEventId",
        event_type: Some("/type"),
    };
    Preset {
        after: Some(verify_button),
        ..Preset::new("line", family, Identify::Batch(batch))
    }
}

/// A verified delivery with an empty `events` array: the console checking the endpoint.
fn verify_button(req: &Request, _: &Credentials) -> Option<Answer> {
    #[derive(serde::Deserialize)]
    struct Body<'a> {
        #[serde(borrow)]
        events: Vec<&'a serde_json::value::RawValue>,
    }
    let body: Body = serde_json::from_slice(req.body).ok()?;
    body.events.is_empty().then(|| Answer::empty(200))
}
