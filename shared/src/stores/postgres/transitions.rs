//! The SQL of each write: create (with the remembered bodies and a claim in the create), claim, settle, release,
//! dead-letter, replay, lease endings and purge. Each is one conditional statement on the state it leaves; a refused
//! one reads the record as it stands and lets [`rules`] say what that means. Every time is given (`now`): the caller
//! took it from the database's clock or from the store's own ([`super::Options::clock`]); claim and settle take it
//! as `at`, `None` being the database's `now()` read by the statement itself.

use deadpool_postgres::GenericClient;

use super::bodies;
use super::rows::{find, record, with_payload, Prepared, COLUMNS};
use super::{db_now, execute, query, query_opt, DB_NOW};
use crate::model::{Event, EventId, EventKey, Origin, Record, Status};
use crate::ports::{Claim, Created, MarkDead, Replay, Settled, Settlement, StoreError};
use crate::rules::{self, Due};
use crate::time::ms;

/// Creates `prepared` as RECEIVED (or PROCESSING under its claim) unless its key is taken; see
/// [`Ledger::create`](crate::ports::Ledger::create). Inside the caller's transaction. The event is inserted first
/// and then claims its body ([`bodies`]), so that of two creates of one body racing on two instances one holds it.
pub(super) async fn create(
    c: &impl GenericClient,
    prepared: &Prepared,
    now: i64,
    due: &Due,
) -> Result<(Created, Option<Event>), StoreError> {
    let event = &prepared.event;
    if let Some(row) = insert(c, prepared, now, due).await? {
        return with_body(c, prepared, row, now).await;
    }
    let Some((id, existing)) = find(c, &event.key).await? else {
        return Err(StoreError::Busy);
    };
    // Past retention a completed event no longer counts for dedup: a webhook reusing its id is a new event.
    // Reconciliation never replaces a record: past retention it cannot tell "never received" from "done".
    if existing.is_expired(now) && event.origin == Origin::Webhook {
        // Conditional on the record still being that expired one: a concurrent replacement wins, and this create
        // then finds it as its duplicate.
        let n = execute(
            c,
            "DELETE FROM events WHERE id = $1 AND status = 'COMPLETED' AND expires_at <= $2",
            &[&id, &now],
        )
        .await?;
        if n == 1 {
            if let Some(row) = insert(c, prepared, now, due).await? {
                return with_body(c, prepared, row, now).await;
            }
        }
        return match find(c, &event.key).await? {
            Some((_, existing)) => Ok((rules::duplicate_of(&existing), None)),
            None => Err(StoreError::Busy),
        };
    }
    // A retry of this very event stays its own duplicate, whoever holds its body now.
    Ok((rules::duplicate_of(&existing), None))
}

/// What the create that inserted `prepared` (row `row`) answers once its body is settled: where its source looks for
/// resent bodies and a live event of another id holds this one, marked `resent_of` it, or refused (deleted again)
/// as a duplicate of it.
async fn with_body(
    c: &impl GenericClient,
    prepared: &Prepared,
    row: i64,
    now: i64,
) -> Result<(Created, Option<Event>), StoreError> {
    let event = &prepared.event;
    let Some(guard) = &prepared.guard else {
        return Ok(created(prepared, None, now));
    };
    let claim = bodies::Claim {
        source: event.key.source.as_str(),
        guard,
        event_id: event.key.event_id.as_str(),
        now,
    };
    let holder = bodies::hold(c, std::slice::from_ref(&claim))
        .await?
        .pop()
        .flatten();
    match (holder, guard.refuses) {
        (None, _) => Ok(created(prepared, None, now)),
        (Some(holder), true) => {
            bodies::unstore(c, &[row]).await?;
            Ok((rules::duplicate_of(&holder), None))
        }
        (Some(holder), _) => {
            bodies::mark(c, &[(row, holder.event_id.as_str())]).await?;
            Ok(created(prepared, Some(holder.event_id), now))
        }
    }
}

/// What a create that inserted `prepared` answers: the outcome and, where it was claimed in the write, the record
/// as the insert left it.
pub(super) fn created(prepared: &Prepared, resent_of: Option<EventId>, now: i64) -> (Created, Option<Event>) {
    let claimed = prepared.claim.as_ref().map(|(owner, lease)| {
        rules::claimed_on_create(&prepared.event, owner, *lease, resent_of.clone(), now)
    });
    (rules::created(resent_of), claimed)
}

/// Inserts `prepared` as RECEIVED (or PROCESSING under its claim) unless its key is taken, and its body: the new
/// row's id, or `None` where the key was taken. Unmarked: a resent body is marked once its holder is known.
async fn insert(
    c: &impl GenericClient,
    prepared: &Prepared,
    now: i64,
    due: &Due,
) -> Result<Option<i64>, StoreError> {
    let e = &prepared.event;
    let (status, attempts, owner, until, due_at) = match &prepared.claim {
        None => (Status::Received, 0, None, None, due.received(now)),
        Some((owner, lease)) => {
            let until = now.saturating_add(*lease);
            (
                Status::Processing,
                1,
                Some(owner.as_str()),
                Some(until),
                due.processing(until),
            )
        }
    };
    let inserted = query_opt(
        c,
        "INSERT INTO events (source, event_id, event_type, status, payload_sha256, received_at, updated_at,
                             due_at, origin, attempts, lease_owner, lease_until)
         VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $8, $9, $10, $11)
         ON CONFLICT (source, event_id) DO NOTHING
         RETURNING id",
        &[
            &e.key.source.as_str(),
            &e.key.event_id.as_str(),
            &e.event_type,
            &status.as_str(),
            &e.payload_sha256,
            &now,
            &due_at,
            &e.origin.as_str(),
            &attempts,
            &owner,
            &until,
        ],
    )
    .await?;
    let Some(row) = inserted else {
        return Ok(None);
    };
    let id: i64 = row.get(0);
    execute(
        c,
        "INSERT INTO payloads (event, headers, body, encoding) VALUES ($1, $2, $3, $4)",
        &[&id, &prepared.headers, &prepared.body, &prepared.encoding],
    )
    .await?;
    Ok(Some(id))
}

/// Claims `key` for `owner` for `lease` ms, at `at` (the store's clock) or, with `None`, at the database's `now()`
/// read by the update itself (no round trip of its own).
pub(super) async fn claim(
    c: &impl GenericClient,
    key: &EventKey,
    owner: &str,
    lease: i64,
    at: Option<i64>,
) -> Result<Claim, StoreError> {
    let claimed = query_opt(
        c,
        &format!(
            "WITH t AS (SELECT coalesce($5::int8, {DB_NOW}) AS now)
             UPDATE events SET status = 'PROCESSING', lease_owner = $3, lease_until = t.now + $4,
                    due_at = t.now + $4, attempts = attempts + 1, updated_at = t.now
             FROM t
             WHERE source = $1 AND event_id = $2
               AND (status = 'RECEIVED'
                    OR (status = 'FAILED' AND next_attempt_at <= t.now + $6)
                    OR (status = 'PROCESSING' AND lease_until <= t.now))
             RETURNING {COLUMNS}"
        ),
        &[
            &key.source.as_str(),
            &key.event_id.as_str(),
            &owner,
            &lease,
            &at,
            &rules::DUE_SLACK_MS,
        ],
    )
    .await?;
    match claimed {
        // The claim stands even when the body is gone: the caller holds the lease and settles it DEAD.
        Some(row) => {
            let (id, event) = record(&row)?;
            Ok(match with_payload(c, id, event).await? {
                Ok(event) => Claim::Claimed(Box::new(event)),
                Err(event) => {
                    let why = rules::missing_body(&event);
                    Claim::Corrupt(Box::new(event), why)
                }
            })
        }
        None => {
            let now = match at {
                Some(at) => at,
                None => db_now(c).await?,
            };
            Ok(rules::refused_claim(
                find(c, key).await?.map(|(_, e)| e).as_ref(),
                now,
            ))
        }
    }
}

/// Settles `owner`'s claim of `key`, at `at` (the store's clock) or, with `None`, at the database's `now()` read by
/// the update itself.
pub(super) async fn settle(
    c: &impl GenericClient,
    key: &EventKey,
    owner: &str,
    settlement: &Settlement,
    at: Option<i64>,
    due: &Due,
) -> Result<Settled, StoreError> {
    let (source, id) = (key.source.as_str(), key.event_id.as_str());
    let n = match settlement {
        Settlement::Completed { retention } => {
            execute(
                c,
                &format!(
                    "WITH t AS (SELECT coalesce($4::int8, {DB_NOW}) AS now)
                     UPDATE events SET status = 'COMPLETED', completed_at = t.now, expires_at = t.now + $5,
                            updated_at = t.now, lease_owner = NULL, lease_until = NULL, next_attempt_at = NULL,
                            due_at = NULL
                     FROM t
                     WHERE source = $1 AND event_id = $2 AND status = 'PROCESSING' AND lease_owner = $3"
                ),
                &[&source, &id, &owner, &at, &ms(*retention)],
            )
            .await?
        }
        Settlement::Failed { error, delay } => {
            execute(
                c,
                &format!(
                    "WITH t AS (SELECT coalesce($5::int8, {DB_NOW}) AS now)
                     UPDATE events SET status = 'FAILED', last_error = $4, next_attempt_at = t.now + $6,
                            due_at = t.now + $6 + $7, updated_at = t.now, lease_owner = NULL, lease_until = NULL
                     FROM t
                     WHERE source = $1 AND event_id = $2 AND status = 'PROCESSING' AND lease_owner = $3"
                ),
                &[&source, &id, &owner, error, &at, &ms(*delay), &due.grace_ms()],
            )
            .await?
        }
        Settlement::Dead { error } => {
            execute(
                c,
                &format!(
                    "WITH t AS (SELECT coalesce($5::int8, {DB_NOW}) AS now)
                     UPDATE events SET status = 'DEAD', last_error = $4, updated_at = t.now, due_at = t.now + $6,
                            notified_at = NULL, lease_owner = NULL, lease_until = NULL, next_attempt_at = NULL
                     FROM t
                     WHERE source = $1 AND event_id = $2 AND status = 'PROCESSING' AND lease_owner = $3"
                ),
                &[&source, &id, &owner, error, &at, &due.grace_ms()],
            )
            .await?
        }
    };
    Ok(if n == 1 { Settled::Done } else { Settled::LeaseLost })
}

pub(super) async fn release(
    c: &impl GenericClient,
    key: &EventKey,
    owner: &str,
    now: i64,
    due: &Due,
) -> Result<Settled, StoreError> {
    let n = execute(
        c,
        "UPDATE events SET lease_until = $4, due_at = $5, updated_at = $4
         WHERE source = $1 AND event_id = $2 AND status = 'PROCESSING' AND lease_owner = $3",
        &[
            &key.source.as_str(),
            &key.event_id.as_str(),
            &owner,
            &now,
            &due.processing(now),
        ],
    )
    .await?;
    Ok(if n == 1 { Settled::Done } else { Settled::LeaseLost })
}

pub(super) async fn mark_dead(
    c: &impl GenericClient,
    key: &EventKey,
    reason: &str,
    now: i64,
    due: &Due,
) -> Result<MarkDead, StoreError> {
    let dead = query_opt(
        c,
        &format!(
            "UPDATE events SET status = 'DEAD', last_error = $3, updated_at = $4, due_at = $5,
                    notified_at = NULL, lease_owner = NULL, lease_until = NULL, next_attempt_at = NULL
             WHERE source = $1 AND event_id = $2
               AND (status IN ('RECEIVED', 'FAILED') OR (status = 'PROCESSING' AND lease_until <= $4))
             RETURNING {COLUMNS}"
        ),
        &[
            &key.source.as_str(),
            &key.event_id.as_str(),
            &reason,
            &now,
            &due.dead(now),
        ],
    )
    .await?;
    Ok(match dead {
        Some(row) => MarkDead::NewlyDead(Box::new(record(&row)?.1)),
        None => rules::refused_mark_dead(find(c, key).await?.map(|(_, e)| e).as_ref(), now),
    })
}

pub(super) async fn replay(
    c: &impl GenericClient,
    key: &EventKey,
    force: bool,
    now: i64,
    due: &Due,
) -> Result<Replay, StoreError> {
    let n = execute(
        c,
        "UPDATE events SET status = 'RECEIVED', attempts = 0, replays = replays + 1, updated_at = $3,
                replayed_at = $3, due_at = $5, lease_owner = NULL, lease_until = NULL,
                next_attempt_at = NULL, completed_at = NULL, expires_at = NULL, notified_at = NULL
         WHERE source = $1 AND event_id = $2
           AND (status = 'DEAD' OR ($4 AND status = 'COMPLETED' AND expires_at > $3))",
        &[
            &key.source.as_str(),
            &key.event_id.as_str(),
            &now,
            &force,
            &due.replayed(now),
        ],
    )
    .await?;
    if n == 1 {
        return Ok(Replay::Replayed);
    }
    Ok(rules::refused_replay(
        find(c, key).await?.map(|(_, e)| e).as_ref(),
    ))
}

/// Ends the live leases held by `owner` (`mine`), or by anyone else (`!mine`): a lease's owner is
/// `{owner}:{token}`. How many.
pub(super) async fn end_leases(
    c: &impl GenericClient,
    owner: &str,
    mine: bool,
    now: i64,
) -> Result<usize, StoreError> {
    let prefix = format!("{}:", escape_like(owner));
    let n = execute(
        c,
        "UPDATE events SET lease_until = $1, due_at = $1, updated_at = $1
         WHERE status = 'PROCESSING' AND lease_until > $1 AND (coalesce(lease_owner LIKE $2, false) = $3)",
        &[&now, &format!("{prefix}%"), &mine],
    )
    .await?;
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// `text` matched literally by `LIKE` (its `%`, `_` and `\` escaped).
fn escape_like(text: &str) -> String {
    text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")
}

/// The sweeper's read: what is due before `$1`, oldest first, at most `$2`, from the partial index `events_due`.
pub(super) fn due_query() -> String {
    format!("SELECT {COLUMNS} FROM events WHERE due_at <= $1 ORDER BY due_at LIMIT $2")
}

/// The records due before `before`, oldest due first.
pub(super) async fn due(c: &impl GenericClient, before: i64, limit: i64) -> Result<Vec<Record>, StoreError> {
    let rows = query(c, &due_query(), &[&before, &limit]).await?;
    super::rows::records(&rows)
}
