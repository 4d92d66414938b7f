//! The asymmetric families: `ed25519` (Discord), `ecdsa` over P-256 (SendGrid) and `rsa` (a configured key, as
//! Wise does, or a certificate the request points at, as PayPal and AWS SNS do, whose signed messages are their
//! own: [`RsaMessage`]). The checks are aws-lc-rs's, the crypto library rustls already links; nothing here is
//! hand-rolled.

use aws_lc_rs::signature::{self as sig, UnparsedPublicKey, VerificationAlgorithm};

use super::{missing, Signature, Template, Timestamp};
use crate::clock::Clock;
use crate::errors::VerifyError;
use crate::key::Key;
use crate::request::{Credentials, KeyRequest, PublicKey, Request, Signed};

/// A signature over a template, with an optional signed timestamp.
#[derive(Clone, Debug)]
pub struct Asymmetric {
    pub signature: Signature,
    pub signed: Template,
    pub timestamp: Option<Timestamp>,
}

impl Asymmetric {
    /// The bytes that were signed and the candidate signatures, the timestamp checked first.
    fn message(
        &self,
        req: &Request,
        creds: &Credentials,
        clock: Clock,
    ) -> Result<(Vec<u8>, Vec<Vec<u8>>), VerifyError> {
        let (candidates, beside) = self.signature.read(req)?;
        let timestamp = match &self.timestamp {
            Some(ts) => Some(ts.check(req, beside, clock)?),
            None => None,
        };
        if candidates.is_empty() {
            return Err(missing(&self.signature.at));
        }
        Ok((self.signed.render(req, creds, timestamp.as_deref())?, candidates))
    }

    pub fn verify_ed25519(
        &self,
        creds: &Credentials,
        req: &Request,
        clock: Clock,
    ) -> Result<(), VerifyError> {
        let Some(PublicKey::Ed25519(key)) = &creds.public_key else {
            return Err(VerifyError::Mismatch);
        };
        let (message, candidates) = self.message(req, creds, clock)?;
        check(&sig::ED25519, key, &message, &candidates)
    }

    pub fn verify_p256(&self, creds: &Credentials, req: &Request, clock: Clock) -> Result<(), VerifyError> {
        let Some(PublicKey::P256(key)) = &creds.public_key else {
            return Err(VerifyError::Mismatch);
        };
        let (message, candidates) = self.message(req, creds, clock)?;
        // DER (what SendGrid sends) or the fixed 64-byte form: whichever the candidate's length says.
        let der = check(&sig::ECDSA_P256_SHA256_ASN1, key, &message, &candidates);
        if der.is_ok() {
            return der;
        }
        check(&sig::ECDSA_P256_SHA256_FIXED, key, &message, &candidates)
    }

    fn sign_with(
        &self,
        req: &Request,
        creds: &Credentials,
        now_unix: i64,
        sign: impl Fn(&[u8]) -> Option<Vec<u8>>,
    ) -> Option<Signed> {
        let ts = self.timestamp.as_ref().map(|t| t.render(now_unix));
        let mut headers: Vec<_> = self
            .timestamp
            .iter()
            .filter_map(|t| t.header_to_send(now_unix))
            .collect();
        let message = self.signed.render(req, creds, ts.as_deref()).ok()?;
        let tag = sign(&message)?;
        headers.push((
            self.signature.header_name()?.clone(),
            self.signature.write(&tag, ts.as_deref()),
        ));
        Some(Signed { headers, body: None })
    }

    pub fn sign_ed25519(
        &self,
        pkcs8: &Key,
        req: &Request,
        creds: &Credentials,
        now_unix: i64,
    ) -> Option<Signed> {
        let pair = sig::Ed25519KeyPair::from_pkcs8(pkcs8.expose())
            .or_else(|_| sig::Ed25519KeyPair::from_pkcs8_maybe_unchecked(pkcs8.expose()))
            .ok()?;
        self.sign_with(req, creds, now_unix, |m| Some(pair.sign(m).as_ref().to_vec()))
    }

    pub fn sign_p256(
        &self,
        pkcs8: &Key,
        req: &Request,
        creds: &Credentials,
        now_unix: i64,
    ) -> Option<Signed> {
        let pair =
            sig::EcdsaKeyPair::from_pkcs8(&sig::ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.expose()).ok()?;
        let rng = aws_lc_rs::rand::SystemRandom::new();
        self.sign_with(req, creds, now_unix, |m| {
            Some(pair.sign(&rng, m).ok()?.as_ref().to_vec())
        })
    }
}

/// Accepts if any candidate is a valid signature of `message` under `key`.
pub(crate) fn check(
    algorithm: &'static dyn VerificationAlgorithm,
    key: &[u8],
    message: &[u8],
    candidates: &[Vec<u8>],
) -> Result<(), VerifyError> {
    let key = UnparsedPublicKey::new(algorithm, key);
    if candidates.iter().any(|c| key.verify(message, c).is_ok()) {
        Ok(())
    } else {
        Err(VerifyError::Mismatch)
    }
}

/// The hash and padding of an RSA signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RsaAlgorithm {
    Pkcs1Sha1,
    Pkcs1Sha256,
    PssSha256,
}

impl RsaAlgorithm {
    fn verification(self) -> &'static dyn VerificationAlgorithm {
        match self {
            RsaAlgorithm::Pkcs1Sha1 => &sig::RSA_PKCS1_2048_8192_SHA1_FOR_LEGACY_USE_ONLY,
            RsaAlgorithm::Pkcs1Sha256 => &sig::RSA_PKCS1_2048_8192_SHA256,
            RsaAlgorithm::PssSha256 => &sig::RSA_PSS_2048_8192_SHA256,
        }
    }
}

/// Where the RSA key comes from.
#[derive(Clone, Debug)]
pub enum RsaKey {
    /// The source's `public_key` (PEM).
    Configured,
    /// A certificate at a URL the request names (`at`), fetched only where `admit` says the provider serves its
    /// certificates: a URL of any other shape is refused before anything is fetched.
    Certificate { at: super::At, admit: CertificateUrl },
}

/// The provider's own test of a certificate URL a request names: the key to fetch (the URL as it is to be fetched),
/// or `None` for a URL the provider does not serve its certificates at.
pub type CertificateUrl = fn(&str) -> Option<KeyRequest>;

/// What a provider signed its own way (PayPal's line with a CRC32 of the body, SNS's string to sign built from
/// the JSON body): every message that may have been signed (one per configured secret where a secret is part of
/// it), the candidate signatures, and the algorithm the request names.
#[derive(Clone, Debug)]
pub struct RsaMessage {
    pub messages: Vec<Vec<u8>>,
    pub signatures: Vec<Vec<u8>>,
    pub algorithm: RsaAlgorithm,
}

/// Builds a provider's [`RsaMessage`], checking its own timestamp against the clock where it has one.
pub type RsaMessageFn = fn(&Request, &Credentials, Clock) -> Result<RsaMessage, VerifyError>;

/// A provider's own signer for its own message: from the request, the credentials, the key URL the request is to
/// name and the time, the message to sign and the headers to send beside the signature.
pub type RsaSignFn = fn(&Request, &Credentials, Option<&str>, i64) -> Option<OwnMessage>;

/// What a provider's own signer makes: the message to sign and the headers beside its signature.
pub struct OwnMessage {
    pub message: Vec<u8>,
    pub headers: Vec<(http::HeaderName, String)>,
}

#[derive(Clone, Debug)]
pub struct Rsa {
    /// The signature, template and timestamp; with `message` set, only `spec.timestamp.is_some()` is read (it
    /// says whether the provider signs a timestamp) and `message` does the rest.
    pub spec: Asymmetric,
    pub algorithm: RsaAlgorithm,
    pub key: RsaKey,
    /// The provider's own signed message, where a template cannot say it.
    pub message: Option<RsaMessageFn>,
    /// Where `message` is set: the provider's signer, building the message and the headers beside the signature
    /// (the tests and `inbox send` sign as the provider would).
    pub message_signer: Option<RsaSignFn>,
}

impl Rsa {
    pub fn key_request(&self, req: &Request) -> Result<Option<KeyRequest>, VerifyError> {
        let RsaKey::Certificate { at, admit } = &self.key else {
            return Ok(None);
        };
        let url = at.first(req)?;
        match admit(&url) {
            Some(key) => Ok(Some(key)),
            None => Err(VerifyError::UntrustedKey(at.to_string())),
        }
    }

    pub fn verify(
        &self,
        creds: &Credentials,
        req: &Request,
        clock: Clock,
        fetched: Option<&PublicKey>,
    ) -> Result<(), VerifyError> {
        let key = match (&self.key, fetched, &creds.public_key) {
            (RsaKey::Certificate { .. }, Some(PublicKey::Rsa(key)), _) => key,
            (RsaKey::Configured, _, Some(PublicKey::Rsa(key))) => key,
            _ => return Err(VerifyError::Mismatch),
        };
        if let Some(build) = self.message {
            let built = build(req, creds, clock)?;
            if built.signatures.is_empty() {
                return Err(missing(&self.spec.signature.at));
            }
            let verification = built.algorithm.verification();
            return if built
                .messages
                .iter()
                .any(|m| check(verification, key, m, &built.signatures).is_ok())
            {
                Ok(())
            } else {
                Err(VerifyError::Mismatch)
            };
        }
        let (message, candidates) = self.spec.message(req, creds, clock)?;
        check(self.algorithm.verification(), key, &message, &candidates)
    }

    pub fn sign(
        &self,
        pkcs8: &Key,
        key_url: Option<&str>,
        req: &Request,
        creds: &Credentials,
        now_unix: i64,
    ) -> Option<Signed> {
        let pair = sig::RsaKeyPair::from_pkcs8(pkcs8.expose()).ok()?;
        let padding: &'static dyn sig::RsaEncoding = match self.algorithm {
            RsaAlgorithm::Pkcs1Sha1 => return None,
            RsaAlgorithm::Pkcs1Sha256 => &sig::RSA_PKCS1_SHA256,
            RsaAlgorithm::PssSha256 => &sig::RSA_PSS_SHA256,
        };
        let rng = aws_lc_rs::rand::SystemRandom::new();
        if self.message.is_some() {
            // The provider's own message: signed by its own signer, where it has one.
            let OwnMessage { message, mut headers } = (self.message_signer?)(req, creds, key_url, now_unix)?;
            let mut out = vec![0; pair.public_modulus_len()];
            pair.sign(padding, &rng, &message, &mut out).ok()?;
            headers.push((
                self.spec.signature.header_name()?.clone(),
                self.spec.signature.write(&out, None),
            ));
            return Some(Signed { headers, body: None });
        }
        self.spec.sign_with(req, creds, now_unix, |m| {
            let mut out = vec![0; pair.public_modulus_len()];
            pair.sign(padding, &rng, m, &mut out).ok()?;
            Some(out)
        })
    }
}
