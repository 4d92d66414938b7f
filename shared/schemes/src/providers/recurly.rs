//! Recurly: `recurly-signature: {unix ms},{hex HMAC-SHA256 of "{ms}.{body}"}[,{hex}...]`; after a key is
//! regenerated both keys sign for 24 h. The key is the endpoint's secret as text (it looks like hex; it is not
//! decoded). 5 min tolerance, as Recurly's clients use. Only JSON webhooks are signed. The body's `id` is the
//! object's, shared by all its events, so the id is the hex SHA-256 of the body; the type is
//! `object_type.event_type` (`subscription.created`).
//! <https://docs.recurly.com/v1.3/docs/signature-verification>

use http::HeaderName;

use crate::families::{Custom, Family, Signer};
use crate::providers::{Identify, Preset};
use crate::request::{Credentials, Identified, Request, Signed};
use crate::clock::Clock;
use crate::encoding::{decode, encode, Encoding};
use crate::errors::{IdError, VerifyError};
use crate::headers::{header_first, malformed};
use crate::identity::Identity;
use crate::mac::{mac, verify_mac, Algorithm};

static SIGNATURE: HeaderName = HeaderName::from_static("recurly-signature");

pub(super) fn preset() -> Preset {
    let family = Family::Custom(Custom {
        verify,
        has_timestamp: true,
        sign: Some(sign),
    });
    Preset {
        tolerance_secs: Some(300),
        ..Preset::new("recurly", family, Identify::Custom(identify))
    }
}

/// The timestamp is the header's first comma-separated field, in milliseconds; every later field is a signature.
fn verify(creds: &Credentials, req: &Request, clock: Clock) -> Result<(), VerifyError> {
    let value = header_first(req.headers, &SIGNATURE)?;
    let mut fields = value.split(',').map(str::trim);
    let millis = fields.next().unwrap_or("");
    if millis.is_empty() || !millis.bytes().all(|b| b.is_ascii_digit()) {
        return Err(malformed(&SIGNATURE, "no unix-milliseconds timestamp first"));
    }
    clock.check_unix(millis.parse::<i64>().map_or(i64::MAX, |ms| ms / 1000))?;
    let candidates: Vec<Vec<u8>> = fields.filter_map(|f| decode(Encoding::Hex, f)).collect();
    verify_mac(
        Algorithm::Sha256,
        &creds.secrets,
        &[millis.as_bytes(), b".", req.body],
        &candidates,
        &SIGNATURE,
    )
}

fn sign(signer: &Signer, _: &Credentials, req: &Request, _identity: &Identity, now_unix: i64) -> Signed {
    let Signer::Secret(key) = signer else {
        return Signed::default();
    };
    let millis = (now_unix.saturating_mul(1000)).to_string();
    let tag = mac(Algorithm::Sha256, key, &[millis.as_bytes(), b".", req.body]);
    Signed {
        headers: vec![(
            SIGNATURE.clone(),
            format!("{millis},{}", encode(Encoding::Hex, &tag)),
        )],
        body: None,
    }
}

fn identify(req: &Request) -> Result<Identified, IdError> {
    #[derive(serde::Deserialize)]
    struct Notification {
        object_type: Option<String>,
        event_type: Option<String>,
    }
    use sha2::Digest as _;
    let event_id = hex::encode(sha2::Sha256::digest(req.body));
    // The type is optional: a body that is not the documented JSON still stores, untyped.
    let event_type = serde_json::from_slice::<Notification>(req.body)
        .ok()
        .and_then(|n| match (n.object_type, n.event_type) {
            (Some(object), Some(event)) if !object.is_empty() && !event.is_empty() => {
                Some(format!("{object}.{event}"))
            }
            _ => None,
        });
    Ok(Identified::One(Identity { event_id, event_type }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use http::{HeaderMap, HeaderValue, Uri};

    use super::*;
    use crate::Key;

    #[test]
    fn signs_what_it_verifies() {
        let key = Key::new(b"recurly-test-key".to_vec());
        let body = br#"{"id":"x1","object_type":"account","event_type":"created"}"#;
        let (uri, empty) = (Uri::from_static("/"), HeaderMap::new());
        let identity = Identity {
            event_id: String::new(),
            event_type: None,
        };
        let signed = sign(
            &Signer::Secret(key.clone()),
            &Credentials::default(),
            &Request::post(&uri, &empty, body),
            &identity,
            1_700_000_000,
        );
        let mut headers = HeaderMap::new();
        for (name, value) in signed.headers {
            headers.insert(name, HeaderValue::from_str(&value).unwrap());
        }
        let req = Request::post(&uri, &headers, body);
        let creds = Credentials::secrets(vec![key]);
        let clock = |now_unix| Clock {
            now_unix,
            tolerance_secs: 300,
        };
        assert!(verify(&creds, &req, clock(1_700_000_100)).is_ok());
        assert!(matches!(
            verify(&creds, &req, clock(1_700_000_301)),
            Err(VerifyError::Timestamp { .. })
        ));
        let Identified::One(found) = identify(&req).unwrap() else {
            panic!("one event")
        };
        assert_eq!(found.event_type.as_deref(), Some("account.created"));
    }
}
