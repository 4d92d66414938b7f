//! The transitions, as DynamoDB makes them: every one a conditional `PutItem`/`UpdateItem` on the state it leaves
//! (a batch's creates one `TransactWriteItems`), a refused one answered from the item returned with the refusal.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use bytes::Bytes;

use super::expressions::{
    completed_values, create_values, owned_values, Values, BURIABLE, CLAIM, CLAIMABLE, COMPLETE,
    CREATE_IF_ABSENT, DEAD_UNNOTIFIED, DEAD_UNNOTIFIED_INLINE, DEAD_UNNOTIFIED_KEPT, FAIL, KILL, NOTIFIED,
    OWNED, RELEASE, REPLAY, REPLAYABLE, REPLAYABLE_FORCED, REPLAYABLE_MOVED, REPLAY_MOVED,
};
use super::index::{partition, NEVER_DUE};
use super::items::{digest, meta_names, n, projection, record_of, s, secs, Fields, Item};
use super::{no_attributes, DynamoLedger, Write};
use crate::aws::s3::fresh_key;
use crate::aws::sdk::sdk_error;
use crate::model::EventKey;
use crate::model::{Event, EventId, NewEvent, Origin, Record, Status};
use crate::ports::{Capabilities, Claim, Created, Ledger, MarkDead, Replay, Settled, Settlement, StoreError};
use crate::rules;
use crate::time::ms;

/// Actions in one `TransactWriteItems` at most (DynamoDB's limit).
const TRANSACTION_ITEMS: usize = 100;
/// Bytes in one `TransactWriteItems` at most: DynamoDB's 4 MB, less a margin for what the count below leaves out.
const TRANSACTION_BYTES: usize = 3_500_000;
/// What an item holds beside its body, counted generously (keys, hash, headers, times).
const ITEM_OVERHEAD: usize = 4096;

#[async_trait]
impl Ledger for DynamoLedger {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            claims_in_create: false,
            trusts_announcements: true,
            indexes_every_listing: false,
            keeps_bodies_apart: self.payloads.is_some(),
            eventually_consistent_index: true,
            shared_by_many: false,
        }
    }
    /// An eventually consistent `GetItem` of the record's metadata (half a read unit): a duplicate missed this
    /// way is caught by the create's condition, at the cost of one spare message.
    async fn peek(&self, key: &EventKey) -> Result<Option<Record>, StoreError> {
        let out = self
            .get_item(key)
            .projection_expression(projection())
            .set_expression_attribute_names(Some(meta_names()))
            .send()
            .await
            .map_err(sdk_error)?;
        let Some(item) = out.item else {
            return Ok(None);
        };
        let record = record_of(&item)?;
        Ok((!record.is_expired(self.now())).then_some(record))
    }
    async fn create(&self, event: NewEvent) -> Result<Created, StoreError> {
        self.create_one(event, false, self.now()).await
    }
    /// Created without a sparse-index entry: the message sent ahead of it vouches for it (SQS keeps it until the
    /// settle deletes it).
    async fn create_announced(&self, event: NewEvent) -> Result<Created, StoreError> {
        self.create_one(event, true, self.now()).await
    }
    /// A create claims nothing here: the event waits for its message, whose processor claims it.
    async fn create_claimed(
        &self,
        event: NewEvent,
        _owner: &str,
        _lease: Duration,
    ) -> Result<(Created, Option<Event>), StoreError> {
        Ok((self.create(event).await?, None))
    }
    /// One `TransactWriteItems` for up to 100 items (DynamoDB's limit): all put, or none. A larger batch is written
    /// as consecutive transactions of 100 before the one answer; a crash between two leaves the first ones stored
    /// and the delivery unanswered, and the sender's retry finds them as duplicates and stores the rest, so
    /// nothing acknowledged is lost and nothing is stored twice. Items look for no resent bodies: a batch's scheme
    /// signs the ids with the bodies.
    async fn create_batch(&self, events: Vec<NewEvent>) -> Result<Vec<Created>, StoreError> {
        let now = self.now();
        let mut answers = Vec::with_capacity(events.len());
        // A transaction holds 100 items and 4 MB: each item is counted at its uncompressed body (an upper bound of
        // what it stores inline; a body over the inline limit goes to S3 and leaves a key) and a margin.
        let (mut start, mut bytes) = (0, 0);
        for (i, event) in events.iter().enumerate() {
            let size = event.payload.len().min(self.inline_limit) + ITEM_OVERHEAD;
            if i > start && (i - start == TRANSACTION_ITEMS || bytes + size > TRANSACTION_BYTES) {
                answers.extend(self.create_together(&events[start..i], now).await?);
                (start, bytes) = (i, 0);
            }
            bytes += size;
        }
        if start < events.len() {
            answers.extend(self.create_together(&events[start..], now).await?);
        }
        Ok(answers)
    }
    async fn claim(&self, key: &EventKey, owner: &str, lease: Duration) -> Result<Claim, StoreError> {
        let now = self.now();
        let until = now.saturating_add(ms(lease));
        let values = Values::default()
            .status(":received", Status::Received)
            .status(":failed", Status::Failed)
            .status(":processing", Status::Processing)
            .s(":owner", owner)
            .n(":until", until)
            .n(":zero", 0)
            .n(":one", 1)
            .n(":now", now)
            .n(":due_by", rules::failed_claimable_by(now));
        match self.update(key, CLAIM, CLAIMABLE, values, true).await? {
            Write::Applied(Some(item)) => {
                let record = record_of(&item)?;
                crate::sync::lock(&self.leases).insert(owner.to_owned(), key.clone());
                match self.payload(&item).await {
                    Ok(body) => Ok(Claim::Claimed(Box::new(record.with_payload(body)))),
                    // The claim stands: the caller holds the lease and settles it DEAD.
                    Err(StoreError::Corrupt(why)) => Ok(Claim::Corrupt(Box::new(record), why)),
                    Err(e) => Err(e),
                }
            }
            Write::Applied(None) => Err(no_attributes(key)),
            Write::Refused(old) => Ok(rules::refused_claim(
                old.as_ref().map(record_of).transpose()?.as_ref(),
                now,
            )),
        }
    }
    async fn settle(
        &self,
        key: &EventKey,
        owner: &str,
        settlement: Settlement,
    ) -> Result<Settled, StoreError> {
        let now = self.now();
        let owned = owned_values(owner, now);
        // Only a completion owes its body anything more, and only where the settle lands.
        let completing = matches!(settlement, Settlement::Completed { .. });
        let (update, values) = match settlement {
            Settlement::Completed { retention } => (COMPLETE, completed_values(owner, retention, now)),
            Settlement::Failed { error, delay } => {
                let next = now.saturating_add(ms(delay));
                (
                    FAIL,
                    owned
                        .status(":failed", Status::Failed)
                        .s(":error", error)
                        .n(":next", next)
                        .s(":open", partition("open", &key.pk()))
                        .n(":due", self.due.failed(next)),
                )
            }
            Settlement::Dead { error } => (
                KILL,
                owned
                    .status(":dead", Status::Dead)
                    .s(":error", error)
                    .s(":dead_shard", partition("dead", &key.pk()))
                    .n(":due", self.due.dead(now)),
            ),
        };
        let settled = match self.update(key, update, OWNED, values, false).await? {
            Write::Applied(_) => Settled::Done,
            Write::Refused(_) => Settled::LeaseLost,
        };
        self.let_go(owner);
        if !(completing && settled == Settled::Done) {
            self.forget_claim(owner);
        }
        Ok(settled)
    }
    /// A body in S3 starts its retention: the object this claim read (an inline body asks nothing of S3, and an
    /// object of any older layout is counted down all the same) is copied onto itself tagged, for the bucket's
    /// lifecycle rule, and then the record leaves the `body#` partition its claim put it in. A crash or a failure
    /// before that leaves it there, and the sweeper finishes it.
    async fn completed(&self, key: &EventKey, owner: &str) -> Result<(), StoreError> {
        let (Some(s3), Some(body)) = (&self.payloads, self.forget_claim(owner)) else {
            return Ok(());
        };
        s3.count_down(&body).await?;
        self.body_counting(key, &body).await
    }
    async fn release(&self, key: &EventKey, owner: &str) -> Result<Settled, StoreError> {
        self.forget_claim(owner);
        self.let_go(owner);
        let now = self.now();
        let values = Values::default()
            .status(":processing", Status::Processing)
            .s(":owner", owner)
            .n(":now", now);
        Ok(match self.update(key, RELEASE, OWNED, values, false).await? {
            Write::Applied(_) => Settled::Done,
            Write::Refused(_) => Settled::LeaseLost,
        })
    }
    async fn mark_dead(&self, key: &EventKey, reason: &str) -> Result<MarkDead, StoreError> {
        let now = self.now();
        let values = Values::default()
            .status(":dead", Status::Dead)
            .s(":error", reason)
            .n(":now", now)
            .s(":dead_shard", partition("dead", &key.pk()))
            .n(":due", self.due.dead(now))
            .status(":received", Status::Received)
            .status(":processing", Status::Processing)
            .status(":failed", Status::Failed);
        match self.update(key, KILL, BURIABLE, values, true).await? {
            Write::Applied(Some(item)) => {
                // A body in S3 never claimed is still pending: kept at once. The alarm's record waits for it too
                // (`mark_notified`), so a failure here is finished there.
                if let (Some(s3), Some(body)) = (&self.payloads, Fields(&item).opt_s("payload_s3_key")?) {
                    if let Err(e) = s3.keep(body).await {
                        tracing::warn!(source = %key.source, event_id = %key.event_id, error = %e,
                            "the dead event's body is not kept yet; its alarm's record will keep it");
                    }
                }
                Ok(MarkDead::NewlyDead(Box::new(record_of(&item)?)))
            }
            Write::Applied(None) => Err(no_attributes(key)),
            Write::Refused(old) => Ok(rules::refused_mark_dead(
                old.as_ref().map(record_of).transpose()?.as_ref(),
                now,
            )),
        }
    }
    async fn mark_notified(&self, key: &EventKey) -> Result<(), StoreError> {
        let values = Values::default()
            .status(":dead", Status::Dead)
            .n(":now", self.now())
            .n(":never", NEVER_DUE);
        let Some(s3) = &self.payloads else {
            // Refused: not dead, already notified, or gone; as embedded, nothing to do then.
            self.update(key, NOTIFIED, DEAD_UNNOTIFIED, values, false).await?;
            return Ok(());
        };
        // A body in S3 is kept before the alarm is recorded: until then the record stays due in the sparse index
        // and the sweeper comes back. Asked in the condition, so a dead event with its body inline pays nothing more.
        let old = match self
            .update(key, NOTIFIED, DEAD_UNNOTIFIED_INLINE, values.clone(), false)
            .await?
        {
            Write::Applied(_) | Write::Refused(None) => return Ok(()),
            Write::Refused(Some(old)) => old,
        };
        let f = Fields(&old);
        let (Status::Dead, None, Some(body)) =
            (f.status()?, f.opt_n("notified_at")?, f.opt_s("payload_s3_key")?)
        else {
            return Ok(());
        };
        s3.keep(body).await?;
        self.update(key, NOTIFIED, DEAD_UNNOTIFIED_KEPT, values.s(":key", body), false)
            .await?;
        Ok(())
    }
    async fn replay(&self, key: &EventKey, force: bool) -> Result<Replay, StoreError> {
        let now = self.now();
        // A completed event's body in S3 counts down, or is about to: the reopened event gets a copy of its own
        // (pending, until its claim keeps it), named in the conditional flip. A countdown still owed (the record is
        // in `body#`) is started first, since the flip takes the record out of `body#`. So a countdown that lands
        // late (the processor's, the sweeper's) hits only the old object, which nothing points at any more; a
        // crash or a refused flip leaves the copy pending, and S3 expires it.
        let mut moved = None;
        if force {
            if let (Some(s3), Some(item)) = (&self.payloads, self.read(key).await?) {
                let f = Fields(&item);
                let live =
                    f.status()? == Status::Completed && f.opt_n("expires_at")?.is_some_and(|t| t > secs(now));
                if let (true, Some(body)) = (live, f.opt_s("payload_s3_key")?) {
                    let copy = fresh_key(key.source.as_str(), key.event_id.as_str(), &self.world);
                    // An object gone already: the record is replayed as it is, and its claim finds it corrupt.
                    if s3.copy_pending(body, &copy).await? {
                        if f.opt_s("gsi1pk")?.is_some_and(|p| p.starts_with("body#")) {
                            s3.count_down(body).await?;
                        }
                        moved = Some((body.to_owned(), copy));
                    }
                }
            }
        }
        let mut values = Values::default()
            .status(":received", Status::Received)
            .n(":zero", 0)
            .n(":one", 1)
            .n(":now", now)
            .n(":due", self.due.replayed(now))
            .s(":open", partition("open", &key.pk()));
        let (update, condition) = match moved {
            Some((body, copy)) => {
                values = values
                    .status(":completed", Status::Completed)
                    .n(":now_secs", secs(now))
                    .s(":key", body)
                    .s(":body", copy);
                (REPLAY_MOVED, REPLAYABLE_MOVED)
            }
            None if force => {
                values = values
                    .status(":dead", Status::Dead)
                    .status(":completed", Status::Completed)
                    .n(":now_secs", secs(now));
                (REPLAY, REPLAYABLE_FORCED)
            }
            None => {
                values = values.status(":dead", Status::Dead);
                (REPLAY, REPLAYABLE)
            }
        };
        Ok(match self.update(key, update, condition, values, true).await? {
            Write::Applied(_) => Replay::Replayed,
            Write::Refused(old) => rules::refused_replay(old.as_ref().map(record_of).transpose()?.as_ref()),
        })
    }
    async fn get(&self, key: &EventKey) -> Result<Option<Event>, StoreError> {
        let now = self.now();
        let Some(item) = self.read(key).await? else {
            return Ok(None);
        };
        let record = record_of(&item)?;
        if record.is_expired(now) {
            return Ok(None);
        }
        Ok(Some(record.with_payload(self.stored_body(&item).await?)))
    }
    fn check(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

impl DynamoLedger {
    /// The create, its message sent ahead of it (`announced`: no index entry) or not.
    async fn create_one(&self, event: NewEvent, announced: bool, now: i64) -> Result<Created, StoreError> {
        let pk = event.key.pk();
        // The body's marker goes first, so that a refused body writes nothing else and a marked one says so in
        // its record's only write.
        let mut resent_of = None;
        if let Some(guard) = event.guard() {
            if let Some(holder) = self.hold_body(&event, &guard, now).await? {
                if guard.refuses {
                    // A retry of this very event stays its own duplicate, whoever holds the body now.
                    return Ok(match self.meta(&event.key).await? {
                        Some(own) if !own.is_expired(now) => rules::duplicate_of(&own),
                        _ => rules::duplicate_of(&holder),
                    });
                }
                resent_of = Some(holder.event_id);
            }
        }
        let item = self.new_item(&event, resent_of.as_ref(), announced, now).await?;
        // A refused create returns the item in the way; the read below only serves a store that does not.
        for _ in 0..3 {
            let existing = match self.put_new(item.clone(), event.origin, now).await? {
                Ok(()) => return Ok(rules::created(resent_of)),
                Err(Some(old)) => old,
                Err(None) => match self.read(&event.key).await? {
                    Some(old) => old,
                    None => continue,
                },
            };
            return Ok(rules::duplicate_of(&record_of(&existing)?));
        }
        Err(StoreError::Unavailable(format!(
            "the create of {pk} was refused but no item stands in the way"
        )))
    }

    /// Takes what this process remembers of `owner`'s claim: its body in S3, if it had one.
    pub(super) fn forget_claim(&self, owner: &str) -> Option<String> {
        crate::sync::lock(&self.claimed).remove(owner)
    }

    /// The lease `owner` names is no longer this process's (settled, released, or refused as lost).
    fn let_go(&self, owner: &str) {
        crate::sync::lock(&self.leases).remove(owner);
    }

    /// The item of a new record (its body put in S3 first where it is over the inline limit).
    async fn new_item(
        &self,
        event: &NewEvent,
        resent_of: Option<&EventId>,
        announced: bool,
        now: i64,
    ) -> Result<Item, StoreError> {
        let pk = event.key.pk();
        let compressed = crate::compression::compress(&event.payload, crate::compression::DEFAULT)
            .map_err(|e| StoreError::Unavailable(format!("cannot compress the payload of {pk}: {e}")))?;
        let headers = serde_json::to_string(&event.headers)
            .map_err(|e| StoreError::Unavailable(format!("cannot encode the headers of {pk}: {e}")))?;
        let mut item = Item::from([
            ("pk".to_owned(), AttributeValue::S(pk.clone())),
            ("source".to_owned(), s(event.key.source.as_str())),
            ("event_id".to_owned(), s(event.key.event_id.as_str())),
            ("status".to_owned(), s(Status::Received.as_str())),
            ("payload_sha256".to_owned(), digest(&event.payload_sha256)),
            ("headers".to_owned(), s(headers)),
            ("received_at".to_owned(), n(now)),
            ("updated_at".to_owned(), n(now)),
            // No `attempts` or `replays` yet: absent reads as 0, and each byte is paid by every write of the item.
        ]);
        // Indexed only where no message went out first: the sweeper must find it if its enqueue fails.
        if !announced {
            item.insert("gsi1pk".to_owned(), s(partition("open", &pk)));
            item.insert("gsi1sk".to_owned(), n(self.due.received(now)));
        }
        if event.origin != Origin::Webhook {
            item.insert("origin".to_owned(), s(event.origin.as_str()));
        }
        if let Some(t) = &event.event_type {
            item.insert("event_type".to_owned(), s(t));
        }
        match &self.payloads {
            Some(s3) if compressed.len() > self.inline_limit => {
                // Body first, so no crash leaves an item without its body. A name of this attempt's own, so that
                // no put lands on a body another record points at (a retry of a live event included), and pending,
                // so that an attempt whose create is refused or fails leaves an object S3 expires.
                let key = fresh_key(
                    event.key.source.as_str(),
                    event.key.event_id.as_str(),
                    &self.world,
                );
                s3.put(&key, Bytes::from(compressed)).await?;
                item.insert("payload_s3_key".to_owned(), s(key));
                item.insert("payload_encoding".to_owned(), s("zstd"));
            }
            _ => {
                item.insert(
                    "payload_zstd".to_owned(),
                    AttributeValue::B(Blob::new(compressed)),
                );
            }
        }
        if let Some(holder) = resent_of {
            item.insert("resent_of".to_owned(), s(holder.as_str()));
        }
        Ok(item)
    }

    /// One transaction of at most [`TRANSACTION_ITEMS`] creates: every item is put, or (a condition failed) none
    /// is, and the cancellation reasons say which items stand in the way; those are answered as duplicates and the
    /// rest put again in a new transaction.
    async fn create_together(&self, events: &[NewEvent], now: i64) -> Result<Vec<Created>, StoreError> {
        use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
        use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
        let mut items = Vec::with_capacity(events.len());
        for event in events {
            items.push(self.new_item(event, None, false, now).await?);
        }
        let mut outcome: Vec<Option<Created>> = vec![None; events.len()];
        for _ in 0..3 {
            let pending: Vec<usize> = (0..events.len()).filter(|i| outcome[*i].is_none()).collect();
            if pending.is_empty() {
                break;
            }
            let mut writes = Vec::with_capacity(pending.len());
            for &i in &pending {
                let put = Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(items[i].clone()))
                    .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
                let put = match events[i].origin {
                    Origin::Webhook => put
                        .condition_expression(CREATE_IF_ABSENT)
                        .expression_attribute_names("#status", "status")
                        .set_expression_attribute_values(Some(create_values(now).0)),
                    Origin::Reconciled => put.condition_expression("attribute_not_exists(pk)"),
                };
                let put = put
                    .build()
                    .map_err(|e| StoreError::Unavailable(format!("cannot build a batch's put: {e}")))?;
                writes.push(TransactWriteItem::builder().put(put).build());
            }
            let result = self
                .client
                .transact_write_items()
                .set_transact_items(Some(writes))
                .send()
                .await;
            let reasons = match result {
                Ok(_) => {
                    for &i in &pending {
                        outcome[i] = Some(rules::created(None));
                    }
                    break;
                }
                Err(e)
                    if e.as_service_error()
                        .is_some_and(TransactWriteItemsError::is_transaction_canceled_exception) =>
                {
                    match e.into_service_error() {
                        TransactWriteItemsError::TransactionCanceledException(c) => {
                            c.cancellation_reasons.unwrap_or_default()
                        }
                        _ => Vec::new(),
                    }
                }
                Err(e) => return Err(sdk_error(e)),
            };
            // Each item in the way is answered as the duplicate it is; the others go again.
            let mut in_the_way = 0;
            for (reason, &i) in reasons.iter().zip(&pending) {
                if reason.code() != Some("ConditionalCheckFailed") {
                    continue;
                }
                in_the_way += 1;
                let existing = match reason.item() {
                    Some(old) => Some(old.clone()),
                    None => self.read(&events[i].key).await?,
                };
                if let Some(existing) = existing {
                    outcome[i] = Some(rules::duplicate_of(&record_of(&existing)?));
                }
            }
            if in_the_way == 0 {
                return Err(StoreError::Busy);
            }
        }
        outcome
            .into_iter()
            .zip(events)
            .map(|(o, e)| {
                o.ok_or_else(|| {
                    StoreError::Unavailable(format!("the batch's create of {} did not settle", e.key.pk()))
                })
            })
            .collect()
    }
}
