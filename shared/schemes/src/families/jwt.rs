//! The `jwt` family: a signed token in a header whose claims bind the delivery (a hash of the body, an issuer and
//! audience, an issue time). The signature check is jsonwebtoken's; the clock is the caller's, as everywhere here.

use base64::Engine as _;
use http::HeaderName;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::clock::Clock;
use crate::errors::VerifyError;
use crate::request::{provider_https_url, Credentials, KeyRequest, PublicKey, Request, Signed};

/// Where the token's key comes from.
#[derive(Clone, Debug)]
pub enum JwtKey {
    /// HS256 with the source's secrets.
    Secret,
    /// The source's `public_key` (PEM, or a JWK set).
    Configured,
    /// A JWK set at a fixed provider URL (on one of `hosts`), the key chosen by the token's `kid`. A configured
    /// `public_key` (a JWK set) pins the keys instead: nothing is fetched, and only those keys verify.
    Jwks {
        url: &'static str,
        hosts: Vec<&'static str>,
        /// How the key is asked for: `false`, a `GET` of the set (Google); `true`, a `POST` naming the key id and
        /// the source's first secret as `client_id:secret`, answered `{"key": JWK}` (Plaid).
        by_post: bool,
        /// Whether a `kid` has the shape of the provider's key ids: a token naming any other is refused before
        /// anything is fetched. Asked for by `POST`, every invented `kid` is a fetch (for Plaid, a `POST` of the
        /// source's credentials) on the source's budget; a set got by `GET` is fetched whole and each `kid`
        /// picked in it.
        kid: fn(&str) -> bool,
    },
}

/// A claim that must hold the body's SHA-256, and how it is written.
#[derive(Clone, Debug)]
pub struct BodyHash {
    pub claim: &'static str,
    /// `hex` or base64 (`false`).
    pub hex: bool,
}

#[derive(Clone, Debug)]
pub struct Jwt {
    pub header: HeaderName,
    /// Text before the token (`Bearer `), stripped ignoring case.
    pub prefix: &'static str,
    pub algorithms: Vec<Algorithm>,
    pub key: JwtKey,
    pub issuer: Option<&'static str>,
    /// The audience: the configured `url` where `true` (Google Pub/Sub push names the endpoint).
    pub audience_is_url: bool,
    pub body_hash: Option<BodyHash>,
    /// How old `iat` may be, where the provider documents it (the source's tolerance applies otherwise).
    pub max_age_secs: Option<u64>,
}

impl Jwt {
    fn token<'r>(&self, req: &Request<'r>) -> Result<&'r str, VerifyError> {
        let value = crate::headers::header_first(req.headers, &self.header)?;
        let head = value.get(..self.prefix.len()).unwrap_or("");
        if !head.eq_ignore_ascii_case(self.prefix) {
            return Err(crate::headers::malformed(&self.header, "wrong scheme"));
        }
        Ok(value[self.prefix.len()..].trim())
    }

    pub fn key_request(&self, req: &Request, creds: &Credentials) -> Result<Option<KeyRequest>, VerifyError> {
        let JwtKey::Jwks {
            url,
            hosts,
            by_post,
            kid: kid_shape,
        } = &self.key
        else {
            return Ok(None);
        };
        if creds.public_key.is_some() {
            return Ok(None); // pinned keys
        }
        let header = jsonwebtoken::decode_header(self.token(req)?)
            .map_err(|_| crate::headers::malformed(&self.header, "not a JWT"))?;
        let kid = header
            .kid
            .ok_or_else(|| crate::headers::malformed(&self.header, "no kid"))?;
        if !kid_shape(&kid) {
            return Err(VerifyError::UntrustedKey(format!("the kid of {}", self.header)));
        }
        let url = provider_https_url(url, hosts).ok_or_else(|| VerifyError::UntrustedKey(url.to_string()))?;
        if !by_post {
            return Ok(Some(KeyRequest::Jwks { url, kid }));
        }
        let credentials = creds.secrets.first().ok_or(VerifyError::Mismatch)?;
        let text = std::str::from_utf8(credentials.expose()).map_err(|_| VerifyError::Mismatch)?;
        let (client_id, secret) = text.split_once(':').ok_or(VerifyError::Mismatch)?;
        let body = serde_json::json!({"client_id": client_id, "secret": secret, "key_id": kid}).to_string();
        Ok(Some(KeyRequest::JwkByPost {
            url,
            kid,
            body: crate::key::Key::new(body.into_bytes()),
        }))
    }

    pub fn verify(
        &self,
        creds: &Credentials,
        req: &Request,
        clock: Clock,
        fetched: Option<&PublicKey>,
    ) -> Result<(), VerifyError> {
        let token = self.token(req)?;
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| crate::headers::malformed(&self.header, "not a JWT"))?;
        if !self.algorithms.contains(&header.alg) {
            return Err(VerifyError::Mismatch);
        }
        let keys: Vec<DecodingKey> = match (&self.key, fetched, &creds.public_key) {
            (JwtKey::Secret, _, _) => creds
                .secrets
                .iter()
                .filter_map(|k| DecodingKey::from_secret(k.expose()).ok())
                .collect(),
            (JwtKey::Jwks { .. } | JwtKey::Configured, _, Some(key))
            | (JwtKey::Jwks { .. }, Some(key), None) => decoding_keys(key, header.kid.as_deref()),
            _ => Vec::new(),
        };
        let mut validation = Validation::new(header.alg);
        validation.algorithms = self.algorithms.clone();
        // Times are checked below against the caller's clock, not the system's.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.required_spec_claims.clear();
        validation.validate_aud = false;
        let claims = keys
            .iter()
            .find_map(|key| jsonwebtoken::decode::<serde_json::Value>(token, key, &validation).ok())
            .ok_or(VerifyError::Mismatch)?
            .claims;
        if let Some(issuer) = self.issuer {
            let iss = claims.get("iss").and_then(|v| v.as_str()).unwrap_or("");
            if iss != issuer && iss.strip_prefix("https://") != Some(issuer) {
                return Err(VerifyError::Mismatch);
            }
        }
        if self.audience_is_url {
            let expected = creds.url.as_deref().ok_or(VerifyError::Mismatch)?;
            let aud = claims.get("aud");
            let ok = match aud {
                Some(serde_json::Value::String(a)) => a == expected,
                Some(serde_json::Value::Array(list)) => list.iter().any(|a| a.as_str() == Some(expected)),
                _ => false,
            };
            if !ok {
                return Err(VerifyError::Mismatch);
            }
        }
        let number = |name: &str| claims.get(name).and_then(serde_json::Value::as_i64);
        if let Some(exp) = number("exp") {
            if clock.now_unix > exp.saturating_add(clock.tolerance_secs as i64) {
                return Err(VerifyError::Timestamp {
                    skew_secs: clock.now_unix.saturating_sub(exp),
                });
            }
        }
        if let Some(iat) = number("iat") {
            let max_age = self.max_age_secs.unwrap_or(clock.tolerance_secs);
            Clock {
                now_unix: clock.now_unix,
                tolerance_secs: max_age,
            }
            .check_unix(iat)?;
        } else if self.max_age_secs.is_some() {
            return Err(VerifyError::MalformedHeader(format!("{} (no iat)", self.header)));
        }
        if let Some(hash) = &self.body_hash {
            let digest = Sha256::digest(req.body);
            let claimed = claims
                .get(hash.claim)
                .and_then(|v| v.as_str())
                .ok_or(VerifyError::Mismatch)?;
            let claimed = if hash.hex {
                hex::decode(claimed).ok()
            } else {
                crate::encoding::BASE64.decode(claimed).ok().or_else(|| {
                    base64::engine::general_purpose::URL_SAFE_NO_PAD
                        .decode(claimed)
                        .ok()
                })
            }
            .ok_or(VerifyError::Mismatch)?;
            if !bool::from(claimed.as_slice().ct_eq(digest.as_slice())) {
                return Err(VerifyError::Mismatch);
            }
        }
        Ok(())
    }

    /// Signs with a shared secret (HS256), or a private key in PKCS#8 for ES256/RS256.
    pub fn sign(&self, signer: &super::Signer, req: &Request, now_unix: i64) -> Option<Signed> {
        let alg = *self.algorithms.first()?;
        let key = match signer {
            super::Signer::Secret(k) => jsonwebtoken::EncodingKey::from_secret(k.expose()).ok()?,
            super::Signer::Private { pkcs8, .. } => match alg {
                Algorithm::ES256 => jsonwebtoken::EncodingKey::from_ec_der(pkcs8.expose()),
                _ => jsonwebtoken::EncodingKey::from_rsa_der(pkcs8.expose()),
            },
        };
        let mut claims = serde_json::Map::new();
        claims.insert("iat".into(), now_unix.into());
        if let Some(issuer) = self.issuer {
            claims.insert("iss".into(), issuer.into());
        }
        if let Some(hash) = &self.body_hash {
            let digest = Sha256::digest(req.body);
            let text = if hash.hex {
                hex::encode(digest)
            } else {
                base64::engine::general_purpose::STANDARD.encode(digest)
            };
            claims.insert(hash.claim.into(), text.into());
        }
        let token = jsonwebtoken::encode(&jsonwebtoken::Header::new(alg), &claims, &key).ok()?;
        Some(Signed {
            headers: vec![(self.header.clone(), format!("{}{token}", self.prefix))],
            body: None,
        })
    }
}

/// The decoding keys a configured or fetched key offers; for a JWK set, the one with `kid` (all, if no kid).
fn decoding_keys(key: &PublicKey, kid: Option<&str>) -> Vec<DecodingKey> {
    match key {
        PublicKey::Rsa(der) => vec![DecodingKey::from_rsa_der(der)],
        PublicKey::P256(der) => vec![DecodingKey::from_ec_der(der)],
        PublicKey::Ed25519(raw) => vec![DecodingKey::from_ed_der(raw)],
        PublicKey::Jwks(keys) => keys
            .iter()
            .filter(|(k, _)| kid.is_none_or(|kid| k == kid))
            .filter_map(|(_, jwk)| serde_json::from_str::<jsonwebtoken::jwk::Jwk>(jwk).ok())
            .filter_map(|jwk| DecodingKey::from_jwk(&jwk).ok())
            .collect(),
    }
}
