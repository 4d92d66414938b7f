//! Rows to records: the columns every read selects ([`COLUMNS`]), their mapping ([`record`]), the lookup of one
//! record ([`find`]) and of its body ([`with_payload`]), and a create's body as it is stored ([`Prepared`]).

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::{query_opt, COMPRESS_UP_TO};
use crate::model::{Event, EventId, EventKey, Guard, NewEvent, Origin, Record, SourceName};
use crate::ports::StoreError;

pub(super) const COLUMNS: &str =
    "id, source, event_id, event_type, status, payload_sha256, received_at, updated_at, attempts, \
    replays, lease_owner, lease_until, next_attempt_at, last_error, completed_at, expires_at, notified_at, \
    replayed_at, origin, resent_of";

/// How a stored body is encoded (`payloads.encoding`): as received, or zstd.
const RAW: i16 = 0;
const ZSTD: i16 = 1;

/// A create as it is written: the event, its kept headers as JSON, its body as stored, and the claim made in the
/// create (owner and lease in ms) where the runtime asked for one.
pub(super) struct Prepared {
    pub event: NewEvent,
    pub headers: String,
    pub body: Vec<u8>,
    pub encoding: i16,
    pub claim: Option<(String, i64)>,
    /// What the create looks for among the remembered bodies, if anything ([`NewEvent::guard`]).
    pub guard: Option<Guard>,
}

/// `event` as it is written: bodies up to [`COMPRESS_UP_TO`] compressed where that makes them smaller.
pub(super) fn prepare(event: NewEvent, claim: Option<(String, i64)>) -> Result<Prepared, StoreError> {
    let headers = serde_json::to_string(&event.headers)
        .map_err(|e| StoreError::Unavailable(format!("cannot encode the headers of {}: {e}", event.key)))?;
    let compressed = (event.payload.len() <= COMPRESS_UP_TO)
        .then(|| crate::compression::smaller(&event.payload, crate::compression::FAST))
        .flatten();
    let (body, encoding) = match compressed {
        Some(bytes) => (bytes, ZSTD),
        None => (event.payload.to_vec(), RAW),
    };
    Ok(Prepared {
        guard: event.guard(),
        event,
        headers,
        body,
        encoding,
        claim,
    })
}

fn corrupt(what: &str, column: &str) -> StoreError {
    StoreError::Corrupt(format!("a stored record has a bad {column}: {what}"))
}

fn get<'a, T: tokio_postgres::types::FromSql<'a>>(r: &'a Row, i: usize) -> Result<T, StoreError> {
    r.try_get(i)
        .map_err(|e| StoreError::Corrupt(format!("a stored record's column {i} does not read: {e}")))
}

fn count(r: &Row, i: usize) -> Result<u32, StoreError> {
    u32::try_from(get::<i32>(r, i)?).map_err(|_| corrupt("negative", "count"))
}

/// A row of [`COLUMNS`] (a record, without its body or kept headers), with its row id.
pub(super) fn record(r: &Row) -> Result<(i64, Record), StoreError> {
    let source: String = get(r, 1)?;
    let event_id: String = get(r, 2)?;
    let status: String = get(r, 4)?;
    let origin: String = get(r, 18)?;
    let resent_of: Option<String> = get(r, 19)?;
    Ok((
        get(r, 0)?,
        Record {
            source: SourceName::parse(&source).map_err(|_| corrupt(&source, "source"))?,
            event_id: EventId::parse(&event_id).map_err(|_| corrupt(&event_id, "event id"))?,
            event_type: get(r, 3)?,
            status: status.parse().map_err(|_| corrupt(&status, "status"))?,
            payload_sha256: get(r, 5)?,
            headers: Vec::new(),
            received_at: get(r, 6)?,
            updated_at: get(r, 7)?,
            attempts: count(r, 8)?,
            replays: count(r, 9)?,
            lease_owner: get(r, 10)?,
            lease_until: get(r, 11)?,
            next_attempt_at: get(r, 12)?,
            last_error: get(r, 13)?,
            completed_at: get(r, 14)?,
            expires_at: get(r, 15)?,
            notified_at: get(r, 16)?,
            replayed_at: get(r, 17)?,
            origin: origin.parse::<Origin>().map_err(|_| corrupt(&origin, "origin"))?,
            resent_of: resent_of
                .map(|id| EventId::parse(&id).map_err(|_| corrupt(&id, "resent_of")))
                .transpose()?,
        },
    ))
}

/// The records of `rows`, without their row ids.
pub(super) fn records(rows: &[Row]) -> Result<Vec<Record>, StoreError> {
    rows.iter().map(|r| record(r).map(|(_, record)| record)).collect()
}

/// The record of `key` and its row id, without its body.
pub(super) async fn find(
    c: &impl GenericClient,
    key: &EventKey,
) -> Result<Option<(i64, Record)>, StoreError> {
    query_opt(
        c,
        &format!("SELECT {COLUMNS} FROM events WHERE source = $1 AND event_id = $2"),
        &[&key.source.as_str(), &key.event_id.as_str()],
    )
    .await?
    .map(|r| record(&r))
    .transpose()
}

/// `record` with its body and headers, or back without them (`Err`) when its payload row is gone. A stored body
/// that does not decode is corrupt.
pub(super) async fn with_payload(
    c: &impl GenericClient,
    id: i64,
    mut record: Record,
) -> Result<Result<Event, Record>, StoreError> {
    let Some(row) = query_opt(
        c,
        "SELECT headers, body, encoding FROM payloads WHERE event = $1",
        &[&id],
    )
    .await?
    else {
        return Ok(Err(record));
    };
    let headers: String = get(&row, 0)?;
    let body: Vec<u8> = get(&row, 1)?;
    let encoding: i16 = get(&row, 2)?;
    record.headers = serde_json::from_str(&headers)
        .map_err(|_| StoreError::Corrupt(format!("the kept headers of {} are not JSON", record.key())))?;
    let payload = match encoding {
        RAW => bytes::Bytes::from(body),
        ZSTD => crate::compression::decompress(&body)
            .map(bytes::Bytes::from)
            .map_err(|_| {
                StoreError::Corrupt(format!("the stored body of {} does not decompress", record.key()))
            })?,
        other => {
            return Err(StoreError::Corrupt(format!(
                "the stored body of {} has an unknown encoding ({other})",
                record.key()
            )))
        }
    };
    Ok(Ok(record.with_payload(payload)))
}
