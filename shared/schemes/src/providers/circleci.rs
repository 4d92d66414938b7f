//! CircleCI outbound webhooks: `circleci-signature` is a comma-separated list of versioned signatures, `v1=<hex
//! HMAC-SHA256 of the raw body>` keyed with the webhook's secret token; other versions are ignored. No timestamp
//! is signed. The id is the body's `id` (CircleCI's deduplication key), the type its `type` (`workflow-completed`,
//! also sent as `circleci-event-type`).
//! <https://circleci.com/docs/guides/integration/outbound-webhooks/>

use http::HeaderName;

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::pairs("circleci-signature", ',', None, &["v1"], Encoding::Hex),
        Algorithm::Sha256,
    ));
    Preset {
        kept: vec![HeaderName::from_static("circleci-event-type")],
        ..Preset::new("circleci", family, Identify::at("json:/id", Some("json:/type")))
    }
}
