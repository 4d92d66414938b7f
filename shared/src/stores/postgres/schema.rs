//! The schema, as numbered migrations applied at open under an advisory lock (two instances starting together
//! migrate once), each recorded in `schema_versions`. A database migrated by a newer binary is refused with the two
//! versions named: this binary does not know what the newer one wrote.
//!
//! **Migrations take their time, and leave the writes alone.** They run without the pool's statement timeout (an
//! index built on a large table takes longer than any one request may, and a migration cancelled at every start
//! would never end). An index is built with `CREATE INDEX CONCURRENTLY`, outside the migration's transaction
//! ([`Migration::Index`]): a plain `CREATE INDEX` holds every write to its table for the whole build, and a
//! transaction holding it would hold them until it commits (a database created by the same pass has nothing to hold:
//! its indexes are built in the transaction). A concurrent build cut short (a crash, a lost connection) leaves an
//! invalid index behind: the next start drops it and builds it again, unless a build of it is running (another
//! instance's), which it waits for.
//!
//! **A small hot table.** What claims and the sweeper read is the partial index `events_due`, which holds only open
//! events and dead ones whose alarm is owed (a settle to COMPLETED takes the row out of it): it stays the size of
//! the unfinished work however many completed events are kept for their 30 days. Bodies are written once, in a table
//! of their own (`payloads`), beside the small state row that every transition rewrites; the state table is filled
//! to 80 % so that a transition's new row version fits on its page (a heap-only update, no index entry written),
//! and its autovacuum runs after 2 % of it changed rather than PostgreSQL's default 20 %.

use std::time::Duration;

use deadpool_postgres::GenericClient;

use super::{execute, pg, query, query_opt};
use crate::ports::StoreError;

/// One migration: statements run in the migration's transaction, or an index built beside the writes.
enum Migration {
    /// Run in the migration's transaction.
    Sql(&'static str),
    /// `CREATE INDEX CONCURRENTLY {name} {definition}`, outside any transaction; then `then` in the transaction that
    /// records the version.
    Index {
        name: &'static str,
        definition: &'static str,
        then: &'static str,
    },
}

/// The migrations, in order: version `i + 1` is `MIGRATIONS[i]`.
const MIGRATIONS: &[Migration] = &[
    // 1: the events, their bodies, the remembered bodies, reconciliation's checkpoints, owners and leaders.
    Migration::Sql(
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
    ),
    // 2: the console's counts of completed events per source from an index (an index-only scan of the events kept,
    // never the table): the retention index carries the source.
    Migration::Index {
        name: "events_expiry_source",
        definition: "ON events (expires_at, source) WHERE status = 'COMPLETED'",
        then: "DROP INDEX IF EXISTS events_expiry",
    },
];

/// The schema version this binary writes.
pub(super) const VERSION: i32 = MIGRATIONS.len() as i32;

/// Brings the database up to [`VERSION`], or refuses one that is newer. `client`'s session is left without a
/// statement timeout: the caller closes it rather than pool it.
pub(super) async fn migrate(client: &deadpool_postgres::Object) -> Result<(), StoreError> {
    // A concurrent index build is a statement of its own, outside any transaction: no `SET LOCAL` reaches it.
    client
        .batch_execute("SET statement_timeout = 0")
        .await
        .map_err(pg)?;
    // Each pass applies what it can in one transaction, up to an index to build beside the writes; the next pass,
    // once it is built, records it.
    let mut builds = 0;
    loop {
        let build = transaction(client).await?;
        let Some((name, definition)) = build else {
            return Ok(());
        };
        builds += 1;
        if builds > 3 {
            return Err(StoreError::Unavailable(format!(
                "the PostgreSQL index {name} is still not valid after {} builds",
                builds - 1
            )));
        }
        build_index(client, name, definition).await?;
    }
}

/// One transaction, under a lock every instance's migration takes (the second to come finds it done): the pending
/// migrations up to the first index not yet built, which is answered for [`build_index`].
async fn transaction(
    client: &deadpool_postgres::Object,
) -> Result<Option<(&'static str, &'static str)>, StoreError> {
    client
        .batch_execute("BEGIN; SET LOCAL client_min_messages = warning; SET LOCAL statement_timeout = 0")
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
        // A database this pass creates has empty tables: its indexes are built in the transaction, at once, rather
        // than each wait for every older transaction in the database as a concurrent build does.
        let fresh = applied == 0;
        for (i, migration) in MIGRATIONS
            .iter()
            .enumerate()
            .skip(usize::try_from(applied).unwrap_or(0))
        {
            match migration {
                Migration::Sql(sql) => client.batch_execute(sql).await.map_err(pg)?,
                Migration::Index {
                    name,
                    definition,
                    then,
                } => {
                    if fresh {
                        client
                            .batch_execute(&format!("CREATE INDEX {name} {definition}"))
                            .await
                            .map_err(pg)?;
                    } else if index(client, name).await? != Some(Index::Valid) {
                        return Ok(Some((*name, *definition)));
                    }
                    client.batch_execute(then).await.map_err(pg)?;
                }
            }
            let version = i32::try_from(i + 1).unwrap_or(i32::MAX);
            execute(
                client,
                "INSERT INTO schema_versions (version) VALUES ($1)",
                &[&version],
            )
            .await?;
        }
        Ok(None)
    }
    .await;
    match done {
        Ok(build) => client.batch_execute("COMMIT").await.map_err(pg).map(|()| build),
        Err(e) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Err(e)
        }
    }
}

/// An index as the catalog holds it.
#[derive(Debug, PartialEq, Eq)]
enum Index {
    Valid,
    /// Not usable yet: a concurrent build is running, or one was cut short.
    Invalid {
        building: bool,
    },
}

/// The index `name` (in the session's `search_path`), if there is one.
async fn index(c: &impl GenericClient, name: &str) -> Result<Option<Index>, StoreError> {
    let row = query_opt(
        c,
        "SELECT i.indisvalid,
                EXISTS (SELECT 1 FROM pg_stat_progress_create_index p WHERE p.index_relid = i.indexrelid)
         FROM pg_index i WHERE i.indexrelid = to_regclass($1)",
        &[&name],
    )
    .await?;
    Ok(row.map(|r| match r.get(0) {
        true => Index::Valid,
        false => Index::Invalid { building: r.get(1) },
    }))
}

/// Builds the index `name` without holding the writes to its table: waits for another instance's build of it, drops
/// one a build cut short left invalid, and builds it (a concurrent build cannot run in a transaction).
async fn build_index(c: &impl GenericClient, name: &str, definition: &str) -> Result<(), StoreError> {
    loop {
        match index(c, name).await? {
            Some(Index::Valid) => return Ok(()),
            Some(Index::Invalid { building: true }) => tokio::time::sleep(Duration::from_millis(200)).await,
            Some(Index::Invalid { building: false }) => {
                tracing::warn!(
                    index = name,
                    "dropping an invalid index a build cut short left, to build it again"
                );
                c.batch_execute(&format!("DROP INDEX CONCURRENTLY IF EXISTS {name}"))
                    .await
                    .map_err(pg)?;
            }
            None => {
                tracing::info!(
                    index = name,
                    "building an index beside the writes (CREATE INDEX CONCURRENTLY)"
                );
                // Another instance's build of the same name, begun meanwhile, makes this one fail or do nothing:
                // either way the next look finds its index, and waits for it.
                if let Err(e) = c
                    .batch_execute(&format!(
                        "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} {definition}"
                    ))
                    .await
                {
                    if index(c, name).await?.is_none() {
                        return Err(pg(e));
                    }
                }
            }
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
