//! Group commit of creates: one task takes every create waiting (up to `batch_max`) into one transaction, and the
//! creates that arrive while it commits go in the next. One transaction in flight: on the 2-core host of
//! BENCHMARKS.md four in flight accepted fewer events a second than one (3,145/s against 3,858/s), the cores, not
//! the commits, being what they wait for there. The batch is written in a few statements whatever its size
//! ([`bulk`]), in `(source, event_id)` order, so that two batches (of this instance or another) take their row locks
//! in one order and do not deadlock. Should that fail, the batch is run again a job (one create, or a batched
//! delivery's events) at a time, each under a savepoint of its own, so that a failing job takes no other down. Every
//! caller is answered after `COMMIT` returned: a commit that failed or whose outcome is unknown answers every job of
//! the batch with an error (503), never a create.

use std::sync::Arc;

use deadpool_postgres::{GenericClient, Pool};
use tokio::sync::{mpsc, oneshot};

use super::bulk::{self, Item};
use super::rows::Prepared;
use super::transitions::create;
use super::{connection, db_now, pg};
use crate::model::Event;
use crate::ports::{Created, StoreError};
use crate::rules::Due;

/// Creates waiting for a transaction at most: past it, a create answers busy (503 with `Retry-After`) at once.
const QUEUE: usize = 4096;

/// What a job is answered: each create's outcome and, where it claimed, the claimed record; or the error.
pub(super) type Answer = Result<Vec<Outcome>, StoreError>;

/// One create's outcome and, where it claimed, the claimed record.
pub(super) type Outcome = (Created, Option<Event>);

/// One caller's creates, answered together.
pub(super) struct Job {
    pub items: Vec<Prepared>,
    /// The time the call runs at on the store's own clock, read as it was made; `None`: the database's.
    pub at: Option<i64>,
    pub reply: oneshot::Sender<Answer>,
}

/// Starts the batcher; it ends when every sender is gone.
pub(super) fn start(pool: Pool, batch_max: usize, due: Due, local: Arc<str>) -> mpsc::Sender<Job> {
    let (tx, rx) = mpsc::channel(QUEUE);
    tokio::spawn(run(pool, rx, batch_max.max(1), due, local));
    tx
}

async fn run(pool: Pool, mut rx: mpsc::Receiver<Job>, batch_max: usize, due: Due, local: Arc<str>) {
    // One transaction at a time: the creates that arrive while it commits wait in the channel and go together into
    // the next.
    let mut jobs = Vec::new();
    while rx.recv_many(&mut jobs, batch_max).await > 0 {
        let batch = std::mem::take(&mut jobs);
        let (answers, replies) = commit(&pool, batch, &due, &local).await;
        for (answer, reply) in answers.into_iter().zip(replies) {
            let _ = reply.send(answer);
        }
    }
}

/// Runs `batch` in one transaction: each job's answer, in the batch's order, and its reply.
async fn commit(
    pool: &Pool,
    mut batch: Vec<Job>,
    due: &Due,
    local: &str,
) -> (Vec<Answer>, Vec<oneshot::Sender<Answer>>) {
    // Lock order: every job by its first key, each job's items by theirs.
    batch.sort_by(|a, b| first_key(a).cmp(&first_key(b)));
    let replies: Vec<_> = batch
        .iter_mut()
        .map(|job| std::mem::replace(&mut job.reply, oneshot::channel().0))
        .collect();
    let answers = match transaction(pool, &batch, due, local).await {
        Ok(answers) => answers,
        Err(e) => batch.iter().map(|_| Err(e.clone())).collect(),
    };
    (answers, replies)
}

fn first_key(job: &Job) -> Option<(&str, &str)> {
    job.items
        .iter()
        .map(|p| (p.event.key.source.as_str(), p.event.key.event_id.as_str()))
        .min()
}

/// `batch` in one transaction that sets its own durability and timeout (`local`), all at once; should that fail,
/// again a job at a time.
async fn transaction(pool: &Pool, batch: &[Job], due: &Due, local: &str) -> Result<Vec<Answer>, StoreError> {
    let mut client = connection(pool).await?;
    {
        let tx = client.transaction().await.map_err(pg)?;
        tx.batch_execute(local).await.map_err(pg)?;
        let db_time = db_time(&tx, batch).await?;
        if let Ok(answers) = all_at_once(&tx, batch, db_time, due).await {
            crate::failpoint!("postgres_batch_before_commit");
            // The one place a create becomes an answer: after this returns. Its failure (the connection lost, the
            // server gone) leaves the outcome unknown, and every job is answered with it.
            tx.commit().await.map_err(pg)?;
            return Ok(answers);
        }
        // Rolled back as it drops: the batch again, a job at a time, so that a failing job takes no other down.
    }
    let mut tx = client.transaction().await.map_err(pg)?;
    tx.batch_execute(local).await.map_err(pg)?;
    let db_time = db_time(&tx, batch).await?;
    let mut answers = Vec::with_capacity(batch.len());
    for job in batch {
        let now = job.at.or(db_time).unwrap_or_default();
        let savepoint = tx.savepoint("job").await.map_err(pg)?;
        match items(&savepoint, job, now, due).await {
            Ok(created) => {
                savepoint.commit().await.map_err(pg)?;
                answers.push(Ok(created));
            }
            Err(e) => {
                savepoint.rollback().await.map_err(pg)?;
                answers.push(Err(e));
            }
        }
    }
    crate::failpoint!("postgres_batch_before_commit");
    tx.commit().await.map_err(pg)?;
    Ok(answers)
}

/// The database's time for the jobs that run at it, read once for the batch.
async fn db_time(c: &impl GenericClient, batch: &[Job]) -> Result<Option<i64>, StoreError> {
    Ok(if batch.iter().any(|job| job.at.is_none()) {
        Some(db_now(c).await?)
    } else {
        None
    })
}

/// Every job's items in one run of [`bulk::create_all`], in key order; each job answered its own.
async fn all_at_once(
    c: &impl GenericClient,
    batch: &[Job],
    db_time: Option<i64>,
    due: &Due,
) -> Result<Vec<Answer>, StoreError> {
    let mut order: Vec<(usize, usize)> = batch
        .iter()
        .enumerate()
        .flat_map(|(j, job)| (0..job.items.len()).map(move |k| (j, k)))
        .collect();
    let key = |&(j, k): &(usize, usize)| {
        let key = &batch[j].items[k].event.key;
        (key.source.as_str(), key.event_id.as_str())
    };
    order.sort_by(|a, b| key(a).cmp(&key(b)));
    let items: Vec<Item> = order
        .iter()
        .map(|&(j, k)| Item {
            prepared: &batch[j].items[k],
            now: batch[j].at.or(db_time).unwrap_or_default(),
        })
        .collect();
    let answers = bulk::create_all(c, &items, due).await?;
    let mut per_job: Vec<Vec<Option<Outcome>>> =
        batch.iter().map(|job| vec![None; job.items.len()]).collect();
    for ((j, k), answer) in order.into_iter().zip(answers) {
        per_job[j][k] = Some(answer);
    }
    Ok(per_job
        .into_iter()
        .map(|answers| Ok(answers.into_iter().flatten().collect()))
        .collect())
}

/// One job's items, in key order, answered in the order they came.
async fn items(
    c: &impl GenericClient,
    job: &Job,
    now: i64,
    due: &Due,
) -> Result<Vec<(Created, Option<Event>)>, StoreError> {
    let mut order: Vec<usize> = (0..job.items.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&job.items[a].event.key, &job.items[b].event.key);
        (a.source.as_str(), a.event_id.as_str()).cmp(&(b.source.as_str(), b.event_id.as_str()))
    });
    let mut answers: Vec<Option<(Created, Option<Event>)>> = vec![None; job.items.len()];
    for i in order {
        answers[i] = Some(create(c, &job.items[i], now, due).await?);
    }
    Ok(answers.into_iter().flatten().collect())
}
