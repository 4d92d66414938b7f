//! Dropbox: `X-Dropbox-Signature: <hex HMAC-SHA256 of the raw body>`, keyed by the app secret; no timestamp. The
//! endpoint is verified by `GET ?challenge=...`, answered with the challenge as text/plain (unsigned, never
//! stored). A notification only lists the accounts that changed and carries no id, so the id is the hex SHA-256
//! of the body; it has no type. (The same body recurs for every later change of the same accounts, which this id
//! then answers as a duplicate: see the provider notes; the app fetches changes with its cursor either way.)
//! <https://www.dropbox.com/developers/reference/webhooks>

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Identify, Preset};
use crate::request::{Answer, Credentials, Request};
use crate::{Algorithm, Encoding, VerifyError};

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("x-dropbox-signature", "", Encoding::Hex),
        Algorithm::Sha256,
    ));
    Preset {
        before: Some(challenge),
        get: true,
        ..Preset::new("dropbox", family, Identify::at("sha256", None))
    }
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
