//! The ports, as SQLite answers them: each write handed to the writer thread as an [`Op`], each read run on the
//! read pool.

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension};

use super::ops::{ClaimOnCreate, Op};
use super::rows::{event_row, find, with_payload, COLUMNS, SOURCES};
use super::summary::summarize;
use super::{prepare, sql, writer_stopped, SqliteLedger};
use crate::model::{Event, EventId, EventKey, NewEvent, Record, SourceName, Status};
use crate::ports::{
    Browse, Capabilities, Checkpoint, Checkpoints, Claim, Created, GoneOwners, Ledger, ListFilter, MarkDead,
    Purged, Replay, Settled, Settlement, StoreError, Summary, SweepIndex, Upkeep,
};
use crate::rules;
use crate::time::ms;

#[async_trait]
impl Ledger for SqliteLedger {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            claims_in_create: true,
            trusts_announcements: false,
            indexes_every_listing: true,
            keeps_bodies_apart: false,
            eventually_consistent_index: false,
            shared_by_many: false,
        }
    }
    async fn create(&self, event: NewEvent) -> Result<Created, StoreError> {
        self.ask(Op::Create(Box::new(prepare(event, None)?))).await
    }
    /// The ledger is its own queue: an announced create is indexed like any other.
    async fn create_announced(&self, event: NewEvent) -> Result<Created, StoreError> {
        self.create(event).await
    }
    async fn create_claimed(
        &self,
        event: NewEvent,
        owner: &str,
        lease: Duration,
    ) -> Result<(Created, Option<Event>), StoreError> {
        let claim = ClaimOnCreate {
            owner: owner.to_owned(),
            lease: ms(lease),
        };
        self.ask(Op::Create(Box::new(prepare(event, Some(claim))?))).await
    }
    async fn create_batch(&self, events: Vec<NewEvent>) -> Result<Vec<Created>, StoreError> {
        let prepared = events
            .into_iter()
            .map(|event| {
                // No item looks for resent bodies (the port's promise): a batch's scheme signs each id with its body.
                let event = NewEvent {
                    resent_bodies: crate::model::ResentBodies::Ignored,
                    ..event
                };
                prepare(event, None)
            })
            .collect::<Result<_, _>>()?;
        self.ask(Op::CreateBatch(prepared)).await
    }
    async fn peek(&self, key: &EventKey) -> Result<Option<Record>, StoreError> {
        let key = key.clone();
        self.read(move |c, now| {
            Ok(find(c, &key)?
                .map(|(_, record)| record)
                .filter(|r| !r.is_expired(now)))
        })
        .await
    }
    async fn claim(&self, key: &EventKey, owner: &str, lease: Duration) -> Result<Claim, StoreError> {
        let op = Op::Claim {
            key: key.clone(),
            owner: owner.to_owned(),
            lease: ms(lease),
        };
        self.ask(op).await
    }
    async fn settle(
        &self,
        key: &EventKey,
        owner: &str,
        settlement: Settlement,
    ) -> Result<Settled, StoreError> {
        let op = Op::Settle {
            key: key.clone(),
            owner: owner.to_owned(),
            settlement,
        };
        self.ask(op).await
    }
    /// Bodies live in the record's own row: nothing is owed after completion.
    async fn completed(&self, _key: &EventKey, _owner: &str) -> Result<(), StoreError> {
        Ok(())
    }
    async fn release(&self, key: &EventKey, owner: &str) -> Result<Settled, StoreError> {
        let op = Op::Release {
            key: key.clone(),
            owner: owner.to_owned(),
        };
        self.ask(op).await
    }
    async fn mark_dead(&self, key: &EventKey, reason: &str) -> Result<MarkDead, StoreError> {
        let op = Op::MarkDead {
            key: key.clone(),
            reason: reason.to_owned(),
        };
        self.ask(op).await
    }
    async fn mark_notified(&self, key: &EventKey) -> Result<(), StoreError> {
        self.ask(Op::MarkNotified(key.clone())).await
    }
    async fn replay(&self, key: &EventKey, force: bool) -> Result<Replay, StoreError> {
        let op = Op::Replay {
            key: key.clone(),
            force,
        };
        self.ask(op).await
    }
    async fn get(&self, key: &EventKey) -> Result<Option<Event>, StoreError> {
        let key = key.clone();
        self.read(move |c, now| match find(c, &key)? {
            Some((_, e)) if e.is_expired(now) => Ok(None),
            Some((id, e)) => match with_payload(c, id, e)? {
                Ok(event) => Ok(Some(event)),
                Err(event) => Err(StoreError::Corrupt(rules::missing_body(&event))),
            },
            None => Ok(None),
        })
        .await
    }
    fn check(&self) -> Result<(), StoreError> {
        if self.jobs.is_closed() {
            return Err(writer_stopped());
        }
        if self.fatal.is_set() {
            return Err(StoreError::Unavailable("a sync of the store's log failed".into()));
        }
        Ok(())
    }
}

#[async_trait]
impl SweepIndex for SqliteLedger {
    async fn defer_alarm(&self, key: &EventKey, until: i64) -> Result<(), StoreError> {
        let op = Op::DeferAlarm {
            key: key.clone(),
            until,
        };
        self.ask(op).await
    }
    async fn sent_again(&self, key: &EventKey, status: Status, updated_at: i64) -> Result<(), StoreError> {
        let op = Op::SentAgain {
            key: key.clone(),
            status,
            updated_at,
        };
        self.ask(op).await
    }
    async fn due(&self, ahead: Duration, limit: usize) -> Result<Vec<Record>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |c, now| {
            let due_before = now.saturating_add(crate::time::ms(ahead));
            let mut stmt = c
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM events WHERE due_at <= ?1 ORDER BY due_at LIMIT ?2"
                ))
                .map_err(sql)?;
            let rows = stmt
                .query_map(params![due_before, limit], |r| {
                    event_row(r).map(|(_, record)| record)
                })
                .map_err(sql)?;
            rows.collect::<rusqlite::Result<_>>().map_err(sql)
        })
        .await
    }
}

#[async_trait]
impl Checkpoints for SqliteLedger {
    async fn present(&self, source: &SourceName, ids: &[EventId]) -> Result<HashSet<EventId>, StoreError> {
        let (source, ids) = (source.clone(), ids.to_vec());
        self.read(move |c, _| {
            // Any record, expired or not: past retention "done and forgotten" looks like "never received".
            let mut stmt = c
                .prepare_cached("SELECT 1 FROM events WHERE source = ?1 AND event_id = ?2")
                .map_err(sql)?;
            let mut found = HashSet::new();
            for id in ids {
                if stmt.exists(params![source.as_str(), id.as_str()]).map_err(sql)? {
                    found.insert(id);
                }
            }
            Ok(found)
        })
        .await
    }
    async fn checkpoint(&self, source: &SourceName) -> Result<Option<Checkpoint>, StoreError> {
        let source = source.clone();
        self.read(move |c, _| {
            let body: Option<String> = c
                .prepare_cached("SELECT body FROM checkpoints WHERE source = ?1")
                .and_then(|mut s| s.query_row([source.as_str()], |r| r.get(0)).optional())
                .map_err(sql)?;
            body.map(|b| {
                serde_json::from_str(&b)
                    .map_err(|e| StoreError::Corrupt(format!("the checkpoint of {source}: {e}")))
            })
            .transpose()
        })
        .await
    }
    async fn save_checkpoint(&self, source: &SourceName, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        let body = serde_json::to_string(checkpoint)
            .map_err(|e| StoreError::Unavailable(format!("cannot encode the checkpoint of {source}: {e}")))?;
        let op = Op::SaveCheckpoint {
            source: source.clone(),
            body,
        };
        self.ask(op).await
    }
}

#[async_trait]
impl Browse for SqliteLedger {
    async fn list(&self, filter: &ListFilter) -> Result<Vec<Record>, StoreError> {
        use rusqlite::types::Value;
        let limit = i64::try_from(filter.limit).unwrap_or(i64::MAX);
        // Only the conditions the filter sets, so that SQLite picks the index that serves them (see SCHEMA_V3).
        let mut conditions = vec!["NOT (status = 'COMPLETED' AND expires_at <= ?1)".to_owned()];
        let mut values: Vec<Value> = Vec::new();
        let mut bind = |condition: &str, value: Value| {
            values.push(value);
            conditions.push(condition.replace('?', &format!("?{}", values.len() + 1)));
        };
        if let Some(st) = filter.status {
            bind("status = ?", Value::Text(st.as_str().to_owned()));
        }
        if let Some(source) = &filter.source {
            bind("source = ?", Value::Text(source.as_str().to_owned()));
        }
        if let Some(t) = &filter.event_type {
            bind("event_type = ?", Value::Text(t.clone()));
        }
        if let Some(id) = &filter.event_id {
            bind("event_id = ?", Value::Text(id.as_str().to_owned()));
        }
        if let Some(t) = filter.received_from {
            bind("received_at >= ?", Value::Integer(t));
        }
        if let Some(t) = filter.received_to {
            bind("received_at < ?", Value::Integer(t));
        }
        if filter.received_to.is_none() && filter.before.is_none() {
            // A bound the planner can see: without one, the bundled SQLite sorted the whole table for the
            // unfiltered newest-first page rather than walk `events_received` backwards, a cost growing with the
            // table.
            bind("received_at <= ?", Value::Integer(i64::MAX));
        }
        if let Some(c) = &filter.before {
            bind("received_at <= ?", Value::Integer(c.received_at));
            let n = values.len() + 1;
            values.push(Value::Text(c.source.as_str().to_owned()));
            values.push(Value::Text(c.event_id.as_str().to_owned()));
            conditions.push(format!(
                "(received_at < ?{} OR (source, event_id) < (?{}, ?{}))",
                n,
                n + 1,
                n + 2
            ));
        }
        if filter.event_id.is_some() && filter.source.is_none() {
            conditions.push(format!("source IN ({SOURCES})"));
        }
        values.push(Value::Integer(limit));
        let query = format!(
            "SELECT {COLUMNS} FROM events WHERE {} ORDER BY received_at DESC, source DESC, event_id DESC LIMIT ?{}",
            conditions.join(" AND "),
            values.len() + 1
        );
        self.read(move |c, now| {
            let mut stmt = c.prepare_cached(&query).map_err(sql)?;
            let params = std::iter::once(Value::Integer(now)).chain(values);
            let rows = stmt
                .query_map(rusqlite::params_from_iter(params), |r| {
                    event_row(r).map(|(_, record)| record)
                })
                .map_err(sql)?;
            rows.collect::<rusqlite::Result<_>>().map_err(sql)
        })
        .await
    }
    /// Each count from an index: by status from `events_status`, per source from `events_source`, less the
    /// completed events past retention (from `events_expiry`), the open and dead ones per source looked up.
    async fn summary(&self) -> Result<Summary, StoreError> {
        self.read(|c, now| summarize(c, now).map_err(sql)).await
    }
    fn lists_by_scan(&self, _filter: &ListFilter) -> bool {
        false
    }
}

#[async_trait]
impl Upkeep for SqliteLedger {
    /// Serving, this process holds the data directory's lock, which admits one `inbox serve`: every other owner of a
    /// lease is gone. Without the lock (an operator command beside a server) it proves nothing.
    async fn gone_owners(&self, me: &str) -> Result<GoneOwners, StoreError> {
        Ok(match self.lock {
            Some(_) => GoneOwners::AllBut(me.to_owned()),
            None => GoneOwners::None,
        })
    }
    /// The data directory's lock proves the others gone: no heartbeat to record.
    /// The data directory's lock proves gone owners: no heartbeat.
    fn liveness(&self) -> Option<Duration> {
        None
    }
    async fn heartbeat(&self, _me: &str) -> Result<(), StoreError> {
        Ok(())
    }
    /// One `inbox serve` per data directory: whoever asks leads.
    async fn lead(&self, _role: &str, _me: &str, _hold: Duration) -> Result<Option<u64>, StoreError> {
        Ok(Some(0))
    }
    async fn end_leases(&self, gone: &GoneOwners) -> Result<usize, StoreError> {
        self.ask(Op::EndLeases(gone.clone())).await
    }
    async fn give_back(&self, owner: &str) -> Result<usize, StoreError> {
        let op = Op::GiveBack {
            owner: owner.to_owned(),
        };
        self.ask(op).await
    }
    /// Completed events past retention, and remembered bodies past their window, at most `limit` of each in one
    /// transaction.
    async fn purge(&self, limit: usize) -> Result<Purged, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.ask(Op::Purge { limit }).await
    }
    /// Whether another process (an `inbox replay`) committed since the last call: SQLite's `data_version`.
    async fn changed_elsewhere(&self) -> Result<bool, StoreError> {
        let v: i64 = self.ask(Op::DataVersion).await?;
        Ok(self.data_version.swap(v, std::sync::atomic::Ordering::Relaxed) != v)
    }
    async fn finish_bodies(&self, _limit: usize) -> Result<usize, StoreError> {
        Ok(0)
    }
    async fn failure(&self) -> String {
        self.fatal.wait().await
    }
}
