//! What each Lambda function does, as plain async functions over a [`Runtime`]; the `functions/*` binaries only
//! call these. Every SQS handler reports partial batch failures and never fails a whole batch for one record.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use futures_util::future::join_all;
use lambda_runtime::{service_fn, LambdaEvent};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tracing::Instrument;

use super::{emf, ReconciledSource, ReconcilerRuntime, Runtime};
use crate::aws::sqs::{announced_until, parse_pointer};
use crate::machine::{Dropped, Outcome, SweepReport, LEASE_MARGIN};
use crate::metrics::Metrics;
use crate::ports::{Checkpoint, Checkpoints, MarkDead, StoreError, Upkeep};
use crate::reconcile::{Budget, Progress, Reconciler, RunOptions, Summary};
use crate::time::{ms, rfc3339};

/// The reason written on events that the redrive policy moved to the DLQ.
pub const REDRIVEN: &str = "moved to the dead-letter queue after the queue's maxReceiveCount receives";

/// How long this invocation may still run: the function's remaining time, kept short of the deadline.
///
/// A deadline already past, or further away than Lambda's longest timeout allows, was not set by Lambda:
/// `cargo lambda watch` (1.9.2) sends `Lambda-Runtime-Deadline-Ms: 600000`, a moment in 1970, with every
/// invocation. Trusted, it made the lease and the handler's time 0, and a forward that had reached its sink was
/// settled FAILED and ran again. Such a deadline counts as unknown, and the function's configured timeout stands in
/// ([`FUNCTION_TIMEOUT_ENV`], set by the template; [`DEFAULT_FUNCTION_TIMEOUT`] where it is not).
pub fn remaining(deadline_ms: u64, world: &crate::clock::World) -> Duration {
    remaining_at(deadline_ms, world.now_ms(), configured_timeout())
}

/// The function's timeout in seconds, as the template sets it for the functions that read their deadline.
pub const FUNCTION_TIMEOUT_ENV: &str = "INBOX_FUNCTION_TIMEOUT";
/// The timeout assumed for an unknown deadline where [`FUNCTION_TIMEOUT_ENV`] is not set (Lambda's default is 3 s;
/// no function of the template runs shorter than 30 s).
pub const DEFAULT_FUNCTION_TIMEOUT: Duration = Duration::from_secs(30);
/// Lambda's longest timeout: a deadline further away than this (and a minute's skew) is not Lambda's.
const LONGEST_TIMEOUT: Duration = Duration::from_secs(15 * 60 + 60);

pub(crate) fn configured_timeout() -> Duration {
    std::env::var(FUNCTION_TIMEOUT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&secs| secs > 0)
        .map_or(DEFAULT_FUNCTION_TIMEOUT, Duration::from_secs)
}

fn remaining_at(deadline_ms: u64, now: i64, timeout: Duration) -> Duration {
    let left = i64::try_from(deadline_ms).unwrap_or(i64::MAX).saturating_sub(now);
    let left = match u64::try_from(left) {
        Ok(ms) if ms > 0 && Duration::from_millis(ms) <= LONGEST_TIMEOUT => Duration::from_millis(ms),
        _ => {
            tracing::warn!(deadline_ms, fallback_secs = timeout.as_secs(),
                "the invocation's deadline is past or beyond any Lambda timeout: using the configured timeout");
            timeout
        }
    };
    left.saturating_sub(LEASE_MARGIN)
}

/// The processor (event source: the work queue). Each record is claimed, run and settled on its own, all of a
/// batch at once. A retryable failure sets the message's visibility to the backoff delay and reports the record
/// as failed, so SQS delivers it again then; the lease is the invocation's remaining time.
pub async fn processor(rt: &Runtime, event: SqsEvent, deadline_ms: u64) -> SqsBatchResponse {
    let lease = remaining(deadline_ms, &rt.world);
    let handled = join_all(event.records.iter().map(|r| process_record(rt, r, lease))).await;
    rt.emf.flush(&rt.metrics);
    partial_failures(&event.records, handled)
}

/// The batch answer: the records not handled are reported, so SQS redelivers those alone.
/// A message from `ReceiveMessage` as the event source mapping hands it to a function (id, receipt handle, body,
/// system attributes), for where no event source mapping runs: the bench and the tests.
pub fn as_delivered(message: &aws_sdk_sqs::types::Message) -> SqsMessage {
    let mut delivered = SqsMessage::default();
    delivered.message_id = message.message_id().map(str::to_owned);
    delivered.receipt_handle = message.receipt_handle().map(str::to_owned);
    delivered.body = message.body().map(str::to_owned);
    delivered.attributes = message
        .attributes()
        .map(|a| {
            a.iter()
                .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    delivered
}

fn partial_failures(records: &[SqsMessage], handled: Vec<bool>) -> SqsBatchResponse {
    let mut response = SqsBatchResponse::default();
    for (record, ok) in records.iter().zip(handled) {
        if !ok {
            response.add_failure(record.message_id.clone().unwrap_or_default());
        }
    }
    response
}

async fn process_record(rt: &Runtime, record: &SqsMessage, lease: Duration) -> bool {
    let Some(key) = record.body.as_deref().and_then(parse_pointer) else {
        tracing::error!(
            message_id = record.message_id.as_deref().unwrap_or(""),
            "not an event pointer; dropped"
        );
        return true;
    };
    let announced = record.body.as_deref().and_then(announced_until);
    let span = tracing::info_span!("process", source = %key.source, event_id = %key.event_id);
    let then = async {
        let mut waits = ANNOUNCED_RECHECKS.iter();
        loop {
            match rt.machine.process(&key, lease).await {
                // Sent ahead of its create, which may still land: look again shortly, then after a while.
                Ok(Outcome::Dropped(Dropped::Missing)) => match announced.filter(|until| rt.world.now_ms() < *until) {
                    None => return Then::Delete,
                    Some(until) => match waits.next() {
                        Some(wait) => tokio::time::sleep(*wait).await,
                        None => {
                            tracing::info!("no record yet for a message sent ahead of its create; asked again later");
                            let left = u64::try_from(until.saturating_sub(rt.world.now_ms())).unwrap_or(0);
                            return Then::HideFor(Duration::from_millis(left).min(ANNOUNCED_RETRY));
                        }
                    },
                },
                Ok(Outcome::Completed | Outcome::Dead | Outcome::Dropped(_)) => return Then::Delete,
                Ok(Outcome::Retry(delay) | Outcome::NotDue(delay)) => return Then::HideFor(delay),
                // A Lambda keeps no heartbeat (SQS's visibility vouches for its claim): never fenced; were it, the
                // message would come back.
                Ok(Outcome::Fenced) => return Then::Redeliver,
                Err(e) => {
                    tracing::warn!(error = %e, "store error; the message comes back after its visibility timeout");
                    return Then::Redeliver;
                }
            }
        }
    }
    .instrument(span)
    .await;
    let again = match then {
        Then::Delete => return true,
        Then::Redeliver => return false,
        Then::HideFor(delay) => delay,
    };
    if let Some(receipt) = record.receipt_handle.as_deref() {
        if let Err(e) = rt.queue.hide(receipt, again).await {
            tracing::warn!(error = %e,
                "could not set the retry delay; SQS redelivers after the default visibility timeout");
        }
    }
    false
}

/// What becomes of a record's message.
enum Then {
    /// Handled (or nothing to do): deleted.
    Delete,
    /// Reported failed: SQS hands it out again after the queue's visibility timeout.
    Redeliver,
    /// Reported failed, hidden for this long first.
    HideFor(Duration),
}

/// How long the processor waits in process before it looks again for the record of a message sent ahead of its
/// create: the receiver's `PutItem` usually lands within milliseconds of its `SendMessage`.
const ANNOUNCED_RECHECKS: [Duration; 3] = [
    Duration::from_millis(50),
    Duration::from_millis(200),
    Duration::from_millis(750),
];
/// After those, the message comes back this much later (or at its `until`, if sooner), costing one receive.
const ANNOUNCED_RETRY: Duration = Duration::from_secs(10);

/// The alarm function (event source: the DLQ): each redriven event is marked DEAD (never over COMPLETED) and
/// announced once.
pub async fn alarm(rt: &Runtime, event: SqsEvent) -> SqsBatchResponse {
    let handled = join_all(event.records.iter().map(|r| mark_dead_record(rt, r))).await;
    rt.emf.flush(&rt.metrics);
    partial_failures(&event.records, handled)
}

async fn mark_dead_record(rt: &Runtime, record: &SqsMessage) -> bool {
    let Some(key) = record.body.as_deref().and_then(parse_pointer) else {
        tracing::error!(
            message_id = record.message_id.as_deref().unwrap_or(""),
            "not an event pointer; dropped"
        );
        rt.metrics.dead_lettered(Metrics::UNKNOWN);
        return true;
    };
    let handled = match rt.machine.mark_dead(&key, REDRIVEN).await {
        // A worker holds a live lease: its settle decides. The message comes back after its visibility timeout,
        // and is buried then if that worker died.
        Ok(MarkDead::Leased(until)) => {
            tracing::info!(source = %key.source, event_id = %key.event_id, lease_until = until,
                "dead letter of an event under a live lease: asked again later");
            false
        }
        Ok(outcome) => {
            // The outcome's name only: its record holds the payload, which no log carries.
            let outcome = match outcome {
                MarkDead::NewlyDead(_) => "marked dead",
                MarkDead::AlreadyDead(_) => "dead already",
                MarkDead::Completed => "completed already",
                MarkDead::Leased(_) => "leased",
                MarkDead::Missing => "missing",
            };
            tracing::info!(source = %key.source, event_id = %key.event_id, outcome, "dead letter handled");
            true
        }
        Err(e) => {
            tracing::warn!(source = %key.source, event_id = %key.event_id, error = %e, "dead letter not handled yet");
            false
        }
    };
    // Counted once, when handled (a record asked again later arrives again): the "something was dead-lettered"
    // alarm watches this, not the queue's depth, which this function keeps at zero.
    if handled {
        let slot = rt
            .sources
            .get(key.source.as_str())
            .map_or(Metrics::UNKNOWN, |s| s.index);
        rt.metrics.dead_lettered(slot);
    }
    handled
}

/// The sweeper (every minute): the restart scan through the sparse index, then the bodies in S3 whose countdown a
/// crash between a COMPLETED settle and the processor's tagging left owed ([`Upkeep::finish_bodies`]).
pub async fn sweeper(rt: &Runtime) -> Result<SweepReport, StoreError> {
    let report = rt.machine.sweep(rt.queue.as_ref(), 1000).await?;
    let bodies = rt.ledger.finish_bodies(1000).await?;
    tracing::info!(
        received = report.received,
        expired_leases = report.expired_leases,
        overdue_failed = report.overdue_failed,
        alarms = report.alarms,
        enqueue_errors = report.enqueue_errors,
        bodies_counted_down = bodies,
        "sweep done"
    );
    let found = serde_json::json!({
        "_aws": {
            "Timestamp": rt.world.now_ms(),
            "CloudWatchMetrics": [{"Namespace": emf::NAMESPACE, "Dimensions": [[]], "Metrics": [
                {"Name": "SweptReceived", "Unit": "Count"},
                {"Name": "SweptExpiredLeases", "Unit": "Count"},
                {"Name": "SweptOverdueFailed", "Unit": "Count"},
                {"Name": "SweptAlarms", "Unit": "Count"}
            ]}]
        },
        "SweptReceived": report.received,
        "SweptExpiredLeases": report.expired_leases,
        "SweptOverdueFailed": report.overdue_failed,
        "SweptAlarms": report.alarms,
    });
    rt.emf.write(found.to_string());
    rt.emf.flush(&rt.metrics);
    Ok(report)
}

/// A source is due when its last run is at least its interval less this old: the schedule's invocations come a
/// little early or late (EventBridge fires within its minute), and without the slack a run 14:59 after the last
/// one would wait a whole schedule period more.
pub const INTERVAL_SLACK: Duration = Duration::from_secs(60);

/// What a run leaves of the invocation's remaining time: recording the run (the checkpoint's write) and the
/// metrics' flush.
pub const RECORD_MARGIN: Duration = Duration::from_secs(3);

/// What one invocation of the reconciler did for one source. Texts name the source and never hold a credential.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SourceRun {
    /// Its last run is younger than its interval.
    Skipped {
        source: String,
        last_run: String,
    },
    Ran {
        source: String,
        summary: Summary,
    },
    /// The credentials could not be read, the provider or the ledger failed, or the budget ran out; what was
    /// recovered before stays recovered (`summary`, when the run started).
    Failed {
        source: String,
        error: String,
        summary: Option<Summary>,
    },
}

impl SourceRun {
    pub fn source(&self) -> &str {
        match self {
            SourceRun::Skipped { source, .. }
            | SourceRun::Ran { source, .. }
            | SourceRun::Failed { source, .. } => source,
        }
    }
}

/// The reconciler function's answer: one entry per source with a `reconcile` block.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ReconcileReport {
    pub sources: Vec<SourceRun>,
}

impl ReconcileReport {
    /// The sources whose run failed, for the invocation's error.
    pub fn failed(&self) -> Vec<&str> {
        self.sources
            .iter()
            .filter(|r| matches!(r, SourceRun::Failed { .. }))
            .map(SourceRun::source)
            .collect()
    }
}

/// The reconciler (on a schedule): every source with a `reconcile` block whose interval has passed is run at once,
/// each within the invocation's remaining time, and one source's failure (bad credentials, a provider's 500) never
/// stops another. Recovered events are counted (`Reconciled`) and the EMF lines flushed before it returns.
pub async fn reconciler(rt: &ReconcilerRuntime, deadline_ms: u64) -> ReconcileReport {
    let time = remaining(deadline_ms, &rt.world).saturating_sub(RECORD_MARGIN);
    let runs = join_all(
        rt.sources()
            .iter()
            .enumerate()
            .map(|(slot, source)| reconcile_source(rt, slot, source, time)),
    )
    .await;
    for run in &runs {
        match run {
            SourceRun::Skipped { source, last_run } => {
                tracing::info!(source = %source, %last_run, "reconcile: not due (its last run is younger than its interval)");
            }
            SourceRun::Ran { source, summary } => {
                tracing::info!(
                    source = %source, listed = summary.listed, present = summary.present,
                    recovered = summary.recovered, failed = summary.failed, pages = summary.pages,
                    requests = summary.requests, existence_reads = summary.existence_reads, "reconcile: done"
                );
            }
            SourceRun::Failed {
                source,
                error,
                summary,
            } => {
                let s = summary.unwrap_or_default();
                tracing::error!(
                    source = %source, %error, listed = s.listed, present = s.present, recovered = s.recovered,
                    "reconcile: failed; the checkpoint stays where it was and the next due run starts over"
                );
            }
        }
    }
    rt.emf.flush(&rt.metrics);
    ReconcileReport { sources: runs }
}

async fn reconcile_source(
    rt: &ReconcilerRuntime,
    slot: usize,
    source: &ReconciledSource,
    time: Duration,
) -> SourceRun {
    let name = source.name.to_string();
    let failed = |error: String, summary: Option<Summary>| SourceRun::Failed {
        source: name.clone(),
        error,
        summary,
    };
    match rt.ledger.checkpoint(&source.name).await {
        Ok(Some(Checkpoint {
            last_run: Some(last), ..
        })) if rt.world.now_ms().saturating_sub(last.started_at)
            < ms(source.config.interval.saturating_sub(INTERVAL_SLACK)) =>
        {
            return SourceRun::Skipped {
                source: name.clone(),
                last_run: rfc3339(last.started_at),
            };
        }
        Ok(_) => {}
        Err(e) => return failed(format!("reconcile {name}: the ledger failed: {e}"), None),
    }
    // Built at the source's first run and kept: the credentials are read once per container, and one that cannot
    // be read is asked for again at the next invocation (a secret created after the deployment).
    let mut built = source.built.lock().await;
    let reconciler = match built.take() {
        Some(r) => r,
        None => match Reconciler::from_config(&source.name, &source.config, rt.secrets())
            .await
            .map(|r| r.with_world(rt.world.clone()))
        {
            Ok(r) => r,
            Err(e) => return failed(format!("reconcile {name}: {e}"), None),
        },
    };
    let reconciler = reconciler.with_budget(Budget {
        time,
        ..Budget::default()
    });
    let result = reconciler
        .run(
            rt.ledger.as_ref(),
            rt.queue.as_ref(),
            RunOptions::default(),
            &mut |_: &Progress| {},
        )
        .await;
    *built = Some(reconciler);
    match result {
        Ok(summary) => {
            rt.metrics.reconciled(slot, summary.recovered);
            SourceRun::Ran {
                source: name,
                summary,
            }
        }
        Err(e) => {
            rt.metrics.reconciled(slot, e.summary.recovered);
            failed(e.to_string(), Some(e.summary))
        }
    }
}

/// The `main` of the processor, alarm and sweeper functions: builds their [`Runtime`] once, at the cold start, then
/// answers each invocation with `work` over it. (The receiver serves HTTP and the reconciler has a runtime of its own.)
pub async fn serve<E, R, F, Fut>(work: F) -> Result<(), lambda_runtime::Error>
where
    E: DeserializeOwned + Send + 'static,
    R: Serialize + Send + 'static,
    F: Fn(Arc<Runtime>, LambdaEvent<E>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, lambda_runtime::Error>> + Send,
{
    lambda_runtime::tracing::init_default_subscriber();
    let registry = crate::handlers::Registry::new(crate::handlers::http_client());
    let rt = Arc::new(Runtime::from_env(registry).await?);
    let work = Arc::new(work);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<E>| {
        let (rt, work) = (rt.clone(), work.clone());
        async move { work(rt, event).await }
    }))
    .await
}

#[cfg(test)]
mod deadline_tests {
    use super::*;

    const NOW: i64 = 1_796_000_000_000;

    #[test]
    fn a_deadline_lambda_sets_is_trusted_less_the_margin() {
        let left = remaining_at(u64::try_from(NOW).unwrap() + 20_000, NOW, Duration::from_secs(60));
        assert_eq!(left, Duration::from_secs(20) - LEASE_MARGIN);
    }

    /// `cargo lambda watch` 1.9.2 sends 600000 (1970) as every invocation's deadline.
    #[test]
    fn a_deadline_in_the_past_or_beyond_any_timeout_gives_the_configured_timeout() {
        let timeout = Duration::from_secs(60);
        for deadline in [
            600_000,
            u64::try_from(NOW).unwrap(),
            u64::try_from(NOW).unwrap() + 86_400_000,
        ] {
            assert_eq!(
                remaining_at(deadline, NOW, timeout),
                timeout - LEASE_MARGIN,
                "{deadline}"
            );
        }
    }
}
