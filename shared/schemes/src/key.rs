//! The shared secret a scheme verifies and signs with, kept out of `Debug` output and error messages.

use std::fmt;

use secrecy::{ExposeSecret, SecretSlice};

/// An HMAC key. Its bytes never reach `Debug` output or an error message.
#[derive(Clone)]
pub struct Key(SecretSlice<u8>);

impl Key {
    pub fn new(bytes: Vec<u8>) -> Key {
        Key(SecretSlice::from(bytes))
    }

    pub(crate) fn expose(&self) -> &[u8] {
        self.0.expose_secret()
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key([redacted])")
    }
}
