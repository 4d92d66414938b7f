//! Cal.com: `X-Cal-Signature-256: <hex HMAC-SHA256 of the body>` with the webhook's secret as text; a webhook
//! without a secret sends `no-secret-provided`, which never verifies. No timestamp. The body
//! (`{triggerEvent, createdAt, payload}`, or the user's payload template) carries no delivery id: the id is the
//! hex SHA-256 of the body (`payload.uid` names the booking, shared by all its events), the type `triggerEvent`.
//! <https://cal.com/docs/core-features/webhooks>

use http::HeaderName;

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("x-cal-signature-256", "", Encoding::Hex),
        Algorithm::Sha256,
    ));
    Preset {
        kept: vec![HeaderName::from_static("x-cal-webhook-version")],
        ..Preset::new("cal", family, Identify::at("sha256", Some("json:/triggerEvent")))
    }
}
