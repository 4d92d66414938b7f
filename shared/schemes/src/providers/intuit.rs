//! Intuit (QuickBooks Online): `intuit-signature: <base64 HMAC-SHA256 of the body>`, keyed with the app's
//! Verifier Token as text; no timestamp, no handshake. Since the CloudEvents migration (mandatory in 2026) the
//! body is a JSON array of CloudEvents, possibly of several companies: each item is one event, id `id`, type
//! `type` (`qbo.customer.created.v1`). The legacy body `{"eventNotifications":[{realmId, dataChangeEvent:
//! {entities}}]}` has no ids: each entity is an event with id `realmId:name:id:operation:lastUpdated`, type
//! `name.operation`. <https://developer.intuit.com/app/developer/qbo/docs/develop/webhooks>

use serde_json::value::RawValue;
use serde_json::Value;

use crate::families::{Family, Hmac, Signature};
use crate::providers::{raw_at, Batch, Example, Identify, Preset, MAX_BATCH_ITEMS};
use crate::request::{Identified, Item, Request};
use crate::encoding::Encoding;
use crate::errors::IdError;
use crate::identity::Identity;
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("intuit-signature", "", Encoding::Base64),
        Algorithm::Sha256,
    ));
    Preset {
        // One CloudEvent in the array.
        example: Some(Example {
            body: r#"[{"specversion":"1.0","id":"{id}","source":"intuit.dGVzdC1hcHAtd2ViaG9vay1pbmJveC1zb3VyY2U=","type":"{type}","datacontenttype":"application/json","time":"2025-12-31T23:59:21.179Z","intuitentityid":"58","intuitaccountid":"9341455000000001","data":{}}]"#,
            content_type: "application/json; charset=utf-8",
            headers: &[],
        }),
        ..Preset::new("intuit", family, Identify::Custom(identify))
    }
}

/// The CloudEvents format: the body is the array of events.
const CLOUD_EVENTS: Batch = Batch {
    form: None,
    items: "",
    item: "",
    id: "/id",
    event_type: Some("/type"),
};

fn identify(req: &Request) -> Result<Identified, IdError> {
    let text = std::str::from_utf8(req.body).map_err(|_| IdError::MalformedBody)?;
    if text.trim_start().starts_with('[') {
        CLOUD_EVENTS.split(req)
    } else {
        legacy(text)
    }
}

/// The legacy format: one event per changed entity. Each is stored as a notification of that entity alone,
/// `{"realmId":..,"dataChangeEvent":{"entities":[<the entity as sent>]}}`, so its company stays with it.
fn legacy(text: &str) -> Result<Identified, IdError> {
    let root: &RawValue = serde_json::from_str(text).map_err(|_| IdError::MalformedBody)?;
    let notifications = list(root, "/eventNotifications")?;
    let mut items = Vec::new();
    for (n, notification) in notifications.into_iter().enumerate() {
        let realm = match serde_json::from_str::<Value>(
            raw_at(notification, "/realmId")
                .ok_or_else(|| IdError::Missing(format!("notification {n}: json /realmId")))?
                .get(),
        ) {
            Ok(Value::String(realm)) => realm,
            Ok(Value::Number(realm)) => realm.to_string(),
            _ => return Err(IdError::Missing(format!("notification {n}: json /realmId"))),
        };
        for (e, entity) in list(notification, "/dataChangeEvent/entities")?.into_iter().enumerate() {
            if items.len() == MAX_BATCH_ITEMS {
                return Err(IdError::Invalid(format!("more than {MAX_BATCH_ITEMS} events in one delivery")));
            }
            let value: Value = serde_json::from_str(entity.get()).map_err(|_| IdError::MalformedBody)?;
            let place = format!("notification {n} entity {e}");
            let field = |name: &str| {
                value
                    .get(name)
                    .and_then(Value::as_str)
                    .ok_or_else(|| IdError::Missing(format!("{place}: json /{name}")))
            };
            let (name, id, operation) = (field("name")?, field("id")?, field("operation")?);
            let event_id = crate::identity::valid_id(
                &place,
                format!("{realm}:{name}:{id}:{operation}:{}", field("lastUpdated")?),
            )?;
            let realm_json = serde_json::to_string(&realm).map_err(|_| IdError::MalformedBody)?;
            items.push(Item {
                identity: Identity {
                    event_id,
                    event_type: Some(format!("{name}.{operation}")),
                },
                payload: format!(
                    r#"{{"realmId":{realm_json},"dataChangeEvent":{{"entities":[{}]}}}}"#,
                    entity.get()
                )
                .into_bytes(),
            });
        }
    }
    if items.is_empty() {
        return Err(IdError::Missing("json /eventNotifications holds no entities".to_owned()));
    }
    Ok(Identified::Batch(items))
}

/// The array at `pointer`, its elements' bytes as sent.
fn list<'a>(root: &'a RawValue, pointer: &str) -> Result<Vec<&'a RawValue>, IdError> {
    let array = raw_at(root, pointer).ok_or_else(|| IdError::Missing(format!("json {pointer}")))?;
    serde_json::from_str(array.get()).map_err(|_| IdError::Missing(format!("json {pointer} (an array)")))
}
