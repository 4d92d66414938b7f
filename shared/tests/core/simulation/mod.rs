//! A seeded simulation of `inbox serve` (docs/DESIGN.md, "The simulation"): two instances sharing one store kept
//! with heartbeats (the reference store with PostgreSQL's semantics: an owner whose heartbeat ran out is gone), each
//! running the production loops themselves ([`Instance`]: the workers with claims in creates, the heartbeat and its
//! fence, the sweeper with its lead, retention's purge and the judging of gone owners, reconciliation against a
//! provider's API of its own, [`provider`]), fed by senders through each instance's intake, behind layers of faults
//! ([`faulty`]: every store call, upkeep's included, may be slow, stall 8–15 s past the 6 s liveness period (a
//! paused process, a busy database), fail before or after it landed; the queue loses, doubles and refuses
//! messages; the provider fails and rate-limits), with a handler that succeeds, fails or hangs, the wall clock
//! stepped forward and back by up to 20 s, instances killed (every future of theirs dropped) and restarted, and the
//! database crashed (every write not synced lost); then the faults stop and the instances are left to finish.
//! Everything runs on one current-thread runtime on tokio's paused clock, and every draw comes from the seed, so a
//! seed plays the same way every time: a failing one prints the command that replays it.
//!
//! What is checked, per seed, from the history it records:
//! - every event answered 200 is stored (after every crash, and at the end);
//! - once the faults stop, every answered event ends COMPLETED or DEAD, and so does every event the provider lists,
//!   the quarter of them whose webhooks were never sent included (reconciliation finds them);
//! - no event is completed twice (two settles to COMPLETED answered `Done`), and the attempt that completed it ran
//!   its handler; no settle lands without its lease (a call stalled past its lease, as a paused process's, finds
//!   another attempt holding it and is refused);
//! - **no two attempts of one event are in flight at once** (a handler's run, from its start to its end, cancel or
//!   drop), unless the wall clock stepped forward around them (which ends leases early and makes every heartbeat
//!   look run out until its owner beats again, as it would on a database whose clock steps);
//! - **every repeated effect is its own attempt's**: an effect other than the completing attempt's belongs to an
//!   attempt whose settle never answered (its instance killed, the database crashed), answered an error, or found
//!   its lease lost; nothing else;
//! - the source's secret appears in no record and no line of the history.
//!
//! `cargo test -p inbox-core --test core simulation:: -- --nocapture` runs `SIM_SEEDS` seeds (4,000 by default,
//! split over two tests) and prints the figures; `SIM_SEED=N` plays one seed and prints its history;
//! `SIM_MUTATION=answer_before_sync` plays with creates answered before their sync.

mod faulty;
mod provider;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use inbox_core::clock::{Clock, SeededRandom, World};
use inbox_core::config::Config;
use inbox_core::delivery_health::{DeliveryHealth, Thresholds};
use inbox_core::handlers::{http_client, Handler, HandlerError, Registry};
use inbox_core::intake::{Intake, Taken};
use inbox_core::machine::{Notifier, NotifyError};
use inbox_core::metrics::Metrics;
use inbox_core::model::{Event, EventId, EventKey, NewEvent, Origin, Record, SourceName, Status};
use inbox_core::ports::{Queue, Store};
use inbox_core::reconcile::Reconciler;
use inbox_core::secrets::LocalSecrets;
use inbox_core::serve::{Instance, Parts, Settings};
use inbox_core::source::Sources;
use inbox_core::stores::memory::{Durability, MemoryStore};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sha2::Digest;
use tokio::task::JoinSet;

use faulty::{Answered, Faulty, FaultyQueue, Mutation, Rates};
use provider::SimProvider;

const SECRET: &str = "sim-secret-never-shown";
const SOURCE: &str = "sim";
/// Distinct events a seed delivers.
const EVENTS: usize = 6;
/// Steps of the faulty phase.
const STEPS: usize = 120;
/// Instances sharing the store.
const INSTANCES: usize = 2;
const WORKERS: usize = 2;
/// The liveness period of the store's heartbeats: an instance that cannot renew its own for half of it fences
/// itself; another may judge it gone after all of it.
const LIVENESS: Duration = Duration::from_secs(6);
/// The simulation's epoch: a fixed wall-clock start, so that no real time leaks into a seed.
const EPOCH_MS: i64 = 1_800_000_000_000;

/// The wall clock of the simulation: a fixed epoch moved by tokio's paused clock, and stepped forward or back as
/// NTP steps a machine's (tokio's own clock, the monotonic one, never steps).
struct SimClock {
    start: tokio::time::Instant,
    step: std::sync::atomic::AtomicI64,
}

impl Clock for SimClock {
    fn now_ms(&self) -> i64 {
        EPOCH_MS
            + i64::try_from(self.start.elapsed().as_millis()).unwrap_or(i64::MAX)
            + self.step.load(Ordering::SeqCst)
    }
}

/// One attempt's run of the handler, as the handler saw it: when it started and ended (or was dropped: a timeout,
/// a fence, a killed instance), on the paused monotonic clock, and whether it took effect.
#[derive(Clone, Debug)]
struct Run {
    event: String,
    token: String,
    started: tokio::time::Instant,
    ended: Option<tokio::time::Instant>,
    effect: bool,
}

/// The handler: from the seed, an effect after a while, a retryable failure, or a hang past its timeout (no
/// effect). Every run is recorded with its attempt's lease token, from its start to its end or its drop.
struct SimHandler {
    rng: Arc<Mutex<StdRng>>,
    faults: Arc<std::sync::atomic::AtomicBool>,
    runs: Arc<Mutex<Vec<Run>>>,
    history: Arc<Mutex<Vec<String>>>,
    clock: Arc<dyn Clock>,
}

impl SimHandler {
    fn log(&self, line: String) {
        let at = self.clock.now_ms() - EPOCH_MS;
        self.history.lock().unwrap().push(format!("{at:>9} ms  {line}"));
    }

    fn effects(&self) -> Vec<(String, String)> {
        let runs = self.runs.lock().unwrap();
        runs.iter()
            .filter(|r| r.effect)
            .map(|r| (r.event.clone(), r.token.clone()))
            .collect()
    }
}

/// Ends its run when dropped: whether the handler returned, or its future was dropped mid-way.
struct Running {
    runs: Arc<Mutex<Vec<Run>>>,
    index: usize,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.runs.lock().unwrap()[self.index].ended = Some(tokio::time::Instant::now());
    }
}

#[async_trait]
impl Handler for SimHandler {
    async fn handle(&self, event: &Event) -> Result<(), HandlerError> {
        let token = event.lease_owner.clone().unwrap_or_default();
        let id = event.event_id.as_str();
        let running = {
            let mut runs = self.runs.lock().unwrap();
            runs.push(Run {
                event: id.to_owned(),
                token: token.clone(),
                started: tokio::time::Instant::now(),
                ended: None,
                effect: false,
            });
            Running {
                runs: self.runs.clone(),
                index: runs.len() - 1,
            }
        };
        let faults = self.faults.load(Ordering::SeqCst);
        let (roll, wait) = {
            let mut rng = self.rng.lock().unwrap();
            (rng.random_range(0..100), rng.random_range(0..600))
        };
        tokio::time::sleep(Duration::from_millis(wait)).await;
        if faults && roll < 15 {
            self.log(format!("handler {id} (attempt {}): fails", event.attempts));
            return Err(HandlerError::Retryable("the downstream answered 503".into()));
        }
        if faults && roll < 22 {
            // Past the handler's timeout: the machine gives up on it, and nothing took effect.
            self.log(format!("handler {id} (attempt {}): hangs", event.attempts));
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        self.log(format!(
            "handler {id} (attempt {} {token}): takes effect",
            event.attempts
        ));
        self.runs.lock().unwrap()[running.index].effect = true;
        Ok(())
    }
}

#[derive(Default)]
struct Alarms(Mutex<u64>);

#[async_trait]
impl Notifier for Alarms {
    async fn dead(&self, _event: &Record) -> Result<(), NotifyError> {
        *self.0.lock().unwrap() += 1;
        Ok(())
    }
}

struct NoAlarm;
impl inbox_core::delivery_health::HealthAlarm for NoAlarm {
    fn raise(&self, _alarm: serde_json::Value) {}
}

/// What one seed did, for the figures.
#[derive(Default, Debug, Clone)]
struct Figures {
    deliveries: u64,
    acknowledged: u64,
    refused: u64,
    kills: u64,
    database_crashes: u64,
    clock_steps: u64,
    store_faults: u64,
    queue_faults: u64,
    never_sent: u64,
    reconciled: u64,
    runs: u64,
    effects: u64,
    repeats: u64,
    leases_ended_for_gone_owners: u64,
    completed: u64,
    dead: u64,
}

/// One seed's run: its figures and history, or the first violated property.
struct Played {
    figures: Figures,
    history: Vec<String>,
    violation: Option<String>,
}

fn mutation() -> Mutation {
    match std::env::var("SIM_MUTATION").as_deref() {
        Ok("answer_before_sync") => Mutation::AnswerBeforeSync,
        Ok(other) if !other.is_empty() => panic!("SIM_MUTATION: unknown {other:?} (answer_before_sync)"),
        _ => Mutation::None,
    }
}

/// Plays `seed` on a runtime of its own: one thread, tokio's clock paused.
fn play(seed: u64, mutation: Mutation) -> Played {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(simulate(seed, mutation))
}

/// One instance of `inbox serve` and the deliveries in flight to it: both end at once when it is killed.
struct Process {
    instance: Instance,
    intake: Intake,
    deliveries: JoinSet<()>,
}

struct Rig {
    store: Arc<Faulty>,
    provider: Arc<SimProvider>,
    /// The switch of the queue's, the handler's and the provider's faults (the store has its own).
    faults: Arc<std::sync::atomic::AtomicBool>,
    faults_rng: Arc<Mutex<StdRng>>,
    queue_faults: Arc<Mutex<u64>>,
    sources: Sources,
    handler: Arc<SimHandler>,
    world: World,
    acks: Arc<Mutex<Vec<String>>>,
    refused: Arc<Mutex<u64>>,
    history: Arc<Mutex<Vec<String>>>,
    grace: Duration,
}

impl Rig {
    fn log(&self, line: String) {
        let at = self.world.now_ms() - EPOCH_MS;
        self.history.lock().unwrap().push(format!("{at:>9} ms  {line}"));
    }

    /// An instance starting as `inbox serve` starts ([`Instance::start`]: its heartbeat, the restart scan, its
    /// loops), tried again a second later while the store refuses (a supervisor restarting it).
    async fn start(&self, slot: usize) -> Process {
        loop {
            let metrics = Arc::new(Metrics::new(self.sources.names()));
            let health = Arc::new(DeliveryHealth::new(
                self.sources.names(),
                Thresholds::default(),
                Arc::new(NoAlarm),
                self.world.clone(),
            ));
            let reconciler = Reconciler::new(
                SourceName::parse(SOURCE).unwrap(),
                "sim",
                self.provider.clone(),
                Duration::from_secs(3600),
                Duration::from_secs(5),
            )
            .with_world(self.world.clone())
            .with_interval(Duration::from_secs(15));
            let (rng, on, injected) = (
                self.faults_rng.clone(),
                self.faults.clone(),
                self.queue_faults.clone(),
            );
            let parts = Parts {
                sources: self.sources.clone(),
                store: self.store.clone() as Arc<dyn Store>,
                world: self.world.clone(),
                metrics,
                alarm: Arc::new(Alarms::default()),
                health,
                reconcilers: vec![reconciler],
                settings: Settings {
                    workers: WORKERS,
                    grace: self.grace,
                    sweep_every: Duration::from_secs(3),
                    retention: Duration::from_secs(3600),
                    queue_capacity: 10_000,
                },
                queue_layer: Some(Box::new(move |queue| {
                    Arc::new(FaultyQueue::new(queue, rng, on, injected)) as Arc<dyn Queue>
                })),
            };
            match Instance::start(parts).await {
                Ok(instance) => {
                    self.log(format!("instance {slot} starts as {}", instance.owner()));
                    return Process {
                        intake: instance.intake(),
                        instance,
                        deliveries: JoinSet::new(),
                    };
                }
                Err(e) => {
                    self.log(format!("instance {slot} does not start: {e}"));
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// A sender's delivery of `id` to `process`: answered 200 (recorded) or refused (503).
    fn deliver(&self, process: &mut Process, id: usize) {
        let intake = process.intake.clone();
        let source = self.sources.get(SOURCE).unwrap().clone();
        let (acks, refused, history, world) = (
            self.acks.clone(),
            self.refused.clone(),
            self.history.clone(),
            self.world.clone(),
        );
        process.deliveries.spawn(async move {
            let id = format!("evt-{id}");
            let body = format!("{{\"id\":\"{id}\"}}");
            let event = NewEvent {
                key: EventKey::new(SourceName::parse(SOURCE).unwrap(), EventId::parse(&id).unwrap()),
                event_type: Some("sim.event".into()),
                payload_sha256: hex::encode(sha2::Sha256::digest(body.as_bytes())),
                payload: bytes::Bytes::from(body),
                headers: vec![],
                origin: Origin::Webhook,
                resent_bodies: Default::default(),
            };
            let answer = intake.take(&source, event, None).await;
            let at = world.now_ms() - EPOCH_MS;
            match answer {
                Ok(Taken::Accepted { .. }) | Ok(Taken::Duplicate { .. }) => {
                    history.lock().unwrap().push(format!("{at:>9} ms  200 {id}"));
                    acks.lock().unwrap().push(id);
                }
                Err(e) => {
                    history.lock().unwrap().push(format!("{at:>9} ms  503 {id}: {e}"));
                    *refused.lock().unwrap() += 1;
                }
            }
        });
    }
}

async fn simulate(seed: u64, mutation: Mutation) -> Played {
    std::env::set_var("SIM_SECRET", SECRET);
    let mut rng = StdRng::seed_from_u64(seed);
    let faults_rng = Arc::new(Mutex::new(StdRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15)));
    let sim_clock = Arc::new(SimClock {
        start: tokio::time::Instant::now(),
        step: Default::default(),
    });
    let clock: Arc<dyn Clock> = sim_clock.clone();
    let world = World {
        clock: clock.clone(),
        random: SeededRandom::new(seed.wrapping_mul(31)),
    };
    let grace = Duration::from_secs(2);
    let config = Config::from_toml(&format!(
        "[retry]\nbase = \"500ms\"\ncap = \"4s\"\nmax_attempts = 5\nmax_age = \"1h\"\n\
         [sources.{SOURCE}]\nscheme = \"github\"\nsecrets = [\"env:SIM_SECRET\"]\n\
         handler = {{ kind = \"custom\", name = \"sim\", timeout = \"20s\" }}\n"
    ))
    .unwrap();
    let handler_faults = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let history: Arc<Mutex<Vec<String>>> = Arc::default();
    let handler = Arc::new(SimHandler {
        rng: faults_rng.clone(),
        faults: handler_faults.clone(),
        runs: Arc::default(),
        history: history.clone(),
        clock: clock.clone(),
    });
    let registry = Registry::new(http_client()).register("sim", handler.clone());
    let sources = Sources::build(&config, Some(&LocalSecrets), &registry)
        .await
        .unwrap();
    let memory = MemoryStore::new(grace)
        .with_clock(clock.clone())
        .with_durability(Durability::Deferred)
        .with_heartbeats(LIVENESS);
    let rates = Rates {
        error_before: 40,
        error_after: 30,
        slow: 100,
        stall: 8,
        pause_before_sync: 50,
    };
    let store = Arc::new(Faulty::new(memory, faults_rng.clone(), rates, mutation));
    let provider = Arc::new(SimProvider {
        events: (0..EVENTS)
            .map(|i| (format!("evt-{i}"), EPOCH_MS + 1000 * i as i64))
            .collect(),
        rng: faults_rng.clone(),
        on: handler_faults.clone(),
    });
    // The webhooks the provider never sends (a quarter of the events): reconciliation must find them.
    let never_sent: Vec<usize> = (0..EVENTS).filter(|_| rng.random_range(0..4) == 0).collect();
    let sent: Vec<usize> = (0..EVENTS).filter(|i| !never_sent.contains(i)).collect();
    let rig = Rig {
        store: store.clone(),
        provider,
        faults: handler_faults.clone(),
        faults_rng: faults_rng.clone(),
        queue_faults: Arc::default(),
        sources,
        handler: handler.clone(),
        world,
        acks: Arc::default(),
        refused: Arc::default(),
        history,
        grace,
    };
    let mut figures = Figures::default();
    let mut processes = Vec::with_capacity(INSTANCES);
    for slot in 0..INSTANCES {
        processes.push(Some(rig.start(slot).await));
    }
    let mut violation = None;
    // Forward steps of the wall clock, on the monotonic clock: they end leases early, which explains attempts that
    // overlap across one.
    let mut steps_forward = Vec::new();

    // The faulty phase: deliveries (repeats among them) to either instance, time passing, kills, crashes.
    for _ in 0..STEPS {
        match rng.random_range(0..100) {
            0..=44 if !sent.is_empty() => {
                let id = sent[rng.random_range(0..sent.len())];
                let to = rng.random_range(0..INSTANCES);
                rig.log(format!("deliver evt-{id} to instance {to}"));
                figures.deliveries += 1;
                rig.deliver(processes[to].as_mut().unwrap(), id);
            }
            0..=94 => {
                let ms = rng.random_range(1..1500);
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            95 => {
                let step = rng.random_range(-20_000..20_000);
                rig.log(format!("the wall clock steps {step} ms"));
                figures.clock_steps += 1;
                if step > 0 {
                    steps_forward.push(tokio::time::Instant::now());
                }
                sim_clock.step.fetch_add(step, Ordering::SeqCst);
            }
            96..=98 => {
                let slot = rng.random_range(0..INSTANCES);
                // Dropped before its successor starts: nothing of it runs on.
                if let Some(dead) = processes[slot].take() {
                    rig.log(format!(
                        "instance {slot} ({}) killed: every future of it dropped",
                        dead.instance.owner()
                    ));
                }
                figures.kills += 1;
                processes[slot] = Some(rig.start(slot).await);
            }
            _ => {
                rig.log("the database crashes: every unsynced write lost".into());
                figures.database_crashes += 1;
                store.crash();
                if let Some(lost) = lost_acks(&rig) {
                    violation.get_or_insert(format!("after a crash, {lost}"));
                }
            }
        }
    }

    // The faults stop; the senders go on sending what was never answered 200, and the instances finish.
    store.on.store(false, Ordering::SeqCst);
    handler_faults.store(false, Ordering::SeqCst);
    rig.log("faults stop".into());
    for round in 0..30 {
        let acked: std::collections::HashSet<String> = rig.acks.lock().unwrap().iter().cloned().collect();
        let waiting: Vec<usize> = (0..EVENTS)
            .filter(|i| !acked.contains(&format!("evt-{i}")) && delivered(&rig, *i))
            .collect();
        if waiting.is_empty() && round > 0 {
            break;
        }
        for id in waiting {
            let to = round % INSTANCES;
            rig.log(format!("deliver evt-{id} again to instance {to}"));
            figures.deliveries += 1;
            rig.deliver(processes[to].as_mut().unwrap(), id);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let mut settled = false;
    for _ in 0..600 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if unfinished(&rig).is_empty() {
            settled = true;
            break;
        }
    }
    drop(processes);
    if !settled {
        violation.get_or_insert(format!(
            "10 minutes after the faults stopped, answered or listed events are not COMPLETED or DEAD: {:?}",
            unfinished(&rig)
        ));
    }
    if let Some(lost) = lost_acks(&rig) {
        violation.get_or_insert(lost);
    }
    if let Some(unleased) = store.unleased.lock().unwrap().first() {
        violation.get_or_insert(unleased.clone());
    }
    if let Some(overlap) = overlapping_attempts(&rig, &steps_forward) {
        violation.get_or_insert(overlap);
    }
    if let Some(broken) = effects_and_completions(&rig, &mut figures) {
        violation.get_or_insert(broken);
    }
    let history = rig.history.lock().unwrap().clone();
    let records = store.inner.state().applied;
    let shown = format!("{history:?}{records:?}");
    if shown.contains(SECRET) {
        violation.get_or_insert("the source's secret appears in the history or a record".into());
    }
    figures.acknowledged = rig.acks.lock().unwrap().len() as u64;
    figures.refused = *rig.refused.lock().unwrap();
    figures.store_faults = *store.injected.lock().unwrap();
    figures.queue_faults = *rig.queue_faults.lock().unwrap();
    figures.leases_ended_for_gone_owners = *store.judged.lock().unwrap();
    figures.runs = rig.handler.runs.lock().unwrap().len() as u64;
    figures.never_sent = never_sent.len() as u64;
    figures.reconciled = records
        .events
        .values()
        .filter(|s| s.record.origin == Origin::Reconciled)
        .count() as u64;
    Played {
        figures,
        history,
        violation,
    }
}

/// Whether `id` was ever sent (a sender retries only what it sent).
fn delivered(rig: &Rig, id: usize) -> bool {
    let wanted = format!("deliver evt-{id}");
    rig.history.lock().unwrap().iter().any(|l| l.ends_with(&wanted))
}

/// An acknowledged event the store's durable state does not hold, with its body.
fn lost_acks(rig: &Rig) -> Option<String> {
    let durable = rig.store.inner.state().durable;
    let acks = rig.acks.lock().unwrap().clone();
    acks.iter()
        .find(|id| {
            let (source, id) = key_parts(id);
            durable
                .events
                .get(&(source, id))
                .is_none_or(|s| s.payload.is_none())
        })
        .map(|id| format!("{id} was answered 200 and is not stored"))
}

fn key_parts(id: &str) -> (SourceName, EventId) {
    (SourceName::parse(SOURCE).unwrap(), EventId::parse(id).unwrap())
}

/// The events acknowledged or listed by the provider (all of them: reconciliation must store the ones never sent)
/// that are not COMPLETED nor DEAD, with their status.
fn unfinished(rig: &Rig) -> Vec<(String, Option<Status>)> {
    let mut wanted: std::collections::BTreeSet<String> = rig.acks.lock().unwrap().iter().cloned().collect();
    wanted.extend(rig.provider.events.iter().map(|(id, _)| id.clone()));
    wanted
        .into_iter()
        .map(|id| {
            let status = status(rig, &id);
            (id, status)
        })
        .filter(|(_, status)| !matches!(status, Some(Status::Completed | Status::Dead)))
        .collect()
}

/// The status of `id` as reads see it.
fn status(rig: &Rig, id: &str) -> Option<Status> {
    rig.store
        .inner
        .state()
        .applied
        .events
        .get(&key_parts(id))
        .map(|s| s.record.status)
}

/// No two attempts of one event in flight at once: each run of the handler for an event starts after the one
/// before it ended (returned, timed out, was cancelled by a fence or dropped with its instance), unless the wall
/// clock stepped forward from a liveness period before the first started to when the next did: leases end early on
/// the store's clock then, and every heartbeat renewed before the step looks run out until its owner beats again.
fn overlapping_attempts(rig: &Rig, steps_forward: &[tokio::time::Instant]) -> Option<String> {
    let runs = rig.handler.runs.lock().unwrap().clone();
    let mut by_event: BTreeMap<&str, Vec<&Run>> = BTreeMap::new();
    for run in &runs {
        by_event.entry(&run.event).or_default().push(run);
    }
    for (id, runs) in by_event {
        for pair in runs.windows(2) {
            let (first, next) = (pair[0], pair[1]);
            let in_flight = first.ended.is_none_or(|ended| ended > next.started);
            let stepped = steps_forward
                .iter()
                .any(|at| *at + LIVENESS >= first.started && *at <= next.started);
            if in_flight && !stepped {
                return Some(format!(
                    "{id}: the attempt {} started while {} was still running",
                    next.token, first.token
                ));
            }
        }
    }
    None
}

/// No event completed twice; the completing attempt ran its handler; every other effect is its own attempt's
/// interruption's: a settle that never answered (its instance killed, its future dropped), answered an error (it may
/// or may not have landed), or found its lease lost. Nothing else repeats an effect.
fn effects_and_completions(rig: &Rig, figures: &mut Figures) -> Option<String> {
    let completed = rig.store.completed.lock().unwrap().clone();
    let effects = rig.handler.effects();
    let settles = rig.store.settles.lock().unwrap().clone();
    figures.effects = effects.len() as u64;
    let mut by_event: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (id, token) in &completed {
        by_event.entry(id).or_default().push(token);
    }
    for (id, tokens) in &by_event {
        if tokens.len() > 1 {
            return Some(format!(
                "{id} was settled COMPLETED twice, by the attempts {tokens:?}"
            ));
        }
        if !effects.iter().any(|(e, t)| e == id && t == tokens[0]) {
            return Some(format!(
                "{id} was completed by {} whose handler never took effect",
                tokens[0]
            ));
        }
    }
    let completing: HashMap<&str, &str> = by_event.iter().map(|(id, t)| (*id, t[0])).collect();
    for (id, token) in &effects {
        if completing.get(id.as_str()) == Some(&token.as_str()) {
            continue;
        }
        figures.repeats += 1;
        let answers = settles.get(token).cloned().unwrap_or_default();
        let interrupted = answers.is_empty()
            || answers
                .iter()
                .any(|a| matches!(a, Answered::Error | Answered::LeaseLost));
        if !interrupted {
            return Some(format!(
                "{id}: the attempt {token} took effect, settled {answers:?}, and the event ran again: no \
                 interruption of that attempt explains the repeat"
            ));
        }
    }
    for (id, _) in &rig.provider.events {
        match status(rig, id) {
            Some(Status::Completed) => figures.completed += 1,
            Some(Status::Dead) => figures.dead += 1,
            _ => {}
        }
    }
    None
}

fn replay_command(seed: u64, mutation: Mutation) -> String {
    let mutation = match mutation {
        Mutation::None => String::new(),
        Mutation::AnswerBeforeSync => "SIM_MUTATION=answer_before_sync ".into(),
    };
    format!(
        "{mutation}SIM_SEED={seed} cargo test -p inbox-core --test core simulation::one_seed -- --nocapture"
    )
}

/// Plays `seeds`, panicking on the first seed that breaks a property, with its history's end and the command that
/// replays it.
fn play_all(seeds: std::ops::Range<u64>) -> Figures {
    let mutation = mutation();
    let mut total = Figures::default();
    let started = std::time::Instant::now();
    let count = seeds.end - seeds.start;
    for seed in seeds.clone() {
        let played = play(seed, mutation);
        if let Some(violation) = played.violation {
            let tail: Vec<_> = played.history.iter().rev().take(30).rev().cloned().collect();
            panic!(
                "seed {seed}: {violation}\nthe history's last lines:\n{}\nreplay it: {}",
                tail.join("\n"),
                replay_command(seed, mutation)
            );
        }
        let f = played.figures;
        total.deliveries += f.deliveries;
        total.acknowledged += f.acknowledged;
        total.refused += f.refused;
        total.kills += f.kills;
        total.database_crashes += f.database_crashes;
        total.clock_steps += f.clock_steps;
        total.store_faults += f.store_faults;
        total.queue_faults += f.queue_faults;
        total.never_sent += f.never_sent;
        total.reconciled += f.reconciled;
        total.runs += f.runs;
        total.effects += f.effects;
        total.repeats += f.repeats;
        total.leases_ended_for_gone_owners += f.leases_ended_for_gone_owners;
        total.completed += f.completed;
        total.dead += f.dead;
    }
    println!(
        "simulation: seeds {}..{} ({count}) in {:.1} s: {total:?}",
        seeds.start,
        seeds.end,
        started.elapsed().as_secs_f64()
    );
    total
}

fn seeds() -> u64 {
    std::env::var("SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4000)
}

#[test]
fn seeds_first_half() {
    let n = seeds();
    let f = play_all(0..n / 2);
    assert!(
        f.acknowledged > 0 && f.kills > 0 && f.store_faults > 0 && f.leases_ended_for_gone_owners > 0,
        "the seeds exercised nothing: {f:?}"
    );
}

#[test]
fn seeds_second_half() {
    let n = seeds();
    let f = play_all(n / 2..n);
    assert!(
        f.acknowledged > 0 && f.kills > 0 && f.store_faults > 0 && f.leases_ended_for_gone_owners > 0,
        "the seeds exercised nothing: {f:?}"
    );
}

/// `SIM_SEED=N`: plays that one seed and prints its whole history (seed 7 when unset).
#[test]
fn one_seed() {
    let seed = std::env::var("SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let mutation = mutation();
    let played = play(seed, mutation);
    let mut out = String::new();
    for line in &played.history {
        let _ = writeln!(out, "{line}");
    }
    println!("{out}seed {seed}: {:?}", played.figures);
    if let Some(violation) = played.violation {
        panic!(
            "seed {seed}: {violation}\nreplay it: {}",
            replay_command(seed, mutation)
        );
    }
}

/// A seed replays exactly: the same history, line for line, twice.
#[test]
fn a_seed_replays_exactly() {
    for seed in [3, 11, 12345] {
        let (a, b) = (play(seed, Mutation::None), play(seed, Mutation::None));
        assert!(a.history.len() > 20, "seed {seed} did little: {:?}", a.history);
        assert_eq!(a.history, b.history, "seed {seed} played two ways");
    }
}
