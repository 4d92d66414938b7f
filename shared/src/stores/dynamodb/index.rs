//! The sharded sparse index `open_index`: which partition an event's entry goes in ([`shard_of`],
//! [`partition`]) and the reads of every shard at once ([`IndexQuery`], `DynamoLedger::query_index`).

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use tokio::task::JoinSet;

use super::expressions::{Values, DEAD_UNNOTIFIED, DEFER_ALARM, RESENT, UNCHANGED_OPEN};
use super::items::{meta_names, projection, record_of, Fields, Item};
use super::DynamoLedger;
use crate::aws::sdk::sdk_error;
use crate::model::{EventKey, Record, Status};
use crate::ports::{StoreError, SweepIndex};

/// The sparse index of open and dead events.
pub const INDEX: &str = "open_index";
/// Partitions of the sparse index per kind (`open#0..7`, `dead#0..7`), so that a burst of open events spreads
/// over several index partitions instead of one hot key.
pub const SHARDS: u32 = 8;
/// The due time of a dead event whose alarm went out: in the index for listing, never due.
pub(super) const NEVER_DUE: i64 = i64::MAX;

impl DynamoLedger {
    /// Reads every partition of the sparse index under `prefixes` at once and returns what they hold.
    pub(super) async fn query_index(
        &self,
        prefixes: &[&str],
        query: IndexQuery,
    ) -> Result<Vec<Item>, StoreError> {
        let mut tasks = JoinSet::new();
        for prefix in prefixes {
            for shard in 0..SHARDS {
                let (client, table, query) = (self.client.clone(), self.table.clone(), query.clone());
                let partition = format!("{prefix}#{shard}");
                tasks.spawn(async move { query_partition(&client, &table, partition, query).await });
            }
        }
        let mut items = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let found =
                joined.map_err(|e| StoreError::Unavailable(format!("an index query stopped: {e}")))??;
            items.extend(found);
        }
        Ok(items)
    }
}

/// A query of one sparse-index partition, optionally only up to a due time, filtered, and cut after a count.
#[derive(Clone, Default)]
pub(super) struct IndexQuery {
    pub(super) due_before: Option<i64>,
    pub(super) filter: Option<String>,
    pub(super) values: Values,
    pub(super) stop_after: Option<usize>,
}

async fn query_partition(
    client: &Client,
    table: &str,
    partition: String,
    query: IndexQuery,
) -> Result<Vec<Item>, StoreError> {
    let mut values = query.values.s(":partition", partition);
    let key_condition = match query.due_before {
        Some(before) => {
            values = values.n(":before", before);
            "gsi1pk = :partition AND gsi1sk <= :before"
        }
        None => "gsi1pk = :partition",
    };
    let page = query
        .stop_after
        .map(|n| i32::try_from(n.clamp(1, 1000)).unwrap_or(1000));
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let out = client
            .query()
            .table_name(table)
            .index_name(INDEX)
            .key_condition_expression(key_condition)
            .set_filter_expression(query.filter.clone())
            .projection_expression(projection())
            .set_expression_attribute_names(Some(meta_names()))
            .set_expression_attribute_values(Some(values.0.clone()))
            .scan_index_forward(true)
            .set_limit(page)
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(sdk_error)?;
        items.extend(out.items.unwrap_or_default());
        if let Some(n) = query.stop_after {
            if items.len() >= n {
                items.truncate(n);
                return Ok(items);
            }
        }
        match out.last_evaluated_key {
            Some(k) if !k.is_empty() => start = Some(k),
            _ => return Ok(items),
        }
    }
}

/// The sparse-index shard of an event: FNV-1a (32 bit) of its `pk`, modulo [`SHARDS`]. Stable across processes
/// and releases, since items written by one version are queried by the next.
pub fn shard_of(pk: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in pk.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash % SHARDS
}

/// `open#{shard}` or `dead#{shard}` for an event's `pk`.
pub(super) fn partition(kind: &str, pk: &str) -> String {
    format!("{kind}#{}", shard_of(pk))
}

#[async_trait::async_trait]
impl SweepIndex for DynamoLedger {
    async fn defer_alarm(&self, key: &EventKey, until: i64) -> Result<(), StoreError> {
        let values = Values::default().status(":dead", Status::Dead).n(":until", until);
        self.update(key, DEFER_ALARM, DEAD_UNNOTIFIED, values, false)
            .await?;
        Ok(())
    }
    async fn sent_again(&self, key: &EventKey, status: Status, updated_at: i64) -> Result<(), StoreError> {
        let values = Values::default()
            .status(":status", status)
            .n(":updated", updated_at)
            .n(":until", self.due.resent(self.now(), updated_at));
        self.update(key, RESENT, UNCHANGED_OPEN, values, false).await?;
        Ok(())
    }
    async fn due(&self, ahead: Duration, limit: usize) -> Result<Vec<Record>, StoreError> {
        let due_before = self.now().saturating_add(crate::time::ms(ahead));
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
            .map(|item| Ok((Fields(item).n("gsi1sk")?, record_of(item)?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        due.sort_by(|(a, ea), (b, eb)| (a, &ea.source, &ea.event_id).cmp(&(b, &eb.source, &eb.event_id)));
        due.truncate(limit);
        Ok(due.into_iter().map(|(_, e)| e).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shard_hash_is_fnv1a() {
        // FNV-1a 32 of "" is the offset basis, of "a" the published 0xe40c292c.
        assert_eq!(shard_of(""), 0x811c_9dc5 % SHARDS);
        assert_eq!(shard_of("a"), 0xe40c_292c % SHARDS);
    }
}
