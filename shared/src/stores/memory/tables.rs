//! The reference store's tables and its writes as data: [`apply`] runs one write on a set of tables, every
//! transition conditional on the state it leaves, as every store's. [`super::MemoryStore`] runs each write on the
//! applied tables at once and on the durable ones when it is synced.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::model::{Event, EventId, EventKey, Guard, NewEvent, Origin, Record, SourceName, Status};
use crate::ports::{Checkpoint, Claim, Created, GoneOwners, MarkDead, Purged, Replay, Settled, Settlement};
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
    /// Which event holds a body, per source, type and SHA-256 (or a signed nonce: [`Guard`]), and until when (the
    /// resent-body guard).
    pub bodies: BTreeMap<(SourceName, String, String), (EventId, i64)>,
    pub checkpoints: BTreeMap<SourceName, Checkpoint>,
    /// Each owner's heartbeat: alive until (a store kept with heartbeats, [`super::MemoryStore::with_heartbeats`]).
    pub owners: BTreeMap<String, i64>,
    /// Each role's holder, term and hold (the same store).
    pub leaders: BTreeMap<String, (String, u64, i64)>,
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
    /// The leases of these owners, each only while its heartbeat is registered and run out; the owner is forgotten
    /// with them (a store kept with heartbeats: a listed owner that beat since, or has no row, keeps its leases).
    EndLeasesOfExpired(Vec<String>),
    Heartbeat {
        owner: String,
        alive_for: Duration,
    },
    Lead {
        role: String,
        owner: String,
        hold: Duration,
    },
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
    /// A role's term while the asker holds it.
    Term(Option<u64>),
    Done,
}

/// The store's whole state, a plain value.
/// Runs `write` at `now` on `t`: every transition conditional on the state it leaves, as every store's.
pub(super) fn apply(t: &mut Tables, write: &Write, now: i64, due: &Due) -> Answer {
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
        Write::EndLeasesOfExpired(owners) => {
            let mut ended = 0;
            for owner in owners {
                if t.owners.get(owner).is_none_or(|alive_until| *alive_until >= now) {
                    continue;
                }
                ended += forget_owner(t, owner, now);
            }
            Answer::Count(ended)
        }
        Write::Heartbeat { owner, alive_for } => {
            t.owners.insert(owner.clone(), now.saturating_add(ms(*alive_for)));
            Answer::Done
        }
        Write::Lead { role, owner, hold } => {
            let until = now.saturating_add(ms(*hold));
            let term = match t.leaders.get(role) {
                None => Some(1),
                Some((holder, term, _)) if holder == owner => Some(*term),
                Some((_, term, held_until)) if *held_until < now => Some(term + 1),
                Some(_) => None,
            };
            if let Some(term) = term {
                t.leaders.insert(role.clone(), (owner.clone(), term, until));
            }
            Answer::Term(term)
        }
        Write::GiveBack(owner) => Answer::Count(forget_owner(t, owner, now)),
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

pub(super) fn row(key: &EventKey) -> (SourceName, EventId) {
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

/// Ends every lease `owner` holds, gives back its roles (the next asker leads, in a later term) and forgets its
/// heartbeat: what a gone owner, or one shutting down, leaves.
fn forget_owner(t: &mut Tables, owner: &str, now: i64) -> usize {
    let mine = format!("{owner}:");
    let ended = end_leases(t, now, |o| o.as_ref().is_some_and(|o| o.starts_with(&mine)));
    for (holder, _, until) in t.leaders.values_mut() {
        if holder == owner {
            *until = i64::MIN;
        }
    }
    t.owners.remove(owner);
    ended
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

fn body_key(event: &NewEvent, guard: &Guard) -> (SourceName, String, String) {
    (event.key.source.clone(), guard.kind.clone(), guard.sha256.clone())
}

fn create(
    t: &mut Tables,
    event: &NewEvent,
    claim: Option<&(String, Duration)>,
    now: i64,
    due: &Due,
) -> (Created, Option<Event>) {
    // A body (or signed nonce) already held by another live event of this source and type.
    let guard = event.guard();
    let holder = guard.as_ref().and_then(|guard| {
        let (id, until) = t.bodies.get(&body_key(event, guard))?;
        if *until <= now || *id == event.key.event_id {
            return None;
        }
        let held = t.events.get(&(event.key.source.clone(), id.clone()))?;
        let same = !held.record.is_expired(now) && guard.held_by(&held.record);
        same.then(|| held.record.clone())
    });
    if let (Some(holder), true) = (&holder, event.resent_bodies.refuses()) {
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
    if let (None, Some(guard)) = (&resent_of, &guard) {
        let until = now.saturating_add(ms(guard.within));
        t.bodies
            .insert(body_key(event, guard), (event.key.event_id.clone(), until));
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
