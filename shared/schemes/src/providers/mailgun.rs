//! Mailgun signs inside the JSON body: `signature.signature` = hex HMAC-SHA256 of `{timestamp}{token}` (the
//! `signature` object's own fields) with the webhook signing key; a subaccount's event adds `parent-signature`,
//! the same with the parent account's key, and either may match. The event itself is not signed. The timestamp
//! check is optional in Mailgun's docs ("not too aggressive"): 15 minutes, the default of Mailgun's own SDK. The
//! id is `event-data.id` with `event-data.timestamp` (Mailgun keeps an id unique within a day only, and retention
//! is longer), the type `event-data.event`. No handshake.
//!
//! Neither the id nor the type is signed: within the tolerance a captured signature block verifies beside any other
//! `event-data`, under a fresh id. What is signed is the `token` ("randomly generated", 50 characters, one per
//! delivery), so the token is the delivery's signed nonce (`Preset::signed_nonce`): the receiver remembers it with
//! the event it came with, and a second event under it is answered as a duplicate of the first and counted as a
//! payload mismatch, as Mailgun advises ("cache the token value locally and not honor any subsequent request with
//! the same token"; docs/DESIGN.md "Receiving"). The same delivery sent again (its retry, the same token and id)
//! stays a plain duplicate of its own id. The id is still not the token: reconciliation finds missed events through
//! the Events API (`shared/src/reconcile/mailgun.rs`), whose items are the `event-data` without the `signature`
//! object, by this same id, so a token id would make every reconciled event a second one beside its webhook; and
//! Mailgun does not say whether a retry (5 min to 4 h apart, over 8 h) keeps its token (Hookdeck's Mailgun
//! reference says the signature object is the same on every retry; a retry under a fresh token is its own id's
//! duplicate all the same).
//! <https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks>
//! <https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/webhook-retries>

use http::HeaderName;
use sha2::{Digest, Sha256};

use crate::families::{Custom, Family, Signer};
use crate::providers::{Identify, Preset};
use crate::request::{Credentials, Identified, Request, Signed};
use crate::clock::Clock;
use crate::encoding::{decode, Encoding};
use crate::errors::{IdError, VerifyError};
use crate::identity::Identity;
use crate::mac::{mac, verify_mac, Algorithm};

pub(super) fn preset() -> Preset {
    let family = Family::Custom(Custom {
        verify,
        has_timestamp: true,
        sign: Some(sign),
    });
    Preset {
        tolerance_secs: Some(900),
        signed_nonce: Some(token),
        ..Preset::new(
            "mailgun",
            family,
            Identify::Custom(identify),
        )
    }
}

/// The body's `signature` object.
#[derive(serde::Deserialize)]
struct Signature {
    timestamp: serde_json::Value,
    token: String,
    signature: Option<String>,
    #[serde(rename = "parent-signature")]
    parent_signature: Option<String>,
}

#[derive(serde::Deserialize)]
struct Body {
    signature: Signature,
}

fn place() -> HeaderName {
    HeaderName::from_static("signature")
}

fn verify(creds: &Credentials, req: &Request, clock: Clock) -> Result<(), VerifyError> {
    let missing = || VerifyError::MissingHeader("json /signature".to_owned());
    let body: Body = serde_json::from_slice(req.body).map_err(|_| missing())?;
    let signature = body.signature;
    // Mailgun writes the timestamp as a string of digits; a number is read the same way.
    let timestamp = match &signature.timestamp {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => n.to_string(),
        _ => return Err(VerifyError::MalformedHeader("json /signature/timestamp".to_owned())),
    };
    if timestamp.is_empty() || !timestamp.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VerifyError::MalformedHeader(
            "json /signature/timestamp (not a unix time)".to_owned(),
        ));
    }
    clock.check_unix(timestamp.parse::<i64>().unwrap_or(i64::MAX))?;
    let candidates: Vec<Vec<u8>> = [signature.signature, signature.parent_signature]
        .into_iter()
        .flatten()
        .filter_map(|s| decode(Encoding::Hex, &s))
        .collect();
    verify_mac(
        Algorithm::Sha256,
        &creds.secrets,
        &[timestamp.as_bytes(), signature.token.as_bytes()],
        &candidates,
        &place(),
    )
}

/// The signature object's `token`: what the signature covers beside the timestamp, one per delivery.
fn token(req: &Request) -> Option<String> {
    serde_json::from_slice::<Body>(req.body)
        .ok()
        .map(|body| body.signature.token)
}

/// Writes the `signature` object into the body (an event-data object is wrapped as Mailgun sends it).
fn sign(signer: &Signer, _: &Credentials, req: &Request, _: &Identity, now_unix: i64) -> Signed {
    let Signer::Secret(key) = signer else {
        return Signed::default();
    };
    let mut body = match serde_json::from_slice::<serde_json::Value>(req.body) {
        Ok(serde_json::Value::Object(map)) if map.contains_key("event-data") => map,
        Ok(event) => serde_json::Map::from_iter([("event-data".to_owned(), event)]),
        Err(_) => return Signed::default(),
    };
    let timestamp = now_unix.to_string();
    // 50 characters, like Mailgun's tokens; unique per body and time.
    let token = hex::encode(Sha256::digest([req.body, timestamp.as_bytes()].concat()))[..50].to_owned();
    let signature = hex::encode(mac(
        Algorithm::Sha256,
        key,
        &[timestamp.as_bytes(), token.as_bytes()],
    ));
    body.insert(
        "signature".to_owned(),
        serde_json::json!({"timestamp": timestamp, "token": token, "signature": signature}),
    );
    Signed {
        headers: Vec::new(),
        body: Some(serde_json::Value::Object(body).to_string().into_bytes()),
    }
}
/// `event-data.id:event-data.timestamp`: both stay the same across Mailgun's retries, and together they do not
/// repeat (an id alone is unique within a day).
fn identify(req: &Request) -> Result<Identified, IdError> {
    let found = crate::json::at_pointers(req.body, &["/event-data/id", "/event-data/timestamp", "/event-data/event"])
        .map_err(|_| IdError::MalformedBody)?;
    let text = |i: usize| match found.get(i).cloned().flatten() {
        Some(crate::json::Leaf::String(s) | crate::json::Leaf::Number(s)) if !s.is_empty() => Some(s),
        _ => None,
    };
    let id = text(0).ok_or_else(|| IdError::Missing("json /event-data/id".to_owned()))?;
    let event_id = match text(1) {
        Some(ts) => crate::identity::valid_id("json /event-data/id:/event-data/timestamp", format!("{id}:{ts}"))?,
        None => crate::identity::valid_id("json /event-data/id", id)?,
    };
    Ok(Identified::One(Identity { event_id, event_type: text(2) }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use http::HeaderMap;
    use serde_json::json;

    use crate::key::Key;
    use crate::scheme::Scheme;

    use super::*;

    const NOW: i64 = 1_718_100_000;

    fn signed(key: &Key, event: &serde_json::Value, now: i64) -> Vec<u8> {
        let (uri, headers) = (http::Uri::from_static("/"), HeaderMap::new());
        let body = event.to_string();
        let identity = Identity {
            event_id: String::new(),
            event_type: None,
        };
        let req = Request::post(&uri, &headers, body.as_bytes());
        sign(
            &Signer::Secret(key.clone()),
            &Credentials::default(),
            &req,
            &identity,
            now,
        )
        .body
        .unwrap()
    }

    /// GIVEN a signed delivery, and its signature block beside another `event-data` (a fresh id), as anyone who saw
    /// the first can send within the tolerance
    /// THEN both verify, under two ids, and both carry the one signed nonce, the token; another delivery another.
    #[test]
    fn a_captured_signature_beside_another_event_brings_the_same_signed_nonce() {
        let scheme = Scheme::named("mailgun").unwrap();
        let key = Key::new(b"f7c1a0e2b9d84c3a5e6f70812a3b4c5d-5e6f7a8b-9c0d1e2f".to_vec());
        let creds = Credentials::secrets(vec![key.clone()]);
        let first = signed(
            &key,
            &json!({"id": "e1", "timestamp": 1718099998.4, "event": "delivered"}),
            NOW,
        );
        let mut forged: serde_json::Value = serde_json::from_slice(&first).unwrap();
        forged["event-data"] = json!({"id": "e2", "timestamp": 1718099999.1, "event": "unsubscribed"});
        let forged = forged.to_string().into_bytes();
        let (uri, headers) = (http::Uri::from_static("/"), HeaderMap::new());
        let at = |body: &[u8]| {
            let req = Request::post(&uri, &headers, body);
            scheme.verify_request(&creds, &req, NOW, 900, None).unwrap();
            (
                scheme.identify(&headers, body).unwrap().event_id,
                scheme.signed_nonce(&req),
            )
        };
        let token = serde_json::from_slice::<serde_json::Value>(&first).unwrap()["signature"]["token"]
            .as_str()
            .unwrap()
            .to_owned();
        let (first_id, first_nonce) = at(&first);
        let (forged_id, forged_nonce) = at(&forged);
        assert_ne!(first_id, forged_id);
        assert_eq!(first_nonce.as_deref(), Some(token.as_str()));
        assert_eq!(forged_nonce, first_nonce);
        let other = signed(
            &key,
            &json!({"id": "e3", "timestamp": 1718099999.9, "event": "opened"}),
            NOW,
        );
        assert_ne!(at(&other).1, first_nonce);
        // Schemes whose signature covers the body or the id have none.
        let req = Request::post(&uri, &headers, &first);
        assert_eq!(Scheme::Stripe.signed_nonce(&req), None);
    }
}
