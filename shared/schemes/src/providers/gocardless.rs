//! GoCardless: `Webhook-Signature` = hex HMAC-SHA256 of the raw body, keyed with the webhook endpoint's secret. No
//! timestamp is signed. One request carries `events[]` (any mix of resources), always split into one stored event
//! per item: the id is the item's `id`, the type `resource_type.action` (`payments.confirmed`). GoCardless asks
//! for 498 on a bad signature; the receiver's refusal status is its own (401).
//! <https://developer.gocardless.com/getting-started/api/staying-up-to-date-with-webhooks>

use serde_json::value::RawValue;

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Example, Identify, Preset, MAX_BATCH_ITEMS};
use crate::request::{Identified, Item, Request};
use crate::encoding::Encoding;
use crate::errors::IdError;
use crate::identity::{valid_id, Identity};
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("webhook-signature", "", Encoding::Hex),
        Algorithm::Sha256,
    ));
    Preset {
        // One `payments.confirmed` event in its `events` array.
        example: Some(Example {
            body: r#"{"events":[{"id":"{id}","created_at":"2026-01-01T00:13:20.000Z","resource_type":"payments","action":"confirmed","links":{"payment":"PM01JG6V5A1B","organisation":"OR000INBOX0001"},"details":{"origin":"gocardless","cause":"payment_confirmed","description":"Payment was confirmed as collected."},"metadata":{}}],"meta":{"webhook_id":"WB01JG6V8A1B"}}"#,
            content_type: "application/json",
            headers: &[],
        }),
        ..Preset::new("gocardless", family, Identify::Custom(identify))
    }
}

/// `{"events": [...], "meta": {...}}`: one event per element, stored as the element's bytes.
fn identify(req: &Request) -> Result<Identified, IdError> {
    #[derive(serde::Deserialize)]
    struct Delivery<'a> {
        #[serde(borrow)]
        events: Vec<&'a RawValue>,
    }
    #[derive(serde::Deserialize)]
    struct Event {
        id: Option<String>,
        resource_type: Option<String>,
        action: Option<String>,
    }
    let text = std::str::from_utf8(req.body).map_err(|_| IdError::MalformedBody)?;
    let delivery: Delivery =
        serde_json::from_str(text).map_err(|_| IdError::Missing("json /events".to_owned()))?;
    if delivery.events.is_empty() {
        return Err(IdError::Missing("json /events holds no events".to_owned()));
    }
    if delivery.events.len() > MAX_BATCH_ITEMS {
        return Err(IdError::Invalid(format!(
            "more than {MAX_BATCH_ITEMS} events in one delivery"
        )));
    }
    let mut items = Vec::with_capacity(delivery.events.len());
    for (i, raw) in delivery.events.into_iter().enumerate() {
        let event: Event = serde_json::from_str(raw.get()).map_err(|_| IdError::MalformedBody)?;
        let place = format!("item {i}: json /id");
        let event_id = valid_id(&place, event.id.ok_or_else(|| IdError::Missing(place.clone()))?)?;
        let event_type = match (event.resource_type, event.action) {
            (Some(resource), Some(action)) if !resource.is_empty() && !action.is_empty() => {
                Some(format!("{resource}.{action}"))
            }
            _ => None,
        };
        items.push(Item {
            identity: Identity { event_id, event_type },
            payload: raw.get().as_bytes().to_vec(),
        });
    }
    Ok(Identified::Batch(items))
}
