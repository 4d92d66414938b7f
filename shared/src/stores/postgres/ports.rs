//! The ports, as PostgreSQL answers them: creates through the group commit ([`super::batch`]), every other write one
//! conditional statement on a pooled connection, every read through an index.

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use tokio_postgres::types::ToSql;

use super::batch::Job;
use super::completions::Completion;
use super::rows::{find, prepare, records, with_payload, COLUMNS};
use super::{execute, query, query_opt, transitions as t, PostgresStore};
use crate::model::{Event, EventId, EventKey, NewEvent, Record, ResentBodies, SourceName, Status};
use crate::ports::{
    Browse, Bucket, Capabilities, Checkpoint, Checkpoints, Claim, Created, GoneOwners, Ledger, ListFilter,
    MarkDead, Purged, Replay, Settled, Settlement, StoreError, Summary, SweepIndex, Upkeep,
};
use crate::rules;
use crate::time::ms;

impl PostgresStore {
    /// Hands `items` to the group commit and waits for the commit that holds them.
    async fn create_all(
        &self,
        items: Vec<super::rows::Prepared>,
    ) -> Result<Vec<(Created, Option<Event>)>, StoreError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        // The store's clock is read as the call is made, as a caller's time was; without one, the batch reads the
        // database's.
        self.creates
            .try_send(Job {
                items,
                at: self.clock_now(),
                reply,
            })
            .map_err(|e| match e {
                tokio::sync::mpsc::error::TrySendError::Full(_) => StoreError::Busy,
                tokio::sync::mpsc::error::TrySendError::Closed(_) => {
                    StoreError::Unavailable("the PostgreSQL store's batcher stopped".into())
                }
            })?;
        answer
            .await
            .map_err(|_| StoreError::Unavailable("the PostgreSQL store's batcher stopped".into()))?
    }

    async fn create_one(
        &self,
        event: NewEvent,
        claim: Option<(String, i64)>,
    ) -> Result<(Created, Option<Event>), StoreError> {
        let mut answers = self.create_all(vec![prepare(event, claim)?]).await?;
        answers
            .pop()
            .ok_or_else(|| StoreError::Unavailable("a create was answered with nothing".into()))
    }
}

#[async_trait]
impl Ledger for PostgresStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            claims_in_create: true,
            trusts_announcements: false,
            indexes_every_listing: true,
            keeps_bodies_apart: false,
            eventually_consistent_index: false,
            shared_by_many: true,
        }
    }
    async fn create(&self, event: NewEvent) -> Result<Created, StoreError> {
        Ok(self.create_one(event, None).await?.0)
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
        self.create_one(event, Some((owner.to_owned(), ms(lease)))).await
    }
    async fn create_batch(&self, events: Vec<NewEvent>) -> Result<Vec<Created>, StoreError> {
        let items = events
            .into_iter()
            .map(|event| {
                // No item looks for resent bodies (the port's promise): a batch's scheme signs each id with its body.
                let event = NewEvent {
                    resent_bodies: ResentBodies::Ignored,
                    ..event
                };
                prepare(event, None)
            })
            .collect::<Result<_, _>>()?;
        Ok(self
            .create_all(items)
            .await?
            .into_iter()
            .map(|(created, _)| created)
            .collect())
    }
    async fn peek(&self, key: &EventKey) -> Result<Option<Record>, StoreError> {
        let c = self.client().await?;
        let now = self.now(&c).await?;
        Ok(find(&c, key)
            .await?
            .map(|(_, r)| r)
            .filter(|r| !r.is_expired(now)))
    }
    async fn claim(&self, key: &EventKey, owner: &str, lease: Duration) -> Result<Claim, StoreError> {
        let c = self.client().await?;
        t::claim(&c, key, owner, ms(lease), self.clock_now()).await
    }
    async fn settle(
        &self,
        key: &EventKey,
        owner: &str,
        settlement: Settlement,
    ) -> Result<Settled, StoreError> {
        if let Settlement::Completed { retention } = settlement {
            // Every event ends here: group-committed with the other completions waiting (`completions`).
            let (reply, answer) = tokio::sync::oneshot::channel();
            let completion = Completion {
                key: key.clone(),
                owner: owner.to_owned(),
                at: self.clock_now(),
                retention,
                reply,
            };
            let gone = || StoreError::Unavailable("the completion batcher stopped".into());
            self.completions.send(completion).await.map_err(|_| gone())?;
            return answer.await.map_err(|_| gone())?;
        }
        let c = self.client().await?;
        t::settle(&c, key, owner, &settlement, self.clock_now(), &self.due).await
    }
    /// Bodies live beside their records: nothing is owed after completion.
    async fn completed(&self, _key: &EventKey, _owner: &str) -> Result<(), StoreError> {
        Ok(())
    }
    async fn release(&self, key: &EventKey, owner: &str) -> Result<Settled, StoreError> {
        let c = self.client().await?;
        let now = self.now(&c).await?;
        t::release(&c, key, owner, now, &self.due).await
    }
    async fn mark_dead(&self, key: &EventKey, reason: &str) -> Result<MarkDead, StoreError> {
        let c = self.client().await?;
        let now = self.now(&c).await?;
        t::mark_dead(&c, key, reason, now, &self.due).await
    }
    async fn mark_notified(&self, key: &EventKey) -> Result<(), StoreError> {
        let c = self.client().await?;
        let now = self.now(&c).await?;
        execute(
            &c,
            "UPDATE events SET notified_at = $3, due_at = NULL
             WHERE source = $1 AND event_id = $2 AND status = 'DEAD' AND notified_at IS NULL",
            &[&key.source.as_str(), &key.event_id.as_str(), &now],
        )
        .await?;
        Ok(())
    }
    async fn replay(&self, key: &EventKey, force: bool) -> Result<Replay, StoreError> {
        let c = self.client().await?;
        let now = self.now(&c).await?;
        t::replay(&c, key, force, now, &self.due).await
    }
    async fn get(&self, key: &EventKey) -> Result<Option<Event>, StoreError> {
        let c = self.client().await?;
        let now = self.now(&c).await?;
        match find(&c, key).await? {
            Some((_, e)) if e.is_expired(now) => Ok(None),
            Some((id, e)) => match with_payload(&c, id, e).await? {
                Ok(event) => Ok(Some(event)),
                Err(event) => Err(StoreError::Corrupt(rules::missing_body(&event))),
            },
            None => Ok(None),
        }
    }
    fn check(&self) -> Result<(), StoreError> {
        if self.creates.is_closed() {
            return Err(StoreError::Unavailable(
                "the PostgreSQL store's batcher stopped".into(),
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl SweepIndex for PostgresStore {
    async fn due(&self, ahead: Duration, limit: usize) -> Result<Vec<Record>, StoreError> {
        let c = self.client().await?;
        // On the database's clock, which set the due times, not this instance's.
        let due_before = self.now(&c).await?.saturating_add(crate::time::ms(ahead));
        t::due(&c, due_before, i64::try_from(limit).unwrap_or(i64::MAX)).await
    }
    async fn sent_again(&self, key: &EventKey, status: Status, updated_at: i64) -> Result<(), StoreError> {
        let c = self.client().await?;
        let now = self.now(&c).await?;
        execute(
            &c,
            "UPDATE events SET due_at = $5
             WHERE source = $1 AND event_id = $2 AND status = $3 AND updated_at = $4 AND due_at IS NOT NULL",
            &[
                &key.source.as_str(),
                &key.event_id.as_str(),
                &status.as_str(),
                &updated_at,
                &self.due.resent(now, updated_at),
            ],
        )
        .await?;
        Ok(())
    }
    async fn defer_alarm(&self, key: &EventKey, until: i64) -> Result<(), StoreError> {
        let c = self.client().await?;
        execute(
            &c,
            "UPDATE events SET due_at = $3
             WHERE source = $1 AND event_id = $2 AND status = 'DEAD' AND notified_at IS NULL",
            &[&key.source.as_str(), &key.event_id.as_str(), &until],
        )
        .await?;
        Ok(())
    }
}

#[async_trait]
impl Checkpoints for PostgresStore {
    async fn present(&self, source: &SourceName, ids: &[EventId]) -> Result<HashSet<EventId>, StoreError> {
        let c = self.client().await?;
        let wanted: Vec<&str> = ids.iter().map(EventId::as_str).collect();
        // Any record, expired or not: past retention "done and forgotten" looks like "never received".
        let rows = query(
            &c,
            "SELECT event_id FROM events WHERE source = $1 AND event_id = ANY($2)",
            &[&source.as_str(), &wanted],
        )
        .await?;
        Ok(rows
            .iter()
            .filter_map(|r| EventId::parse(r.get::<_, &str>(0)).ok())
            .collect())
    }
    async fn checkpoint(&self, source: &SourceName) -> Result<Option<Checkpoint>, StoreError> {
        let c = self.client().await?;
        let row = query_opt(
            &c,
            "SELECT body FROM checkpoints WHERE source = $1",
            &[&source.as_str()],
        )
        .await?;
        row.map(|r| {
            serde_json::from_str(r.get::<_, &str>(0))
                .map_err(|e| StoreError::Corrupt(format!("the checkpoint of {source}: {e}")))
        })
        .transpose()
    }
    async fn save_checkpoint(&self, source: &SourceName, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        let body = serde_json::to_string(checkpoint)
            .map_err(|e| StoreError::Unavailable(format!("cannot encode the checkpoint of {source}: {e}")))?;
        let c = self.client().await?;
        execute(
            &c,
            "INSERT INTO checkpoints (source, body) VALUES ($1, $2)
             ON CONFLICT (source) DO UPDATE SET body = excluded.body",
            &[&source.as_str(), &body],
        )
        .await?;
        Ok(())
    }
}

/// A listing's statement and its values: the newest first, past retention left out (`plans` checks that each filter
/// is served by an index).
pub(super) fn list_query(filter: &ListFilter, now: i64) -> (String, Vec<Box<dyn ToSql + Sync + Send>>) {
    let mut values: Vec<Box<dyn ToSql + Sync + Send>> = vec![Box::new(now)];
    let mut conditions = vec!["NOT (status = 'COMPLETED' AND expires_at <= $1)".to_owned()];
    let mut bind = |condition: &str, value: Box<dyn ToSql + Sync + Send>| {
        values.push(value);
        conditions.push(condition.replace('?', &format!("${}", values.len())));
    };
    if let Some(st) = filter.status {
        bind("status = ?", Box::new(st.as_str().to_owned()));
    }
    if let Some(source) = &filter.source {
        bind("source = ?", Box::new(source.as_str().to_owned()));
    }
    if let Some(ty) = &filter.event_type {
        bind("event_type = ?", Box::new(ty.clone()));
    }
    if let Some(id) = &filter.event_id {
        bind("event_id = ?", Box::new(id.as_str().to_owned()));
    }
    if let Some(from) = filter.received_from {
        bind("received_at >= ?", Box::new(from));
    }
    if let Some(to) = filter.received_to {
        bind("received_at < ?", Box::new(to));
    }
    if let Some(cursor) = &filter.before {
        values.push(Box::new(cursor.received_at));
        values.push(Box::new(cursor.source.as_str().to_owned()));
        values.push(Box::new(cursor.event_id.as_str().to_owned()));
        let n = values.len();
        conditions.push(format!(
            "(received_at, source, event_id) < (${}, ${}, ${})",
            n - 2,
            n - 1,
            n
        ));
    }
    values.push(Box::new(i64::try_from(filter.limit).unwrap_or(i64::MAX)));
    let sql = format!(
        "SELECT {COLUMNS} FROM events WHERE {} ORDER BY received_at DESC, source DESC, event_id DESC LIMIT ${}",
        conditions.join(" AND "),
        values.len()
    );
    (sql, values)
}

/// Retention's deletes, at most `$2` rows a statement: the rows are picked (and locked) once in a materialized CTE
/// and joined by key, since `WHERE id IN (SELECT … LIMIT n)` may run its subquery more than once and take more.
pub(super) const PURGE_EVENTS: &str = "WITH doomed AS MATERIALIZED
        (SELECT id FROM events WHERE status = 'COMPLETED' AND expires_at <= $1 ORDER BY expires_at LIMIT $2
         FOR UPDATE SKIP LOCKED)
    DELETE FROM events USING doomed WHERE events.id = doomed.id";
pub(super) const PURGE_BODIES: &str = "WITH doomed AS MATERIALIZED
        (SELECT source, event_type, payload_sha256 FROM bodies WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2
         FOR UPDATE SKIP LOCKED)
    DELETE FROM bodies b USING doomed d
    WHERE (b.source, b.event_type, b.payload_sha256) = (d.source, d.event_type, d.payload_sha256)";

/// Hours the overview's chart covers.
const TIMELINE_HOURS: i64 = 24;
const HOUR_MS: i64 = 3_600_000;

/// The overview's reads, each served by an index (`plans` checks it): the open and dead events by source and
/// status; the completed ones kept, by source; the oldest open event; the last day's events by hour and status.
pub(super) const SUMMARY_OPEN: &str =
    "SELECT source, status, count(*) FROM events WHERE status <> 'COMPLETED' GROUP BY source, status";
pub(super) const SUMMARY_COMPLETED: &str =
    "SELECT source, count(*) FROM events WHERE status = 'COMPLETED' AND expires_at > $1 GROUP BY source";
pub(super) const SUMMARY_OLDEST: &str =
    "SELECT min(received_at) FROM events WHERE status IN ('RECEIVED', 'PROCESSING', 'FAILED')";
pub(super) const SUMMARY_TIMELINE: &str =
    "SELECT (received_at - $1) / $2, status, count(*) FROM events WHERE received_at >= $1 GROUP BY 1, 2";

#[async_trait]
impl Browse for PostgresStore {
    async fn list(&self, filter: &ListFilter) -> Result<Vec<Record>, StoreError> {
        let c = self.client().await?;
        let now = self.now(&c).await?;
        let (sql, values) = list_query(filter, now);
        let params: Vec<&(dyn ToSql + Sync)> =
            values.iter().map(|v| v.as_ref() as &(dyn ToSql + Sync)).collect();
        records(&query(&c, &sql, &params).await?)
    }
    /// Each count from an index: the open and dead events from `events_open`, the completed ones per source and not
    /// yet past retention by an index-only scan of `events_expiry_source` (the plans are checked by `plans`).
    async fn summary(&self) -> Result<Summary, StoreError> {
        let c = self.client().await?;
        let now = self.now(&c).await?;
        let mut by_status: Vec<(Status, Option<u64>)> = Status::ALL.iter().map(|st| (*st, Some(0))).collect();
        let mut by_source = Vec::new();
        let mut oldest_open = None;
        let open = query(&c, SUMMARY_OPEN, &[]).await?;
        let completed = query(&c, SUMMARY_COMPLETED, &[&now]).await?;
        let counted = open
            .iter()
            .map(|r| (r.get::<_, &str>(0), r.get::<_, &str>(1), r.get::<_, i64>(2)));
        let counted = counted.chain(
            completed
                .iter()
                .map(|r| (r.get::<_, &str>(0), "COMPLETED", r.get::<_, i64>(1))),
        );
        for (source, status, n) in counted {
            let n = u64::try_from(n).unwrap_or(0);
            let source =
                SourceName::parse(source).map_err(|_| StoreError::Corrupt(format!("bad source {source}")))?;
            let status: Status = status
                .parse()
                .map_err(|_| StoreError::Corrupt(format!("bad status {status}")))?;
            if let Some(slot) = by_status.iter_mut().find(|(s, _)| *s == status) {
                slot.1 = Some(slot.1.unwrap_or(0) + n);
            }
            by_source.push((source, status, n));
        }
        for r in query(&c, SUMMARY_OLDEST, &[]).await? {
            oldest_open = r.get::<_, Option<i64>>(0);
        }
        let first = (now / HOUR_MS - (TIMELINE_HOURS - 1)) * HOUR_MS;
        let mut timeline: Vec<Bucket> = (0..TIMELINE_HOURS)
            .map(|h| Bucket {
                start: first + h * HOUR_MS,
                ..Default::default()
            })
            .collect();
        for r in query(&c, SUMMARY_TIMELINE, &[&first, &HOUR_MS]).await? {
            let Some(bucket) = usize::try_from(r.get::<_, i64>(0))
                .ok()
                .and_then(|h| timeline.get_mut(h))
            else {
                continue;
            };
            let n = u64::try_from(r.get::<_, i64>(2)).unwrap_or(0);
            bucket.accepted += n;
            match r.get::<_, &str>(1) {
                "COMPLETED" => bucket.completed += n,
                "DEAD" => bucket.dead += n,
                _ => {}
            }
        }
        Ok(Summary {
            by_status,
            by_source,
            oldest_open,
            timeline,
        })
    }
    fn lists_by_scan(&self, _filter: &ListFilter) -> bool {
        false
    }
}

/// The time of an owner's statement as SQL: `$2` (ms, from the store's own clock: a test's) or the database's `now()`.
const AT: &str = "coalesce(to_timestamp($2::float8 / 1000), now())";

#[async_trait]
impl Upkeep for PostgresStore {
    /// The owners whose heartbeat ran out on the database's clock (never `me`): gone, their leases end now. An owner
    /// that never kept a heartbeat (an operator command) is never proven gone; its leases end at their expiry.
    async fn gone_owners(&self, me: &str) -> Result<GoneOwners, StoreError> {
        let c = self.client().await?;
        let rows = query(
            &c,
            &format!("SELECT owner FROM owners WHERE alive_until < {AT} AND owner <> $1"),
            &[&me, &self.clock_now().map(|ms| ms as f64)],
        )
        .await?;
        Ok(GoneOwners::These(
            rows.iter().map(|r| r.get::<_, String>(0)).collect(),
        ))
    }
    fn liveness(&self) -> Option<Duration> {
        Some(self.liveness)
    }
    /// On a connection of its own ([`PostgresStore::beat_client`]), so that no other work of this instance (a
    /// pool busy with creates, a long purge) holds it up, with a short statement timeout.
    async fn heartbeat(&self, me: &str) -> Result<(), StoreError> {
        let c = self.beat_client().await?;
        let alive = i64::try_from(self.liveness.as_millis()).unwrap_or(i64::MAX);
        execute(
            &c,
            "INSERT INTO owners (owner, alive_until)
                 VALUES ($1, coalesce(to_timestamp($3::float8 / 1000), now()) + $2 * interval '1 millisecond')
             ON CONFLICT (owner) DO UPDATE SET alive_until = excluded.alive_until",
            &[&me, &(alive as f64), &self.clock_now().map(|ms| ms as f64)],
        )
        .await?;
        Ok(())
    }
    /// A lease row per role on the database's clock: taken when free or run out, renewed by its holder, the term
    /// counting every change of holder. Two that believe they lead at once (a holder paused past its hold) still
    /// act once on each item: every write a pass makes is conditional.
    async fn lead(&self, role: &str, me: &str, hold: Duration) -> Result<Option<u64>, StoreError> {
        let c = self.client().await?;
        let hold = i64::try_from(hold.as_millis()).unwrap_or(i64::MAX) as f64;
        let row = query_opt(
            &c,
            "INSERT INTO leaders AS l (role, holder, term, until)
                 VALUES ($1, $2, 1, now() + $3 * interval '1 millisecond')
             ON CONFLICT (role) DO UPDATE
                 SET holder = excluded.holder, until = excluded.until,
                     term = CASE WHEN l.holder = excluded.holder THEN l.term ELSE l.term + 1 END
                 WHERE l.holder = excluded.holder OR l.until < now()
             RETURNING term",
            &[&role, &me, &hold],
        )
        .await?;
        Ok(row.map(|r| u64::try_from(r.get::<_, i64>(0)).unwrap_or(0)))
    }
    /// Ends the leases of the owners `gone` names and forgets those owners, in one transaction, each only while its
    /// heartbeat is registered and still out, read under the row's lock: an owner that beat since the list was read
    /// keeps its leases, and one with no row is not proven gone (it never kept a heartbeat, or another instance
    /// ended its leases already and any lease it holds now it took after beating again).
    async fn end_leases(&self, gone: &GoneOwners) -> Result<usize, StoreError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(super::pg)?;
        let now = self.now(&tx).await?;
        let mut ended = 0;
        match gone {
            GoneOwners::None => {}
            GoneOwners::AllBut(me) => ended += t::end_leases(&tx, me, false, now).await?,
            GoneOwners::These(owners) => {
                for owner in owners {
                    let expired = query_opt(
                        &tx,
                        &format!("SELECT alive_until < {AT} FROM owners WHERE owner = $1 FOR UPDATE"),
                        &[owner, &self.clock_now().map(|ms| ms as f64)],
                    )
                    .await?
                    .map(|r| r.get::<_, bool>(0));
                    if expired != Some(true) {
                        continue;
                    }
                    ended += t::end_leases(&tx, owner, true, now).await?;
                    execute(
                        &tx,
                        "UPDATE leaders SET until = '-infinity' WHERE holder = $1",
                        &[owner],
                    )
                    .await?;
                    execute(&tx, "DELETE FROM owners WHERE owner = $1", &[owner]).await?;
                }
            }
        }
        tx.commit().await.map_err(super::pg)?;
        Ok(ended)
    }
    async fn give_back(&self, owner: &str) -> Result<usize, StoreError> {
        let c = self.client().await?;
        let now = self.now(&c).await?;
        let ended = t::end_leases(&c, owner, true, now).await?;
        // Its roles too, so another instance leads at its next look rather than after the hold (in the next term:
        // a role's row stays, so its term only grows).
        execute(
            &c,
            "UPDATE leaders SET until = '-infinity' WHERE holder = $1",
            &[&owner],
        )
        .await?;
        execute(&c, "DELETE FROM owners WHERE owner = $1", &[&owner]).await?;
        Ok(ended)
    }
    /// Completed events past retention (their bodies with them, by the foreign key), and remembered bodies past
    /// their window, at most `limit` of each in one statement each.
    async fn purge(&self, limit: usize) -> Result<Purged, StoreError> {
        let c = self.client().await?;
        let now = self.now(&c).await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let events = execute(&c, PURGE_EVENTS, &[&now, &limit]).await?;
        let bodies = execute(&c, PURGE_BODIES, &[&now, &limit]).await?;
        Ok(Purged {
            events: usize::try_from(events).unwrap_or(usize::MAX),
            bodies: usize::try_from(bodies).unwrap_or(usize::MAX),
        })
    }
    /// Other instances change the store all the time: every look is a sweep's worth (the jittered poll).
    async fn changed_elsewhere(&self) -> Result<bool, StoreError> {
        Ok(true)
    }
    async fn finish_bodies(&self, _limit: usize) -> Result<usize, StoreError> {
        Ok(0)
    }
    /// A lost connection is a pool's business, not the process's: never.
    async fn failure(&self) -> String {
        std::future::pending().await
    }
}
