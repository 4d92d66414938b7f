//! HubSpot (signature v3): `X-HubSpot-Signature-v3` is the base64 HMAC-SHA256, under the app's client secret, of
//! the method, requestUri, body and `X-HubSpot-Request-Timestamp` (Unix milliseconds, refused past 5 minutes)
//! concatenated. requestUri is the full URL HubSpot called: `url`, the app's target URL. (The docs decode `%3A
//! %2F %3F %40 %21 %24 %27 %28 %29 %2A %2C %3B` in it before signing; the official SDKs leave that to the caller:
//! write those characters decoded in `url`.) The body is an array of up to 100 events; HubSpot documents `eventId`
//! as not guaranteed unique and `attemptNumber` changes per retry, so each event's id is
//! `portalId:subscriptionId:objectId:eventId`, its type `subscriptionType`. The v1/v2 `X-HubSpot-Signature` is
//! ignored. No handshake, no required answer.
//! <https://developers.hubspot.com/docs/apps/developer-platform/build-apps/authentication/request-validation>

use http::HeaderName;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::families::{Family, Hmac, SecretEncoding, Signature, Template, Timestamp};
use crate::providers::{Example, Identify, Preset, MAX_BATCH_ITEMS};
use crate::request::{Identified, Item, Request};
use crate::encoding::Encoding;
use crate::errors::IdError;
use crate::identity::{valid_id, Identity};
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac {
        signature: Signature::header("x-hubspot-signature-v3", "", Encoding::Base64),
        signed: Template::of("{method}{url}{body}{timestamp}"),
        algorithm: Algorithm::Sha256,
        timestamp: Some(Timestamp::header("x-hubspot-request-timestamp").millis()),
        secret: SecretEncoding::Raw,
    });
    Preset {
        tolerance_secs: Some(300),
        kept: vec![HeaderName::from_static("x-hubspot-request-timestamp")],
        // One event in the array. `eventId` is an integer, which an id such as `evt_...` cannot be: the time
        // stands in for it, so each sample is a new event.
        example: Some(Example {
            body: r#"[{"eventId":{now},"subscriptionId":12345,"portalId":62515,"appId":54321,"occurredAt":{now_ms},"subscriptionType":"{type}","attemptNumber":0,"objectId":123,"changeSource":"CRM_UI","changeFlag":"NEW"}]"#,
            content_type: "application/json",
            headers: &[],
        }),
        ..Preset::new("hubspot", family, Identify::Custom(identify))
    }
}

/// One event per element of the body's array, each under its composite id.
fn identify(req: &Request) -> Result<Identified, IdError> {
    let text = std::str::from_utf8(req.body).map_err(|_| IdError::MalformedBody)?;
    let elements: Vec<&RawValue> = serde_json::from_str(text).map_err(|_| IdError::MalformedBody)?;
    if elements.is_empty() {
        return Err(IdError::Missing("json (an array of events) holds none".to_owned()));
    }
    if elements.len() > MAX_BATCH_ITEMS {
        return Err(IdError::Invalid(format!(
            "more than {MAX_BATCH_ITEMS} events in one delivery"
        )));
    }
    let mut items = Vec::with_capacity(elements.len());
    for (i, element) in elements.into_iter().enumerate() {
        let event: Value = serde_json::from_str(element.get()).map_err(|_| IdError::MalformedBody)?;
        let field = |name: &str| match event.get(name) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        let place = format!("item {i}: json /eventId");
        let event_id = field("eventId").ok_or_else(|| IdError::Missing(place.clone()))?;
        let part = |name: &str| field(name).unwrap_or_default();
        let composite = format!(
            "{}:{}:{}:{event_id}",
            part("portalId"),
            part("subscriptionId"),
            part("objectId")
        );
        items.push(Item {
            identity: Identity {
                event_id: valid_id(&place, composite)?,
                event_type: field("subscriptionType").filter(|t| !t.is_empty()),
            },
            payload: element.get().as_bytes().to_vec(),
        });
    }
    Ok(Identified::Batch(items))
}
