//! Flutterwave: current deliveries carry `flutterwave-signature`, the base64 HMAC-SHA256 of the raw body under the
//! dashboard's secret hash (its bytes); v3 deliveries carry `verif-hash`, the secret hash itself (a bare token,
//! compared in constant time). Either authenticates; no timestamp. The id is the body's `webhook_id` (v4), else
//! the body's SHA-256 (v3 bodies have none); the type `type` (v4), else `event` (v3). No handshake.
//! <https://developer.flutterwave.com/docs/webhooks>

use crate::families::{Custom, Family, Hmac, Signature, Signer, Token};
use crate::json::Leaf;
use crate::providers::{Identify, Preset};
use crate::request::{Credentials, Identified, Request, Signed};
use crate::clock::Clock;
use crate::encoding::Encoding;
use crate::errors::{IdError, VerifyError};
use crate::identity::Identity;
use crate::mac::Algorithm;

const SIGNATURE: &str = "flutterwave-signature";
const VERIF_HASH: &str = "verif-hash";

pub(super) fn preset() -> Preset {
    let family = Family::Custom(Custom {
        verify,
        has_timestamp: false,
        sign: Some(sign),
    });
    Preset::new("flutterwave", family, Identify::Custom(identify))
}

fn hmac() -> Hmac {
    Hmac::of_body(
        Signature::header(SIGNATURE, "", Encoding::Base64),
        Algorithm::Sha256,
    )
}

/// The HMAC where the delivery carries it, else the v3 token.
fn verify(creds: &Credentials, req: &Request, clock: Clock) -> Result<(), VerifyError> {
    if req.headers.contains_key(SIGNATURE) {
        let signed = hmac().verify(&creds.secrets, req, creds, clock);
        if signed.is_ok() || !req.headers.contains_key(VERIF_HASH) {
            return signed;
        }
    }
    if req.headers.contains_key(VERIF_HASH) {
        return Token::header(VERIF_HASH).verify(&creds.secrets, req);
    }
    Err(VerifyError::MissingHeader(SIGNATURE.to_owned()))
}

/// Signs as current deliveries do: the HMAC header.
fn sign(signer: &Signer, _: &Credentials, req: &Request, _: &Identity, now_unix: i64) -> Signed {
    match signer {
        Signer::Secret(key) => hmac().sign(key, req, &Credentials::default(), now_unix),
        Signer::Private { .. } => Signed::default(),
    }
}

fn identify(req: &Request) -> Result<Identified, IdError> {
    let found = crate::json::at_pointers(req.body, &["/webhook_id", "/type", "/event"])
        .map_err(|_| IdError::MalformedBody)?;
    let text = |i: usize| match found.get(i).cloned().flatten() {
        Some(Leaf::String(s) | Leaf::Number(s)) if !s.is_empty() => Some(s),
        _ => None,
    };
    let event_id = match text(0) {
        Some(id) => crate::identity::valid_id("json /webhook_id", id)?,
        None => hex::encode(<sha2::Sha256 as sha2::Digest>::digest(req.body)),
    };
    Ok(Identified::One(Identity {
        event_id,
        event_type: text(1).or_else(|| text(2)),
    }))
}
