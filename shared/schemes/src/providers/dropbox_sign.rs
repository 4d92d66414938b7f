//! Dropbox Sign (formerly HelloSign) callbacks: the signature is inside the event, `event.event_hash` = hex
//! HMAC-SHA256(API key, `event_time` + `event_type`); it covers nothing else, and `event_time` keeps its value over
//! ~3 days of retries, so no freshness is checked. The event is the `json` field of a multipart/form-data POST
//! (or the whole body when it is application/json). Every callback must be answered `Hello API Event Received`
//! (text/plain, 200), the `callback_test` sent when the URL is set too (that one is not stored). No id is sent and
//! the hash covers only time and type: the id is the hex SHA-256 of what is signed (`event_time`, `event_type`)
//! with what the event is about, read as JSON values (see [`event_id`]); the type `event_type`.
//! <https://developers.hellosign.com/docs/events/walkthrough/>
//! <https://developers.hellosign.com/docs/events/overview/> (the API object each event type carries)

use serde_json::Value;

use crate::families::{Custom, Family, Signer};
use crate::providers::{Example, Identify, Preset};
use crate::request::{Answer, Credentials, Identified, Request, Signed};
use crate::clock::Clock;
use crate::encoding::{decode, encode, Encoding};
use crate::errors::{IdError, VerifyError};
use crate::identity::Identity;
use crate::mac::{mac, verify_mac, Algorithm};

const RECEIVED: &str = "Hello API Event Received";

pub(super) fn preset() -> Preset {
    let family = Family::Custom(Custom {
        verify,
        has_timestamp: false,
        sign: Some(sign),
    });
    Preset {
        after: Some(callback_test),
        answer: Some(|_| Answer::text(RECEIVED)),
        resendable: true,
        // The event in the `json` field of a multipart/form-data POST; `sign` writes its `event_hash`.
        example: Some(Example {
            body: "------DropboxSignBoundary7MA4YWxkTrZu0gW\r\n\
                   Content-Disposition: form-data; name=\"json\"\r\n\r\n\
                   {\"event\":{\"event_time\":\"{now}\",\"event_type\":\"{type}\",\"event_metadata\":{\
                   \"related_signature_id\":null,\"reported_for_account_id\":\"63522885f9261e2b04eea043933ee7313eb674fd\",\
                   \"reported_for_app_id\":null,\"event_message\":null}},\"signature_request\":{\
                   \"signature_request_id\":\"fa5c8a0b0f492d768749333ad6fcc214c111e967\",\"title\":\"NDA\",\
                   \"is_complete\":false,\"has_error\":false,\"test_mode\":true}}\r\n\
                   ------DropboxSignBoundary7MA4YWxkTrZu0gW--\r\n",
            content_type: "multipart/form-data; boundary=----DropboxSignBoundary7MA4YWxkTrZu0gW",
            headers: &[],
        }),
        ..Preset::new("dropbox-sign", family, Identify::Custom(identify))
    }
}

/// The event's JSON bytes: the multipart field `json`, or the body.
fn event_json<'a>(req: &Request<'a>) -> Option<&'a [u8]> {
    let content_type = req.header("content-type").unwrap_or("");
    if !content_type
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("multipart/form-data")
    {
        return Some(req.body);
    }
    let boundary = content_type.split(';').find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        k.eq_ignore_ascii_case("boundary").then(|| v.trim().trim_matches('"'))
    })?;
    multipart_field(req.body, boundary, "json")
}

/// The first part named `name` of a multipart/form-data body.
fn multipart_field<'a>(body: &'a [u8], boundary: &str, name: &str) -> Option<&'a [u8]> {
    if boundary.is_empty() || boundary.len() > 70 {
        return None;
    }
    let delimiter = format!("--{boundary}");
    let wanted = format!("name=\"{name}\"");
    let mut at = find(body, delimiter.as_bytes(), 0)? + delimiter.len();
    loop {
        let rest = body.get(at..)?;
        if rest.starts_with(b"--") {
            return None; // the closing delimiter
        }
        let start = at + rest.strip_prefix(b"\r\n").map_or(0, |_| 2);
        let next = find(body, format!("\r\n{delimiter}").as_bytes(), start)?;
        let part = body.get(start..next)?;
        let split = find(part, b"\r\n\r\n", 0)?;
        let headers = String::from_utf8_lossy(part.get(..split)?);
        let named = headers.lines().any(|line| {
            let line = line.to_ascii_lowercase();
            line.starts_with("content-disposition:")
                && line.split(';').any(|p| p.trim() == wanted.to_ascii_lowercase())
        });
        if named {
            return part.get(split + 4..);
        }
        at = next + 2 + delimiter.len();
    }
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

/// `event_time`, `event_type` and `event_hash` of the event, as text.
fn event_fields(json: &[u8]) -> Option<(String, String, String)> {
    let value: Value = serde_json::from_slice(json).ok()?;
    let event = value.get("event")?;
    let text = |name: &str| match event.get(name)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    Some((text("event_time")?, text("event_type")?, text("event_hash")?))
}

fn verify(creds: &Credentials, req: &Request, _: Clock) -> Result<(), VerifyError> {
    let json = event_json(req).ok_or_else(|| VerifyError::MissingHeader("form json".to_owned()))?;
    let (time, kind, hash) = event_fields(json)
        .ok_or_else(|| VerifyError::MissingHeader("json /event/event_hash".to_owned()))?;
    let candidates: Vec<Vec<u8>> = decode(Encoding::Hex, &hash).into_iter().collect();
    verify_mac(
        Algorithm::Sha256,
        &creds.secrets,
        &[time.as_bytes(), kind.as_bytes()],
        &candidates,
        &http::HeaderName::from_static("event_hash"),
    )
}

/// `callback_test`, sent when the callback URL is set: answered, not stored.
fn callback_test(req: &Request, _: &Credentials) -> Option<Answer> {
    let (_, kind, _) = event_fields(event_json(req)?)?;
    (kind == "callback_test").then(|| Answer::text(RECEIVED))
}

fn identify(req: &Request) -> Result<Identified, IdError> {
    let json = event_json(req).ok_or_else(|| IdError::Missing("form json".to_owned()))?;
    let (time, kind, _) = event_fields(json).ok_or_else(|| IdError::Missing("json /event/event_type".to_owned()))?;
    let value: Value = serde_json::from_slice(json).map_err(|_| IdError::MalformedBody)?;
    Ok(Identified::One(Identity {
        event_id: event_id(&value, &time, &kind),
        event_type: Some(kind).filter(|k| !k.is_empty()),
    }))
}

/// Where the event says what it is about: the signer, the account and app it is reported for, and the API
/// object its type carries (a signature request, a template or an account).
const SUBJECT: [&str; 6] = [
    "/event/event_metadata/related_signature_id",
    "/event/event_metadata/reported_for_account_id",
    "/event/event_metadata/reported_for_app_id",
    "/signature_request/signature_request_id",
    "/template/template_id",
    "/account/account_id",
];

/// The hex SHA-256 of the JSON array `[event_time, event_type, ...SUBJECT]` (each a string, or null where the
/// event has none), written compactly.
///
/// `event_hash` signs only `event_time` + `event_type`, and `event_time` is in seconds: that pair alone would make
/// two requests sent in one second one event. The rest of the event is not signed at all, so its bytes cannot be
/// the id either: a hash of them let anyone who saw a callback send it again with a space added, under a new id,
/// forever (nothing is timestamped). Read as values, the subject gives an id that no rewriting of the same
/// callback changes, that Dropbox Sign's retries keep (they keep `event_time`; the objects they carry may have
/// moved on), and that a replayer can change only by naming another subject, which is forging another event: the
/// signature never could tell those apart.
fn event_id(event: &Value, time: &str, kind: &str) -> String {
    let text = |pointer: &str| match event.pointer(pointer) {
        Some(Value::String(s)) => Value::String(s.clone()),
        Some(Value::Number(n)) => Value::String(n.to_string()),
        _ => Value::Null,
    };
    let mut parts = vec![Value::String(time.to_owned()), Value::String(kind.to_owned())];
    parts.extend(SUBJECT.iter().map(|pointer| text(pointer)));
    hex::encode(<sha2::Sha256 as sha2::Digest>::digest(Value::Array(parts).to_string()))
}

/// Writes `event_hash` (and `event_time` where the event has none) into the event, in the multipart field or the
/// JSON body it came in.
fn sign(signer: &Signer, _: &Credentials, req: &Request, _: &Identity, now_unix: i64) -> Signed {
    let Signer::Secret(key) = signer else {
        return Signed::default();
    };
    let Some(json) = event_json(req) else {
        return Signed::default();
    };
    let Ok(mut value) = serde_json::from_slice::<Value>(json) else {
        return Signed::default();
    };
    let Some(event) = value.get_mut("event").and_then(Value::as_object_mut) else {
        return Signed::default();
    };
    let time = match event.get("event_time") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => now_unix.to_string(),
    };
    let kind = event.get("event_type").and_then(Value::as_str).unwrap_or("").to_owned();
    let tag = mac(Algorithm::Sha256, key, &[time.as_bytes(), kind.as_bytes()]);
    event.insert("event_time".to_owned(), Value::String(time));
    event.insert("event_hash".to_owned(), Value::String(encode(Encoding::Hex, &tag)));
    let signed = value.to_string().into_bytes();
    let body = if std::ptr::eq(json, req.body) {
        signed
    } else {
        // Replace the field's bytes inside the multipart body.
        let start = (json.as_ptr() as usize).saturating_sub(req.body.as_ptr() as usize);
        let (Some(head), Some(tail)) = (req.body.get(..start), req.body.get(start + json.len()..)) else {
            return Signed::default();
        };
        [head, &signed, tail].concat()
    };
    Signed {
        headers: Vec::new(),
        body: Some(body),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_json_field_is_found_among_other_parts() {
        let body = b"--b\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nx\r\n--b\r\nContent-Disposition: form-data; name=\"json\"\r\n\r\n{\"a\":1}\r\n--b--\r\n";
        assert_eq!(multipart_field(body, "b", "json"), Some(&b"{\"a\":1}"[..]));
        assert_eq!(multipart_field(body, "b", "missing"), None);
        assert_eq!(multipart_field(b"garbage", "b", "json"), None);
        assert_eq!(multipart_field(b"--b\r\nno headers end", "b", "json"), None);
    }

    #[test]
    fn a_signed_event_verifies_in_either_body() {
        let key = crate::Key::new(b"c4f1a9e27b3d58f6".to_vec());
        let json = br#"{"event":{"event_time":"1700000000","event_type":"signature_request_sent"}}"#;
        let uri = http::Uri::from_static("/");
        let creds = Credentials::secrets(vec![key.clone()]);
        let clock = Clock {
            now_unix: 0,
            tolerance_secs: 0,
        };
        let identity = Identity {
            event_id: "x".to_owned(),
            event_type: None,
        };
        let plain = http::HeaderMap::new();
        let signed = sign(&Signer::Secret(key.clone()), &Credentials::default(), &Request::post(&uri, &plain, json), &identity, 0);
        let body = signed.body.unwrap();
        verify(&creds, &Request::post(&uri, &plain, &body), clock).unwrap();

        let mut multipart = http::HeaderMap::new();
        multipart.insert("content-type", "multipart/form-data; boundary=\"xyz\"".parse().unwrap());
        let mut wrapped = b"--xyz\r\nContent-Disposition: form-data; name=\"json\"\r\n\r\n".to_vec();
        wrapped.extend_from_slice(json);
        wrapped.extend_from_slice(b"\r\n--xyz--\r\n");
        let signed = sign(&Signer::Secret(key), &Credentials::default(), &Request::post(&uri, &multipart, &wrapped), &identity, 0);
        let body = signed.body.unwrap();
        verify(&creds, &Request::post(&uri, &multipart, &body), clock).unwrap();
    }

    /// The vector's application/json delivery: its body, the API key, the event id it expects.
    fn vector_case() -> (String, crate::Key, String) {
        let vector: Value = serde_json::from_str(include_str!("../../tests/vectors/dropbox-sign.json")).unwrap();
        let case = vector["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["headers"][0][1] == "application/json")
            .unwrap();
        let key = crate::Key::new(vector["config"]["secrets"][0].as_str().unwrap().as_bytes().to_vec());
        let id = case["expect"]["event_id"].as_str().unwrap().to_owned();
        (case["body"].as_str().unwrap().to_owned(), key, id)
    }

    /// The id of `body` once it verifies under `key`.
    fn verified_id(body: &[u8], key: &crate::Key) -> String {
        let uri = http::Uri::from_static("/webhooks/dropbox-sign");
        let mut headers = http::HeaderMap::new();
        headers.insert("content-type", "application/json".parse().unwrap());
        let req = Request::post(&uri, &headers, body);
        let clock = Clock {
            now_unix: 0,
            tolerance_secs: 0,
        };
        verify(&Credentials::secrets(vec![key.clone()]), &req, clock).expect("verifies");
        let Identified::One(identity) = identify(&req).unwrap() else {
            panic!("one event")
        };
        identity.event_id
    }

    /// GIVEN a Dropbox Sign callback (the vector), whose `event_hash` signs only `event_time` + `event_type`
    /// WHEN it is sent again rewritten without the key: spaced out, its keys reordered, an unsigned field changed
    /// THEN every rewriting verifies and is the same event, the vector's id; while the same signed pair about
    /// another signature request or another signer (two events in one second) is another event.
    #[test]
    fn a_rewritten_callback_is_the_same_event_and_another_subject_is_not() {
        let (body, key, expected) = vector_case();
        assert_eq!(verified_id(body.as_bytes(), &key), expected);
        let value: Value = serde_json::from_str(&body).unwrap();
        let spaced = serde_json::to_string_pretty(&value).unwrap();
        let reordered = {
            let Value::Object(map) = &value else { panic!("an object") };
            let mut pairs: Vec<String> = map.iter().map(|(k, v)| format!("{}:{v}", Value::from(k.as_str()))).collect();
            pairs.reverse();
            format!("{{{}}}", pairs.join(","))
        };
        let mut retitled = value.clone();
        retitled["signature_request"]["title"] = Value::from("Another title");
        retitled["unsigned"] = Value::from(true);
        for (what, variant) in [("spaced out", spaced), ("keys reordered", reordered), ("unsigned fields changed", retitled.to_string())] {
            assert_ne!(variant, body, "{what}: not a rewriting");
            assert_eq!(verified_id(variant.as_bytes(), &key), expected, "{what}: another event");
        }
        let mut other_request = value.clone();
        other_request["signature_request"]["signature_request_id"] = Value::from("0000000000000000000000000000000000000001");
        let mut other_signer = value.clone();
        other_signer["event"]["event_metadata"]["related_signature_id"] = Value::from("00000000000000000000000000000002");
        for (what, other) in [("another signature request", other_request), ("another signer", other_signer)] {
            assert_ne!(verified_id(other.to_string().as_bytes(), &key), expected, "{what}: the same event");
        }
    }
}
