//! Plaid: `Plaid-Verification` is a JWT, ES256 only, whose `kid` names the key that
//! `POST /webhook_verification_key/get` returns (a JWK; the receiver fetches it with the source's
//! `client_id:secret`, or `public_key` pins a JWK set); its claims are `iat` (refused when older than 5 minutes)
//! and `request_body_sha256`, the hex SHA-256 of the raw body. Plaid sends no event id: the id is the hash of what
//! the token signs, its JWS signing input `header.payload` (body and time: identical bodies are distinct events),
//! never of its signature; the type is `webhook_type.webhook_code`. No handshake.
//! <https://plaid.com/docs/api/webhooks/webhook-verification/>

use http::HeaderName;
use jsonwebtoken::Algorithm;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::families::jwt::{BodyHash, Jwt, JwtKey};
use crate::families::Family;
use crate::providers::{Identify, Preset};
use crate::request::{Identified, Request};
use crate::errors::IdError;
use crate::identity::Identity;

/// Plaid's documented limit on `iat`.
const MAX_AGE_SECS: u64 = 5 * 60;

pub(super) fn preset() -> Preset {
    let family = Family::Jwt(Jwt {
        header: HeaderName::from_static("plaid-verification"),
        prefix: "",
        algorithms: vec![Algorithm::ES256],
        key: JwtKey::Jwks {
            url: "https://production.plaid.com/webhook_verification_key/get",
            hosts: vec!["production.plaid.com"],
            by_post: true,
            kid: uuid,
        },
        issuer: None,
        audience_is_url: false,
        body_hash: Some(BodyHash {
            claim: "request_body_sha256",
            hex: true,
        }),
        max_age_secs: Some(MAX_AGE_SECS),
    });
    Preset {
        tolerance_secs: Some(MAX_AGE_SECS),
        ..Preset::new("plaid", family, Identify::Custom(identify))
    }
}

/// Whether a `kid` is a UUID in its text form, as Plaid's key ids are (`bfbd5111-8e33-4643-8ced-b2e642a72f3c` in
/// the example JWT header of <https://plaid.com/docs/api/webhooks/webhook-verification/>).
fn uuid(kid: &str) -> bool {
    let groups: Vec<&str> = kid.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(group, len)| group.len() == len && group.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn identify(req: &Request) -> Result<Identified, IdError> {
    let value: Value = serde_json::from_slice(req.body).map_err(|_| IdError::MalformedBody)?;
    let text = |name: &str| value.get(name).and_then(Value::as_str).filter(|s| !s.is_empty());
    let event_type = match (text("webhook_type"), text("webhook_code")) {
        (Some(t), Some(code)) => Some(format!("{t}.{code}")),
        (t, code) => t.or(code).map(str::to_owned),
    };
    // Plaid sends no id, and its bodies repeat byte for byte (every SYNC_UPDATES_AVAILABLE of an item after the
    // first): the id is the hash of what the token signs, its JWS signing input `header.payload`, which binds the
    // body and its own `iat`, so each delivery is its own event. A retry Plaid signs anew (it must: `iat` ages out in
    // 5 minutes) then runs again, which Plaid tells integrators to expect; a repeat is never lost as a duplicate.
    // Never the signature: ES256 verifies `s` and its mirror `n − s` alike, so anyone who saw a delivery could send
    // it again within the 5 minutes under a second signature that verifies, and a hash of it would be a new id.
    let token = req
        .header("plaid-verification")
        .ok_or_else(|| IdError::Missing("header plaid-verification".to_owned()))?;
    let (signed, _signature) = token
        .trim()
        .rsplit_once('.')
        .ok_or_else(|| IdError::Invalid("header plaid-verification is not a JWS".to_owned()))?;
    Ok(Identified::One(Identity {
        event_id: hex::encode(Sha256::digest(signed.as_bytes())),
        event_type,
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine as _;
    use http::{HeaderMap, HeaderValue, Uri};
    use serde_json::Value;

    use crate::request::KeyRequest;
    use crate::{Credentials, Identified, Key, PublicKey, Request, Scheme, VerifyError};

    /// The order n of P-256's group, big-endian.
    const P256_N: &str = "FFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551";

    /// `n − s` for a big-endian `s` below `n`: the other `s` under which an ECDSA signature verifies.
    fn mirror(s: &[u8]) -> Vec<u8> {
        let n = hex::decode(P256_N).unwrap();
        let mut out = vec![0u8; 32];
        let mut borrow = 0i16;
        for i in (0..32).rev() {
            let mut d = i16::from(n[i]) - i16::from(s[i]) - borrow;
            borrow = i16::from(d < 0);
            if d < 0 {
                d += 256;
            }
            out[i] = d as u8;
        }
        assert_eq!(borrow, 0, "s is below n");
        out
    }

    /// The event a token carries for `body`, once it verifies with the vector's key at the vector's clock.
    fn verified_id(token: &str, body: &str, now: i64, jwks: &PublicKey) -> Result<String, VerifyError> {
        let scheme = Scheme::named("plaid").unwrap();
        let uri = Uri::from_static("/webhooks/plaid");
        let mut headers = HeaderMap::new();
        headers.insert("plaid-verification", HeaderValue::from_str(token).unwrap());
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        let req = Request::post(&uri, &headers, body.as_bytes());
        scheme.verify_request(&Credentials::default(), &req, now, 300, Some(jwks))?;
        let Identified::One(identity) = scheme.identify_request(&req).unwrap() else {
            panic!("one event")
        };
        Ok(identity.event_id)
    }

    /// GIVEN a delivery of the Plaid vector (ES256, signed by the vector's key)
    /// WHEN its signature `(r, s)` is replaced by its mirror `(r, n − s)`, as anyone who saw the token could do
    /// THEN the mirrored token still verifies, and it is the same event: the same id as the original (the vector's),
    /// while a token whose signature is merely changed is refused.
    #[test]
    fn a_mirrored_signature_verifies_and_is_the_same_event() {
        let vector: Value = serde_json::from_str(include_str!("../../tests/vectors/plaid.json")).unwrap();
        let jwks = PublicKey::Jwks(
            vector["jwks"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(kid, jwk)| (kid.clone(), jwk.to_string()))
                .collect(),
        );
        for case in vector["cases"].as_array().unwrap() {
            let token = case["headers"]
                .as_array()
                .unwrap()
                .iter()
                .find(|h| h[0] == "plaid-verification")
                .and_then(|h| h[1].as_str())
                .unwrap();
            let (body, now) = (case["body"].as_str().unwrap(), case["now"].as_i64().unwrap());
            let (signed, signature) = token.rsplit_once('.').unwrap();
            let signature = URL_SAFE_NO_PAD.decode(signature).unwrap();
            assert_eq!(signature.len(), 64, "ES256 is r || s");
            let (r, s) = signature.split_at(32);
            let mirrored = [r, &mirror(s)].concat();
            assert_ne!(mirrored, signature);
            let twin = format!("{signed}.{}", URL_SAFE_NO_PAD.encode(&mirrored));

            let original = verified_id(token, body, now, &jwks).expect("the vector verifies");
            let again = verified_id(&twin, body, now, &jwks).expect("the mirrored signature verifies too");
            assert_eq!(again, original, "{}: the mirrored token is another event", case["name"]);
            assert_eq!(Some(original.as_str()), case["expect"]["event_id"].as_str());

            let mut broken = mirrored.clone();
            broken[63] ^= 1;
            let broken = format!("{signed}.{}", URL_SAFE_NO_PAD.encode(&broken));
            assert!(verified_id(&broken, body, now, &jwks).is_err(), "a changed signature verifies");
        }
    }

    /// A token whose header names `kid` (its signature is never looked at before the key is fetched).
    fn key_request(kid: &str) -> Result<Option<KeyRequest>, VerifyError> {
        let b64 = |v: Value| URL_SAFE_NO_PAD.encode(v.to_string());
        let token = format!(
            "{}.{}.AAAA",
            b64(serde_json::json!({"alg": "ES256", "kid": kid, "typ": "JWT"})),
            b64(serde_json::json!({"iat": 1})),
        );
        let mut headers = HeaderMap::new();
        headers.insert("plaid-verification", token.parse().unwrap());
        let uri = Uri::from_static("/webhooks/plaid");
        let creds = Credentials::secrets(vec![Key::new(b"client-id:secret".to_vec())]);
        Scheme::named("plaid")
            .unwrap()
            .key_request(&creds, &Request::post(&uri, &headers, b"{}"))
    }

    /// Each `kid` a token names is a POST of the source's credentials to Plaid: only a key id of Plaid's shape
    /// (a UUID) is asked for, any other is refused before anything is sent.
    #[test]
    fn only_a_uuid_kid_is_asked_for() {
        for kid in ["bfbd5111-8e33-4643-8ced-b2e642a72f3c", "6C5516E1-92DC-479E-A8FF-5A51992E0001"] {
            assert!(
                matches!(key_request(kid), Ok(Some(KeyRequest::JwkByPost { kid: k, .. })) if k == kid),
                "{kid}"
            );
        }
        for kid in [
            "",
            "plaid-k1",
            "bfbd5111-8e33-4643-8ced-b2e642a72f3",
            "bfbd5111-8e33-4643-8ced-b2e642a72f3c0",
            "bfbd51118e3346438cedb2e642a72f3c",
            "bfbd5111-8e33-4643-8ced-b2e642a72f3g",
            "bfbd5111-8e33-4643-8ced-b2e6-42a72f3c",
            "../../link/token/create",
            "bfbd5111-8e33-4643-8ced-b2e642a72f3c\u{0}",
        ] {
            assert!(matches!(key_request(kid), Err(VerifyError::UntrustedKey(_))), "{kid:?}");
        }
    }
}
