//! Rows to records: the columns every read selects ([`COLUMNS`]), their mapping ([`event_row`], status parsing),
//! the lookup of one record ([`find`]) and of its body ([`with_payload`]).

use rusqlite::{params, Connection, OptionalExtension, Row};

use super::ops::Encoding;
use super::sql;
use crate::model::{Event, EventId, EventKey, Origin, Record, SourceName, Status};
use crate::ports::StoreError;

/// The sources present, each found by one seek in `events_source` (a skip scan), so that an id looked up without
/// its source is still a seek per source in the unique key `(source, event_id)`.
pub(super) const SOURCES: &str = "WITH RECURSIVE s(x) AS (
        SELECT min(source) FROM events
        UNION ALL SELECT (SELECT min(source) FROM events WHERE source > s.x) FROM s WHERE s.x IS NOT NULL
    ) SELECT x FROM s WHERE x IS NOT NULL";

/// The remembered bodies' key (`bodies.body_key`, schema version 8): the first 8 bytes of the SHA-256 of the
/// source, the type (`""` for none) and the body's SHA-256, as one integer. The table is keyed by it alone, so an
/// entry is a few dozen bytes in one B-tree (not a 130-byte text key in a table and an index of its own); two
/// bodies under one key (odds about 2⁻⁶⁴ a pair) are told apart by the holder's record (the writer's
/// `body_holder`, in [`transitions`](super::transitions)).
pub(super) fn body_key(source: &str, event_type: &str, payload_sha256: &str) -> i64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new()
        .chain_update(source)
        .chain_update([0])
        .chain_update(event_type)
        .chain_update([0])
        .chain_update(payload_sha256)
        .finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

pub(super) const COLUMNS: &str =
    "id, source, event_id, event_type, status, payload_sha256, received_at, updated_at, attempts, \
    replays, lease_owner, lease_until, next_attempt_at, last_error, completed_at, expires_at, notified_at, \
    replayed_at, origin, resent_of";

pub(super) fn status(r: &Row<'_>, i: usize) -> rusqlite::Result<Status> {
    let text: String = r.get(i)?;
    text.parse().map_err(|_| conversion(i, "bad status"))
}

pub(super) fn conversion(i: usize, what: &'static str) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, what.into())
}

/// A row of `COLUMNS` (a record, without its body or kept headers); returns the row id too.
pub(super) fn event_row(r: &Row<'_>) -> rusqlite::Result<(i64, Record)> {
    let source: String = r.get(1)?;
    let event_id: String = r.get(2)?;
    let origin: String = r.get(18)?;
    Ok((
        r.get(0)?,
        Record {
            source: SourceName::parse(&source).map_err(|_| conversion(1, "bad source"))?,
            event_id: EventId::parse(&event_id).map_err(|_| conversion(2, "bad event id"))?,
            event_type: r.get(3)?,
            status: status(r, 4)?,
            payload_sha256: r.get(5)?,
            headers: Vec::new(),
            received_at: r.get(6)?,
            updated_at: r.get(7)?,
            attempts: r.get(8)?,
            replays: r.get(9)?,
            lease_owner: r.get(10)?,
            lease_until: r.get(11)?,
            next_attempt_at: r.get(12)?,
            last_error: r.get(13)?,
            completed_at: r.get(14)?,
            expires_at: r.get(15)?,
            notified_at: r.get(16)?,
            replayed_at: r.get(17)?,
            origin: origin
                .parse::<Origin>()
                .map_err(|_| conversion(18, "bad origin"))?,
            resent_of: r
                .get::<_, Option<String>>(19)?
                .map(|id| EventId::parse(&id).map_err(|_| conversion(19, "bad resent_of")))
                .transpose()?,
        },
    ))
}

/// The record of `key` and its row id, without its body.
pub(super) fn find(c: &Connection, key: &EventKey) -> Result<Option<(i64, Record)>, StoreError> {
    c.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM events WHERE source = ?1 AND event_id = ?2"
    ))
    .and_then(|mut s| {
        s.query_row(params![key.source.as_str(), key.event_id.as_str()], event_row)
            .optional()
    })
    .map_err(sql)
}

/// `record` with its body and headers, or back without them (`Err`) when its payload row is gone. A stored body
/// that does not decode (an unknown encoding, a frame that does not decompress) is corrupt.
pub(super) fn with_payload(
    c: &Connection,
    id: i64,
    mut record: Record,
) -> Result<Result<Event, Record>, StoreError> {
    let found: Option<(String, Vec<u8>, i64)> = c
        .prepare_cached("SELECT headers, body, encoding FROM payloads WHERE event = ?1")
        .and_then(|mut s| {
            s.query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()
        })
        .map_err(sql)?;
    let Some((headers, body, encoding)) = found else {
        return Ok(Err(record));
    };
    record.headers = serde_json::from_str(&headers)
        .map_err(|_| StoreError::Corrupt(format!("the kept headers of {} are not JSON", record.key())))?;
    let payload = match Encoding::from_column(encoding) {
        Some(Encoding::Raw) => bytes::Bytes::from(body),
        Some(Encoding::Zstd) => crate::compression::decompress(&body)
            .map(bytes::Bytes::from)
            .map_err(|_| {
                StoreError::Corrupt(format!("the stored body of {} does not decompress", record.key()))
            })?,
        None => {
            return Err(StoreError::Corrupt(format!(
                "the stored body of {} has an unknown encoding ({encoding})",
                record.key()
            )))
        }
    };
    Ok(Ok(record.with_payload(payload)))
}
