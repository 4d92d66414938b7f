//! The AWS runtime end to end against a local AWS emulator (moto's server, started by `./test.sh`; any endpoint
//! in `AWS_ENDPOINT_URL` works: LocalStack, or a sandbox account). Requests go through the receiver's real handler
//! built from Function URL event JSON; a test-side poller plays the SQS event source mapping: it receives a batch,
//! builds the `SqsEvent`, calls the processor's handler and deletes the messages it did not report as failed.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use inbox_core::aws::functions;
use inbox_core::aws::init::{create_stack, QueueSettings};
use inbox_core::aws::{Clients, Resources, Runtime};
use inbox_core::config::Config;
use inbox_core::handlers::{http_client, Handler, HandlerError, Registry};
use inbox_core::model::{Event, EventId, EventKey, SourceName, Status};
use inbox_core::ports::{Claim, Ledger, Queue, Settlement};
use inbox_core::schemes::{Identity, Scheme};
use inbox_core::source::LocalSecrets;
use tower::ServiceExt;

const SECRET: &str = "aws-test-secret";

/// The emulator's SDK config, or `None` (with a loud note) where none runs and none is required.
async fn emulator() -> Option<aws_config::SdkConfig> {
    if std::env::var("AWS_ENDPOINT_URL").is_err() {
        assert!(
            std::env::var("INBOX_REQUIRE_AWS").is_err(),
            "INBOX_REQUIRE_AWS is set but AWS_ENDPOINT_URL is not: start the emulator (./test.sh does)"
        );
        eprintln!("SKIPPED: no AWS_ENDPOINT_URL (run ./test.sh, which starts the AWS emulator)");
        return None;
    }
    Some(
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .load()
            .await,
    )
}

/// Counts SDK operations by name, as the happy-path cost test needs.
#[derive(Debug, Default, Clone)]
struct CallCounter(Arc<Mutex<HashMap<String, usize>>>);

impl CallCounter {
    fn take(&self) -> HashMap<String, usize> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl Intercept for CallCounter {
    fn name(&self) -> &'static str {
        "CallCounter"
    }
    /// DynamoDB and SQS name the operation in `x-amz-target` (`DynamoDB_20120810.PutItem`,
    /// `AmazonSQS.SendMessage`): counted per request sent, retries included.
    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        let target = context
            .request()
            .headers()
            .get("x-amz-target")
            .unwrap_or("unknown");
        let (service, op) = target.split_once('.').unwrap_or(("unknown", target));
        let service = if service.starts_with("DynamoDB") {
            "dynamodb"
        } else {
            "sqs"
        };
        *self
            .0
            .lock()
            .unwrap()
            .entry(format!("{service}.{op}"))
            .or_default() += 1;
        Ok(())
    }
}

/// A handler whose answer the test sets: succeed, or fail retryably. Counts runs per event id.
#[derive(Default)]
struct Switch {
    failing: AtomicBool,
    runs: Mutex<HashMap<String, usize>>,
    delay: Mutex<Duration>,
}

#[async_trait]
impl Handler for Switch {
    async fn handle(&self, event: &Event) -> Result<(), HandlerError> {
        *self
            .runs
            .lock()
            .unwrap()
            .entry(event.event_id.to_string())
            .or_default() += 1;
        let delay = *self.delay.lock().unwrap();
        tokio::time::sleep(delay).await;
        if self.failing.load(Ordering::SeqCst) {
            Err(HandlerError::Retryable("downstream says 503".into()))
        } else {
            Ok(())
        }
    }
}

struct Stack {
    rt: Runtime,
    switch: Arc<Switch>,
    counter: CallCounter,
    sqs: aws_sdk_sqs::Client,
}

fn prefix() -> String {
    format!("it{:08x}", rand::random::<u32>())
}

/// A fresh stack (table, queues, bucket, topic) under a random prefix, and a runtime over it whose DynamoDB and
/// SQS clients count their calls.
async fn stack(sdk: &aws_config::SdkConfig, settings: QueueSettings, retry: &str) -> Stack {
    stack_with(sdk, settings, retry, "switch", |registry, _, _, _| registry).await
}

/// [`stack`] whose source runs the custom handler `handler`, which `register` adds to the registry (given the
/// runtime's clients, resources and config); `switch` is always registered.
async fn stack_with(
    sdk: &aws_config::SdkConfig,
    settings: QueueSettings,
    retry: &str,
    handler: &str,
    register: impl FnOnce(Registry, &Clients, &Resources, &Config) -> Registry,
) -> Stack {
    let resources = create_stack(sdk, &prefix(), settings).await.unwrap();
    let counter = CallCounter::default();
    let clients = Clients {
        dynamodb: aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(sdk)
                .interceptor(counter.clone())
                .build(),
        ),
        sqs: aws_sdk_sqs::Client::from_conf(
            aws_sdk_sqs::config::Builder::from(sdk)
                .interceptor(counter.clone())
                .build(),
        ),
        ..Clients::new(sdk)
    };
    std::env::set_var("AWS_TEST_SOURCE_SECRET", SECRET);
    let config = Config::from_toml(&format!(
        "[retry]\n{retry}\n[sweeper]\ngrace = \"0\"\n\
         [sources.stripe]\nscheme = \"stripe\"\nsecrets = [\"env:AWS_TEST_SOURCE_SECRET\"]\n\
         handler = {{ kind = \"custom\", name = \"{handler}\", timeout = \"5s\" }}\n"
    ))
    .unwrap();
    let switch = Arc::new(Switch::default());
    let registry = Registry::new(http_client()).register("switch", switch.clone());
    let registry = register(registry, &clients, &resources, &config);
    let rt = Runtime::new(clients, Some(&LocalSecrets), resources, config, registry)
        .await
        .unwrap();
    let sqs = aws_sdk_sqs::Client::new(sdk);
    Stack {
        rt,
        switch,
        counter,
        sqs,
    }
}

fn stripe_body(id: &str) -> String {
    serde_json::json!({"id": id, "object": "event", "type": "payment_intent.succeeded", "data": {"amount": 4200}})
        .to_string()
}

/// A Function URL invocation of the receiver, signed now.
async fn deliver(stack: &Stack, body: &str) -> (u16, serde_json::Value) {
    let key = Scheme::Stripe.key_from_secret(SECRET).unwrap();
    let identity = Identity {
        event_id: "unused".into(),
        event_type: None,
    };
    let now = inbox_core::time::now_ms() / 1000;
    let mut event: serde_json::Value =
        serde_json::from_str(include_str!("data/function_url_event.json")).unwrap();
    for (name, value) in Scheme::Stripe.sign(&key, body.as_bytes(), &identity, now) {
        event["headers"][name.as_str()] = serde_json::json!(value.to_str().unwrap());
    }
    event["rawPath"] = serde_json::json!("/webhooks/stripe");
    event["requestContext"]["http"]["path"] = serde_json::json!("/webhooks/stripe");
    event["body"] = serde_json::json!(body);
    let request = lambda_http::request::from_str(&event.to_string()).unwrap();
    let app = inbox_core::receiver::router(stack.rt.receiver(), false);
    let response = app.oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or_default())
}

fn key(id: &str) -> EventKey {
    EventKey::new(SourceName::parse("stripe").unwrap(), EventId::parse(id).unwrap())
}

async fn receive(sqs: &aws_sdk_sqs::Client, url: &str, wait: i32) -> Vec<SqsMessage> {
    let out = sqs
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .wait_time_seconds(wait)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await
        .unwrap();
    out.messages()
        .iter()
        .map(|m| {
            let mut msg = SqsMessage::default();
            msg.message_id = m.message_id().map(str::to_owned);
            msg.receipt_handle = m.receipt_handle().map(str::to_owned);
            msg.body = m.body().map(str::to_owned);
            msg.attributes = m
                .attributes()
                .map(|a| {
                    a.iter()
                        .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
                        .collect()
                })
                .unwrap_or_default();
            msg
        })
        .collect()
}

fn batch(records: Vec<SqsMessage>) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = records;
    event
}

fn deadline() -> u64 {
    u64::try_from(inbox_core::time::now_ms() + 30_000).unwrap()
}

/// Plays the event source mapping once: one batch through the processor, reported failures left on the queue.
/// Returns how many messages it received.
async fn poll_once(stack: &Stack, wait: i32) -> usize {
    let records = receive(&stack.sqs, &stack.rt.resources.queue_url, wait).await;
    let n = records.len();
    if n == 0 {
        return 0;
    }
    let response = functions::processor(&stack.rt, batch(records.clone()), deadline()).await;
    let failed: Vec<_> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect();
    for r in records
        .iter()
        .filter(|r| !failed.contains(r.message_id.as_ref().unwrap()))
    {
        stack
            .sqs
            .delete_message()
            .queue_url(&stack.rt.resources.queue_url)
            .receipt_handle(r.receipt_handle.clone().unwrap())
            .send()
            .await
            .unwrap();
    }
    n
}

async fn status_of(stack: &Stack, id: &str) -> Option<(Status, u32)> {
    stack
        .rt
        .ledger
        .get(&key(id))
        .await
        .unwrap()
        .map(|e| (e.status, e.attempts))
}

/// Polls until the event has `want`, within `limit`.
async fn poll_until(stack: &Stack, id: &str, want: Status, limit: Duration) {
    let start = Instant::now();
    while start.elapsed() < limit {
        if status_of(stack, id).await.map(|s| s.0) == Some(want) {
            return;
        }
        poll_once(stack, 1).await;
    }
    panic!(
        "{id} is {:?}, not {want:?}, after {limit:?}",
        status_of(stack, id).await
    );
}

#[tokio::test]
async fn receiver_to_completed_with_the_happy_path_call_budget() {
    let Some(sdk) = emulator().await else { return };
    let stack = stack(&sdk, QueueSettings::default(), "base = \"1s\"").await;
    stack.counter.take();

    // WHEN a signed webhook arrives through the Function URL
    let (status, body) = deliver(&stack, &stripe_body("evt_happy")).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("accepted")));
    // THEN the receiver made exactly one conditional write and one SendMessage
    let receiver_calls = stack.counter.take();
    assert_eq!(
        receiver_calls,
        HashMap::from([
            ("dynamodb.PutItem".to_owned(), 1),
            ("sqs.SendMessage".to_owned(), 1)
        ]),
        "receiver calls"
    );
    let stored = stack.rt.ledger.get(&key("evt_happy")).await.unwrap().unwrap();
    assert_eq!(stored.status, Status::Received);
    assert_eq!(stored.payload.as_ref(), stripe_body("evt_happy").as_bytes());
    stack.counter.take(); // the get above is the test's, not the runtime's

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

    // AND the same delivery again is a duplicate that runs nothing and enqueues nothing
    let (status, body) = deliver(&stack, &stripe_body("evt_happy")).await;
    assert_eq!(
        (status, body["status"].as_str(), body["state"].as_str()),
        (200, Some("duplicate"), Some("COMPLETED"))
    );
    assert_eq!(
        stack.counter.take(),
        HashMap::from([("dynamodb.PutItem".to_owned(), 1)])
    );
    assert_eq!(stack.switch.runs.lock().unwrap()["evt_happy"], 1);
}

#[tokio::test]
async fn bad_requests_change_nothing() {
    let Some(sdk) = emulator().await else { return };
    let stack = stack(&sdk, QueueSettings::default(), "").await;
    let mut event: serde_json::Value =
        serde_json::from_str(include_str!("data/function_url_event.json")).unwrap();
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
    let response = functions::dead_letters(&stack.rt, batch(dead_letters.clone())).await;
    assert!(response.batch_item_failures.is_empty());
    let again = functions::dead_letters(&stack.rt, batch(dead_letters)).await;
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
    let new = |id: &str| inbox_core::model::NewEvent {
        key: key(id),
        event_type: None,
        payload: bytes::Bytes::from(stripe_body(id)),
        payload_sha256: "h".into(),
        headers: vec![],
    };
    // GIVEN a record written but never enqueued (crash between the write and the enqueue)
    ledger.create(new("evt_never_enqueued")).await.unwrap();
    // AND one PROCESSING whose worker died (its lease has run out)
    ledger.create(new("evt_worker_died")).await.unwrap();
    assert!(matches!(
        ledger
            .claim(&key("evt_worker_died"), "dead-worker", Duration::ZERO)
            .await
            .unwrap(),
        Claim::Claimed(_)
    ));
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

    // WHEN the sweeper runs
    let report = functions::sweeper(&stack.rt).await.unwrap();
    assert_eq!(
        (report.received, report.expired_leases, report.overdue_failed),
        (1, 1, 1)
    );

    // THEN each is finished by the processor
    for id in ["evt_never_enqueued", "evt_worker_died", "evt_lost_retry"] {
        poll_until(&stack, id, Status::Completed, Duration::from_secs(20)).await;
    }
    let runs = stack.switch.runs.lock().unwrap().clone();
    assert_eq!(runs.values().sum::<usize>(), 3, "{runs:?}");
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

/// Resources from the environment name what is missing.
#[test]
fn resources_need_the_table_and_queue() {
    let r = Resources {
        table: "t".into(),
        queue_url: "q".into(),
        dlq_url: None,
        bucket: Some("b".into()),
        topic_arn: None,
    };
    assert_eq!(
        r.env_lines(),
        [
            "export INBOX_TABLE=t",
            "export INBOX_QUEUE_URL=q",
            "export INBOX_BUCKET=b"
        ]
    );
}
