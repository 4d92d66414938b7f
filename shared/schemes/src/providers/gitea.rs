//! Gitea (and Forgejo, which sends the same headers): `X-Gitea-Signature` = hex HMAC-SHA256 of the payload JSON,
//! keyed with the webhook's secret as text (the same value is in `X-Gogs-Signature` and `X-Hub-Signature-256`).
//! With the JSON content type the payload is the raw body; with the form content type the body is
//! `payload=<url-encoded JSON>` and the signature covers that field decoded, not the body. No timestamp is signed.
//! The id is `X-Gitea-Delivery`, the type `X-Gitea-Event` (`push`). No handshake.
//! <https://docs.gitea.com/usage/repository/webhooks> (the signature as Gitea's sender computes it:
//! <https://github.com/go-gitea/gitea/blob/main/services/webhook/deliver.go>)

use std::borrow::Cow;

use http::HeaderName;

use crate::families::{Custom, Family, Signer};
use crate::providers::{Identify, Preset};
use crate::request::{Credentials, Request, Signed};
use crate::clock::Clock;
use crate::encoding::{decode, encode, Encoding};
use crate::errors::VerifyError;
use crate::headers::header_first;
use crate::identity::Identity;
use crate::mac::{mac, verify_mac, Algorithm};

const SIGNATURE: HeaderName = HeaderName::from_static("x-gitea-signature");

pub(super) fn preset() -> Preset {
    let family = Family::Custom(Custom {
        verify,
        has_timestamp: false,
        sign: Some(sign),
    });
    Preset {
        kept: vec![
            HeaderName::from_static("x-gitea-delivery"),
            HeaderName::from_static("x-gitea-event"),
            HeaderName::from_static("x-gitea-event-type"),
        ],
        // The id is an unsigned header.
        resendable: true,
        ..Preset::new(
            "gitea",
            family,
            Identify::at("header:x-gitea-delivery", Some("header:x-gitea-event")),
        )
    }
}

/// What Gitea signs: the body, or for a form body its `payload` field decoded.
fn payload<'a>(req: &Request<'a>) -> Result<Cow<'a, [u8]>, VerifyError> {
    if req.is_form() {
        // Gitea sends one field, `payload`: a second would be stored and forwarded beside the signed one, and a
        // consumer reading the last value would act on what nobody signed.
        let mut fields = req.form_fields().unwrap_or_default();
        if fields.len() != 1 || fields[0].0 != "payload" {
            return Err(VerifyError::MalformedHeader("form (exactly one field, payload)".to_owned()));
        }
        Ok(Cow::Owned(fields.remove(0).1.into_bytes()))
    } else {
        Ok(Cow::Borrowed(req.body))
    }
}

fn verify(creds: &Credentials, req: &Request, _: Clock) -> Result<(), VerifyError> {
    let candidates: Vec<Vec<u8>> = decode(Encoding::Hex, header_first(req.headers, &SIGNATURE)?)
        .into_iter()
        .collect();
    let signed = payload(req)?;
    verify_mac(Algorithm::Sha256, &creds.secrets, &[&signed], &candidates, &SIGNATURE)
}

fn sign(signer: &Signer, _: &Credentials, req: &Request, _: &Identity, _: i64) -> Signed {
    let (Signer::Secret(key), Ok(signed)) = (signer, payload(req)) else {
        return Signed::default();
    };
    let tag = encode(Encoding::Hex, &mac(Algorithm::Sha256, key, &[&signed]));
    Signed {
        headers: vec![
            (HeaderName::from_static("x-hub-signature-256"), format!("sha256={tag}")),
            (SIGNATURE, tag),
        ],
        body: None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use http::{HeaderMap, HeaderValue, Uri};

    use crate::request::{Credentials, Request};
    use crate::{Identity, Key, Scheme, Signer, VerifyError};

    fn creds() -> Credentials {
        Credentials::secrets(vec![Key::new(b"gitea-secret".to_vec())])
    }

    fn signed_headers(scheme: &Scheme, content_type: &'static str, body: &[u8]) -> HeaderMap {
        let uri = Uri::from_static("/webhooks/gitea");
        let mut headers = HeaderMap::new();
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        let identity = Identity {
            event_id: "f6266f16-1bf3-46a5-9ea4-602e06ead473".to_owned(),
            event_type: Some("push".to_owned()),
        };
        let signer = Signer::Secret(Key::new(b"gitea-secret".to_vec()));
        let signed = scheme
            .sign_request(&signer, &creds(), &Request::post(&uri, &headers, body), &identity, 0)
            .unwrap();
        for (name, value) in signed.headers {
            headers.insert(name, HeaderValue::from_str(&value).unwrap());
        }
        headers
    }

    #[test]
    fn signs_the_payload_json_or_form_field() {
        let scheme = Scheme::named("gitea").unwrap();
        let uri = Uri::from_static("/webhooks/gitea");
        for (content_type, body) in [
            ("application/json", &b"{\n  \"ref\": \"refs/heads/main\"\n}"[..]),
            (
                "application/x-www-form-urlencoded",
                &b"payload=%7B%0A++%22ref%22%3A+%22refs%2Fheads%2Fmain%22%0A%7D"[..],
            ),
        ] {
            let headers = signed_headers(&scheme, content_type, body);
            assert_eq!(headers["x-gitea-event"], "push");
            let req = Request::post(&uri, &headers, body);
            assert!(scheme.verify_request(&creds(), &req, 0, 300, None).is_ok(), "{content_type}");
        }
        // The form's signature is the JSON's: the same value for both spellings of one payload.
        let json = signed_headers(&scheme, "application/json", b"{\"a\": 1}");
        let form = signed_headers(&scheme, "application/x-www-form-urlencoded", b"payload=%7B%22a%22%3A+1%7D");
        assert_eq!(json["x-gitea-signature"], form["x-gitea-signature"]);
    }

    #[test]
    fn a_form_without_its_payload_is_refused() {
        let scheme = Scheme::named("gitea").unwrap();
        let uri = Uri::from_static("/webhooks/gitea");
        let mut headers = signed_headers(&scheme, "application/x-www-form-urlencoded", b"payload=%7B%7D");
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        let req = Request::post(&uri, &headers, b"other=%7B%7D");
        assert!(matches!(
            scheme.verify_request(&creds(), &req, 0, 300, None),
            Err(VerifyError::MalformedHeader(_))
        ));
    }
}
