//! Slack: `X-Slack-Signature: v0=<hex HMAC-SHA256("v0:<timestamp>:<body>")>` with `X-Slack-Request-Timestamp`,
//! keyed with the app's signing secret. Events API bodies are JSON with `event_id` and `type`.
//! <https://api.slack.com/authentication/verifying-requests-from-slack>

use http::{HeaderMap, HeaderName};

use super::json::Leaf;
use crate::clock::Clock;
use crate::encoding::{decode, Encoding};
use crate::errors::{IdError, VerifyError};
use crate::headers::{header_first, header_values};
use crate::identity::{Body, Identity};
use crate::key::Key;
use crate::mac::{mac, verify_mac, Algorithm};

static SIGNATURE: HeaderName = HeaderName::from_static("x-slack-signature");
static TIMESTAMP: HeaderName = HeaderName::from_static("x-slack-request-timestamp");
const VERSION: &str = "v0";

pub(super) fn verify(
    keys: &[Key],
    headers: &HeaderMap,
    body: &[u8],
    clock: Clock,
) -> Result<(), VerifyError> {
    let timestamp = header_first(headers, &TIMESTAMP)?;
    let signatures = header_values(headers, &SIGNATURE)?;
    clock.check(&TIMESTAMP, timestamp)?;
    let candidates: Vec<Vec<u8>> = signatures
        .into_iter()
        .filter_map(|value| decode(Encoding::Hex, value.trim().strip_prefix("v0=")?))
        .collect();
    verify_mac(
        Algorithm::Sha256,
        keys,
        &[VERSION.as_bytes(), b":", timestamp.as_bytes(), b":", body],
        &candidates,
        &SIGNATURE,
    )
}

pub(super) fn identify(body: &[u8]) -> Result<Identity, IdError> {
    let body = Body::new(body, &["/event_id", "/type"]);
    Ok(Identity {
        event_id: body.id_at("/event_id")?,
        event_type: body.type_at("/type")?,
    })
}

/// `{"type":"url_verification","challenge":C}` -> `{"challenge":C}`.
pub(super) fn handshake(body: &[u8]) -> Option<serde_json::Value> {
    let found = super::json::at_pointers(body, &["/type", "/challenge"]).ok()?;
    let [Some(Leaf::String(kind)), Some(Leaf::String(challenge))] = found.as_slice() else {
        return None;
    };
    if kind != "url_verification" {
        return None;
    }
    Some(serde_json::json!({ "challenge": challenge }))
}

pub(super) fn kept_headers() -> [HeaderName; 1] {
    [TIMESTAMP.clone()]
}

pub(super) fn sign(key: &Key, body: &[u8], now_unix: i64) -> Vec<(HeaderName, String)> {
    let timestamp = now_unix.to_string();
    let tag = mac(
        Algorithm::Sha256,
        key,
        &[VERSION.as_bytes(), b":", timestamp.as_bytes(), b":", body],
    );
    vec![
        (TIMESTAMP.clone(), timestamp),
        (SIGNATURE.clone(), format!("{VERSION}={}", hex::encode(tag))),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::tests::{identity, key};
    use super::super::Scheme;
    use http::HeaderMap;

    #[test]
    fn url_verification_handshake() {
        let body = br#"{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
        let mut headers = HeaderMap::new();
        headers.extend(Scheme::Slack.sign(&key(), body, &identity("unused", None), 1_000));
        Scheme::Slack
            .verify(&[key()], &headers, body, 1_000, 300)
            .unwrap();
        assert_eq!(
            Scheme::Slack.handshake(body),
            Some(serde_json::json!({"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}))
        );
        // The handshake carries no event id: it is answered, never stored.
        assert!(Scheme::Slack.identify(&headers, body).is_err());
    }

    #[test]
    fn no_handshake_otherwise() {
        for body in [
            &br#"{"type":"event_callback","event_id":"Ev1","challenge":"x"}"#[..],
            br#"{"type":"url_verification","challenge":7}"#,
            b"not json",
            b"",
        ] {
            assert_eq!(Scheme::Slack.handshake(body), None);
        }
        let body = br#"{"type":"url_verification","challenge":"c"}"#;
        for scheme in [Scheme::Github, Scheme::Stripe, Scheme::Svix, Scheme::Shopify] {
            assert_eq!(scheme.handshake(body), None);
        }
    }
}
