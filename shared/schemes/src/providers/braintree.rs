//! Braintree: a form-encoded POST of `bt_signature` and `bt_payload` (base64 XML). `bt_signature` holds
//! `{public key}|{hex HMAC-SHA1}` pairs joined by `&`; the HMAC key is SHA-1 of the private key, the message the
//! `bt_payload` text (or it followed by a newline). A secret is `{public key}:{private key}`. No timestamp is
//! checked. No event id is sent: the id is the hex SHA-256 of `bt_payload` as signed, ending in one newline (the
//! signature verifies the payload with or without it), the type its XML's `<kind>`. A webhook's creation is checked with `GET ?bt_challenge=...`, answered `{public key}|{hex HMAC-SHA1 of
//! the challenge}`. <https://developer.paypal.com/braintree/docs/guides/webhooks/parse>
//! <https://developers.braintreepayments.com/guides/webhooks/create>

use base64::Engine as _;
use http::{HeaderName, Method};
use sha1::{Digest as _, Sha1};

use crate::families::{Custom, Family, Signer};
use crate::providers::{Example, Identify, Preset};
use crate::request::{Answer, Credentials, Identified, Request, Signed};
use crate::clock::Clock;
use crate::encoding::{decode, Encoding, BASE64};
use crate::errors::{IdError, VerifyError};
use crate::identity::{valid_id, Identity};
use crate::key::Key;
use crate::mac::{mac, verify_mac, Algorithm};

static PLACE: HeaderName = HeaderName::from_static("bt_signature");

pub(super) fn preset() -> Preset {
    let family = Family::Custom(Custom {
        verify,
        has_timestamp: false,
        sign: Some(sign),
    });
    Preset {
        before: Some(challenge),
        get: true,
        // The notification's XML, which the signer encodes into `bt_payload` as Braintree does.
        example: Some(Example {
            body: r#"<notification><kind>{type}</kind><timestamp type="datetime">2026-01-01T00:00:00Z</timestamp><subject><subscription><id>{id}</id></subscription></subject></notification>"#,
            content_type: "application/xml",
            headers: &[],
        }),
        ..Preset::new("braintree", family, Identify::Custom(identify))
    }
}

/// A configured secret split into its public key and its HMAC key (SHA-1 of the private key).
fn split(secret: &Key) -> Option<(String, Key)> {
    let text = std::str::from_utf8(secret.expose()).ok()?;
    let (public, private) = text.split_once(':')?;
    if public.is_empty() || private.is_empty() {
        return None;
    }
    Some((
        public.to_owned(),
        Key::new(Sha1::digest(private.as_bytes()).to_vec()),
    ))
}

fn verify(creds: &Credentials, req: &Request, _clock: Clock) -> Result<(), VerifyError> {
    let signature = req
        .form("bt_signature")
        .ok_or_else(|| VerifyError::MissingHeader("form bt_signature".to_owned()))?;
    let payload = req
        .form("bt_payload")
        .ok_or_else(|| VerifyError::MissingHeader("form bt_payload".to_owned()))?;
    // A notification is base64 of XML (`<`, so `PD…`); the challenge answer signs hex digits with the same key,
    // so a payload that is not XML would let anyone who asked for a challenge answer sign one.
    let packed: Vec<u8> = payload.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let xml = BASE64
        .decode(&packed)
        .ok()
        .is_some_and(|x| x.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'<'));
    if !xml {
        return Err(crate::headers::malformed(&PLACE, "bt_payload is not a notification"));
    }
    let pairs: Vec<(&str, Vec<u8>)> = signature
        .split('&')
        .filter_map(|pair| {
            let (public, hex) = pair.split_once('|')?;
            Some((public, decode(Encoding::Hex, hex)?))
        })
        .collect();
    if pairs.is_empty() {
        return Err(crate::headers::malformed(&PLACE, "no usable signature"));
    }
    let with_newline = format!("{payload}\n");
    // Each secret checks only the signatures under its own public key; every MAC is compared by verify_mac.
    let mut verified = false;
    for (public, key) in creds.secrets.iter().filter_map(split) {
        let candidates: Vec<Vec<u8>> = pairs
            .iter()
            .filter(|(their_public, _)| *their_public == public.as_str())
            .map(|(_, candidate)| candidate.clone())
            .collect();
        if candidates.is_empty() {
            continue;
        }
        for message in [payload.as_bytes(), with_newline.as_bytes()] {
            verified |= verify_mac(Algorithm::Sha1, std::slice::from_ref(&key), &[message], &candidates, &PLACE).is_ok();
        }
    }
    if verified {
        Ok(())
    } else {
        Err(VerifyError::Mismatch)
    }
}

/// `GET ?bt_challenge=<hex>`: answered with the first configured key, as the SDKs' `verify(challenge)` does.
fn challenge(req: &Request, creds: &Credentials) -> Option<Result<Answer, VerifyError>> {
    if req.method != Method::GET {
        return None;
    }
    let challenge = req.query("bt_challenge")?;
    let hex_ok = (20..=32).contains(&challenge.len())
        && challenge.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !hex_ok {
        return Some(Err(VerifyError::MalformedHeader(
            "query bt_challenge (not 20-32 hex)".to_owned(),
        )));
    }
    let Some((public, key)) = creds.secrets.iter().find_map(split) else {
        return Some(Err(VerifyError::Mismatch));
    };
    let digest = hex::encode(mac(Algorithm::Sha1, &key, &[challenge.as_bytes()]));
    Some(Ok(Answer::text(format!("{public}|{digest}"))))
}

/// Signs the request's body as the notification XML: the form body Braintree would post.
fn sign(signer: &Signer, _: &Credentials, req: &Request, _identity: &Identity, _now_unix: i64) -> Signed {
    let Some((public, key)) = (match signer {
        Signer::Secret(secret) => split(secret),
        Signer::Private { .. } => None,
    }) else {
        return Signed::default();
    };
    let payload = base64::engine::general_purpose::STANDARD.encode(req.body) + "\n";
    let digest = hex::encode(mac(Algorithm::Sha1, &key, &[payload.as_bytes()]));
    let form =
        |s: &str| percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string();
    let body = format!(
        "bt_signature={}&bt_payload={}",
        form(&format!("{public}|{digest}")),
        form(&payload)
    );
    Signed {
        headers: vec![(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded".to_owned(),
        )],
        body: Some(body.into_bytes()),
    }
}

fn identify(req: &Request) -> Result<Identified, IdError> {
    let payload = req
        .form("bt_payload")
        .ok_or_else(|| IdError::Missing("form bt_payload".to_owned()))?;
    // The id is the hash of what is signed. `verify` takes a signature over the payload or over it followed by a
    // newline (the SDKs sign and check either), so one signed notification verifies with its trailing newline and
    // without it: hashed as sent, anyone who saw a delivery could strip the newline (`%0A`) and have it run again
    // under a second id, with no timestamp to stop them. Every payload that one signature verifies is hashed with
    // its trailing newlines replaced by one, which for Braintree's own payloads (base64 that ends in a newline) is
    // the payload as sent: their ids are what they were.
    let signed = format!("{}\n", payload.trim_end_matches('\n'));
    let event_id = hex::encode(sha2::Sha256::digest(signed.as_bytes()));
    // The type is optional: a payload whose XML cannot be read still stores, untyped.
    let compact: String = payload.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let event_type = BASE64
        .decode(compact)
        .ok()
        .and_then(|xml| kind(&String::from_utf8_lossy(&xml)))
        .map(|kind| valid_id("the notification's kind", kind))
        .transpose()
        .ok()
        .flatten();
    Ok(Identified::One(Identity { event_id, event_type }))
}

/// The text of the first `<kind>` element.
fn kind(xml: &str) -> Option<String> {
    let start = xml.find("<kind>")? + "<kind>".len();
    let end = start + xml[start..].find("</kind>")?;
    let kind = xml[start..end].trim();
    (!kind.is_empty()).then(|| kind.to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use http::{HeaderMap, HeaderValue, Uri};

    use super::*;

    #[test]
    fn signs_what_it_verifies_and_answers_the_challenge() {
        let secret = Key::new(b"pubkey1:0123456789abcdef0123456789abcdef".to_vec());
        let xml = b"<notification><timestamp type=\"datetime\">2026-01-01T00:00:00Z</timestamp><kind>check</kind></notification>";
        let (uri, empty) = (Uri::from_static("/"), HeaderMap::new());
        let identity = Identity {
            event_id: String::new(),
            event_type: None,
        };
        let signed = sign(
            &Signer::Secret(secret.clone()),
            &Credentials::default(),
            &Request::post(&uri, &empty, xml),
            &identity,
            0,
        );
        let body = signed.body.unwrap();
        let mut headers = HeaderMap::new();
        for (name, value) in signed.headers {
            headers.insert(name, HeaderValue::from_str(&value).unwrap());
        }
        let req = Request::post(&uri, &headers, &body);
        let clock = Clock {
            now_unix: 0,
            tolerance_secs: 300,
        };
        let creds = Credentials::secrets(vec![secret]);
        assert!(verify(&creds, &req, clock).is_ok());
        let other = Credentials::secrets(vec![Key::new(
            b"pubkey2:0123456789abcdef0123456789abcdef".to_vec(),
        )]);
        assert!(verify(&other, &req, clock).is_err());
        let Identified::One(found) = identify(&req).unwrap() else {
            panic!("one event")
        };
        assert_eq!(found.event_type.as_deref(), Some("check"));

        let get = Uri::from_static("/hooks?bt_challenge=20f9f8ed05f77439fe955c977e4c8a53");
        let req = Request {
            method: &Method::GET,
            uri: &get,
            headers: &empty,
            body: b"",
            received_ms: 0,
        };
        let answer = challenge(&req, &creds).unwrap().unwrap();
        assert!(String::from_utf8(answer.body).unwrap().starts_with("pubkey1|"));
        assert!(challenge(&Request::post(&uri, &empty, b""), &creds).is_none());
    }

    /// GIVEN a Braintree notification as the SDK signs it (the vector: a payload ending in a newline)
    /// WHEN the same notification is posted again with the payload's trailing newline (`%0A`) taken off, which
    /// anyone who saw the delivery can do without the key
    /// THEN both verify (the signature covers the payload with or without it) and both are the vector's event id.
    #[test]
    fn a_payload_without_its_trailing_newline_is_the_same_event() {
        let vector: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/vectors/braintree.json")).unwrap();
        let creds = Credentials::secrets(
            vector["config"]["secrets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| Key::new(s.as_str().unwrap().as_bytes().to_vec()))
                .collect(),
        );
        let uri = Uri::from_static("/webhooks/braintree");
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/x-www-form-urlencoded"));
        let mut checked = 0;
        for case in vector["cases"].as_array().unwrap().iter().filter(|c| c["method"] == "POST") {
            let body = case["body"].as_str().unwrap();
            let stripped = body.strip_suffix("%0A").expect("the SDK's payload ends in a newline");
            let clock = Clock {
                now_unix: case["now"].as_i64().unwrap(),
                tolerance_secs: 300,
            };
            let ids: Vec<String> = [body, stripped]
                .into_iter()
                .map(|body| {
                    let req = Request::post(&uri, &headers, body.as_bytes());
                    verify(&creds, &req, clock).expect("verifies");
                    let Identified::One(found) = identify(&req).unwrap() else {
                        panic!("one event")
                    };
                    found.event_id
                })
                .collect();
            assert_eq!(ids[1], ids[0], "{}: the payload without its newline is another event", case["name"]);
            assert_eq!(Some(ids[0].as_str()), case["expect"]["event_id"].as_str());
            checked += 1;
        }
        assert!(checked > 0, "no notification in the vector");
    }
}
