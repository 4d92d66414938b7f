//! The schema, as numbered migrations applied at open in one transaction under an advisory lock (two instances
//! starting together migrate once), each recorded in `schema_versions`. A database migrated by a newer binary is
//! refused with the two versions named: this binary does not know what the newer one wrote.
//!
//! **A small hot table.** What claims and the sweeper read is the partial index `events_due`, which holds only open
//! events and dead ones whose alarm is owed (a settle to COMPLETED takes the row out of it): it stays the size of
//! the unfinished work however many completed events are kept for their 30 days. Bodies are written once, in a table
//! of their own (`payloads`), beside the small state row that every transition rewrites; the state table is filled
//! to 80 % so that a transition's new row version fits on its page (a heap-only update, no index entry written),
//! and its autovacuum runs after 2 % of it changed rather than PostgreSQL's default 20 %.

use deadpool_postgres::GenericClient;

use super::{execute, pg, query};
use crate::ports::StoreError;

/// The migrations, in order: version `i + 1` is `MIGRATIONS[i]`.
const MIGRATIONS: &[&str] = &[
    // 1: the events, their bodies, the remembered bodies, reconciliation's checkpoints, owners and leaders.
    "
CREATE TABLE events (
    id              int8 GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source          text NOT NULL,
    event_id        text NOT NULL,
    event_type      text,
    status          text NOT NULL,
    payload_sha256  text NOT NULL,
    received_at     int8 NOT NULL,
    updated_at      int8 NOT NULL,
    attempts        int4 NOT NULL DEFAULT 0,
    replays         int4 NOT NULL DEFAULT 0,
    lease_owner     text,
    lease_until     int8,
    next_attempt_at int8,
    last_error      text,
    completed_at    int8,
    expires_at      int8,
    notified_at     int8,
    replayed_at     int8,
    origin          text NOT NULL,
    resent_of       text,
    -- The sweeper's key: set only while the event is open, or dead with its alarm not yet sent.
    due_at          int8,
    UNIQUE (source, event_id)
) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
CREATE INDEX events_due ON events (due_at) WHERE due_at IS NOT NULL;
-- Listings by an open or dead status; a listing of COMPLETED ones (most of the table) walks events_received.
CREATE INDEX events_open ON events (status, received_at) WHERE status <> 'COMPLETED';
CREATE INDEX events_expiry ON events (expires_at) WHERE status = 'COMPLETED';
CREATE INDEX events_received ON events (received_at, source, event_id);
CREATE INDEX events_source ON events (source, received_at);
CREATE INDEX events_type ON events (event_type, received_at);
CREATE TABLE payloads (
    event    int8 PRIMARY KEY REFERENCES events (id) ON DELETE CASCADE,
    headers  text NOT NULL,
    body     bytea NOT NULL,
    encoding int2 NOT NULL
);
CREATE TABLE bodies (
    source         text NOT NULL,
    event_type     text NOT NULL,
    payload_sha256 text NOT NULL,
    event_id       text NOT NULL,
    expires_at     int8 NOT NULL,
    PRIMARY KEY (source, event_type, payload_sha256)
);
CREATE INDEX bodies_expiry ON bodies (expires_at);
CREATE TABLE checkpoints (
    source text PRIMARY KEY,
    body   text NOT NULL
);
-- Each process's heartbeat, on the database's clock: an owner whose heartbeat ran out is gone, and its leases end.
CREATE TABLE owners (
    owner      text PRIMARY KEY,
    started_at timestamptz NOT NULL DEFAULT now(),
    alive_until timestamptz NOT NULL
);
-- One row per role led by one instance at a time (the sweeper's pass, retention, reconciliation): its holder, until
-- when on the database's clock, and a term that every change of holder increments.
CREATE TABLE leaders (
    role   text PRIMARY KEY,
    holder text NOT NULL,
    term   int8 NOT NULL,
    until  timestamptz NOT NULL
);
",
    // 2: the console's counts of completed events per source from an index (an index-only scan of the events kept,
    // never the table): the retention index carries the source.
    "
CREATE INDEX events_expiry_source ON events (expires_at, source) WHERE status = 'COMPLETED';
DROP INDEX events_expiry;
",
];

/// The schema version this binary writes.
pub(super) const VERSION: i32 = MIGRATIONS.len() as i32;

/// Brings the database up to [`VERSION`], or refuses one that is newer.
pub(super) async fn migrate(client: &deadpool_postgres::Object) -> Result<(), StoreError> {
    // One transaction, under a lock every instance's migration takes: the second to come finds it done.
    client
        .batch_execute("BEGIN; SET LOCAL client_min_messages = warning")
        .await
        .map_err(pg)?;
    let done = async {
        execute(
            client,
            "SELECT pg_advisory_xact_lock(hashtext('webhook-inbox schema'))",
            &[],
        )
        .await?;
        client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS schema_versions
                     (version int4 PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
            )
            .await
            .map_err(pg)?;
        let applied = current(client).await?;
        if applied > VERSION {
            return Err(newer(applied));
        }
        for (i, sql) in MIGRATIONS
            .iter()
            .enumerate()
            .skip(usize::try_from(applied).unwrap_or(0))
        {
            client.batch_execute(sql).await.map_err(pg)?;
            let version = i32::try_from(i + 1).unwrap_or(i32::MAX);
            execute(
                client,
                "INSERT INTO schema_versions (version) VALUES ($1)",
                &[&version],
            )
            .await?;
        }
        Ok(())
    }
    .await;
    match done {
        Ok(()) => client.batch_execute("COMMIT").await.map_err(pg),
        Err(e) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Err(e)
        }
    }
}

async fn current(client: &impl GenericClient) -> Result<i32, StoreError> {
    let rows = query(
        client,
        "SELECT coalesce(max(version), 0) FROM schema_versions",
        &[],
    )
    .await?;
    Ok(rows.first().map_or(0, |r| r.get(0)))
}

fn newer(applied: i32) -> StoreError {
    StoreError::Unavailable(format!(
        "the PostgreSQL database is at schema version {applied}, newer than this binary's {VERSION}: run the newer \
         webhook-inbox (a binary never writes a schema it does not know)"
    ))
}
