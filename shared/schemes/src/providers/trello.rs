//! Trello: `X-Trello-Webhook: <base64 HMAC-SHA1 of body + callbackURL>`, keyed with the app's OAuth1 secret as
//! text; the callbackURL is the configured `url`, exactly as registered. Trello signs the text as a "binary"
//! string, not UTF-8: each UTF-16 code unit gives its low byte (the same bytes for ASCII), which no template can
//! say, hence this file's own verify. No timestamp. Id `action.id`, type `action.type`. Trello checks the URL with
//! an unsigned `HEAD` when the webhook is created: answered 200. <https://developer.atlassian.com/cloud/trello/guides/rest-api/webhooks>

use http::{HeaderName, Method};

use crate::families::{Custom, Family, Signer};
use crate::providers::{Identify, Preset};
use crate::request::{Answer, Credentials, Request, Signed};
use crate::clock::Clock;
use crate::encoding::Encoding;
use crate::errors::VerifyError;
use crate::identity::Identity;
use crate::mac::Algorithm;

const SIGNATURE: HeaderName = HeaderName::from_static("x-trello-webhook");

pub(super) fn preset() -> Preset {
    let family = Family::Custom(Custom {
        verify,
        has_timestamp: false,
        sign: Some(sign),
    });
    Preset {
        before: Some(head_check),
        // Trello's check is a HEAD, which the GET route answers.
        get: true,
        needs_url: true,
        ..Preset::new("trello", family, Identify::at("json:/action/id", Some("json:/action/type")))
    }
}

/// The creation check: `HEAD` on the callback URL, answered 200 with nothing stored.
fn head_check(req: &Request, _: &Credentials) -> Option<Result<Answer, VerifyError>> {
    (*req.method == Method::HEAD).then(|| Ok(Answer::empty(200)))
}

/// Text as Trello's signer sees it: the low byte of each UTF-16 code unit (bytes that are not UTF-8 as they are).
fn binary(bytes: &[u8]) -> Vec<u8> {
    match std::str::from_utf8(bytes) {
        // Truncating to the low byte is the documented behaviour.
        #[allow(clippy::cast_possible_truncation)]
        Ok(text) => text.encode_utf16().map(|unit| (unit & 0xff) as u8).collect(),
        Err(_) => bytes.to_vec(),
    }
}

fn verify(creds: &Credentials, req: &Request, _: Clock) -> Result<(), VerifyError> {
    let candidates: Vec<Vec<u8>> = crate::headers::header_values(req.headers, &SIGNATURE)?
        .into_iter()
        .filter_map(|value| crate::encoding::decode(Encoding::Base64, value))
        .collect();
    let url = creds
        .url
        .as_deref()
        .ok_or_else(|| VerifyError::MalformedHeader("url (not configured)".to_owned()))?;
    let (body, url) = (binary(req.body), binary(url.as_bytes()));
    crate::mac::verify_mac(Algorithm::Sha1, &creds.secrets, &[&body, &url], &candidates, &SIGNATURE)
}

/// Signs for the configured `url` (else the request's own absolute URL); without either there is nothing to sign.
fn sign(signer: &Signer, creds: &Credentials, req: &Request, _: &Identity, _: i64) -> Signed {
    let Signer::Secret(key) = signer else {
        return Signed::default();
    };
    let url = match (&creds.url, req.uri.scheme()) {
        (Some(url), _) => url.clone(),
        (None, Some(_)) => req.uri.to_string(),
        (None, None) => return Signed::default(),
    };
    let tag = crate::mac::mac(
        Algorithm::Sha1,
        key,
        &[&binary(req.body), &binary(url.as_bytes())],
    );
    Signed {
        headers: vec![(SIGNATURE, crate::encoding::encode(Encoding::Base64, &tag))],
        body: None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use http::{HeaderMap, HeaderValue, Method, Uri};

    use crate::families::Signer;
    use crate::request::{Credentials, Request};
    use crate::{Identity, Key, Scheme};

    #[test]
    fn what_it_signs_it_verifies_and_the_url_is_part_of_it() {
        let scheme = Scheme::named("trello").unwrap();
        let url = "https://hooks.example.com/webhooks/trello?board=x";
        let key = Key::new(b"app-secret".to_vec());
        let creds = Credentials {
            url: Some(url.to_owned()),
            ..Credentials::secrets(vec![key.clone()])
        };
        let body = "{\"action\":{\"id\":\"a1\",\"type\":\"commentCard\",\"data\":{\"text\":\"caf\u{e9} \u{2013} \u{1f680}\"}}}";
        let (absolute, headers): (Uri, HeaderMap) = (url.parse().unwrap(), HeaderMap::new());
        let identity = Identity {
            event_id: "a1".to_owned(),
            event_type: None,
        };
        let outgoing = Request::post(&absolute, &headers, body.as_bytes());
        let signed = scheme
            .sign_request(&Signer::Secret(key), &creds, &outgoing, &identity, 0)
            .unwrap();
        let mut received = HeaderMap::new();
        for (name, value) in signed.headers {
            received.insert(name, HeaderValue::from_str(&value).unwrap());
        }
        let path: Uri = "/webhooks/trello?board=x".parse().unwrap();
        let req = Request {
            method: &Method::POST,
            uri: &path,
            headers: &received,
            body: body.as_bytes(),
            received_ms: 0,
        };
        scheme.verify_request(&creds, &req, 0, 300, None).unwrap();
        let elsewhere = Credentials {
            url: Some("https://hooks.example.com/webhooks/trello".to_owned()),
            ..creds
        };
        assert!(scheme.verify_request(&elsewhere, &req, 0, 300, None).is_err());
    }
}
