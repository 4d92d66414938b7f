//! The state machine over every store (`memory::`, `sqlite::`, `dynamodb::` with the `aws` feature), with a scripted
//! handler, a recording alarm and a recording queue (the fakes are the handler, alarm and queue; the stores are
//! real), on a clock the tests move: the machine's and the store's one clock. Only the handler's timeout runs on
//! tokio's clock, and the alarm task beside the work is waited for.
#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use inbox_core::clock::{Clock, ManualClock, SeededRandom, World};
use inbox_core::config::Config;
use inbox_core::contract::{eventually, Harness};
use inbox_core::handlers::{http_client, Handler, HandlerError, Registry};
use inbox_core::machine::SweepReport;
use inbox_core::machine::{Dropped, Machine, Notifier, NotifyError, Outcome};
use inbox_core::metrics::Metrics;
use inbox_core::model::{Event, EventId, EventKey, NewEvent, Record, SourceName, Status};
use inbox_core::ports::Store;
use inbox_core::ports::{MarkDead, Queue, QueueError, Settlement};
use inbox_core::secrets::LocalSecrets;
use inbox_core::source::Sources;

use crate::ledger::every_store;

/// Answers from a script, then Ok; counts runs.
#[derive(Default)]
struct Script {
    answers: Mutex<VecDeque<Result<(), HandlerError>>>,
    runs: Mutex<Vec<u32>>,
}

#[async_trait]
impl Handler for Script {
    async fn handle(&self, event: &Event) -> Result<(), HandlerError> {
        self.runs.lock().unwrap().push(event.attempts);
        self.answers.lock().unwrap().pop_front().unwrap_or(Ok(()))
    }
}

#[derive(Default)]
struct Alarms {
    sent: Mutex<Vec<String>>,
    fail: Mutex<bool>,
    tried: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl Notifier for Alarms {
    async fn dead(&self, event: &Record) -> Result<(), NotifyError> {
        self.tried.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if *self.fail.lock().unwrap() {
            return Err(NotifyError("notify_url down".into()));
        }
        self.sent.lock().unwrap().push(event.event_id.to_string());
        Ok(())
    }
}

#[derive(Default)]
struct Recorded(Mutex<Vec<EventKey>>);

#[async_trait]
impl Queue for Recorded {
    async fn enqueue(&self, key: &EventKey, _delay: Duration) -> Result<(), QueueError> {
        self.0.lock().unwrap().push(key.clone());
        Ok(())
    }
    async fn announce(&self, key: &EventKey, _until: i64) -> Result<(), QueueError> {
        self.enqueue(key, Duration::ZERO).await
    }
    async fn depth(&self) -> Result<Option<inbox_core::ports::QueueDepth>, QueueError> {
        Ok(None)
    }
}

struct Rig {
    store: Arc<dyn Store>,
    machine: Machine,
    script: Arc<Script>,
    alarms: Arc<Alarms>,
    metrics: Arc<Metrics>,
    /// The machine's and the store's clock: moved, not slept through.
    world: World,
    clock: Arc<ManualClock>,
}

async fn rig(h: &dyn Harness, max_attempts: u32, grace: Duration) -> Rig {
    rig_aged(h, max_attempts, grace, "24h").await
}

/// A rig whose retry budget also ends `max_age` after the budget's start.
async fn rig_aged(h: &dyn Harness, max_attempts: u32, grace: Duration, max_age: &str) -> Rig {
    std::env::set_var("MACHINE_TEST_SECRET", "s3cret");
    let config = Config::from_toml(&format!(
        "[retry]\nbase = \"10ms\"\ncap = \"20ms\"\nmax_attempts = {max_attempts}\nmax_age = \"{max_age}\"\n\
         [sources.src]\nscheme = \"github\"\nsecrets = [\"env:MACHINE_TEST_SECRET\"]\n\
         handler = {{ kind = \"custom\", name = \"script\", timeout = \"1s\" }}\n"
    ))
    .unwrap();
    let script = Arc::new(Script::default());
    let registry = Registry::new(http_client()).register("script", script.clone());
    let sources = Sources::build(&config, Some(&LocalSecrets), &registry)
        .await
        .unwrap();
    let store = h.open(grace).await;
    let clock = h.clock();
    let world = World {
        clock: clock.clone(),
        random: SeededRandom::new(46),
    };
    let alarms = Arc::new(Alarms::default());
    let metrics = Arc::new(Metrics::new(sources.names()));
    let machine = Machine::new(
        store.clone(),
        store.clone(),
        sources,
        metrics.clone(),
        alarms.clone(),
        Duration::from_secs(3600),
        "test",
    )
    .with_world(world.clone());
    Rig {
        store,
        machine,
        script,
        alarms,
        metrics,
        world,
        clock,
    }
}

/// Sweeps until `found` holds of what the sweeps found together, where the store's index may lag its writes
/// ([`Capabilities::eventually_consistent_index`]), for ten seconds at most; once elsewhere.
///
/// [`Capabilities::eventually_consistent_index`]: inbox_core::ports::Capabilities::eventually_consistent_index
async fn swept(rig: &Rig, queue: &Recorded, found: impl Fn(&SweepReport) -> bool) -> SweepReport {
    let mut total = rig.machine.sweep(queue, 100).await.unwrap();
    if !rig.store.capabilities().eventually_consistent_index {
        return total;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !found(&total) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let more = rig.machine.sweep(queue, 100).await.unwrap();
        total.received += more.received;
        total.expired_leases += more.expired_leases;
        total.overdue_failed += more.overdue_failed;
        total.alarms += more.alarms;
        total.enqueue_errors += more.enqueue_errors;
    }
    total
}

/// Another machine over the rig's store, script and alarms, named `owner`, on `world`.
async fn script_machine(rig: &Rig, owner: &str, world: World) -> Machine {
    let sources = Sources::build(
        &Config::from_toml(
            "[sources.src]\nscheme = \"github\"\nsecrets = [\"env:MACHINE_TEST_SECRET\"]\n\
             handler = { kind = \"custom\", name = \"script\", timeout = \"1s\" }\n",
        )
        .unwrap(),
        Some(&LocalSecrets),
        &Registry::new(http_client()).register("script", rig.script.clone()),
    )
    .await
    .unwrap();
    Machine::new(
        rig.store.clone(),
        rig.store.clone(),
        sources,
        rig.metrics.clone(),
        rig.alarms.clone(),
        Duration::from_secs(3600),
        owner,
    )
    .with_world(world)
}

fn key(id: &str) -> EventKey {
    EventKey::new(SourceName::parse("src").unwrap(), EventId::parse(id).unwrap())
}

async fn received(rig: &Rig, id: &str) -> EventKey {
    let k = key(id);
    let e = NewEvent {
        key: k.clone(),
        event_type: None,
        payload: bytes::Bytes::from_static(b"{}"),
        payload_sha256: "h".into(),
        headers: vec![],
        origin: Default::default(),
        resent_bodies: Default::default(),
    };
    rig.store.create(e).await.unwrap();
    k
}

const LEASE: Duration = Duration::from_secs(30);

async fn status(rig: &Rig, k: &EventKey) -> (Status, u32) {
    let e = rig.store.get(k).await.unwrap().unwrap();
    (e.status, e.attempts)
}

every_store!(
    a_machine_without_handlers_leaves_the_event_for_a_worker,
    success_completes_and_a_second_delivery_runs_nothing,
    retryable_failures_back_off_then_complete,
    permanent_failure_is_dead_at_once_with_one_alarm,
    the_retry_budget_ends_in_dead,
    a_worker_that_crashed_mid_handler_is_finished_by_the_sweeper,
    a_crash_loop_spends_the_budget_without_running_again,
    lost_enqueues_and_lost_alarms_are_recovered_by_the_sweeper,
    a_replay_after_max_age_runs_instead_of_dying,
    a_record_without_its_body_is_buried_not_run,
    handler_error_text_is_cut_to_a_bounded_length,
    a_failed_alarm_waits_its_own_backoff_beside_the_work,
    a_resent_event_is_not_sent_again_by_the_next_sweep,
    the_sweep_reads_due_times_on_the_stores_clock_not_the_machines,
);

/// Sources built for receiving alone (the receiver function's) have keys but no handler: a machine over them
/// must not claim, so the event stays RECEIVED, with no attempt counted, for a worker that has the handler.
async fn a_machine_without_handlers_leaves_the_event_for_a_worker(h: &dyn Harness) {
    let rig = rig(h, 5, Duration::from_secs(60)).await;
    let k = received(&rig, "e0").await;
    let config = Config::from_toml(
        "[sources.src]\nscheme = \"github\"\nsecrets = [\"env:MACHINE_TEST_SECRET\"]\n\
         handler = { kind = \"forward\", url = \"http://127.0.0.1:9/\" }\n",
    )
    .unwrap();
    let receiving = Sources::receiving(&config, &LocalSecrets).await.unwrap();
    let src = receiving.get("src").unwrap();
    assert_eq!(
        src.credentials.secrets.len(),
        1,
        "the receiver still verifies signatures"
    );
    assert!(src.handler.is_none());
    let machine = Machine::new(
        rig.store.clone(),
        rig.store.clone(),
        receiving,
        rig.metrics.clone(),
        rig.alarms.clone(),
        Duration::from_secs(3600),
        "receiver",
    )
    .with_world(rig.world.clone());
    assert_eq!(
        machine.process(&k, LEASE).await.unwrap(),
        Outcome::Dropped(Dropped::NoHandler)
    );
    assert_eq!(status(&rig, &k).await, (Status::Received, 0));
    assert_eq!(rig.machine.process(&k, LEASE).await.unwrap(), Outcome::Completed);
    assert_eq!(status(&rig, &k).await, (Status::Completed, 1));
}

async fn success_completes_and_a_second_delivery_runs_nothing(h: &dyn Harness) {
    let rig = rig(h, 5, Duration::from_secs(60)).await;
    let k = received(&rig, "e1").await;
    assert_eq!(rig.machine.process(&k, LEASE).await.unwrap(), Outcome::Completed);
    assert_eq!(
        rig.machine.process(&k, LEASE).await.unwrap(),
        Outcome::Dropped(Dropped::Done)
    );
    assert_eq!(*rig.script.runs.lock().unwrap(), [1]);
    assert_eq!(status(&rig, &k).await, (Status::Completed, 1));
    assert_eq!(rig.metrics.total("completed"), 1);
}

async fn retryable_failures_back_off_then_complete(h: &dyn Harness) {
    let rig = rig(h, 5, Duration::from_secs(60)).await;
    rig.script.answers.lock().unwrap().extend([
        Err(HandlerError::Retryable("HTTP 503".into())),
        Err(HandlerError::Retryable("HTTP 503".into())),
    ]);
    let k = received(&rig, "e1").await;
    let Outcome::Retry(d) = rig.machine.process(&k, LEASE).await.unwrap() else {
        panic!("no retry")
    };
    assert!(d <= Duration::from_millis(10), "attempt 1 backs off at most base");
    let e = rig.store.get(&k).await.unwrap().unwrap();
    assert_eq!(
        (e.status, e.last_error.as_deref()),
        (Status::Failed, Some("HTTP 503"))
    );
    rig.clock.advance(Duration::from_millis(30));
    assert!(matches!(
        rig.machine.process(&k, LEASE).await.unwrap(),
        Outcome::Retry(_)
    ));
    rig.clock.advance(Duration::from_millis(30));
    assert_eq!(rig.machine.process(&k, LEASE).await.unwrap(), Outcome::Completed);
    assert_eq!(*rig.script.runs.lock().unwrap(), [1, 2, 3]);
    assert_eq!(status(&rig, &k).await, (Status::Completed, 3));
}

async fn permanent_failure_is_dead_at_once_with_one_alarm(h: &dyn Harness) {
    let rig = rig(h, 5, Duration::from_secs(60)).await;
    rig.script
        .answers
        .lock()
        .unwrap()
        .push_back(Err(HandlerError::Permanent("HTTP 400".into())));
    let k = received(&rig, "e1").await;
    assert_eq!(rig.machine.process(&k, LEASE).await.unwrap(), Outcome::Dead);
    assert_eq!(status(&rig, &k).await, (Status::Dead, 1));
    assert_eq!(*rig.alarms.sent.lock().unwrap(), ["e1"]);
    assert!(rig.store.get(&k).await.unwrap().unwrap().notified_at.is_some());
    // The DLQ path for the same event: already dead and notified, no second alarm.
    let buried = rig.machine.mark_dead(&k, "redriven").await.unwrap();
    assert!(
        matches!(&buried, MarkDead::AlreadyDead(e) if e.notified_at.is_some()),
        "{buried:?}"
    );
    assert_eq!(rig.alarms.sent.lock().unwrap().len(), 1);
}

async fn the_retry_budget_ends_in_dead(h: &dyn Harness) {
    let rig = rig(h, 2, Duration::from_secs(60)).await;
    rig.script.answers.lock().unwrap().extend([
        Err(HandlerError::Retryable("a".into())),
        Err(HandlerError::Retryable("b".into())),
        Err(HandlerError::Retryable("c".into())),
    ]);
    let k = received(&rig, "e1").await;
    assert!(matches!(
        rig.machine.process(&k, LEASE).await.unwrap(),
        Outcome::Retry(_)
    ));
    rig.clock.advance(Duration::from_millis(30));
    assert_eq!(rig.machine.process(&k, LEASE).await.unwrap(), Outcome::Dead);
    let e = rig.store.get(&k).await.unwrap().unwrap();
    assert_eq!(e.status, Status::Dead);
    assert!(e
        .last_error
        .clone()
        .unwrap()
        .contains("retry budget spent after 2 attempts: b"));
}

async fn a_worker_that_crashed_mid_handler_is_finished_by_the_sweeper(h: &dyn Harness) {
    let rig = rig(h, 5, Duration::ZERO).await;
    let k = received(&rig, "e1").await;
    // GIVEN a worker that claimed the event and died (its lease runs out, nothing settles)
    rig.store
        .claim(&k, "crashed-worker", Duration::from_millis(1))
        .await
        .unwrap();
    rig.clock.advance(Duration::from_millis(5));
    // WHEN the sweeper runs THEN it re-sends the event, and processing it completes it. (Where the queue vouches
    // for a claimed event, DynamoDB's beside SQS, the sweeper leaves it: its message comes back by itself.)
    let vouched = rig.store.capabilities().trusts_announcements;
    let queue = Recorded::default();
    let report = swept(&rig, &queue, |r| vouched || r.expired_leases >= 1).await;
    if vouched {
        assert_eq!(report, SweepReport::default());
        assert!(queue.0.lock().unwrap().is_empty());
    } else {
        assert_eq!(report.expired_leases, 1);
        assert_eq!(*queue.0.lock().unwrap(), std::slice::from_ref(&k));
    }
    assert_eq!(rig.machine.process(&k, LEASE).await.unwrap(), Outcome::Completed);
    assert_eq!(status(&rig, &k).await, (Status::Completed, 2));
}

async fn a_crash_loop_spends_the_budget_without_running_again(h: &dyn Harness) {
    let rig = rig(h, 2, Duration::ZERO).await;
    let k = received(&rig, "poison").await;
    for owner in ["w1", "w2"] {
        rig.store.claim(&k, owner, Duration::ZERO).await.unwrap();
        rig.clock.advance(Duration::from_millis(2));
    }
    assert_eq!(rig.machine.process(&k, LEASE).await.unwrap(), Outcome::Dead);
    assert!(
        rig.script.runs.lock().unwrap().is_empty(),
        "a spent budget runs nothing"
    );
}

async fn lost_enqueues_and_lost_alarms_are_recovered_by_the_sweeper(h: &dyn Harness) {
    let rig = rig(h, 5, Duration::ZERO).await;
    let k = received(&rig, "never-enqueued").await;
    let failed = received(&rig, "lost-message").await;
    rig.store.claim(&failed, "w", LEASE).await.unwrap();
    let settle = Settlement::Failed {
        error: "x".into(),
        delay: Duration::ZERO,
    };
    rig.store.settle(&failed, "w", settle).await.unwrap();
    *rig.alarms.fail.lock().unwrap() = true;
    rig.script
        .answers
        .lock()
        .unwrap()
        .push_back(Err(HandlerError::Permanent("gone".into())));
    let dead = received(&rig, "alarm-lost").await;
    assert_eq!(rig.machine.process(&dead, LEASE).await.unwrap(), Outcome::Dead);
    assert!(rig.alarms.sent.lock().unwrap().is_empty());

    *rig.alarms.fail.lock().unwrap() = false;
    rig.clock.advance(Duration::from_millis(5));
    let queue = Recorded::default();
    let report = swept(&rig, &queue, |r| {
        (r.received, r.overdue_failed, r.alarms) == (1, 1, 1)
    })
    .await;
    assert_eq!((report.received, report.overdue_failed, report.alarms), (1, 1, 1));
    let mut sent: Vec<_> = queue
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|k| k.event_id.to_string())
        .collect();
    sent.sort();
    assert_eq!(sent, [failed.event_id.to_string(), k.event_id.to_string()]);
    assert_eq!(*rig.alarms.sent.lock().unwrap(), ["alarm-lost"]);
    let again = rig.machine.sweep(&Recorded::default(), 100).await.unwrap();
    assert_eq!(again.alarms, 0, "an alarm goes out once");
}

/// A replay later than `max_age` went DEAD at its first claim, without running, and alarmed
/// a second time: the age budget counted from `received_at`.
async fn a_replay_after_max_age_runs_instead_of_dying(h: &dyn Harness) {
    let rig = rig_aged(h, 5, Duration::from_secs(60), "1s").await;
    rig.script
        .answers
        .lock()
        .unwrap()
        .push_back(Err(HandlerError::Permanent("HTTP 400".into())));
    let k = received(&rig, "e1").await;
    assert_eq!(rig.machine.process(&k, LEASE).await.unwrap(), Outcome::Dead);
    // GIVEN the event is older than max_age WHEN an operator replays it THEN it runs and completes.
    rig.clock.advance(Duration::from_millis(1100));
    assert_eq!(
        rig.store.replay(&k, false).await.unwrap(),
        inbox_core::ports::Replay::Replayed
    );
    assert_eq!(rig.machine.process(&k, LEASE).await.unwrap(), Outcome::Completed);
    assert_eq!(*rig.script.runs.lock().unwrap(), [1, 1]);
    assert_eq!(rig.alarms.sent.lock().unwrap().len(), 1, "a second alarm");
}

/// A record whose body is gone must never run with an empty body: it is settled DEAD by the
/// worker that claimed it, and alarmed.
async fn a_record_without_its_body_is_buried_not_run(h: &dyn Harness) {
    let rig = rig(h, 5, Duration::from_secs(60)).await;
    let k = received(&rig, "e1").await;
    h.lose_body(&k).await;
    assert_eq!(rig.machine.process(&k, LEASE).await.unwrap(), Outcome::Dead);
    assert!(
        rig.script.runs.lock().unwrap().is_empty(),
        "ran with an empty body"
    );
    assert_eq!(*rig.alarms.sent.lock().unwrap(), ["e1"]);
    let dead = inbox_core::ports::ListFilter {
        status: Some(Status::Dead),
        source: None,
        limit: 10,
        ..Default::default()
    };
    let listed = eventually(
        &*rig.store,
        || rig.store.list(&dead),
        |l| l.as_ref().is_ok_and(|l| !l.is_empty()),
    )
    .await
    .unwrap();
    let e = &listed[0];
    // The error says what is missing, in the store's words (the body, or on DynamoDB the item's payload).
    let error = e.last_error.as_deref().unwrap_or("");
    assert!(
        error.contains("body") || error.contains("payload is missing"),
        "{e:?}"
    );
}

/// A handler's error text (a whole HTML page) went unbounded into `last_error`.
async fn handler_error_text_is_cut_to_a_bounded_length(h: &dyn Harness) {
    let rig = rig(h, 5, Duration::from_secs(60)).await;
    rig.script
        .answers
        .lock()
        .unwrap()
        .push_back(Err(HandlerError::Retryable("<html>".repeat(50_000))));
    let k = received(&rig, "e1").await;
    assert!(matches!(
        rig.machine.process(&k, LEASE).await.unwrap(),
        Outcome::Retry(_)
    ));
    let e = rig.store.get(&k).await.unwrap().unwrap();
    let error = e.last_error.clone().unwrap();
    assert!(
        error.len() <= inbox_core::rules::MAX_ERROR_BYTES,
        "{}",
        error.len()
    );
    assert!(error.starts_with("<html>"));
}

/// A failed alarm kept its due time, so every sweep tried it again at once (and, inline, each
/// waited for the dead endpoint). Sent beside the work, a failed one waits its own backoff.
async fn a_failed_alarm_waits_its_own_backoff_beside_the_work(h: &dyn Harness) {
    let mut rig = rig(h, 5, Duration::ZERO).await;
    let machine = script_machine(&rig, "test", rig.world.clone())
        .await
        .with_background_alarms();
    rig.machine = machine;
    *rig.alarms.fail.lock().unwrap() = true;
    rig.script
        .answers
        .lock()
        .unwrap()
        .push_back(Err(HandlerError::Permanent("HTTP 400".into())));
    let k = received(&rig, "e1").await;
    // The settle does not wait for the alarm.
    assert_eq!(rig.machine.process(&k, LEASE).await.unwrap(), Outcome::Dead);
    let tried = || rig.alarms.tried.load(std::sync::atomic::Ordering::SeqCst);
    for _ in 0..100 {
        if tried() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(tried(), 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    // THEN sweeps right after the failure do not offer it again: it waits its backoff (10 s at least).
    let queue = Recorded::default();
    for _ in 0..3 {
        let report = rig.machine.sweep(&queue, 100).await.unwrap();
        assert_eq!(report.alarms, 0, "{report:?}");
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(tried(), 1, "a failed alarm was tried again at once");
    assert!(rig.store.get(&k).await.unwrap().unwrap().notified_at.is_none());
}

/// A backlog of RECEIVED events older than the grace was sent again at every sweep (every
/// minute on AWS), each time multiplying the messages ahead of the workers.
async fn a_resent_event_is_not_sent_again_by_the_next_sweep(h: &dyn Harness) {
    let rig = rig(h, 5, Duration::from_millis(50)).await;
    received(&rig, "backlog").await;
    rig.clock.advance(Duration::from_millis(150));
    let queue = Recorded::default();
    assert_eq!(swept(&rig, &queue, |r| r.received >= 1).await.received, 1);
    // The next sweep comes at once: the event has its message again, and waits as long again as it had waited.
    assert_eq!(rig.machine.sweep(&queue, 100).await.unwrap().received, 0);
    rig.clock.advance(Duration::from_millis(400));
    assert_eq!(swept(&rig, &queue, |r| r.received >= 1).await.received, 1);
    assert_eq!(queue.0.lock().unwrap().len(), 2);
}

/// GIVEN an event waiting for its message, due to the sweeper only 30 s on (its grace), and a machine whose own clock
/// runs an hour ahead of the store's (an instance's clock that drifted, beside PostgreSQL's `now()`)
/// WHEN it sweeps
/// THEN it reads what is due on the store's clock, which set the due times: nothing is due, nothing is sent again;
/// once the grace has passed on the store's clock, the event is.
async fn the_sweep_reads_due_times_on_the_stores_clock_not_the_machines(h: &dyn Harness) {
    let grace = Duration::from_secs(30);
    let rig = rig(h, 5, grace).await;
    let k = received(&rig, "waiting").await;
    let world = World {
        clock: ManualClock::at(rig.clock.now_ms() + 3_600_000),
        random: SeededRandom::new(7),
    };
    let machine = script_machine(&rig, "ahead", world).await;
    let queue = Recorded::default();
    assert_eq!(
        machine.sweep(&queue, 100).await.unwrap(),
        SweepReport::default(),
        "an event the store's clock holds back was taken for due"
    );
    rig.clock.advance(grace + Duration::from_secs(1));
    let rig = Rig { machine, ..rig };
    let found = swept(&rig, &queue, |r| r.received >= 1).await;
    assert_eq!(found.received, 1, "{found:?}");
    assert_eq!(*queue.0.lock().unwrap(), std::slice::from_ref(&k));
}
