//! The DynamoDB ledger: one item per event, keyed `pk = "{source}#{event_id}"`, and every transition one
//! conditional `PutItem`/`UpdateItem` on the state it leaves. A failed condition returns the item as it stands
//! (`ReturnValuesOnConditionCheckFailure = ALL_OLD`), so classifying a lost race costs no second read.
//!
//! Bodies are stored zstd-compressed (`payload_zstd`): DynamoDB bills every write by the whole item, so the
//! compressed body is what each status flip pays for, and the item's own attributes are kept few and short (the
//! payload hash as its 32 bytes, no `attempts` or `replays` until they count). A body whose compressed size is over
//! the inline limit goes to S3 first and the item keeps `payload_s3_key` (with `payload_encoding = "zstd"`). Items
//! written before these choices (`payload` with `payload_encoding`, the hash in hex) read the same.
//!
//! A body in S3 is expired by the bucket's lifecycle rules after its tags (`aws::s3`): written pending, kept
//! from its event's claim or death, counting down from its completion. What the ledger owes it is written in the
//! ledger before the step that could leave it wrong (docs/DESIGN.md "Retention and expiry"; RELIABILITY.md "Bodies in S3"): the
//! claim puts the record in the sparse index's `body#{shard}` partition, the COMPLETED settle leaves it there, and
//! only the countdown of its body takes it out, by the processor at once or by the sweeper after a crash
//! ([`DynamoLedger::finish_bodies`]). Only S3-bodied events pay these writes.
//!
//! The sparse index `open_index` holds only what no queue message vouches for (docs/DESIGN.md "The sparse index"): partition
//! `gsi1pk` = `open#{shard}` or `dead#{shard}`, sort `gsi1sk` = the due time, with the semantics of the SQLite
//! ledger's `due_at` column. The receiver sends an event's message before creating it (`receiver::Intake::AnnounceThenWrite`),
//! and SQS keeps a message until its settle deletes it, so the happy path writes no index entry at all: a record
//! is indexed only while RECEIVED without a message sent first (its enqueue failed, a reconciled or replayed
//! event), FAILED (listed for operators), or DEAD. A claim takes the record out; PROCESSING and COMPLETED records
//! carry neither key (but those whose body is in S3, in `body#`, above). A dead event whose alarm went out stays in
//! `dead#` with `gsi1sk = i64::MAX`, so dead events are listed without a scan but never come due again.
//!
//! Times are milliseconds on the writing caller's clock, except `expires_at`, the TTL attribute, in epoch seconds
//! (rounded down, so an event never outlives its retention).
//!
//! This file holds [`DynamoLedger`] and its port impls; the condition and update expressions are in [`expressions`],
//! the encoding of items in [`items`], the sharded sparse index in [`index`], and [`create_table`] in [`table`].

/// Actions in one `TransactWriteItems` at most (DynamoDB's limit).
const TRANSACTION_ITEMS: usize = 100;
/// Bytes in one `TransactWriteItems` at most: DynamoDB's 4 MB, less a margin for what the count below leaves out.
const TRANSACTION_BYTES: usize = 3_500_000;
/// What an item holds beside its body, counted generously (keys, hash, headers, times).
const ITEM_OVERHEAD: usize = 4096;

mod expressions;
mod index;
mod items;
mod table;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::operation::get_item::builders::GetItemFluentBuilder;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeValue, KeysAndAttributes, ReturnValue, ReturnValuesOnConditionCheckFailure,
};
use aws_sdk_dynamodb::Client;
use bytes::Bytes;

use super::s3::{fresh_key, S3Payloads};
use super::sdk::sdk_error;
use crate::model::{Event, EventId, EventKey, NewEvent, Origin, ResentBodies, SourceName, Status};
use crate::ports::{
    Browse, Checkpoint, Checkpoints, Claim, Created, Ledger, ListFilter, MarkDead, Replay, Settled,
    Settlement, StoreError, Summary, SweepIndex,
};
use crate::rules::{self, Due};
use crate::time::{ms, now_ms};
use expressions::{
    completed_values, create_values, owned_values, Values, BODY_CLAIMED, BODY_COUNTING, BURIABLE, CLAIM,
    CLAIMABLE, CLAIMED_WITH_BODY, COMPLETE, COMPLETED_WITH_BODY, CREATE_IF_ABSENT, DEAD_UNNOTIFIED,
    DEAD_UNNOTIFIED_INLINE, DEAD_UNNOTIFIED_KEPT, DEFER_ALARM, FAIL, KILL, NOTIFIED, OWNED, RELEASE, REPLAY,
    REPLAYABLE, REPLAYABLE_FORCED, REPLAYABLE_MOVED, REPLAY_MOVED, RESENT, UNCHANGED_OPEN,
};
use index::{partition, IndexQuery, NEVER_DUE};
use items::{digest, event_of, meta_names, n, projection, s, secs, Fields, Item};

pub use expressions::completed_update;
pub use index::{shard_of, INDEX, SHARDS};
pub use table::create_table;

/// Compressed bodies up to this size stay in the item (DynamoDB's item limit is 400 KB, keys and state included).
pub const DEFAULT_INLINE_LIMIT: usize = 256 * 1024;
/// `BatchGetItem` takes at most this many keys a call.
const BATCH_GET: usize = 100;

/// The DynamoDB ledger. Cheap to clone (the SDK client is shared).
#[derive(Clone, Debug)]
pub struct DynamoLedger {
    client: Client,
    table: String,
    payloads: Option<S3Payloads>,
    /// When records come due for the sweeper.
    due: Due,
    inline_limit: usize,
}

impl DynamoLedger {
    /// A ledger over `table`. Without `payloads` every body stays in its item, and a body DynamoDB refuses (item
    /// over 400 KB) fails the create with [`StoreError::Unavailable`].
    pub fn new(
        client: Client,
        table: impl Into<String>,
        payloads: Option<S3Payloads>,
        grace: Duration,
    ) -> Self {
        Self {
            client,
            table: table.into(),
            payloads,
            due: Due::new(grace),
            inline_limit: DEFAULT_INLINE_LIMIT,
        }
    }

    /// Bodies whose compressed size is over `bytes` go to S3 (when a bucket is configured).
    pub fn with_inline_limit(mut self, bytes: usize) -> Self {
        self.inline_limit = bytes;
        self
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// One conditional `UpdateItem` on `key`: `Applied` with the new item when `new`, or `Refused` with the item
    /// as it stands (`None`: there is no such item).
    async fn update(
        &self,
        key: &EventKey,
        update: &str,
        condition: &str,
        values: Values,
        new: bool,
    ) -> Result<Write, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(key.pk()))
            .update_expression(update)
            .condition_expression(condition)
            .expression_attribute_names("#status", "status")
            .set_expression_attribute_values(Some(values.0))
            .return_values(if new {
                ReturnValue::AllNew
            } else {
                ReturnValue::None
            })
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(out) => Ok(Write::Applied(out.attributes)),
            Err(e)
                if e.as_service_error()
                    .is_some_and(UpdateItemError::is_conditional_check_failed_exception) =>
            {
                match e.into_service_error() {
                    UpdateItemError::ConditionalCheckFailedException(c) => Ok(Write::Refused(c.item)),
                    _ => Ok(Write::Refused(None)),
                }
            }
            Err(e) => Err(sdk_error(e)),
        }
    }

    /// The conditional create; `Err(None)` is a failed condition that did not say what stands in the way.
    async fn put_new(
        &self,
        item: Item,
        origin: Origin,
        now: i64,
    ) -> Result<Result<(), Option<Item>>, StoreError> {
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item));
        let put = match origin {
            Origin::Webhook => put
                .condition_expression(CREATE_IF_ABSENT)
                .expression_attribute_names("#status", "status")
                .set_expression_attribute_values(Some(create_values(now).0)),
            // Reconciliation never replaces a record: past retention it cannot tell "never received" from "done".
            Origin::Reconciled => put.condition_expression("attribute_not_exists(pk)"),
        };
        let result = put
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(Ok(())),
            Err(e)
                if e.as_service_error()
                    .is_some_and(PutItemError::is_conditional_check_failed_exception) =>
            {
                match e.into_service_error() {
                    PutItemError::ConditionalCheckFailedException(c) => Ok(Err(c.item)),
                    _ => Ok(Err(None)),
                }
            }
            Err(e) => Err(sdk_error(e)),
        }
    }

    /// The item of a new record (its body put in S3 first where it is over the inline limit).
    async fn new_item(
        &self,
        event: &NewEvent,
        resent_of: Option<&EventId>,
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
        if !event.announced {
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
                let key = fresh_key(event.key.source.as_str(), event.key.event_id.as_str());
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
            items.push(self.new_item(event, None, now).await?);
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
                    outcome[i] = Some(rules::duplicate_of(&event_of(&existing)?));
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

    /// A `GetItem` of `key`'s record, to be finished by the caller (consistency, projection).
    fn get_item(&self, key: &EventKey) -> GetItemFluentBuilder {
        self.client
            .get_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(key.pk()))
    }

    async fn read(&self, key: &EventKey) -> Result<Option<Item>, StoreError> {
        let out = self
            .get_item(key)
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        Ok(out.item)
    }

    /// The body of a claimed item; for a body in S3, with what the claim owes it before any handler runs: the
    /// object is confirmed (kept: its event is open), and the record enters the sparse index's `body#` partition,
    /// due when the lease ends. It stays there through the COMPLETED settle ([`COMPLETE`] leaves the index keys)
    /// until its body's countdown has started: by [`Ledger::completed_body`], or by the sweeper after a crash
    /// ([`DynamoLedger::finish_bodies`]). Both writes are this lease's and come before its settle, so no countdown
    /// of this object can come before them; a failure of either fails the claim, which its message retries.
    async fn payload(&self, item: &Item) -> Result<Bytes, StoreError> {
        let body = self.stored_body(item).await?;
        let f = Fields(item);
        let (Some(s3), Some(key)) = (&self.payloads, f.opt_s("payload_s3_key")?) else {
            return Ok(body);
        };
        let (Status::Processing, Some(owner)) = (f.status()?, f.opt_s("lease_owner")?) else {
            return Ok(body);
        };
        s3.keep(key).await?;
        let event = event_of(item)?.key();
        let values = Values::default()
            .status(":processing", Status::Processing)
            .s(":owner", owner)
            .s(":key", key)
            .s(":body", partition("body", &event.pk()))
            .n(":until", f.n("lease_until")?);
        // Refused: the lease is gone already, and this worker's settle will find so.
        self.update(&event, BODY_CLAIMED, CLAIMED_WITH_BODY, values, false)
            .await?;
        Ok(body)
    }

    /// The body of a full item: inline, or from S3; decompressed. Reads only.
    async fn stored_body(&self, item: &Item) -> Result<Bytes, StoreError> {
        let f = Fields(item);
        let offloaded;
        // `payload_zstd`: inline and compressed. Older items: `payload`, compressed where `payload_encoding` says.
        let (stored, encoding): (&[u8], _) = match (item.get("payload_zstd"), item.get("payload")) {
            (Some(AttributeValue::B(blob)), _) => (blob.as_ref(), Some("zstd")),
            (Some(_), _) => return Err(f.corrupt("payload_zstd", "is not binary")),
            (None, Some(AttributeValue::B(blob))) => (blob.as_ref(), f.opt_s("payload_encoding")?),
            (None, Some(_)) => return Err(f.corrupt("payload", "is not binary")),
            (None, None) => {
                let Some(key) = f.opt_s("payload_s3_key")? else {
                    return Err(f.corrupt("payload", "is missing"));
                };
                let Some(s3) = &self.payloads else {
                    return Err(StoreError::Unavailable(format!(
                        "the payload of {} is in S3 but no bucket is configured",
                        f.pk()
                    )));
                };
                offloaded = s3.get(key).await?;
                (&offloaded[..], f.opt_s("payload_encoding")?)
            }
        };
        match encoding {
            None => Ok(Bytes::copy_from_slice(stored)),
            Some("zstd") => crate::compression::decompress(stored)
                .map(Bytes::from)
                .map_err(|_| f.corrupt("payload", "does not decompress")),
            Some(_) => Err(f.corrupt("payload_encoding", "is unknown")),
        }
    }

    /// A full scan of the table (paginated), with `filter`.
    async fn scan(&self, filter: String, values: Values) -> Result<Vec<Item>, StoreError> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .scan()
                .table_name(&self.table)
                // An operator listing right after a change sees it.
                .consistent_read(true)
                .filter_expression(&filter)
                .projection_expression(projection())
                .set_expression_attribute_names(Some(meta_names()))
                .set_expression_attribute_values(Some(values.0.clone()))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(sdk_error)?;
            items.extend(out.items.unwrap_or_default());
            match out.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => return Ok(items),
            }
        }
    }
}

/// What one conditional update did.
enum Write {
    Applied(Option<Item>),
    /// The condition failed; the item as it stands, or `None` when there is none.
    Refused(Option<Item>),
}

#[async_trait]
impl Ledger for DynamoLedger {
    /// An eventually consistent `GetItem` of the record's metadata (half a read unit): a duplicate missed this
    /// way is caught by the create's condition, at the cost of one spare message.
    async fn peek(&self, key: &EventKey) -> Result<Option<Event>, StoreError> {
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
        let event = event_of(&item)?;
        Ok((!event.is_expired(now_ms())).then_some(event))
    }
    async fn create(&self, event: NewEvent) -> Result<Created, StoreError> {
        let now = now_ms();
        let pk = event.key.pk();
        // The body's marker goes first, so that a refused body writes nothing else and a marked one says so in
        // its record's only write.
        let mut resent_of = None;
        if let Some(within) = event.resent_bodies.within() {
            if let Some(holder) = self.hold_body(&event, within, now).await? {
                if let ResentBodies::Refused { .. } = event.resent_bodies {
                    // A retry of this very event stays its own duplicate, whoever holds the body now.
                    return Ok(match self.meta(&event.key).await? {
                        Some(own) if !own.is_expired(now) => rules::duplicate_of(&own),
                        _ => rules::duplicate_of(&holder),
                    });
                }
                resent_of = Some(holder.event_id);
            }
        }
        let item = self.new_item(&event, resent_of.as_ref(), now).await?;
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
            return Ok(rules::duplicate_of(&event_of(&existing)?));
        }
        Err(StoreError::Unavailable(format!(
            "the create of {pk} was refused but no item stands in the way"
        )))
    }
    /// One `TransactWriteItems` for up to 100 items (DynamoDB's limit): all put, or none. A larger batch is written
    /// as consecutive transactions of 100 before the one answer; a crash between two leaves the first ones stored
    /// and the delivery unanswered, and the sender's retry finds them as duplicates and stores the rest, so
    /// nothing acknowledged is lost and nothing is stored twice. Items look for no resent bodies: a batch's scheme
    /// signs the ids with the bodies.
    async fn create_batch(&self, events: Vec<NewEvent>) -> Result<Vec<Created>, StoreError> {
        let now = now_ms();
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
        let now = now_ms();
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
                let mut event = event_of(&item)?;
                match self.payload(&item).await {
                    Ok(body) => {
                        event.payload = body;
                        Ok(Claim::Claimed(Box::new(event)))
                    }
                    // The claim stands: the caller holds the lease and settles it DEAD.
                    Err(StoreError::Corrupt(why)) => Ok(Claim::Corrupt(Box::new(event), why)),
                    Err(e) => Err(e),
                }
            }
            Write::Applied(None) => Err(no_attributes(key)),
            Write::Refused(old) => Ok(rules::refused_claim(
                old.as_ref().map(event_of).transpose()?.as_ref(),
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
        let now = now_ms();
        let owned = owned_values(owner, now);
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
        Ok(match self.update(key, update, OWNED, values, false).await? {
            Write::Applied(_) => Settled::Done,
            Write::Refused(_) => Settled::LeaseLost,
        })
    }
    async fn release(&self, key: &EventKey, owner: &str) -> Result<Settled, StoreError> {
        let now = now_ms();
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
        let now = now_ms();
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
                Ok(MarkDead::NewlyDead(Box::new(event_of(&item)?)))
            }
            Write::Applied(None) => Err(no_attributes(key)),
            Write::Refused(old) => Ok(rules::refused_mark_dead(
                old.as_ref().map(event_of).transpose()?.as_ref(),
                now,
            )),
        }
    }
    async fn mark_notified(&self, key: &EventKey) -> Result<(), StoreError> {
        let values = Values::default()
            .status(":dead", Status::Dead)
            .n(":now", now_ms())
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
    /// A body in S3 starts its retention: the object the claimed record named (`event.body_object`; an inline body
    /// asks nothing of S3, and an object of any older layout is counted down all the same) is copied onto itself
    /// tagged, for the bucket's lifecycle rule, and then the record leaves the `body#` partition its claim put it
    /// in. A crash or a failure before that leaves it there, and the sweeper finishes it.
    async fn completed_body(&self, event: &Event) -> Result<(), StoreError> {
        let (Some(s3), Some(body)) = (&self.payloads, &event.body_object) else {
            return Ok(());
        };
        s3.count_down(body).await?;
        self.body_counting(&event.key(), body).await
    }
    async fn replay(&self, key: &EventKey, force: bool) -> Result<Replay, StoreError> {
        // A completed event's body in S3 counts down, or is about to: the reopened event gets a copy of its own
        // (pending, until its claim keeps it), named in the conditional flip. A countdown still owed (the record is
        // in `body#`) is started first, since the flip takes the record out of `body#`. So a countdown that lands
        // late (the processor's, the sweeper's) hits only the old object, which nothing points at any more; a
        // crash or a refused flip leaves the copy pending, and S3 expires it.
        let mut moved = None;
        if force {
            if let (Some(s3), Some(item)) = (&self.payloads, self.read(key).await?) {
                let f = Fields(&item);
                let live = f.status()? == Status::Completed
                    && f.opt_n("expires_at")?.is_some_and(|t| t > secs(now_ms()));
                if let (true, Some(body)) = (live, f.opt_s("payload_s3_key")?) {
                    let copy = fresh_key(key.source.as_str(), key.event_id.as_str());
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
        let now = now_ms();
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
            Write::Refused(old) => rules::refused_replay(old.as_ref().map(event_of).transpose()?.as_ref()),
        })
    }
    async fn get(&self, key: &EventKey) -> Result<Option<Event>, StoreError> {
        let now = now_ms();
        let Some(item) = self.read(key).await? else {
            return Ok(None);
        };
        let mut event = event_of(&item)?;
        if event.is_expired(now) {
            return Ok(None);
        }
        event.payload = self.stored_body(&item).await?;
        Ok(Some(event))
    }
}

#[async_trait]
impl SweepIndex for DynamoLedger {
    async fn defer_alarm(&self, key: &EventKey, until: i64) -> Result<(), StoreError> {
        let values = Values::default().status(":dead", Status::Dead).n(":until", until);
        self.update(key, DEFER_ALARM, DEAD_UNNOTIFIED, values, false)
            .await?;
        Ok(())
    }
    async fn resent(&self, key: &EventKey, status: Status, updated_at: i64) -> Result<(), StoreError> {
        let values = Values::default()
            .status(":status", status)
            .n(":updated", updated_at)
            .n(":until", self.due.resent(now_ms(), updated_at));
        self.update(key, RESENT, UNCHANGED_OPEN, values, false).await?;
        Ok(())
    }
    async fn due(&self, due_before: i64, limit: usize) -> Result<Vec<Event>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let query = IndexQuery {
            // Notified dead events sit at NEVER_DUE: listed, but never due.
            due_before: Some(due_before.min(NEVER_DUE - 1)),
            stop_after: Some(limit),
            ..Default::default()
        };
        let items = self.query_index(&["open", "dead"], query).await?;
        let mut due = items
            .iter()
            .map(|item| Ok((Fields(item).n("gsi1sk")?, event_of(item)?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        due.sort_by(|(a, ea), (b, eb)| (a, &ea.source, &ea.event_id).cmp(&(b, &eb.source, &eb.event_id)));
        due.truncate(limit);
        Ok(due.into_iter().map(|(_, e)| e).collect())
    }
}

#[async_trait]
impl Checkpoints for DynamoLedger {
    /// `BatchGetItem` of the keys, [`BATCH_GET`] a call, reading only what decides presence.
    async fn present(&self, source: &SourceName, ids: &[EventId]) -> Result<HashSet<EventId>, StoreError> {
        let mut found = HashSet::new();
        for chunk in ids.chunks(BATCH_GET) {
            let keys = chunk
                .iter()
                .map(|id| {
                    let pk = EventKey::new(source.clone(), id.clone()).pk();
                    HashMap::from([("pk".to_owned(), AttributeValue::S(pk))])
                })
                .collect::<Vec<_>>();
            let mut request = Some(
                KeysAndAttributes::builder()
                    .set_keys(Some(keys))
                    .consistent_read(true)
                    .projection_expression("event_id")
                    .build()
                    .map_err(|e| StoreError::Unavailable(format!("cannot build a batch read: {e}")))?,
            );
            let mut pause = Duration::from_millis(50);
            while let Some(keys) = request.take() {
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table, keys)
                    .send()
                    .await
                    .map_err(sdk_error)?;
                for item in out
                    .responses
                    .and_then(|mut r| r.remove(&self.table))
                    .unwrap_or_default()
                {
                    // Any record, expired or not: past retention "done and forgotten" looks like "never received".
                    let f = Fields(&item);
                    found.insert(
                        EventId::parse(f.s("event_id")?)
                            .map_err(|_| f.corrupt("event_id", "is not an event id"))?,
                    );
                }
                // Keys DynamoDB did not get to (throttling, size): asked again after a pause.
                request = out
                    .unprocessed_keys
                    .and_then(|mut u| u.remove(&self.table))
                    .filter(|k| !k.keys().is_empty());
                if request.is_some() {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
            }
        }
        Ok(found)
    }
    async fn checkpoint(&self, source: &SourceName) -> Result<Option<Checkpoint>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(checkpoint_pk(source)))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        let Some(item) = out.item else {
            return Ok(None);
        };
        let f = Fields(&item);
        serde_json::from_str(f.s("checkpoint")?)
            .map(Some)
            .map_err(|_| f.corrupt("checkpoint", "is not a checkpoint"))
    }
    async fn save_checkpoint(&self, source: &SourceName, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        let body = serde_json::to_string(checkpoint)
            .map_err(|e| StoreError::Unavailable(format!("cannot encode the checkpoint of {source}: {e}")))?;
        // No index key and no event attributes: no listing, replay or sweep ever sees it.
        self.client
            .put_item()
            .table_name(&self.table)
            .item("pk", AttributeValue::S(checkpoint_pk(source)))
            .item("checkpoint", AttributeValue::S(body))
            .send()
            .await
            .map_err(sdk_error)?;
        Ok(())
    }
}

#[async_trait]
impl Browse for DynamoLedger {
    async fn summary(&self) -> Result<Summary, StoreError> {
        let mut summary = Summary::default();
        let mut per_source = std::collections::BTreeMap::<(SourceName, &'static str), (Status, u64)>::new();
        for status in [Status::Received, Status::Processing, Status::Failed, Status::Dead] {
            let filter = ListFilter {
                status: Some(status),
                limit: usize::MAX,
                ..Default::default()
            };
            if self.lists_by_scan(&filter) {
                summary.by_status.push((status, None));
                continue;
            }
            let events = self.list(&filter).await?;
            summary.by_status.push((status, Some(events.len() as u64)));
            for e in &events {
                per_source
                    .entry((e.source.clone(), status.as_str()))
                    .or_insert((status, 0))
                    .1 += 1;
                if status.is_open() {
                    summary.oldest_open = Some(
                        summary
                            .oldest_open
                            .map_or(e.received_at, |t| t.min(e.received_at)),
                    );
                }
            }
        }
        summary.by_status.push((Status::Completed, None));
        summary.by_source = per_source
            .into_iter()
            .map(|((source, _), (status, n))| (source, status, n))
            .collect();
        Ok(summary)
    }

    /// Dead and failed events (a status filter of DEAD or FAILED) are queried from the sparse index, so their cost
    /// grows with how many are dead or failing, never with the table. Any other listing (RECEIVED and PROCESSING
    /// events, which are indexed only when no message vouches for them; completed events; no status) **scans the
    /// whole table** (an operator's occasional question): one read unit per 4 KB of every item, each
    /// time, whatever the limit (the filter narrows what comes back, not what is read). The operator console says
    /// so beside that listing. Type, id, time range and cursor are applied to what was read.
    async fn list(&self, filter: &ListFilter) -> Result<Vec<Event>, StoreError> {
        if filter.limit == 0 {
            return Ok(Vec::new());
        }
        let now = now_ms();
        let mut values = Values::default();
        let mut conditions = Vec::new();
        if let Some(source) = &filter.source {
            conditions.push("#source = :source");
            values = values.s(":source", source.as_str());
        }
        let items = match filter.status {
            Some(Status::Dead) => {
                let query = IndexQuery {
                    filter: (!conditions.is_empty()).then(|| conditions.join(" AND ")),
                    values,
                    ..Default::default()
                };
                self.query_index(&["dead"], query).await?
            }
            Some(st) if st.is_open() && !self.lists_by_scan(filter) => {
                conditions.push("#status = :status");
                let query = IndexQuery {
                    filter: Some(conditions.join(" AND ")),
                    values: values.status(":status", st),
                    ..Default::default()
                };
                self.query_index(&["open"], query).await?
            }
            status => {
                if let Some(st) = status {
                    conditions.push("#status = :status");
                    values = values.status(":status", st);
                }
                // Only events: the checkpoints and body markers share the table, and only events have a status
                // (a body marker names its holder's `event_id` too).
                conditions.push("attribute_exists(#status)");
                conditions.push("NOT (#status = :completed AND #expires_at <= :now_secs)");
                values = values
                    .status(":completed", Status::Completed)
                    .n(":now_secs", secs(now));
                self.scan(conditions.join(" AND "), values).await?
            }
        };
        let mut events = items.iter().map(event_of).collect::<Result<Vec<_>, _>>()?;
        events.retain(|e| filter.admits(e));
        events.sort_by(|a, b| {
            (b.received_at, &b.source, &b.event_id).cmp(&(a.received_at, &a.source, &a.event_id))
        });
        events.truncate(filter.limit);
        Ok(events)
    }
    /// Only FAILED and DEAD events are all in the index: RECEIVED and PROCESSING ones mostly are not (their message
    /// vouches for them), so listing those reads the table.
    fn lists_by_scan(&self, filter: &ListFilter) -> bool {
        !matches!(filter.status, Some(Status::Failed | Status::Dead))
    }
}

impl DynamoLedger {
    /// Takes the marker of `event`'s body (`#body#{source}#{sha256}#{type}`, its source's retention long) for
    /// `event`, unless another live event holds it: that event is returned. One conditional put of a small item,
    /// one write unit, beside the event's own put (a transaction of both would bill each twice). The two writes
    /// need no transaction: a marker whose holder has no record (its create failed, or was never made) is taken
    /// over once it is older than [`HOLDER_IN_FLIGHT`]; younger, the holder's create may still land, and a refusing
    /// source answers 503 so its sender retries, while a marking one stores the event unmarked.
    async fn hold_body(
        &self,
        event: &NewEvent,
        within: Duration,
        now: i64,
    ) -> Result<Option<Event>, StoreError> {
        let marker_pk = body_marker_pk(event);
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
                .item("expires_at", n(secs(now.saturating_add(ms(within)))))
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
                if !found.is_expired(now) {
                    return Ok(Some(found));
                }
            } else if now.saturating_sub(f.opt_n("written_at")?.unwrap_or(0)) < ms(HOLDER_IN_FLIGHT) {
                return match event.resent_bodies {
                    ResentBodies::Refused { .. } => Err(StoreError::Busy),
                    _ => Ok(None),
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
    async fn meta(&self, key: &EventKey) -> Result<Option<Event>, StoreError> {
        let out = self
            .get_item(key)
            .consistent_read(true)
            .projection_expression(projection())
            .set_expression_attribute_names(Some(meta_names()))
            .send()
            .await
            .map_err(sdk_error)?;
        out.item.as_ref().map(event_of).transpose()
    }
}

/// How long a body marker whose holder has no record yet is taken to have that holder's create in flight.
const HOLDER_IN_FLIGHT: Duration = Duration::from_secs(60);

/// The item that remembers which event holds a body, per source and type: `#` starts no event's `pk`.
fn body_marker_pk(event: &NewEvent) -> String {
    format!(
        "#body#{}#{}#{}",
        event.key.source,
        event.payload_sha256,
        event.event_type.as_deref().unwrap_or("")
    )
}

/// Bodies in S3: what the sweeper finishes.
impl DynamoLedger {
    /// The sweeper's part for bodies in S3: each COMPLETED record still in the `body#` partition once its claim's
    /// lease has ended (its worker died, or failed, between the settle and its body's countdown) has its body
    /// counted down, and leaves the partition. At most `limit`; returns how many were finished. One that fails
    /// stays for the next sweep (and is logged).
    pub async fn finish_bodies(&self, limit: usize) -> Result<usize, StoreError> {
        let Some(s3) = &self.payloads else {
            return Ok(0);
        };
        if limit == 0 {
            return Ok(0);
        }
        let query = IndexQuery {
            due_before: Some(now_ms()),
            filter: Some("#status = :completed".to_owned()),
            values: Values::default().status(":completed", Status::Completed),
            stop_after: Some(limit),
        };
        let mut finished = 0;
        for entry in self.query_index(&["body"], query).await?.iter().take(limit) {
            let key = event_of(entry)?.key();
            match self.finish_body(s3, &key).await {
                Ok(true) => finished += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(source = %key.source, event_id = %key.event_id, error = %e,
                        "the completed event's body did not start its retention; the next sweep tries again");
                }
            }
        }
        Ok(finished)
    }

    async fn finish_body(&self, s3: &S3Payloads, key: &EventKey) -> Result<bool, StoreError> {
        // The object's name is not in the index: the record says it (a small item: one read unit).
        let out = self
            .get_item(key)
            .consistent_read(true)
            .projection_expression("#status, payload_s3_key, gsi1pk")
            .expression_attribute_names("#status", "status")
            .send()
            .await
            .map_err(sdk_error)?;
        let Some(item) = out.item else {
            return Ok(false);
        };
        let f = Fields(&item);
        let owed = f.status()? == Status::Completed
            && f.opt_s("gsi1pk")? == Some(partition("body", &key.pk()).as_str());
        let Some(body) = f.opt_s("payload_s3_key")?.filter(|_| owed) else {
            return Ok(false);
        };
        s3.count_down(body).await?;
        self.body_counting(key, body).await?;
        Ok(true)
    }

    /// The record of `key` leaves `body#`, once the countdown of its body `body` has started.
    async fn body_counting(&self, key: &EventKey, body: &str) -> Result<(), StoreError> {
        let values = Values::default()
            .status(":completed", Status::Completed)
            .s(":key", body)
            .s(":body", partition("body", &key.pk()));
        // Refused: out of `body#` already (done, or claimed before this layout), or moved on (replayed).
        self.update(key, BODY_COUNTING, COMPLETED_WITH_BODY, values, false)
            .await?;
        Ok(())
    }
}

/// The item of a source's reconciliation checkpoint: `#` starts no event's `pk`, since source names never hold it.
fn checkpoint_pk(source: &SourceName) -> String {
    format!("#checkpoint#{source}")
}

fn no_attributes(key: &EventKey) -> StoreError {
    StoreError::Unavailable(format!("the update of {key} returned no attributes"))
}
