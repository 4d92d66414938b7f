//! Persona: `Persona-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, keyed with the `wbhsec_...`
//! secret as text. While a secret rotates the header holds two such sets separated by a space (one per secret),
//! which the generic pairs format cannot split, hence this file's own verify: any set may match, each over its own
//! `t`. Persona documents no window: 300 s. Id `data.id`, type `data.attributes.name`. No handshake.
//! <https://docs.withpersona.com/docs/webhooks-best-practices>

use http::HeaderName;

use crate::families::{Custom, Family, Signer};
use crate::providers::{Identify, Preset};
use crate::request::{Credentials, Request, Signed};
use crate::clock::Clock;
use crate::encoding::Encoding;
use crate::errors::VerifyError;
use crate::identity::Identity;
use crate::mac::Algorithm;

const SIGNATURE: HeaderName = HeaderName::from_static("persona-signature");

pub(super) fn preset() -> Preset {
    let family = Family::Custom(Custom {
        verify,
        has_timestamp: true,
        sign: Some(sign),
    });
    Preset::new(
        "persona",
        family,
        Identify::at("json:/data/id", Some("json:/data/attributes/name")),
    )
}

/// One `t=..,v1=..[,v1=..]` set: its timestamp and its decodable signatures.
fn sets(value: &str) -> Vec<(&str, Vec<Vec<u8>>)> {
    value
        .split_whitespace()
        .filter_map(|set| {
            let mut t = None;
            let mut signatures = Vec::new();
            for pair in set.split(',') {
                match pair.split_once('=') {
                    Some(("t", v)) => t = Some(v),
                    Some(("v1", v)) => signatures.extend(crate::encoding::decode(Encoding::Hex, v)),
                    _ => {}
                }
            }
            Some((t?, signatures))
        })
        .collect()
}

fn verify(creds: &Credentials, req: &Request, clock: Clock) -> Result<(), VerifyError> {
    let values = crate::headers::header_values(req.headers, &SIGNATURE)?;
    let sets: Vec<_> = values.iter().flat_map(|v| sets(v)).collect();
    if sets.is_empty() {
        return Err(crate::headers::malformed(&SIGNATURE, "no t=..,v1=.. set"));
    }
    // Every timestamp first: a stale delivery is refused as stale, whatever its signatures.
    for (t, _) in &sets {
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(crate::headers::malformed(&SIGNATURE, "t is not unix seconds"));
        }
        clock.check_unix(t.parse::<i64>().unwrap_or(i64::MAX))?;
    }
    let mut outcome = Err(VerifyError::Mismatch);
    for (t, signatures) in sets.iter().filter(|(_, s)| !s.is_empty()) {
        let parts: [&[u8]; 3] = [t.as_bytes(), b".", req.body];
        if crate::mac::verify_mac(Algorithm::Sha256, &creds.secrets, &parts, signatures, &SIGNATURE).is_ok() {
            outcome = Ok(());
        }
    }
    outcome
}

fn sign(signer: &Signer, _: &Credentials, req: &Request, _: &Identity, now_unix: i64) -> Signed {
    let Signer::Secret(key) = signer else {
        return Signed::default();
    };
    let t = now_unix.to_string();
    let tag = crate::mac::mac(Algorithm::Sha256, key, &[t.as_bytes(), b".", req.body]);
    Signed {
        headers: vec![(SIGNATURE, format!("t={t},v1={}", hex::encode(tag)))],
        body: None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use http::{HeaderMap, HeaderValue, Uri};

    use crate::families::Signer;
    use crate::request::{Credentials, Request};
    use crate::{Identity, Key, Scheme};

    #[test]
    fn a_signed_delivery_verifies_alone_or_beside_a_rotating_secrets_set() {
        let scheme = Scheme::named("persona").unwrap();
        let key = Key::new(b"wbhsec_current".to_vec());
        let creds = Credentials::secrets(vec![key.clone()]);
        let (uri, empty): (Uri, HeaderMap) = ("/webhooks/persona".parse().unwrap(), HeaderMap::new());
        let body = br#"{"data":{"type":"event","id":"evt_1","attributes":{"name":"inquiry.completed"}}}"#;
        let identity = Identity {
            event_id: "evt_1".to_owned(),
            event_type: None,
        };
        let signed = scheme
            .sign_request(&Signer::Secret(key), &creds, &Request::post(&uri, &empty, body), &identity, 1000)
            .unwrap();
        let (name, ours) = signed.headers.into_iter().next().unwrap();
        for value in [
            ours.clone(),
            format!("t=1000,v1={} {ours}", "ab".repeat(32)),
            format!("{ours} t=1000,v1={}", "ab".repeat(32)),
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(name.clone(), HeaderValue::from_str(&value).unwrap());
            let req = Request::post(&uri, &headers, body);
            scheme.verify_request(&creds, &req, 1000, 300, None).unwrap();
            assert!(scheme.verify_request(&creds, &req, 1000 + 301, 300, None).is_err());
        }
    }
}
