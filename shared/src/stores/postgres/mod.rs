//! The shared store: one PostgreSQL database that is the ledger and the work queue of any number of `inbox serve`
//! processes (docs/DESIGN.md, "Many instances: PostgreSQL"). No second system: what is open is found in the
//! database, by every instance.
//!
//! - **Creates are group-committed** ([`batch`]): the creates that arrive while a transaction is in flight go in the
//!   next one, sorted by `(source, event_id)` so that two instances' overlapping batches take their row locks in
//!   one order; every caller is answered after `COMMIT` returned (`synchronous_commit = on`, set in the transaction
//!   itself so that it holds through any pooler, and the server is refused at open when `fsync` is off or its
//!   sessions start with `synchronous_commit = off`). A commit whose outcome is unknown (the connection lost on the
//!   way) is an error, never an answer: the sender's retry finds the event or stores it.
//! - **Every transition is one conditional statement** ([`transitions`]), a settle conditional on the lease's token,
//!   so a paused or partitioned instance's late settle changes nothing. Completions, which every event ends with,
//!   are group-committed too ([`completions`]), each row still conditional on its lease.
//! - **Time is the database's**: every call runs at the database's `now()`, so leases, due times and retention are
//!   measured on one clock whatever the instances' clocks say (a test may give the store a clock of its own instead,
//!   which it moves: [`Options::clock`]).
//! - **Owners keep heartbeats** (`owners`, on the database's clock): the leases of an owner whose heartbeat ran out
//!   are ended by whoever sees it ([`Upkeep::gone_owners`](crate::ports::Upkeep::gone_owners)).
//!
//! This file holds the [`PostgresStore`] handle, its [`Options`], the pool and the errors; the schema and its
//! migrations are in [`schema`], the rows in [`rows`], the port impls in [`ports`].

mod batch;
mod bodies;
mod bulk;
mod completions;
#[cfg(test)]
mod plans;
mod ports;
mod rows;
mod schema;
mod tls;
mod transitions;

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use tokio::sync::mpsc;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use crate::clock::Clock;
use crate::ports::StoreError;
use crate::rules::Due;

/// Bodies up to this size are stored compressed where that makes them smaller (as on SQLite).
const COMPRESS_UP_TO: usize = 64 * 1024;

/// How the database is reached and used.
#[derive(Clone)]
pub struct Options {
    /// The connection URL (`postgres://user:password@host:port/db?…`), resolved from its secret reference: it may
    /// hold a password, so it is never logged nor shown.
    pub url: String,
    /// Connections this process keeps at most.
    pub pool_size: usize,
    /// How long one statement may run before the server cancels it (the request then answers 503).
    pub statement_timeout: Duration,
    /// How long an event may wait for its queue message before the sweeper re-sends it.
    pub grace: Duration,
    /// How long an owner's heartbeat vouches for it: past it, its leases are ended by whoever sees it.
    pub liveness: Duration,
    /// The most creates one transaction takes.
    pub batch_max: usize,
    /// The clock every call runs at; `None`: the database's `now()`, as in production. A test hands in one it moves.
    pub clock: Option<Arc<dyn Clock>>,
    /// More roots to check the server's certificate against, beside the web's (PEM), with `sslmode=require`.
    pub ca_file: Option<std::path::PathBuf>,
}

impl Options {
    pub fn new(url: String, grace: Duration) -> Self {
        Self {
            url,
            pool_size: 16,
            statement_timeout: Duration::from_secs(10),
            grace,
            liveness: Duration::from_secs(30),
            batch_max: 500,
            clock: None,
            ca_file: None,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("pool_size", &self.pool_size)
            .field("statement_timeout", &self.statement_timeout)
            .field("grace", &self.grace)
            .field("liveness", &self.liveness)
            .field("batch_max", &self.batch_max)
            .finish_non_exhaustive()
    }
}

/// The PostgreSQL store. Cheap to clone; the create batcher ends when the last clone is dropped.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    /// The heartbeat's own connection ([`PostgresStore::beat_client`]).
    beats: Pool,
    creates: mpsc::Sender<batch::Job>,
    completions: mpsc::Sender<completions::Completion>,
    due: Due,
    clock: Option<Arc<dyn Clock>>,
    liveness: Duration,
}

impl PostgresStore {
    /// Connects (to a read-write primary only), refuses a server that does not sync its log, and brings the schema
    /// up to this binary's version (refusing a database a newer binary migrated).
    pub async fn open(options: Options) -> Result<Self, StoreError> {
        let mut config: tokio_postgres::Config = options.url.parse().map_err(|e| {
            // The parser's message names no part of the URL, so no password leaks through it.
            StoreError::Unavailable(format!("the PostgreSQL URL does not parse: {e}"))
        })?;
        config.target_session_attrs(tokio_postgres::config::TargetSessionAttrs::ReadWrite);
        // How an operator tells this store's sessions in `pg_stat_activity`, unless the URL names them otherwise.
        if config.get_application_name().is_none() {
            config.application_name("webhook-inbox");
        }
        let pool = make_pool(
            &config,
            &options,
            options.pool_size.max(2),
            options.statement_timeout,
        )?;
        // The heartbeat's own connection: no other work of this instance waits in front of it, and a beat the
        // server cannot answer at once gives up soon (the runtime bounds it too).
        let beats = make_pool(&config, &options, 1, BEAT_TIMEOUT)?;
        let client = connection(&pool).await?;
        // `reset_val`: what a session of this role on this database starts with (the server's, the database's, the
        // role's or the URL's setting), before the pool's own `SET`.
        let durability = client
            .query_one(
                "SELECT current_setting('fsync'), reset_val FROM pg_settings WHERE name = 'synchronous_commit'",
                &[],
            )
            .await
            .map_err(pg)?;
        let (fsync, synchronous_commit): (String, String) = (durability.get(0), durability.get(1));
        if fsync != "on" {
            return Err(StoreError::Unavailable(
                "the PostgreSQL server runs with fsync = off: a commit there is not durable, so webhook-inbox \
                 refuses it"
                    .into(),
            ));
        }
        if synchronous_commit == "off" {
            return Err(StoreError::Unavailable(
                "the PostgreSQL sessions of this user start with synchronous_commit = off: a commit there may be \
                 lost after it was acknowledged, so webhook-inbox refuses it (set it on for the server, or for this \
                 database or user: ALTER ROLE … SET synchronous_commit = on)"
                    .into(),
            ));
        }
        schema::migrate(&client).await?;
        // Its session may have been changed for the migration (no statement timeout): closed rather than pooled.
        drop(deadpool_postgres::Object::take(client));
        let local: Arc<str> = local_settings(options.statement_timeout).into();
        let creates = batch::start(
            pool.clone(),
            options.batch_max,
            Due::new(options.grace),
            local.clone(),
        );
        let completions = completions::start(pool.clone(), options.batch_max, Due::new(options.grace), local);
        Ok(Self {
            pool,
            beats,
            creates,
            completions,
            due: Due::new(options.grace),
            clock: options.clock,
            liveness: options.liveness,
        })
    }

    async fn client(&self) -> Result<Object, StoreError> {
        connection(&self.pool).await
    }

    /// The heartbeat's connection, apart from the pool every other statement shares.
    async fn beat_client(&self) -> Result<Object, StoreError> {
        connection(&self.beats).await
    }

    /// The time a call runs at where it is not the database's: now on the store's own clock, where it was given one
    /// ([`Options::clock`]). `None`: the database's `now()`, which the statement reads itself ([`DB_NOW`]).
    fn clock_now(&self) -> Option<i64> {
        self.clock.as_ref().map(|c| c.now_ms())
    }

    /// The time a call runs at: the store's own clock's, or the database's `now()`.
    async fn now(&self, client: &impl GenericClient) -> Result<i64, StoreError> {
        match self.clock_now() {
            Some(now) => Ok(now),
            None => db_now(client).await,
        }
    }
}

/// How long a heartbeat's statement may run on the server.
const BEAT_TIMEOUT: Duration = Duration::from_secs(2);

/// A pool of at most `size` connections to `config`'s primary, each made with `statement_timeout` and
/// `synchronous_commit = on`, none reused once made before a failover sign ([`fresh`]).
fn make_pool(
    config: &tokio_postgres::Config,
    options: &Options,
    size: usize,
    statement_timeout: Duration,
) -> Result<Pool, StoreError> {
    let timeout = statement_timeout.as_millis();
    let recycling = ManagerConfig {
        recycling_method: RecyclingMethod::Fast,
    };
    let manager = match tls::connector(config, options.ca_file.as_deref())? {
        Some(tls) => Manager::from_config(config.clone(), tls, recycling),
        None => Manager::from_config(config.clone(), tokio_postgres::NoTls, recycling),
    };
    Pool::builder(manager)
        .max_size(size)
        .wait_timeout(Some(Duration::from_secs(5)))
        .create_timeout(Some(Duration::from_secs(5)))
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .post_create(deadpool_postgres::Hook::async_fn(move |client, _| {
            Box::pin(async move {
                // Every 200 waits for the commit's flush; a statement stuck behind a lock gives up.
                client
                    .batch_execute(&format!(
                        "SET synchronous_commit = on; SET statement_timeout = {timeout}; \
                         SET idle_in_transaction_session_timeout = 60000"
                    ))
                    .await
                    .map_err(|e| deadpool_postgres::HookError::message(e.to_string()))
            })
        }))
        .pre_recycle(deadpool_postgres::Hook::sync_fn(|_, metrics| {
            if fresh(metrics) {
                Ok(())
            } else {
                Err(deadpool_postgres::HookError::message(
                    "made before a failover sign",
                ))
            }
        }))
        .build()
        .map_err(|e| StoreError::Unavailable(format!("cannot build the PostgreSQL pool: {e}")))
}

/// What each group-committed write transaction sets for itself (`SET LOCAL`, in the transaction): its commit waits
/// for the log's flush, and a statement stuck behind a lock gives up. The pool sets the same on each session, which is
/// enough on a direct connection or through a pooler in session mode; through a pooler in transaction mode a session's
/// settings stay with whichever server connection ran them, and only what a transaction sets is sure to hold in it.
fn local_settings(statement_timeout: Duration) -> String {
    format!(
        "SET LOCAL synchronous_commit = on; SET LOCAL statement_timeout = {}",
        statement_timeout.as_millis()
    )
}

/// A pooled connection, or 503's error.
async fn connection(pool: &Pool) -> Result<Object, StoreError> {
    pool.get().await.map_err(|e| match e {
        deadpool_postgres::PoolError::Timeout(_) => StoreError::Busy,
        other => StoreError::Unavailable(format!("cannot reach PostgreSQL: {}", with_causes(&other))),
    })
}

/// An error and its causes, outermost first (`error performing TLS handshake: invalid peer certificate: …`): the
/// driver's own message leaves the cause out. None of them holds the URL or its password.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.ends_with(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    text
}

/// The database's `now()` in UTC milliseconds (the start of the current transaction), as SQL.
const DB_NOW: &str = "(floor(extract(epoch FROM now()) * 1000))::int8";

/// The database's `now()` in UTC milliseconds (the start of the current transaction).
async fn db_now(client: &impl GenericClient) -> Result<i64, StoreError> {
    Ok(query_one(client, &format!("SELECT {DB_NOW}"), &[]).await?.get(0))
}

/// A PostgreSQL error as the ports say it: a conflict the server resolved by aborting (a deadlock, a serialization
/// failure), a statement timeout or a full server is [`StoreError::Busy`] (503, try again); anything else,
/// unavailable. A lost connection, a server that is no longer a read-write primary (SQLSTATE 25006, a failover's
/// demoted primary) or one shutting down (57P01) also marks every pooled connection made before it stale
/// ([`STALE_BEFORE`]), so that the pool reconnects to whichever server is the primary now.
fn pg(e: tokio_postgres::Error) -> StoreError {
    if connection_gone(&e) {
        *crate::sync::lock(&STALE_BEFORE) = Some(std::time::Instant::now());
    }
    match e.code() {
        Some(c)
            if [
                SqlState::T_R_DEADLOCK_DETECTED,
                SqlState::T_R_SERIALIZATION_FAILURE,
                SqlState::QUERY_CANCELED,
                SqlState::LOCK_NOT_AVAILABLE,
                SqlState::TOO_MANY_CONNECTIONS,
            ]
            .contains(c) =>
        {
            StoreError::Busy
        }
        _ => StoreError::Unavailable(format!("PostgreSQL: {e}")),
    }
}

/// Whether `e` says this connection is gone, or its server is going away or is no longer a read-write primary.
fn connection_gone(e: &tokio_postgres::Error) -> bool {
    e.is_closed()
        || e.code().is_some_and(|c| {
            [
                SqlState::READ_ONLY_SQL_TRANSACTION,
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CRASH_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
            ]
            .contains(c)
        })
}

/// Pooled connections made before this instant are dropped at their next checkout rather than reused (see [`pg`]).
/// One mark for the process: a failover seen by one store's connection makes every store reconnect, which costs a
/// connection each and nothing else.
static STALE_BEFORE: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);

/// The pool's check before it hands a connection out again: none made before the last failover sign.
fn fresh(metrics: &deadpool_postgres::Metrics) -> bool {
    crate::sync::lock(&STALE_BEFORE).is_none_or(|mark| metrics.created > mark)
}

async fn query(
    c: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, StoreError> {
    let statement = c.prepare_cached(sql).await.map_err(pg)?;
    c.query(&statement, params).await.map_err(pg)
}

async fn query_opt(
    c: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<Row>, StoreError> {
    let statement = c.prepare_cached(sql).await.map_err(pg)?;
    c.query_opt(&statement, params).await.map_err(pg)
}

async fn query_one(
    c: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Row, StoreError> {
    let statement = c.prepare_cached(sql).await.map_err(pg)?;
    c.query_one(&statement, params).await.map_err(pg)
}

async fn execute(
    c: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, StoreError> {
    let statement = c.prepare_cached(sql).await.map_err(pg)?;
    c.execute(&statement, params).await.map_err(pg)
}
