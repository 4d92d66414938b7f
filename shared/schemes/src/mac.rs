//! The HMAC under every shared-secret scheme: the hash ([`Algorithm`]), the tag over several parts, and the
//! constant-time check against any key and any signature.

use std::str::FromStr;

use ::hmac::{Hmac, Mac};
use http::HeaderName;
use subtle::{Choice, ConstantTimeEq};

use crate::errors::{ParseError, VerifyError};
use crate::headers::malformed;
use crate::key::Key;

/// The hash under the HMAC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Sha1,
    Sha256,
    Sha512,
}

impl FromStr for Algorithm {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s {
            "sha1" => Ok(Algorithm::Sha1),
            "sha256" => Ok(Algorithm::Sha256),
            "sha512" => Ok(Algorithm::Sha512),
            _ => Err(ParseError(format!(
                "unknown algorithm {s:?} (expected \"sha1\", \"sha256\" or \"sha512\")"
            ))),
        }
    }
}

/// HMAC of the concatenation of `parts`.
pub(crate) fn mac(algorithm: Algorithm, key: &Key, parts: &[&[u8]]) -> Vec<u8> {
    fn run<M: Mac + ::hmac::digest::KeyInit>(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        // HMAC takes keys of any length, so this never fails; an empty tag would simply never match.
        let Ok(mut mac) = <M as ::hmac::digest::KeyInit>::new_from_slice(key) else {
            return Vec::new();
        };
        for part in parts {
            mac.update(part);
        }
        mac.finalize().into_bytes().to_vec()
    }
    match algorithm {
        Algorithm::Sha1 => run::<Hmac<sha1::Sha1>>(key.expose(), parts),
        Algorithm::Sha256 => run::<Hmac<sha2::Sha256>>(key.expose(), parts),
        Algorithm::Sha512 => run::<Hmac<sha2::Sha512>>(key.expose(), parts),
    }
}

/// Accepts if the MAC of `parts` under any key equals any candidate. Every pair is compared in constant time,
/// without stopping at the first match. No decodable candidate at all is a malformed `header`.
pub(crate) fn verify_mac(
    algorithm: Algorithm,
    keys: &[Key],
    parts: &[&[u8]],
    candidates: &[Vec<u8>],
    header: &HeaderName,
) -> Result<(), VerifyError> {
    if candidates.is_empty() {
        return Err(malformed(header, "no usable signature"));
    }
    let mut matched = Choice::from(0);
    for key in keys {
        let expected = mac(algorithm, key, parts);
        if expected.is_empty() {
            continue;
        }
        for candidate in candidates {
            matched |= expected.as_slice().ct_eq(candidate.as_slice());
        }
    }
    if bool::from(matched) {
        Ok(())
    } else {
        Err(VerifyError::Mismatch)
    }
}
