//! The schema: the tables and indexes of each version (`PRAGMA user_version`), and [`migrate`], which brings an
//! older file up to [`SCHEMA_VERSION`] at open.

use rusqlite::Connection;

use super::rows::body_key;
use super::sql;
use crate::ports::StoreError;

/// The schema version this code writes (`PRAGMA user_version`); older files are brought up to it at open.
const SCHEMA_VERSION: i64 = 9;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS events (
    id              INTEGER PRIMARY KEY,
    source          TEXT    NOT NULL,
    event_id        TEXT    NOT NULL,
    event_type      TEXT,
    status          TEXT    NOT NULL,
    payload_sha256  TEXT    NOT NULL,
    received_at     INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    replays         INTEGER NOT NULL DEFAULT 0,
    lease_owner     TEXT,
    lease_until     INTEGER,
    next_attempt_at INTEGER,
    last_error      TEXT,
    completed_at    INTEGER,
    expires_at      INTEGER,
    notified_at     INTEGER,
    -- The sparse index key: set only while the event is open, or dead with its alarm not yet sent.
    due_at          INTEGER,
    UNIQUE (source, event_id)
);
CREATE INDEX IF NOT EXISTS events_due ON events (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS events_status ON events (status, received_at);
CREATE INDEX IF NOT EXISTS events_expiry ON events (expires_at) WHERE expires_at IS NOT NULL;
-- Bodies are written once, beside the small state row that every transition rewrites.
CREATE TABLE IF NOT EXISTS payloads (
    event   INTEGER PRIMARY KEY,
    headers TEXT NOT NULL,
    body    BLOB NOT NULL
);
";

/// Version 2: the origin of an event, when it was last replayed (the age budget counts from there), the bodies of
/// sources that refuse a resent body under a fresh id, and the reconciliation checkpoints, apart from the events.
const SCHEMA_V2: &str = "
ALTER TABLE events ADD COLUMN origin TEXT NOT NULL DEFAULT 'webhook';
ALTER TABLE events ADD COLUMN replayed_at INTEGER;
CREATE TABLE IF NOT EXISTS bodies (
    source         TEXT    NOT NULL,
    payload_sha256 TEXT    NOT NULL,
    event_id       TEXT    NOT NULL,
    expires_at     INTEGER NOT NULL,
    PRIMARY KEY (source, payload_sha256)
);
CREATE TABLE IF NOT EXISTS checkpoints (
    source TEXT PRIMARY KEY,
    body   TEXT NOT NULL
);
";

/// Version 3: the operator console's listings, newest first, filtered by source or type, each served from an
/// index rather than a walk of the table. Only inserts write them (`received_at`, `source` and `event_type` never
/// change), so the state transitions cost what they did; and each grows at its end (per source, per type), so an
/// insert dirties a page already dirty in its batch. A filter on the id alone needs no index of its own: it looks
/// the id up under each source in the unique key (see [`SOURCES`](super::rows::SOURCES)).
const SCHEMA_V3: &str = "
CREATE INDEX IF NOT EXISTS events_received ON events (received_at);
CREATE INDEX IF NOT EXISTS events_source ON events (source, received_at);
CREATE INDEX IF NOT EXISTS events_type ON events (event_type, received_at);
";

/// Version 4: version 3 had an index on `event_id` alone. Ids are random, so each insert wrote a leaf page of its
/// own there, as many as the unique key itself: a tenth of the accept rate, for a lookup the unique key serves.
const SCHEMA_V4: &str = "DROP INDEX IF EXISTS events_event_id;";

/// Version 5: a resent body is stored as its own event, marked with the id that held it (`resent_of`), and a body
/// is remembered per source **and type** (`''` for none), since one body under two types is two events. The
/// remembered bodies of version 4 keep their holder, under its type.
const SCHEMA_V5: &str = "
ALTER TABLE events ADD COLUMN resent_of TEXT;
CREATE TABLE bodies_v5 (
    source         TEXT    NOT NULL,
    event_type     TEXT    NOT NULL,
    payload_sha256 TEXT    NOT NULL,
    event_id       TEXT    NOT NULL,
    expires_at     INTEGER NOT NULL,
    PRIMARY KEY (source, event_type, payload_sha256)
);
INSERT OR IGNORE INTO bodies_v5 (source, event_type, payload_sha256, event_id, expires_at)
    SELECT b.source, coalesce(e.event_type, ''), b.payload_sha256, b.event_id, b.expires_at
    FROM bodies b LEFT JOIN events e ON e.source = b.source AND e.event_id = b.event_id;
DROP TABLE bodies;
ALTER TABLE bodies_v5 RENAME TO bodies;
";

/// Version 6: the remembered bodies by expiry, so that the purge deletes the expired ones a bounded batch at a
/// time through an index; before it, every purge read the whole table on the writer thread, while every write
/// waited (docs/bench-log/2026-12-04.md). Expiry is the create's time plus a fixed window, so an insert lands at the
/// index's end, on a page its batch has already dirtied.
const SCHEMA_V6: &str = "CREATE INDEX IF NOT EXISTS bodies_expiry ON bodies (expires_at);";

/// Version 7: how each stored body is encoded (`0` as received, `1` zstd): bodies are stored compressed where that
/// makes them smaller, so a 2 KiB JSON body takes a fraction of a page rather than a page of its own. Older rows
/// are as received.
const SCHEMA_V7: &str = "ALTER TABLE payloads ADD COLUMN encoding INTEGER NOT NULL DEFAULT 0;";

/// Version 8: the remembered bodies keyed by one integer ([`body_key`]) in the table's own B-tree, not by their
/// source, type and hex SHA-256 in an index beside the table. Every create of a source that looks for resent bodies
/// writes one entry at a random place in that key; as text in an index of its own it cost a table row, an index
/// entry of about 130 bytes and a fifth of the accept rate. The rows of version 7 are carried over by [`to_v8`].
const SCHEMA_V8: &str = "
CREATE TABLE bodies_v8 (
    body_key   INTEGER PRIMARY KEY,
    event_id   TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
);
";

/// Version 9: a remembered signed nonce (a Mailgun delivery's `token`, remembered in its body's place:
/// [`Guard`](crate::model::Guard)) keeps its whole SHA-256 beside its [`body_key`], a hash of it: a body's holder
/// says by its record whether it holds that very body, but a nonce's holder carries another body by design.
/// `NULL` for a body.
const SCHEMA_V9: &str = "ALTER TABLE bodies ADD COLUMN nonce_sha256 TEXT;";

/// The remembered bodies of version 7 under their [`body_key`] (the key is a SHA-256, which SQL cannot compute);
/// then the table takes the old one's place, with its expiry index.
fn to_v8(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(SCHEMA_V8)?;
    {
        let mut rows =
            conn.prepare("SELECT source, event_type, payload_sha256, event_id, expires_at FROM bodies")?;
        let mut insert = conn.prepare(
            "INSERT INTO bodies_v8 (body_key, event_id, expires_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (body_key) DO UPDATE SET event_id = excluded.event_id, expires_at = excluded.expires_at
             WHERE excluded.expires_at > bodies_v8.expires_at",
        )?;
        let mut found = rows.query([])?;
        while let Some(r) = found.next()? {
            let (source, event_type, sha): (String, String, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
            let (event_id, expires_at): (String, i64) = (r.get(3)?, r.get(4)?);
            insert.execute(rusqlite::params![
                body_key(&source, &event_type, &sha),
                event_id,
                expires_at
            ])?;
        }
    }
    conn.execute_batch(
        "DROP TABLE bodies;
         ALTER TABLE bodies_v8 RENAME TO bodies;
         CREATE INDEX bodies_expiry ON bodies (expires_at);",
    )
}

/// Brings the file's schema to [`SCHEMA_VERSION`]; a file already there is only read (no write lock taken).
pub(super) fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sql)?;
    if version >= SCHEMA_VERSION {
        return Ok(());
    }
    conn.execute_batch("BEGIN IMMEDIATE").map_err(sql)?;
    let migrated = (|| {
        // Read again under the lock: another process may have migrated meanwhile.
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version >= SCHEMA_VERSION {
            return Ok(());
        }
        if version < 2 {
            conn.execute_batch(SCHEMA)?;
            conn.execute_batch(SCHEMA_V2)?;
        }
        if version < 3 {
            conn.execute_batch(SCHEMA_V3)?;
        }
        if version < 4 {
            conn.execute_batch(SCHEMA_V4)?;
        }
        if version < 5 {
            conn.execute_batch(SCHEMA_V5)?;
        }
        if version < 6 {
            conn.execute_batch(SCHEMA_V6)?;
        }
        // Added only where missing, as every step before it is (`IF NOT EXISTS`).
        let has_encoding: bool = conn.query_row(
            "SELECT count(*) FROM pragma_table_info('payloads') WHERE name = 'encoding'",
            [],
            |r| r.get::<_, i64>(0).map(|n| n > 0),
        )?;
        if !has_encoding {
            conn.execute_batch(SCHEMA_V7)?;
        }
        if version < 8 {
            to_v8(conn)?;
        }
        if version < 9 {
            conn.execute_batch(SCHEMA_V9)?;
        }
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)
    })();
    match migrated {
        Ok(()) => conn.execute_batch("COMMIT").map_err(sql),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(sql(e))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A file as version 5 left it: every table and index up to there, with one remembered body.
    fn version_5() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        for step in [SCHEMA, SCHEMA_V2, SCHEMA_V3, SCHEMA_V4, SCHEMA_V5] {
            conn.execute_batch(step).unwrap();
        }
        conn.execute(
            "INSERT INTO bodies (source, event_type, payload_sha256, event_id, expires_at) VALUES ('s', 't', 'h', 'e', 7)",
            [],
        )
        .unwrap();
        conn.pragma_update(None, "user_version", 5).unwrap();
        conn
    }

    fn plan(conn: &Connection, sql: &str) -> String {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let rows = stmt.query_map([], |r| r.get::<_, String>(3)).unwrap();
        rows.map(Result::unwrap).collect::<Vec<_>>().join("; ")
    }

    /// The purge's choice of expired bodies (writer.rs, `Op::Purge`).
    const EXPIRED_BODIES: &str =
        "SELECT rowid FROM bodies WHERE expires_at <= 10 ORDER BY expires_at LIMIT 100";

    #[test]
    fn version_5_gains_the_index_that_purges_remembered_bodies_without_a_scan() {
        let conn = version_5();
        assert!(plan(&conn, EXPIRED_BODIES).contains("SCAN bodies"));

        migrate(&conn).unwrap();

        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let found = plan(&conn, EXPIRED_BODIES);
        assert!(found.contains("INDEX bodies_expiry"), "{found}");
        let kept: (String, i64) = conn
            .query_row(
                "SELECT event_id, expires_at FROM bodies WHERE body_key = ?1",
                [body_key("s", "t", "h")],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(kept, ("e".to_owned(), 7));
        // A second open finds the file current and changes nothing.
        migrate(&conn).unwrap();
    }

    #[test]
    fn version_6_keeps_its_bodies_as_received() {
        let conn = version_5();
        conn.execute_batch(SCHEMA_V6).unwrap();
        conn.execute(
            "INSERT INTO payloads (event, headers, body) VALUES (1, '[]', CAST('{}' AS BLOB))",
            [],
        )
        .unwrap();
        conn.pragma_update(None, "user_version", 6).unwrap();

        migrate(&conn).unwrap();

        let (encoding, body): (i64, Vec<u8>) = conn
            .query_row("SELECT encoding, body FROM payloads WHERE event = 1", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!((encoding, body.as_slice()), (0, b"{}".as_slice()));
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }

    /// GIVEN a file as version 8 left it, with one remembered body
    /// WHEN it is opened
    /// THEN its remembered bodies can keep a signed nonce's SHA-256, and the body it held is still held.
    #[test]
    fn version_8_gains_the_column_of_a_remembered_nonce_and_keeps_its_bodies() {
        let conn = version_5();
        conn.execute_batch(SCHEMA_V6).unwrap();
        conn.execute_batch(SCHEMA_V7).unwrap();
        to_v8(&conn).unwrap();
        conn.pragma_update(None, "user_version", 8).unwrap();

        migrate(&conn).unwrap();

        let kept: (String, Option<String>) = conn
            .query_row(
                "SELECT event_id, nonce_sha256 FROM bodies WHERE body_key = ?1",
                [body_key("s", "t", "h")],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(kept, ("e".to_owned(), None));
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }

    #[test]
    fn a_new_file_is_created_at_the_current_version() {
        let conn = Connection::open_in_memory().unwrap();
        migrate(&conn).unwrap();
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        assert!(plan(&conn, EXPIRED_BODIES).contains("INDEX bodies_expiry"));
    }
}
