//! The stack under test and its deliveries: a fresh stack (table, queues, bucket, topic) under a random prefix
//! with a runtime over it whose calls are counted; the receiver invoked through its Function URL event; the event
//! source mapping played by the test (receive a batch, run the processor, delete what it did not report failed);
//! and the reads the tests make of the ledger and the payload bucket.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_sqs::types::MessageSystemAttributeName;
use inbox_core::aws::functions;
use inbox_core::aws::init::{create_stack, QueueSettings};
use inbox_core::aws::{Clients, Resources, Runtime};
use inbox_core::config::Config;
use inbox_core::handlers::{http_client, Handler, HandlerError, Registry};
use inbox_core::model::{Event, EventId, EventKey, Record, SourceName, Status};
use inbox_core::ports::Browse;
use inbox_core::ports::{Ledger, ListFilter};
use inbox_core::receiver::Receiver;
use inbox_core::schemes::{Identity, Scheme};
use inbox_core::secrets::LocalSecrets;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use testkit::calls::CallCounter;
use tower::ServiceExt;

pub const SECRET: &str = "aws-test-secret";

/// The emulator's SDK config, or `None` (with a loud note) where none runs and none is required.
pub async fn emulator() -> Option<aws_config::SdkConfig> {
    if std::env::var("AWS_ENDPOINT_URL").is_err() {
        assert!(
            std::env::var("INBOX_REQUIRE_AWS").is_err(),
            "INBOX_REQUIRE_AWS is set but AWS_ENDPOINT_URL is not: start the emulator (./test.sh does)"
        );
        eprintln!("SKIPPED: no AWS_ENDPOINT_URL (run ./test.sh, which starts the AWS emulator)");
        return None;
    }
    // The functions' own loader, so every call below goes through the settings a cold start builds.
    Some(inbox_core::aws::sdk::load().await)
}

/// A handler whose answer the test sets: succeed, or fail retryably. Counts runs per event id.
#[derive(Default)]
pub struct Switch {
    pub failing: AtomicBool,
    pub runs: Mutex<HashMap<String, usize>>,
    pub delay: Mutex<Duration>,
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

pub struct Stack {
    pub rt: Runtime,
    pub switch: Arc<Switch>,
    pub counter: CallCounter,
    pub sqs: aws_sdk_sqs::Client,
}

pub fn prefix() -> String {
    format!("it{:08x}", rand::random::<u32>())
}

/// A fresh stack (table, queues, bucket, topic) under a random prefix, and a runtime over it whose DynamoDB and
/// SQS clients count their calls.
pub async fn stack(sdk: &aws_config::SdkConfig, settings: QueueSettings, retry: &str) -> Stack {
    stack_with(sdk, settings, retry, "switch", |registry, _, _, _| registry).await
}

/// [`stack`] whose source runs the custom handler `handler`, which `register` adds to the registry (given the
/// runtime's clients, resources and config); `switch` is always registered.
pub async fn stack_with(
    sdk: &aws_config::SdkConfig,
    settings: QueueSettings,
    retry: &str,
    handler: &str,
    register: impl FnOnce(Registry, &Clients, &Resources, &Config) -> Registry,
) -> Stack {
    stack_with_sources(sdk, settings, retry, handler, register, "").await
}

/// [`stack_with`] with more sources beside `stripe` (TOML `[sources.X]` tables, secrets from the environment).
pub async fn stack_with_sources(
    sdk: &aws_config::SdkConfig,
    settings: QueueSettings,
    retry: &str,
    handler: &str,
    register: impl FnOnce(Registry, &Clients, &Resources, &Config) -> Registry,
    more_sources: &str,
) -> Stack {
    let mut resources = create_stack(sdk, &prefix(), settings).await.unwrap();
    // Some of these stacks reach the redrive path on purpose (fewer receives than attempts), which the start-up
    // check refuses; `a_retry_budget_the_redrive_policy_would_cut_short_is_refused` covers the check.
    resources.max_receive_count = None;
    let counter = CallCounter::default();
    let clients = counted_clients(sdk, &counter);
    std::env::set_var("AWS_TEST_SOURCE_SECRET", SECRET);
    let config = Config::from_toml(&format!(
        "[retry]\n{retry}\n[sweeper]\ngrace = \"0\"\n\
         [sources.stripe]\nscheme = \"stripe\"\nsecrets = [\"env:AWS_TEST_SOURCE_SECRET\"]\n\
         handler = {{ kind = \"custom\", name = \"{handler}\", timeout = \"5s\" }}\n{more_sources}"
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

pub fn stripe_body(id: &str) -> String {
    serde_json::json!({"id": id, "object": "event", "type": "payment_intent.succeeded", "data": {"amount": 4200}})
        .to_string()
}

/// A Function URL invocation of the receiver, signed now.
pub async fn deliver(stack: &Stack, body: &str) -> (u16, serde_json::Value) {
    deliver_signed(stack.rt.receiver(), SECRET, body).await
}

/// [`deliver`] to any receiver (a runtime's, or the receiver function's own), signed with `secret`.
pub async fn deliver_signed(receiver: Arc<Receiver>, secret: &str, body: &str) -> (u16, serde_json::Value) {
    let identity = Identity {
        event_id: "unused".into(),
        event_type: None,
    };
    deliver_as(receiver, Scheme::Stripe, "stripe", identity, secret, body).await
}

/// [`deliver_signed`] for any scheme and source; `identity` is what the scheme's headers carry (GitHub's
/// delivery id and event name).
pub async fn deliver_as(
    receiver: Arc<Receiver>,
    scheme: Scheme,
    source: &str,
    identity: Identity,
    secret: &str,
    body: &str,
) -> (u16, serde_json::Value) {
    let key = scheme.key_from_secret(secret).unwrap();
    let now = inbox_core::time::now_ms() / 1000;
    let headers: http::HeaderMap = scheme
        .sign(&key, body.as_bytes(), &identity, now)
        .into_iter()
        .collect();
    deliver_raw(receiver, source, &headers, body.as_bytes()).await
}

/// A delivery with these headers and body, through the receiver's Function URL event.
pub async fn deliver_raw(
    receiver: Arc<Receiver>,
    source: &str,
    headers: &http::HeaderMap,
    body: &[u8],
) -> (u16, serde_json::Value) {
    let mut event: serde_json::Value =
        serde_json::from_str(include_str!("../data/function_url_event.json")).unwrap();
    for (name, value) in headers {
        event["headers"][name.as_str()] = serde_json::json!(value.to_str().unwrap());
    }
    event["rawPath"] = serde_json::json!(format!("/webhooks/{source}"));
    event["requestContext"]["http"]["path"] = serde_json::json!(format!("/webhooks/{source}"));
    event["body"] = serde_json::json!(std::str::from_utf8(body).unwrap());
    let request = lambda_http::request::from_str(&event.to_string()).unwrap();
    let app = inbox_core::receiver::router(receiver, false);
    let response = app.oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or_default())
}

pub fn key(id: &str) -> EventKey {
    EventKey::new(SourceName::parse("stripe").unwrap(), EventId::parse(id).unwrap())
}

/// A Stripe event `id` as a create writes it straight into the ledger: with `create_announced` where its message
/// went first, with `create` where not (a failed enqueue, a reconciled or replayed event).
pub fn record(id: &str) -> inbox_core::model::NewEvent {
    inbox_core::model::NewEvent {
        key: key(id),
        event_type: None,
        payload: bytes::Bytes::from(stripe_body(id)),
        payload_sha256: "h".into(),
        headers: vec![],
        origin: Default::default(),
        resent_bodies: Default::default(),
    }
}

/// Short polls for up to `wait` seconds: a long poll would hold the single-threaded emulator for everyone.
pub async fn receive(sqs: &aws_sdk_sqs::Client, url: &str, wait: i32) -> Vec<SqsMessage> {
    let until = Instant::now() + Duration::from_secs(u64::try_from(wait).unwrap_or(0));
    let out = loop {
        let out = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(0)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .unwrap();
        if !out.messages().is_empty() || Instant::now() >= until {
            break out;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    out.messages().iter().map(functions::as_delivered).collect()
}

pub fn batch(records: Vec<SqsMessage>) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = records;
    event
}

pub fn deadline() -> u64 {
    u64::try_from(inbox_core::time::now_ms() + 30_000).unwrap()
}

/// Plays the event source mapping once: one batch through the processor, reported failures left on the queue.
/// Returns how many messages it received.
pub async fn poll_once(stack: &Stack, wait: i32) -> usize {
    let records = receive(&stack.sqs, &stack.rt.resources.queue_url, wait).await;
    let n = records.len();
    if n == 0 {
        return 0;
    }
    process_batch(&stack.rt, &stack.sqs, records).await;
    n
}

/// The event source mapping's part for a batch already received: the processor of `rt`, then a delete of each
/// record it did not report as failed. Returns how many it reported.
pub async fn process_batch(rt: &Runtime, sqs: &aws_sdk_sqs::Client, records: Vec<SqsMessage>) -> usize {
    let response = functions::processor(rt, batch(records.clone()), deadline()).await;
    let failed: Vec<_> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect();
    for r in records
        .iter()
        .filter(|r| !failed.contains(r.message_id.as_ref().unwrap()))
    {
        delete_from(sqs, &rt.resources.queue_url, r).await;
    }
    failed.len()
}

/// Deletes a received message from the work queue, as the event source mapping does after a success.
pub async fn delete(stack: &Stack, record: &SqsMessage) {
    delete_from(&stack.sqs, &stack.rt.resources.queue_url, record).await;
}

pub async fn delete_from(sqs: &aws_sdk_sqs::Client, queue_url: &str, record: &SqsMessage) {
    sqs.delete_message()
        .queue_url(queue_url)
        .receipt_handle(record.receipt_handle.clone().unwrap())
        .send()
        .await
        .unwrap();
}

pub async fn status_of(stack: &Stack, id: &str) -> Option<(Status, u32)> {
    stack
        .rt
        .ledger
        .get(&key(id))
        .await
        .unwrap()
        .map(|e| (e.status, e.attempts))
}

/// Polls until the event has `want`, within `limit`.
pub async fn poll_until(stack: &Stack, id: &str, want: Status, limit: Duration) {
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

/// An object of the payload bucket: its key, its tags and its creation time (ms).
pub type Stored = (String, Vec<(String, String)>, i64);

/// The payload bucket's objects.
pub async fn bodies_in_s3(sdk: &aws_config::SdkConfig, stack: &Stack) -> Vec<Stored> {
    let s3 = aws_sdk_s3::Client::from_conf(inbox_core::aws::s3::S3Payloads::config(sdk));
    let bucket = stack.rt.resources.bucket.clone().unwrap();
    let listed = s3.list_objects_v2().bucket(&bucket).send().await.unwrap();
    let mut out = Vec::new();
    for object in listed.contents() {
        let key = object.key().unwrap().to_owned();
        let tags = s3
            .get_object_tagging()
            .bucket(&bucket)
            .key(&key)
            .send()
            .await
            .unwrap()
            .tag_set()
            .iter()
            .map(|t| (t.key().to_owned(), t.value().to_owned()))
            .collect();
        let created = object.last_modified().unwrap().to_millis().unwrap();
        out.push((key, tags, created));
    }
    out.sort();
    out
}

/// Every event record in the ledger (a consistent scan).
pub async fn all_events(stack: &Stack) -> Vec<Record> {
    let filter = ListFilter {
        status: None,
        source: None,
        limit: 10_000,
        ..Default::default()
    };
    stack.rt.ledger.list(&filter).await.unwrap()
}

/// The functions' clients, their DynamoDB and SQS calls counted by `counter`.
pub fn counted_clients(sdk: &aws_config::SdkConfig, counter: &CallCounter) -> Clients {
    Clients {
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
    }
}

/// Incompressible text of `n` bytes: a body the ledger must keep in S3.
pub fn noise(n: usize) -> String {
    let mut rng = StdRng::seed_from_u64(rand::random());
    (0..n)
        .map(|_| char::from(b'a' + rng.random_range(0..26u8)))
        .collect()
}
