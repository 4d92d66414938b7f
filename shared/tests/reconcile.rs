//! Reconciliation against local fakes of the providers' APIs (`testkit::providers`: axum on 127.0.0.1:0,
//! following the documented shapes), on the real SQLite ledger and the in-process queue.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use inbox_core::adapters::sqlite::SqliteLedger;
use inbox_core::config::{GithubHook, ProviderConfig, ReconcileConfig, SecretRef};
use inbox_core::embedded::{Deliveries, InProcessQueue};
use inbox_core::model::{Event, EventId, EventKey, NewEvent, Origin, SourceName};
use inbox_core::ports::{Created, Ledger, ListFilter};
use inbox_core::reconcile::github::{Auth, Github};
use inbox_core::reconcile::stripe::Stripe;
use inbox_core::reconcile::{Provider, Reconciler, RunErrorKind, RunOptions, Summary};
use inbox_core::time::{now_ms, rfc3339};
use serde_json::json;
// The fakes of the providers' APIs (with their documentation citations) are shared with the AWS tests.
use testkit::providers::{github_deliveries, stripe_events_over, FakeGithub, FakeStripe, LOOKBACK, SETTLE};

const HOUR_MS: i64 = 3_600_000;

fn source(name: &str) -> SourceName {
    SourceName::parse(name).unwrap()
}

// ---------------------------------------------------------------------------------------------------------------
// The real SQLite ledger on a temp dir.

struct Store {
    ledger: SqliteLedger,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for Store {
    type Target = SqliteLedger;
    fn deref(&self) -> &SqliteLedger {
        &self.ledger
    }
}

fn store() -> Store {
    let dir = tempfile::tempdir().unwrap();
    let ledger = SqliteLedger::open(dir.path(), 1024, Duration::from_secs(30)).unwrap();
    Store { ledger, _dir: dir }
}

impl Store {
    async fn ids(&self, source: &SourceName) -> BTreeSet<String> {
        let filter = ListFilter {
            source: Some(source.clone()),
            limit: 1_000_000,
            ..Default::default()
        };
        let events = self.ledger.list(&filter).await.unwrap();
        events.iter().map(|e| e.event_id.as_str().to_owned()).collect()
    }
    async fn event(&self, source: &SourceName, id: &str) -> Event {
        let key = EventKey::new(source.clone(), EventId::parse(id).unwrap());
        self.ledger.get(&key).await.unwrap().unwrap()
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
            unique_body_for: None,
            announced: false,
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

fn github(url: &str, token: &str) -> Arc<dyn Provider> {
    let hook: GithubHook = "repos/octo/hello/hooks/1".parse().unwrap();
    Arc::new(Github::new(base(url), hook, Auth::token(token.into())).unwrap())
}

#[tokio::test]
async fn stripe_one_run_recovers_exactly_the_window() {
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
    let ledger = store();
    let mut delivered = BTreeSet::new();
    for (id, _, _) in events.iter().step_by(3) {
        deliver(&*ledger, &s, id, "{\"webhook\":true}").await;
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
        .run(&*ledger, queue.as_ref(), RunOptions::default(), &mut |p| {
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

#[tokio::test]
async fn github_one_run_recovers_every_missing_guid_with_its_event_name() {
    // GIVEN 150 events over 80 hours, delivered 1-3 times each (failed attempts first), a fifth already stored
    let s = source("gh");
    let deliveries = github_deliveries(150, 80 * HOUR_MS);
    let fake = FakeGithub::new(deliveries.clone(), false);
    let url = fake.start().await;
    let ledger = store();
    let guids: BTreeSet<String> = deliveries.iter().map(|d| d.guid.clone()).collect();
    let delivered: BTreeSet<String> = guids.iter().step_by(5).cloned().collect();
    for g in &delivered {
        deliver(&*ledger, &s, g, "{}").await;
    }
    let (queue, mut enqueued) = InProcessQueue::new(10_000);
    let reconciler = Reconciler::new(s.clone(), "github", github(&url, "ghp_good"), LOOKBACK, SETTLE);

    // WHEN one run goes over it
    let summary = reconciler
        .run(
            &*ledger,
            queue.as_ref(),
            RunOptions::default(),
            &mut no_progress(),
        )
        .await
        .unwrap();

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

#[tokio::test]
async fn rate_limits_are_waited_out() {
    // Stripe: two 429s with Retry-After: 1.
    let s = source("stripe");
    let fake = FakeStripe::new(stripe_events_over(150, 24 * HOUR_MS, ""));
    fake.faults.lock().unwrap().rate_limited = 2;
    let url = fake.start().await;
    let ledger = store();
    let (queue, _d) = InProcessQueue::new(10_000);
    let started = std::time::Instant::now();
    let summary = Reconciler::new(
        s.clone(),
        "stripe",
        stripe(&url, "sk_test_good"),
        LOOKBACK,
        SETTLE,
    )
    .run(
        &*ledger,
        queue.as_ref(),
        RunOptions::default(),
        &mut no_progress(),
    )
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
        .run(
            &*ledger,
            queue.as_ref(),
            RunOptions::default(),
            &mut no_progress(),
        )
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
        .run(
            &*ledger,
            queue.as_ref(),
            RunOptions::default(),
            &mut no_progress(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err.kind, RunErrorKind::RateLimited(_)), "{err}");
    let cp = ledger.checkpoint(&h).await.unwrap().unwrap();
    assert_eq!(cp.scanned_to, 0);
    assert!(cp.last_run.unwrap().error.unwrap().contains("rate limited"));
}

#[tokio::test]
async fn a_failure_mid_walk_keeps_the_checkpoint_and_the_next_run_leaves_no_gap() {
    // GIVEN a first complete run over 100 events, settle 0 so events a second old are listed
    let s = source("stripe");
    let fake = FakeStripe::new(stripe_events_over(100, 24 * HOUR_MS, "a"));
    let url = fake.start().await;
    let ledger = store();
    let (queue, _d) = InProcessQueue::new(10_000);
    let reconciler = Reconciler::new(
        s.clone(),
        "stripe",
        stripe(&url, "sk_test_good"),
        LOOKBACK,
        Duration::ZERO,
    );
    reconciler
        .run(
            &*ledger,
            queue.as_ref(),
            RunOptions::default(),
            &mut no_progress(),
        )
        .await
        .unwrap();
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
    let err = reconciler
        .run(
            &*ledger,
            queue.as_ref(),
            RunOptions::default(),
            &mut no_progress(),
        )
        .await
        .unwrap_err();

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
    let summary = reconciler
        .run(
            &*ledger,
            queue.as_ref(),
            RunOptions::default(),
            &mut no_progress(),
        )
        .await
        .unwrap();
    assert_eq!(summary.recovered, 150);
    let ids = ledger.ids(&s).await;
    assert!(fresh.iter().all(|(id, _, _)| ids.contains(id)));
    assert!(ledger.checkpoint(&s).await.unwrap().unwrap().scanned_to > before.scanned_to);
}

#[tokio::test]
async fn bad_credentials_are_a_clear_error_naming_the_source() {
    let ledger = store();
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
    .run(
        &*ledger,
        queue.as_ref(),
        RunOptions::default(),
        &mut no_progress(),
    )
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
    .run(
        &*ledger,
        queue.as_ref(),
        RunOptions::default(),
        &mut no_progress(),
    )
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
    .run(
        &*ledger,
        queue.as_ref(),
        RunOptions::default(),
        &mut no_progress(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err.kind, RunErrorKind::BadCredentials { .. }), "{err}");
    assert_eq!(fake.requests.load(Ordering::SeqCst), 1, "no retry of a refusal");
}

#[tokio::test]
async fn at_steady_state_a_run_rereads_only_the_overlap() {
    // GIVEN 10,000 events in the 72 h window
    let s = source("stripe");
    let fake = FakeStripe::new(stripe_events_over(10_000, 71 * HOUR_MS, ""));
    let url = fake.start().await;
    let ledger = store();
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
        let summary = reconciler
            .run(
                &*ledger,
                queue.as_ref(),
                RunOptions::default(),
                &mut no_progress(),
            )
            .await
            .unwrap();
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

#[tokio::test]
async fn a_dry_run_creates_enqueues_and_saves_nothing() {
    let s = source("stripe");
    let fake = FakeStripe::new(stripe_events_over(30, 10 * HOUR_MS, ""));
    let url = fake.start().await;
    let ledger = store();
    let (queue, mut deliveries) = InProcessQueue::new(100);
    let summary = Reconciler::new(
        s.clone(),
        "stripe",
        stripe(&url, "sk_test_good"),
        LOOKBACK,
        SETTLE,
    )
    .run(
        &*ledger,
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

#[tokio::test]
async fn stripe_connect_sends_the_account_and_from_config_resolves_the_key() {
    struct Env;
    #[async_trait]
    impl inbox_core::source::SecretResolver for Env {
        async fn resolve(&self, r: &SecretRef) -> Result<String, String> {
            match r {
                SecretRef::Env(n) if n == "KEY" => Ok("sk_test_good\n".into()),
                _ => Err("the environment variable is not set".into()),
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
    let ledger = store();
    let (queue, _d) = InProcessQueue::new(100);
    let summary = reconciler
        .run(
            &*ledger,
            queue.as_ref(),
            RunOptions::default(),
            &mut no_progress(),
        )
        .await
        .unwrap();
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
