//! The duplicate storm on AWS, through the receiver router in-process (`INBOX_AWS_STORM` sets its size).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use inbox_core::aws::init::QueueSettings;
use inbox_core::model::Status;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::stack::{all_events, deliver, emulator, poll_once, stack, stripe_body};

/// The duplicate storm on AWS: 300 deliveries of 30 ids in the suite (`INBOX_AWS_STORM="10000 1000 64"` for
/// the full size), 8 at a time in random order, through the receiver router in-process, processed meanwhile.
/// THEN every answer is 200 (30 accepted), 30 records all COMPLETED, and the handler ran once per id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn duplicate_storm_through_the_receiver_makes_one_effect_per_event() {
    // Small among the other tests (the emulator serves one request at a time); the full storm of issues 5 and 14,
    // INBOX_AWS_STORM="10000 1000 64" (deliveries, ids, at a time), is a step of its own in ./test.sh.
    let size: Vec<usize> = std::env::var("INBOX_AWS_STORM")
        .unwrap_or_else(|_| "300 30 8".into())
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    let [deliveries, ids, at_once] = size[..] else {
        panic!("INBOX_AWS_STORM is \"DELIVERIES IDS AT_ONCE\"")
    };
    let Some(sdk) = emulator().await else { return };
    let started = Instant::now();
    let mut stack = stack(&sdk, QueueSettings::default(), "").await;
    // The receiver's grace as deployed (the default 30 s), not the 0 the sweeper tests use: a duplicate of an
    // event RECEIVED for less than that sends no message.
    stack.rt.config.sweeper.grace = Duration::from_secs(30);
    let stack = Arc::new(stack);
    let mut order: Vec<usize> = (0..deliveries).map(|d| d % ids).collect();
    order.shuffle(&mut StdRng::seed_from_u64(rand::random()));
    // The event source mapping polls while the storm goes on, as on AWS. (It also keeps the emulator's queue short:
    // moto counts every message of a queue at each SendMessage, so a send to a queue of 1,000 messages costs it
    // about 40 ms.)
    let polling = Arc::new(AtomicBool::new(true));
    let poller = {
        let (stack, polling) = (stack.clone(), polling.clone());
        tokio::spawn(async move {
            while polling.load(Ordering::SeqCst) {
                if poll_once(&stack, 0).await == 0 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        })
    };
    let gate = Arc::new(Semaphore::new(at_once));
    let mut tasks = JoinSet::new();
    for i in order {
        let (stack, gate) = (stack.clone(), gate.clone());
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await.unwrap();
            let (status, answer) = deliver(&stack, &stripe_body(&format!("evt_storm_{i:03}"))).await;
            (status, answer["status"].as_str().unwrap_or_default().to_owned())
        });
    }
    let mut answers: HashMap<(u16, String), usize> = HashMap::new();
    while let Some(done) = tasks.join_next().await {
        *answers.entry(done.unwrap()).or_default() += 1;
    }
    let sent_in = started.elapsed();
    polling.store(false, Ordering::SeqCst);
    poller.await.unwrap();
    // Messages: one per event, and one more only where two first deliveries of an id raced past the read. (The
    // processor sends none: a failure holds its message back, it does not send another.)
    let messages = stack.counter.take().get("sqs.SendMessage").copied().unwrap_or(0);
    assert!(
        (ids..2 * ids).contains(&messages),
        "{messages} messages for {ids} events"
    );
    assert_eq!(
        answers.get(&(200, "accepted".to_owned())),
        Some(&ids),
        "{answers:?}"
    );
    let ok: usize = answers
        .iter()
        .filter(|((s, _), _)| *s == 200)
        .map(|(_, n)| n)
        .sum();
    assert_eq!(ok, deliveries, "{answers:?}");
    // The emulator serves one request at a time; a processed event costs it about four (the full storm took 355 s
    // past its deliveries once, on a machine busy with builds).
    let limit = Duration::from_secs(60) + Duration::from_secs(1) * u32::try_from(ids).unwrap_or(u32::MAX);
    let until = Instant::now() + limit;
    loop {
        let events = all_events(&stack).await;
        if events.len() == ids && events.iter().all(|e| e.status == Status::Completed) {
            break;
        }
        assert!(Instant::now() < until, "not all COMPLETED in {limit:?}");
        if poll_once(&stack, 0).await == 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let runs = stack.switch.runs.lock().unwrap().clone();
    assert_eq!(runs.len(), ids);
    assert!(runs.values().all(|n| *n == 1), "{runs:?}");
    eprintln!(
        "aws storm: {deliveries} deliveries of {ids} ids, {at_once} at a time, sent in {sent_in:?}; {ids} records, \
         {ids} effects, {messages} messages ({:.2} per event); all COMPLETED at {:?}",
        messages as f64 / ids as f64,
        started.elapsed()
    );
}
