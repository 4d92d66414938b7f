//! GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(body)>`. The SHA-1 `X-Hub-Signature` is not accepted.
//! <https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries>

use http::{HeaderMap, HeaderName};

use crate::encoding::{decode, Encoding};
use crate::errors::{IdError, VerifyError};
use crate::headers::header_values;
use crate::identity::{id_from_header, type_from_header, Identity};
use crate::key::Key;
use crate::mac::{mac, verify_mac, Algorithm};

static SIGNATURE: HeaderName = HeaderName::from_static("x-hub-signature-256");
static DELIVERY: HeaderName = HeaderName::from_static("x-github-delivery");
static EVENT: HeaderName = HeaderName::from_static("x-github-event");
const PREFIX: &str = "sha256=";

pub(super) fn verify(keys: &[Key], headers: &HeaderMap, body: &[u8]) -> Result<(), VerifyError> {
    let candidates: Vec<Vec<u8>> = header_values(headers, &SIGNATURE)?
        .into_iter()
        .filter_map(|value| decode(Encoding::Hex, value.trim().strip_prefix(PREFIX)?))
        .collect();
    verify_mac(Algorithm::Sha256, keys, &[body], &candidates, &SIGNATURE)
}

pub(super) fn identify(headers: &HeaderMap) -> Result<Identity, IdError> {
    Ok(Identity {
        event_id: id_from_header(headers, &DELIVERY)?,
        event_type: type_from_header(headers, &EVENT)?,
    })
}

pub(super) fn kept_headers() -> [HeaderName; 2] {
    [DELIVERY.clone(), EVENT.clone()]
}

pub(super) fn sign(key: &Key, body: &[u8], identity: &Identity) -> Vec<(HeaderName, String)> {
    let signature = hex::encode(mac(Algorithm::Sha256, key, &[body]));
    vec![
        (SIGNATURE.clone(), format!("{PREFIX}{signature}")),
        (DELIVERY.clone(), identity.event_id.clone()),
        (
            EVENT.clone(),
            identity.event_type.as_deref().unwrap_or("ping").to_owned(),
        ),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::tests::{identity, key, map};
    use super::super::{Scheme, VerifyError};

    #[test]
    fn sha1_header_alone_is_missing_sha256() {
        let headers = map(&[("x-hub-signature", "sha1=00")]);
        let err = Scheme::Github
            .verify(&[key()], &headers, b"{}", 0, 300)
            .unwrap_err();
        assert!(matches!(err, VerifyError::MissingHeader(ref h) if h == "x-hub-signature-256"));
    }

    #[test]
    fn any_of_several_header_values() {
        let body = b"{\"zen\":\"hi\"}";
        let signed = Scheme::Github.sign(&key(), body, &identity("d-1", None), 0);
        let mut headers = map(&[("x-hub-signature-256", "sha256=abcd")]);
        for (name, value) in signed {
            headers.append(name, value);
        }
        Scheme::Github.verify(&[key()], &headers, body, 0, 300).unwrap();
        let id = Scheme::Github.identify(&headers, body).unwrap();
        assert_eq!(id, identity("d-1", Some("ping")));
    }

    #[test]
    fn odd_length_hex_is_malformed_not_a_panic() {
        let headers = map(&[("x-hub-signature-256", "sha256=abc")]);
        let err = Scheme::Github
            .verify(&[key()], &headers, b"", 0, 300)
            .unwrap_err();
        assert!(matches!(err, VerifyError::MalformedHeader(_)));
    }
}
