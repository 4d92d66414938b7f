//! The exactly-once example (`wallet.rs`) run on the stack: each movement applied once through duplicates, races
//! and crashes, and an overdraft or a lost lease applying nothing.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use aws_lambda_events::event::sqs::SqsMessage;
use aws_sdk_dynamodb::types::AttributeValue;
use inbox_core::aws::functions;
use inbox_core::aws::init::QueueSettings;
use inbox_core::aws::sqs::SqsQueue;
use inbox_core::handlers::{Handler, HandlerError};
use inbox_core::model::{Event, Status};
use inbox_core::ports::{Claim, Ledger, Queue};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::stack::{
    all_events, batch, deadline, delete, deliver, emulator, key, poll_once, prefix, receive, record,
    stack_with, status_of, Stack,
};
use crate::wallet::{account_pk, Wallet};

/// What the test injects into the wallet and what it counts, per event id.
#[derive(Default)]
struct Injected {
    /// Events whose first run fails retryably before the transaction (a hiccup: the effect is not applied).
    fail_before: Mutex<HashSet<String>>,
    /// Events whose worker "dies" right after the commit, before answering: the machine hears an error instead of
    /// `Ok`, and SQS delivers the message again, as it does for a worker that never deleted it.
    crash_after: Mutex<HashSet<String>>,
    runs: Mutex<HashMap<String, usize>>,
    commits: Mutex<HashMap<String, usize>>,
}

/// The wallet handler with [`Injected`] failures around its transaction.
struct FlakyWallet {
    wallet: Wallet,
    queue: SqsQueue,
    injected: Arc<Injected>,
}

#[async_trait]
impl Handler for FlakyWallet {
    async fn handle(&self, event: &Event) -> Result<(), HandlerError> {
        let id = event.event_id.to_string();
        *self.injected.runs.lock().unwrap().entry(id.clone()).or_default() += 1;
        if self.injected.fail_before.lock().unwrap().remove(&id) {
            return Err(HandlerError::Retryable(
                "injected: a hiccup before the transaction".into(),
            ));
        }
        self.wallet.handle(event).await?;
        *self
            .injected
            .commits
            .lock()
            .unwrap()
            .entry(id.clone())
            .or_default() += 1;
        if self.injected.crash_after.lock().unwrap().remove(&id) {
            self.queue.enqueue(&event.key(), Duration::ZERO).await.unwrap();
            return Err(HandlerError::Retryable(
                "injected: crashed after the commit, before answering".into(),
            ));
        }
        Ok(())
    }

    fn settles_on_success(&self) -> bool {
        self.wallet.settles_on_success()
    }
}

/// A fresh accounts table (hash key `pk`, a string), as the wallet's documentation asks.
async fn accounts_table(sdk: &aws_config::SdkConfig) -> String {
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    };
    let name = format!("{}-accounts", prefix());
    aws_sdk_dynamodb::Client::new(sdk)
        .create_table()
        .table_name(&name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("pk")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .unwrap(),
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("pk")
                .key_type(KeyType::Hash)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    name
}

fn wallet_body(id: &str, credit: bool, account: &str, amount: u64) -> String {
    let kind = if credit { "wallet.credit" } else { "wallet.debit" };
    serde_json::json!({"id": id, "object": "event", "type": kind, "data": {"account": account, "amount": amount}})
        .to_string()
}

/// Plays the event source mapping with one batch handed to two invocations at once (SQS delivers at least
/// once); a message is deleted unless both report it failed. Short polls: a long poll would hold the
/// single-threaded emulator.
async fn poll_twice(stack: &Stack) -> usize {
    let records = receive(&stack.sqs, &stack.rt.resources.queue_url, 0).await;
    if records.is_empty() {
        return 0;
    }
    let (a, b) = tokio::join!(
        functions::processor(&stack.rt, batch(records.clone()), deadline()),
        functions::processor(&stack.rt, batch(records.clone()), deadline()),
    );
    let failed = |r: &SqsMessage, response: &aws_lambda_events::event::sqs::SqsBatchResponse| {
        response
            .batch_item_failures
            .iter()
            .any(|f| Some(&f.item_identifier) == r.message_id.as_ref())
    };
    for r in records.iter().filter(|r| !(failed(r, &a) && failed(r, &b))) {
        delete(stack, r).await;
    }
    records.len()
}

/// Short-polls until the event has `want`, within 20 s.
async fn settle_until(stack: &Stack, id: &str, want: Status) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if status_of(stack, id).await.map(|s| s.0) == Some(want) {
            return;
        }
        if poll_once(stack, 0).await == 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    panic!("{id} is {:?}, not {want:?}", status_of(stack, id).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_wallet_applies_each_movement_exactly_once_through_duplicates_races_and_crashes() {
    const ACCOUNTS: usize = 5;
    const EVENTS: usize = 50;
    const DELIVERIES: usize = 200;
    const AT_ONCE: usize = 32;
    const CRASHES: usize = 10;
    const HICCUPS: usize = 5;
    const OPENING: i128 = 5_000;
    let Some(sdk) = emulator().await else { return };
    let started = Instant::now();
    let seed: u64 = rand::random();
    eprintln!("wallet test seed: {seed}");
    let mut rng = StdRng::seed_from_u64(seed);

    // GIVEN accounts with opening balances, and 50 credits and debits of 1..=400 over them (at most 10 debits an
    // account: no order of them overdraws)
    let accounts = accounts_table(&sdk).await;
    let ddb = aws_sdk_dynamodb::Client::new(&sdk);
    let mut expected = HashMap::new();
    for a in 0..ACCOUNTS {
        let account = format!("acc_{a}");
        ddb.put_item()
            .table_name(&accounts)
            .item("pk", AttributeValue::S(account_pk(&account)))
            .item("balance", AttributeValue::N(OPENING.to_string()))
            .send()
            .await
            .unwrap();
        expected.insert(account, OPENING);
    }
    let mut bodies = Vec::new();
    for i in 0..EVENTS {
        let account = format!("acc_{}", i % ACCOUNTS);
        let credit = rng.random_bool(0.4);
        let amount: u64 = rng.random_range(1..=400);
        let delta = i128::from(amount);
        *expected.get_mut(&account).unwrap() += if credit { delta } else { -delta };
        bodies.push((
            format!("evt_w{i:02}"),
            wallet_body(&format!("evt_w{i:02}"), credit, &account, amount),
        ));
    }
    // AND failures injected: a crash after the commit on 10 events, a hiccup before it on 5 others
    let mut picked: Vec<usize> = (0..EVENTS).collect();
    picked.shuffle(&mut rng);
    let injected = Arc::new(Injected::default());
    let crashed: HashSet<String> = picked[..CRASHES].iter().map(|&i| bodies[i].0.clone()).collect();
    let hiccuped: HashSet<String> = picked[CRASHES..CRASHES + HICCUPS]
        .iter()
        .map(|&i| bodies[i].0.clone())
        .collect();
    injected.crash_after.lock().unwrap().clone_from(&crashed);
    injected.fail_before.lock().unwrap().clone_from(&hiccuped);
    let settings = QueueSettings {
        max_receive_count: 25,
        visibility_timeout: 30,
    };
    let retry = "base = \"100ms\"\ncap = \"500ms\"";
    let stack = Arc::new(
        stack_with(
            &sdk,
            settings,
            retry,
            "wallet",
            |registry, clients, resources, config| {
                let wallet = Wallet::new(
                    clients.dynamodb.clone(),
                    &resources.table,
                    &accounts,
                    config.retention,
                );
                let queue = SqsQueue::new(clients.sqs.clone(), resources.queue_url.clone());
                let flaky = FlakyWallet {
                    wallet,
                    queue,
                    injected: injected.clone(),
                };
                registry.register("wallet", Arc::new(flaky))
            },
        )
        .await,
    );
    let setup = started.elapsed();

    // WHEN 200 deliveries (every event, then duplicates with the same body) arrive in random order, up to 32 at a
    // time, through the receiver
    let mut order: Vec<usize> = (0..EVENTS).collect();
    order.extend((EVENTS..DELIVERIES).map(|_| rng.random_range(0..EVENTS)));
    order.shuffle(&mut rng);
    let delivered = AtomicBool::new(false);
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most_in_flight = Arc::new(AtomicUsize::new(0));
    let deliveries = async {
        let slots = Arc::new(Semaphore::new(AT_ONCE));
        let mut tasks = JoinSet::new();
        for &i in &order {
            let permit = slots.clone().acquire_owned().await.unwrap();
            let (stack, body) = (stack.clone(), bodies[i].1.clone());
            let (in_flight, most) = (in_flight.clone(), most_in_flight.clone());
            tasks.spawn(async move {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                let answer = deliver(&stack, &body).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                drop(permit);
                answer
            });
        }
        let mut answers = Vec::new();
        while let Some(answer) = tasks.join_next().await {
            answers.push(answer.unwrap());
        }
        delivered.store(true, Ordering::SeqCst);
        answers
    };
    // AND meanwhile two pollers race the processor over the queue (every third batch of the second one handed to
    // two invocations at once), with the sweeper as the fallback when the queue stays empty
    let processing = async {
        let (mut rounds, mut sweeps, mut idle_since) = (0u32, 0u32, None::<Instant>);
        loop {
            assert!(
                started.elapsed() < Duration::from_secs(55),
                "not every event COMPLETED in time: {:?}",
                all_events(&stack)
                    .await
                    .iter()
                    .filter(|e| e.status != Status::Completed)
                    .map(|e| (e.event_id.to_string(), e.status, e.last_error.clone()))
                    .collect::<Vec<_>>()
            );
            rounds += 1;
            let (a, b) = tokio::join!(poll_once(&stack, 0), async {
                if rounds % 3 == 0 {
                    poll_twice(&stack).await
                } else {
                    poll_once(&stack, 0).await
                }
            });
            if a + b > 0 {
                idle_since = None;
                continue;
            }
            if delivered.load(Ordering::SeqCst) {
                let events = all_events(&stack).await;
                if events.len() == EVENTS && events.iter().all(|e| e.status == Status::Completed) {
                    break;
                }
                let idle = *idle_since.get_or_insert_with(Instant::now);
                if idle.elapsed() > Duration::from_secs(2) {
                    functions::sweeper(&stack.rt).await.unwrap();
                    sweeps += 1;
                    idle_since = None;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        (rounds, sweeps)
    };
    let (answers, (rounds, sweeps)) = tokio::join!(deliveries, processing);

    // THEN every delivery was answered 200, and exactly one per event was accepted
    assert_eq!(answers.len(), DELIVERIES);
    assert!(answers.iter().all(|(status, _)| *status == 200), "{answers:?}");
    let accepted = answers
        .iter()
        .filter(|(_, body)| body["status"] == "accepted")
        .count();
    assert_eq!(accepted, EVENTS, "one accepted delivery per event");
    assert!(answers
        .iter()
        .all(|(_, body)| body["status"] == "accepted" || body["status"] == "duplicate"));
    // AND the ledger holds one record per event, every one COMPLETED
    let events = all_events(&stack).await;
    let ids: HashSet<String> = events.iter().map(|e| e.event_id.to_string()).collect();
    assert_eq!(events.len(), EVENTS, "one record per event");
    assert_eq!(ids, bodies.iter().map(|b| b.0.clone()).collect::<HashSet<_>>());
    assert!(events.iter().all(|e| e.status == Status::Completed));
    // AND each movement was committed exactly once; a crashed event never ran again (its redelivery found it
    // done), a hiccuped one ran once more
    let commits = injected.commits.lock().unwrap().clone();
    let runs = injected.runs.lock().unwrap().clone();
    for id in &ids {
        assert_eq!(
            commits.get(id),
            Some(&1),
            "{id} committed {:?} times",
            commits.get(id)
        );
        let want = if hiccuped.contains(id) { 2 } else { 1 };
        assert_eq!(runs.get(id), Some(&want), "{id} ran {:?} times", runs.get(id));
    }
    assert!(
        injected.crash_after.lock().unwrap().is_empty(),
        "every crash was injected"
    );
    assert!(
        injected.fail_before.lock().unwrap().is_empty(),
        "every hiccup was injected"
    );
    // AND every balance is exactly right, and nothing else was written to the accounts table
    let wallet = Wallet::new(
        ddb.clone(),
        &stack.rt.resources.table,
        &accounts,
        stack.rt.config.retention,
    );
    for (account, want) in &expected {
        assert_eq!(wallet.balance(account).await.unwrap(), *want, "{account}");
    }
    let items = ddb
        .scan()
        .table_name(&accounts)
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    assert_eq!(items.count(), i32::try_from(ACCOUNTS).unwrap());
    eprintln!(
        "wallet: {DELIVERIES} deliveries ({} duplicates, up to {} at once) of {EVENTS} events over {ACCOUNTS} \
         accounts; {CRASHES} crashes after the commit, {HICCUPS} hiccups before it; {rounds} poll rounds, \
         {sweeps} sweeps; {ACCOUNTS} balances exact; setup {setup:?}, total {:?}",
        DELIVERIES - EVENTS,
        most_in_flight.load(Ordering::SeqCst),
        started.elapsed()
    );
}

#[tokio::test]
async fn the_wallet_refuses_an_overdraft_and_a_lost_lease_without_applying_anything() {
    let Some(sdk) = emulator().await else { return };
    let accounts = accounts_table(&sdk).await;
    let stack = stack_with(
        &sdk,
        QueueSettings::default(),
        "",
        "wallet",
        |registry, clients, resources, config| {
            let wallet = Wallet::new(
                clients.dynamodb.clone(),
                &resources.table,
                &accounts,
                config.retention,
            );
            registry.register("wallet", Arc::new(wallet))
        },
    )
    .await;
    let wallet = Wallet::new(
        stack.rt.clients.dynamodb.clone(),
        &stack.rt.resources.table,
        &accounts,
        stack.rt.config.retention,
    );

    // GIVEN an account credited 100 through the receiver and the processor
    let (status, _) = deliver(&stack, &wallet_body("evt_fund", true, "acc_x", 100)).await;
    assert_eq!(status, 200);
    settle_until(&stack, "evt_fund", Status::Completed).await;
    assert_eq!(wallet.balance("acc_x").await.unwrap(), 100);
    // AND the wallet's settle is the ledger's: no lease left, the retention's expiry
    let funded = stack.rt.ledger.get(&key("evt_fund")).await.unwrap().unwrap();
    let completed_at = funded.completed_at.unwrap();
    let retention = i64::try_from(stack.rt.config.retention.as_millis()).unwrap();
    assert_eq!(
        funded.expires_at,
        Some((completed_at + retention).div_euclid(1000) * 1000)
    );
    assert_eq!((funded.lease_owner.clone(), funded.lease_until), (None, None));

    // WHEN a debit of 250 arrives, THEN it is DEAD at once and the balance is unchanged
    deliver(&stack, &wallet_body("evt_overdraft", false, "acc_x", 250)).await;
    settle_until(&stack, "evt_overdraft", Status::Dead).await;
    let dead = stack.rt.ledger.get(&key("evt_overdraft")).await.unwrap().unwrap();
    assert!(
        dead.last_error.as_deref().unwrap().contains("insufficient funds"),
        "{:?}",
        dead.last_error
    );
    assert_eq!(dead.attempts, 1);
    assert_eq!(wallet.balance("acc_x").await.unwrap(), 100);

    // WHEN a worker whose lease ran out runs a debit of 30 after another worker claimed it
    let ledger = stack.rt.ledger.clone();
    ledger
        .create(inbox_core::model::NewEvent {
            event_type: Some("wallet.debit".into()),
            payload: bytes::Bytes::from(wallet_body("evt_stale", false, "acc_x", 30)),
            ..record("evt_stale")
        })
        .await
        .unwrap();
    let Claim::Claimed(late) = ledger
        .claim(&key("evt_stale"), "w1", Duration::ZERO)
        .await
        .unwrap()
    else {
        panic!("w1 did not claim")
    };
    let Claim::Claimed(owner) = ledger
        .claim(&key("evt_stale"), "w2", Duration::from_secs(60))
        .await
        .unwrap()
    else {
        panic!("w2 did not claim the expired lease")
    };
    // THEN nothing is applied, and the answer is retryable "lease lost" (the lease's owner finishes the event)
    match wallet.handle(&late).await {
        Err(HandlerError::Retryable(e)) => assert!(e.contains("lease lost"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(wallet.balance("acc_x").await.unwrap(), 100);
    assert_eq!(
        status_of(&stack, "evt_stale").await,
        Some((Status::Processing, 2))
    );
    // AND the owner applies it once; running it again under the spent lease applies nothing
    wallet.handle(&owner).await.unwrap();
    assert_eq!(wallet.balance("acc_x").await.unwrap(), 70);
    assert_eq!(status_of(&stack, "evt_stale").await.unwrap().0, Status::Completed);
    match wallet.handle(&owner).await {
        Err(HandlerError::Retryable(e)) => assert!(e.contains("lease lost"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(wallet.balance("acc_x").await.unwrap(), 70);
}
