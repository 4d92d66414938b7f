//! Microsoft Graph change notifications: no signature; each item of the body's `value` array carries the
//! `clientState` given when subscribing, compared in constant time with the configured secrets (every item must
//! match). Subscribing, Graph first POSTs `?validationToken=...`, answered with the decoded token as text/plain
//! within 10 s (unsigned, never stored; the same for a lifecycle notification URL). Each item is its own event: id
//! the item's optional `id`, else the hex SHA-256 of the item's bytes as received; type `changeType`, or
//! `lifecycleEvent` for a lifecycle notification. Rich notifications' `validationTokens` are not checked here.
//! <https://learn.microsoft.com/en-us/graph/change-notifications-delivery-webhooks>

use serde_json::value::RawValue;
use serde_json::Value;
use sha2::{Digest, Sha256};
use subtle::{Choice, ConstantTimeEq};

use crate::families::{Custom, Family, Signer};
use crate::providers::{Example, Identify, Preset, MAX_BATCH_ITEMS};
use crate::request::{Answer, Credentials, Identified, Item, Request, Signed};
use crate::clock::Clock;
use crate::errors::{IdError, VerifyError};
use crate::identity::{valid_id, Identity};

/// A validation token longer than this is not Graph's (its tokens are a sentence and a request id).
const MAX_TOKEN_LEN: usize = 1024;

pub(super) fn preset() -> Preset {
    let family = Family::Custom(Custom {
        verify,
        has_timestamp: false,
        sign: Some(sign),
    });
    Preset {
        before: Some(validation),
        // One change notification in `value`; `sign` writes its `clientState`.
        example: Some(Example {
            body: r##"{"value":[{"id":"{id}","subscriptionId":"7f105c7d-2dc5-4530-97cd-4e7ae6534c07","subscriptionExpirationDateTime":"2023-11-17T22:13:20.0000000Z","changeType":"{type}","resource":"Users/b2f3c1a0-1111-4222-8333-944455556666/Messages/AAMkAGI2TG93AAA=","resourceData":{"@odata.type":"#Microsoft.Graph.Message","@odata.id":"Users/b2f3c1a0-1111-4222-8333-944455556666/Messages/AAMkAGI2TG93AAA=","id":"AAMkAGI2TG93AAA="},"tenantId":"84bd8158-6d4d-4958-8b9f-9d6445542f95"}]}"##,
            content_type: "application/json; charset=utf-8",
            headers: &[],
        }),
        ..Preset::new("microsoft-graph", family, Identify::Custom(identify))
    }
}

/// The subscription's validation request: echo `validationToken` as text/plain.
fn validation(req: &Request, _: &Credentials) -> Option<Result<Answer, VerifyError>> {
    let token = req.query("validationToken")?;
    Some(if token.is_empty() || token.len() > MAX_TOKEN_LEN {
        Err(VerifyError::MalformedHeader("query validationToken".to_owned()))
    } else {
        Ok(Answer::text(token))
    })
}

/// The `value` array's items, as received.
fn items(body: &[u8]) -> Option<Vec<&RawValue>> {
    #[derive(serde::Deserialize)]
    struct Collection<'a> {
        #[serde(borrow)]
        value: Vec<&'a RawValue>,
    }
    let text = std::str::from_utf8(body).ok()?;
    let collection: Collection = serde_json::from_str(text).ok()?;
    (!collection.value.is_empty()).then_some(collection.value)
}

fn verify(creds: &Credentials, req: &Request, _: Clock) -> Result<(), VerifyError> {
    let items = items(req.body)
        .ok_or_else(|| VerifyError::MalformedHeader("body (not a change notification collection)".to_owned()))?;
    let secrets: Vec<_> = creds.secrets.iter().map(|k| Sha256::digest(k.expose())).collect();
    let mut all = Choice::from(1);
    for item in items {
        #[derive(serde::Deserialize)]
        struct State {
            #[serde(rename = "clientState")]
            client_state: Option<String>,
        }
        let state: State = serde_json::from_str(item.get())
            .map_err(|_| VerifyError::MalformedHeader("body (an item is not an object)".to_owned()))?;
        let presented = Sha256::digest(state.client_state.unwrap_or_default().as_bytes());
        let mut this = Choice::from(0);
        for secret in &secrets {
            this |= secret.as_slice().ct_eq(presented.as_slice());
        }
        all &= this;
    }
    if bool::from(all) && !secrets.is_empty() {
        Ok(())
    } else {
        Err(VerifyError::Mismatch)
    }
}

/// Writes the key as every item's `clientState` (Graph's way of "signing").
fn sign(signer: &Signer, _: &Credentials, req: &Request, _: &Identity, _: i64) -> Signed {
    let Signer::Secret(key) = signer else {
        return Signed::default();
    };
    let Ok(mut body) = serde_json::from_slice::<Value>(req.body) else {
        return Signed::default();
    };
    let state = String::from_utf8_lossy(key.expose()).into_owned();
    if let Some(Value::Array(items)) = body.get_mut("value") {
        for item in items.iter_mut().filter_map(Value::as_object_mut) {
            item.insert("clientState".to_owned(), Value::String(state.clone()));
        }
    }
    Signed {
        headers: Vec::new(),
        body: Some(body.to_string().into_bytes()),
    }
}

fn identify(req: &Request) -> Result<Identified, IdError> {
    let items = items(req.body).ok_or(IdError::MalformedBody)?;
    if items.len() > MAX_BATCH_ITEMS {
        return Err(IdError::Invalid(format!(
            "more than {MAX_BATCH_ITEMS} events in one delivery"
        )));
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let value: Value = serde_json::from_str(item.get()).map_err(|_| IdError::MalformedBody)?;
        let text = |name: &str| value.get(name).and_then(Value::as_str).filter(|s| !s.is_empty());
        let event_id = match text("id") {
            Some(id) => valid_id(&format!("item {i}: json /id"), id.to_owned())?,
            None => hex::encode(Sha256::digest(item.get().as_bytes())),
        };
        out.push(Item {
            identity: Identity {
                event_id,
                event_type: text("changeType").or_else(|| text("lifecycleEvent")).map(str::to_owned),
            },
            payload: item.get().as_bytes().to_vec(),
        });
    }
    Ok(Identified::Batch(out))
}
