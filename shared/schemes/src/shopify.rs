//! Shopify: `X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256(body)>`, keyed with the app's client secret.
//! <https://shopify.dev/docs/apps/build/webhooks/verify-deliveries>

use http::{HeaderMap, HeaderName};

use crate::encoding::{decode, encode, Encoding};
use crate::errors::{IdError, VerifyError};
use crate::headers::header_values;
use crate::identity::{id_from_header, type_from_header, Identity};
use crate::key::Key;
use crate::mac::{mac, verify_mac, Algorithm};

static SIGNATURE: HeaderName = HeaderName::from_static("x-shopify-hmac-sha256");
static WEBHOOK_ID: HeaderName = HeaderName::from_static("x-shopify-webhook-id");
static TOPIC: HeaderName = HeaderName::from_static("x-shopify-topic");
static TRIGGERED_AT: HeaderName = HeaderName::from_static("x-shopify-triggered-at");
// Not id, type or time, but a handler of a multi-shop app cannot tell the shop without it.
static SHOP_DOMAIN: HeaderName = HeaderName::from_static("x-shopify-shop-domain");
static API_VERSION: HeaderName = HeaderName::from_static("x-shopify-api-version");

pub(super) fn verify(keys: &[Key], headers: &HeaderMap, body: &[u8]) -> Result<(), VerifyError> {
    let candidates: Vec<Vec<u8>> = header_values(headers, &SIGNATURE)?
        .into_iter()
        .filter_map(|value| decode(Encoding::Base64, value))
        .collect();
    verify_mac(Algorithm::Sha256, keys, &[body], &candidates, &SIGNATURE)
}

pub(super) fn identify(headers: &HeaderMap) -> Result<Identity, IdError> {
    Ok(Identity {
        event_id: id_from_header(headers, &WEBHOOK_ID)?,
        event_type: type_from_header(headers, &TOPIC)?,
    })
}

pub(super) fn kept_headers() -> [HeaderName; 5] {
    [
        WEBHOOK_ID.clone(),
        TOPIC.clone(),
        TRIGGERED_AT.clone(),
        SHOP_DOMAIN.clone(),
        API_VERSION.clone(),
    ]
}

pub(super) fn sign(key: &Key, body: &[u8], identity: &Identity) -> Vec<(HeaderName, String)> {
    let tag = mac(Algorithm::Sha256, key, &[body]);
    let mut headers = vec![
        (SIGNATURE.clone(), encode(Encoding::Base64, &tag)),
        (WEBHOOK_ID.clone(), identity.event_id.clone()),
    ];
    headers.extend(
        identity
            .event_type
            .as_ref()
            .map(|topic| (TOPIC.clone(), topic.clone())),
    );
    headers
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::tests::{key, map};
    use super::super::{IdError, Scheme, VerifyError};

    #[test]
    fn bad_base64_is_malformed() {
        for value in ["%%%", "a", "abd", "é"] {
            let headers = map(&[("x-shopify-hmac-sha256", value)]);
            let err = Scheme::Shopify
                .verify(&[key()], &headers, b"{}", 0, 0)
                .unwrap_err();
            assert!(matches!(err, VerifyError::MalformedHeader(_)), "{value}");
        }
    }

    #[test]
    fn id_rules() {
        let long = "a".repeat(257);
        for (value, invalid) in [("", false), (long.as_str(), true), ("a\tb", true)] {
            let headers = map(&[("x-shopify-webhook-id", value)]);
            match Scheme::Shopify.identify(&headers, b"") {
                Err(IdError::Invalid(_)) if invalid => {}
                Err(IdError::Missing(_)) if !invalid => {}
                other => panic!("{value:?}: {other:?}"),
            }
        }
        let ok = "a".repeat(256);
        let headers = map(&[("x-shopify-webhook-id", ok.as_str())]);
        assert_eq!(Scheme::Shopify.identify(&headers, b"").unwrap().event_id, ok);
    }
}
