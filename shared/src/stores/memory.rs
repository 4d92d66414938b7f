//! The reference store, in memory: the shortest reading of what the ports promise, and so the executable
//! specification every store must match (the contract in `shared/src/contract/` runs over it and over every real
//! store). The machine's unit tests, the simulation and the model check run over it.
//!
//! Its state is a plain value ([`State`]: `Clone`, `Hash`, `Eq`), so that a model checker can hold it. Writes are
//! applied in [`State::applied`] at once; [`State::durable`] is what a crash keeps. With [`Durability::EachWrite`]
//! (the default) every write is durable before it is answered, as a real store's; with [`Durability::Deferred`]
//! the writes wait in [`State::unsynced`] until [`MemoryStore::sync`], and [`MemoryStore::crash`] loses exactly
//! those, as a process that answered before its sync would.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use crate::clock::{Clock, SystemClock};
use crate::model::{Event, EventId, EventKey, NewEvent, Origin, Record, ResentBodies, SourceName, Status};
use crate::ports::{
    Browse, Bucket, Capabilities, Checkpoint, Checkpoints, Claim, Created, GoneOwners, Ledger, ListFilter,
    MarkDead, Purged, Replay, Settled, Settlement, StoreError, Summary, SweepIndex, Upkeep,
};
use crate::rules::{self, Due};
use crate::time::ms;

/// One stored event: its record, its body, and when the sweeper must look at it (`None`: never).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Stored {
    pub record: Record,
    /// `None` once lost ([`MemoryStore::lose_body`]): the record is corrupt, claimed as such and never run.
    pub payload: Option<bytes::Bytes>,
    pub due_at: Option<i64>,
}

/// Everything a store keeps.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Tables {
    pub events: BTreeMap<(SourceName, EventId), Stored>,
    /// Which event holds a body, per source, type and SHA-256, and until when (the resent-body guard).
    pub bodies: BTreeMap<(SourceName, String, String), (EventId, i64)>,
    pub checkpoints: BTreeMap<SourceName, Checkpoint>,
}

/// A write, as data: what [`State::unsynced`] holds until a sync, replayed then on the durable tables.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Write {
    Create {
        event: NewEvent,
        claim: Option<(String, Duration)>,
    },
    CreateBatch(Vec<NewEvent>),
    Claim {
        key: EventKey,
        owner: String,
        lease: Duration,
    },
    Settle {
        key: EventKey,
        owner: String,
        settlement: Settlement,
    },
    Release {
        key: EventKey,
        owner: String,
    },
    MarkDead {
        key: EventKey,
        reason: String,
    },
    MarkNotified(EventKey),
    DeferAlarm {
        key: EventKey,
        until: i64,
    },
    SentAgain {
        key: EventKey,
        status: Status,
        updated_at: i64,
    },
    Replay {
        key: EventKey,
        force: bool,
    },
    EndLeases(GoneOwners),
    GiveBack(String),
    Purge(usize),
    SaveCheckpoint(SourceName, Checkpoint),
}

/// What a write answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Created(Created, Option<Box<Event>>),
    CreatedBatch(Vec<Created>),
    Claim(Claim),
    Settled(Settled),
    MarkDead(MarkDead),
    Replay(Replay),
    Count(usize),
    Purged(Purged),
    Done,
}

/// The store's whole state, a plain value.
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
}

impl MemoryStore {
    /// An empty store whose due times use `grace`, on the system's clock.
    pub fn new(grace: Duration) -> Self {
        Self {
            state: Arc::default(),
            clock: Arc::new(SystemClock),
            due: Due::new(grace),
            durability: Durability::EachWrite,
        }
    }

    /// The clock a call without a time of its own runs at.
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

    fn now(&self, now: Option<i64>) -> i64 {
        now.unwrap_or_else(|| self.clock.now_ms())
    }

    fn write(&self, write: Write, now: Option<i64>) -> Answer {
        let now = self.now(now);
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

/// Runs `write` at `now` on `t`: every transition conditional on the state it leaves, as every store's.
fn apply(t: &mut Tables, write: &Write, now: i64, due: &Due) -> Answer {
    match write {
        Write::Create { event, claim } => {
            let (created, claimed) = create(t, event, claim.as_ref(), now, due);
            Answer::Created(created, claimed.map(Box::new))
        }
        Write::CreateBatch(events) => {
            Answer::CreatedBatch(events.iter().map(|e| create(t, e, None, now, due).0).collect())
        }
        Write::Claim { key, owner, lease } => Answer::Claim(claim(t, key, owner, *lease, now, due)),
        Write::Settle {
            key,
            owner,
            settlement,
        } => Answer::Settled(settle(t, key, owner, settlement, now, due)),
        Write::Release { key, owner } => Answer::Settled(match owned(t, key, owner) {
            Some(s) => {
                s.record.lease_until = Some(now);
                s.record.updated_at = now;
                s.due_at = Some(due.processing(now));
                Settled::Done
            }
            None => Settled::LeaseLost,
        }),
        Write::MarkDead { key, reason } => Answer::MarkDead(mark_dead(t, key, reason, now, due)),
        Write::MarkNotified(key) => {
            if let Some(s) = unnotified_dead(t, key) {
                s.record.notified_at = Some(now);
                s.due_at = None;
            }
            Answer::Done
        }
        Write::DeferAlarm { key, until } => {
            if let Some(s) = unnotified_dead(t, key) {
                s.due_at = Some(*until);
            }
            Answer::Done
        }
        Write::SentAgain {
            key,
            status,
            updated_at,
        } => {
            if let Some(s) = find(t, key) {
                if s.record.status == *status && s.record.updated_at == *updated_at && s.due_at.is_some() {
                    s.due_at = Some(due.resent(now, *updated_at));
                }
            }
            Answer::Done
        }
        Write::Replay { key, force } => Answer::Replay(replay(t, key, *force, now, due)),
        Write::EndLeases(gone) => {
            let ends = |owner: &Option<String>| match gone {
                GoneOwners::None => false,
                GoneOwners::AllBut(me) => !owner.as_ref().is_some_and(|o| o.starts_with(&format!("{me}:"))),
                GoneOwners::These(owners) => owners
                    .iter()
                    .any(|g| owner.as_ref().is_some_and(|o| o.starts_with(&format!("{g}:")))),
            };
            Answer::Count(end_leases(t, now, ends))
        }
        Write::GiveBack(owner) => {
            let mine = format!("{owner}:");
            Answer::Count(end_leases(t, now, |o| {
                o.as_ref().is_some_and(|o| o.starts_with(&mine))
            }))
        }
        Write::Purge(limit) => {
            let expired: Vec<_> = t
                .events
                .iter()
                .filter(|(_, s)| {
                    s.record.status == Status::Completed && s.record.expires_at.is_some_and(|e| e <= now)
                })
                .map(|(k, _)| k.clone())
                .take(*limit)
                .collect();
            for k in &expired {
                t.events.remove(k);
            }
            let mut gone: Vec<_> = t
                .bodies
                .iter()
                .filter(|(_, (_, until))| *until <= now)
                .map(|(k, (_, until))| (*until, k.clone()))
                .collect();
            gone.sort();
            gone.truncate(*limit);
            for (_, k) in &gone {
                t.bodies.remove(k);
            }
            Answer::Purged(Purged {
                events: expired.len(),
                bodies: gone.len(),
            })
        }
        Write::SaveCheckpoint(source, checkpoint) => {
            t.checkpoints.insert(source.clone(), checkpoint.clone());
            Answer::Done
        }
    }
}

fn row(key: &EventKey) -> (SourceName, EventId) {
    (key.source.clone(), key.event_id.clone())
}

fn find<'t>(t: &'t mut Tables, key: &EventKey) -> Option<&'t mut Stored> {
    t.events.get_mut(&row(key))
}

/// The record `owner` holds under a lease (PROCESSING, its owner).
fn owned<'t>(t: &'t mut Tables, key: &EventKey, owner: &str) -> Option<&'t mut Stored> {
    find(t, key)
        .filter(|s| s.record.status == Status::Processing && s.record.lease_owner.as_deref() == Some(owner))
}

fn unnotified_dead<'t>(t: &'t mut Tables, key: &EventKey) -> Option<&'t mut Stored> {
    find(t, key).filter(|s| s.record.status == Status::Dead && s.record.notified_at.is_none())
}

fn end_leases(t: &mut Tables, now: i64, ends: impl Fn(&Option<String>) -> bool) -> usize {
    let mut ended = 0;
    for s in t.events.values_mut() {
        let live = s.record.status == Status::Processing && s.record.lease_until.is_some_and(|u| u > now);
        if live && ends(&s.record.lease_owner) {
            s.record.lease_until = Some(now);
            s.record.updated_at = now;
            s.due_at = Some(now);
            ended += 1;
        }
    }
    ended
}

fn body_key(event: &NewEvent) -> (SourceName, String, String) {
    (
        event.key.source.clone(),
        event.event_type.clone().unwrap_or_default(),
        event.payload_sha256.clone(),
    )
}

fn create(
    t: &mut Tables,
    event: &NewEvent,
    claim: Option<&(String, Duration)>,
    now: i64,
    due: &Due,
) -> (Created, Option<Event>) {
    // A body already held by another live event of this source and type.
    let holder = event.resent_bodies.within().and_then(|_| {
        let (id, until) = t.bodies.get(&body_key(event))?;
        if *until <= now || *id == event.key.event_id {
            return None;
        }
        let held = t.events.get(&(event.key.source.clone(), id.clone()))?;
        let same = !held.record.is_expired(now)
            && held.record.event_type == event.event_type
            && held.record.payload_sha256 == event.payload_sha256;
        same.then(|| held.record.clone())
    });
    if let (Some(holder), ResentBodies::Refused { .. }) = (&holder, event.resent_bodies) {
        // A retry of this very event stays its own duplicate, whoever holds the body now.
        return match t.events.get(&row(&event.key)) {
            Some(own) if !own.record.is_expired(now) => (rules::duplicate_of(&own.record), None),
            _ => (rules::duplicate_of(holder), None),
        };
    }
    if let Some(existing) = t.events.get(&row(&event.key)) {
        // Past retention a completed event no longer counts for dedup: a webhook reusing its id is a new event.
        // Reconciliation never replaces a record: past retention it cannot tell "never received" from "done".
        if !(existing.record.is_expired(now) && event.origin == Origin::Webhook) {
            return (rules::duplicate_of(&existing.record), None);
        }
    }
    let resent_of = holder.map(|h| h.event_id);
    let (status, attempts, lease_owner, lease_until, due_at) = match claim {
        None => (Status::Received, 0, None, None, due.received(now)),
        Some((owner, lease)) => {
            let until = now.saturating_add(ms(*lease));
            (
                Status::Processing,
                1,
                Some(owner.clone()),
                Some(until),
                due.processing(until),
            )
        }
    };
    let record = Record {
        source: event.key.source.clone(),
        event_id: event.key.event_id.clone(),
        event_type: event.event_type.clone(),
        status,
        payload_sha256: event.payload_sha256.clone(),
        headers: event.headers.clone(),
        received_at: now,
        updated_at: now,
        attempts,
        replays: 0,
        lease_owner,
        lease_until,
        next_attempt_at: None,
        last_error: None,
        completed_at: None,
        expires_at: None,
        notified_at: None,
        replayed_at: None,
        origin: event.origin,
        resent_of: resent_of.clone(),
    };
    if let (None, Some(within)) = (&resent_of, event.resent_bodies.within()) {
        let until = now.saturating_add(ms(within));
        t.bodies
            .insert(body_key(event), (event.key.event_id.clone(), until));
    }
    t.events.insert(
        row(&event.key),
        Stored {
            record: record.clone(),
            payload: Some(event.payload.clone()),
            due_at: Some(due_at),
        },
    );
    let claimed = claim.map(|_| record.with_payload(event.payload.clone()));
    (rules::created(resent_of), claimed)
}

fn claim(t: &mut Tables, key: &EventKey, owner: &str, lease: Duration, now: i64, due: &Due) -> Claim {
    let Some(s) = find(t, key) else {
        return Claim::Missing;
    };
    let r = &s.record;
    let claimable = match r.status {
        Status::Received => true,
        Status::Failed => r
            .next_attempt_at
            .is_some_and(|n| n <= rules::failed_claimable_by(now)),
        Status::Processing => r.lease_until.is_some_and(|u| u <= now),
        Status::Completed | Status::Dead => false,
    };
    if !claimable {
        return rules::refused_claim(Some(r), now);
    }
    let until = now.saturating_add(ms(lease));
    let r = &mut s.record;
    r.status = Status::Processing;
    r.lease_owner = Some(owner.to_owned());
    r.lease_until = Some(until);
    r.attempts += 1;
    r.updated_at = now;
    s.due_at = Some(due.processing(until));
    match &s.payload {
        Some(body) => Claim::Claimed(Box::new(s.record.clone().with_payload(body.clone()))),
        // The claim stands: the caller holds the lease and settles it DEAD.
        None => Claim::Corrupt(Box::new(s.record.clone()), rules::missing_body(&s.record)),
    }
}

fn settle(
    t: &mut Tables,
    key: &EventKey,
    owner: &str,
    settlement: &Settlement,
    now: i64,
    due: &Due,
) -> Settled {
    let Some(s) = owned(t, key, owner) else {
        return Settled::LeaseLost;
    };
    let r = &mut s.record;
    r.updated_at = now;
    r.lease_owner = None;
    r.lease_until = None;
    match settlement {
        Settlement::Completed { retention } => {
            r.status = Status::Completed;
            r.completed_at = Some(now);
            r.expires_at = Some(now.saturating_add(ms(*retention)));
            r.next_attempt_at = None;
            s.due_at = None;
        }
        Settlement::Failed { error, delay } => {
            let next = now.saturating_add(ms(*delay));
            r.status = Status::Failed;
            r.last_error = Some(error.clone());
            r.next_attempt_at = Some(next);
            s.due_at = Some(due.failed(next));
        }
        Settlement::Dead { error } => {
            r.status = Status::Dead;
            r.last_error = Some(error.clone());
            r.notified_at = None;
            r.next_attempt_at = None;
            s.due_at = Some(due.dead(now));
        }
    }
    Settled::Done
}

fn mark_dead(t: &mut Tables, key: &EventKey, reason: &str, now: i64, due: &Due) -> MarkDead {
    let Some(s) = find(t, key) else {
        return MarkDead::Missing;
    };
    let r = &s.record;
    let buriable = matches!(r.status, Status::Received | Status::Failed)
        || (r.status == Status::Processing && r.lease_until.is_some_and(|u| u <= now));
    if !buriable {
        return rules::refused_mark_dead(Some(r), now);
    }
    let r = &mut s.record;
    r.status = Status::Dead;
    r.last_error = Some(reason.to_owned());
    r.updated_at = now;
    r.notified_at = None;
    r.lease_owner = None;
    r.lease_until = None;
    r.next_attempt_at = None;
    s.due_at = Some(due.dead(now));
    MarkDead::NewlyDead(Box::new(s.record.clone()))
}

fn replay(t: &mut Tables, key: &EventKey, force: bool, now: i64, due: &Due) -> Replay {
    let Some(s) = find(t, key) else {
        return Replay::Missing;
    };
    let r = &s.record;
    let eligible = r.status == Status::Dead
        || (force && r.status == Status::Completed && r.expires_at.is_some_and(|e| e > now));
    if !eligible {
        return rules::refused_replay(Some(r));
    }
    let r = &mut s.record;
    r.status = Status::Received;
    r.attempts = 0;
    r.replays += 1;
    r.updated_at = now;
    r.replayed_at = Some(now);
    r.lease_owner = None;
    r.lease_until = None;
    r.next_attempt_at = None;
    r.completed_at = None;
    r.expires_at = None;
    r.notified_at = None;
    s.due_at = Some(due.replayed(now));
    Replay::Replayed
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
        }
    }
    async fn create(&self, event: NewEvent, now: Option<i64>) -> Result<Created, StoreError> {
        match self.write(Write::Create { event, claim: None }, now) {
            Answer::Created(created, _) => Ok(created),
            other => Err(unexpected(other)),
        }
    }
    /// The ledger is its own queue: an announced create is indexed like any other.
    async fn create_announced(&self, event: NewEvent, now: Option<i64>) -> Result<Created, StoreError> {
        self.create(event, now).await
    }
    async fn create_batch(
        &self,
        events: Vec<NewEvent>,
        now: Option<i64>,
    ) -> Result<Vec<Created>, StoreError> {
        let events = events.into_iter().map(unwatched).collect();
        match self.write(Write::CreateBatch(events), now) {
            Answer::CreatedBatch(created) => Ok(created),
            other => Err(unexpected(other)),
        }
    }
    async fn create_claimed(
        &self,
        event: NewEvent,
        owner: &str,
        lease: Duration,
        now: Option<i64>,
    ) -> Result<(Created, Option<Event>), StoreError> {
        let claim = Some((owner.to_owned(), lease));
        match self.write(Write::Create { event, claim }, now) {
            Answer::Created(created, claimed) => Ok((created, claimed.map(|e| *e))),
            other => Err(unexpected(other)),
        }
    }
    async fn peek(&self, key: &EventKey, now: Option<i64>) -> Result<Option<Record>, StoreError> {
        let now = self.now(now);
        Ok(self.read(|t| {
            t.events
                .get(&row(key))
                .map(|s| s.record.clone())
                .filter(|r| !r.is_expired(now))
        }))
    }
    async fn claim(
        &self,
        key: &EventKey,
        owner: &str,
        lease: Duration,
        now: Option<i64>,
    ) -> Result<Claim, StoreError> {
        let write = Write::Claim {
            key: key.clone(),
            owner: owner.to_owned(),
            lease,
        };
        match self.write(write, now) {
            Answer::Claim(claim) => Ok(claim),
            other => Err(unexpected(other)),
        }
    }
    async fn settle(
        &self,
        key: &EventKey,
        owner: &str,
        settlement: Settlement,
        now: Option<i64>,
    ) -> Result<Settled, StoreError> {
        let write = Write::Settle {
            key: key.clone(),
            owner: owner.to_owned(),
            settlement,
        };
        match self.write(write, now) {
            Answer::Settled(settled) => Ok(settled),
            other => Err(unexpected(other)),
        }
    }
    /// Bodies live in the record: nothing is owed after completion.
    async fn completed(&self, _key: &EventKey, _owner: &str) -> Result<(), StoreError> {
        Ok(())
    }
    async fn release(&self, key: &EventKey, owner: &str, now: Option<i64>) -> Result<Settled, StoreError> {
        let write = Write::Release {
            key: key.clone(),
            owner: owner.to_owned(),
        };
        match self.write(write, now) {
            Answer::Settled(settled) => Ok(settled),
            other => Err(unexpected(other)),
        }
    }
    async fn mark_dead(
        &self,
        key: &EventKey,
        reason: &str,
        now: Option<i64>,
    ) -> Result<MarkDead, StoreError> {
        let write = Write::MarkDead {
            key: key.clone(),
            reason: reason.to_owned(),
        };
        match self.write(write, now) {
            Answer::MarkDead(dead) => Ok(dead),
            other => Err(unexpected(other)),
        }
    }
    async fn mark_notified(&self, key: &EventKey, now: Option<i64>) -> Result<(), StoreError> {
        self.write(Write::MarkNotified(key.clone()), now);
        Ok(())
    }
    async fn replay(&self, key: &EventKey, force: bool, now: Option<i64>) -> Result<Replay, StoreError> {
        let write = Write::Replay {
            key: key.clone(),
            force,
        };
        match self.write(write, now) {
            Answer::Replay(replay) => Ok(replay),
            other => Err(unexpected(other)),
        }
    }
    async fn get(&self, key: &EventKey, now: Option<i64>) -> Result<Option<Event>, StoreError> {
        let now = self.now(now);
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
    async fn due(&self, due_before: i64, limit: usize) -> Result<Vec<Record>, StoreError> {
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
    async fn sent_again(
        &self,
        key: &EventKey,
        status: Status,
        updated_at: i64,
        now: Option<i64>,
    ) -> Result<(), StoreError> {
        let write = Write::SentAgain {
            key: key.clone(),
            status,
            updated_at,
        };
        self.write(write, now);
        Ok(())
    }
    async fn defer_alarm(&self, key: &EventKey, until: i64) -> Result<(), StoreError> {
        self.write(
            Write::DeferAlarm {
                key: key.clone(),
                until,
            },
            None,
        );
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
        self.write(Write::SaveCheckpoint(source.clone(), checkpoint.clone()), None);
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
    async fn list(&self, filter: &ListFilter, now: Option<i64>) -> Result<Vec<Record>, StoreError> {
        let now = self.now(now);
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
    async fn summary(&self, now: Option<i64>) -> Result<Summary, StoreError> {
        let now = self.now(now);
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
    /// One process holds it: every other owner is gone.
    async fn gone_owners(&self, me: &str) -> Result<GoneOwners, StoreError> {
        Ok(GoneOwners::AllBut(me.to_owned()))
    }
    async fn end_leases(&self, gone: &GoneOwners, now: Option<i64>) -> Result<usize, StoreError> {
        match self.write(Write::EndLeases(gone.clone()), now) {
            Answer::Count(n) => Ok(n),
            other => Err(unexpected(other)),
        }
    }
    async fn give_back(&self, owner: &str, now: Option<i64>) -> Result<usize, StoreError> {
        match self.write(Write::GiveBack(owner.to_owned()), now) {
            Answer::Count(n) => Ok(n),
            other => Err(unexpected(other)),
        }
    }
    async fn purge(&self, limit: usize, now: Option<i64>) -> Result<Purged, StoreError> {
        match self.write(Write::Purge(limit), now) {
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
