//! Coinbase Commerce: `X-CC-Webhook-Signature` is the hex HMAC-SHA256 of the raw body under the endpoint's shared
//! secret (its bytes as shown); no timestamp. The id is the body's `event.id` (the top-level `id` names the
//! delivery, and `attempt_number` changes on each retry), the type `event.type` (`charge:confirmed`). No handshake.
//! <https://docs.cdp.coinbase.com/commerce/api-arcitecture/webhooks-security>

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("x-cc-webhook-signature", "", Encoding::Hex),
        Algorithm::Sha256,
    ));
    Preset::new(
        "coinbase",
        family,
        Identify::at("json:/event/id", Some("json:/event/type")),
    )
}
