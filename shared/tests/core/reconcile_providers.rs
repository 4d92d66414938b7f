//! Every provider behind [`testkit::providers::Fake`], through the same run: its pages walked to the end of the
//! window, the payload stored in its webhook's shape, its rate limit waited out, its refusal of a wrong credential
//! named, and a 500 in the middle of a walk leaving the checkpoint where it was. The fakes follow each provider's
//! published API description (cited in each fake's file); the ledger is the real SQLite one.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use inbox_core::config::Config;
use inbox_core::model::{EventId, EventKey, NewEvent, Origin, SourceName};
use inbox_core::ports::{Browse, Checkpoints, Created, Ledger, ListFilter};
use inbox_core::reconcile::{Reconciler, RunErrorKind, RunOptions, Summary};
use inbox_core::secrets::LocalSecrets;
use inbox_core::serve::InProcessQueue;
use inbox_core::stores::sqlite::SqliteLedger;
use testkit::providers::{events_over, fakes, source_config, Event, Fake};

const HOUR_MS: i64 = 3_600_000;

/// One provider's fake served, and a reconciler for a source of its scheme reading it.
struct Case {
    fake: Arc<dyn Fake>,
    source: SourceName,
    reconciler: Reconciler,
    /// The credential values the reconciler was given, which no error may hold.
    credentials: Vec<String>,
}

/// `prefix` names the credentials' variables (tests run at once in one process: each its own names).
async fn case(fake: Arc<dyn Fake>, prefix: &str, wrong: bool) -> Case {
    let url = fake.clone().start();
    let provider = fake.provider();
    let prefix = format!("{prefix}_{}", provider.to_uppercase());
    let written = source_config(fake.as_ref(), &prefix, &url, "{ kind = \"log\" }", "", wrong);
    for (name, value) in written.env() {
        std::env::set_var(name, value);
    }
    let toml = written.toml.as_str();
    let config = Config::from_toml(toml).unwrap_or_else(|e| panic!("{provider}: {e}\n{toml}"));
    let source = SourceName::parse(provider).unwrap();
    let block = config.sources[&source].reconcile.as_ref().unwrap();
    let reconciler = Reconciler::from_config(&source, block, &LocalSecrets)
        .await
        .unwrap_or_else(|e| panic!("{provider}: {e}"));
    Case {
        fake,
        source,
        reconciler,
        credentials: written.credentials.into_iter().map(|(_, v)| v).collect(),
    }
}

fn ledger() -> (SqliteLedger, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let ledger = SqliteLedger::open(dir.path(), 1024, Duration::from_secs(30)).unwrap();
    (ledger, dir)
}

async fn ids(ledger: &SqliteLedger, source: &SourceName) -> BTreeSet<String> {
    let filter = ListFilter {
        source: Some(source.clone()),
        limit: 1_000_000,
        ..Default::default()
    };
    let events = ledger.list(&filter).await.unwrap();
    events.iter().map(|e| e.event_id.as_str().to_owned()).collect()
}

/// What a webhook delivered earlier, stored as the receiver stores it.
async fn delivered(ledger: &dyn Ledger, source: &SourceName, fake: &dyn Fake, event: &Event) {
    let body = fake.webhook(event).body;
    let created = ledger
        .create(NewEvent {
            key: EventKey::new(source.clone(), EventId::parse(&event.id).unwrap()),
            event_type: Some(event.event_type.clone()),
            payload_sha256: format!("sha-of-{}", event.id),
            payload: bytes::Bytes::from(body),
            headers: vec![],
            origin: Origin::Webhook,
            resent_bodies: Default::default(),
        })
        .await
        .unwrap();
    assert_eq!(created, Created::New, "{}", fake.provider());
}

async fn run(case: &Case, ledger: &SqliteLedger) -> Result<Summary, inbox_core::reconcile::RunError> {
    let (queue, _deliveries) = InProcessQueue::new(100_000);
    case.reconciler
        .run(ledger, queue.as_ref(), RunOptions::default(), &mut |_| {})
        .await
}

/// GIVEN each provider's API with two and a half pages of events over 48 hours, a third of them delivered already
/// WHEN a run lists the window, and a second run follows
/// THEN the first walks every page and recovers exactly the rest, each stored in the shape its webhook carries,
/// with its type, as reconciled; the second recovers nothing.
#[tokio::test(flavor = "multi_thread")]
async fn every_provider_walks_its_pages_and_stores_its_webhooks_shape() {
    for fake in fakes() {
        let c = case(fake, "WALK", false).await;
        let provider = c.fake.provider();
        let n = c.fake.page_size() * 5 / 2;
        let events = events_over(c.fake.as_ref(), n, 48 * HOUR_MS, 0);
        c.fake.api().add_all(events.clone());
        let (ledger, _dir) = ledger();
        for e in events.iter().step_by(3) {
            delivered(&ledger, &c.source, c.fake.as_ref(), e).await;
        }
        let first = run(&c, &ledger)
            .await
            .unwrap_or_else(|e| panic!("{provider}: {e}"));
        let delivered_count = events.len().div_ceil(3) as u64;
        assert_eq!(first.listed, n as u64, "{provider}: {first:?}");
        assert_eq!(first.present, delivered_count, "{provider}: {first:?}");
        assert_eq!(
            first.recovered,
            n as u64 - delivered_count,
            "{provider}: {first:?}"
        );
        assert_eq!(first.failed, 0, "{provider}: {first:?}");
        assert!(first.pages >= 3, "{provider}: walked {} pages", first.pages);
        let want: BTreeSet<String> = events.iter().map(|e| e.id.clone()).collect();
        assert_eq!(ids(&ledger, &c.source).await, want, "{provider}");
        for e in events.iter().skip(1).step_by(3) {
            let key = EventKey::new(c.source.clone(), EventId::parse(&e.id).unwrap());
            let stored = ledger.get(&key).await.unwrap().unwrap();
            assert_eq!(stored.origin, Origin::Reconciled, "{provider} {}", e.id);
            let payload: serde_json::Value = serde_json::from_slice(&stored.payload)
                .unwrap_or_else(|err| panic!("{provider} {}: not JSON: {err}", e.id));
            assert_eq!(
                payload,
                c.fake.stored(e),
                "{provider} {}: not the webhook's shape",
                e.id
            );
            assert!(stored.event_type.is_some(), "{provider} {}: no type", e.id);
        }
        let second = run(&c, &ledger).await.unwrap();
        assert_eq!(second.recovered, 0, "{provider}: {second:?}");
        assert!(second.listed <= first.listed, "{provider}: {second:?}");
    }
}

/// GIVEN each provider's API refusing the credentials the block names
/// WHEN a run starts
/// THEN it ends with a bad-credentials error naming the source and the provider, holding no credential, and
/// stores nothing.
#[tokio::test(flavor = "multi_thread")]
async fn every_provider_names_a_refused_credential_without_showing_it() {
    for fake in fakes() {
        let c = case(fake, "WRONG", true).await;
        let provider = c.fake.provider();
        c.fake
            .api()
            .add_all(events_over(c.fake.as_ref(), 5, 10 * HOUR_MS, 0));
        let (ledger, _dir) = ledger();
        let error = run(&c, &ledger).await.expect_err(provider);
        assert!(
            matches!(error.kind, RunErrorKind::BadCredentials { .. }),
            "{provider}: {error}"
        );
        let text = error.to_string();
        assert!(
            text.contains(c.source.as_str()) && text.contains(provider),
            "{text}"
        );
        for secret in &c.credentials {
            assert!(
                !text.contains(secret.as_str()),
                "{provider}: the error shows a credential: {text}"
            );
        }
        assert!(ids(&ledger, &c.source).await.is_empty(), "{provider}");
    }
}

/// GIVEN each provider's API answering its first two requests with its own rate-limit answer and headers
/// WHEN a run lists the window
/// THEN it waits as told and recovers every event.
#[tokio::test(flavor = "multi_thread")]
async fn every_provider_waits_out_its_rate_limit() {
    for fake in fakes() {
        let c = case(fake, "LIMIT", false).await;
        let provider = c.fake.provider();
        let events = events_over(c.fake.as_ref(), 7, 10 * HOUR_MS, 0);
        c.fake.api().add_all(events.clone());
        c.fake.api().faults.lock().unwrap().rate_limited = 2;
        let (ledger, _dir) = ledger();
        let summary = run(&c, &ledger)
            .await
            .unwrap_or_else(|e| panic!("{provider}: {e}"));
        assert_eq!(summary.recovered, 7, "{provider}: {summary:?}");
        assert!(summary.requests >= 3, "{provider}: {summary:?}");
        assert!(c.fake.api().requests() >= 3, "{provider}");
    }
}

/// GIVEN each provider's API with three pages of events answering its second listing page with a 500
/// WHEN a run lists the window, and another follows
/// THEN the first ends with the provider's failure and the checkpoint unchanged (what it stored stays stored), and
/// the second recovers the rest: every event exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn every_provider_keeps_the_checkpoint_over_a_500_in_the_middle_of_a_walk() {
    for fake in fakes() {
        let c = case(fake, "FAIL", false).await;
        let provider = c.fake.provider();
        let n = c.fake.page_size() * 5 / 2;
        let events = events_over(c.fake.as_ref(), n, 40 * HOUR_MS, 0);
        c.fake.api().add_all(events.clone());
        let (ledger, _dir) = ledger();
        // The second request the API serves (a provider that first asks for a token counts that one too).
        c.fake.api().faults.lock().unwrap().fail_request = Some(c.fake.api().requests() + 2);
        let error = run(&c, &ledger).await.expect_err(provider);
        assert!(
            matches!(error.kind, RunErrorKind::Provider(_)),
            "{provider}: {error}"
        );
        let checkpoint = ledger.checkpoint(&c.source).await.unwrap().unwrap_or_default();
        assert_eq!(checkpoint.scanned_to, 0, "{provider}: the checkpoint moved");
        let after_first = ids(&ledger, &c.source).await.len();
        assert!(
            after_first < n,
            "{provider}: stored {after_first} of {n} before the 500"
        );
        let summary = run(&c, &ledger)
            .await
            .unwrap_or_else(|e| panic!("{provider}: {e}"));
        assert_eq!(
            summary.recovered as usize,
            n - after_first,
            "{provider}: {summary:?}"
        );
        let want: BTreeSet<String> = events.iter().map(|e| e.id.clone()).collect();
        assert_eq!(ids(&ledger, &c.source).await, want, "{provider}");
        let checkpoint = ledger.checkpoint(&c.source).await.unwrap().unwrap();
        assert!(checkpoint.scanned_to > 0, "{provider}");
    }
}

/// GIVEN each provider's API with seven events over ten hours, and a ledger that refuses the oldest one's insert
/// WHEN a run lists the window, the ledger accepts again, and a later run follows (its window no longer reaching
/// that event)
/// THEN the first run stores the six and keeps the seventh as failed, and the later run fetches it again alone,
/// through the provider's own single-event read, and stores it in its webhook's shape.
#[tokio::test(flavor = "multi_thread")]
async fn every_provider_fetches_a_kept_failed_event_again_alone() {
    for fake in fakes() {
        let c = case(fake, "KEPT", false).await;
        let provider = c.fake.provider();
        let events = events_over(c.fake.as_ref(), 7, 10 * HOUR_MS, 0);
        c.fake.api().add_all(events.clone());
        let oldest = events.last().unwrap().clone();
        let (ledger, dir) = ledger();
        let sql = rusqlite::Connection::open(dir.path().join("inbox.db")).unwrap();
        sql.busy_timeout(Duration::from_secs(10)).unwrap();
        sql.execute_batch(&format!(
            "CREATE TRIGGER refuse BEFORE INSERT ON events WHEN NEW.event_id = '{}' \
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
            oldest.id
        ))
        .unwrap();
        let first = run(&c, &ledger)
            .await
            .unwrap_or_else(|e| panic!("{provider}: {e}"));
        assert_eq!(
            (first.recovered, first.failed, first.kept),
            (6, 1, 1),
            "{provider}: {first:?}"
        );
        sql.execute_batch("DROP TRIGGER refuse;").unwrap();
        let second = run(&c, &ledger)
            .await
            .unwrap_or_else(|e| panic!("{provider}: {e}"));
        assert_eq!(
            (second.retried, second.recovered, second.kept),
            (1, 1, 0),
            "{provider}: {second:?}"
        );
        let key = EventKey::new(c.source.clone(), EventId::parse(&oldest.id).unwrap());
        let stored = ledger.get(&key).await.unwrap().unwrap();
        let payload: serde_json::Value = serde_json::from_slice(&stored.payload).unwrap();
        assert_eq!(
            payload,
            c.fake.stored(&oldest),
            "{provider}: fetched again in another shape"
        );
    }
}

/// A provider that answers every page with no events and the same next cursor, or that hangs.
struct Stuck {
    hang: bool,
}

#[async_trait::async_trait]
impl inbox_core::reconcile::Provider for Stuck {
    async fn list(
        &self,
        _window: inbox_core::reconcile::Window,
        _cursor: Option<&str>,
    ) -> Result<inbox_core::reconcile::Page, inbox_core::reconcile::ProviderError> {
        if self.hang {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        Ok(inbox_core::reconcile::Page {
            items: Vec::new(),
            next: Some("the-same-cursor".into()),
        })
    }
    async fn fetch(
        &self,
        _item: &inbox_core::reconcile::Listed,
    ) -> Result<inbox_core::reconcile::Fetched, inbox_core::reconcile::ProviderError> {
        Err(inbox_core::reconcile::ProviderError::Failed(
            "nothing to fetch".into(),
        ))
    }
}

/// GIVEN a provider whose next cursor never moves, and one whose answer never comes
/// WHEN a run lists the window with a budget of 300 ms
/// THEN the first ends at the second page, saying the cursor did not move; the second ends at the budget, not an
/// hour later; neither moves the checkpoint.
#[tokio::test(flavor = "multi_thread")]
async fn a_cursor_that_does_not_move_or_an_answer_that_never_comes_ends_the_run() {
    for hang in [false, true] {
        let source = SourceName::parse("stuck").unwrap();
        let reconciler = Reconciler::new(
            source.clone(),
            "stuck",
            Arc::new(Stuck { hang }),
            Duration::from_secs(3600),
            Duration::from_secs(60),
        )
        .with_budget(inbox_core::reconcile::Budget {
            time: Duration::from_millis(300),
            pages: 100,
        });
        let (ledger, _dir) = ledger();
        let (queue, _deliveries) = InProcessQueue::new(10);
        let started = std::time::Instant::now();
        let error = reconciler
            .run(&ledger, queue.as_ref(), RunOptions::default(), &mut |_| {})
            .await
            .expect_err("the run cannot finish");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        match (hang, &error.kind) {
            (false, RunErrorKind::Provider(text)) => {
                assert!(text.contains("same next page"), "{text}");
                assert_eq!(error.summary.pages, 2);
            }
            (true, RunErrorKind::Budget("time")) => assert_eq!(error.summary.pages, 0),
            _ => panic!("hang {hang}: {error}"),
        }
        let checkpoint = ledger.checkpoint(&source).await.unwrap().unwrap_or_default();
        assert_eq!(checkpoint.scanned_to, 0);
    }
}
