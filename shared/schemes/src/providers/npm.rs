//! npm registry hooks (`npm hook add`): `x-npm-signature: sha256=<hex HMAC-SHA256 of the raw body>`, keyed with
//! the hook's secret. The body's `time` (ms) is signed but no tolerance is documented, so it is not checked. npm
//! sends no event id: the id is the hex SHA-256 of the body (its `time` tells events apart); the type is `event`
//! (`package:publish`).
//! <https://github.com/npm/registry/blob/main/docs/hooks/hooks-payload.md>

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("x-npm-signature", "sha256=", Encoding::Hex),
        Algorithm::Sha256,
    ));
    Preset::new("npm", family, Identify::at("sha256", Some("json:/event")))
}
