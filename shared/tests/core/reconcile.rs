//! Reconciliation against local fakes of the providers' APIs (`testkit::providers`: axum on 127.0.0.1:0,
//! following the documented shapes), over every store (`memory::`, `sqlite::`, `dynamodb::` with the `aws`
//! feature) and the in-process queue.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use inbox_core::clock::SystemClock;
use inbox_core::config::{Config, GithubHook, ProviderConfig, ReconcileConfig, SecretRef};
use inbox_core::contract::Harness;
use inbox_core::model::{Event, EventId, EventKey, NewEvent, Origin, SourceName};
use inbox_core::ports::{Checkpoint, Created, FailedEvent, Ledger, ListFilter};
use inbox_core::reconcile::github::{Auth, Github};
use inbox_core::reconcile::stripe::Stripe;
use inbox_core::reconcile::{Provider, Reconciler, RunErrorKind, RunOptions, Summary};
use inbox_core::serve::{Deliveries, InProcessQueue};
use inbox_core::time::{now_ms, rfc3339};
use serde_json::json;
// The fakes of the providers' APIs (with their documentation citations) are shared with the AWS tests.
use inbox_core::ports::{Browse, Checkpoints};
use testkit::providers::{
    github_deliveries, stripe_events_over, Delivery, FakeGithub, FakeStripe, LOOKBACK, SETTLE,
};

use crate::ledger::every_store;
use crate::ledger::refusing::Refusing;

const HOUR_MS: i64 = 3_600_000;

fn source(name: &str) -> SourceName {
    SourceName::parse(name).unwrap()
}

// ---------------------------------------------------------------------------------------------------------------
// The store of each test: one of every kind (`every_store!`), on the system's clock (the fakes' events are on the
// wall clock), which a test may make refuse creates.

async fn store(h: &dyn Harness) -> Refusing {
    Refusing::new(h.open_on(Duration::from_secs(30), Arc::new(SystemClock)).await)
}

impl Refusing {
    async fn ids(&self, source: &SourceName) -> BTreeSet<String> {
        let filter = ListFilter {
            source: Some(source.clone()),
            limit: 1_000_000,
            ..Default::default()
        };
        let events = self.list(&filter).await.unwrap();
        events.iter().map(|e| e.event_id.as_str().to_owned()).collect()
    }
    async fn event(&self, source: &SourceName, id: &str) -> Event {
        let key = EventKey::new(source.clone(), EventId::parse(id).unwrap());
        self.get(&key).await.unwrap().unwrap()
    }
}

/// What a webhook delivered earlier: stored as the receiver stores it.
async fn deliver(ledger: &dyn Ledger, source: &SourceName, id: &str, body: &str) {
    let created = ledger
        .create(NewEvent {
            key: EventKey::new(source.clone(), EventId::parse(id).unwrap()),
            event_type: Some("delivered".into()),
            payload: bytes::Bytes::from(body.to_owned()),
            payload_sha256: format!("sha-of-{id}"),
            headers: vec![],
            origin: Origin::Webhook,
            resent_bodies: Default::default(),
        })
        .await
        .unwrap();
    assert_eq!(created, Created::New);
}

fn drain(deliveries: &mut Deliveries) -> Vec<EventKey> {
    std::iter::from_fn(|| deliveries.try_next()).collect()
}

fn base(url: &str) -> reqwest::Url {
    reqwest::Url::parse(url).unwrap()
}

fn stripe(url: &str, key: &str) -> Arc<dyn Provider> {
    Arc::new(Stripe::new(base(url), key.into(), None).unwrap())
}

/// The ids created in `[now − lookback, now − settle)`, asserting none is within a few seconds of an edge, where
/// the run's clock and the test's would disagree.
fn in_window(events: &[(String, i64)], lookback: Duration, settle: Duration) -> BTreeSet<String> {
    let now = now_ms();
    let (from, to) = (now - lookback.as_millis() as i64, now - settle.as_millis() as i64);
    for (id, at) in events {
        assert!(
            (at - from).abs() > 5_000 && (at - to).abs() > 5_000,
            "{id} at {} is too close to an edge of the window",
            rfc3339(*at)
        );
    }
    events
        .iter()
        .filter(|(_, at)| from <= *at && *at < to)
        .map(|(id, _)| id.clone())
        .collect()
}

fn no_progress() -> impl FnMut(&inbox_core::reconcile::Progress) + Send {
    |_| {}
}

/// A run with the default options and no progress shown, as most tests here make one.
trait RunOnce {
    async fn once(
        &self,
        ledger: &dyn inbox_core::ports::Store,
        queue: &dyn inbox_core::ports::Queue,
    ) -> Result<Summary, inbox_core::reconcile::RunError>;
}

impl RunOnce for Reconciler {
    async fn once(
        &self,
        ledger: &dyn inbox_core::ports::Store,
        queue: &dyn inbox_core::ports::Queue,
    ) -> Result<Summary, inbox_core::reconcile::RunError> {
        self.run(ledger, queue, RunOptions::default(), &mut no_progress())
            .await
    }
}

fn github(url: &str, token: &str) -> Arc<dyn Provider> {
    let hook: GithubHook = "repos/octo/hello/hooks/1".parse().unwrap();
    Arc::new(Github::new(base(url), hook, Auth::token(token.into())).unwrap())
}

every_store!(
    stripe_one_run_recovers_exactly_the_window,
    github_one_run_recovers_every_missing_guid_with_its_event_name,
    rate_limits_are_waited_out,
    a_failure_mid_walk_keeps_the_checkpoint_and_the_next_run_leaves_no_gap,
    bad_credentials_are_a_clear_error_naming_the_source,
    at_steady_state_a_run_rereads_only_the_overlap,
    a_dry_run_creates_enqueues_and_saves_nothing,
    stripe_connect_sends_the_account_and_from_config_resolves_the_key,
    github_a_delivery_whose_detail_fails_is_kept_and_recovered_by_a_later_run,
    stripe_an_event_the_ledger_refuses_is_kept_and_fetched_alone_later,
    kept_events_older_than_the_lookback_are_given_up_and_older_checkpoints_still_read,
    more_failures_than_a_checkpoint_keeps_end_the_run_with_the_checkpoint_unchanged,
);

async fn stripe_one_run_recovers_exactly_the_window(h: &dyn Harness) {
    // GIVEN 260 events over 80 hours, three of them younger than the settle time, every third already delivered as
    // a webhook (some of those before the window).
    let s = source("stripe");
    let mut events = stripe_events_over(257, 80 * HOUR_MS, "");
    for (i, age_s) in [150, 60, 20].into_iter().enumerate() {
        events.push((
            format!("evt_young{i}"),
            now_ms() / 1000 - age_s,
            "invoice.created".into(),
        ));
    }
    let fake = FakeStripe::new(events.clone());
    let url = fake.start().await;
    let ledger = store(h).await;
    let mut delivered = BTreeSet::new();
    for (id, _, _) in events.iter().step_by(3) {
        deliver(&ledger, &s, id, "{\"webhook\":true}").await;
        delivered.insert(id.clone());
    }
    let (queue, mut deliveries) = InProcessQueue::new(10_000);
    let reconciler = Reconciler::new(
        s.clone(),
        "stripe",
        stripe(&url, "sk_test_good"),
        LOOKBACK,
        SETTLE,
    );

    // WHEN one run goes over it
    let mut fractions = Vec::new();
    let summary = reconciler
        .run(&ledger, queue.as_ref(), RunOptions::default(), &mut |p| {
            fractions.push(p.fraction())
        })
        .await
        .unwrap();

    // THEN the ledger holds the delivered ones plus exactly those created in [now − 72h, now − 5m)
    let created: Vec<_> = events.iter().map(|(id, at, _)| (id.clone(), at * 1000)).collect();
    let wanted = in_window(&created, LOOKBACK, SETTLE);
    let expected: BTreeSet<_> = wanted.union(&delivered).cloned().collect();
    assert_eq!(ledger.ids(&s).await, expected);
    let already = wanted.intersection(&delivered).count() as u64;
    assert_eq!(
        (summary.listed, summary.present, summary.recovered, summary.failed),
        (wanted.len() as u64, already, wanted.len() as u64 - already, 0)
    );
    // … each recovered one enqueued once, stored as the listed event object with its type
    let enqueued = drain(&mut deliveries);
    assert_eq!(enqueued.len() as u64, summary.recovered);
    assert_eq!(enqueued.iter().collect::<HashSet<_>>().len(), enqueued.len());
    let some = wanted.difference(&delivered).next().unwrap();
    let stored = ledger.event(&s, some).await;
    assert_eq!(stored.origin, Origin::Reconciled);
    let body: serde_json::Value = serde_json::from_slice(&stored.payload).unwrap();
    assert_eq!(body["id"], json!(some));
    assert_eq!(stored.event_type.as_deref(), Some("invoice.paid"));
    // … and the checkpoint reached the window's end, with the run recorded.
    let cp = ledger.checkpoint(&s).await.unwrap().unwrap();
    assert!((cp.scanned_to - (now_ms() - SETTLE.as_millis() as i64)).abs() < 60_000);
    assert_eq!(cp.last_run.unwrap().recovered, summary.recovered);
    assert_eq!(summary.pages, (wanted.len() as u64).div_ceil(100), "pages of 100");
    assert!(wanted.len() < 257 && !wanted.contains("evt_young0"));
    assert_eq!(fractions.last().copied(), Some(1.0));
    println!(
        "stripe: 260 events over 80 h, {} delivered; listed {}, already stored {}, recovered {}, requests {}",
        delivered.len(),
        summary.listed,
        summary.present,
        summary.recovered,
        summary.requests
    );
}

async fn github_one_run_recovers_every_missing_guid_with_its_event_name(h: &dyn Harness) {
    // GIVEN 150 events over 80 hours, delivered 1-3 times each (failed attempts first), a fifth already stored
    let s = source("gh");
    let deliveries = github_deliveries(150, 80 * HOUR_MS);
    let fake = FakeGithub::new(deliveries.clone(), false);
    let url = fake.start().await;
    let ledger = store(h).await;
    let guids: BTreeSet<String> = deliveries.iter().map(|d| d.guid.clone()).collect();
    let delivered: BTreeSet<String> = guids.iter().step_by(5).cloned().collect();
    for g in &delivered {
        deliver(&ledger, &s, g, "{}").await;
    }
    let (queue, mut enqueued) = InProcessQueue::new(10_000);
    let reconciler = Reconciler::new(s.clone(), "github", github(&url, "ghp_good"), LOOKBACK, SETTLE);

    // WHEN one run goes over it
    let summary = reconciler.once(&ledger, queue.as_ref()).await.unwrap();

    // THEN every guid with a delivery in the window that the ledger lacked is there, counted once, typed
    let at: Vec<_> = deliveries.iter().map(|d| (d.guid.clone(), d.at_ms)).collect();
    let wanted = in_window(&at, LOOKBACK, SETTLE);
    let expected: BTreeSet<_> = wanted.union(&delivered).cloned().collect();
    assert_eq!(ledger.ids(&s).await, expected);
    let already = wanted.intersection(&delivered).count() as u64;
    assert_eq!(
        summary.listed,
        wanted.len() as u64,
        "a guid counts once however often it was delivered"
    );
    assert_eq!(
        (summary.present, summary.recovered),
        (already, wanted.len() as u64 - already)
    );
    assert_eq!(drain(&mut enqueued).len() as u64, summary.recovered);
    assert_eq!(
        fake.detail_requests.load(Ordering::SeqCst) as u64,
        summary.recovered,
        "one detail per recovered guid"
    );
    for g in wanted.difference(&delivered) {
        let d = deliveries.iter().find(|d| &d.guid == g).unwrap();
        let stored = ledger.event(&s, g).await;
        assert_eq!(stored.origin, Origin::Reconciled);
        assert_eq!(stored.event_type.as_deref(), Some(d.event.as_str()));
        assert!(stored
            .headers
            .contains(&("x-github-event".into(), d.event.clone())));
        let body: serde_json::Value = serde_json::from_slice(&stored.payload).unwrap();
        assert_eq!(body["guid"], json!(g));
    }
    // The walk stopped at the first page past the window: deliveries span 80 h, the window 72 h.
    assert!(summary.pages < (deliveries.len() as u64).div_ceil(100) + 1);
    println!(
        "github: 150 guids / {} deliveries over 80 h; listed {}, already stored {}, recovered {}, pages {}, requests {}",
        deliveries.len(),
        summary.listed,
        summary.present,
        summary.recovered,
        summary.pages,
        summary.requests
    );
}

async fn rate_limits_are_waited_out(h: &dyn Harness) {
    // Stripe: two 429s with Retry-After: 1.
    let s = source("stripe");
    let fake = FakeStripe::new(stripe_events_over(150, 24 * HOUR_MS, ""));
    fake.faults.lock().unwrap().rate_limited = 2;
    let url = fake.start().await;
    let ledger = store(h).await;
    let (queue, _d) = InProcessQueue::new(10_000);
    let started = std::time::Instant::now();
    let summary = Reconciler::new(
        s.clone(),
        "stripe",
        stripe(&url, "sk_test_good"),
        LOOKBACK,
        SETTLE,
    )
    .once(&ledger, queue.as_ref())
    .await
    .unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "waited Retry-After twice"
    );
    assert_eq!(summary.recovered, 150);
    assert_eq!(summary.requests, 4, "2 rate-limited + 2 pages");

    // GitHub: a 403 with X-RateLimit-Remaining: 0 and X-RateLimit-Reset a second ahead.
    let g = source("gh");
    let fake = FakeGithub::new(github_deliveries(20, 24 * HOUR_MS), false);
    fake.faults.lock().unwrap().rate_limited = 1;
    let url = fake.start().await;
    let started = std::time::Instant::now();
    let summary = Reconciler::new(g.clone(), "github", github(&url, "ghp_good"), LOOKBACK, SETTLE)
        .once(&ledger, queue.as_ref())
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "waited until the reset"
    );
    assert_eq!(summary.recovered, 20);

    // A wait past the run's time budget ends the run instead, checkpoint unchanged.
    let h = source("gh2");
    let fake = FakeGithub::new(github_deliveries(20, 24 * HOUR_MS), false);
    fake.faults.lock().unwrap().rate_limited = 1;
    let url = fake.start().await;
    let err = Reconciler::new(h.clone(), "github", github(&url, "ghp_good"), LOOKBACK, SETTLE)
        .with_budget(inbox_core::reconcile::Budget {
            time: Duration::from_millis(100),
            pages: 10,
        })
        .once(&ledger, queue.as_ref())
        .await
        .unwrap_err();
    assert!(matches!(err.kind, RunErrorKind::RateLimited(_)), "{err}");
    let cp = ledger.checkpoint(&h).await.unwrap().unwrap();
    assert_eq!(cp.scanned_to, 0);
    assert!(cp.last_run.unwrap().error.unwrap().contains("rate limited"));
}

async fn a_failure_mid_walk_keeps_the_checkpoint_and_the_next_run_leaves_no_gap(h: &dyn Harness) {
    // GIVEN a first complete run over 100 events, settle 0 so events a second old are listed
    let s = source("stripe");
    let fake = FakeStripe::new(stripe_events_over(100, 24 * HOUR_MS, "a"));
    let url = fake.start().await;
    let ledger = store(h).await;
    let (queue, _d) = InProcessQueue::new(10_000);
    let reconciler = Reconciler::new(
        s.clone(),
        "stripe",
        stripe(&url, "sk_test_good"),
        LOOKBACK,
        Duration::ZERO,
    );
    reconciler.once(&ledger, queue.as_ref()).await.unwrap();
    let before = ledger.checkpoint(&s).await.unwrap().unwrap();

    // WHEN 250 events arrive that no webhook delivered, from just before the checkpoint up to now, and the next
    // run meets a 500 on its second page
    let now = now_ms();
    let fresh: Vec<_> = (0..250)
        .map(|i| {
            (
                format!("evt_b{i:05}"),
                (now - 240_000 + i * 900) / 1000,
                "charge.succeeded".to_owned(),
            )
        })
        .collect();
    fake.add(fresh.clone());
    let served = fake.requests();
    fake.faults.lock().unwrap().fail_request = Some(served + 2);
    let err = reconciler.once(&ledger, queue.as_ref()).await.unwrap_err();

    // THEN the run says so, the checkpoint has not moved, the failed run is recorded
    assert!(matches!(err.kind, RunErrorKind::Provider(_)), "{err}");
    assert!(err.to_string().contains("stripe"), "{err}");
    let after = ledger.checkpoint(&s).await.unwrap().unwrap();
    assert_eq!(after.scanned_to, before.scanned_to);
    let record = after.last_run.unwrap();
    assert!(record.error.unwrap().contains("500"));
    assert_eq!(
        record.recovered, 100,
        "the first page was recovered before the failure"
    );

    // … and the next run recovers the rest: no gap.
    let summary = reconciler.once(&ledger, queue.as_ref()).await.unwrap();
    assert_eq!(summary.recovered, 150);
    let ids = ledger.ids(&s).await;
    assert!(fresh.iter().all(|(id, _, _)| ids.contains(id)));
    assert!(ledger.checkpoint(&s).await.unwrap().unwrap().scanned_to > before.scanned_to);
}

async fn bad_credentials_are_a_clear_error_naming_the_source(h: &dyn Harness) {
    let ledger = store(h).await;
    let (queue, _d) = InProcessQueue::new(100);

    let fake = FakeStripe::new(stripe_events_over(10, HOUR_MS * 2, ""));
    let url = fake.start().await;
    let err = Reconciler::new(
        source("payments"),
        "stripe",
        stripe(&url, "sk_test_WRONGKEY"),
        LOOKBACK,
        SETTLE,
    )
    .once(&ledger, queue.as_ref())
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err.kind, RunErrorKind::BadCredentials { .. }), "{text}");
    assert!(
        text.contains("payments") && text.contains("stripe") && text.contains("401"),
        "{text}"
    );
    assert!(!text.contains("WRONGKEY"), "{text}");
    println!("{text}");

    let fake = FakeGithub::new(github_deliveries(5, HOUR_MS * 2), false);
    let url = fake.start().await;
    let err = Reconciler::new(
        source("repo-hooks"),
        "github",
        github(&url, "ghp_WRONGTOKEN"),
        LOOKBACK,
        SETTLE,
    )
    .once(&ledger, queue.as_ref())
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err.kind, RunErrorKind::BadCredentials { .. }), "{text}");
    assert!(
        text.contains("repo-hooks") && !text.contains("WRONGTOKEN"),
        "{text}"
    );
    println!("{text}");

    // A GitHub 403 without rate-limit headers is a refusal, not a wait.
    let fake = FakeGithub::new(github_deliveries(5, HOUR_MS * 2), true);
    let url = fake.start().await;
    let err = Reconciler::new(
        source("org-hooks"),
        "github",
        github(&url, "ghp_good"),
        LOOKBACK,
        SETTLE,
    )
    .once(&ledger, queue.as_ref())
    .await
    .unwrap_err();
    assert!(matches!(err.kind, RunErrorKind::BadCredentials { .. }), "{err}");
    assert_eq!(fake.requests.load(Ordering::SeqCst), 1, "no retry of a refusal");
}

async fn at_steady_state_a_run_rereads_only_the_overlap(h: &dyn Harness) {
    // GIVEN 10,000 events in the 72 h window
    let s = source("stripe");
    let fake = FakeStripe::new(stripe_events_over(10_000, 71 * HOUR_MS, ""));
    let url = fake.start().await;
    let ledger = store(h).await;
    let (queue, _d) = InProcessQueue::new(20_000);
    let reconciler = Reconciler::new(
        s.clone(),
        "stripe",
        stripe(&url, "sk_test_good"),
        LOOKBACK,
        SETTLE,
    );

    // WHEN the first run and nine more run
    let mut runs: Vec<Summary> = Vec::new();
    for _ in 0..10 {
        let before = fake.requests();
        let summary = reconciler.once(&ledger, queue.as_ref()).await.unwrap();
        assert_eq!(summary.requests as usize, fake.requests() - before);
        runs.push(summary);
    }

    // THEN the first reads every page, later ones only the overlap below the checkpoint
    assert_eq!(runs[0].recovered, runs[0].listed);
    assert!(runs[0].listed > 9_950, "{:?}", runs[0]);
    assert_eq!(runs[0].requests, 100);
    for later in &runs[1..] {
        assert_eq!(later.requests, 1, "{later:?}");
        assert!(later.listed < 100, "{later:?}");
        assert_eq!(later.recovered, 0);
    }
    println!(
        "steady state, 10,000 events in the window: run 1 {} requests ({} listed), run 10 {} requests ({} listed); \
         ledger existence reads: run 1 {}, run 10 {}",
        runs[0].requests,
        runs[0].listed,
        runs[9].requests,
        runs[9].listed,
        runs[0].existence_reads,
        runs[9].existence_reads
    );
}

async fn a_dry_run_creates_enqueues_and_saves_nothing(h: &dyn Harness) {
    let s = source("stripe");
    let fake = FakeStripe::new(stripe_events_over(30, 10 * HOUR_MS, ""));
    let url = fake.start().await;
    let ledger = store(h).await;
    let (queue, mut deliveries) = InProcessQueue::new(100);
    let summary = Reconciler::new(
        s.clone(),
        "stripe",
        stripe(&url, "sk_test_good"),
        LOOKBACK,
        SETTLE,
    )
    .run(
        &ledger,
        queue.as_ref(),
        RunOptions {
            dry_run: true,
            since: None,
        },
        &mut no_progress(),
    )
    .await
    .unwrap();
    assert_eq!((summary.listed, summary.recovered), (30, 30));
    assert!(summary.dry_run);
    assert!(ledger.ids(&s).await.is_empty());
    assert!(drain(&mut deliveries).is_empty());
    assert_eq!(ledger.checkpoint(&s).await.unwrap(), None);
}

async fn stripe_connect_sends_the_account_and_from_config_resolves_the_key(h: &dyn Harness) {
    struct Env;
    #[async_trait]
    impl inbox_core::secrets::SecretResolver for Env {
        async fn resolve(&self, r: &SecretRef) -> Result<String, inbox_core::secrets::SecretError> {
            match r {
                SecretRef::Env(n) if n == "KEY" => Ok("sk_test_good\n".into()),
                _ => Err(inbox_core::secrets::SecretError::EnvNotSet),
            }
        }
    }
    let fake = FakeStripe::new(stripe_events_over(3, HOUR_MS, ""));
    let url = fake.start().await;
    let mut config = ReconcileConfig {
        provider: ProviderConfig::Stripe {
            api_key: SecretRef::Env("KEY".into()),
            account: Some("acct_123".into()),
        },
        interval: Duration::from_secs(60),
        lookback: LOOKBACK,
        settle: SETTLE,
        api_base: base(&url),
    };
    let s = source("connect");
    let reconciler = Reconciler::from_config(&s, &config, &Env).await.unwrap();
    let ledger = store(h).await;
    let (queue, _d) = InProcessQueue::new(100);
    let summary = reconciler.once(&ledger, queue.as_ref()).await.unwrap();
    assert_eq!(summary.recovered, 3);
    assert_eq!(
        fake.accounts.lock().unwrap().as_slice(),
        &[Some("acct_123".to_owned())]
    );

    // A credential that does not resolve names the field, not a value.
    config.provider = ProviderConfig::Stripe {
        api_key: SecretRef::Env("MISSING".into()),
        account: None,
    };
    let err = Reconciler::from_config(&s, &config, &Env).await.err().unwrap();
    assert_eq!(err.field, "sources.connect.reconcile.api_key");
}

// ---------------------------------------------------------------------------------------------------------------
// Never a handler twice: no run looks further back than the ledger remembers.

#[test]
fn a_lookback_longer_than_retention_is_refused_at_start_naming_both() {
    let config = |retention_days: u32, block: &str| {
        Config::from_toml(&format!(
            "retention_days = {retention_days}\n\
             [sources.gh]\nscheme = \"github\"\nsecrets = [\"env:GH_SECRET\"]\nhandler = {{ kind = \"log\" }}\n\
             [sources.gh.reconcile]\nprovider = \"github\"\nhook = \"repos/octo/hello/hooks/1\"\n\
             token = \"env:GH_TOKEN\"\n{block}"
        ))
    };
    // GIVEN retention_days = 1 and GitHub's default lookback of 72 h THEN the start fails, naming both.
    let err = config(1, "").unwrap_err();
    assert_eq!(err.field, "sources.gh.reconcile.lookback", "{err}");
    let text = err.to_string();
    assert!(
        text.contains("lookback") && text.contains("retention_days (1)") && text.contains("3days"),
        "{text}"
    );
    println!("{text}");
    let err = config(2, "lookback = \"49h\"").unwrap_err();
    assert_eq!(err.field, "sources.gh.reconcile.lookback", "{err}");
    // A lookback within retention, to the hour, starts.
    assert!(config(1, "lookback = \"24h\"").is_ok());
    assert!(config(3, "").is_ok());
}

// ---------------------------------------------------------------------------------------------------------------
// One event that cannot be recovered fails alone and is tried again by the next runs.

/// The deliveries of `guid`, as the fake lists them.
fn ids_of(deliveries: &[Delivery], guid: &str) -> HashSet<u64> {
    deliveries
        .iter()
        .filter(|d| d.guid == guid)
        .map(|d| d.id)
        .collect()
}

async fn github_a_delivery_whose_detail_fails_is_kept_and_recovered_by_a_later_run(h: &dyn Harness) {
    // GIVEN 30 events over 24 hours, none delivered as a webhook; of two older ones, one's detail answers 404 and
    // the other's carries no payload (newest first, so every later delivery is listed before them)
    let s = source("gh");
    let deliveries = github_deliveries(30, 24 * HOUR_MS);
    let fake = FakeGithub::new(deliveries.clone(), false);
    let url = fake.start().await;
    let guids: Vec<String> = {
        let mut seen = HashSet::new();
        deliveries
            .iter()
            .filter(|d| seen.insert(d.guid.clone()))
            .map(|d| d.guid.clone())
            .collect()
    };
    let (gone, empty) = (guids[20].clone(), guids[25].clone());
    fake.missing.lock().unwrap().extend(ids_of(&deliveries, &gone));
    fake.without_payload
        .lock()
        .unwrap()
        .extend(ids_of(&deliveries, &empty));
    let ledger = store(h).await;
    let (queue, mut enqueued) = InProcessQueue::new(10_000);
    let reconciler = Reconciler::new(s.clone(), "github", github(&url, "ghp_good"), LOOKBACK, SETTLE);
    let run = || async { reconciler.once(&ledger, queue.as_ref()).await };

    // WHEN a run meets them
    let first = run().await.unwrap();

    // THEN every other event is recovered, the two are counted failed and kept, and the checkpoint advanced
    let all: BTreeSet<String> = guids.iter().cloned().collect();
    let failed: BTreeSet<String> = [gone.clone(), empty.clone()].into();
    assert_eq!(ledger.ids(&s).await, &all - &failed);
    assert_eq!(
        (first.listed, first.recovered, first.failed, first.kept),
        (30, 28, 2, 2),
        "{first:?}"
    );
    assert_eq!(drain(&mut enqueued).len(), 28);
    let cp = ledger.checkpoint(&s).await.unwrap().unwrap();
    assert!((cp.scanned_to - (now_ms() - SETTLE.as_millis() as i64)).abs() < 60_000);
    let kept: BTreeSet<String> = cp.failed.iter().map(|f| f.id.as_str().to_owned()).collect();
    assert_eq!(kept, failed);
    for f in &cp.failed {
        // What the detail is found by: the newest delivery of the guid, the one the walk met first.
        let newest = deliveries
            .iter()
            .filter(|d| d.guid == f.id.as_str())
            .max_by_key(|d| d.at_ms)
            .unwrap();
        assert_eq!(f.handle, newest.id.to_string());
        assert_eq!(f.attempts, 1);
    }

    // WHEN the next run comes while the details still fail (both far below its window's overlap)
    let details = fake.detail_requests.load(Ordering::SeqCst);
    let second = run().await.unwrap();
    // THEN it asks for the two again, alone, and keeps them
    assert_eq!(
        (second.retried, second.failed, second.kept, second.recovered),
        (2, 2, 2, 0),
        "{second:?}"
    );
    assert_eq!(fake.detail_requests.load(Ordering::SeqCst) - details, 2);
    let cp = ledger.checkpoint(&s).await.unwrap().unwrap();
    assert!(cp.failed.iter().all(|f| f.attempts == 2), "{:?}", cp.failed);

    // WHEN GitHub serves them again THEN the next run recovers both, once, and keeps nothing
    fake.missing.lock().unwrap().clear();
    fake.without_payload.lock().unwrap().clear();
    let third = run().await.unwrap();
    assert_eq!(
        (third.retried, third.recovered, third.failed, third.kept),
        (2, 2, 0, 0),
        "{third:?}"
    );
    assert_eq!(ledger.ids(&s).await, all);
    let mut keys: Vec<String> = drain(&mut enqueued)
        .iter()
        .map(|k| k.event_id.as_str().to_owned())
        .collect();
    keys.sort();
    assert_eq!(keys, failed.iter().cloned().collect::<Vec<_>>());
    for g in &failed {
        let stored = ledger.event(&s, g).await;
        assert_eq!(stored.origin, Origin::Reconciled);
        let d = deliveries.iter().find(|d| &d.guid == g).unwrap();
        assert_eq!(stored.event_type.as_deref(), Some(d.event.as_str()));
        let body: serde_json::Value = serde_json::from_slice(&stored.payload).unwrap();
        assert_eq!(body["guid"], json!(g));
    }
    assert!(ledger.checkpoint(&s).await.unwrap().unwrap().failed.is_empty());
    let details = fake.detail_requests.load(Ordering::SeqCst);
    let fourth = run().await.unwrap();
    assert_eq!((fourth.retried, fourth.recovered), (0, 0), "{fourth:?}");
    assert_eq!(fake.detail_requests.load(Ordering::SeqCst), details);
}

async fn stripe_an_event_the_ledger_refuses_is_kept_and_fetched_alone_later(h: &dyn Harness) {
    // GIVEN 150 events over 24 hours, and a ledger file that refuses to insert one of the older ones
    let s = source("stripe");
    let events = stripe_events_over(150, 24 * HOUR_MS, "");
    let refused = events[100].0.clone();
    let fake = FakeStripe::new(events.clone());
    let url = fake.start().await;
    let ledger = store(h).await;
    let refused_id = refused.clone();
    ledger.refuse(move |e| e.key.event_id.as_str() == refused_id);
    let (queue, mut enqueued) = InProcessQueue::new(10_000);
    let reconciler = Reconciler::new(
        s.clone(),
        "stripe",
        stripe(&url, "sk_test_good"),
        LOOKBACK,
        SETTLE,
    );
    let run = || async { reconciler.once(&ledger, queue.as_ref()).await };

    // WHEN a run meets it THEN the other 149 are recovered, it is kept, and the checkpoint advanced
    let first = run().await.unwrap();
    assert_eq!(
        (first.listed, first.recovered, first.failed, first.kept),
        (150, 149, 1, 1),
        "{first:?}"
    );
    assert_eq!(drain(&mut enqueued).len(), 149);
    assert!(!ledger.ids(&s).await.contains(&refused));
    let cp = ledger.checkpoint(&s).await.unwrap().unwrap();
    assert!((cp.scanned_to - (now_ms() - SETTLE.as_millis() as i64)).abs() < 60_000);
    assert_eq!(cp.failed.len(), 1);
    assert_eq!(
        (cp.failed[0].id.as_str(), cp.failed[0].handle.as_str()),
        (refused.as_str(), refused.as_str())
    );
    assert_eq!(cp.failed[0].created_ms, events[100].1 * 1000);
    assert!(
        fake.retrieved.lock().unwrap().is_empty(),
        "the list carries the events"
    );

    // WHEN the ledger takes it again but Stripe answers 404 for it THEN it stays kept, tried once more
    ledger.accept();
    fake.missing.lock().unwrap().insert(refused.clone());
    let second = run().await.unwrap();
    assert_eq!(
        (second.retried, second.failed, second.kept),
        (1, 1, 1),
        "{second:?}"
    );
    assert_eq!(
        ledger.checkpoint(&s).await.unwrap().unwrap().failed[0].attempts,
        2
    );

    // WHEN Stripe serves it THEN the next run fetches it alone, GET /v1/events/{id}, and stores it as listed
    fake.missing.lock().unwrap().clear();
    let third = run().await.unwrap();
    assert_eq!(
        (third.retried, third.recovered, third.kept),
        (1, 1, 0),
        "{third:?}"
    );
    assert_eq!(
        fake.retrieved.lock().unwrap().as_slice(),
        &[refused.clone(), refused.clone()]
    );
    assert_eq!(
        drain(&mut enqueued)
            .iter()
            .map(|k| k.event_id.as_str().to_owned())
            .collect::<Vec<_>>(),
        [refused.as_str()]
    );
    let stored = ledger.event(&s, &refused).await;
    assert_eq!(stored.origin, Origin::Reconciled);
    assert_eq!(stored.event_type.as_deref(), Some("invoice.paid"));
    let body: serde_json::Value = serde_json::from_slice(&stored.payload).unwrap();
    assert_eq!(body["id"], json!(refused));
    assert_eq!(ledger.ids(&s).await.len(), 150);
    assert!(ledger.checkpoint(&s).await.unwrap().unwrap().failed.is_empty());
}

async fn kept_events_older_than_the_lookback_are_given_up_and_older_checkpoints_still_read(h: &dyn Harness) {
    let s = source("stripe");
    let ledger = store(h).await;
    // GIVEN a checkpoint stored before failed events were kept THEN it reads, keeping none
    let scanned_to = now_ms() - SETTLE.as_millis() as i64;
    h.store_checkpoint_json(&s, &format!("{{\"scanned_to\":{scanned_to},\"last_run\":null}}"))
        .await;
    let old = ledger.checkpoint(&s).await.unwrap().unwrap();
    assert_eq!((old.scanned_to, old.failed.len()), (scanned_to, 0));

    // GIVEN it keeps two failed events: one created 80 h ago, past the 72 h lookback, and one 10 h ago, below the
    // next window (which starts at the checkpoint less the overlap), that Stripe serves
    let now = now_ms();
    let recent = ("evt_recent".to_owned(), (now - 10 * HOUR_MS) / 1000);
    let fake = FakeStripe::new(vec![(recent.0.clone(), recent.1, "charge.refunded".to_owned())]);
    let url = fake.start().await;
    let kept = |id: &str, created_ms: i64| FailedEvent {
        id: EventId::parse(id).unwrap(),
        handle: id.to_owned(),
        created_ms,
        event_type: None,
        attempts: 3,
    };
    let checkpoint = Checkpoint {
        failed: vec![
            kept(&recent.0, recent.1 * 1000),
            kept("evt_ancient", now - 80 * HOUR_MS),
        ],
        ..old
    };
    ledger.save_checkpoint(&s, &checkpoint).await.unwrap();
    let (queue, _d) = InProcessQueue::new(100);

    // WHEN a run comes
    let summary = Reconciler::new(
        s.clone(),
        "stripe",
        stripe(&url, "sk_test_good"),
        LOOKBACK,
        SETTLE,
    )
    .once(&ledger, queue.as_ref())
    .await
    .unwrap();

    // THEN the old one is given up unasked (nothing past the lookback is looked for), the other recovered
    assert_eq!(
        (
            summary.listed,
            summary.given_up,
            summary.retried,
            summary.recovered,
            summary.kept
        ),
        (0, 1, 1, 1, 0),
        "{summary:?}"
    );
    assert_eq!(*fake.retrieved.lock().unwrap(), [recent.0.as_str()]);
    assert_eq!(
        ledger.event(&s, &recent.0).await.event_type.as_deref(),
        Some("charge.refunded")
    );
    assert!(ledger.checkpoint(&s).await.unwrap().unwrap().failed.is_empty());
}

async fn more_failures_than_a_checkpoint_keeps_end_the_run_with_the_checkpoint_unchanged(h: &dyn Harness) {
    // GIVEN 600 events and a ledger that refuses every insert: no isolated item but one cause failing them all
    let s = source("stripe");
    let fake = FakeStripe::new(stripe_events_over(600, 24 * HOUR_MS, ""));
    let url = fake.start().await;
    let ledger = store(h).await;
    ledger.refuse(|_| true);
    let (queue, _d) = InProcessQueue::new(10_000);
    let reconciler = Reconciler::new(
        s.clone(),
        "stripe",
        stripe(&url, "sk_test_good"),
        LOOKBACK,
        SETTLE,
    );
    let err = reconciler.once(&ledger, queue.as_ref()).await.unwrap_err();
    // THEN the run ends once past the bound, saying so, and gives none up: the checkpoint has not moved
    assert!(
        matches!(err.kind, RunErrorKind::TooManyFailed(n) if n == inbox_core::reconcile::MAX_FAILED_KEPT + 1),
        "{err}"
    );
    let cp = ledger.checkpoint(&s).await.unwrap().unwrap();
    assert_eq!((cp.scanned_to, cp.failed.len()), (0, 0));
    assert!(cp
        .last_run
        .unwrap()
        .error
        .unwrap()
        .contains("could not be stored"));
    // … and once the cause is gone the next run recovers all of them.
    ledger.accept();
    let summary = reconciler.once(&ledger, queue.as_ref()).await.unwrap();
    assert_eq!((summary.recovered, summary.kept), (600, 0));
}

/// GIVEN two instances on one PostgreSQL database (two store handles, each with its own queue), 150 Stripe events
///   in the window, none delivered, and the webhooks of 40 of them arriving while reconciliation runs
/// WHEN both instances run reconciliation of the source at the same moment (as two that each believe they lead
///   would), while those webhooks are stored through either instance
/// THEN every event is stored once, by exactly one of the three writers: the runs' `recovered` and the webhooks
///   answered as new add up to the events, no id is enqueued twice across the instances, and the one checkpoint
///   row reaches the window's end.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_two_instances_reconciling_at_once_while_webhooks_arrive_store_each_event_once() {
    let Some(h) = crate::ledger::postgres::PostgresHarness::start().await else {
        return;
    };
    let s = source("stripe");
    let events = stripe_events_over(150, 60 * HOUR_MS, "");
    let fake = FakeStripe::new(events.clone());
    let url = fake.start().await;
    let clock: Arc<dyn inbox_core::clock::Clock> = Arc::new(SystemClock);
    let stores = [
        Arc::new(h.store(Duration::from_secs(30), Some(clock.clone())).await),
        Arc::new(h.store(Duration::from_secs(30), Some(clock)).await),
    ];
    let created: Vec<_> = events.iter().map(|(id, at, _)| (id.clone(), at * 1000)).collect();
    let wanted = in_window(&created, LOOKBACK, SETTLE);
    let webhooks: Vec<String> = wanted.iter().step_by(3).take(40).cloned().collect();

    let mut runs = Vec::new();
    let mut queues = Vec::new();
    for store in &stores {
        let (queue, deliveries) = InProcessQueue::new(10_000);
        queues.push(deliveries);
        let reconciler = Reconciler::new(
            s.clone(),
            "stripe",
            stripe(&url, "sk_test_good"),
            LOOKBACK,
            SETTLE,
        );
        let store = store.clone();
        runs.push(tokio::spawn(async move {
            reconciler.once(store.as_ref(), queue.as_ref()).await.unwrap()
        }));
    }
    let mut arriving = Vec::new();
    for (i, id) in webhooks.iter().enumerate() {
        let store = stores[i % 2].clone();
        let key = EventKey::new(s.clone(), EventId::parse(id).unwrap());
        arriving.push(tokio::spawn(async move {
            let event = NewEvent {
                key,
                event_type: Some("invoice.paid".into()),
                payload: bytes::Bytes::from_static(b"{\"webhook\":true}"),
                payload_sha256: "sha-of-the-webhook".into(),
                headers: vec![],
                origin: Origin::Webhook,
                resent_bodies: Default::default(),
            };
            store.create(event).await.unwrap()
        }));
    }
    let mut recovered = 0;
    for run in runs {
        let summary = run.await.unwrap();
        assert_eq!((summary.listed, summary.failed), (wanted.len() as u64, 0));
        recovered += summary.recovered;
    }
    let mut webhook_new = 0;
    for created in arriving {
        match created.await.unwrap() {
            Created::New => webhook_new += 1,
            Created::Duplicate { .. } => {}
            other => panic!("a webhook answered {other:?}"),
        }
    }

    let stored = h.sql("SELECT 1 FROM events WHERE source = 'stripe'").await;
    assert_eq!(stored, wanted.len() as u64, "every event stored once");
    assert_eq!(
        recovered + webhook_new,
        wanted.len() as u64,
        "each event created by exactly one writer (recovered {recovered}, webhooks new {webhook_new})"
    );
    let mut enqueued: Vec<EventKey> = queues.iter_mut().flat_map(drain).collect();
    assert_eq!(
        enqueued.len() as u64,
        recovered,
        "each recovered event enqueued by the run that created it"
    );
    enqueued.sort_by(|a, b| a.event_id.as_str().cmp(b.event_id.as_str()));
    enqueued.dedup();
    assert_eq!(
        enqueued.len() as u64,
        recovered,
        "an event enqueued by both instances"
    );
    assert_eq!(h.sql("SELECT 1 FROM checkpoints").await, 1);
    let cp = stores[0].checkpoint(&s).await.unwrap().unwrap();
    assert!((cp.scanned_to - (now_ms() - SETTLE.as_millis() as i64)).abs() < 60_000);
    println!(
        "two instances reconciling at once: {} events, recovered {recovered}, webhooks new {webhook_new} of {}",
        wanted.len(),
        webhooks.len()
    );
    h.finish_now().await;
}
