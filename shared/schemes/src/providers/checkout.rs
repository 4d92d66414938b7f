//! Checkout.com: `Cko-Signature` = hex HMAC-SHA256 of the raw body, keyed with the signature key set in the
//! workflow's webhook action (as text). No timestamp is signed. The id is the body's `id` (`evt_...`), the type
//! `type`. (An `Authorization` value can also be configured per webhook; the signature is what is checked here.)
//! <https://www.checkout.com/docs/developer-resources/webhooks/manage-webhooks/set-up-your-webhook-receiver>

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("cko-signature", "", Encoding::Hex),
        Algorithm::Sha256,
    ));
    Preset::new("checkout", family, Identify::at("json:/id", Some("json:/type")))
}
