//! Razorpay: `X-Razorpay-Signature` = hex HMAC-SHA256 of the raw body, keyed with the webhook secret chosen in the
//! Dashboard. No timestamp is signed. The id is the `x-razorpay-event-id` header (unique per event, Razorpay's
//! duplicate key), which the signature does not cover; the type is the body's `event`.
//! <https://razorpay.com/docs/webhooks/validate-test/>

use http::HeaderName;

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("x-razorpay-signature", "", Encoding::Hex),
        Algorithm::Sha256,
    ));
    Preset {
        kept: vec![HeaderName::from_static("x-razorpay-event-id")],
        // The id header is unsigned: a captured body could come back under a fresh id.
        resendable: true,
        ..Preset::new(
            "razorpay",
            family,
            Identify::at("header:x-razorpay-event-id", Some("json:/event")),
        )
    }
}
