//! Paystack: `x-paystack-signature` is the hex HMAC-SHA512 of the raw body under the account's secret key
//! (`sk_live_...`/`sk_test_...`, as shown); no timestamp. The body has no event id (`data.id` names the resource,
//! shared by its events), so the id is the body's SHA-256; the type is `event` (`charge.success`). No handshake.
//! <https://paystack.com/docs/payments/webhooks/>

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("x-paystack-signature", "", Encoding::Hex),
        Algorithm::Sha512,
    ));
    Preset::new("paystack", family, Identify::at("sha256", Some("json:/event")))
}
