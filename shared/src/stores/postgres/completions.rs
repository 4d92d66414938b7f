//! Group commit of completions, as [`batch`](super::batch) does for creates: the settles to COMPLETED that arrive
//! while one statement commits go together in the next, one `UPDATE … FROM unnest(…)` in `(source, event_id)`
//! order, each row still conditional on its lease (`status = 'PROCESSING' AND lease_owner = …`), so a late settle
//! in a batch is refused as it is alone. Completions are what every event ends with: one commit for many is what
//! keeps the database's commits per event well under one. Should the statement fail (a deadlock, a timeout, a row
//! the server refused), the batch is settled again one completion at a time, so that no completion fails for
//! another's sake. Should the connection fail (lost, out of reach, the server going away), every caller is answered
//! with the error at once: the outcome of a commit in flight is unknown (settled again, a completion that did commit
//! would read as a lost lease), and one at a time a batch of 500 would wait for 500 connections that do not come
//! (the lease then runs out and the event runs again: the documented repeat).

use std::collections::HashSet;
use std::sync::Arc;

use deadpool_postgres::Pool;
use tokio::sync::{mpsc, oneshot};

use super::transitions::settle;
use super::{connection, connection_gone, pg, DB_NOW};
use crate::model::EventKey;
use crate::ports::{Settled, Settlement, StoreError};
use crate::rules::Due;
use crate::time::ms;

/// Completions waiting for a statement at most: past it, a settle waits for room.
const QUEUE: usize = 4096;

/// One settle to COMPLETED: the lease it is conditional on, when it runs (on the store's own clock; `None`: the
/// database's `now()`), how long the event is kept, and where its outcome goes.
pub(super) struct Completion {
    pub key: EventKey,
    pub owner: String,
    pub at: Option<i64>,
    pub retention: std::time::Duration,
    pub reply: oneshot::Sender<Result<Settled, StoreError>>,
}

/// Starts the batcher; it ends when every sender is gone.
pub(super) fn start(pool: Pool, batch_max: usize, due: Due, local: Arc<str>) -> mpsc::Sender<Completion> {
    let (tx, rx) = mpsc::channel(QUEUE);
    tokio::spawn(run(pool, rx, batch_max.max(1), due, local));
    tx
}

async fn run(pool: Pool, mut rx: mpsc::Receiver<Completion>, batch_max: usize, due: Due, local: Arc<str>) {
    let mut batch = Vec::new();
    loop {
        batch.clear();
        if rx.recv_many(&mut batch, batch_max).await == 0 {
            return;
        }
        batch.sort_by(|a, b| key(a).cmp(&key(b)));
        match all_at_once(&pool, &batch, &local).await {
            Ok(done) => {
                for c in batch.drain(..) {
                    let (source, id) = key(&c);
                    let settled = if done.contains(&(source.to_owned(), id.to_owned(), c.owner.clone())) {
                        Settled::Done
                    } else {
                        Settled::LeaseLost
                    };
                    let _ = c.reply.send(Ok(settled));
                }
            }
            Err(Failure::Connection(e)) => {
                for c in batch.drain(..) {
                    let _ = c.reply.send(Err(e.clone()));
                }
            }
            Err(Failure::Statement(e)) => {
                tracing::warn!(
                    error = %e,
                    n = batch.len(),
                    "a batch of completions failed; settling them one at a time"
                );
                for c in batch.drain(..) {
                    let settled = one(&pool, &c, &due).await;
                    let _ = c.reply.send(settled);
                }
            }
        }
    }
}

fn key(c: &Completion) -> (&str, &str) {
    (c.key.source.as_str(), c.key.event_id.as_str())
}

/// Why a batch's statement failed: its connection, or the statement itself.
enum Failure {
    /// The connection is lost or out of reach, or the server is going away: whether a commit in flight was made is
    /// unknown, and a connection for each completion would be no nearer.
    Connection(StoreError),
    /// The server refused the statement (a deadlock, a timeout, a row it would not write): one at a time, the others
    /// may go through.
    Statement(StoreError),
}

impl Failure {
    fn of(e: tokio_postgres::Error) -> Self {
        // Gone, a server going away or no longer a primary, an I/O error, or class 08 (connection exception).
        let connection = connection_gone(&e)
            || std::error::Error::source(&e).is_some_and(|cause| cause.is::<std::io::Error>())
            || e.code().is_some_and(|c| c.code().starts_with("08"));
        let error = pg(e);
        if connection {
            Self::Connection(error)
        } else {
            Self::Statement(error)
        }
    }
}

/// Every completion of `batch` in one statement, in a transaction of its own that sets its durability and timeout
/// itself (`local`): the `(source, event_id, owner)` of those whose lease held.
async fn all_at_once(
    pool: &Pool,
    batch: &[Completion],
    local: &str,
) -> Result<HashSet<(String, String, String)>, Failure> {
    let mut client = connection(pool).await.map_err(Failure::Connection)?;
    let sources: Vec<&str> = batch.iter().map(|c| c.key.source.as_str()).collect();
    let ids: Vec<&str> = batch.iter().map(|c| c.key.event_id.as_str()).collect();
    let owners: Vec<&str> = batch.iter().map(|c| c.owner.as_str()).collect();
    let at: Vec<Option<i64>> = batch.iter().map(|c| c.at).collect();
    let retention: Vec<i64> = batch.iter().map(|c| ms(c.retention)).collect();
    let tx = client.transaction().await.map_err(Failure::of)?;
    tx.batch_execute(local).await.map_err(Failure::of)?;
    let statement = tx
        .prepare_cached(&format!(
            "WITH s AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::int8[])
                          AS s(source, event_id, owner, at, retention)),
                  t AS (SELECT {DB_NOW} AS db_now)
             UPDATE events e SET status = 'COMPLETED', completed_at = coalesce(s.at, t.db_now),
                    expires_at = coalesce(s.at, t.db_now) + s.retention, updated_at = coalesce(s.at, t.db_now),
                    lease_owner = NULL, lease_until = NULL, next_attempt_at = NULL, due_at = NULL
             FROM s, t
             WHERE e.source = s.source AND e.event_id = s.event_id AND e.status = 'PROCESSING'
               AND e.lease_owner = s.owner
             RETURNING s.source, s.event_id, s.owner"
        ))
        .await
        .map_err(Failure::of)?;
    let rows = tx
        .query(&statement, &[&sources, &ids, &owners, &at, &retention])
        .await
        .map_err(Failure::of)?;
    tx.commit().await.map_err(Failure::of)?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect())
}

/// One completion alone, as the port's single settle writes it.
async fn one(pool: &Pool, c: &Completion, due: &Due) -> Result<Settled, StoreError> {
    let client = connection(pool).await?;
    let settlement = Settlement::Completed {
        retention: c.retention,
    };
    settle(&client, &c.key, &c.owner, &settlement, c.at, due).await
}
