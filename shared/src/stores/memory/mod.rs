//! The reference store, in memory: the shortest reading of what the ports promise, and so the executable
//! specification every store must match (the contract in `shared/src/contract/` runs over it and over every real
//! store). The machine's unit tests, the simulation and the model check run over it.
//!
//! Its state is a plain value ([`State`]: `Clone`, `Hash`, `Eq`), so that a model checker can hold it. Writes are
//! applied in [`State::applied`] at once; [`State::durable`] is what a crash keeps. With [`Durability::EachWrite`]
//! (the default) every write is durable before it is answered, as a real store's; with [`Durability::Deferred`]
//! the writes wait in [`State::unsynced`] until [`MemoryStore::sync`], and [`MemoryStore::crash`] loses exactly
//! those, as a process that answered before its sync would.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use crate::clock::{Clock, SystemClock};
use crate::model::{Event, EventId, EventKey, NewEvent, Record, SourceName, Status};
use crate::ports::{
    Browse, Bucket, Capabilities, Checkpoint, Checkpoints, Claim, Created, GoneOwners, Ledger, ListFilter,
    MarkDead, Purged, Replay, Settled, Settlement, StoreError, Summary, SweepIndex, Upkeep,
};
use crate::rules::{self, Due};

mod tables;

use tables::{apply, row};
pub use tables::{Answer, Stored, Tables, Write};

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct State {
    /// What a crash keeps.
    pub durable: Tables,
    /// What reads see: the durable tables with every write since the last sync applied.
    pub applied: Tables,
    /// The writes applied but not yet durable, each with the time it ran at.
    pub unsynced: Vec<(Write, i64)>,
}

/// When a write becomes durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// Before it is answered, as every real store's.
    #[default]
    EachWrite,
    /// When [`MemoryStore::sync`] says.
    Deferred,
}

/// The reference store. Cheap to clone: clones share one state.
#[derive(Clone)]
pub struct MemoryStore {
    state: Arc<Mutex<State>>,
    clock: Arc<dyn Clock>,
    due: Due,
    durability: Durability,
    /// Kept with heartbeats: many runtimes share it, and owners whose heartbeat ran out are gone
    /// ([`MemoryStore::with_heartbeats`]).
    liveness: Option<Duration>,
}

impl MemoryStore {
    /// An empty store whose due times use `grace`, on the system's clock.
    pub fn new(grace: Duration) -> Self {
        Self {
            state: Arc::default(),
            clock: Arc::new(SystemClock),
            due: Due::new(grace),
            durability: Durability::EachWrite,
            liveness: None,
        }
    }

    /// A store that holds `state` (one taken by [`MemoryStore::state`]), whose due times use `grace`, on the
    /// system's clock: the model check (`shared/tests/core/model/`) runs each step on a store rebuilt from the
    /// state it holds, and takes the state back after.
    pub fn from_state(state: State, grace: Duration) -> Self {
        Self {
            state: Arc::new(Mutex::new(state)),
            ..Self::new(grace)
        }
    }

    /// The clock every call runs at (the system's by default): a test or a simulation hands in one it moves.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// This handle's due times use `grace` (the state stays shared with every clone, as a second process's handle
    /// on one database).
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.due = Due::new(grace);
        self
    }

    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Shared by many runtimes, as PostgreSQL is: each owner keeps a heartbeat that vouches for it for `liveness`
    /// on the store's clock, an owner whose heartbeat ran out is gone ([`Upkeep::gone_owners`] names it, and
    /// [`Upkeep::end_leases`] ends its leases only while its heartbeat is still out), and each role has one holder at
    /// a time. Without it, one process holds the store, and every other owner is gone.
    pub fn with_heartbeats(mut self, liveness: Duration) -> Self {
        self.liveness = Some(liveness);
        self
    }

    /// The state as it stands.
    pub fn state(&self) -> State {
        crate::sync::lock(&self.state).clone()
    }

    /// Makes every applied write durable.
    pub fn sync(&self) {
        let mut state = crate::sync::lock(&self.state);
        for (write, now) in std::mem::take(&mut state.unsynced) {
            let _ = apply(&mut state.durable, &write, now, &self.due);
        }
    }

    /// Damage, as a disk or an operator could do to a real store: the body of `key`'s event is gone, durable state
    /// included, so that its record is corrupt (claimed as [`Claim::Corrupt`], never run). Whether there was one.
    pub fn lose_body(&self, key: &EventKey) -> bool {
        let mut state = crate::sync::lock(&self.state);
        let State { durable, applied, .. } = &mut *state;
        let mut lost = false;
        for t in [durable, applied] {
            if let Some(s) = t.events.get_mut(&row(key)) {
                lost |= s.payload.take().is_some();
            }
        }
        lost
    }

    /// A crash: what was not synced is lost.
    pub fn crash(&self) {
        let mut state = crate::sync::lock(&self.state);
        state.unsynced.clear();
        state.applied = state.durable.clone();
    }

    fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    fn write(&self, write: Write) -> Answer {
        let now = self.now();
        let mut state = crate::sync::lock(&self.state);
        let answer = apply(&mut state.applied, &write, now, &self.due);
        match self.durability {
            Durability::EachWrite => {
                let _ = apply(&mut state.durable, &write, now, &self.due);
            }
            Durability::Deferred => state.unsynced.push((write, now)),
        }
        answer
    }

    fn read<T>(&self, f: impl FnOnce(&Tables) -> T) -> T {
        f(&crate::sync::lock(&self.state).applied)
    }
}

fn unexpected(answer: Answer) -> StoreError {
    StoreError::Unavailable(format!("the memory store answered {answer:?}"))
}

#[async_trait]
impl Ledger for MemoryStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            claims_in_create: true,
            trusts_announcements: false,
            indexes_every_listing: true,
            keeps_bodies_apart: false,
            eventually_consistent_index: false,
            shared_by_many: self.liveness.is_some(),
        }
    }
    async fn create(&self, event: NewEvent) -> Result<Created, StoreError> {
        match self.write(Write::Create { event, claim: None }) {
            Answer::Created(created, _) => Ok(created),
            other => Err(unexpected(other)),
        }
    }
    /// The ledger is its own queue: an announced create is indexed like any other.
    async fn create_announced(&self, event: NewEvent) -> Result<Created, StoreError> {
        self.create(event).await
    }
    async fn create_batch(&self, events: Vec<NewEvent>) -> Result<Vec<Created>, StoreError> {
        let events = events.into_iter().map(unwatched).collect();
        match self.write(Write::CreateBatch(events)) {
            Answer::CreatedBatch(created) => Ok(created),
            other => Err(unexpected(other)),
        }
    }
    async fn create_claimed(
        &self,
        event: NewEvent,
        owner: &str,
        lease: Duration,
    ) -> Result<(Created, Option<Event>), StoreError> {
        let claim = Some((owner.to_owned(), lease));
        match self.write(Write::Create { event, claim }) {
            Answer::Created(created, claimed) => Ok((created, claimed.map(|e| *e))),
            other => Err(unexpected(other)),
        }
    }
    async fn peek(&self, key: &EventKey) -> Result<Option<Record>, StoreError> {
        let now = self.now();
        Ok(self.read(|t| {
            t.events
                .get(&row(key))
                .map(|s| s.record.clone())
                .filter(|r| !r.is_expired(now))
        }))
    }
    async fn claim(&self, key: &EventKey, owner: &str, lease: Duration) -> Result<Claim, StoreError> {
        let write = Write::Claim {
            key: key.clone(),
            owner: owner.to_owned(),
            lease,
        };
        match self.write(write) {
            Answer::Claim(claim) => Ok(claim),
            other => Err(unexpected(other)),
        }
    }
    async fn settle(
        &self,
        key: &EventKey,
        owner: &str,
        settlement: Settlement,
    ) -> Result<Settled, StoreError> {
        let write = Write::Settle {
            key: key.clone(),
            owner: owner.to_owned(),
            settlement,
        };
        match self.write(write) {
            Answer::Settled(settled) => Ok(settled),
            other => Err(unexpected(other)),
        }
    }
    /// Bodies live in the record: nothing is owed after completion.
    async fn completed(&self, _key: &EventKey, _owner: &str) -> Result<(), StoreError> {
        Ok(())
    }
    async fn release(&self, key: &EventKey, owner: &str) -> Result<Settled, StoreError> {
        let write = Write::Release {
            key: key.clone(),
            owner: owner.to_owned(),
        };
        match self.write(write) {
            Answer::Settled(settled) => Ok(settled),
            other => Err(unexpected(other)),
        }
    }
    async fn mark_dead(&self, key: &EventKey, reason: &str) -> Result<MarkDead, StoreError> {
        let write = Write::MarkDead {
            key: key.clone(),
            reason: reason.to_owned(),
        };
        match self.write(write) {
            Answer::MarkDead(dead) => Ok(dead),
            other => Err(unexpected(other)),
        }
    }
    async fn mark_notified(&self, key: &EventKey) -> Result<(), StoreError> {
        self.write(Write::MarkNotified(key.clone()));
        Ok(())
    }
    async fn replay(&self, key: &EventKey, force: bool) -> Result<Replay, StoreError> {
        let write = Write::Replay {
            key: key.clone(),
            force,
        };
        match self.write(write) {
            Answer::Replay(replay) => Ok(replay),
            other => Err(unexpected(other)),
        }
    }
    async fn get(&self, key: &EventKey) -> Result<Option<Event>, StoreError> {
        let now = self.now();
        self.read(|t| {
            let Some(s) = t.events.get(&row(key)).filter(|s| !s.record.is_expired(now)) else {
                return Ok(None);
            };
            match &s.payload {
                Some(body) => Ok(Some(s.record.clone().with_payload(body.clone()))),
                None => Err(StoreError::Corrupt(rules::missing_body(&s.record))),
            }
        })
    }
    fn check(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

#[async_trait]
impl SweepIndex for MemoryStore {
    async fn due(&self, ahead: Duration, limit: usize) -> Result<Vec<Record>, StoreError> {
        let due_before = self.now().saturating_add(crate::time::ms(ahead));
        Ok(self.read(|t| {
            let mut due: Vec<_> = t
                .events
                .values()
                .filter_map(|s| s.due_at.filter(|d| *d <= due_before).map(|d| (d, &s.record)))
                .collect();
            due.sort_by(|(a, ra), (b, rb)| (a, &ra.source, &ra.event_id).cmp(&(b, &rb.source, &rb.event_id)));
            due.into_iter().take(limit).map(|(_, r)| r.clone()).collect()
        }))
    }
    async fn sent_again(&self, key: &EventKey, status: Status, updated_at: i64) -> Result<(), StoreError> {
        let write = Write::SentAgain {
            key: key.clone(),
            status,
            updated_at,
        };
        self.write(write);
        Ok(())
    }
    async fn defer_alarm(&self, key: &EventKey, until: i64) -> Result<(), StoreError> {
        self.write(Write::DeferAlarm {
            key: key.clone(),
            until,
        });
        Ok(())
    }
}

#[async_trait]
impl Checkpoints for MemoryStore {
    async fn present(&self, source: &SourceName, ids: &[EventId]) -> Result<HashSet<EventId>, StoreError> {
        Ok(self.read(|t| {
            ids.iter()
                .filter(|id| t.events.contains_key(&(source.clone(), (*id).clone())))
                .cloned()
                .collect()
        }))
    }
    async fn checkpoint(&self, source: &SourceName) -> Result<Option<Checkpoint>, StoreError> {
        Ok(self.read(|t| t.checkpoints.get(source).cloned()))
    }
    async fn save_checkpoint(&self, source: &SourceName, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        self.write(Write::SaveCheckpoint(source.clone(), checkpoint.clone()));
        Ok(())
    }
}

/// Hours the overview's chart covers.
const TIMELINE_HOURS: i64 = 24;
const HOUR_MS: i64 = 3_600_000;
/// The statuses counted apart from the completed ones, in the order their names sort.
const OPEN_AND_DEAD: [Status; 4] = [Status::Dead, Status::Failed, Status::Processing, Status::Received];

#[async_trait]
impl Browse for MemoryStore {
    async fn list(&self, filter: &ListFilter) -> Result<Vec<Record>, StoreError> {
        let now = self.now();
        Ok(self.read(|t| {
            let mut found: Vec<Record> = t
                .events
                .values()
                .map(|s| &s.record)
                .filter(|r| !r.is_expired(now) && filter.admits(r))
                .cloned()
                .collect();
            found.sort_by(|a, b| {
                (b.received_at, &b.source, &b.event_id).cmp(&(a.received_at, &a.source, &a.event_id))
            });
            found.truncate(filter.limit);
            found
        }))
    }
    async fn summary(&self) -> Result<Summary, StoreError> {
        let now = self.now();
        Ok(self.read(|t| {
            let live = || {
                t.events
                    .values()
                    .map(|s| &s.record)
                    .filter(|r| !r.is_expired(now))
            };
            let by_status = Status::ALL
                .iter()
                .map(|st| (*st, Some(live().filter(|r| r.status == *st).count() as u64)))
                .collect();
            let mut by_source = Vec::new();
            let sources: std::collections::BTreeSet<&SourceName> = t.events.keys().map(|(s, _)| s).collect();
            for source in sources {
                for st in OPEN_AND_DEAD.iter().chain([Status::Completed].iter()) {
                    let n = live().filter(|r| &r.source == source && r.status == *st).count() as u64;
                    if n > 0 {
                        by_source.push((source.clone(), *st, n));
                    }
                }
            }
            let oldest_open = live()
                .filter(|r| matches!(r.status, Status::Received | Status::Processing | Status::Failed))
                .map(|r| r.received_at)
                .min();
            let first = (now / HOUR_MS - (TIMELINE_HOURS - 1)) * HOUR_MS;
            let mut timeline: Vec<Bucket> = (0..TIMELINE_HOURS)
                .map(|h| Bucket {
                    start: first + h * HOUR_MS,
                    ..Default::default()
                })
                .collect();
            for r in t
                .events
                .values()
                .map(|s| &s.record)
                .filter(|r| r.received_at >= first)
            {
                let Some(bucket) = usize::try_from((r.received_at - first) / HOUR_MS)
                    .ok()
                    .and_then(|h| timeline.get_mut(h))
                else {
                    continue;
                };
                bucket.accepted += 1;
                match r.status {
                    Status::Completed => bucket.completed += 1,
                    Status::Dead => bucket.dead += 1,
                    _ => {}
                }
            }
            Summary {
                by_status,
                by_source,
                oldest_open,
                timeline,
            }
        }))
    }
    fn lists_by_scan(&self, _filter: &ListFilter) -> bool {
        false
    }
}

#[async_trait]
impl Upkeep for MemoryStore {
    /// One process holds it: every other owner is gone. Kept with heartbeats: the owners whose heartbeat ran out.
    async fn gone_owners(&self, me: &str) -> Result<GoneOwners, StoreError> {
        if self.liveness.is_none() {
            return Ok(GoneOwners::AllBut(me.to_owned()));
        }
        let now = self.now();
        Ok(GoneOwners::These(self.read(|t| {
            t.owners
                .iter()
                .filter(|(owner, alive_until)| **alive_until < now && owner.as_str() != me)
                .map(|(owner, _)| owner.clone())
                .collect()
        })))
    }
    /// One process holds it: no heartbeat to record. Kept with heartbeats: `me`'s, for the liveness period.
    async fn heartbeat(&self, me: &str) -> Result<(), StoreError> {
        if let Some(alive_for) = self.liveness {
            let heartbeat = Write::Heartbeat {
                owner: me.to_owned(),
                alive_for,
            };
            match self.write(heartbeat) {
                Answer::Done => {}
                other => return Err(unexpected(other)),
            }
        }
        Ok(())
    }
    fn liveness(&self) -> Option<Duration> {
        self.liveness
    }
    /// One process holds it: whoever asks leads. Kept with heartbeats: one holder at a time.
    async fn lead(&self, role: &str, me: &str, hold: Duration) -> Result<Option<u64>, StoreError> {
        if self.liveness.is_none() {
            return Ok(Some(0));
        }
        let lead = Write::Lead {
            role: role.to_owned(),
            owner: me.to_owned(),
            hold,
        };
        match self.write(lead) {
            Answer::Term(term) => Ok(term),
            other => Err(unexpected(other)),
        }
    }
    async fn end_leases(&self, gone: &GoneOwners) -> Result<usize, StoreError> {
        // Kept with heartbeats, a list of gone owners is checked again as the leases end: an owner listed a moment
        // ago may have beaten since, and one with no heartbeat at all is not proven gone.
        let write = match (gone, self.liveness) {
            (GoneOwners::These(owners), Some(_)) => Write::EndLeasesOfExpired(owners.clone()),
            _ => Write::EndLeases(gone.clone()),
        };
        match self.write(write) {
            Answer::Count(n) => Ok(n),
            other => Err(unexpected(other)),
        }
    }
    async fn give_back(&self, owner: &str) -> Result<usize, StoreError> {
        match self.write(Write::GiveBack(owner.to_owned())) {
            Answer::Count(n) => Ok(n),
            other => Err(unexpected(other)),
        }
    }
    async fn purge(&self, limit: usize) -> Result<Purged, StoreError> {
        match self.write(Write::Purge(limit)) {
            Answer::Purged(purged) => Ok(purged),
            other => Err(unexpected(other)),
        }
    }
    async fn changed_elsewhere(&self) -> Result<bool, StoreError> {
        Ok(false)
    }
    async fn finish_bodies(&self, _limit: usize) -> Result<usize, StoreError> {
        Ok(0)
    }
    async fn failure(&self) -> String {
        std::future::pending().await
    }
}

/// A batch's item as the port reads it: looking for no resent bodies.
fn unwatched(event: NewEvent) -> NewEvent {
    NewEvent {
        resent_bodies: crate::model::ResentBodies::Ignored,
        ..event
    }
}
