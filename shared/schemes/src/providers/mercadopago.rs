//! Mercado Pago: `x-signature: ts={unix s},v1={hex HMAC-SHA256 of "id:{data.id};request-id:{x-request-id};ts:{ts};"}`
//! under the application's secret signature (its bytes), `data.id` from the query string lower-cased, a missing
//! part left out (as the SDKs do); no tolerance documented, so the default. The body is not signed: its `data.id`
//! must equal the signed one. The id is the body's `id` (the notification's), else its SHA-256; the type `action`
//! (`payment.updated`), else `type`. No handshake; answer 200/201 within 22 s.
//! <https://www.mercadopago.com.mx/developers/en/docs/checkout-pro-preferences/payment-notifications>

use http::HeaderName;

use crate::families::{Custom, Family, Signer};
use crate::json::Leaf;
use crate::providers::{Identify, Preset};
use crate::request::{Credentials, Identified, Request, Signed};
use crate::clock::Clock;
use crate::errors::{IdError, VerifyError};
use crate::identity::Identity;
use crate::mac::Algorithm;

const SIGNATURE: HeaderName = HeaderName::from_static("x-signature");
const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

pub(super) fn preset() -> Preset {
    let family = Family::Custom(Custom {
        verify,
        has_timestamp: true,
        sign: Some(sign),
    });
    Preset {
        kept: vec![REQUEST_ID],
        ..Preset::new("mercadopago", family, Identify::Custom(identify))
    }
}

/// The signed `data.id`: the query parameter, lower-cased (the docs: alphanumeric ids are signed in lower case).
fn data_id(req: &Request) -> Option<String> {
    let id = req.query("data.id")?.trim().to_ascii_lowercase();
    (!id.is_empty()).then_some(id)
}

fn manifest(req: &Request, ts: &str) -> String {
    let mut out = String::new();
    if let Some(id) = data_id(req) {
        out.push_str(&format!("id:{id};"));
    }
    if let Some(rid) = req.header(REQUEST_ID.as_str()).map(str::trim).filter(|r| !r.is_empty()) {
        out.push_str(&format!("request-id:{rid};"));
    }
    out.push_str(&format!("ts:{ts};"));
    out
}

fn verify(creds: &Credentials, req: &Request, clock: Clock) -> Result<(), VerifyError> {
    let value = crate::headers::header_first(req.headers, &SIGNATURE)?;
    let mut ts = None;
    let mut candidates = Vec::new();
    for part in value.split(',') {
        let Some((key, v)) = part.split_once('=') else {
            continue;
        };
        match key.trim().to_ascii_lowercase().as_str() {
            "ts" if ts.is_none() => ts = Some(v.trim()),
            "v1" => candidates.extend(crate::encoding::decode(crate::encoding::Encoding::Hex, v.trim())),
            _ => {}
        }
    }
    let ts = ts.ok_or_else(|| crate::headers::malformed(&SIGNATURE, "no ts"))?;
    if ts.is_empty() || !ts.bytes().all(|b| b.is_ascii_digit()) {
        return Err(crate::headers::malformed(&SIGNATURE, "ts is not unix seconds"));
    }
    // The timestamp first: a stale delivery is refused as stale, whatever its signature.
    clock.check_unix(ts.parse::<i64>().unwrap_or(i64::MAX))?;
    let signed = manifest(req, ts);
    crate::mac::verify_mac(
        Algorithm::Sha256,
        &creds.secrets,
        &[signed.as_bytes()],
        &candidates,
        &SIGNATURE,
    )?;
    bound_to_signed_id(req)
}

/// The body is not signed, only the query's `data.id`: a body that names another resource (or is not JSON) is
/// refused, so a captured signature cannot carry someone else's body.
fn bound_to_signed_id(req: &Request) -> Result<(), VerifyError> {
    let found = crate::json::at_pointers(req.body, &["/data/id"]).map_err(|_| VerifyError::Mismatch)?;
    let Some(signed) = data_id(req) else {
        // Nothing of the body is signed then: a body that names a resource is refused, not taken on trust.
        return match found.into_iter().next().flatten() {
            Some(_) => Err(VerifyError::Mismatch),
            None => Ok(()),
        };
    };
    match found.into_iter().next().flatten() {
        Some(Leaf::String(id) | Leaf::Number(id)) if id.trim().eq_ignore_ascii_case(&signed) => Ok(()),
        _ => Err(VerifyError::Mismatch),
    }
}

fn sign(signer: &Signer, _: &Credentials, req: &Request, _: &Identity, now_unix: i64) -> Signed {
    let Signer::Secret(key) = signer else {
        return Signed::default();
    };
    let ts = now_unix.to_string();
    let tag = crate::mac::mac(Algorithm::Sha256, key, &[manifest(req, &ts).as_bytes()]);
    Signed {
        headers: vec![(SIGNATURE, format!("ts={ts},v1={}", hex::encode(tag)))],
        body: None,
    }
}

fn identify(req: &Request) -> Result<Identified, IdError> {
    let found = crate::json::at_pointers(req.body, &["/id", "/action", "/type"])
        .map_err(|_| IdError::MalformedBody)?;
    let text = |i: usize| match found.get(i).cloned().flatten() {
        Some(Leaf::String(s) | Leaf::Number(s)) if !s.is_empty() => Some(s),
        _ => None,
    };
    let event_id = match text(0) {
        Some(id) => crate::identity::valid_id("json /id", id)?,
        None => hex::encode(<sha2::Sha256 as sha2::Digest>::digest(req.body)),
    };
    Ok(Identified::One(Identity {
        event_id,
        event_type: text(1).or_else(|| text(2)),
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use http::{HeaderMap, HeaderValue, Method, Uri};

    use crate::{Credentials, Identity, Key, Request, Scheme, Signer, VerifyError};

    const NOW: i64 = 1_700_000_000;

    fn signed(uri: &Uri, body: &[u8], request_id: Option<&str>) -> HeaderMap {
        let scheme = Scheme::named("mercadopago").unwrap();
        let mut headers = HeaderMap::new();
        if let Some(rid) = request_id {
            headers.insert("x-request-id", HeaderValue::from_str(rid).unwrap());
        }
        let req = Request {
            method: &Method::POST,
            uri,
            headers: &headers,
            body,
            received_ms: 0,
        };
        let identity = Identity {
            event_id: "1".to_owned(),
            event_type: None,
        };
        let signer = Signer::Secret(Key::new(b"secret".to_vec()));
        let out = scheme
            .sign_request(&signer, &Credentials::default(), &req, &identity, NOW)
            .unwrap();
        for (name, value) in out.headers {
            headers.insert(name, HeaderValue::from_str(&value).unwrap());
        }
        headers
    }

    fn verify(uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Result<(), VerifyError> {
        let creds = Credentials::secrets(vec![Key::new(b"secret".to_vec())]);
        let req = Request {
            method: &Method::POST,
            uri,
            headers,
            body,
            received_ms: 0,
        };
        Scheme::named("mercadopago")
            .unwrap()
            .verify_request(&creds, &req, NOW, 300, None)
    }

    #[test]
    fn signs_and_verifies_with_or_without_a_request_id() {
        let uri: Uri = "/hook?data.id=ORD01AB&type=order".parse().unwrap();
        let body = br#"{"action":"order.processed","data":{"id":"ORD01AB"}}"#;
        for rid in [Some("bb56a2f1"), None] {
            let headers = signed(&uri, body, rid);
            verify(&uri, &headers, body).unwrap();
        }
    }

    #[test]
    fn a_body_naming_another_resource_is_refused() {
        let uri: Uri = "/hook?data.id=123&type=payment".parse().unwrap();
        let body = br#"{"action":"payment.updated","data":{"id":"123"}}"#;
        let headers = signed(&uri, body, Some("r1"));
        verify(&uri, &headers, body).unwrap();
        for other in [
            &br#"{"action":"payment.updated","data":{"id":"124"}}"#[..],
            br#"{"action":"payment.updated","data":{}}"#,
            b"not json",
        ] {
            assert!(matches!(verify(&uri, &headers, other), Err(VerifyError::Mismatch)));
        }
    }

    #[test]
    fn the_signed_query_id_cannot_be_changed() {
        let uri: Uri = "/hook?data.id=123&type=payment".parse().unwrap();
        let body = br#"{"data":{"id":"123"}}"#;
        let headers = signed(&uri, body, Some("r1"));
        let moved: Uri = "/hook?data.id=999&type=payment".parse().unwrap();
        let body = br#"{"data":{"id":"999"}}"#;
        assert!(matches!(verify(&moved, &headers, body), Err(VerifyError::Mismatch)));
    }
}
