//! The model check of the state machine (docs/DESIGN.md, "The model check"): every interleaving, within bounds, of
//! two events' deliveries and duplicates, a reconciliation creating an id while its webhook arrives, two workers
//! and the sweeper claiming, handlers that succeed, fail or hang past their lease, a crash of a worker between any
//! two of its steps, lease expiry, an owner declared gone, a live owner whose heartbeat stalls while it runs an
//! event, the dead-letter path and an operator's replay.
//!
//! **Why stateright.** It checks a Rust model in the test binary itself, over any `Clone + Hash + Eq` state: the
//! reference store's [`State`] is one, so each step runs the real code on a store rebuilt from the state held
//! ([`MemoryStore::from_state`]) and the state is taken back after. Its breadth-first search gives the depth explored and
//! a short path to a counterexample (shortest up to how its two threads share one depth's states). (A TLA+ model would be a copy of the rules, checked apart from them;
//! `loom` and `shuttle` explore thread schedules, not a protocol's steps.)
//!
//! **No copies of the rules.** Every action calls the core: the intake (`Intake::take`, which creates or creates
//! claimed and enqueues), `Ledger::claim` (as `Machine::process_then` does), `Machine::run_claimed` (the budget, the
//! handler, the backoff and the settle), `Machine::sweep`, `Machine::mark_dead`, `Ledger::replay`,
//! `Upkeep::end_leases`, over the reference store, whose transitions classify refusals with `rules.rs`. The model
//! only chooses what happens next, and watches: a wrapper around the ledger sees every settle and its answer, and
//! the handler looks at the store when it runs.
//!
//! **Splitting a worker's steps.** `run_claimed` runs the handler and settles in one call. The model runs it twice
//! for one attempt: the *handle* step runs it on a copy of the store and keeps only the handler's effect (nothing
//! is written before the handler); the *settle* step runs it again, the handler answering the same, and keeps what
//! it wrote. Between the two, time may pass (a handler hung past its lease), another worker may claim, or the worker
//! may crash. Where `run_claimed` ends an attempt without running the handler (the budget spent at the claim), the
//! handle step keeps what it wrote. Where it waits for its fence to come down (below), the step polls it once and
//! keeps nothing; the worker is then *fenced*, and the step that renews its heartbeat runs it again, lowers the fence
//! where it waits, and keeps what it wrote (the lease given back).
//!
//! **Time.** A model clock of whole ticks, a tick being one lease (handler timeout 1 s + 2 × `LEASE_MARGIN`), also
//! the sweeper's grace and the backoff (base = cap = one lease; the model's randomness draws the longest wait). A
//! handler starts in the tick of its claim: the clock does not move while a worker holds a claim it has not run
//! (the machine runs the handler right after the claim, bounded by `lease − LEASE_MARGIN`); it moves while a
//! handler hangs.
//!
//! **Owners and their heartbeats.** Without heartbeats ([`Bounds::heartbeats`] off) one process holds the store, as
//! SQLite's lock proves: a crashed incarnation is known gone at once and its leases ended through
//! `Upkeep::end_leases`. With them, the store is kept as PostgreSQL's ([`MemoryStore::with_heartbeats`], a liveness
//! period of one tick): every live worker beats at each tick (at its start, and when it renews), and an owner is
//! judged gone only through the real `Upkeep::gone_owners` then `Upkeep::end_leases`, two steps with anything in
//! between, by a worker whose own beats have been unbroken for a whole period (`serve::liveness`'s rule, which the
//! model cannot call: it chooses who may judge by it). The leases last three ticks there (the handler's timeout
//! eleven seconds), longer than the liveness period, as a handler slower than the period makes them in production.
//! A *stalled owner* is a live worker whose heartbeat stops while it holds a claim (a long pass in its upkeep loop, a
//! store it cannot reach): its process still runs, so its handler may still take effect, and the clock moves while
//! it holds the claim, up to its handler's timeout. Its fence ([`Fence`], a switch per worker in each step) is up
//! once its last renewed beat is half a period old (the next tick), and its heartbeat runs out on the store's clock
//! a whole period after it (the tick after), when another worker may end its leases. The handler runs through the
//! real `run_claimed` with that fence, so a raised fence cancels it (no effect; the lease given back once the
//! heartbeat is renewed), as in production; "an effect only inside a held lease" is what fails without it.
//! `MODEL_MUTATION` puts back what item 1 of issue 53 fixed, to show that the check finds it: `no_fence` runs every
//! worker's machine with [`Fence::never`] (no fence), `trusted_list` ends a listed owner's leases without checking
//! again that its heartbeat is still out (a store without heartbeats' `end_leases`). The fence is up from the tick
//! it is due, so the check finds a fence that comes up after its owner may be judged gone, not one that leaves less
//! margin than half a period.
//!
//! **Liveness.** stateright's `eventually` is judged at terminal states only, and a path that revisits a state is
//! not one: it holds only where every path ends. [`Bounds::liveness`] makes every path end: no replay, two
//! attempts, bounded adversity (one crash, perhaps its owner declared gone, perhaps one dead letter), a last tick,
//! and fairness as urgency: the clock moves only when the system itself (a first delivery, a claim, a handler, a
//! settle, a sweep) has no step left that changes the state; what the world may do and need not (a crash, a gone
//! owner, a dead letter, a duplicate, a reconciliation) never holds the clock up, so paths where it never comes
//! are checked too. An action that changes nothing is no step, every budget is spent once, attempts only grow
//! without replays and the clock is bounded, so no path revisits a state, and a terminal state is one where the
//! clock has run out with nothing left to do. Each event is delivered on every such path, so "every accepted event
//! is COMPLETED or DEAD" at a terminal state means no event is left open for good.
#![allow(clippy::unwrap_used)]

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use stateright::{Checker, Model, Property};

use inbox_core::clock::{ManualClock, Random, World};
use inbox_core::config::Config;
use inbox_core::delivery_health::{DeliveryHealth, HealthAlarm, Thresholds};
use inbox_core::fence::{Fence, FenceSwitch};
use inbox_core::handlers::{http_client, Handler, HandlerError, Registry};
use inbox_core::intake::{Intake, Order, Reserved, Runner};
use inbox_core::machine::{Dropped, Machine, Notifier, NotifyError, Outcome, LEASE_MARGIN};
use inbox_core::metrics::Metrics;
use inbox_core::model::{Event, EventId, EventKey, NewEvent, Origin, Record, SourceName, Status};
use inbox_core::ports::{
    Capabilities, Claim, Created, GoneOwners, Ledger, MarkDead, Queue, QueueDepth, QueueError, Replay,
    Settled, Settlement, StoreError, Upkeep,
};
use inbox_core::secrets::LocalSecrets;
use inbox_core::serve::Pace;
use inbox_core::source::Sources;
use inbox_core::stores::memory::{MemoryStore, State};

/// One tick of the model clock, in ms: one lease ([`Machine::lease_for`]: the handler's 1 s + 2 × 2 s), unless
/// [`Bounds::lease_ticks`] says more.
const TICK: i64 = 5_000;
/// How long a renewed heartbeat vouches for its owner, where the store is kept with heartbeats: one tick.
const LIVENESS: Duration = Duration::from_millis(TICK as u64);
/// The model clock's tick 0.
const T0: i64 = 1_700_000_000_000;
const EVENTS: usize = 2;
const WORKERS: usize = 2;
/// Messages held per event, at most (the queue is at least once: two is "more than one").
const MAX_MESSAGES: u8 = 2;

/// What the checker may do: how far the clock runs and how much adversity a path may hold.
#[derive(Clone, Debug)]
pub struct Bounds {
    /// The last tick.
    pub ticks: u8,
    /// How many of the two events are delivered.
    pub events: usize,
    pub max_attempts: u32,
    /// Webhook deliveries of each event (the second one a sender's duplicate).
    pub deliveries: u8,
    /// Whether reconciliation creates event 0 (and enqueues it), racing its webhook.
    pub reconcile: bool,
    /// Whether a delivery may be created claimed by a free worker (`inbox serve`'s intake with a runner).
    pub claimed_creates: bool,
    pub crashes: u8,
    pub dead_letters: u8,
    pub replays: u8,
    /// Messages the queue may deliver twice.
    pub redeliveries: u8,
    /// Whether a crashed worker's earlier leases may be ended as a gone owner's (without heartbeats: the crash is
    /// proven at once).
    pub gone: bool,
    /// The clock moves only when the system has no step left to take (the liveness check's fairness).
    pub urgent: bool,
    /// Whether the store is kept with heartbeats (the module's doc): owners are judged gone by them, not by a crash.
    pub heartbeats: bool,
    /// How long a lease lasts, in ticks (the handler's timeout is the lease less `2 × LEASE_MARGIN`).
    pub lease_ticks: u8,
    /// Live workers whose heartbeat may stop while they hold a claim (with heartbeats).
    pub stalls: u8,
    /// How many times a worker may read which owners are gone (with heartbeats), each read perhaps followed by
    /// the end of their leases.
    pub judgments: u8,
}

impl Bounds {
    /// Nothing but one delivery of each event; each scenario adds its own.
    fn quiet(events: usize, ticks: u8) -> Self {
        Self {
            ticks,
            events,
            max_attempts: 2,
            deliveries: 1,
            reconcile: false,
            claimed_creates: false,
            crashes: 0,
            dead_letters: 0,
            replays: 0,
            redeliveries: 0,
            gone: false,
            urgent: false,
            heartbeats: false,
            lease_ticks: 1,
            stalls: 0,
            judgments: 0,
        }
    }

    /// How an event comes in: a sender's duplicate, created claimed by a free worker or enqueued, reconciliation
    /// creating the id while its webhook arrives; a crash, the gone owner's leases ended; hangs past the lease.
    pub fn creation_races() -> Self {
        Self {
            deliveries: 2,
            reconcile: true,
            claimed_creates: true,
            crashes: 1,
            gone: true,
            ..Self::quiet(1, 2)
        }
    }

    /// How an event ends and starts again: the dead-letter path against a worker's settle, an operator's replay
    /// against a stale worker, a message delivered twice, a crash.
    pub fn dead_letters_and_replays() -> Self {
        Self {
            crashes: 1,
            dead_letters: 1,
            replays: 1,
            redeliveries: 1,
            ..Self::quiet(1, 2)
        }
    }

    /// Two events sharing the two workers: created claimed or enqueued, a crash that loses every message and its
    /// owner declared gone, a hang past the lease.
    pub fn two_events() -> Self {
        Self {
            claimed_creates: true,
            crashes: 1,
            gone: true,
            ..Self::quiet(2, 1)
        }
    }

    /// Paths that all end, for "eventually" (the module's doc): both events, created claimed or enqueued, one also
    /// reconciled; one crash (with the messages), its owner perhaps declared gone, perhaps one dead letter; no
    /// replay; the clock moves only when the system has nothing else to do.
    pub fn liveness() -> Self {
        Self {
            reconcile: true,
            claimed_creates: true,
            crashes: 1,
            dead_letters: 1,
            gone: true,
            urgent: true,
            ..Self::quiet(2, 8)
        }
    }

    /// A store kept with heartbeats and leases of three ticks: one event, created claimed or enqueued; a live
    /// worker's heartbeat stalls while it holds the claim (perhaps renewed later), a crash, one judgment of who is
    /// gone; the clock runs three ticks, a whole lease.
    pub fn stalled_owner() -> Self {
        Self {
            claimed_creates: true,
            crashes: 1,
            heartbeats: true,
            lease_ticks: 3,
            stalls: 1,
            judgments: 1,
            ..Self::quiet(1, 3)
        }
    }
}

/// A defect put back on purpose (`MODEL_MUTATION`), to show that the check finds it: what item 1 of issue 53 fixed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutation {
    None,
    /// `no_fence`: no worker obeys a fence ([`Fence::never`]), as before the fix: a stalled owner's handler still
    /// runs once another owner may have ended its lease.
    NoFence,
    /// `trusted_list`: a list of gone owners is trusted when their leases end (a store without heartbeats'
    /// `end_leases`, as the reference store ended them before the fix; PostgreSQL's checked a listed row again,
    /// but took a missing one as proof): an owner listed that beat since loses the lease it holds.
    TrustedList,
}

impl Mutation {
    fn from_env() -> Self {
        match std::env::var("MODEL_MUTATION").as_deref() {
            Ok("no_fence") => Self::NoFence,
            Ok("trusted_list") => Self::TrustedList,
            Ok(other) if !other.is_empty() => {
                panic!("MODEL_MUTATION: unknown {other:?} (no_fence, trusted_list)")
            }
            _ => Self::None,
        }
    }
}

/// What a handler answers, chosen by the checker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Answer {
    Ok,
    Retryable,
    Permanent,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    Idle,
    /// Holds a claim (its record as claimed), its handler not run yet.
    Claimed {
        e: usize,
        record: Record,
    },
    /// Its handler ran (the effect is done) and answered; the settle is to come.
    Ran {
        e: usize,
        record: Record,
        answer: Answer,
    },
    /// Its fence cancelled the handler (before it ran, or after it ran and before it answered): `run_claimed`
    /// waits for the fence to come down, to give the lease back.
    Fenced {
        e: usize,
        record: Record,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Worker {
    /// Its incarnation: a crash starts a new one, a new owner name.
    life: u8,
    /// Its last incarnation's leases may be ended as a gone owner's (without heartbeats).
    gone: bool,
    pc: Pc,
    /// With heartbeats: stopped while it held a claim, its last renewed beat at this tick.
    stalled: Option<u8>,
    /// With heartbeats: the tick since which its beats have been renewed without a break (its start, or the
    /// renewal after a stall).
    since: u8,
    /// With heartbeats: the owners it read as gone, whose leases it is about to end.
    listed: Vec<String>,
}

/// A property broken on the path to a state (latched).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Broken {
    /// A settle landed on an attempt that had been settled already.
    TwoSettles,
    /// A settle landed on another attempt than the one its worker claimed, or on a record not PROCESSING.
    SettleNotOwn,
    /// A COMPLETED event changed status (DEAD over COMPLETED, or any other).
    CompletedLeft,
    /// A handler ran without its worker holding a live lease on the event.
    EffectOutsideLease,
    /// A handler ran twice in one counted attempt.
    UncountedRepeat,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sim {
    store: State,
    tick: u8,
    messages: [u8; EVENTS],
    workers: [Worker; WORKERS],
    delivered: [u8; EVENTS],
    reconciled: bool,
    crashes: u8,
    dead_letters: u8,
    replays: u8,
    redeliveries: u8,
    /// Per event, the last attempt whose handler ran, as (replays, attempts): attempts are counted up within a
    /// replay, so a run at or below the last one is a repeat that was not counted.
    last_effect: [Option<(u32, u32)>; EVENTS],
    /// Per event, how many times a handler ran (two at most: "more than once").
    effects: [u8; EVENTS],
    /// Per event, the last attempt settled.
    last_settle: [Option<(u32, u32)>; EVENTS],
    /// Seen on the path: a handler's settle refused for its lease; a handler run twice for one event (a repeat).
    lease_lost: bool,
    stalls: u8,
    judgments: u8,
    /// Seen on the path: a handler cancelled by its fence; the leases of a live owner (stalled) ended by another.
    cancelled: bool,
    live_owner_ended: bool,
    broken: BTreeSet<Broken>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// A webhook delivery through the intake: created (or a duplicate) and enqueued.
    Deliver(usize),
    /// The same, a worker free: created claimed by that worker, which runs it without a message.
    DeliverClaimed(usize, usize),
    /// Reconciliation finds the event missing and creates it (origin reconciled), then enqueues it.
    Reconcile(usize),
    /// The queue delivers a message twice.
    Redeliver(usize),
    /// A worker takes a message and claims the event.
    Claim(usize, usize),
    /// The claimed event's handler runs and answers.
    Handle(usize, Answer),
    /// The worker settles what its handler answered.
    Settle(usize),
    /// The worker's process dies between two of its steps, with every queued message (`inbox serve`'s queue is
    /// in memory).
    Crash(usize),
    /// A crashed worker's last incarnation is proven gone: its leases end now (without heartbeats).
    DeclareGone(usize),
    /// A live worker's heartbeat stops while it holds a claim; its process runs on.
    Stall(usize),
    /// A stalled worker's heartbeat is renewed: its fence comes down, and a handler it cancelled gives its lease
    /// back.
    Resume(usize),
    /// A worker reads which owners are gone (`Upkeep::gone_owners`), to end their leases.
    ListGone(usize),
    /// The worker ends the leases of the owners it read as gone (`Upkeep::end_leases`).
    EndLeases(usize),
    Sweep,
    /// A message redriven to the dead-letter queue: the alarm function buries the event.
    DeadLetter(usize),
    /// An operator replays a dead event.
    Replay(usize),
    Tick,
}

/// The model: the core's sources, built once, and the bounds.
pub struct Inbox {
    bounds: Bounds,
    mutation: Mutation,
    sources: Sources,
    metrics: Arc<Metrics>,
    health: Arc<DeliveryHealth>,
    alarm: Arc<dyn Notifier>,
    keys: [EventKey; EVENTS],
}

thread_local! {
    /// Each checker thread's runtime: the store's futures never wait on I/O, but the machine's handler timeout
    /// and the intake's create task need a Tokio runtime.
    static RUNTIME: tokio::runtime::Runtime =
        tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    /// What the handler answers in this thread's step, and what it saw.
    static SCRIPT: RefCell<Script> = RefCell::new(Script::default());
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    RUNTIME.with(|rt| rt.block_on(f))
}

/// Polls `f` once: its output, or `None` where it waits.
async fn poll_once<F: Future>(mut f: Pin<&mut F>) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        Poll::Ready(match f.as_mut().poll(cx) {
            Poll::Ready(output) => Some(output),
            Poll::Pending => None,
        })
    })
    .await
}

#[derive(Default)]
struct Script {
    answer: Option<Answer>,
    /// Where the handler looks, when it runs, for its lease: the store, the token, now.
    probe: Option<(MemoryStore, String, i64)>,
    ran: bool,
    held: bool,
}

/// The handler: answers what the step's script says, and looks whether its lease is held.
struct Scripted;

#[async_trait]
impl Handler for Scripted {
    async fn handle(&self, event: &Event) -> Result<(), HandlerError> {
        SCRIPT.with(|s| {
            let mut s = s.borrow_mut();
            s.ran = true;
            if let Some((store, token, now)) = &s.probe {
                let state = store.state();
                let record = state
                    .applied
                    .events
                    .get(&(event.source.clone(), event.event_id.clone()))
                    .map(|stored| &stored.record);
                s.held = record.is_some_and(|r| {
                    r.status == Status::Processing
                        && r.lease_owner.as_deref() == Some(token.as_str())
                        && r.lease_until.is_some_and(|u| u > *now)
                });
            }
            match s.answer.expect("a handler ran outside a step that scripts it") {
                Answer::Ok => Ok(()),
                Answer::Retryable => Err(HandlerError::Retryable("model: retryable".into())),
                Answer::Permanent => Err(HandlerError::Permanent("model: permanent".into())),
            }
        })
    }
}

/// Draws the longest wait: the backoff is one tick.
struct Longest;

impl Random for Longest {
    fn next_u64(&self) -> u64 {
        TICK as u64
    }
}

struct Alarms;

#[async_trait]
impl Notifier for Alarms {
    async fn dead(&self, _event: &Record) -> Result<(), NotifyError> {
        Ok(())
    }
}

struct NoHealthAlarm;

impl HealthAlarm for NoHealthAlarm {
    fn raise(&self, _alarm: serde_json::Value) {}
}

/// The queue as one step sees it: what was enqueued.
#[derive(Default)]
struct Sent(Mutex<Vec<EventKey>>);

#[async_trait]
impl Queue for Sent {
    async fn enqueue(&self, key: &EventKey, _delay: Duration) -> Result<(), QueueError> {
        self.0.lock().unwrap().push(key.clone());
        Ok(())
    }
    async fn announce(&self, key: &EventKey, _until: i64) -> Result<(), QueueError> {
        self.enqueue(key, Duration::ZERO).await
    }
    async fn depth(&self) -> Result<Option<QueueDepth>, QueueError> {
        Ok(None)
    }
}

/// One free worker, for a claimed create: its lease, and the event it is handed.
struct FreeWorker {
    owner: String,
    lease: Duration,
    handed: Mutex<Option<Event>>,
}

impl Runner for FreeWorker {
    fn reserve(&self, _key: &EventKey) -> Option<Reserved> {
        Some(Reserved {
            owner: self.owner.clone(),
            lease: self.lease,
            at: tokio::time::Instant::now(),
        })
    }
    fn run(&self, _reserved: Reserved, event: Event) {
        *self.handed.lock().unwrap() = Some(event);
    }
}

/// A settle the ledger answered: the record it found, what it answered.
struct SeenSettle {
    key: EventKey,
    before: Option<Record>,
    settled: Settled,
}

/// The reference store, every settle watched.
struct Watched {
    store: MemoryStore,
    settles: Mutex<Vec<SeenSettle>>,
}

#[async_trait]
impl Ledger for Watched {
    fn capabilities(&self) -> Capabilities {
        self.store.capabilities()
    }
    async fn create(&self, event: NewEvent) -> Result<Created, StoreError> {
        self.store.create(event).await
    }
    async fn create_announced(&self, event: NewEvent) -> Result<Created, StoreError> {
        self.store.create_announced(event).await
    }
    async fn create_batch(&self, events: Vec<NewEvent>) -> Result<Vec<Created>, StoreError> {
        self.store.create_batch(events).await
    }
    async fn create_claimed(
        &self,
        event: NewEvent,
        owner: &str,
        lease: Duration,
    ) -> Result<(Created, Option<Event>), StoreError> {
        self.store.create_claimed(event, owner, lease).await
    }
    async fn peek(&self, key: &EventKey) -> Result<Option<Record>, StoreError> {
        self.store.peek(key).await
    }
    async fn claim(&self, key: &EventKey, owner: &str, lease: Duration) -> Result<Claim, StoreError> {
        self.store.claim(key, owner, lease).await
    }
    async fn settle(
        &self,
        key: &EventKey,
        owner: &str,
        settlement: Settlement,
    ) -> Result<Settled, StoreError> {
        let before = record(&self.store.state(), key);
        let settled = self.store.settle(key, owner, settlement).await?;
        self.settles.lock().unwrap().push(SeenSettle {
            key: key.clone(),
            before,
            settled,
        });
        Ok(settled)
    }
    async fn completed(&self, key: &EventKey, owner: &str) -> Result<(), StoreError> {
        self.store.completed(key, owner).await
    }
    async fn release(&self, key: &EventKey, owner: &str) -> Result<Settled, StoreError> {
        self.store.release(key, owner).await
    }
    async fn mark_dead(&self, key: &EventKey, reason: &str) -> Result<MarkDead, StoreError> {
        self.store.mark_dead(key, reason).await
    }
    async fn mark_notified(&self, key: &EventKey) -> Result<(), StoreError> {
        self.store.mark_notified(key).await
    }
    async fn replay(&self, key: &EventKey, force: bool) -> Result<Replay, StoreError> {
        self.store.replay(key, force).await
    }
    async fn get(&self, key: &EventKey) -> Result<Option<Event>, StoreError> {
        self.store.get(key).await
    }
    fn check(&self) -> Result<(), StoreError> {
        self.store.check()
    }
}

/// How many live leases `owner` holds at `now`.
fn leases(state: &State, owner: &str, now: i64) -> usize {
    let mine = format!("{owner}:");
    state
        .applied
        .events
        .values()
        .filter(|s| {
            s.record.status == Status::Processing
                && s.record
                    .lease_owner
                    .as_deref()
                    .is_some_and(|o| o.starts_with(&mine))
                && s.record.lease_until.is_some_and(|u| u > now)
        })
        .count()
}

/// `key`'s record as the store holds it (applied writes).
fn record(state: &State, key: &EventKey) -> Option<Record> {
    state
        .applied
        .events
        .get(&(key.source.clone(), key.event_id.clone()))
        .map(|s| s.record.clone())
}

const PAYLOAD: &[u8] = b"{}";

/// One step's world: the store rebuilt from the state, the machine of one owner over it, the queue it sends to.
struct Step {
    store: MemoryStore,
    ledger: Arc<Watched>,
    machine: Machine,
    sent: Arc<Sent>,
    world: World,
    /// The fence the machine obeys (unless the mutation drops it): raised for a stalled worker's steps.
    switch: FenceSwitch,
}

impl Inbox {
    pub fn new(bounds: Bounds, mutation: Mutation) -> Self {
        std::env::set_var("MODEL_CHECK_SECRET", "s3cret");
        // The lease is the handler's timeout and twice the margin (`Machine::lease_for`).
        let timeout = i64::from(bounds.lease_ticks) * TICK - 2 * LEASE_MARGIN.as_millis() as i64;
        let config = Config::from_toml(&format!(
            "[retry]\nbase = \"{TICK}ms\"\ncap = \"{TICK}ms\"\nmax_attempts = {}\nmax_age = \"24h\"\n\
             [sources.src]\nscheme = \"github\"\nsecrets = [\"env:MODEL_CHECK_SECRET\"]\n\
             handler = {{ kind = \"custom\", name = \"model\", timeout = \"{timeout}ms\" }}\n",
            bounds.max_attempts
        ))
        .unwrap();
        let registry = Registry::new(http_client()).register("model", Arc::new(Scripted));
        let sources = block_on(Sources::build(&config, Some(&LocalSecrets), &registry)).unwrap();
        let metrics = Arc::new(Metrics::new(sources.names()));
        let (world, _) = World::manual(T0, 1);
        let health = Arc::new(DeliveryHealth::new(
            sources.names(),
            Thresholds::default(),
            Arc::new(NoHealthAlarm),
            world,
        ));
        let src = SourceName::parse("src").unwrap();
        let keys = ["e0", "e1"].map(|id| EventKey::new(src.clone(), EventId::parse(id).unwrap()));
        Self {
            bounds,
            mutation,
            sources,
            metrics,
            health,
            alarm: Arc::new(Alarms),
            keys,
        }
    }

    fn step(&self, s: &Sim, owner: &str) -> Step {
        self.step_on(s, owner, self.bounds.heartbeats)
    }

    /// [`Inbox::step`], the store kept with heartbeats or not (the `trusted_list` mutation's judge).
    fn step_on(&self, s: &Sim, owner: &str, heartbeats: bool) -> Step {
        let now = T0 + i64::from(s.tick) * TICK;
        let clock = ManualClock::at(now);
        let mut store = MemoryStore::from_state(s.store.clone(), Duration::from_millis(TICK as u64))
            .with_clock(clock.clone());
        if heartbeats {
            store = store.with_heartbeats(LIVENESS);
        }
        let ledger = Arc::new(Watched {
            store: store.clone(),
            settles: Mutex::default(),
        });
        let world = World {
            clock,
            random: Arc::new(Longest),
        };
        let (switch, fence) = Fence::new();
        let fence = match self.mutation {
            Mutation::NoFence => Fence::never(),
            _ => fence,
        };
        let machine = Machine::new(
            ledger.clone(),
            Arc::new(store.clone()),
            self.sources.clone(),
            self.metrics.clone(),
            self.alarm.clone(),
            Duration::from_secs(3600),
            owner,
        )
        .with_world(world.clone())
        .with_fence(fence);
        Step {
            store,
            ledger,
            machine,
            sent: Arc::default(),
            world,
            switch,
        }
    }

    /// Worker `w`'s step: its machine, its fence up where it is.
    fn worker_step(&self, s: &Sim, w: usize) -> Step {
        let step = self.step(s, &Self::owner(s, w));
        step.switch.set(Self::fence_up(s, w));
        step
    }

    /// Whether worker `w`'s fence is up: its heartbeat stalled, and its last renewed beat at least
    /// [`Pace::fence_after`] old (half the liveness period: the next tick).
    fn fence_up(s: &Sim, w: usize) -> bool {
        let fence_after = Pace::of(LIVENESS).fence_after.as_millis() as i64;
        s.workers[w]
            .stalled
            .is_some_and(|beat| i64::from(s.tick - beat) * TICK >= fence_after)
    }

    /// Whether worker `w` may judge others: its beats renewed without a break for a whole liveness period.
    fn may_judge(s: &Sim, w: usize) -> bool {
        let worker = &s.workers[w];
        let liveness = Pace::of(LIVENESS).liveness.as_millis() as i64;
        worker.stalled.is_none() && i64::from(s.tick - worker.since) * TICK >= liveness
    }

    /// Each of `owners` renews its heartbeat now.
    fn beat(&self, n: &mut Sim, owners: &[String]) {
        let step = self.step(n, "clock");
        for owner in owners {
            block_on(step.store.heartbeat(owner)).unwrap();
        }
        self.absorb(n, &step, None);
    }

    fn index(&self, key: &EventKey) -> usize {
        self.keys.iter().position(|k| k == key).unwrap()
    }

    fn owner(s: &Sim, w: usize) -> String {
        format!("w{w}.{}", s.workers[w].life)
    }

    /// Whether worker `w` may take a claim: idle, and its heartbeat not stalled (a stalled worker's fence is up
    /// soon, and the model keeps its stall to the claim it held).
    fn free(s: &Sim, w: usize) -> bool {
        s.workers[w].pc == Pc::Idle && s.workers[w].stalled.is_none()
    }

    fn new_event(&self, e: usize, origin: Origin) -> NewEvent {
        NewEvent {
            key: self.keys[e].clone(),
            event_type: None,
            payload: bytes::Bytes::from_static(PAYLOAD),
            payload_sha256: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a".into(),
            headers: vec![],
            origin,
            resent_bodies: Default::default(),
        }
    }

    /// Worker `w`'s attempt of event `e`, cancelled by its fence: `run_claimed` wrote nothing before it waits for the
    /// fence to come down.
    fn cancelled(n: &mut Sim, step: &Step, s: &Sim, w: usize, e: usize, record: &Record) {
        assert_eq!(
            step.store.state(),
            s.store,
            "a fenced run_claimed wrote before it waited"
        );
        n.cancelled = true;
        n.workers[w].pc = Pc::Fenced {
            e,
            record: record.clone(),
        };
    }

    /// Takes back what a step did: the store's state, its messages, its settles (checked), and whether a
    /// COMPLETED event left that status.
    fn absorb(&self, n: &mut Sim, step: &Step, claimed: Option<&Record>) {
        let before = std::mem::replace(&mut n.store, step.store.state());
        for key in step.sent.0.lock().unwrap().drain(..) {
            let e = self.index(&key);
            n.messages[e] = (n.messages[e] + 1).min(MAX_MESSAGES);
        }
        for seen in step.ledger.settles.lock().unwrap().drain(..) {
            let e = self.index(&seen.key);
            if seen.settled == Settled::LeaseLost {
                n.lease_lost = true;
                continue;
            }
            let Some(found) = seen.before else {
                n.broken.insert(Broken::SettleNotOwn);
                continue;
            };
            let own = claimed.is_some_and(|c| c.attempts == found.attempts && c.replays == found.replays);
            if found.status != Status::Processing || !own {
                n.broken.insert(Broken::SettleNotOwn);
            }
            let attempt = Some((found.replays, found.attempts));
            if attempt <= n.last_settle[e] {
                n.broken.insert(Broken::TwoSettles);
            }
            n.last_settle[e] = attempt;
        }
        for key in &self.keys {
            let was = record(&before, key).map(|r| r.status);
            let is = record(&n.store, key).map(|r| r.status);
            if was == Some(Status::Completed) && is != Some(Status::Completed) {
                n.broken.insert(Broken::CompletedLeft);
            }
        }
    }

    /// Runs `run_claimed` for worker `w`'s claim, its handler answering `answer`; `probe`: whether the handler
    /// looks for its lease (the handle step) or only answers (the settle step). Whether the handler ran, whether
    /// its lease was held, and the outcome: `None` where `run_claimed` waits for the worker's fence to come down
    /// (it cancelled the handler), the one thing it may wait for here (the store never does).
    fn run_claimed(
        &self,
        step: &Step,
        record: &Record,
        answer: Answer,
        probe: bool,
    ) -> (bool, bool, Option<Outcome>) {
        let token = record.lease_owner.clone().unwrap();
        let now = step.world.now_ms();
        SCRIPT.with(|s| {
            *s.borrow_mut() = Script {
                answer: Some(answer),
                probe: probe.then(|| (step.store.clone(), token.clone(), now)),
                ran: false,
                held: false,
            }
        });
        let event = record.clone().with_payload(bytes::Bytes::from_static(PAYLOAD));
        let lease = step.machine.lease_for(&event.key());
        let outcome = block_on(async {
            let run = pin!(step.machine.run_claimed(event, &token, lease, || {}));
            poll_once(run).await.map(Result::unwrap)
        });
        assert!(
            outcome.is_some() || step.switch.is_raised(),
            "run_claimed waited, its fence down"
        );
        let script = SCRIPT.with(|s| std::mem::take(&mut *s.borrow_mut()));
        (script.ran, script.held, outcome)
    }

    /// The heartbeat renewed, a fenced worker's `run_claimed` goes on where it waited: the same call, polled once (it
    /// waits for the fence), then the fence comes down and it runs to its end; the handler must not run. Its outcome.
    fn give_back(&self, step: &Step, record: &Record) -> Outcome {
        let token = record.lease_owner.clone().unwrap();
        // No answer scripted: a handler that ran here would panic.
        SCRIPT.with(|s| *s.borrow_mut() = Script::default());
        let event = record.clone().with_payload(bytes::Bytes::from_static(PAYLOAD));
        let lease = step.machine.lease_for(&event.key());
        assert!(step.switch.is_raised(), "a fenced worker's fence is down");
        block_on(async {
            let mut run = pin!(step.machine.run_claimed(event, &token, lease, || {}));
            assert!(
                poll_once(run.as_mut()).await.is_none(),
                "run_claimed did not wait for the fence"
            );
            step.switch.set(false);
            run.await.unwrap()
        })
    }

    fn deliver(&self, s: &Sim, n: &mut Sim, e: usize, worker: Option<usize>) {
        n.delivered[e] += 1;
        let owner = worker.map_or_else(|| "receiver".to_owned(), |w| Self::owner(s, w));
        let step = self.step(s, &owner);
        let free = worker.map(|_| {
            Arc::new(FreeWorker {
                owner: step.machine.lease_owner(),
                lease: step.machine.lease_for(&self.keys[e]),
                handed: Mutex::default(),
            })
        });
        let intake = Intake {
            ledger: step.ledger.clone(),
            queue: step.sent.clone(),
            metrics: self.metrics.clone(),
            health: self.health.clone(),
            resend_grace: Duration::from_millis(TICK as u64),
            order: Order::WriteThenEnqueue,
            runner: free.clone().map(|f| f as Arc<dyn Runner>),
            world: step.world.clone(),
        };
        let source = self.sources.get("src").unwrap().clone();
        block_on(intake.take(&source, self.new_event(e, Origin::Webhook), None)).unwrap();
        if let (Some(w), Some(free)) = (worker, free) {
            if let Some(event) = free.handed.lock().unwrap().take() {
                n.workers[w].pc = Pc::Claimed {
                    e,
                    record: event.record,
                };
            }
        }
        self.absorb(n, &step, None);
    }

    /// One line of a state, for a counterexample's path: the clock, each event's record, messages, workers.
    fn summary(&self, s: &Sim) -> String {
        let mut line = format!("tick {}:", s.tick);
        for (e, key) in self.keys.iter().enumerate().take(self.bounds.events) {
            match record(&s.store, key) {
                None => line += &format!(" e{e} absent"),
                Some(r) => {
                    line += &format!(
                        " e{e} {:?} attempts {} replays {} owner {} until {}",
                        r.status,
                        r.attempts,
                        r.replays,
                        r.lease_owner.as_deref().unwrap_or("-"),
                        r.lease_until
                            .map_or("-".to_owned(), |u| ((u - T0) as f64 / TICK as f64).to_string())
                    )
                }
            }
            line += &format!(" ({} msg);", s.messages[e]);
        }
        for (w, worker) in s.workers.iter().enumerate() {
            line += &match &worker.pc {
                Pc::Idle => format!(" w{w} idle"),
                Pc::Claimed { e, record } => format!(" w{w} claimed e{e}#{}", record.attempts),
                Pc::Ran { e, record, answer } => format!(" w{w} ran e{e}#{} {answer:?}", record.attempts),
                Pc::Fenced { e, record } => format!(" w{w} cancelled e{e}#{}", record.attempts),
            };
            if self.bounds.heartbeats {
                line += &format!(" as {}", Self::owner(s, w));
            }
            if let Some(beat) = worker.stalled {
                line += &format!(
                    " (stalled, last beat at {beat}{})",
                    if Self::fence_up(s, w) { ", fenced" } else { "" }
                );
            }
            if !worker.listed.is_empty() {
                line += &format!(" (read gone: {})", worker.listed.join(", "));
            }
        }
        if self.bounds.heartbeats {
            let alive: Vec<_> = s
                .store
                .applied
                .owners
                .iter()
                .map(|(owner, until)| format!("{owner} {}", (until - T0) as f64 / TICK as f64))
                .collect();
            line += &format!(" alive until: {};", alive.join(", "));
        }
        if !s.broken.is_empty() {
            line += &format!(" BROKEN {:?}", s.broken);
        }
        line
    }

    /// Whether the system itself has a step to take (the liveness check's urgency): a first delivery, a claim, a
    /// handler, a settle, a sweep that changes the state. What the world may do and need not (a duplicate, a
    /// reconciliation, a crash, an owner declared gone, a dead letter, a replay, a message delivered twice) never
    /// holds the clock up, so that paths where it never happens are checked too.
    fn busy(&self, s: &Sim) -> bool {
        let mut actions = Vec::new();
        self.actions(s, &mut actions);
        actions
            .into_iter()
            .filter(|a| match a {
                Action::Deliver(e) | Action::DeliverClaimed(e, _) => s.delivered[*e] == 0,
                Action::Claim(..) | Action::Handle(..) | Action::Settle(_) | Action::Sweep => true,
                Action::Reconcile(_)
                | Action::Redeliver(_)
                | Action::Crash(_)
                | Action::DeclareGone(_)
                | Action::Stall(_)
                | Action::Resume(_)
                | Action::ListGone(_)
                | Action::EndLeases(_)
                | Action::DeadLetter(_)
                | Action::Replay(_)
                | Action::Tick => false,
            })
            .any(|a| self.next_state(s, a).is_some())
    }
}

impl Model for Inbox {
    type State = Sim;
    type Action = Action;

    fn init_states(&self) -> Vec<Sim> {
        let idle = Worker {
            life: 0,
            gone: false,
            pc: Pc::Idle,
            stalled: None,
            since: 0,
            listed: Vec::new(),
        };
        let mut sim = Sim {
            store: State::default(),
            tick: 0,
            messages: [0; EVENTS],
            workers: [idle.clone(), idle],
            delivered: [0; EVENTS],
            reconciled: false,
            crashes: 0,
            dead_letters: 0,
            replays: 0,
            redeliveries: 0,
            last_effect: [None; EVENTS],
            effects: [0; EVENTS],
            last_settle: [None; EVENTS],
            lease_lost: false,
            stalls: 0,
            judgments: 0,
            cancelled: false,
            live_owner_ended: false,
            broken: BTreeSet::new(),
        };
        if self.bounds.heartbeats {
            // Each worker beats as it starts.
            let owners: Vec<_> = (0..WORKERS).map(|w| Self::owner(&sim, w)).collect();
            self.beat(&mut sim, &owners);
        }
        vec![sim]
    }

    fn actions(&self, s: &Sim, actions: &mut Vec<Action>) {
        let b = &self.bounds;
        for e in 0..b.events {
            if s.delivered[e] < b.deliveries {
                actions.push(Action::Deliver(e));
                if b.claimed_creates {
                    for w in 0..WORKERS {
                        if Self::free(s, w) {
                            actions.push(Action::DeliverClaimed(e, w));
                        }
                    }
                }
            }
            if e == 0 && b.reconcile && !s.reconciled {
                actions.push(Action::Reconcile(e));
            }
            if s.messages[e] > 0 {
                for w in 0..WORKERS {
                    if Self::free(s, w) {
                        actions.push(Action::Claim(w, e));
                    }
                }
                if s.redeliveries < b.redeliveries {
                    actions.push(Action::Redeliver(e));
                }
                if s.dead_letters < b.dead_letters {
                    actions.push(Action::DeadLetter(e));
                }
            }
            if s.replays < b.replays {
                actions.push(Action::Replay(e));
            }
        }
        for w in 0..WORKERS {
            let worker = &s.workers[w];
            match worker.pc {
                Pc::Idle | Pc::Fenced { .. } => {}
                Pc::Claimed { .. } => {
                    for a in [Answer::Ok, Answer::Retryable, Answer::Permanent] {
                        actions.push(Action::Handle(w, a));
                    }
                }
                Pc::Ran { .. } => actions.push(Action::Settle(w)),
            }
            // Idle, a crash loses the queued messages still (the process that held the queue, or a receiver's
            // between its write and its enqueue).
            if s.crashes < b.crashes {
                actions.push(Action::Crash(w));
            }
            if !b.heartbeats && b.gone && worker.gone {
                actions.push(Action::DeclareGone(w));
            }
            if b.heartbeats {
                let holds = matches!(worker.pc, Pc::Claimed { .. } | Pc::Ran { .. });
                match worker.stalled {
                    None if holds && s.stalls < b.stalls => actions.push(Action::Stall(w)),
                    // A handler running as the fence went up was cancelled then: that step comes first.
                    Some(_) if !(holds && Self::fence_up(s, w)) => actions.push(Action::Resume(w)),
                    _ => {}
                }
                if !worker.listed.is_empty() {
                    actions.push(Action::EndLeases(w));
                } else if s.judgments < b.judgments && Self::may_judge(s, w) {
                    actions.push(Action::ListGone(w));
                }
            }
        }
        actions.push(Action::Sweep);
        if s.tick < b.ticks {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, s: &Sim, action: Action) -> Option<Sim> {
        let mut n = s.clone();
        match action {
            Action::Deliver(e) => self.deliver(s, &mut n, e, None),
            Action::DeliverClaimed(e, w) => self.deliver(s, &mut n, e, Some(w)),
            Action::Reconcile(e) => {
                n.reconciled = true;
                let step = self.step(s, "reconciler");
                // `Reconciler::recover`: the create (origin reconciled), and the message when it is new.
                let created = block_on(step.ledger.create(self.new_event(e, Origin::Reconciled))).unwrap();
                if matches!(created, Created::New | Created::Resent { .. }) {
                    block_on(step.sent.enqueue(&self.keys[e], Duration::ZERO)).unwrap();
                }
                self.absorb(&mut n, &step, None);
            }
            Action::Redeliver(e) => {
                n.redeliveries += 1;
                n.messages[e] = (n.messages[e] + 1).min(MAX_MESSAGES);
            }
            Action::Claim(w, e) => {
                n.messages[e] -= 1;
                let step = self.step(s, &Self::owner(s, w));
                let key = &self.keys[e];
                // `Machine::process_then`: a fresh token, the lease for the source, the claim.
                let token = step.machine.lease_owner();
                let lease = step.machine.lease_for(key);
                match block_on(step.ledger.claim(key, &token, lease)).unwrap() {
                    Claim::Claimed(event) => {
                        n.workers[w].pc = Pc::Claimed {
                            e,
                            record: event.record,
                        }
                    }
                    // Delivered again after its wait.
                    Claim::NotDue(_) => n.messages[e] = (n.messages[e] + 1).min(MAX_MESSAGES),
                    Claim::Done(_) | Claim::OwnedElsewhere | Claim::Missing => {}
                    Claim::Corrupt(..) => unreachable!("no body is lost in the model"),
                }
                self.absorb(&mut n, &step, None);
            }
            Action::Handle(w, answer) => {
                let Pc::Claimed { e, record } = &s.workers[w].pc else {
                    return None;
                };
                let step = self.worker_step(s, w);
                let (ran, held, outcome) = self.run_claimed(&step, record, answer, true);
                if ran {
                    assert!(outcome.is_some(), "run_claimed waited after its handler ran");
                    // The effect is done; what run_claimed wrote after it is the settle step's.
                    if !held {
                        n.broken.insert(Broken::EffectOutsideLease);
                    }
                    let attempt = Some((record.replays, record.attempts));
                    if attempt <= n.last_effect[*e] {
                        n.broken.insert(Broken::UncountedRepeat);
                    }
                    n.last_effect[*e] = attempt;
                    n.effects[*e] = (n.effects[*e] + 1).min(2);
                    n.workers[w].pc = Pc::Ran {
                        e: *e,
                        record: record.clone(),
                        answer,
                    };
                } else if let Some(outcome) = outcome {
                    // Ended without running the handler (the budget spent at the claim): as written.
                    assert!(
                        matches!(outcome, Outcome::Dead | Outcome::Dropped(Dropped::LeaseLost)),
                        "run_claimed ran no handler: {outcome:?}"
                    );
                    n.workers[w].pc = Pc::Idle;
                    self.absorb(&mut n, &step, Some(record));
                } else {
                    // The fence cancelled the handler before it ran: nothing written; it waits for the fence.
                    Self::cancelled(&mut n, &step, s, w, *e, record);
                }
            }
            Action::Settle(w) => {
                let Pc::Ran { e, record, answer } = &s.workers[w].pc else {
                    return None;
                };
                let step = self.worker_step(s, w);
                let (ran, _, outcome) = self.run_claimed(&step, record, *answer, false);
                let Some(outcome) = outcome else {
                    // The fence cancelled the handler after its effect, before it answered: as a crash there,
                    // and the lease given back once the fence is down.
                    assert!(!ran, "run_claimed waited after its handler ran");
                    Self::cancelled(&mut n, &step, s, w, *e, record);
                    return Some(n);
                };
                assert!(ran, "the settle step's run_claimed ran no handler: {outcome:?}");
                if let Outcome::Retry(_) = outcome {
                    // The worker sends the message again after the backoff.
                    n.messages[*e] = (n.messages[*e] + 1).min(MAX_MESSAGES);
                }
                n.workers[w].pc = Pc::Idle;
                self.absorb(&mut n, &step, Some(record));
            }
            Action::Crash(w) => {
                n.crashes += 1;
                n.messages = [0; EVENTS];
                let worker = &mut n.workers[w];
                worker.pc = Pc::Idle;
                worker.life += 1;
                if self.bounds.heartbeats {
                    // The new incarnation beats as it starts; the last one's heartbeat runs out on its own.
                    worker.stalled = None;
                    worker.since = s.tick;
                    worker.listed.clear();
                    let owner = Self::owner(&n, w);
                    self.beat(&mut n, &[owner]);
                } else {
                    worker.gone = true;
                }
            }
            Action::Stall(w) => {
                n.stalls += 1;
                // Its last beat was at this tick's start.
                n.workers[w].stalled = Some(s.tick);
            }
            Action::Resume(w) => {
                let step = self.worker_step(s, w);
                block_on(step.store.heartbeat(&Self::owner(s, w))).unwrap();
                let mut claimed = None;
                if let Pc::Fenced { e, record } = &s.workers[w].pc {
                    let outcome = self.give_back(&step, record);
                    assert_eq!(outcome, Outcome::Fenced, "a fenced run_claimed ended otherwise");
                    // The worker sends the message again once the fence is down.
                    n.messages[*e] = (n.messages[*e] + 1).min(MAX_MESSAGES);
                    n.workers[w].pc = Pc::Idle;
                    claimed = Some(record);
                }
                let worker = &mut n.workers[w];
                worker.stalled = None;
                worker.since = s.tick;
                self.absorb(&mut n, &step, claimed);
            }
            Action::ListGone(w) => {
                let me = Self::owner(s, w);
                let step = self.step(s, &me);
                let GoneOwners::These(owners) = block_on(step.store.gone_owners(&me)).unwrap() else {
                    panic!("a store kept with heartbeats names the owners it judges gone");
                };
                if owners.is_empty() {
                    return None;
                }
                n.judgments += 1;
                n.workers[w].listed = owners;
            }
            Action::EndLeases(w) => {
                let listed = std::mem::take(&mut n.workers[w].listed);
                let heartbeats = self.mutation != Mutation::TrustedList;
                let step = self.step_on(s, &Self::owner(s, w), heartbeats);
                block_on(step.store.end_leases(&GoneOwners::These(listed.clone()))).unwrap();
                let now = step.world.now_ms();
                if (0..WORKERS).any(|v| {
                    let live = Self::owner(s, v);
                    listed.contains(&live)
                        && leases(&step.store.state(), &live, now) < leases(&s.store, &live, now)
                }) {
                    n.live_owner_ended = true;
                }
                self.absorb(&mut n, &step, None);
            }
            Action::DeclareGone(w) => {
                n.workers[w].gone = false;
                let step = self.step(s, "sweeper");
                let last = format!("w{w}.{}", s.workers[w].life - 1);
                block_on(step.store.end_leases(&GoneOwners::These(vec![last]))).unwrap();
                self.absorb(&mut n, &step, None);
            }
            Action::Sweep => {
                let step = self.step(s, "sweeper");
                block_on(step.machine.sweep(step.sent.as_ref(), 100)).unwrap();
                self.absorb(&mut n, &step, None);
            }
            Action::DeadLetter(e) => {
                n.messages[e] -= 1;
                n.dead_letters += 1;
                let step = self.step(s, "alarm");
                let marked = block_on(step.machine.mark_dead(&self.keys[e], "redriven")).unwrap();
                if let MarkDead::Leased(_) = marked {
                    // The dead-letter message comes back after the lease.
                    n.messages[e] = (n.messages[e] + 1).min(MAX_MESSAGES);
                }
                self.absorb(&mut n, &step, None);
            }
            Action::Replay(e) => {
                let step = self.step(s, "operator");
                if block_on(step.ledger.replay(&self.keys[e], false)).unwrap() == Replay::Replayed {
                    n.replays += 1;
                }
                self.absorb(&mut n, &step, None);
            }
            Action::Tick => {
                // The handler starts in its claim's tick, but a stalled worker's may take effect until its timeout
                // (the lease less twice the margin); urgency: the clock waits for everything else.
                let next = T0 + i64::from(s.tick + 1) * TICK;
                let held = s.workers.iter().any(|w| match &w.pc {
                    Pc::Claimed { record, .. } => {
                        w.stalled.is_none()
                            || next >= record.lease_until.unwrap() - 2 * LEASE_MARGIN.as_millis() as i64
                    }
                    _ => false,
                });
                if held || (self.bounds.urgent && self.busy(s)) {
                    return None;
                }
                n.tick += 1;
                if self.bounds.heartbeats {
                    let owners: Vec<_> = (0..WORKERS)
                        .filter(|w| n.workers[*w].stalled.is_none())
                        .map(|w| Self::owner(&n, w))
                        .collect();
                    self.beat(&mut n, &owners);
                }
            }
        }
        (n != *s).then_some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        fn kept(s: &Sim, b: Broken) -> bool {
            !s.broken.contains(&b)
        }
        fn status(m: &Inbox, s: &Sim, e: usize) -> Option<Status> {
            record(&s.store, &m.keys[e]).map(|r| r.status)
        }
        let mut properties = vec![
            Property::always("never two settles of one attempt", |_, s: &Sim| {
                kept(s, Broken::TwoSettles)
            }),
            Property::always(
                "a settle lands only on its own attempt (never COMPLETED over a newer one)",
                |_, s: &Sim| kept(s, Broken::SettleNotOwn),
            ),
            Property::always("COMPLETED is final (never DEAD over COMPLETED)", |_, s: &Sim| {
                kept(s, Broken::CompletedLeft)
            }),
            Property::always("an effect only inside a held lease", |_, s: &Sim| {
                kept(s, Broken::EffectOutsideLease)
            }),
            Property::always(
                "a repeated effect is a counted attempt (a crash repeat)",
                |_, s: &Sim| kept(s, Broken::UncountedRepeat),
            ),
            // That the model reaches what the properties are about (a check of nothing would pass).
            Property::sometimes("reach: every event COMPLETED", |m: &Inbox, s: &Sim| {
                (0..m.bounds.events).all(|e| status(m, s, e) == Some(Status::Completed))
            }),
            Property::sometimes("reach: an event DEAD", |m: &Inbox, s: &Sim| {
                (0..EVENTS).any(|e| status(m, s, e) == Some(Status::Dead))
            }),
            Property::sometimes(
                "reach: a handler run twice for one event (a crash, a lease run out)",
                |_, s: &Sim| s.effects.iter().any(|n| *n > 1),
            ),
        ];
        if self.bounds.urgent {
            properties.push(Property::eventually(
                "every accepted event eventually COMPLETED or DEAD",
                |m: &Inbox, s: &Sim| {
                    (0..m.bounds.events)
                        .all(|e| matches!(status(m, s, e), Some(Status::Completed | Status::Dead)))
                },
            ));
        } else {
            properties.push(Property::sometimes(
                "reach: a settle refused for a lost lease",
                |_, s: &Sim| s.lease_lost,
            ));
        }
        if self.bounds.heartbeats {
            properties.push(Property::sometimes(
                "reach: a handler cancelled by its fence",
                |_, s: &Sim| s.cancelled,
            ));
            properties.push(Property::sometimes(
                "reach: a stalled owner's leases ended by another",
                |_, s: &Sim| s.live_owner_ended,
            ));
        }
        if self.bounds.replays > 0 {
            properties.push(Property::sometimes(
                "reach: a replayed event COMPLETED",
                |_, s: &Sim| {
                    s.store
                        .applied
                        .events
                        .values()
                        .any(|x| x.record.replays > 0 && x.record.status == Status::Completed)
                },
            ));
        }
        properties
    }
}

/// Runs the checker on `bounds`: breadth first, to the end; prints the figures; asserts that it finished, that
/// every property holds (and every "reach" was reached), and that it explored at least `floor` states.
///
/// Wider bounds, by hand: `MODEL_TICKS`, `MODEL_CRASHES`, `MODEL_MAX_ATTEMPTS`, `MODEL_DELIVERIES`,
/// `MODEL_RECONCILE` (0 or 1), `MODEL_DEAD_LETTERS` (e.g. `MODEL_TICKS=3`); a defect put back, `MODEL_MUTATION`
/// ([`Mutation`]).
fn check(name: &str, mut bounds: Bounds, floor: usize) {
    let env = |name: &str| std::env::var(name).ok().map(|v| v.parse::<u8>().unwrap());
    if let Some(t) = env("MODEL_TICKS") {
        bounds.ticks = t;
    }
    if let Some(v) = env("MODEL_CRASHES") {
        bounds.crashes = v;
    }
    if let Some(v) = env("MODEL_DELIVERIES") {
        bounds.deliveries = v;
    }
    if let Some(v) = env("MODEL_RECONCILE") {
        bounds.reconcile = v > 0;
    }
    if let Some(v) = env("MODEL_DEAD_LETTERS") {
        bounds.dead_letters = v;
    }
    if let Some(v) = env("MODEL_MAX_ATTEMPTS") {
        bounds.max_attempts = v.into();
    }
    let mutation = Mutation::from_env();
    let budget = Duration::from_secs(600);
    let started = Instant::now();
    let checker = Inbox::new(bounds.clone(), mutation)
        .checker()
        .threads(2)
        .timeout(budget)
        .spawn_bfs()
        .join();
    let took = started.elapsed();
    println!(
        "model check {name}{}: {} states, {} unique, max depth {}, {:.1} s ({bounds:?})",
        match mutation {
            Mutation::None => String::new(),
            m => format!(" (mutation {m:?})"),
        },
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        took.as_secs_f64()
    );
    assert!(
        took < budget,
        "the model check timed out after {took:?}: it did not finish"
    );
    assert!(checker.is_done());
    for property in checker.model().properties() {
        if property.expectation != stateright::Expectation::Sometimes
            && checker.discovery(property.name).is_some()
        {
            // A run to the end keeps the last path it found to a latched violation, often a long one: a run that
            // stops at the first shows a short one.
            first_counterexample(&bounds, mutation, property.name);
        }
    }
    checker.assert_properties();
    assert!(
        checker.unique_state_count() >= floor,
        "only {} states: the model checked less than it should",
        checker.unique_state_count()
    );
}

/// Prints the path to `property`'s counterexample, if the checker found one; whether it did.
fn print_violation(checker: &impl Checker<Inbox>, property: &Property<Inbox>) -> bool {
    let model = checker.model();
    let Some(path) = checker.discovery(property.name) else {
        return false;
    };
    println!("VIOLATED: {}; a path to it:", property.name);
    for (state, action) in path.into_vec() {
        println!("  {}", model.summary(&state));
        let always = property.expectation == stateright::Expectation::Always;
        if always && !(property.condition)(model, &state) {
            break;
        }
        if let Some(action) = action {
            println!("- {action:?}");
        }
    }
    true
}

/// Runs the checker on `bounds` until it finds a counterexample to `property`, breadth first (so a short one, up to
/// how its two threads share one depth's states), and prints its path; whether it found one.
fn first_counterexample(bounds: &Bounds, mutation: Mutation, property: &'static str) -> bool {
    let started = Instant::now();
    let checker = Inbox::new(bounds.clone(), mutation)
        .checker()
        .threads(2)
        .finish_when(stateright::HasDiscoveries::AnyOf(BTreeSet::from([property])))
        .spawn_bfs()
        .join();
    println!(
        "model check to a first counterexample (mutation {mutation:?}): {} states, {} unique, max depth {}, {:.1} s",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed().as_secs_f64()
    );
    let property = checker
        .model()
        .properties()
        .into_iter()
        .find(|p| p.name == property)
        .expect("a property of the model");
    print_violation(&checker, &property)
}

/// Asserts that with `mutation`, the stalled-owner scenario has a counterexample to `property`: the check can fail,
/// and fails on what the mutation puts back.
fn caught(mutation: Mutation, property: &'static str) {
    assert!(
        first_counterexample(&Bounds::stalled_owner(), mutation, property),
        "with {mutation:?}, the check found no counterexample to {property:?}"
    );
}

#[test]
fn safety_creation_races() {
    check("creation races", Bounds::creation_races(), 15_000);
}

#[test]
fn safety_dead_letters_and_replays() {
    check(
        "dead letters and replays",
        Bounds::dead_letters_and_replays(),
        30_000,
    );
}

#[test]
fn safety_two_events() {
    check("two events", Bounds::two_events(), 40_000);
}

#[test]
fn safety_stalled_owner() {
    check("stalled owner", Bounds::stalled_owner(), 10_000);
}

/// Without the fence, a stalled owner's handler takes effect after another owner ended its lease.
#[test]
fn a_stalled_owner_without_its_fence_is_caught() {
    caught(Mutation::NoFence, "an effect only inside a held lease");
}

/// Trusting the list of gone owners, an owner that beat since it was read loses the lease it holds.
#[test]
fn a_trusted_list_of_gone_owners_is_caught() {
    caught(Mutation::TrustedList, "an effect only inside a held lease");
}

#[test]
fn every_accepted_event_ends_completed_or_dead() {
    check("liveness", Bounds::liveness(), 50_000);
}
