//! Twilio: `X-Twilio-Signature` = base64 HMAC-SHA1, keyed with the Auth Token, of the URL Twilio called (`url`,
//! the URL as configured in Twilio) followed by the POST fields sorted by name (equal names by value), name then
//! value. A JSON body is not in the string: Twilio appends `bodySHA256` (hex SHA-256 of the body) to the URL,
//! which must match. Under a Webhooks Rule, `X-Twilio-Webhooks-Signature-Settings: algorithm=HMAC_SHA256` names
//! SHA-256 and the key is the rule's SharedKey secret. Nothing is timestamped; the id is the
//! `I-Twilio-Idempotency-Token` header (the same on retries), no type. The answer is empty TwiML: a text answer
//! to an incoming message would be sent back to its sender as a reply.
//! <https://www.twilio.com/docs/usage/webhooks/webhooks-security>

use http::HeaderName;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::families::{Custom, Family, Signer};
use crate::providers::{Example, Identify, Preset};
use crate::request::{Answer, Credentials, Request, Signed};
use crate::clock::Clock;
use crate::encoding::{decode, encode, Encoding};
use crate::errors::VerifyError;
use crate::identity::Identity;
use crate::mac::{mac, verify_mac, Algorithm};

const SIGNATURE: &str = "x-twilio-signature";
const SETTINGS: &str = "x-twilio-webhooks-signature-settings";
const IDEMPOTENCY: &str = "i-twilio-idempotency-token";

pub(super) fn preset() -> Preset {
    let family = Family::Custom(Custom {
        verify,
        has_timestamp: false,
        sign: Some(sign),
    });
    Preset {
        kept: vec![HeaderName::from_static(IDEMPOTENCY)],
        answer: Some(empty_twiml),
        // The signature covers the body and URL, but neither the id (an unsigned header) nor a time.
        resendable: true,
        // Twilio signs the URL it calls: the source must say which.
        needs_url: true,
        // An incoming SMS, as Twilio posts it to a messaging webhook.
        example: Some(Example {
            body: "ToCountry=US&ToState=CA&SmsMessageSid=SM0a1b2c3d4e5f60718293a4b5c6d7e8f9&NumMedia=0\
                   &SmsSid=SM0a1b2c3d4e5f60718293a4b5c6d7e8f9&SmsStatus=received&Body=Hello+from+Twilio\
                   &FromCountry=US&To=%2B14155550100&NumSegments=1&MessageSid=SM0a1b2c3d4e5f60718293a4b5c6d7e8f9\
                   &AccountSid=AC00000000000000000000000000000000&From=%2B14155550123&ApiVersion=2010-04-01",
            content_type: "application/x-www-form-urlencoded",
            headers: &[],
        }),
        ..Preset::new("twilio", family, Identify::at(&format!("header:{IDEMPOTENCY}"), None))
    }
}

fn empty_twiml(_: &Request) -> Answer {
    Answer {
        content_type: "text/xml; charset=utf-8",
        body: br#"<?xml version="1.0" encoding="UTF-8"?><Response />"#.to_vec(),
        ..Answer::empty(200)
    }
}

fn verify(creds: &Credentials, req: &Request, _: Clock) -> Result<(), VerifyError> {
    let header = HeaderName::from_static(SIGNATURE);
    let signature = crate::headers::header_first(req.headers, &header)?;
    let candidates: Vec<Vec<u8>> = decode(Encoding::Base64, signature).into_iter().collect();
    if candidates.is_empty() {
        return Err(crate::headers::malformed(&header, "not base64"));
    }
    let algorithm = match req.header(SETTINGS) {
        None => Algorithm::Sha1,
        Some(settings) => match setting(settings, "algorithm") {
            None | Some("HMAC_SHA1") => Algorithm::Sha1,
            Some("HMAC_SHA256") => Algorithm::Sha256,
            Some(_) => return Err(crate::headers::malformed(&HeaderName::from_static(SETTINGS), "unknown algorithm")),
        },
    };
    let url = creds
        .url
        .as_deref()
        .ok_or_else(|| VerifyError::MalformedHeader("url (not configured)".to_owned()))?;
    let mut params = Vec::new();
    let url = match raw_query(req, "bodySHA256") {
        Some(hash) => {
            let actual = hex::encode(Sha256::digest(req.body));
            if !bool::from(actual.as_bytes().ct_eq(hash.to_ascii_lowercase().as_bytes())) {
                return Err(VerifyError::Mismatch);
            }
            let joint = if url.contains('?') { '&' } else { '?' };
            format!("{url}{joint}bodySHA256={hash}")
        }
        None => {
            let mut fields = req.form_fields().unwrap_or_default();
            fields.sort();
            fields.dedup();
            for (name, value) in fields {
                params.extend_from_slice(name.as_bytes());
                params.extend_from_slice(value.as_bytes());
            }
            url.to_owned()
        }
    };
    // Twilio's SDKs accept the URL with and without the scheme's default port.
    let signed: Vec<Vec<u8>> = [Some(url.clone()), other_port_form(&url)]
        .into_iter()
        .flatten()
        .map(|u| [u.as_bytes(), &params].concat())
        .collect();
    let matched = signed
        .iter()
        .map(|s| verify_mac(algorithm, &creds.secrets, &[s], &candidates, &header).is_ok())
        .fold(false, |any, ok| any | ok);
    if matched {
        Ok(())
    } else {
        Err(VerifyError::Mismatch)
    }
}

/// Signs as Twilio does: the configured URL (with the request's `bodySHA256` where it carries one, for a JSON
/// body) followed by the POST fields sorted by name then value, HMAC-SHA1 under the Auth Token (HMAC-SHA256 where
/// the request's signature settings name it), base64.
fn sign(signer: &Signer, creds: &Credentials, req: &Request, _: &Identity, _: i64) -> Signed {
    let (Signer::Secret(key), Some(url)) = (signer, creds.url.as_deref()) else {
        return Signed::default();
    };
    let algorithm = match req.header(SETTINGS).and_then(|s| setting(s, "algorithm")) {
        Some("HMAC_SHA256") => Algorithm::Sha256,
        _ => Algorithm::Sha1,
    };
    let mut signed = url.as_bytes().to_vec();
    match raw_query(req, "bodySHA256") {
        Some(hash) => {
            let joint = if url.contains('?') { '&' } else { '?' };
            signed.extend_from_slice(format!("{joint}bodySHA256={hash}").as_bytes());
        }
        None => {
            let mut fields = req.form_fields().unwrap_or_default();
            fields.sort();
            fields.dedup();
            for (name, value) in fields {
                signed.extend_from_slice(name.as_bytes());
                signed.extend_from_slice(value.as_bytes());
            }
        }
    }
    let tag = mac(algorithm, key, &[&signed]);
    Signed {
        headers: vec![(HeaderName::from_static(SIGNATURE), encode(Encoding::Base64, &tag))],
        body: None,
    }
}

/// `key=...,algorithm=HMAC_SHA256` -> the value of `name`.
fn setting<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(',').find_map(|part| {
        let (k, v) = part.split_once('=')?;
        (k.trim() == name).then(|| v.trim())
    })
}

/// A query parameter's value as sent (not decoded).
fn raw_query<'a>(req: &Request<'a>, name: &str) -> Option<&'a str> {
    req.uri
        .query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
}

/// The URL with its scheme's default port added, or removed if it names it.
fn other_port_form(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let port = match scheme {
        "https" => "443",
        "http" => "80",
        _ => return None,
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if let Some(host) = authority.strip_suffix(&format!(":{port}")) {
        Some(format!("{scheme}://{host}{tail}"))
    } else if authority.contains(':') {
        None
    } else {
        Some(format!("{scheme}://{authority}:{port}{tail}"))
    }
}
