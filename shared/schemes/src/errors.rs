//! The crate's errors: why a delivery failed verification ([`VerifyError`]), why no event id was found
//! ([`IdError`]), why a secret cannot be a key ([`KeyError`]), and why a configuration string did not parse
//! ([`ParseError`]). None of them ever carries a secret, a signature or a body.

/// Why a delivery failed verification. Names headers, never their values.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("missing header {0}")]
    MissingHeader(String),
    #[error("malformed header {0}")]
    MalformedHeader(String),
    /// `skew_secs` is `now - timestamp`: positive for a stale delivery, negative for one from the future.
    #[error("timestamp outside tolerance by {skew_secs} s")]
    Timestamp { skew_secs: i64 },
    #[error("no signature matched")]
    Mismatch,
    /// The request points at a key the provider does not serve (another host, another path, a key id of another
    /// shape), or what was fetched is not the provider's: refused, nothing (more) fetched.
    #[error("the key the request points at ({0}) is not one the provider serves")]
    UntrustedKey(String),
}

impl VerifyError {
    /// A short label for logs and metrics: "timestamp" or "signature".
    pub fn reason(&self) -> &'static str {
        match self {
            VerifyError::Timestamp { .. } => "timestamp",
            _ => "signature",
        }
    }
}

/// Why no usable event id (or type) was found. Says where it looked, never what it found.
#[derive(Debug, thiserror::Error)]
pub enum IdError {
    #[error("event id not found: {0}")]
    Missing(String),
    #[error("invalid event identity: {0}")]
    Invalid(String),
    #[error("body is not valid JSON")]
    MalformedBody,
}

/// Why a configured secret cannot be a key. Never contains the secret.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("secret is empty")]
    Empty,
    #[error("{scheme} secret is not valid base64 after the \"whsec_\" prefix")]
    NotBase64 { scheme: &'static str },
    #[error("secret is not valid {0}")]
    NotDecodable(&'static str),
    #[error("public key: {0}")]
    PublicKey(String),
}

/// A configuration string that did not parse; the message says what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub(crate) String);
