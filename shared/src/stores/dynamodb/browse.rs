//! Listings and counts for the console and `inbox events`: dead and failed events from the sparse index, anything
//! else by a scan (which the console says before it runs one).

use async_trait::async_trait;

use super::expressions::Values;
use super::index::IndexQuery;
use super::items::{record_of, secs};
use super::DynamoLedger;
use crate::model::{Record, SourceName, Status};
use crate::ports::{Browse, ListFilter, StoreError, Summary};

#[async_trait]
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
    async fn list(&self, filter: &ListFilter) -> Result<Vec<Record>, StoreError> {
        if filter.limit == 0 {
            return Ok(Vec::new());
        }
        let now = self.now();
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
        let mut events = items.iter().map(record_of).collect::<Result<Vec<_>, _>>()?;
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
