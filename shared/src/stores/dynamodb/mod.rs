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
//! This file holds [`DynamoLedger`], its plumbing (the conditional update and put, reads, scans) and its upkeep;
//! the transitions ([`Ledger`]) are in [`ledger`], bodies in S3 in [`bodies`], the resent-body markers in
//! [`markers`], the sharded sparse index and the sweeper's reads in [`index`], listings and counts in [`browse`],
//! reconciliation's presence reads and checkpoints in [`checkpoints`]; the condition and update expressions in
//! [`expressions`], the encoding of items in [`items`], and [`create_table`] in [`table`].

mod bodies;
mod browse;
mod checkpoints;
mod expressions;
mod index;
mod items;
mod ledger;
mod markers;
mod table;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::operation::get_item::builders::GetItemFluentBuilder;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;

use crate::aws::s3::S3Payloads;
use crate::aws::sdk::sdk_error;
use crate::clock::{Clock, World};
use crate::model::{EventKey, Origin};
use crate::ports::{GoneOwners, Purged, StoreError, Upkeep};
use crate::rules::Due;
use expressions::{create_values, Values, CREATE_IF_ABSENT};
use items::{meta_names, projection, Item};

pub use expressions::completed_update;
pub use index::{shard_of, INDEX, SHARDS};
pub use table::create_table;

/// Compressed bodies up to this size stay in the item (DynamoDB's item limit is 400 KB, keys and state included).
pub const DEFAULT_INLINE_LIMIT: usize = 256 * 1024;

/// The DynamoDB ledger. Cheap to clone (the SDK client is shared).
#[derive(Clone)]
pub struct DynamoLedger {
    client: Client,
    table: String,
    payloads: Option<S3Payloads>,
    /// When records come due for the sweeper.
    due: Due,
    inline_limit: usize,
    /// The store's clock, the one every call runs at (DynamoDB has no clock of its own to write with, so the caller's
    /// is the store's), and the draws that name bodies in S3.
    world: World,
    /// The bodies in S3 of the claims this process holds, by lease owner: what [`Ledger::completed`] starts the
    /// countdown of, taken by that claim's settle or completion (a crash loses it, and the sweeper finishes it).
    ///
    /// [`Ledger::completed`]: crate::ports::Ledger::completed
    claimed: Arc<Mutex<HashMap<String, String>>>,
    /// The leases this process holds, by lease owner (`{owner id}:{token}`): taken at each claim, let go at its
    /// settle or release. What [`Upkeep::give_back`] gives back: a lease owner's leases are all this process's.
    leases: Arc<Mutex<HashMap<String, EventKey>>>,
}

impl std::fmt::Debug for DynamoLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamoLedger")
            .field("table", &self.table)
            .field("payloads", &self.payloads)
            .field("inline_limit", &self.inline_limit)
            .finish_non_exhaustive()
    }
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
            world: World::system(),
            claimed: Arc::default(),
            leases: Arc::default(),
        }
    }

    /// The clock every call runs at (the system's by default): a test or a simulation hands in one it moves.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.world.clock = clock;
        self
    }

    /// The clock and the draws it uses (the system's by default).
    pub fn with_world(mut self, world: World) -> Self {
        self.world = world;
        self
    }

    /// Now, on the store's clock.
    fn now(&self) -> i64 {
        self.world.now_ms()
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
impl Upkeep for DynamoLedger {
    /// None is needed: SQS's visibility vouches for a Lambda's claim, and a lease ends at its expiry.
    async fn gone_owners(&self, _me: &str) -> Result<GoneOwners, StoreError> {
        Ok(GoneOwners::None)
    }
    /// SQS visibility vouches for a Lambda's claim: no heartbeat to record.
    /// SQS's visibility vouches for a Lambda's claim: no heartbeat.
    fn liveness(&self) -> Option<Duration> {
        None
    }
    async fn heartbeat(&self, _me: &str) -> Result<(), StoreError> {
        Ok(())
    }
    /// Each pass is a function the schedule runs once: whoever asks leads.
    async fn lead(&self, _role: &str, _me: &str, _hold: Duration) -> Result<Option<u64>, StoreError> {
        Ok(Some(0))
    }
    async fn end_leases(&self, _gone: &GoneOwners) -> Result<usize, StoreError> {
        Ok(0)
    }
    /// No index finds an owner's leases without a scan, and none is needed: a lease ends at its expiry, and the
    /// message of its event comes back after its visibility timeout.
    /// Each lease this process took under `owner` and has not settled, released as
    /// [`Ledger::release`](crate::ports::Ledger::release) would. A Lambda ends without calling it: its leases
    /// end at their expiry, and SQS brings the messages back.
    async fn give_back(&self, owner: &str) -> Result<usize, StoreError> {
        use crate::ports::{Ledger, Settled};
        let prefix = format!("{owner}:");
        let held: Vec<(String, EventKey)> = crate::sync::lock(&self.leases)
            .iter()
            .filter(|(lease, _)| lease.starts_with(&prefix))
            .map(|(lease, key)| (lease.clone(), key.clone()))
            .collect();
        let mut given = 0;
        for (lease, key) in held {
            if self.release(&key, &lease).await? == Settled::Done {
                given += 1;
            }
        }
        Ok(given)
    }
    /// Retention runs by itself: DynamoDB's TTL deletes expired items (late: every read compares `expires_at`),
    /// and the bucket's lifecycle rules the bodies in S3.
    async fn purge(&self, _limit: usize) -> Result<Purged, StoreError> {
        Ok(Purged::default())
    }
    /// Another process's change reaches this runtime through its queue, not through the table.
    async fn changed_elsewhere(&self) -> Result<bool, StoreError> {
        Ok(false)
    }
    async fn finish_bodies(&self, limit: usize) -> Result<usize, StoreError> {
        self.finish_bodies_in_s3(limit).await
    }
    async fn failure(&self) -> String {
        std::future::pending().await
    }
}

fn no_attributes(key: &EventKey) -> StoreError {
    StoreError::Unavailable(format!("the update of {key} returned no attributes"))
}
