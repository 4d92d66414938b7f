//! Crash points on AWS: the function instance "dies" at a point (its processor future is dropped there),
//! and the next invocation, the redrive or the sweeper finishes the work.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use aws_lambda_events::event::sqs::SqsMessage;
use inbox_core::aws::functions;
use inbox_core::aws::init::QueueSettings;
use inbox_core::handlers::{Handler, HandlerError};
use inbox_core::model::{Event, Status};

use crate::stack::{
    all_events, batch, deadline, deliver, emulator, poll_once, receive, stack, stack_with, status_of,
    stripe_body, Stack,
};

/// A handler that kills its invocation on its first run: it signals the test and never returns, so the test
/// drops the processor future there. `effect_first`: the effect is done before the signal (a crash after the
/// handler, before the settle); otherwise before any effect (a crash right after the claim). Later runs succeed.
#[derive(Default)]
struct Crasher {
    effect_first: bool,
    armed: AtomicBool,
    died: tokio::sync::Notify,
    effects: Mutex<HashMap<String, usize>>,
}

impl Crasher {
    fn new(effect_first: bool) -> Self {
        Self {
            effect_first,
            armed: AtomicBool::new(true),
            ..Self::default()
        }
    }
    fn effect(&self, event: &Event) {
        *self
            .effects
            .lock()
            .unwrap()
            .entry(event.event_id.to_string())
            .or_default() += 1;
    }
    fn effects(&self, id: &str) -> usize {
        self.effects.lock().unwrap().get(id).copied().unwrap_or(0)
    }
}

#[async_trait]
impl Handler for Crasher {
    async fn handle(&self, event: &Event) -> Result<(), HandlerError> {
        let crash = self.armed.swap(false, Ordering::SeqCst);
        if crash && self.effect_first {
            self.effect(event);
        }
        if crash {
            self.died.notify_one();
            std::future::pending::<()>().await;
        }
        self.effect(event);
        Ok(())
    }
}

/// A stack whose source runs `crasher`.
async fn crash_stack(sdk: &aws_config::SdkConfig, crasher: &Arc<Crasher>) -> Stack {
    let handler: Arc<dyn Handler> = crasher.clone();
    stack_with(
        sdk,
        QueueSettings::default(),
        "",
        "crasher",
        move |registry, _, _, _| registry.register("crasher", handler),
    )
    .await
}

/// Delivers `id`, receives its message and runs the processor on it until the crasher signals, then drops the
/// invocation (the instance died). The invocation's deadline is 6 s away, so its lease is 4 s. Returns the
/// message, still in flight.
async fn crash_one(stack: &Stack, crasher: &Crasher, id: &str) -> Vec<SqsMessage> {
    assert_eq!(deliver(stack, &stripe_body(id)).await.0, 200);
    let records = receive(&stack.sqs, &stack.rt.resources.queue_url, 5).await;
    assert_eq!(records.len(), 1);
    let deadline = u64::try_from(inbox_core::time::now_ms() + 6_000).unwrap();
    tokio::select! {
        _ = functions::processor(&stack.rt, batch(records.clone()), deadline) => {
            panic!("the invocation finished instead of dying")
        }
        _ = crasher.died.notified() => {}
    }
    assert_eq!(
        status_of(stack, id).await,
        Some((Status::Processing, 1)),
        "the dead invocation's claim stands"
    );
    records
}

/// GIVEN an invocation that died right after its claim (no effect)
/// WHEN its lease runs out
/// THEN the sweeper has nothing to do (the claim took the record out of the sparse index: its message, not deleted
/// before a settle, vouches for it), and SQS's redelivery of that message runs it once: COMPLETED, one record, one
/// effect.
#[tokio::test]
async fn crash_after_claim_is_finished_by_its_message_not_the_sweeper() {
    let Some(sdk) = emulator().await else { return };
    let crasher = Arc::new(Crasher::new(false));
    let stack = crash_stack(&sdk, &crasher).await;
    let records = crash_one(&stack, &crasher, "evt_crash_claim").await;
    assert_eq!(functions::sweeper(&stack.rt).await.unwrap().enqueued(), 0);
    tokio::time::sleep(Duration::from_millis(4_300)).await;
    assert_eq!(
        functions::sweeper(&stack.rt).await.unwrap().enqueued(),
        0,
        "a PROCESSING record is its message's to finish"
    );
    let again = functions::processor(&stack.rt, batch(records), deadline()).await;
    assert!(again.batch_item_failures.is_empty());
    assert_eq!(crasher.effects("evt_crash_claim"), 1);
    assert_eq!(all_events(&stack).await.len(), 1, "one record");
    assert_eq!(
        status_of(&stack, "evt_crash_claim").await,
        Some((Status::Completed, 2))
    );
}

/// GIVEN an invocation that died after its handler's effect, before the settle
/// WHEN SQS redelivers the message (the same batch again) after the lease ran out
/// THEN the next invocation claims and runs it again and settles: COMPLETED, one record, effects = 1 + 1 crash.
#[tokio::test]
async fn crash_after_handler_before_settle_is_finished_by_the_redelivery() {
    let Some(sdk) = emulator().await else { return };
    let crasher = Arc::new(Crasher::new(true));
    let stack = crash_stack(&sdk, &crasher).await;
    let records = crash_one(&stack, &crasher, "evt_crash_handler").await;
    assert_eq!(
        crasher.effects("evt_crash_handler"),
        1,
        "the effect was done before the crash"
    );
    // A redelivery while the dead lease holds runs nothing.
    let early = functions::processor(&stack.rt, batch(records.clone()), deadline()).await;
    assert!(early.batch_item_failures.is_empty());
    assert_eq!(crasher.effects("evt_crash_handler"), 1);
    assert_eq!(
        status_of(&stack, "evt_crash_handler").await.unwrap().0,
        Status::Processing
    );
    tokio::time::sleep(Duration::from_millis(4_300)).await;
    let again = functions::processor(&stack.rt, batch(records), deadline()).await;
    assert!(again.batch_item_failures.is_empty());
    assert_eq!(
        status_of(&stack, "evt_crash_handler").await,
        Some((Status::Completed, 2))
    );
    assert_eq!(crasher.effects("evt_crash_handler"), 2, "at most 1 + crashes");
    assert_eq!(all_events(&stack).await.len(), 1, "one record");
}

/// GIVEN an invocation that settled COMPLETED and died before its message was deleted
/// WHEN SQS redelivers the message (made visible again and received anew)
/// THEN the claim finds it done and the message is dropped: the handler does not run again.
#[tokio::test]
async fn crash_after_settle_before_delete_drops_the_redelivery() {
    let Some(sdk) = emulator().await else { return };
    let stack = stack(&sdk, QueueSettings::default(), "").await;
    assert_eq!(deliver(&stack, &stripe_body("evt_crash_settle")).await.0, 200);
    let records = receive(&stack.sqs, &stack.rt.resources.queue_url, 5).await;
    assert_eq!(records.len(), 1);
    let done = functions::processor(&stack.rt, batch(records.clone()), deadline()).await;
    assert!(done.batch_item_failures.is_empty());
    assert_eq!(
        status_of(&stack, "evt_crash_settle").await,
        Some((Status::Completed, 1))
    );
    // The instance dies here: no delete. SQS hands the message out again.
    stack
        .sqs
        .change_message_visibility()
        .queue_url(&stack.rt.resources.queue_url)
        .receipt_handle(records[0].receipt_handle.clone().unwrap())
        .visibility_timeout(0)
        .send()
        .await
        .unwrap();
    assert_eq!(poll_once(&stack, 5).await, 1, "the message came back");
    assert_eq!(stack.switch.runs.lock().unwrap()["evt_crash_settle"], 1);
    assert_eq!(
        status_of(&stack, "evt_crash_settle").await,
        Some((Status::Completed, 1))
    );
    assert_eq!(all_events(&stack).await.len(), 1, "one record");
    assert_eq!(
        poll_once(&stack, 1).await,
        0,
        "the redelivered message was deleted"
    );
}
