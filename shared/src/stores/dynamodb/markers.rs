//! The resent-body markers: which event holds a body, per source and type (or a signed nonce: [`Guard`]), so that a
//! body resent under a fresh id, or a second event under one signed delivery, is told apart (docs/DESIGN.md,
//! "Receiving").

use std::time::Duration;

use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};

use super::expressions::Values;
use super::items::{meta_names, n, projection, record_of, s, secs, Fields};
use super::DynamoLedger;
use crate::aws::sdk::sdk_error;
use crate::model::{EventId, EventKey, Guard, NewEvent, Record};
use crate::ports::StoreError;
use crate::time::ms;

impl DynamoLedger {
    /// Takes the marker of `event`'s body or signed nonce (`#body#{source}#{sha256}#{kind}`, `guard.within` long) for
    /// `event`, unless another live event holds it: that event is returned. One conditional put of a small item,
    /// one write unit, beside the event's own put (a transaction of both would bill each twice). The two writes
    /// need no transaction: a marker whose holder has no record (its create failed, or was never made) is taken
    /// over once it is older than [`HOLDER_IN_FLIGHT`]; younger, the holder's create may still land, and a refusing
    /// source answers 503 so its sender retries, while a marking one stores the event unmarked.
    pub(super) async fn hold_body(
        &self,
        event: &NewEvent,
        guard: &Guard,
        now: i64,
    ) -> Result<Option<Record>, StoreError> {
        let marker_pk = body_marker_pk(event, guard);
        let mut stale: Option<String> = None;
        for _ in 0..3 {
            let mut values = Values::default()
                .n(":now_secs", secs(now))
                .s(":mine", event.key.event_id.as_str());
            let mut condition =
                "attribute_not_exists(pk) OR expires_at <= :now_secs OR event_id = :mine".to_owned();
            if let Some(holder) = &stale {
                values = values.s(":stale", holder.as_str());
                condition.push_str(" OR event_id = :stale");
            }
            let result = self
                .client
                .put_item()
                .table_name(&self.table)
                .item("pk", AttributeValue::S(marker_pk.clone()))
                .item("event_id", s(event.key.event_id.as_str()))
                .item("written_at", n(now))
                .item("expires_at", n(secs(now.saturating_add(ms(guard.within)))))
                .condition_expression(condition)
                .set_expression_attribute_values(Some(values.0))
                .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
                .send()
                .await;
            let old = match result {
                Ok(_) => return Ok(None),
                Err(e)
                    if e.as_service_error()
                        .is_some_and(PutItemError::is_conditional_check_failed_exception) =>
                {
                    match e.into_service_error() {
                        PutItemError::ConditionalCheckFailedException(c) => c.item,
                        _ => None,
                    }
                }
                Err(e) => return Err(sdk_error(e)),
            };
            // A store that does not return the refusing item: ask again.
            let Some(old) = old else { continue };
            let f = Fields(&old);
            let holder = f.s("event_id")?.to_owned();
            let id = EventId::parse(&holder).map_err(|_| f.corrupt("event_id", "is not an event id"))?;
            if let Some(found) = self.meta(&EventKey::new(event.key.source.clone(), id)).await? {
                if !found.is_expired(now) && guard.held_by(&found) {
                    return Ok(Some(found));
                }
            } else if now.saturating_sub(f.opt_n("written_at")?.unwrap_or(0)) < ms(HOLDER_IN_FLIGHT) {
                return if guard.refuses {
                    Err(StoreError::Busy)
                } else {
                    Ok(None)
                };
            }
            stale = Some(holder);
        }
        Err(StoreError::Unavailable(format!(
            "the body marker of {} was refused but nothing stands in the way",
            event.key
        )))
    }

    /// The record of `key` without its body, read consistently (the metadata's read units only).
    pub(super) async fn meta(&self, key: &EventKey) -> Result<Option<Record>, StoreError> {
        let out = self
            .get_item(key)
            .consistent_read(true)
            .projection_expression(projection())
            .set_expression_attribute_names(Some(meta_names()))
            .send()
            .await
            .map_err(sdk_error)?;
        out.item.as_ref().map(record_of).transpose()
    }
}

/// How long a body marker whose holder has no record yet is taken to have that holder's create in flight.
const HOLDER_IN_FLIGHT: Duration = Duration::from_secs(60);

/// The item that remembers which event holds a body, per source and type (or a signed nonce, under
/// [`Guard::SIGNED_NONCE`]): `#` starts no event's `pk`.
fn body_marker_pk(event: &NewEvent, guard: &Guard) -> String {
    format!("#body#{}#{}#{}", event.key.source, guard.sha256, guard.kind)
}
