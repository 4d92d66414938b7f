//! The general HMAC family: a MAC over a signed template of the request (`{body}` by default), read from a
//! signature in any of the usual shapes, with an optional signed timestamp. Most providers are a preset of it.

use std::str::FromStr;

use super::{missing, Signature, Template, Timestamp};
use crate::clock::Clock;
use crate::encoding::BASE64;
use crate::errors::{KeyError, ParseError, VerifyError};
use crate::key::Key;
use crate::mac::{mac, verify_mac, Algorithm};
use crate::request::{Credentials, Request, Signed};

/// How a configured secret becomes the HMAC key's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretEncoding {
    /// The string's bytes, as most providers use it.
    Raw,
    Hex,
    Base64,
    /// Base64 after an optional `whsec_` prefix (Standard Webhooks, Svix and their users).
    Whsec,
}

impl FromStr for SecretEncoding {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s {
            "raw" => Ok(SecretEncoding::Raw),
            "hex" => Ok(SecretEncoding::Hex),
            "base64" => Ok(SecretEncoding::Base64),
            "whsec" => Ok(SecretEncoding::Whsec),
            _ => Err(ParseError(format!(
                "unknown secret encoding {s:?} (expected \"raw\", \"hex\", \"base64\" or \"whsec\")"
            ))),
        }
    }
}

impl SecretEncoding {
    pub fn key(self, secret: &str) -> Result<Key, KeyError> {
        use base64::Engine as _;
        let bytes = match self {
            SecretEncoding::Raw => secret.as_bytes().to_vec(),
            SecretEncoding::Hex => hex::decode(secret.trim()).map_err(|_| KeyError::NotDecodable("hex"))?,
            SecretEncoding::Base64 => BASE64
                .decode(secret.trim())
                .map_err(|_| KeyError::NotDecodable("base64"))?,
            SecretEncoding::Whsec => {
                let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
                BASE64
                    .decode(encoded.trim())
                    .map_err(|_| KeyError::NotDecodable("base64 after \"whsec_\""))?
            }
        };
        if bytes.is_empty() {
            return Err(KeyError::Empty);
        }
        Ok(Key::new(bytes))
    }
}

/// The general HMAC family's parameters.
#[derive(Clone, Debug)]
pub struct Hmac {
    pub signature: Signature,
    pub signed: Template,
    pub algorithm: Algorithm,
    pub timestamp: Option<Timestamp>,
    pub secret: SecretEncoding,
}

impl Hmac {
    /// A MAC of the body alone in a plain header: the simplest preset.
    pub fn of_body(signature: Signature, algorithm: Algorithm) -> Self {
        Hmac {
            signature,
            signed: Template::body(),
            algorithm,
            timestamp: None,
            secret: SecretEncoding::Raw,
        }
    }

    pub fn verify(
        &self,
        keys: &[Key],
        req: &Request,
        creds: &Credentials,
        clock: Clock,
    ) -> Result<(), VerifyError> {
        let (candidates, beside) = self.signature.read(req)?;
        // The timestamp first: a stale delivery is refused as stale, whatever its signature.
        let timestamp = match &self.timestamp {
            Some(ts) => Some(ts.check(req, beside, clock)?),
            None => None,
        };
        if candidates.is_empty() {
            return Err(missing(&self.signature.at));
        }
        let parts = self.signed.parts(req, creds, timestamp.as_deref())?;
        let parts: Vec<&[u8]> = parts.iter().map(|p| p.as_ref()).collect();
        let header = self
            .signature
            .header_name()
            .cloned()
            .unwrap_or(http::HeaderName::from_static("signature"));
        verify_mac(self.algorithm, keys, &parts, &candidates, &header)
    }

    /// Signs like the provider: the signature (and a timestamp header of its own, where the timestamp is one).
    pub fn sign(&self, key: &Key, req: &Request, creds: &Credentials, now_unix: i64) -> Signed {
        let ts = self.timestamp.as_ref().map(|t| t.render(now_unix));
        let mut headers: Vec<_> = self
            .timestamp
            .iter()
            .filter_map(|t| t.header_to_send(now_unix))
            .collect();
        // A signed header the request does not carry yet is a message id the sender makes up (Standard
        // Webhooks' `webhook-id` where the event id is in the body): one from the body and the time.
        for part in &self.signed.0 {
            if let super::Part::Header(name) = part {
                if !req.headers.contains_key(name) && !headers.iter().any(|(n, _)| n == name) {
                    use sha2::Digest as _;
                    let digest = sha2::Sha256::digest([req.body, now_unix.to_string().as_bytes()].concat());
                    headers.push((name.clone(), format!("msg_{}", hex::encode(&digest[..12]))));
                }
            }
        }
        let mut with_ts = req.headers.clone();
        for (name, value) in &headers {
            if let Ok(v) = http::HeaderValue::from_str(value) {
                with_ts.insert(name.clone(), v);
            }
        }
        let signing = Request {
            headers: &with_ts,
            ..*req
        };
        let signed = self
            .signed
            .render(&signing, creds, ts.as_deref())
            .unwrap_or_default();
        let tag = mac(self.algorithm, key, &[&signed]);
        if let Some(name) = self.signature.header_name() {
            headers.push((name.clone(), self.signature.write(&tag, ts.as_deref())));
        }
        Signed { headers, body: None }
    }
}
