//! The SQL of each write the writer runs inside a batch's transaction: create (with the remembered bodies and a
//! claim in the create), claim, settle, release, dead-letter, notice, replay, lease endings, purge, checkpoints.
//! Each is one conditional statement on the state it leaves; a refused one reads the record as it stands and lets
//! [`rules`] say what that means.

use rusqlite::{params, OptionalExtension};

use super::ops::{Answer, Op, Prepared};
use super::rows::{event_row, find, with_payload, COLUMNS};
use super::sql;
use super::writer::Writer;
use crate::model::{Event, EventId, EventKey, Guard, NewEvent, Origin, Record, Status};
use crate::ports::{Claim, Created, GoneOwners, MarkDead, Purged, Replay, Settled, Settlement, StoreError};
use crate::rules;
use crate::time::ms;

impl Writer {
    pub(super) fn apply(&self, op: &Op, now: i64) -> Result<Answer, StoreError> {
        let c = &self.conn;
        Ok(match op {
            Op::Create(prepared) => {
                let (created, claimed) = self.create(prepared, now)?;
                Answer::Created(created, claimed.map(Box::new))
            }
            // Inside this job's savepoint: one failing create rolls every item back, and the transaction's one
            // commit makes them all durable at once.
            Op::CreateBatch(events) => Answer::CreatedBatch(
                events
                    .iter()
                    .map(|prepared| {
                        let created = self.create(prepared, now).map(|(created, _)| created);
                        crate::failpoint!("batch_item_written");
                        created
                    })
                    .collect::<Result<_, _>>()?,
            ),
            Op::Claim { key, owner, lease } => Answer::Claim(self.claim(key, owner, *lease, now)?),
            Op::Settle {
                key,
                owner,
                settlement,
            } => Answer::Settled(self.settle(key, owner, settlement, now)?),
            Op::Release { key, owner } => {
                let n = c
                    .prepare_cached(
                        "UPDATE events SET lease_until = ?4, due_at = ?5, updated_at = ?4
                         WHERE source = ?1 AND event_id = ?2 AND status = 'PROCESSING' AND lease_owner = ?3",
                    )
                    .and_then(|mut s| {
                        s.execute(params![
                            key.source.as_str(),
                            key.event_id.as_str(),
                            owner,
                            now,
                            self.due.processing(now)
                        ])
                    })
                    .map_err(sql)?;
                Answer::Settled(if n == 1 { Settled::Done } else { Settled::LeaseLost })
            }
            Op::MarkDead { key, reason } => Answer::MarkDead(self.mark_dead(key, reason, now)?),
            Op::MarkNotified(key) => {
                c.prepare_cached(
                    "UPDATE events SET notified_at = ?3, due_at = NULL
                     WHERE source = ?1 AND event_id = ?2 AND status = 'DEAD' AND notified_at IS NULL",
                )
                .and_then(|mut s| s.execute(params![key.source.as_str(), key.event_id.as_str(), now]))
                .map_err(sql)?;
                Answer::Done
            }
            Op::DeferAlarm { key, until } => {
                c.prepare_cached(
                    "UPDATE events SET due_at = ?3
                     WHERE source = ?1 AND event_id = ?2 AND status = 'DEAD' AND notified_at IS NULL",
                )
                .and_then(|mut s| s.execute(params![key.source.as_str(), key.event_id.as_str(), until]))
                .map_err(sql)?;
                Answer::Done
            }
            Op::SentAgain {
                key,
                status,
                updated_at,
            } => {
                c.prepare_cached(
                    "UPDATE events SET due_at = ?5
                     WHERE source = ?1 AND event_id = ?2 AND status = ?3 AND updated_at = ?4 AND due_at IS NOT NULL",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        key.source.as_str(),
                        key.event_id.as_str(),
                        status.as_str(),
                        updated_at,
                        self.due.resent(now, *updated_at)
                    ])
                })
                .map_err(sql)?;
                Answer::Done
            }
            Op::Replay { key, force } => Answer::Replay(self.replay(key, *force, now)?),
            // Leases end now, so their events can be claimed again at once.
            Op::EndLeases(gone) => Answer::Count(match gone {
                GoneOwners::None => 0,
                GoneOwners::AllBut(me) => self.end_leases(me, false, now)?,
                GoneOwners::These(owners) => {
                    let mut ended = 0;
                    for owner in owners {
                        ended += self.end_leases(owner, true, now)?;
                    }
                    ended
                }
            }),
            Op::GiveBack { owner } => Answer::Count(self.end_leases(owner, true, now)?),
            Op::Purge { limit } => {
                // One choice of rows for both tables, so no payload outlives its event nor the reverse.
                let ids: Vec<i64> = c
                    .prepare_cached(
                        "SELECT id FROM events WHERE expires_at <= ?1 AND status = 'COMPLETED' LIMIT ?2",
                    )
                    .and_then(|mut s| s.query_map(params![now, limit], |r| r.get(0))?.collect())
                    .map_err(sql)?;
                for id in &ids {
                    c.prepare_cached("DELETE FROM payloads WHERE event = ?1")
                        .and_then(|mut s| s.execute([id]))
                        .map_err(sql)?;
                    c.prepare_cached("DELETE FROM events WHERE id = ?1")
                        .and_then(|mut s| s.execute([id]))
                        .map_err(sql)?;
                }
                // Through `bodies_expiry`, a batch at most: the writer never holds the others up for long.
                let bodies = c
                    .prepare_cached(
                        "DELETE FROM bodies WHERE rowid IN
                            (SELECT rowid FROM bodies WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2)",
                    )
                    .and_then(|mut s| s.execute(params![now, limit]))
                    .map_err(sql)?;
                Answer::Purged(Purged {
                    events: ids.len(),
                    bodies,
                })
            }
            Op::SaveCheckpoint { source, body } => {
                c.prepare_cached(
                    "INSERT INTO checkpoints (source, body) VALUES (?1, ?2)
                     ON CONFLICT (source) DO UPDATE SET body = excluded.body",
                )
                .and_then(|mut s| s.execute(params![source.as_str(), body]))
                .map_err(sql)?;
                Answer::Done
            }
            Op::DataVersion => return self.data_version(),
        })
    }

    fn create(&self, prepared: &Prepared, now: i64) -> Result<(Created, Option<Event>), StoreError> {
        let (c, event) = (&self.conn, &prepared.event);
        // A body already stored under another id of this source and type: a resend under a fresh id, or a
        // distinct event with the same bytes (or a signed nonce another id holds: a captured signature sent again
        // with another body). Looked for in the same transaction as the insert.
        let resent_of = match &prepared.guard {
            None => None,
            Some((body_key, guard)) => self.body_holder(event, *body_key, guard, now)?,
        };
        if let (Some(holder), true) = (&resent_of, event.resent_bodies.refuses()) {
            // A retry of this very event stays its own duplicate, whoever holds the body now.
            return Ok((
                match find(c, &event.key)? {
                    Some((_, own)) if !own.is_expired(now) => rules::duplicate_of(&own),
                    _ => rules::duplicate_of(holder),
                },
                None,
            ));
        }
        let resent_of = resent_of.map(|holder| holder.event_id);
        if self.insert(prepared, resent_of.as_ref(), now)? {
            if resent_of.is_none() {
                self.remember_body(prepared, now)?;
            }
            return Ok(self.created(prepared, resent_of, now));
        }
        let Some((id, existing)) = find(c, &event.key)? else {
            return Err(StoreError::Unavailable(format!(
                "the create of {} was refused but no row stands in the way",
                event.key
            )));
        };
        // Past retention a completed event no longer counts for dedup: a webhook reusing its id is a new event.
        // Reconciliation never replaces a record: past retention it cannot tell "never received" from "done".
        if existing.is_expired(now) && event.origin == Origin::Webhook {
            c.execute("DELETE FROM payloads WHERE event = ?1", [id])
                .map_err(sql)?;
            c.execute("DELETE FROM events WHERE id = ?1", [id]).map_err(sql)?;
            self.insert(prepared, resent_of.as_ref(), now)?;
            if resent_of.is_none() {
                self.remember_body(prepared, now)?;
            }
            return Ok(self.created(prepared, resent_of, now));
        }
        Ok((rules::duplicate_of(&existing), None))
    }

    /// What a create that inserted `prepared` answers: the outcome, and where it was claimed in the write, the
    /// record as the insert left it (every column known here, so nothing is read back).
    fn created(&self, prepared: &Prepared, resent_of: Option<EventId>, now: i64) -> (Created, Option<Event>) {
        let claimed = prepared.claim.as_ref().map(|claim| {
            rules::claimed_on_create(&prepared.event, &claim.owner, claim.lease, resent_of.clone(), now)
        });
        (rules::created(resent_of), claimed)
    }

    /// The live event that holds `event`'s body (or signed nonce) under another id of its source and type, if any.
    fn body_holder(
        &self,
        event: &NewEvent,
        body_key: i64,
        guard: &Guard,
        now: i64,
    ) -> Result<Option<Record>, StoreError> {
        let c = &self.conn;
        let holder: Option<(String, Option<String>)> = c
            .prepare_cached(
                "SELECT event_id, nonce_sha256 FROM bodies WHERE body_key = ?1 AND expires_at > ?2",
            )
            .and_then(|mut s| {
                s.query_row(params![body_key, now], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
            })
            .map_err(sql)?;
        let Some((holder, nonce)) = holder.filter(|(h, _)| h != event.key.event_id.as_str()) else {
            return Ok(None);
        };
        // The key is a hash: a nonce's entry keeps the nonce's whole SHA-256 to say it is this very nonce's; for a
        // body the holder's record says it (same type, same SHA-256).
        if guard.nonce && nonce.as_deref() != Some(guard.sha256.as_str()) {
            return Ok(None);
        }
        let id = EventId::parse(&holder).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        Ok(find(c, &EventKey::new(event.key.source.clone(), id))?
            .map(|(_, existing)| existing)
            .filter(|existing| !existing.is_expired(now) && guard.held_by(existing)))
    }

    /// Remembers the body (or signed nonce) of a just-created event as held by it, for its window, where no other
    /// live event holds it: a later resend names the first event that carried the body, as on DynamoDB.
    fn remember_body(&self, prepared: &Prepared, now: i64) -> Result<(), StoreError> {
        let event = &prepared.event;
        let Some((body_key, guard)) = &prepared.guard else {
            return Ok(());
        };
        self.conn
            .prepare_cached(
                "INSERT INTO bodies (body_key, event_id, expires_at, nonce_sha256) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (body_key) DO UPDATE SET event_id = excluded.event_id, expires_at = excluded.expires_at,
                                                      nonce_sha256 = excluded.nonce_sha256",
            )
            .and_then(|mut s| {
                s.execute(params![
                    body_key,
                    event.key.event_id.as_str(),
                    now.saturating_add(ms(guard.within)),
                    guard.nonce.then_some(guard.sha256.as_str()),
                ])
            })
            .map_err(sql)?;
        Ok(())
    }

    /// Inserts `e` as RECEIVED unless its key is taken. A failure after the first insert leaves nothing: the batch
    /// (or, once a batch has failed, the job's savepoint) is rolled back.
    fn insert(&self, prepared: &Prepared, resent_of: Option<&EventId>, now: i64) -> Result<bool, StoreError> {
        let (c, e) = (&self.conn, &prepared.event);
        // RECEIVED, or PROCESSING under the lease of the worker that claims it in this write.
        let (status, attempts, owner, until, due) = match &prepared.claim {
            None => (Status::Received, 0, None, None, self.due.received(now)),
            Some(claim) => {
                let until = now.saturating_add(claim.lease);
                let owner = Some(claim.owner.as_str());
                (
                    Status::Processing,
                    1,
                    owner,
                    Some(until),
                    self.due.processing(until),
                )
            }
        };
        let n = c
            .prepare_cached(
                "INSERT INTO events (source, event_id, event_type, status, payload_sha256, received_at, updated_at,
                                     due_at, origin, resent_of, attempts, lease_owner, lease_until)
                 VALUES (?1, ?2, ?3, ?9, ?4, ?5, ?5, ?6, ?7, ?8, ?10, ?11, ?12)
                 ON CONFLICT (source, event_id) DO NOTHING",
            )
            .and_then(|mut s| {
                s.execute(params![
                    e.key.source.as_str(),
                    e.key.event_id.as_str(),
                    e.event_type,
                    e.payload_sha256,
                    now,
                    due,
                    e.origin.as_str(),
                    resent_of.map(EventId::as_str),
                    status.as_str(),
                    attempts,
                    owner,
                    until,
                ])
            })
            .map_err(sql)?;
        if n == 0 {
            return Ok(false);
        }
        let id = c.last_insert_rowid();
        let body = &prepared.body;
        c.prepare_cached(
            "INSERT OR REPLACE INTO payloads (event, headers, body, encoding) VALUES (?1, ?2, ?3, ?4)",
        )
        .and_then(|mut s| {
            s.execute(params![
                id,
                prepared.headers,
                body.bytes.as_ref(),
                body.encoding as i64
            ])
        })
        .map_err(sql)?;
        Ok(true)
    }

    /// Ends the live leases held by `owner` (`mine`), or by anyone else (`!mine`): a lease's owner is
    /// `{owner}:{token}`.
    fn end_leases(&self, owner: &str, mine: bool, now: i64) -> Result<usize, StoreError> {
        let prefix = format!("{owner}:");
        self.conn
            .execute(
                "UPDATE events SET lease_until = ?1, due_at = ?1, updated_at = ?1
                 WHERE status = 'PROCESSING' AND lease_until > ?1
                   AND (coalesce(substr(lease_owner, 1, length(?2)) = ?2, 0) = ?3)",
                params![now, prefix, mine],
            )
            .map_err(sql)
    }

    fn claim(&self, key: &EventKey, owner: &str, lease: i64, now: i64) -> Result<Claim, StoreError> {
        let c = &self.conn;
        let until = now.saturating_add(lease);
        let claimed = c
            .prepare_cached(&format!(
                "UPDATE events SET status = 'PROCESSING', lease_owner = ?3, lease_until = ?4, due_at = ?5,
                        attempts = attempts + 1, updated_at = ?6
                 WHERE source = ?1 AND event_id = ?2
                   AND (status = 'RECEIVED'
                        OR (status = 'FAILED' AND next_attempt_at <= ?7)
                        OR (status = 'PROCESSING' AND lease_until <= ?6))
                 RETURNING {COLUMNS}"
            ))
            .and_then(|mut s| {
                s.query_row(
                    params![
                        key.source.as_str(),
                        key.event_id.as_str(),
                        owner,
                        until,
                        self.due.processing(until),
                        now,
                        rules::failed_claimable_by(now)
                    ],
                    event_row,
                )
                .optional()
            })
            .map_err(sql)?;
        match claimed {
            // The claim stands even when the body is gone: the caller holds the lease and settles it DEAD.
            Some((id, event)) => Ok(match with_payload(c, id, event)? {
                Ok(event) => Claim::Claimed(Box::new(event)),
                Err(event) => {
                    let why = rules::missing_body(&event);
                    Claim::Corrupt(Box::new(event), why)
                }
            }),
            None => Ok(rules::refused_claim(find(c, key)?.map(|(_, e)| e).as_ref(), now)),
        }
    }

    fn settle(
        &self,
        key: &EventKey,
        owner: &str,
        settlement: &Settlement,
        now: i64,
    ) -> Result<Settled, StoreError> {
        let c = &self.conn;
        let k = (key.source.as_str(), key.event_id.as_str(), owner);
        let n = match settlement {
            Settlement::Completed { retention } => c
                .prepare_cached(
                    "UPDATE events SET status = 'COMPLETED', completed_at = ?4, expires_at = ?5, updated_at = ?4,
                            lease_owner = NULL, lease_until = NULL, next_attempt_at = NULL, due_at = NULL
                     WHERE source = ?1 AND event_id = ?2 AND status = 'PROCESSING' AND lease_owner = ?3",
                )
                .and_then(|mut s| s.execute(params![k.0, k.1, k.2, now, now.saturating_add(ms(*retention))])),
            Settlement::Failed { error, delay } => {
                let next = now.saturating_add(ms(*delay));
                c.prepare_cached(
                    "UPDATE events SET status = 'FAILED', last_error = ?4, next_attempt_at = ?5, due_at = ?7,
                            updated_at = ?6, lease_owner = NULL, lease_until = NULL
                     WHERE source = ?1 AND event_id = ?2 AND status = 'PROCESSING' AND lease_owner = ?3",
                )
                .and_then(|mut s| {
                    s.execute(params![k.0, k.1, k.2, error, next, now, self.due.failed(next)])
                })
            }
            Settlement::Dead { error } => c
                .prepare_cached(
                    "UPDATE events SET status = 'DEAD', last_error = ?4, updated_at = ?5, due_at = ?6,
                            notified_at = NULL, lease_owner = NULL, lease_until = NULL, next_attempt_at = NULL
                     WHERE source = ?1 AND event_id = ?2 AND status = 'PROCESSING' AND lease_owner = ?3",
                )
                .and_then(|mut s| s.execute(params![k.0, k.1, k.2, error, now, self.due.dead(now)])),
        }
        .map_err(sql)?;
        Ok(if n == 1 { Settled::Done } else { Settled::LeaseLost })
    }

    fn mark_dead(&self, key: &EventKey, reason: &str, now: i64) -> Result<MarkDead, StoreError> {
        let c = &self.conn;
        let dead = c
            .prepare_cached(&format!(
                "UPDATE events SET status = 'DEAD', last_error = ?3, updated_at = ?4, due_at = ?5,
                        notified_at = NULL, lease_owner = NULL, lease_until = NULL, next_attempt_at = NULL
                 WHERE source = ?1 AND event_id = ?2
                   AND (status IN ('RECEIVED', 'FAILED') OR (status = 'PROCESSING' AND lease_until <= ?4))
                 RETURNING {COLUMNS}"
            ))
            .and_then(|mut s| {
                s.query_row(
                    params![
                        key.source.as_str(),
                        key.event_id.as_str(),
                        reason,
                        now,
                        self.due.dead(now)
                    ],
                    event_row,
                )
                .optional()
            })
            .map_err(sql)?;
        Ok(match dead {
            Some((_, event)) => MarkDead::NewlyDead(Box::new(event)),
            None => rules::refused_mark_dead(find(c, key)?.map(|(_, e)| e).as_ref(), now),
        })
    }

    fn replay(&self, key: &EventKey, force: bool, now: i64) -> Result<Replay, StoreError> {
        let c = &self.conn;
        let n = c
            .prepare_cached(
                "UPDATE events SET status = 'RECEIVED', attempts = 0, replays = replays + 1, updated_at = ?3,
                        replayed_at = ?3, due_at = ?5, lease_owner = NULL, lease_until = NULL,
                        next_attempt_at = NULL, completed_at = NULL, expires_at = NULL, notified_at = NULL
                 WHERE source = ?1 AND event_id = ?2
                   AND (status = 'DEAD' OR (?4 AND status = 'COMPLETED' AND expires_at > ?3))",
            )
            .and_then(|mut s| {
                s.execute(params![
                    key.source.as_str(),
                    key.event_id.as_str(),
                    now,
                    force,
                    self.due.replayed(now)
                ])
            })
            .map_err(sql)?;
        if n == 1 {
            return Ok(Replay::Replayed);
        }
        Ok(rules::refused_replay(find(c, key)?.map(|(_, e)| e).as_ref()))
    }
}
