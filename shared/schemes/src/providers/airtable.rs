//! Airtable: `X-Airtable-Content-MAC: hmac-sha256=<hex HMAC-SHA256 of the body>`, keyed with the bytes of the
//! webhook's `macSecretBase64` (configured as Airtable returns it, base64). No timestamp. The body is a thin
//! ping (base id, webhook id, timestamp; the changes are read from the webhook's payloads endpoint) with no
//! event id: the id is the hex SHA-256 of the body, no type. Answered 200.
//! <https://airtable.com/developers/web/api/webhooks-overview>

use crate::families::{Family, Hmac, SecretEncoding, Signature};
use crate::providers::{Identify, Preset};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac {
        secret: SecretEncoding::Base64,
        ..Hmac::of_body(
            Signature::header("x-airtable-content-mac", "hmac-sha256=", Encoding::Hex),
            Algorithm::Sha256,
        )
    });
    Preset::new("airtable", family, Identify::at("sha256", None))
}
