//! What each Lambda function does, as plain async functions over a [`Runtime`]; the `functions/*` binaries only
//! call these. Every SQS handler reports partial batch failures and never fails a whole batch for one record.

use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use futures_util::future::join_all;
use tracing::Instrument;

use super::{emf, Runtime};
use crate::adapters::sqs::{parse_pointer, sqs_seconds};
use crate::machine::{Outcome, SweepReport, LEASE_MARGIN};
use crate::ports::{MarkDead, StoreError};
use crate::time::now_ms;

/// The reason written on events that the redrive policy moved to the DLQ.
pub const REDRIVEN: &str = "moved to the dead-letter queue after the queue's maxReceiveCount receives";

/// How long this invocation may still run: the function's remaining time, kept short of the deadline.
pub fn remaining(deadline_ms: u64) -> Duration {
    let left = i64::try_from(deadline_ms)
        .unwrap_or(i64::MAX)
        .saturating_sub(now_ms());
    Duration::from_millis(u64::try_from(left).unwrap_or(0)).saturating_sub(LEASE_MARGIN)
}

/// The processor (event source: the work queue). Each record is claimed, run and settled on its own, all of a
/// batch at once. A retryable failure sets the message's visibility to the backoff delay and reports the record
/// as failed, so SQS delivers it again then; the lease is the invocation's remaining time.
pub async fn processor(rt: &Runtime, event: SqsEvent, deadline_ms: u64) -> SqsBatchResponse {
    let lease = remaining(deadline_ms);
    let handled = join_all(event.records.iter().map(|r| process_record(rt, r, lease))).await;
    emf::flush(&rt.metrics);
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
    let span = tracing::info_span!("process", source = %key.source, event_id = %key.event_id);
    let again = match rt.machine.process(&key, lease).instrument(span).await {
        Ok(Outcome::Completed | Outcome::Dead | Outcome::Dropped(_)) => return true,
        Ok(Outcome::Retry(delay) | Outcome::NotDue(delay)) => delay,
        Err(e) => {
            tracing::warn!(error = %e, "store error; the message comes back after its visibility timeout");
            return false;
        }
    };
    if let Some(receipt) = record.receipt_handle.as_deref() {
        let changed = rt
            .queue
            .client()
            .change_message_visibility()
            .queue_url(rt.queue.url())
            .receipt_handle(receipt)
            .visibility_timeout(sqs_seconds(again))
            .send()
            .await;
        if let Err(e) = changed {
            tracing::warn!(error = %aws_sdk_sqs::error::DisplayErrorContext(e),
                "could not set the retry delay; SQS redelivers after the default visibility timeout");
        }
    }
    false
}

/// The alarm function (event source: the DLQ): each redriven event is marked DEAD (never over COMPLETED) and
/// announced once.
pub async fn dead_letters(rt: &Runtime, event: SqsEvent) -> SqsBatchResponse {
    let handled = join_all(event.records.iter().map(|r| bury_record(rt, r))).await;
    emf::flush(&rt.metrics);
    partial_failures(&event.records, handled)
}

async fn bury_record(rt: &Runtime, record: &SqsMessage) -> bool {
    let Some(key) = record.body.as_deref().and_then(parse_pointer) else {
        tracing::error!(
            message_id = record.message_id.as_deref().unwrap_or(""),
            "not an event pointer; dropped"
        );
        return true;
    };
    match rt.machine.bury(&key, REDRIVEN).await {
        // A worker holds a live lease: its settle decides. The message comes back after its visibility timeout,
        // and is buried then if that worker died.
        Ok(MarkDead::Leased(until)) => {
            tracing::info!(source = %key.source, event_id = %key.event_id, lease_until = until,
                "dead letter of an event under a live lease: asked again later");
            false
        }
        Ok(outcome) => {
            tracing::info!(source = %key.source, event_id = %key.event_id, ?outcome, "dead letter handled");
            true
        }
        Err(e) => {
            tracing::warn!(source = %key.source, event_id = %key.event_id, error = %e, "dead letter not handled yet");
            false
        }
    }
}

/// The sweeper (every minute): the restart scan through the sparse index.
pub async fn sweeper(rt: &Runtime) -> Result<SweepReport, StoreError> {
    let report = rt.machine.sweep(rt.queue.as_ref(), 1000).await?;
    tracing::info!(
        received = report.received,
        expired_leases = report.expired_leases,
        overdue_failed = report.overdue_failed,
        alarms = report.alarms,
        enqueue_errors = report.enqueue_errors,
        "sweep done"
    );
    let found = serde_json::json!({
        "_aws": {
            "Timestamp": now_ms(),
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
    println!("{found}");
    emf::flush(&rt.metrics);
    Ok(report)
}
