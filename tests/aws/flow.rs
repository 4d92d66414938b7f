//! The receiver→processor paths: the happy path's call budget, a message ahead of its record, an id reused after
//! retention, forged requests, the redrive to DEAD and the replay, the sweeper's crash states, racing processors,
//! a deadline from 1970, and duplicates of a young event.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::QueueAttributeName;
use inbox_core::aws::functions;
use inbox_core::aws::init::QueueSettings;
use inbox_core::model::Status;
use inbox_core::ports::{Claim, Ledger, Queue, Settlement};
use tower::ServiceExt;

use crate::reconcile::{ops, reconcile_stack, reconciled_source};
use crate::stack::{
    batch, deadline, deliver, deliver_signed, emulator, key, poll_once, poll_until, prefix, receive, record,
    stack, status_of, stripe_body, SECRET,
};
use inbox_core::ports::SweepIndex;

#[tokio::test]
async fn receiver_to_completed_with_the_happy_path_call_budget() {
    let Some(sdk) = emulator().await else { return };
    let stack = stack(&sdk, QueueSettings::default(), "base = \"1s\"").await;
    stack.counter.take();

    // WHEN a signed webhook arrives through the Function URL
    let (status, body) = deliver(&stack, &stripe_body("evt_happy")).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("accepted")));
    // THEN the receiver made one read (is it a duplicate?), one SendMessage and one conditional write
    let receiver_calls = stack.counter.take();
    assert_eq!(
        receiver_calls,
        HashMap::from([
            ("dynamodb.GetItem".to_owned(), 1),
            ("dynamodb.PutItem".to_owned(), 1),
            ("sqs.SendMessage".to_owned(), 1)
        ]),
        "receiver calls"
    );
    let stored = stack.rt.ledger.get(&key("evt_happy")).await.unwrap().unwrap();
    assert_eq!(stored.status, Status::Received);
    assert_eq!(stored.payload.as_ref(), stripe_body("evt_happy").as_bytes());
    // AND its message went out first, so the record took no sparse-index entry: nothing is due for the sweeper
    assert_eq!(stack.rt.ledger.due(Duration::MAX, 10).await.unwrap(), vec![]);
    stack.counter.take(); // the reads above are the test's, not the runtime's

    // AND the processor completes it with at most two conditional writes (plus the poller's receive/delete)
    let records = receive(&stack.sqs, &stack.rt.resources.queue_url, 2).await;
    assert_eq!(records.len(), 1);
    stack.counter.take();
    let response = functions::processor(&stack.rt, batch(records), deadline()).await;
    assert!(response.batch_item_failures.is_empty());
    let processor_calls = stack.counter.take();
    let writes: usize = processor_calls
        .iter()
        .filter(|(op, _)| op.starts_with("dynamodb."))
        .map(|(_, n)| n)
        .sum();
    assert!(writes <= 2, "processor DynamoDB calls: {processor_calls:?}");
    assert_eq!(
        processor_calls.get("dynamodb.UpdateItem"),
        Some(&2),
        "{processor_calls:?}"
    );
    assert!(
        processor_calls
            .keys()
            .all(|op| op.starts_with("dynamodb.UpdateItem")),
        "{processor_calls:?}"
    );
    assert_eq!(status_of(&stack, "evt_happy").await, Some((Status::Completed, 1)));
    stack.counter.take(); // the test's own read

    // AND the same delivery again is a duplicate found by one read: it writes nothing and enqueues nothing
    let (status, body) = deliver(&stack, &stripe_body("evt_happy")).await;
    assert_eq!(
        (status, body["status"].as_str(), body["state"].as_str()),
        (200, Some("duplicate"), Some("COMPLETED"))
    );
    assert_eq!(
        stack.counter.take(),
        HashMap::from([("dynamodb.GetItem".to_owned(), 1)])
    );
    assert_eq!(stack.switch.runs.lock().unwrap()["evt_happy"], 1);
}

/// The receiver sends a message before it creates the record (so the record needs no index entry). A processor
/// that gets the message first waits for the record; one whose record can no longer come (the receiver's write
/// failed, or it died) keeps the message only until the message's `until`, then drops it, creating nothing.
#[tokio::test]
async fn a_message_sent_ahead_of_its_record_waits_for_it_until_it_cannot_come() {
    let Some(sdk) = emulator().await else { return };
    let stack = stack(&sdk, QueueSettings::default(), "").await;
    let queue = &stack.rt.resources.queue_url;

    // GIVEN a message whose record is created 150 ms after the processor got it
    let now = inbox_core::time::now_ms();
    stack
        .rt
        .queue
        .announce(&key("evt_late"), now + 60_000)
        .await
        .unwrap();
    let records = receive(&stack.sqs, queue, 5).await;
    assert_eq!(records.len(), 1);
    let ledger = stack.rt.ledger.clone();
    let create = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        ledger.create_announced(record("evt_late")).await.unwrap()
    });
    let response = functions::processor(&stack.rt, batch(records), deadline()).await;
    create.await.unwrap();
    // THEN the processor found it within its own wait, and ran it once
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(status_of(&stack, "evt_late").await, Some((Status::Completed, 1)));
    assert_eq!(stack.switch.runs.lock().unwrap()["evt_late"], 1);

    // GIVEN a message whose record never comes, until 3 s from now
    let until = inbox_core::time::now_ms() + 3_000;
    stack.rt.queue.announce(&key("evt_never"), until).await.unwrap();
    let records = receive(&stack.sqs, queue, 5).await;
    assert_eq!(records.len(), 1);
    // WHEN the processor gets it before then: kept (reported failed), for SQS to hand out again
    let response = functions::processor(&stack.rt, batch(records.clone()), deadline()).await;
    assert_eq!(response.batch_item_failures.len(), 1, "{response:?}");
    // AND after then: dropped, and nothing was created
    let wait = until - inbox_core::time::now_ms() + 100;
    tokio::time::sleep(Duration::from_millis(u64::try_from(wait).unwrap_or(0))).await;
    let response = functions::processor(&stack.rt, batch(records), deadline()).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(status_of(&stack, "evt_never").await, None);
    assert!(!stack.switch.runs.lock().unwrap().contains_key("evt_never"));

    // AND a plain pointer to no record (not sent ahead of a create) is dropped at once
    stack
        .rt
        .queue
        .enqueue(&key("evt_gone"), Duration::ZERO)
        .await
        .unwrap();
    let records = receive(&stack.sqs, queue, 5).await;
    let t = Instant::now();
    let response = functions::processor(&stack.rt, batch(records), deadline()).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert!(t.elapsed() < Duration::from_millis(500), "{:?}", t.elapsed());
}

/// An id reused after its record's retention (TTL deletes days late) is a new event: the receiver sends its message
/// ahead of the create that replaces the expired record, and a processor that gets the message first must not drop
/// it as "already done" on the old record: the new record would then have neither a message nor an index entry.
#[tokio::test]
async fn an_id_reused_after_retention_runs_even_when_its_message_beats_the_replace() {
    let Some(sdk) = emulator().await else { return };
    let stack = stack(&sdk, QueueSettings::default(), "").await;
    let (ledger, queue) = (&stack.rt.ledger, &stack.rt.resources.queue_url);

    // GIVEN a completed event past its retention, not deleted yet
    ledger.create(record("evt_reused")).await.unwrap();
    let Claim::Claimed(_) = ledger
        .claim(&key("evt_reused"), "w", Duration::from_secs(60))
        .await
        .unwrap()
    else {
        panic!("not claimed")
    };
    let done = Settlement::Completed {
        retention: Duration::ZERO,
    };
    ledger.settle(&key("evt_reused"), "w", done).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await; // `expires_at` counts whole seconds
    assert_eq!(ledger.get(&key("evt_reused")).await.unwrap(), None);
    // WHEN the id comes again: its message goes first, and the processor gets it before the replace lands
    let until = inbox_core::time::now_ms() + 60_000;
    stack.rt.queue.announce(&key("evt_reused"), until).await.unwrap();
    let records = receive(&stack.sqs, queue, 5).await;
    assert_eq!(records.len(), 1);
    let early = functions::processor(&stack.rt, batch(records.clone()), deadline()).await;
    // THEN the message is kept for the record to come, not dropped on the old one
    assert_eq!(early.batch_item_failures.len(), 1, "{early:?}");
    assert_eq!(
        ledger.create_announced(record("evt_reused")).await.unwrap(),
        inbox_core::ports::Created::New
    );
    let late = functions::processor(&stack.rt, batch(records), deadline()).await;
    assert!(late.batch_item_failures.is_empty(), "{late:?}");
    assert_eq!(
        status_of(&stack, "evt_reused").await,
        Some((Status::Completed, 1))
    );
    assert_eq!(stack.switch.runs.lock().unwrap()["evt_reused"], 1);
}

#[tokio::test]
async fn bad_requests_change_nothing() {
    let Some(sdk) = emulator().await else { return };
    let stack = stack(&sdk, QueueSettings::default(), "").await;
    let mut event: serde_json::Value =
        serde_json::from_str(include_str!("../data/function_url_event.json")).unwrap();
    event["rawPath"] = serde_json::json!("/webhooks/stripe");
    event["requestContext"]["http"]["path"] = serde_json::json!("/webhooks/stripe");
    event["headers"]["stripe-signature"] = serde_json::json!("t=1,v1=00");
    event["body"] = serde_json::json!(stripe_body("evt_forged"));
    let app = inbox_core::receiver::router(stack.rt.receiver(), false);
    let request = lambda_http::request::from_str(&event.to_string()).unwrap();
    assert_eq!(app.oneshot(request).await.unwrap().status().as_u16(), 401);
    assert!(stack.rt.ledger.get(&key("evt_forged")).await.unwrap().is_none());
    assert_eq!(poll_once(&stack, 1).await, 0, "nothing enqueued");
}

#[tokio::test]
async fn retryable_forever_is_redriven_marked_dead_notified_once_and_replayed() {
    let Some(sdk) = emulator().await else { return };
    let settings = QueueSettings {
        max_receive_count: 3,
        visibility_timeout: 1,
    };
    let stack = stack(
        &sdk,
        settings,
        "base = \"200ms\"\ncap = \"500ms\"\nmax_attempts = 100",
    )
    .await;
    // GIVEN an SQS queue subscribed to the alarm topic, and a handler that always fails retryably
    let sns = aws_sdk_sns::Client::new(&sdk);
    let inbox = stack
        .sqs
        .create_queue()
        .queue_name(format!("{}-alarms", prefix()))
        .send()
        .await
        .unwrap();
    let inbox_url = inbox.queue_url().unwrap().to_owned();
    let inbox_arn = stack
        .sqs
        .get_queue_attributes()
        .queue_url(&inbox_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes()
        .unwrap()[&QueueAttributeName::QueueArn]
        .clone();
    sns.subscribe()
        .topic_arn(stack.rt.resources.topic_arn.clone().unwrap())
        .protocol("sqs")
        .endpoint(inbox_arn)
        .send()
        .await
        .unwrap();
    stack.switch.failing.store(true, Ordering::SeqCst);
    assert_eq!(deliver(&stack, &stripe_body("evt_doomed")).await.0, 200);

    // WHEN the processor keeps failing it, past maxReceiveCount receives
    let dlq = stack.rt.resources.dlq_url.clone().unwrap();
    let start = Instant::now();
    let dead_letters = loop {
        assert!(start.elapsed() < Duration::from_secs(60), "never reached the DLQ");
        poll_once(&stack, 1).await;
        let found = receive(&stack.sqs, &dlq, 0).await;
        if !found.is_empty() {
            break found;
        }
    };
    assert_eq!(dead_letters.len(), 1);
    let runs = stack.switch.runs.lock().unwrap()["evt_doomed"];
    assert!((3..=4).contains(&runs), "ran {runs} times for maxReceiveCount 3");
    assert_eq!(status_of(&stack, "evt_doomed").await.unwrap().0, Status::Failed);

    // THEN the alarm function marks it DEAD and the topic gets one notification, however often it is redriven
    let response = functions::alarm(&stack.rt, batch(dead_letters.clone())).await;
    assert!(response.batch_item_failures.is_empty());
    let again = functions::alarm(&stack.rt, batch(dead_letters)).await;
    assert!(again.batch_item_failures.is_empty());
    let dead = stack.rt.ledger.get(&key("evt_doomed")).await.unwrap().unwrap();
    assert_eq!(dead.status, Status::Dead);
    assert_eq!(dead.last_error.as_deref(), Some(functions::REDRIVEN));
    let mut notes = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        notes.extend(receive(&stack.sqs, &inbox_url, 1).await);
    }
    assert_eq!(notes.len(), 1, "one notification per dead event");
    assert!(notes[0].body.as_deref().unwrap().contains("evt_doomed"));

    // AND a replay with the downstream fixed completes it
    stack.switch.failing.store(false, Ordering::SeqCst);
    assert_eq!(
        stack.rt.ledger.replay(&key("evt_doomed"), false).await.unwrap(),
        inbox_core::ports::Replay::Replayed
    );
    stack
        .rt
        .queue
        .enqueue(&key("evt_doomed"), Duration::ZERO)
        .await
        .unwrap();
    poll_until(&stack, "evt_doomed", Status::Completed, Duration::from_secs(20)).await;
    assert_eq!(
        stack
            .rt
            .ledger
            .get(&key("evt_doomed"))
            .await
            .unwrap()
            .unwrap()
            .replays,
        1
    );
}

#[tokio::test]
async fn the_sweeper_finishes_every_crash_state() {
    let Some(sdk) = emulator().await else { return };
    let stack = stack(&sdk, QueueSettings::default(), "").await;
    let ledger = stack.rt.ledger.clone();
    let new = record;
    // GIVEN a record whose enqueue failed (written unannounced, so in the sparse index)
    ledger.create(new("evt_never_enqueued")).await.unwrap();
    // AND one FAILED whose retry message was lost
    ledger.create(new("evt_lost_retry")).await.unwrap();
    ledger
        .claim(&key("evt_lost_retry"), "w", Duration::from_secs(60))
        .await
        .unwrap();
    let failed = Settlement::Failed {
        error: "HTTP 503".into(),
        delay: Duration::ZERO,
    };
    ledger.settle(&key("evt_lost_retry"), "w", failed).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    // (A PROCESSING record whose worker died is not the sweeper's on AWS: its message comes back. See
    // `crash_after_claim_is_finished_by_its_message_not_the_sweeper`.)

    // WHEN the sweeper runs
    let report = functions::sweeper(&stack.rt).await.unwrap();
    assert_eq!(
        (report.received, report.expired_leases, report.overdue_failed),
        (1, 0, 1)
    );

    // THEN each is finished by the processor
    for id in ["evt_never_enqueued", "evt_lost_retry"] {
        poll_until(&stack, id, Status::Completed, Duration::from_secs(20)).await;
    }
    let runs = stack.switch.runs.lock().unwrap().clone();
    assert_eq!(runs.values().sum::<usize>(), 2, "{runs:?}");
    assert_eq!(
        functions::sweeper(&stack.rt).await.unwrap().enqueued(),
        0,
        "nothing left open"
    );
}

#[tokio::test]
async fn two_processors_racing_for_one_message_run_it_once() {
    let Some(sdk) = emulator().await else { return };
    let stack = stack(&sdk, QueueSettings::default(), "").await;
    *stack.switch.delay.lock().unwrap() = Duration::from_millis(300);
    assert_eq!(deliver(&stack, &stripe_body("evt_race")).await.0, 200);
    let records = receive(&stack.sqs, &stack.rt.resources.queue_url, 2).await;
    assert_eq!(records.len(), 1);
    // Two invocations with the same message (SQS delivers at least once).
    let (a, b) = tokio::join!(
        functions::processor(&stack.rt, batch(records.clone()), deadline()),
        functions::processor(&stack.rt, batch(records), deadline()),
    );
    assert!(a.batch_item_failures.is_empty() && b.batch_item_failures.is_empty());
    assert_eq!(stack.switch.runs.lock().unwrap()["evt_race"], 1);
    assert_eq!(status_of(&stack, "evt_race").await, Some((Status::Completed, 1)));
}

/// Under `cargo lambda watch` (1.9.2) every invocation's deadline is `600000`, a moment in 1970.
/// Trusted, it made the lease and the handler's time 0: the event was settled FAILED ("did not finish within
/// 0 ms") and ran again. A deadline already past is unknown, and the configured timeout stands in.
#[tokio::test]
async fn a_deadline_from_1970_does_not_fail_the_handler() {
    let Some(sdk) = emulator().await else { return };
    let stack = stack(&sdk, QueueSettings::default(), "base = \"1s\"").await;
    let (status, body) = deliver(&stack, &stripe_body("evt_watch")).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("accepted")));
    let records = receive(&stack.sqs, &stack.rt.resources.queue_url, 2).await;
    assert_eq!(records.len(), 1);

    let response = functions::processor(&stack.rt, batch(records), 600_000).await;

    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(status_of(&stack, "evt_watch").await, Some((Status::Completed, 1)));
}

/// A retry storm on a RECEIVED event younger than the sweeper's grace sends no message: its
/// first message is in flight. (The re-send of an older one, which heals a lost enqueue, is what the stacks above
/// do with a grace of 0.)
#[tokio::test]
async fn duplicates_of_a_young_received_event_send_no_messages() {
    let Some(sdk) = emulator().await else { return };
    // The default sweeper grace (30 s); the reconcile block is never run here.
    let stack = reconcile_stack(
        &sdk,
        &reconciled_source("stripe", "http://127.0.0.1:9", "AWS_TEST_STRIPE_KEY"),
    )
    .await;
    let (status, answer) = deliver_signed(stack.rt.receiver(), SECRET, &stripe_body("evt_storm")).await;
    assert_eq!((status, answer["status"].as_str()), (200, Some("accepted")));
    assert_eq!(ops(&stack.counter.take()).get("sqs.SendMessage"), Some(&1));
    for _ in 0..10 {
        let (status, answer) = deliver_signed(stack.rt.receiver(), SECRET, &stripe_body("evt_storm")).await;
        assert_eq!((status, answer["status"].as_str()), (200, Some("duplicate")));
    }
    let calls = stack.counter.take();
    assert_eq!(ops(&calls).get("sqs.SendMessage"), None, "{calls:?}");
}
