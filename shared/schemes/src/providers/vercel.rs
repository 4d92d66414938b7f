//! Vercel: `x-vercel-signature` = hex HMAC-SHA1 of the raw body, keyed with the account webhook's secret or, for
//! an integration's webhooks, the integration's client secret. No timestamp is signed (`createdAt` is in the body,
//! with no documented tolerance). The id is the body's `id`, the type `type` (`deployment.created`).
//! <https://vercel.com/docs/webhooks/webhooks-api#securing-webhooks>

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("x-vercel-signature", "", Encoding::Hex),
        Algorithm::Sha1,
    ));
    Preset::new("vercel", family, Identify::at("json:/id", Some("json:/type")))
}
