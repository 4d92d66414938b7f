//! Box (webhooks v2): `Box-Signature-Primary` and `Box-Signature-Secondary`, each the base64 HMAC-SHA256 of the
//! raw body bytes followed by the `Box-Delivery-Timestamp` bytes, under the app's primary and secondary signature
//! keys (`secrets = [primary, secondary]`; either header may match either key, so a rotation in any order
//! passes). Only `Box-Signature-Version: 1` with `HmacSHA256` exists. The timestamp is RFC 3339 with an offset,
//! refused past 10 minutes. The id is the body's `id` (kept across retries; `Box-Delivery-Id` changes per
//! delivery), the type `trigger` (`FILE.UPLOADED`).
//! <https://developer.box.com/guides/webhooks/v2/signatures-v2/>

use http::HeaderName;

use crate::families::{Custom, Family, Signer};
use crate::providers::{Identify, Preset};
use crate::request::{Credentials, Request, Signed};
use crate::clock::Clock;
use crate::encoding::{decode, encode, Encoding};
use crate::headers::{header_first, malformed};
use crate::identity::Identity;
use crate::mac::{mac, verify_mac, Algorithm};
use crate::time::{rfc3339_utc, unix_of_rfc3339};
use crate::errors::VerifyError;
use crate::key::Key;

static TIMESTAMP: HeaderName = HeaderName::from_static("box-delivery-timestamp");
static PRIMARY: HeaderName = HeaderName::from_static("box-signature-primary");
static SECONDARY: HeaderName = HeaderName::from_static("box-signature-secondary");
static VERSION: HeaderName = HeaderName::from_static("box-signature-version");
static ALGORITHM: HeaderName = HeaderName::from_static("box-signature-algorithm");

pub(super) fn preset() -> Preset {
    let family = Family::Custom(Custom {
        verify,
        has_timestamp: true,
        sign: Some(sign),
    });
    Preset {
        tolerance_secs: Some(600),
        kept: vec![HeaderName::from_static("box-delivery-id"), TIMESTAMP.clone()],
        ..Preset::new("box", family, Identify::at("json:/id", Some("json:/trigger")))
    }
}

fn verify(creds: &Credentials, req: &Request, clock: Clock) -> Result<(), VerifyError> {
    let timestamp = header_first(req.headers, &TIMESTAMP)?;
    let unix = unix_of_rfc3339(timestamp).ok_or_else(|| malformed(&TIMESTAMP, "not an RFC 3339 time"))?;
    clock.check_unix(unix)?;
    if header_first(req.headers, &VERSION)?.trim() != "1" {
        return Err(malformed(&VERSION, "not 1"));
    }
    if header_first(req.headers, &ALGORITHM)?.trim() != "HmacSHA256" {
        return Err(malformed(&ALGORITHM, "not HmacSHA256"));
    }
    let candidates: Vec<Vec<u8>> = [&PRIMARY, &SECONDARY]
        .into_iter()
        .filter_map(|name| req.headers.get(name))
        .filter_map(|v| std::str::from_utf8(v.as_bytes()).ok())
        .filter_map(|v| decode(Encoding::Base64, v))
        .collect();
    if req.headers.get(&PRIMARY).is_none() && req.headers.get(&SECONDARY).is_none() {
        return Err(VerifyError::MissingHeader(PRIMARY.to_string()));
    }
    verify_mac(
        Algorithm::Sha256,
        &creds.secrets,
        &[req.body, timestamp.as_bytes()],
        &candidates,
        &PRIMARY,
    )
}

/// Signs like Box with one key: the primary signature, the delivery timestamp and the version headers.
fn sign(signer: &Signer, _: &Credentials, req: &Request, _: &Identity, now_unix: i64) -> Signed {
    let Signer::Secret(key) = signer else {
        return Signed::default();
    };
    let timestamp = rfc3339_utc(now_unix);
    Signed {
        headers: vec![
            (TIMESTAMP.clone(), timestamp.clone()),
            (VERSION.clone(), "1".to_owned()),
            (ALGORITHM.clone(), "HmacSHA256".to_owned()),
            (PRIMARY.clone(), tag(key, req.body, &timestamp)),
        ],
        body: None,
    }
}

fn tag(key: &Key, body: &[u8], timestamp: &str) -> String {
    encode(
        Encoding::Base64,
        &mac(Algorithm::Sha256, key, &[body, timestamp.as_bytes()]),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use http::{HeaderMap, HeaderValue};

    use super::*;

    #[test]
    fn a_signed_delivery_verifies_under_either_key() {
        let key = Key::new(b"SamplePrimaryKey0123456789abcdef".to_vec());
        let body = br#"{"type":"webhook_event","id":"e1","trigger":"FILE.UPLOADED"}"#;
        let uri = http::Uri::from_static("/webhooks/box");
        let mut headers = HeaderMap::new();
        let req = Request::post(&uri, &headers, body);
        let signed = sign(
            &Signer::Secret(key.clone()),
            &Credentials::default(),
            &req,
            &Identity {
                event_id: "e1".to_owned(),
                event_type: None,
            },
            1_700_000_000,
        );
        for (name, value) in signed.headers {
            headers.insert(name, HeaderValue::from_str(&value).unwrap());
        }
        let other = Key::new(b"SampleSecondaryKey0123456789abcd".to_vec());
        let creds = Credentials::secrets(vec![other, key]);
        let clock = Clock {
            now_unix: 1_700_000_000,
            tolerance_secs: 600,
        };
        verify(&creds, &Request::post(&uri, &headers, body), clock).unwrap();
    }
}
