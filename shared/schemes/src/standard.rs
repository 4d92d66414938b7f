//! Standard Webhooks and Svix (one algorithm, two header prefixes): `<p>signature` is a space-separated list of
//! `v1,<base64 HMAC-SHA256("<id>.<timestamp>.<body>")>`; the key is the base64 after `whsec_`.
//! <https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md>
//! <https://docs.svix.com/receiving/verifying-payloads/how-manual>

use base64::Engine as _;
use http::{HeaderMap, HeaderName};

use crate::clock::Clock;
use crate::encoding::{decode, Encoding, BASE64};
use crate::errors::{IdError, KeyError, VerifyError};
use crate::headers::{header_first, header_values};
use crate::identity::{id_from_header, Body, Identity};
use crate::key::Key;
use crate::mac::{mac, verify_mac, Algorithm};

/// The header names of one flavour.
pub(super) struct Names {
    id: HeaderName,
    timestamp: HeaderName,
    signature: HeaderName,
}

pub(super) static WEBHOOK: Names = Names {
    id: HeaderName::from_static("webhook-id"),
    timestamp: HeaderName::from_static("webhook-timestamp"),
    signature: HeaderName::from_static("webhook-signature"),
};

pub(super) static SVIX: Names = Names {
    id: HeaderName::from_static("svix-id"),
    timestamp: HeaderName::from_static("svix-timestamp"),
    signature: HeaderName::from_static("svix-signature"),
};

const SECRET_PREFIX: &str = "whsec_";

pub(super) fn key_bytes(scheme: &'static str, secret: &str) -> Result<Vec<u8>, KeyError> {
    let encoded = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
    if encoded.is_empty() {
        return Err(KeyError::Empty);
    }
    BASE64.decode(encoded).map_err(|_| KeyError::NotBase64 { scheme })
}

pub(super) fn verify(
    names: &Names,
    keys: &[Key],
    headers: &HeaderMap,
    body: &[u8],
    clock: Clock,
) -> Result<(), VerifyError> {
    let id = header_first(headers, &names.id)?;
    let timestamp = header_first(headers, &names.timestamp)?;
    let signatures = header_values(headers, &names.signature)?;
    clock.check(&names.timestamp, timestamp)?;
    let candidates: Vec<Vec<u8>> = signatures
        .iter()
        .flat_map(|value| value.split_whitespace())
        .filter_map(|item| decode(Encoding::Base64, item.strip_prefix("v1,")?))
        .collect();
    verify_mac(
        Algorithm::Sha256,
        keys,
        &[id.as_bytes(), b".", timestamp.as_bytes(), b".", body],
        &candidates,
        &names.signature,
    )
}

/// The id header; the type from the body's string `type` when the body is JSON that has one.
pub(super) fn identify(names: &Names, headers: &HeaderMap, body: &[u8]) -> Result<Identity, IdError> {
    Ok(Identity {
        event_id: id_from_header(headers, &names.id)?,
        event_type: Body::new(body, &["/type"]).string_type_at("/type")?,
    })
}

impl Names {
    pub(super) fn kept_headers(&self) -> [HeaderName; 2] {
        [self.id.clone(), self.timestamp.clone()]
    }

    pub(super) fn sign(
        &self,
        key: &Key,
        body: &[u8],
        identity: &Identity,
        now_unix: i64,
    ) -> Vec<(HeaderName, String)> {
        let timestamp = now_unix.to_string();
        let id = identity.event_id.as_bytes();
        let tag = mac(
            Algorithm::Sha256,
            key,
            &[id, b".", timestamp.as_bytes(), b".", body],
        );
        vec![
            (self.id.clone(), identity.event_id.clone()),
            (self.timestamp.clone(), timestamp),
            (
                self.signature.clone(),
                format!("v1,{}", crate::encoding::encode(Encoding::Base64, &tag)),
            ),
        ]
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::tests::{identity, map};
    use super::super::{Scheme, VerifyError};

    #[test]
    fn ignores_non_v1_and_undecodable_entries() {
        let scheme = Scheme::StandardWebhooks;
        let key = scheme
            .key_from_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            .unwrap();
        let body = b"{\"type\":\"a.b\"}";
        let signed = scheme.sign(&key, body, &identity("msg_1", None), 50);
        let sig = signed[2]
            .1
            .to_str()
            .unwrap()
            .strip_prefix("v1,")
            .unwrap()
            .to_owned();
        let headers = map(&[
            ("webhook-id", "msg_1"),
            ("webhook-timestamp", "50"),
            (
                "webhook-signature",
                &format!("v1a,{sig} v2,{sig} v1,!!! v1,{sig}"),
            ),
        ]);
        scheme
            .verify(std::slice::from_ref(&key), &headers, body, 50, 300)
            .unwrap();
        assert_eq!(
            scheme.identify(&headers, body).unwrap(),
            identity("msg_1", Some("a.b"))
        );
        let headers = map(&[
            ("webhook-id", "msg_1"),
            ("webhook-timestamp", "50"),
            ("webhook-signature", &format!("v1a,{sig}")),
        ]);
        let err = scheme.verify(&[key], &headers, body, 50, 300).unwrap_err();
        assert!(matches!(err, VerifyError::MalformedHeader(_)));
    }

    #[test]
    fn type_is_optional_and_body_need_not_be_json() {
        let headers = map(&[("svix-id", "msg_2")]);
        for body in [&b"not json"[..], b"{\"type\":3.5e0}", b"[]", b""] {
            let id = Scheme::Svix.identify(&headers, body).unwrap();
            assert_eq!(id.event_type, None, "{body:?}");
        }
    }

    #[test]
    fn each_header_is_required() {
        let all = [
            ("svix-id", "msg_1"),
            ("svix-timestamp", "50"),
            ("svix-signature", "v1,AAAA"),
        ];
        for skip in 0..all.len() {
            let some: Vec<_> = (0..all.len()).filter(|i| *i != skip).map(|i| all[i]).collect();
            let err = Scheme::Svix.verify(&[], &map(&some), b"", 50, 300).unwrap_err();
            assert!(matches!(err, VerifyError::MissingHeader(ref h) if h == all[skip].0));
        }
    }
}
