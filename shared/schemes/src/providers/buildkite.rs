//! Buildkite pipeline webhooks, either setting of the webhook's token: signature mode sends
//! `X-Buildkite-Signature: timestamp=<unix s>,signature=<hex HMAC-SHA256 of "{timestamp}.{body}">` keyed with the
//! token, checked within 300 s (the docs suggest a short window such as 5 minutes); token mode (Buildkite's
//! default) sends the token itself in `X-Buildkite-Token`, compared in constant time. No event id is sent: the id
//! is the hex SHA-256 of the body (a retry is then the same event); the type is the body's `event`
//! (`build.finished`; `ping` is an ordinary event).
//! <https://buildkite.com/docs/apis/webhooks/pipelines#webhook-signature>

use http::HeaderName;

use crate::families::{Custom, Family, Hmac, SecretEncoding, Signature, Signer, Template, Timestamp, Token};
use crate::providers::{Identify, Preset};
use crate::request::{Credentials, Request, Signed};
use crate::clock::Clock;
use crate::encoding::Encoding;
use crate::errors::VerifyError;
use crate::identity::Identity;
use crate::mac::Algorithm;

const SIGNATURE: HeaderName = HeaderName::from_static("x-buildkite-signature");
const TOKEN: HeaderName = HeaderName::from_static("x-buildkite-token");

pub(super) fn preset() -> Preset {
    let family = Family::Custom(Custom {
        verify,
        has_timestamp: true,
        sign: Some(sign),
    });
    Preset {
        tolerance_secs: Some(300),
        kept: vec![HeaderName::from_static("x-buildkite-event")],
        ..Preset::new("buildkite", family, Identify::at("sha256", Some("json:/event")))
    }
}

/// Signature mode.
fn signature() -> Hmac {
    Hmac {
        signature: Signature::pairs("x-buildkite-signature", ',', Some("timestamp"), &["signature"], Encoding::Hex),
        signed: Template::of("{timestamp}.{body}"),
        algorithm: Algorithm::Sha256,
        timestamp: Some(Timestamp::in_signature()),
        secret: SecretEncoding::Raw,
    }
}

/// The signature where the webhook sends one, else the token.
fn verify(creds: &Credentials, req: &Request, clock: Clock) -> Result<(), VerifyError> {
    if req.headers.contains_key(SIGNATURE) {
        signature().verify(&creds.secrets, req, creds, clock)
    } else if req.headers.contains_key(TOKEN) {
        Token::header("x-buildkite-token").verify(&creds.secrets, req)
    } else {
        Err(VerifyError::MissingHeader(SIGNATURE.to_string()))
    }
}

/// Signs in signature mode.
fn sign(signer: &Signer, _: &Credentials, req: &Request, _: &Identity, now_unix: i64) -> Signed {
    match signer {
        Signer::Secret(key) => signature().sign(key, req, &Credentials::default(), now_unix),
        Signer::Private { .. } => Signed::default(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use http::{HeaderMap, HeaderValue, Uri};

    use crate::request::{Credentials, Request};
    use crate::{Identity, Key, Scheme, Signer, VerifyError};

    fn creds() -> Credentials {
        Credentials::secrets(vec![Key::new(b"buildkite-token".to_vec())])
    }

    #[test]
    fn token_mode_is_the_token_itself() {
        let scheme = Scheme::named("buildkite").unwrap();
        let uri = Uri::from_static("/webhooks/buildkite");
        let body = br#"{"event":"ping"}"#;
        let mut headers = HeaderMap::new();
        headers.insert("x-buildkite-token", HeaderValue::from_static("buildkite-token"));
        let req = Request::post(&uri, &headers, body);
        assert!(scheme.verify_request(&creds(), &req, 1_700_000_000, 300, None).is_ok());
        headers.insert("x-buildkite-token", HeaderValue::from_static("another-token"));
        let req = Request::post(&uri, &headers, body);
        assert!(matches!(
            scheme.verify_request(&creds(), &req, 1_700_000_000, 300, None),
            Err(VerifyError::Mismatch)
        ));
        let none = HeaderMap::new();
        let req = Request::post(&uri, &none, body);
        assert!(matches!(
            scheme.verify_request(&creds(), &req, 1_700_000_000, 300, None),
            Err(VerifyError::MissingHeader(_))
        ));
    }

    #[test]
    fn signs_in_signature_mode() {
        let scheme = Scheme::named("buildkite").unwrap();
        let uri = Uri::from_static("/webhooks/buildkite");
        let body = br#"{"event":"build.finished"}"#;
        let empty = HeaderMap::new();
        let identity = Identity {
            event_id: String::new(),
            event_type: None,
        };
        let signer = Signer::Secret(Key::new(b"buildkite-token".to_vec()));
        let signed = scheme
            .sign_request(&signer, &creds(), &Request::post(&uri, &empty, body), &identity, 1_700_000_000)
            .unwrap();
        let mut headers = HeaderMap::new();
        for (name, value) in signed.headers {
            headers.insert(name, HeaderValue::from_str(&value).unwrap());
        }
        assert!(headers["x-buildkite-signature"].to_str().unwrap().starts_with("timestamp=1700000000,signature="));
        let req = Request::post(&uri, &headers, body);
        assert!(scheme.verify_request(&creds(), &req, 1_700_000_000, 300, None).is_ok());
        assert!(matches!(
            scheme.verify_request(&creds(), &req, 1_700_000_301, 300, None),
            Err(VerifyError::Timestamp { .. })
        ));
    }
}
