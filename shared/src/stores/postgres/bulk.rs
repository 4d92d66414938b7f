//! A batch's creates in a constant number of statements, whatever its size: every event inserted by one
//! `INSERT … SELECT FROM unnest(…) ON CONFLICT (source, event_id) DO NOTHING RETURNING`, the bodies of those inserted
//! by one more, and the records in the way of the others read by a third, which sees rows another instance
//! committed after the insert's snapshot (PostgreSQL's manual, 13.2.1: a statement of a READ COMMITTED transaction
//! sees what was committed before it began). Items are in `(source, event_id)` order, so that two instances'
//! overlapping batches lock their rows in one order, and a key's repeats within the batch are folded into its first.
//!
//! The remembered bodies (the resent-body guard) are claimed, after the events are in, for every watched item
//! inserted, in one statement ([`bodies::hold`]); those a live event held first are marked by one more, or, refused,
//! deleted again by one more. What this path does not decide is handed back for [`transitions::create`], item by item
//! in the same transaction: a key or a body repeated within the batch, and a key held by a completed record past
//! retention (a webhook reusing the id is a new event) or by none at all (deleted since the insert).

use std::collections::{HashMap, HashSet};

use deadpool_postgres::GenericClient;

use super::rows::{record, Prepared, COLUMNS};
use super::transitions::{self, created};
use super::{bodies, query};
use crate::model::{Event, Guard, Origin, Record, Status};
use crate::ports::{Created, StoreError};
use crate::rules::Due;

/// One create of the batch: what it writes and the time it runs at.
pub(super) struct Item<'a> {
    pub prepared: &'a Prepared,
    pub now: i64,
}

/// An item's key, as text.
fn key<'a>(item: &Item<'a>) -> (&'a str, &'a str) {
    let key = &item.prepared.event.key;
    (key.source.as_str(), key.event_id.as_str())
}

/// An item's body as the resent-body guard knows it, where it looks: its source, its type (`""` for none) and its
/// SHA-256, or a signed nonce's ([`Guard`]).
fn body<'a>(item: &Item<'a>) -> Option<(&'a str, &'a str, &'a str)> {
    let p = item.prepared;
    let guard = p.guard.as_ref()?;
    Some((p.event.key.source.as_str(), &guard.kind, &guard.sha256))
}

/// Runs `items` (in key order) and answers each, in their order.
pub(super) async fn create_all(
    c: &impl GenericClient,
    items: &[Item<'_>],
    due: &Due,
) -> Result<Vec<(Created, Option<Event>)>, StoreError> {
    let mut answers: Vec<Option<(Created, Option<Event>)>> = vec![None; items.len()];
    // The first of each key, and of each watched body (source, type, SHA-256) within the batch: inserted in one
    // statement. The others go one by one below, after the first is in: a repeat finds it.
    let mut keys: HashSet<(&str, &str)> = HashSet::new();
    let mut watched_bodies: HashSet<(&str, &str, &str)> = HashSet::new();
    let mut first = Vec::new();
    for (i, item) in items.iter().enumerate() {
        if !keys.insert(key(item)) {
            continue;
        }
        if body(item).is_some_and(|body| !watched_bodies.insert(body)) {
            continue;
        }
        first.push(i);
    }
    let inserted = insert(c, items, &first, due).await?;
    // Every watched body inserted claims its body, after every event is in (lock order: events, then bodies).
    let watched: Vec<(usize, i64, &Guard)> = first
        .iter()
        .filter_map(|&i| Some((i, inserted[i]?, items[i].prepared.guard.as_ref()?)))
        .collect();
    let claims: Vec<bodies::Claim> = watched
        .iter()
        .map(|&(i, _, guard)| {
            let (item, e) = (&items[i], &items[i].prepared.event);
            bodies::Claim {
                source: e.key.source.as_str(),
                guard,
                event_id: e.key.event_id.as_str(),
                now: item.now,
            }
        })
        .collect();
    let holders = bodies::hold(c, &claims).await?;
    let (mut marks, mut refused) = (Vec::new(), Vec::new());
    for (&(i, row, guard), holder) in watched.iter().zip(holders) {
        let Some(holder) = holder else { continue };
        let item = &items[i];
        answers[i] = Some(if guard.refuses {
            refused.push(row);
            (crate::rules::duplicate_of(&holder), None)
        } else {
            marks.push((row, holder.event_id.clone()));
            created(item.prepared, Some(holder.event_id), item.now)
        });
    }
    let marks: Vec<(i64, &str)> = marks.iter().map(|(row, of)| (*row, of.as_str())).collect();
    bodies::mark(c, &marks).await?;
    bodies::unstore(c, &refused).await?;
    for &i in &first {
        if inserted[i].is_some() && answers[i].is_none() {
            answers[i] = Some(created(items[i].prepared, None, items[i].now));
        }
    }
    // Every other item: the record in its way, read after the insert.
    let rest: Vec<usize> = (0..items.len()).filter(|&i| answers[i].is_none()).collect();
    let standing = standing(c, items, &rest).await?;
    for i in rest {
        let item = &items[i];
        let prepared = item.prepared;
        let answer = match standing.get(&i) {
            // A retry of this very event stays its own duplicate, whoever holds its body.
            Some(existing)
                if !(existing.is_expired(item.now) && prepared.event.origin == Origin::Webhook) =>
            {
                (crate::rules::duplicate_of(existing), None)
            }
            // A body repeated within the batch, a record past retention to replace, or none left in the way.
            _ => transitions::create(c, prepared, item.now, due).await?,
        };
        answers[i] = Some(answer);
    }
    Ok(answers.into_iter().flatten().collect())
}

/// Inserts the items `which` names as RECEIVED (or PROCESSING under their claim), and their bodies: each item's
/// new row id (by its index), `None` where it was not inserted.
async fn insert(
    c: &impl GenericClient,
    items: &[Item<'_>],
    which: &[usize],
    due: &Due,
) -> Result<Vec<Option<i64>>, StoreError> {
    let mut inserted = vec![None; items.len()];
    if which.is_empty() {
        return Ok(inserted);
    }
    let n = which.len();
    let (mut sources, mut ids, mut types, mut statuses, mut shas) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut nows, mut dues, mut origins, mut attempts, mut owners, mut untils) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for &i in which {
        let (p, now) = (items[i].prepared, items[i].now);
        let e = &p.event;
        let (status, attempt, owner, until, due_at) = match &p.claim {
            None => (Status::Received, 0_i32, None, None, due.received(now)),
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
        sources.push(e.key.source.as_str());
        ids.push(e.key.event_id.as_str());
        types.push(e.event_type.as_deref());
        statuses.push(status.as_str());
        shas.push(e.payload_sha256.as_str());
        nows.push(now);
        dues.push(due_at);
        origins.push(e.origin.as_str());
        attempts.push(attempt);
        owners.push(owner);
        untils.push(until);
    }
    let rows = query(
        c,
        "INSERT INTO events (source, event_id, event_type, status, payload_sha256, received_at, updated_at, due_at,
                             origin, attempts, lease_owner, lease_until)
         SELECT s, i, t, st, h, n, n, d, o, a, lo, lu
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int8[], $7::int8[],
                     $8::text[], $9::int4[], $10::text[], $11::int8[])
              AS x (s, i, t, st, h, n, d, o, a, lo, lu)
         ON CONFLICT (source, event_id) DO NOTHING
         RETURNING id, source, event_id",
        &[
            &sources, &ids, &types, &statuses, &shas, &nows, &dues, &origins, &attempts, &owners, &untils,
        ],
    )
    .await?;
    let by_key: HashMap<(&str, &str), usize> = which.iter().map(|&i| (key(&items[i]), i)).collect();
    let (mut events, mut headers, mut bodies, mut encodings) = (vec![], vec![], vec![], vec![]);
    for row in &rows {
        let (id, source, event_id): (i64, &str, &str) = (row.get(0), row.get(1), row.get(2));
        let Some(&i) = by_key.get(&(source, event_id)) else {
            return Err(StoreError::Unavailable(format!(
                "the insert returned a key it was not given: {source}/{event_id}"
            )));
        };
        let p = items[i].prepared;
        inserted[i] = Some(id);
        events.push(id);
        headers.push(p.headers.as_str());
        bodies.push(p.body.as_slice());
        encodings.push(p.encoding);
    }
    if !events.is_empty() {
        query(
            c,
            "INSERT INTO payloads (event, headers, body, encoding)
             SELECT * FROM unnest($1::int8[], $2::text[], $3::bytea[], $4::int2[])",
            &[&events, &headers, &bodies, &encodings],
        )
        .await?;
    }
    Ok(inserted)
}

/// The records standing under the keys of the items `which` names, by item.
async fn standing(
    c: &impl GenericClient,
    items: &[Item<'_>],
    which: &[usize],
) -> Result<HashMap<usize, Record>, StoreError> {
    if which.is_empty() {
        return Ok(HashMap::new());
    }
    let wanted: HashMap<(&str, &str), usize> = which.iter().map(|&i| (key(&items[i]), i)).collect();
    let (sources, ids): (Vec<&str>, Vec<&str>) = wanted.keys().copied().unzip();
    let rows = query(
        c,
        &format!(
            "SELECT {COLUMNS} FROM events
             WHERE (source, event_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))"
        ),
        &[&sources, &ids],
    )
    .await?;
    let mut found = HashMap::with_capacity(rows.len());
    for row in &rows {
        let (_, r) = record(row)?;
        let item = wanted.get(&(r.source.as_str(), r.event_id.as_str())).copied();
        if let Some(i) = item {
            found.insert(i, r);
        }
    }
    Ok(found)
}
