//! Segment Webhooks (Actions) and (Classic) destinations: `X-Signature: <hex HMAC-SHA1 of the body>` with the
//! shared secret as text; no timestamp, no handshake; the method is the mapping's (POST, PUT or PATCH). With the
//! default mapping the body is the Segment event: id `messageId`, type `type`. A batched delivery (a JSON array)
//! is signed over its first event only, so it never verifies here: leave the destination's batch size at 0.
//! <https://www.twilio.com/docs/segment/connections/destinations/catalog/actions-webhook>

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("x-signature", "", Encoding::Hex),
        Algorithm::Sha1,
    ));
    Preset::new("segment", family, Identify::at("json:/messageId", Some("json:/type")))
}
