//! The resent-body guard's arbiter: the remembered body (a row of `bodies`, keyed by source, type and SHA-256; or a
//! signed nonce's, by source, `#signed-nonce` and the nonce's SHA-256: [`Guard`]) is taken by the create that
//! inserted its event, before anything is answered, so that of two creates of one body under two ids exactly one
//! holds it, whichever instances they run on. A look-up before the insert cannot decide
//! that: two transactions that both find no holder both store the body, both unmarked (issue 53, item 2).
//!
//! Each create that inserted an event whose source looks for resent bodies claims the body in one upsert
//! ([`hold`]): a body nobody remembers is its own at once; a remembered one is locked (`ON CONFLICT DO UPDATE`, which
//! waits for a transaction that holds the row, and reads the row as that transaction committed it) and its holder is
//! read by the statement after, which sees what that transaction committed with it (PostgreSQL's manual, 13.2.1).
//! A live holder wins: the create is then marked `resent_of` it, or, where the source refuses resent bodies, its
//! event deleted again and the create answered as a duplicate of the holder ([`mark`], [`unstore`]). A holder no
//! longer live (past its window, its event gone or past retention) is replaced under the lock. Bodies are locked in
//! body order, after the batch's events in key order, so two instances' batches wait on one another and never
//! deadlock on them; a create that goes one by one after its batch can, and is then answered busy (503).

use std::collections::HashMap;

use deadpool_postgres::GenericClient;

use super::rows::{record, COLUMNS};
use super::{execute, query};
use crate::model::{Guard, Record};
use crate::ports::StoreError;

/// One create's claim on its body (or signed nonce): the event it inserted and the time it runs at.
pub(super) struct Claim<'a> {
    pub source: &'a str,
    pub guard: &'a Guard,
    pub event_id: &'a str,
    pub now: i64,
}

impl Claim<'_> {
    /// The remembered body's key: source, type (`""` for none) or [`Guard::SIGNED_NONCE`], SHA-256.
    fn body(&self) -> (&str, &str, &str) {
        (self.source, &self.guard.kind, &self.guard.sha256)
    }

    /// Until when the body is remembered, if this create comes to hold it.
    fn until(&self) -> i64 {
        self.now.saturating_add(crate::time::ms(self.guard.within))
    }
}

/// Claims each body for its create: `None` where the create now holds it, or the live event that held it first.
/// No two claims may name one body (a batch's repeats go one by one after it).
pub(super) async fn hold(
    c: &impl GenericClient,
    claims: &[Claim<'_>],
) -> Result<Vec<Option<Record>>, StoreError> {
    let mut answers: Vec<Option<Record>> = vec![None; claims.len()];
    if claims.is_empty() {
        return Ok(answers);
    }
    let (sources, types, shas, ids, untils) = columns(claims, (0..claims.len()).collect());
    // A new row is this create's; an existing one is locked, left as it is, and answered. One that names this very
    // event (an earlier life of its key) takes this create's window.
    let rows = query(
        c,
        "INSERT INTO bodies AS b (source, event_type, payload_sha256, event_id, expires_at)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[])
         ON CONFLICT (source, event_type, payload_sha256) DO UPDATE
             SET expires_at = CASE WHEN b.event_id = excluded.event_id THEN excluded.expires_at
                                   ELSE b.expires_at END
         RETURNING source, event_type, payload_sha256, event_id, expires_at",
        &[&sources, &types, &shas, &ids, &untils],
    )
    .await?;
    let by_body: HashMap<(&str, &str, &str), usize> =
        claims.iter().enumerate().map(|(i, c)| (c.body(), i)).collect();
    // The claims whose body another event's row names, and that row's window.
    let mut contested: Vec<(usize, &str, i64)> = Vec::new();
    for row in &rows {
        let body: (&str, &str, &str) = (row.get(0), row.get(1), row.get(2));
        let (holder, expires_at): (&str, i64) = (row.get(3), row.get(4));
        let Some(&i) = by_body.get(&body) else {
            return Err(StoreError::Unavailable(format!(
                "the remembered bodies answered a body they were not given ({}, {})",
                body.0, body.1
            )));
        };
        if holder != claims[i].event_id {
            contested.push((i, holder, expires_at));
        }
    }
    if contested.is_empty() {
        return Ok(answers);
    }
    // The holders' records, read after the upsert: a holder committed by the transaction the upsert waited for is
    // seen here.
    let (holder_sources, holder_ids): (Vec<&str>, Vec<&str>) = contested
        .iter()
        .map(|&(i, holder, _)| (claims[i].source, holder))
        .unzip();
    let rows = query(
        c,
        &format!(
            "SELECT {COLUMNS}, w.n FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS w (s, i, n)
             JOIN events e ON e.source = w.s AND e.event_id = w.i"
        ),
        &[&holder_sources, &holder_ids],
    )
    .await?;
    let mut records: HashMap<usize, Record> = HashMap::with_capacity(rows.len());
    for row in &rows {
        let n: i64 = row.get(20);
        let (_, r) = record(row)?;
        if let Some(k) = usize::try_from(n - 1).ok().filter(|k| *k < contested.len()) {
            records.insert(k, r);
        }
    }
    // A live holder keeps the body; any other is replaced by this create (the row is locked by the upsert).
    let mut taken = Vec::new();
    for (k, &(i, _, expires_at)) in contested.iter().enumerate() {
        let claim = &claims[i];
        let live = records.remove(&k).filter(|holder| {
            expires_at > claim.now && !holder.is_expired(claim.now) && claim.guard.held_by(holder)
        });
        match live {
            Some(holder) => answers[i] = Some(holder),
            None => taken.push(i),
        }
    }
    if !taken.is_empty() {
        let (sources, types, shas, ids, untils) = columns(claims, taken);
        execute(
            c,
            "UPDATE bodies b SET event_id = x.i, expires_at = x.u
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[]) AS x (s, t, h, i, u)
             WHERE b.source = x.s AND b.event_type = x.t AND b.payload_sha256 = x.h",
            &[&sources, &types, &shas, &ids, &untils],
        )
        .await?;
    }
    Ok(answers)
}

/// The columns of the rows `picked` claims remember (source, type, SHA-256, holder, until), in body order: two
/// instances' statements lock the rows in one order.
#[allow(clippy::type_complexity)]
fn columns<'a>(
    claims: &'a [Claim<'_>],
    mut picked: Vec<usize>,
) -> (Vec<&'a str>, Vec<&'a str>, Vec<&'a str>, Vec<&'a str>, Vec<i64>) {
    picked.sort_by_key(|&i| claims[i].body());
    let mut columns = (vec![], vec![], vec![], vec![], vec![]);
    for &i in &picked {
        let (source, kind, sha) = claims[i].body();
        columns.0.push(source);
        columns.1.push(kind);
        columns.2.push(sha);
        columns.3.push(claims[i].event_id);
        columns.4.push(claims[i].until());
    }
    columns
}

/// Marks the events `marks` names (row id, holder's id) as resent bodies of their holders.
pub(super) async fn mark(c: &impl GenericClient, marks: &[(i64, &str)]) -> Result<(), StoreError> {
    if marks.is_empty() {
        return Ok(());
    }
    let (rows, holders): (Vec<i64>, Vec<&str>) = marks.iter().copied().unzip();
    execute(
        c,
        "UPDATE events e SET resent_of = x.holder
         FROM unnest($1::int8[], $2::text[]) AS x (event, holder) WHERE e.id = x.event",
        &[&rows, &holders],
    )
    .await?;
    Ok(())
}

/// Deletes again the events `rows` names (their bodies with them): creates refused for a body a live event holds.
pub(super) async fn unstore(c: &impl GenericClient, rows: &[i64]) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    execute(c, "DELETE FROM events WHERE id = ANY($1)", &[&rows]).await?;
    Ok(())
}
