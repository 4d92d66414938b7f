//! LaunchDarkly: `X-LD-Signature` = hex HMAC-SHA256 of the raw body, keyed with the webhook's secret (sent only
//! for a signed webhook). No timestamp is signed (the body's `date`, in ms, orders entries; no tolerance is
//! documented). The body is an audit log entry: the id is its `_id`, the type its `kind` (`flag`).
//! <https://launchdarkly.com/docs/home/infrastructure/webhooks#sign-a-webhook>

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("x-ld-signature", "", Encoding::Hex),
        Algorithm::Sha256,
    ));
    Preset::new("launchdarkly", family, Identify::at("json:/_id", Some("json:/kind")))
}
