//! The schema: the tables and indexes of each version (`PRAGMA user_version`), and [`migrate`], which brings an
//! older file up to [`SCHEMA_VERSION`] at open.

use rusqlite::Connection;

use super::sql;
use crate::ports::StoreError;

/// The schema version this code writes (`PRAGMA user_version`); older files are brought up to it at open.
const SCHEMA_VERSION: i64 = 5;

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
        conn.execute_batch(SCHEMA_V5)?;
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
