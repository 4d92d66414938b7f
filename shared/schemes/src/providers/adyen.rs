//! Adyen (standard webhooks): no signature header; each `notificationItems[].NotificationRequestItem` carries
//! `additionalData.hmacSignature` = base64 HMAC-SHA256, keyed with the hex HMAC key decoded, of
//! `pspReference:originalReference:merchantAccountCode:merchantReference:value:currency:eventCode:success`
//! (missing fields empty). Every item must verify; only those fields are signed, no timestamp. Each item is its
//! own event: Adyen sends no id, so the id is `pspReference:eventCode:success` (Adyen's duplicate key is eventCode
//! with pspReference; a changed `success` is an update), the type `eventCode`. Answered `[accepted]`.
//! <https://docs.adyen.com/development-resources/webhooks/verify-hmac-signatures>

use http::HeaderName;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::families::{Custom, Family, Signer};
use crate::providers::{Example, Identify, Preset, MAX_BATCH_ITEMS};
use crate::request::{Answer, Credentials, Identified, Item, Request, Signed};
use crate::clock::Clock;
use crate::encoding::{decode, encode, Encoding};
use crate::errors::{IdError, VerifyError};
use crate::identity::{valid_id, Identity};
use crate::key::Key;
use crate::mac::{mac, verify_mac, Algorithm};

/// Where the signatures are, for error messages (they are in the body, not in a header).
static PLACE: HeaderName = HeaderName::from_static("notificationitems-hmacsignature");

/// The signed fields, in order; `value` and `currency` are inside `amount`.
const SIGNED: [&str; 8] = [
    "/pspReference",
    "/originalReference",
    "/merchantAccountCode",
    "/merchantReference",
    "/amount/value",
    "/amount/currency",
    "/eventCode",
    "/success",
];

pub(super) fn preset() -> Preset {
    let family = Family::Custom(Custom {
        verify,
        has_timestamp: false,
        sign: Some(sign),
    });
    Preset {
        answer: Some(|_| Answer::text("[accepted]")),
        // One item, as a JSON delivery carries; `sign` writes its `hmacSignature`.
        example: Some(Example {
            body: r#"{"live":"false","notificationItems":[{"NotificationRequestItem":{"additionalData":{"authCode":"033899","cardSummary":"1111"},"amount":{"currency":"EUR","value":1130},"eventCode":"{type}","eventDate":"2026-01-01T01:05:00+01:00","merchantAccountCode":"InboxTestMerchant","merchantReference":"order-1001","paymentMethod":"visa","pspReference":"{id}","reason":"033899:1111:03/2030","success":"true"}}]}"#,
            content_type: "application/json",
            headers: &[],
        }),
        ..Preset::new("adyen", family, Identify::Custom(identify))
    }
}

/// The items of a delivery, each as its raw JSON text; a body without any is malformed.
fn items(body: &[u8]) -> Option<Vec<&RawValue>> {
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow, rename = "notificationItems")]
        items: Vec<Wrapper<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Wrapper<'a> {
        #[serde(borrow, rename = "NotificationRequestItem")]
        item: &'a RawValue,
    }
    let text = std::str::from_utf8(body).ok()?;
    let envelope: Envelope = serde_json::from_str(text).ok()?;
    let items: Vec<&RawValue> = envelope.items.into_iter().map(|w| w.item).collect();
    (!items.is_empty() && items.len() <= MAX_BATCH_ITEMS).then_some(items)
}

/// A field as Adyen writes it into the signed string: a string as is, a number or boolean as its text, else empty.
fn text(item: &Value, pointer: &str) -> String {
    match item.pointer(pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(v @ (Value::Number(_) | Value::Bool(_))) => v.to_string(),
        _ => String::new(),
    }
}

fn signing_string(item: &Value) -> String {
    SIGNED.map(|pointer| text(item, pointer)).join(":")
}

/// The configured secrets are the hex HMAC keys as Adyen shows them; one that is not hex never matches.
fn keys(creds: &Credentials) -> Vec<Key> {
    creds
        .secrets
        .iter()
        .filter_map(|k| hex::decode(k.expose().trim_ascii()).ok())
        .filter(|k| !k.is_empty())
        .map(Key::new)
        .collect()
}

fn verify(creds: &Credentials, req: &Request, _clock: Clock) -> Result<(), VerifyError> {
    let items = items(req.body)
        .ok_or_else(|| VerifyError::MalformedHeader("body (no notificationItems)".to_owned()))?;
    let keys = keys(creds);
    // Every item must carry a signature that matches; the first that does not refuses the delivery.
    for raw in items {
        let item: Value = serde_json::from_str(raw.get())
            .map_err(|_| VerifyError::MalformedHeader("body (an item is not JSON)".to_owned()))?;
        let candidates: Vec<Vec<u8>> = match item.pointer("/additionalData/hmacSignature") {
            Some(Value::String(s)) => decode(Encoding::Base64, s).into_iter().collect(),
            _ => Vec::new(),
        };
        verify_mac(
            Algorithm::Sha256,
            &keys,
            &[signing_string(&item).as_bytes()],
            &candidates,
            &PLACE,
        )?;
    }
    Ok(())
}

/// Signs each item in place (the body is rewritten with its `hmacSignature`s).
fn sign(signer: &Signer, _: &Credentials, req: &Request, _identity: &Identity, _now_unix: i64) -> Signed {
    let Signer::Secret(secret) = signer else {
        return Signed::default();
    };
    let Ok(key) = hex::decode(secret.expose().trim_ascii()).map(Key::new) else {
        return Signed::default();
    };
    let Ok(mut body) = serde_json::from_slice::<Value>(req.body) else {
        return Signed::default();
    };
    if let Some(Value::Array(list)) = body.get_mut("notificationItems") {
        for wrapper in list {
            let Some(item) = wrapper.get_mut("NotificationRequestItem") else {
                continue;
            };
            let tag = mac(Algorithm::Sha256, &key, &[signing_string(item).as_bytes()]);
            if let Some(object) = item.as_object_mut() {
                let extra = object
                    .entry("additionalData")
                    .or_insert_with(|| Value::Object(serde_json::Map::new()));
                if let Some(extra) = extra.as_object_mut() {
                    extra.insert(
                        "hmacSignature".to_owned(),
                        Value::String(encode(Encoding::Base64, &tag)),
                    );
                }
            }
        }
    }
    Signed {
        headers: Vec::new(),
        body: Some(body.to_string().into_bytes()),
    }
}

fn identify(req: &Request) -> Result<Identified, IdError> {
    let items = items(req.body).ok_or_else(|| IdError::Missing("json /notificationItems".to_owned()))?;
    let mut out = Vec::with_capacity(items.len());
    for (i, raw) in items.into_iter().enumerate() {
        let item: Value = serde_json::from_str(raw.get()).map_err(|_| IdError::MalformedBody)?;
        let place = format!("item {i}: json /pspReference");
        let psp = text(&item, "/pspReference");
        let code = text(&item, "/eventCode");
        let success = text(&item, "/success");
        let event_id = if psp.is_empty() || code.is_empty() {
            return Err(IdError::Missing(place));
        } else {
            valid_id(&place, format!("{psp}:{code}:{success}"))?
        };
        out.push(Item {
            identity: Identity {
                event_id,
                event_type: Some(code),
            },
            payload: raw.get().as_bytes().to_vec(),
        });
    }
    Ok(Identified::Batch(out))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use http::{HeaderMap, Uri};

    use super::*;

    #[test]
    fn signs_what_it_verifies() {
        let secret = Key::new(b"44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056".to_vec());
        let body = br#"{"live":"false","notificationItems":[{"NotificationRequestItem":{"amount":{"currency":"EUR","value":1000},"eventCode":"AUTHORISATION","merchantAccountCode":"M","merchantReference":"r1","pspReference":"P1","success":"true"}},{"NotificationRequestItem":{"amount":{"currency":"EUR","value":5},"eventCode":"REFUND","merchantAccountCode":"M","merchantReference":"r2","originalReference":"P1","pspReference":"P2","success":"false"}}]}"#;
        let (uri, headers) = (Uri::from_static("/"), HeaderMap::new());
        let identity = Identity {
            event_id: String::new(),
            event_type: None,
        };
        let signed = sign(
            &Signer::Secret(secret.clone()),
            &Credentials::default(),
            &Request::post(&uri, &headers, body),
            &identity,
            0,
        );
        let body = signed.body.unwrap();
        let req = Request::post(&uri, &headers, &body);
        let clock = Clock {
            now_unix: 0,
            tolerance_secs: 300,
        };
        assert!(verify(&Credentials::secrets(vec![secret.clone()]), &req, clock).is_ok());
        // Only the named fields are signed: an amount changed is refused, the envelope's `live` is not signed.
        let text = String::from_utf8(body.clone()).unwrap();
        let creds = Credentials::secrets(vec![secret.clone()]);
        for (from, to, verifies) in [
            ("\"value\":1000", "\"value\":1001", false),
            ("\"live\":\"false\"", "\"live\":\"true\"", true),
        ] {
            assert!(text.contains(from));
            let changed = text.replace(from, to);
            let req = Request::post(&uri, &headers, changed.as_bytes());
            assert_eq!(verify(&creds, &req, clock).is_ok(), verifies, "{from} -> {to}");
        }
        let other = Key::new(b"00782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056".to_vec());
        assert!(verify(&Credentials::secrets(vec![other]), &req, clock).is_err());
        let Identified::Batch(items) = identify(&req).unwrap() else {
            panic!("a batch")
        };
        let ids: Vec<_> = items.iter().map(|i| i.identity.event_id.as_str()).collect();
        assert_eq!(ids, ["P1:AUTHORISATION:true", "P2:REFUND:false"]);
    }
}
