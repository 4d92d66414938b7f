//! Dropbox: `X-Dropbox-Signature: <hex HMAC-SHA256 of the raw body>`, keyed by the app secret; no timestamp. The
//! endpoint is verified by `GET ?challenge=...`, answered with the challenge as text/plain (unsigned, never
//! stored). A notification only lists the accounts that changed and carries no id, and the same body comes again
//! for every later change of the same accounts: the id is the hex SHA-256 of the body with the minute it arrived,
//! so a later change is its own event (a body hash alone would answer it as a duplicate for all of retention, and
//! the app would never hear of it), and a retry Dropbox makes in another minute runs again, which its apps expect
//! (they list changes with their cursor). No type. The minute is the receiver's, not signed: a captured
//! notification posted again in another minute verifies under a fresh id, so the preset is `resendable` and the
//! resent-body guard marks such a body (`resent_of`) and alarms. Deriving the id from the signed body alone would
//! answer every later change of the same accounts as a duplicate, and the app would stop hearing of them; so a
//! repeat is stored and run, marked, and a Dropbox source must not set `refuse_resent_bodies` (it would drop those
//! changes). A replay carries no data: the app lists the changes itself.
//! <https://www.dropbox.com/developers/reference/webhooks>

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Identify, Preset};
use crate::request::{Answer, Credentials, Identified, Request};
use crate::encoding::Encoding;
use crate::errors::{IdError, VerifyError};
use crate::identity::Identity;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("x-dropbox-signature", "", Encoding::Hex),
        Algorithm::Sha256,
    ));
    Preset {
        before: Some(challenge),
        get: true,
        // The id's minute is not signed (see above).
        resendable: true,
        ..Preset::new("dropbox", family, Identify::Custom(identify))
    }
}

/// The body's hash and the minute it arrived (see above).
fn identify(req: &Request) -> Result<Identified, IdError> {
    use sha2::Digest as _;
    let minute = req.received_ms.div_euclid(60_000);
    Ok(Identified::One(Identity {
        event_id: format!("{}:{minute}", hex::encode(sha2::Sha256::digest(req.body))),
        event_type: None,
    }))
}

/// The verification request: `GET` with a `challenge` query parameter, echoed back.
fn challenge(req: &Request, _: &Credentials) -> Option<Result<Answer, VerifyError>> {
    if req.method != http::Method::GET {
        return None;
    }
    Some(
        req.query("challenge")
            .filter(|c| !c.is_empty())
            .map(Answer::text)
            .ok_or_else(|| VerifyError::MissingHeader("query challenge".to_owned())),
    )
}
