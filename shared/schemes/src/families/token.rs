//! The `token` family: a shared secret sent as is (a header, an `Authorization` value, HTTP Basic credentials or a
//! query parameter), compared in constant time with each configured secret. It signs nothing: whoever holds the
//! token can send anything, which is what these providers chose.

use base64::Engine as _;
use http::HeaderName;
use sha2::{Digest, Sha256};
use subtle::{Choice, ConstantTimeEq};

use crate::errors::VerifyError;
use crate::key::Key;
use crate::request::{Request, Signed};

/// Where the token is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenAt {
    /// A header's whole value after `prefix` (`Bearer `, or nothing).
    Header { name: HeaderName, prefix: String },
    /// `Authorization: Basic base64(user:password)`; the secret is `user:password`.
    Basic,
    /// A query parameter of the URL.
    Query(String),
}

#[derive(Clone, Debug)]
pub struct Token {
    pub at: TokenAt,
}

impl Token {
    pub fn header(name: &'static str) -> Self {
        Token {
            at: TokenAt::Header {
                name: HeaderName::from_static(name),
                prefix: String::new(),
            },
        }
    }

    pub fn bearer() -> Self {
        Token {
            at: TokenAt::Header {
                name: http::header::AUTHORIZATION,
                prefix: "Bearer ".to_owned(),
            },
        }
    }

    pub fn basic() -> Self {
        Token { at: TokenAt::Basic }
    }

    fn presented(&self, req: &Request) -> Result<Vec<u8>, VerifyError> {
        match &self.at {
            TokenAt::Header { name, prefix } => {
                let value = crate::headers::header_first(req.headers, name)?;
                let token = if prefix.is_empty() {
                    value
                } else {
                    strip_prefix_ignore_case(value, prefix)
                        .ok_or_else(|| crate::headers::malformed(name, "wrong scheme"))?
                };
                Ok(token.as_bytes().to_vec())
            }
            TokenAt::Basic => {
                let name = http::header::AUTHORIZATION;
                let value = crate::headers::header_first(req.headers, &name)?;
                let encoded = strip_prefix_ignore_case(value, "Basic ")
                    .ok_or_else(|| crate::headers::malformed(&name, "not Basic"))?;
                crate::encoding::BASE64
                    .decode(encoded.trim())
                    .map_err(|_| crate::headers::malformed(&name, "not base64"))
            }
            TokenAt::Query(name) => req
                .query(name)
                .map(String::into_bytes)
                .ok_or_else(|| VerifyError::MissingHeader(format!("query {name}"))),
        }
    }

    /// Accepts if the presented token equals any secret. Compared as SHA-256 digests in constant time, so
    /// neither the content nor the length of a secret leaks through timing.
    pub fn verify(&self, secrets: &[Key], req: &Request) -> Result<(), VerifyError> {
        let presented = Sha256::digest(self.presented(req)?);
        let mut matched = Choice::from(0);
        for secret in secrets {
            matched |= Sha256::digest(secret.expose())
                .as_slice()
                .ct_eq(presented.as_slice());
        }
        if bool::from(matched) {
            Ok(())
        } else {
            Err(VerifyError::Mismatch)
        }
    }

    pub fn sign(&self, key: &Key) -> Signed {
        let token = String::from_utf8_lossy(key.expose()).into_owned();
        let headers = match &self.at {
            TokenAt::Header { name, prefix } => vec![(name.clone(), format!("{prefix}{token}"))],
            TokenAt::Basic => vec![(
                http::header::AUTHORIZATION,
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(token)
                ),
            )],
            // The caller puts it in the URL.
            TokenAt::Query(_) => Vec::new(),
        };
        Signed { headers, body: None }
    }
}

fn strip_prefix_ignore_case<'a>(value: &'a str, prefix: &str) -> Option<&'a str> {
    let head = value.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &value[prefix.len()..])
}
