//! The console's overview counts, each from an index: by status, per source, the oldest open event and the
//! last day by the hour.

use rusqlite::{params, Connection};

use super::rows::{conversion, status};
use crate::model::{SourceName, Status};
use crate::ports::{Bucket, Summary};

/// Hours the overview's chart covers.
const TIMELINE_HOURS: i64 = 24;
const HOUR_MS: i64 = 3_600_000;

/// The console's overview counts; see [`Browse::summary`](crate::ports::Browse::summary).
pub(super) fn summarize(c: &Connection, now: i64) -> rusqlite::Result<Summary> {
    let pairs = |sql: &str, p: &[&dyn rusqlite::ToSql]| -> rusqlite::Result<Vec<(String, i64)>> {
        let mut stmt = c.prepare_cached(sql)?;
        let rows = stmt.query_map(p, |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect()
    };
    let expired = pairs(
        // INDEXED BY: left alone, the planner walks `events_source` for the GROUP BY and reads every row.
        "SELECT source, count(*) FROM events INDEXED BY events_expiry WHERE expires_at <= ?1 GROUP BY source",
        &[&now],
    )?;
    let expired_total: i64 = expired.iter().map(|(_, n)| n).sum();
    // Completed events are most of a store: their count is the whole (a count of pages, not of rows) less the
    // others, which `events_status` counts in ranges of their own.
    let total: i64 = c
        .prepare_cached("SELECT count(*) FROM events")?
        .query_row([], |r| r.get(0))?;
    let mut by_status: Vec<(Status, Option<u64>)> = Status::ALL.iter().map(|st| (*st, Some(0))).collect();
    let mut completed = total - expired_total;
    for (st, n) in pairs(
        "SELECT status, count(*) FROM events
         WHERE status IN ('RECEIVED', 'PROCESSING', 'FAILED', 'DEAD') GROUP BY status",
        &[],
    )? {
        let st: Status = st.parse().map_err(|_| conversion(0, "bad status"))?;
        completed -= n;
        if let Some(slot) = by_status.iter_mut().find(|(s, _)| *s == st) {
            slot.1 = Some(u64::try_from(n).unwrap_or(0));
        }
    }
    if let Some(slot) = by_status.iter_mut().find(|(s, _)| *s == Status::Completed) {
        slot.1 = Some(u64::try_from(completed).unwrap_or(0));
    }
    let totals = pairs("SELECT source, count(*) FROM events GROUP BY source", &[])?;
    let mut stmt = c.prepare_cached(
        "SELECT source, status, count(*) FROM events
         WHERE status IN ('RECEIVED', 'PROCESSING', 'FAILED', 'DEAD') GROUP BY source, status",
    )?;
    let open = stmt
        .query_map([], |r| {
            Ok((r.get::<_, String>(0)?, status(r, 1)?, r.get::<_, i64>(2)?))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut by_source = Vec::new();
    for (source, total) in totals {
        let name = SourceName::parse(&source).map_err(|_| conversion(0, "bad source"))?;
        let mut rest = total;
        for (_, st, n) in open.iter().filter(|(s, _, _)| *s == source) {
            rest -= n;
            by_source.push((name.clone(), *st, u64::try_from(*n).unwrap_or(0)));
        }
        rest -= expired
            .iter()
            .filter(|(s, _)| *s == source)
            .map(|(_, n)| n)
            .sum::<i64>();
        if rest > 0 {
            by_source.push((name, Status::Completed, u64::try_from(rest).unwrap_or(0)));
        }
    }
    let mut oldest_open: Option<i64> = None;
    for st in ["RECEIVED", "PROCESSING", "FAILED"] {
        let t: Option<i64> = c
            .prepare_cached("SELECT min(received_at) FROM events WHERE status = ?1")?
            .query_row([st], |r| r.get(0))?;
        oldest_open = match (oldest_open, t) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    let first = (now / HOUR_MS - (TIMELINE_HOURS - 1)) * HOUR_MS;
    let mut timeline: Vec<Bucket> = (0..TIMELINE_HOURS)
        .map(|h| Bucket {
            start: first + h * HOUR_MS,
            ..Default::default()
        })
        .collect();
    // Per status, so each count walks only the covering index `events_status (status, received_at)`.
    let mut stmt = c.prepare_cached(
        "SELECT (received_at - ?1) / ?2, count(*) FROM events WHERE status = ?3 AND received_at >= ?1 GROUP BY 1",
    )?;
    for st in Status::ALL {
        let rows = stmt.query_map(params![first, HOUR_MS, st.as_str()], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
        })?;
        for row in rows {
            let (hour, n) = row?;
            let Some(bucket) = usize::try_from(hour).ok().and_then(|h| timeline.get_mut(h)) else {
                continue;
            };
            let n = u64::try_from(n).unwrap_or(0);
            bucket.accepted += n;
            match st {
                Status::Completed => bucket.completed += n,
                Status::Dead => bucket.dead += n,
                _ => {}
            }
        }
    }
    Ok(Summary {
        by_status,
        by_source,
        oldest_open,
        timeline,
    })
}
