//! How signatures are written in headers: hex or base64 ([`Encoding`]), and the lenient base64 that secrets,
//! keys and signatures are read with.

use std::str::FromStr;

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;

use crate::errors::ParseError;

/// How a signature is written in its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Hex,
    Base64,
}

impl FromStr for Encoding {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s {
            "hex" => Ok(Encoding::Hex),
            "base64" => Ok(Encoding::Base64),
            _ => Err(ParseError(format!(
                "unknown encoding {s:?} (expected \"hex\" or \"base64\")"
            ))),
        }
    }
}

/// Standard base64 that accepts the padding present or not.
pub(crate) const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

pub(crate) fn encode(encoding: Encoding, bytes: &[u8]) -> String {
    match encoding {
        Encoding::Hex => hex::encode(bytes),
        Encoding::Base64 => base64::engine::general_purpose::STANDARD.encode(bytes),
    }
}

/// Decodes one signature; `None` if it is not valid in `encoding` (odd-length hex, bad base64, ...).
pub(crate) fn decode(encoding: Encoding, text: &str) -> Option<Vec<u8>> {
    match encoding {
        Encoding::Hex => hex::decode(text.trim()).ok(),
        Encoding::Base64 => BASE64.decode(text.trim()).ok(),
    }
}
