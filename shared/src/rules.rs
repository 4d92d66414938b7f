//! The state machine's rules that both ledgers apply, written once: when a record comes due for the sweeper,
//! how early a FAILED event may be claimed, and what a refused transition means, decided from the record as it
//! stands. The adapters only translate: SQL `WHERE` clauses and DynamoDB condition expressions over these values,
//! and back here with whatever a refused write found.

use std::time::Duration;

use crate::model::{Event, EventId, NewEvent, Record, Status};
use crate::ports::{Claim, Created, MarkDead, Replay};
use crate::time::ms;

/// A FAILED event may be claimed this much before its `next_attempt_at` (clock slop between writers).
pub const DUE_SLACK_MS: i64 = 250;

/// Longest `last_error` kept, in bytes: a handler's error text can be anything (a whole HTML page).
pub const MAX_ERROR_BYTES: usize = 1024;

/// The due times of the sparse index (SQLite's `due_at`, DynamoDB's `gsi1sk`): when the sweeper must look at a
/// record because no message may be coming for it. Set by the write that gives the record its state; none once
/// COMPLETED, nor once a dead event's alarm is recorded.
#[derive(Clone, Copy, Debug)]
pub struct Due {
    grace: i64,
}

impl Due {
    /// `grace`: how long past its natural time a record waits for its queue message.
    pub fn new(grace: Duration) -> Self {
        Self { grace: ms(grace) }
    }

    /// The grace itself, in ms (for a store that computes due times in its own queries).
    pub fn grace_ms(&self) -> i64 {
        self.grace
    }

    /// RECEIVED by the receiver: its message was sent with the write.
    pub fn received(&self, now: i64) -> i64 {
        now.saturating_add(self.grace)
    }

    /// RECEIVED by a replay: at once, since an embedded replay from another process sends no message.
    pub fn replayed(&self, now: i64) -> i64 {
        now
    }

    /// PROCESSING: when the lease runs out.
    pub fn processing(&self, lease_until: i64) -> i64 {
        lease_until
    }

    /// FAILED: the next attempt, plus the grace for its delayed message.
    pub fn failed(&self, next_attempt_at: i64) -> i64 {
        next_attempt_at.saturating_add(self.grace)
    }

    /// DEAD: its alarm is due after the grace (the process that killed it sends it first).
    pub fn dead(&self, now: i64) -> i64 {
        now.saturating_add(self.grace)
    }

    /// An open event the sweeper has just sent again: due again after as long as it has waited since its last
    /// transition (`updated_at`), at least the grace and at most [`MAX_RESEND_WAIT`]. Each re-send without progress
    /// about doubles the wait, so a long backlog is not sent again every sweep.
    pub fn resent(&self, now: i64, updated_at: i64) -> i64 {
        let waited = now.saturating_sub(updated_at);
        now.saturating_add(waited.clamp(self.grace.min(MAX_RESEND_WAIT_MS), MAX_RESEND_WAIT_MS))
    }
}

/// The longest wait between two re-sends of one open event by the sweeper.
pub const MAX_RESEND_WAIT: Duration = Duration::from_secs(3600);
const MAX_RESEND_WAIT_MS: i64 = 3_600_000;

/// The latest `next_attempt_at` that a claim at `now` accepts.
pub fn failed_claimable_by(now: i64) -> i64 {
    now.saturating_add(DUE_SLACK_MS)
}

/// The record a create that claimed `event` in its own write left: PROCESSING under `owner`'s lease of `lease_ms`
/// from `now`, its first attempt, with its body (what every store's `create_claimed` answers; nothing is read
/// back).
pub fn claimed_on_create(
    event: &NewEvent,
    owner: &str,
    lease_ms: i64,
    resent_of: Option<EventId>,
    now: i64,
) -> Event {
    Record {
        source: event.key.source.clone(),
        event_id: event.key.event_id.clone(),
        event_type: event.event_type.clone(),
        status: Status::Processing,
        payload_sha256: event.payload_sha256.clone(),
        headers: event.headers.clone(),
        received_at: now,
        updated_at: now,
        attempts: 1,
        replays: 0,
        lease_owner: Some(owner.to_owned()),
        lease_until: Some(now.saturating_add(lease_ms)),
        next_attempt_at: None,
        last_error: None,
        completed_at: None,
        expires_at: None,
        notified_at: None,
        replayed_at: None,
        origin: event.origin,
        resent_of,
    }
    .with_payload(event.payload.clone())
}

/// A refused claim, from the record as it stands (`None`: there is none).
pub fn refused_claim(current: Option<&Record>, now: i64) -> Claim {
    match current {
        // Past retention the record is gone in all but deletion, and its id may be taken by a new event whose
        // create has not landed yet (its message went first): that work is not the old record's to drop.
        None => Claim::Missing,
        Some(e) if e.is_expired(now) => Claim::Missing,
        Some(e) => match e.status {
            st @ (Status::Completed | Status::Dead) => Claim::Done(st),
            Status::Failed => Claim::NotDue(e.next_attempt_at.unwrap_or(now)),
            Status::Received | Status::Processing => Claim::OwnedElsewhere,
        },
    }
}

/// A refused dead-letter, from the record as it stands.
pub fn refused_mark_dead(current: Option<&Record>, now: i64) -> MarkDead {
    match current {
        None => MarkDead::Missing,
        Some(e) => match e.status {
            Status::Dead => MarkDead::AlreadyDead(Box::new(e.clone())),
            Status::Completed => MarkDead::Completed,
            // Refused while open: a live lease (or one that changed hands just now): ask again after it.
            Status::Processing | Status::Received | Status::Failed => {
                MarkDead::Leased(e.lease_until.unwrap_or(now))
            }
        },
    }
}

/// A refused replay, from the record as it stands.
pub fn refused_replay(current: Option<&Record>) -> Replay {
    match current {
        None => Replay::Missing,
        Some(e) => Replay::NotEligible(e.status),
    }
}

/// What a refused create answers: the event in the way, whose first payload stands.
/// A create that made a new record: marked when another event held its body.
pub fn created(resent_of: Option<EventId>) -> Created {
    match resent_of {
        None => Created::New,
        Some(of) => Created::Resent { of },
    }
}

pub fn duplicate_of(existing: &Record) -> Created {
    Created::Duplicate {
        event_id: existing.event_id.clone(),
        status: existing.status,
        payload_sha256: existing.payload_sha256.clone(),
        origin: existing.origin,
        since: existing.updated_at,
    }
}

/// Why a claimed record cannot run: its body is gone.
pub fn missing_body(event: &Record) -> String {
    format!(
        "the stored body of {} is missing: the record is corrupt and was not run",
        event.key()
    )
}

/// `text` cut to [`MAX_ERROR_BYTES`] at a character boundary, marked where it was cut.
pub fn bounded_error(text: &str) -> String {
    if text.len() <= MAX_ERROR_BYTES {
        return text.to_owned();
    }
    let mut end = MAX_ERROR_BYTES - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_cut_at_a_character_boundary() {
        assert_eq!(bounded_error("short"), "short");
        let long = "é".repeat(MAX_ERROR_BYTES);
        let cut = bounded_error(&long);
        assert!(cut.len() <= MAX_ERROR_BYTES, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert!(cut.starts_with("éé"));
    }
}
