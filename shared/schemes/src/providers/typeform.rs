//! Typeform: `Typeform-Signature: sha256=<base64 HMAC-SHA256 of the raw body>`, keyed by the webhook's secret as
//! written; no timestamp is signed. The id is the body's `event_id`, the type `event_type` (`form_response`,
//! `form_response_partial`). No handshake, no required answer.
//! <https://www.typeform.com/developers/webhooks/secure-your-webhooks/>

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("typeform-signature", "sha256=", Encoding::Base64),
        Algorithm::Sha256,
    ));
    Preset::new(
        "typeform",
        family,
        Identify::at("json:/event_id", Some("json:/event_type")),
    )
}
