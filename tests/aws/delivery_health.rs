//! The template's alarms (`alarms.rs`) over the EMF lines the functions emit: the delivery-health alarms, and
//! dead letters and lost enqueues.

use std::time::Duration;

use inbox_core::aws::emf;
use inbox_core::aws::functions;
use inbox_core::aws::init::QueueSettings;
use inbox_core::model::{EventId, EventKey, SourceName, Status};
use inbox_core::ports::Ledger;
use inbox_core::schemes::{Identity, Scheme};
use testkit::providers::{stripe_events_over, FakeStripe};

use crate::alarms;
use crate::reconcile::{deadline_in, reconcile_stack, reconciled_source, webhook_of};
use crate::stack::{
    batch, deliver, deliver_signed, emulator, poll_until, receive, stack, status_of, stripe_body, SECRET,
};
use inbox_core::ports::SweepIndex;

/// The delivery-health alarms of `infra/template.yaml`, evaluated (as CloudWatch
/// would, see `aws/alarms.rs`) over the EMF lines that the receiver and the reconciler function emit while they
/// run against the emulator: each fires in the period that calls for it, and stays quiet in the others.
#[tokio::test(flavor = "multi_thread")]
async fn delivery_health_alarms_fire_on_what_the_functions_emit_and_only_then() {
    let Some(sdk) = emulator().await else { return };
    let alarms = alarms::of_the_template();
    let health = [
        "DuplicateRatioAlarm",
        "PayloadMismatchAlarm",
        "ReconciledEventsAlarm",
        "ResentBodyAlarm",
        "SignatureFailuresAlarm",
    ];
    let fired = |lines: &[String]| alarms::firing(&alarms, &health, lines);
    let fake = FakeStripe::new(stripe_events_over(12, 10 * 3_600_000, "health"));
    let url = fake.start().await;
    let github = "[sources.gh]\nscheme = \"github\"\nsecrets = [\"env:AWS_TEST_SOURCE_SECRET\"]\n\
                  handler = { kind = \"log\" }\n";
    let stack = reconcile_stack(
        &sdk,
        &format!(
            "{}{github}",
            reconciled_source("stripe", &url, "AWS_TEST_STRIPE_KEY")
        ),
    )
    .await;
    let deliver_as = |secret: &'static str, body: String| {
        let receiver = stack.rt.receiver();
        async move { deliver_signed(receiver, secret, &body).await.0 }
    };
    let mut periods = Vec::new();

    // A healthy period: 25 accepted, 5 resent (the sender missed our 200s), 2 refused among them
    for i in 0..25 {
        assert_eq!(deliver_as(SECRET, stripe_body(&format!("evt_ok{i}"))).await, 200);
    }
    for i in 0..5 {
        assert_eq!(deliver_as(SECRET, stripe_body(&format!("evt_ok{i}"))).await, 200);
    }
    for i in 0..2 {
        assert_eq!(
            deliver_as("wrong-secret", stripe_body(&format!("evt_bad{i}"))).await,
            401
        );
    }
    let lines = emf::lines(&stack.rt.metrics);
    periods.push(("healthy: 25 accepted, 5 duplicates, 2 refused", fired(&lines)));

    // Duplicates out of proportion: 3 accepted, each resent 8 times (24 duplicates)
    for i in 0..3 {
        for _ in 0..9 {
            assert_eq!(
                deliver_as(SECRET, stripe_body(&format!("evt_loop{i}"))).await,
                200
            );
        }
    }
    let lines = emf::lines(&stack.rt.metrics);
    periods.push(("3 accepted, 24 duplicates", fired(&lines)));

    // A rotated secret: every delivery refused, first 4 of them (below the alarm's 5), then 6
    for i in 0..4 {
        assert_eq!(
            deliver_as("rotated", stripe_body(&format!("evt_rot{i}"))).await,
            401
        );
    }
    let lines = emf::lines(&stack.rt.metrics);
    periods.push(("4 refused, none accepted", fired(&lines)));
    for i in 0..6 {
        assert_eq!(
            deliver_as("rotated", stripe_body(&format!("evt_rot{i}"))).await,
            401
        );
    }
    let lines = emf::lines(&stack.rt.metrics);
    periods.push(("6 refused, none accepted", fired(&lines)));

    // One id delivered twice with different payloads (the first stands)
    assert_eq!(deliver_as(SECRET, stripe_body("evt_twice")).await, 200);
    let other = stripe_body("evt_twice").replace("\"object\":\"event\"", "\"object\":\"event\",\"x\":1");
    assert_ne!(other, stripe_body("evt_twice"));
    assert_eq!(deliver_as(SECRET, other).await, 200);
    let lines = emf::lines(&stack.rt.metrics);
    periods.push(("one id, two payloads", fired(&lines)));

    // One GitHub body under two delivery ids: stored twice, the second marked
    for id in ["d-first", "d-again"] {
        let identity = Identity {
            event_id: id.into(),
            event_type: Some("org_block".into()),
        };
        let body = "{\"action\":\"blocked\",\"blocked_user\":{\"login\":\"octocat\"}}";
        let (status, answer) =
            crate::stack::deliver_as(stack.rt.receiver(), Scheme::Github, "gh", identity, SECRET, body).await;
        assert_eq!(
            (status, answer["status"].as_str()),
            (200, Some("accepted")),
            "{answer}"
        );
    }
    let gh = SourceName::parse("gh").unwrap();
    let again = EventKey::new(gh, EventId::parse("d-again").unwrap());
    let again = stack.rt.ledger.get(&again).await.unwrap();
    let again = again.expect("the resent body was stored");
    assert_eq!(again.resent_of.as_ref().map(EventId::as_str), Some("d-first"));
    let lines = emf::lines(&stack.rt.metrics);
    periods.push(("one body under two ids", fired(&lines)));

    // The reconciler function: a source whose events all arrived by webhook, then one whose events never did
    let delivered = FakeStripe::new(stripe_events_over(12, 10 * 3_600_000, "seen"));
    let delivered_url = delivered.start().await;
    let mut all_seen = reconcile_stack(
        &sdk,
        &reconciled_source("stripe", &delivered_url, "AWS_TEST_STRIPE_KEY"),
    )
    .await;
    for (id, created, ty) in stripe_events_over(12, 10 * 3_600_000, "seen") {
        let (status, _) =
            deliver_signed(all_seen.rt.receiver(), SECRET, &webhook_of(&id, created, &ty)).await;
        assert_eq!(status, 200);
    }
    emf::lines(&all_seen.rt.metrics);
    all_seen.reconciler.emf = emf::Sink::kept();
    let report = functions::reconciler(&all_seen.reconciler, deadline_in(120)).await;
    assert!(report.failed().is_empty(), "{report:?}");
    let lines = all_seen.reconciler.emf.take();
    periods.push(("a reconciler run that finds nothing missing", fired(&lines)));
    let mut missing = stack;
    missing.reconciler.emf = emf::Sink::kept();
    let report = functions::reconciler(&missing.reconciler, deadline_in(120)).await;
    assert!(report.failed().is_empty(), "{report:?}");
    let lines = missing.reconciler.emf.take();
    periods.push(("a reconciler run that recovers 12 events", fired(&lines)));

    for (period, fired) in &periods {
        eprintln!("{period}: {fired:?}");
    }
    let expected: Vec<(&str, Vec<&str>)> = vec![
        ("healthy: 25 accepted, 5 duplicates, 2 refused", vec![]),
        ("3 accepted, 24 duplicates", vec!["DuplicateRatioAlarm"]),
        ("4 refused, none accepted", vec![]),
        ("6 refused, none accepted", vec!["SignatureFailuresAlarm"]),
        ("one id, two payloads", vec!["PayloadMismatchAlarm"]),
        ("one body under two ids", vec!["ResentBodyAlarm"]),
        ("a reconciler run that finds nothing missing", vec![]),
        (
            "a reconciler run that recovers 12 events",
            vec!["ReconciledEventsAlarm"],
        ),
    ];
    assert_eq!(periods, expected);
}

/// "Something was dead-lettered" and "an enqueue was lost" fire on what happens. The DLQ's depth
/// cannot say the first (the alarm function drains the queue in seconds), and a lost enqueue only logged a warning.
#[tokio::test]
async fn dead_letters_and_lost_enqueues_fire_their_alarms() {
    let Some(sdk) = emulator().await else { return };
    let alarms = alarms::of_the_template();
    let names = ["DeadLetteredAlarm", "LostEnqueueAlarm"];
    let fired = |lines: &[String]| alarms::firing(&alarms, &names, lines);
    let mut stack = stack(&sdk, QueueSettings::default(), "base = \"1s\"").await;
    // The functions flush their metrics themselves: kept here to be read.
    stack.rt.emf = emf::Sink::kept();
    let mut periods = Vec::new();

    // A healthy period: an event received, processed and completed
    let (status, _) = deliver(&stack, &stripe_body("evt_fine")).await;
    assert_eq!(status, 200);
    poll_until(&stack, "evt_fine", Status::Completed, Duration::from_secs(20)).await;
    let mut lines = stack.rt.emf.take();
    lines.extend(emf::lines(&stack.rt.metrics));
    periods.push(("healthy", fired(&lines)));

    // A message the redrive policy moved: its pointer reaches the alarm function, which buries the event
    let (status, _) = deliver(&stack, &stripe_body("evt_redriven")).await;
    assert_eq!(status, 200);
    let records = receive(&stack.sqs, &stack.rt.resources.queue_url, 2).await;
    assert_eq!(records.len(), 1);
    let response = functions::alarm(&stack.rt, batch(records)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    assert_eq!(
        status_of(&stack, "evt_redriven").await.map(|s| s.0),
        Some(Status::Dead)
    );
    let mut lines = stack.rt.emf.take();
    lines.extend(emf::lines(&stack.rt.metrics));
    periods.push(("one message dead-lettered", fired(&lines)));

    // The work queue gone: the receiver's SendMessage fails, but it stores the event and answers 200
    stack
        .sqs
        .delete_queue()
        .queue_url(&stack.rt.resources.queue_url)
        .send()
        .await
        .unwrap();
    let (status, body) = deliver(&stack, &stripe_body("evt_orphan")).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("accepted")));
    assert_eq!(
        status_of(&stack, "evt_orphan").await.map(|s| s.0),
        Some(Status::Received)
    );
    // No message vouches for it: its record is in the sparse index, where the sweeper finds it.
    let due = stack.rt.ledger.due(Duration::MAX, 10).await.unwrap();
    assert_eq!(
        due.iter().map(|e| e.event_id.as_str()).collect::<Vec<_>>(),
        ["evt_orphan"]
    );
    periods.push(("the enqueue failed", fired(&emf::lines(&stack.rt.metrics))));

    let expected: Vec<(&str, Vec<&str>)> = vec![
        ("healthy", vec![]),
        ("one message dead-lettered", vec!["DeadLetteredAlarm"]),
        ("the enqueue failed", vec!["LostEnqueueAlarm"]),
    ];
    assert_eq!(periods, expected);
}
