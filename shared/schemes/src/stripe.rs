//! Stripe: `Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256("<t>.<body>")>[,v1=...]`. The key is the whole
//! `whsec_...` string. `v0` and other schemes in the header are ignored.
//! <https://docs.stripe.com/webhooks>

use http::{HeaderMap, HeaderName};

use crate::clock::Clock;
use crate::encoding::{decode, Encoding};
use crate::errors::{IdError, VerifyError};
use crate::headers::{header_values, malformed};
use crate::identity::{Body, Identity};
use crate::key::Key;
use crate::mac::{mac, verify_mac, Algorithm};

static SIGNATURE: HeaderName = HeaderName::from_static("stripe-signature");

pub(super) fn verify(
    keys: &[Key],
    headers: &HeaderMap,
    body: &[u8],
    clock: Clock,
) -> Result<(), VerifyError> {
    // Several header lines read as one comma-separated list (RFC 9110 field combination).
    let values = header_values(headers, &SIGNATURE)?;
    let mut timestamp: Option<&str> = None;
    let mut candidates = Vec::new();
    for item in values.iter().flat_map(|value| value.split(',')) {
        let Some((scheme, value)) = item.split_once('=') else {
            continue;
        };
        let value = value.trim();
        match scheme.trim() {
            "t" => match timestamp {
                Some(seen) if seen != value => return Err(malformed(&SIGNATURE, "conflicting timestamps")),
                _ => timestamp = Some(value),
            },
            "v1" => candidates.extend(decode(Encoding::Hex, value)),
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or_else(|| malformed(&SIGNATURE, "no timestamp"))?;
    clock.check(&SIGNATURE, timestamp)?;
    verify_mac(
        Algorithm::Sha256,
        keys,
        &[timestamp.as_bytes(), b".", body],
        &candidates,
        &SIGNATURE,
    )
}

pub(super) fn identify(body: &[u8]) -> Result<Identity, IdError> {
    let body = Body::new(body, &["/id", "/type"]);
    Ok(Identity {
        event_id: body.id_at("/id")?,
        event_type: body.type_at("/type")?,
    })
}

pub(super) fn sign(key: &Key, body: &[u8], now_unix: i64) -> Vec<(HeaderName, String)> {
    let timestamp = now_unix.to_string();
    let signature = hex::encode(mac(Algorithm::Sha256, key, &[timestamp.as_bytes(), b".", body]));
    vec![(SIGNATURE.clone(), format!("t={timestamp},v1={signature}"))]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::tests::map;
    use super::super::{IdError, Scheme, VerifyError};

    fn key() -> super::super::Key {
        Scheme::Stripe.key_from_secret("whsec_test").unwrap()
    }

    #[test]
    fn ignores_v0_and_unknown_schemes() {
        let body = b"{\"id\":\"evt_1\"}";
        let good = Scheme::Stripe.sign(&key(), body, &super::super::tests::identity("evt_1", None), 100);
        let v1 = good[0]
            .1
            .to_str()
            .unwrap()
            .split_once("v1=")
            .unwrap()
            .1
            .to_owned();
        // GIVEN the right MAC only under v0 and an unknown scheme THEN nothing matches.
        let headers = map(&[("stripe-signature", &format!("t=100,v0={v1},v9={v1},v1=00"))]);
        let err = Scheme::Stripe
            .verify(&[key()], &headers, body, 100, 300)
            .unwrap_err();
        assert!(matches!(err, VerifyError::Mismatch));
        let headers = map(&[("stripe-signature", &format!("t=100, v0=zz, v1=00, v1={v1}"))]);
        Scheme::Stripe.verify(&[key()], &headers, body, 100, 300).unwrap();
    }

    #[test]
    fn malformed_headers() {
        for value in [
            "v1=00",
            "t=abc,v1=00",
            "t=1,t=2,v1=00",
            "t=1",
            "garbage",
            "",
            "t=-5,v1=00",
        ] {
            let headers = map(&[("stripe-signature", value)]);
            let err = Scheme::Stripe
                .verify(&[key()], &headers, b"", 1, 300)
                .unwrap_err();
            assert!(matches!(err, VerifyError::MalformedHeader(_)), "{value}: {err:?}");
        }
    }

    #[test]
    fn identify_needs_json_with_id() {
        let headers = map(&[]);
        assert!(matches!(
            Scheme::Stripe.identify(&headers, b"not json"),
            Err(IdError::MalformedBody)
        ));
        assert!(matches!(
            Scheme::Stripe.identify(&headers, b"{\"type\":\"x\"}"),
            Err(IdError::Missing(ref w)) if w == "json /id"
        ));
        let id = Scheme::Stripe.identify(&headers, b"{\"id\":\"evt_1\"}").unwrap();
        assert_eq!(id.event_type, None);
    }
}
