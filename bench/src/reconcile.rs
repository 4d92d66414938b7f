//! The figure: one reconciliation run over 10,000 events that are all stored already (a healthy webhook
//! path), against a provider's fake API (testkit::providers) and the real SQLite ledger: its API requests, ledger
//! reads and time; then the steady state, a run that re-reads only the overlap below its checkpoint. Stripe, and
//! one provider of each other paging style: an offset (Chargebee), an id cursor (GoCardless), a link to the next
//! page (Okta), and a list with no time filter, walked newest first until it passes the window (Paddle).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use inbox_core::config::Config;
use inbox_core::model::{EventId, EventKey, NewEvent, SourceName};
use inbox_core::ports::Ledger;
use inbox_core::reconcile::stripe::Stripe;
use inbox_core::reconcile::{Reconciler, RunOptions};
use inbox_core::secrets::LocalSecrets;
use inbox_core::serve::InProcessQueue;
use inbox_core::stores::sqlite::SqliteLedger;
use testkit::providers::{
    all_fakes, events_over, source_config, stripe_events_over, FakeStripe, LOOKBACK, SETTLE,
};

use crate::{row, Row};

const EVENTS: usize = 10_000;
const SPAN_MS: i64 = 70 * 3_600_000;
/// The providers measured beside Stripe, one per paging style.
const PAGING_STYLES: [(&str, &str); 4] = [
    ("chargebee", "offset"),
    ("gocardless", "id cursor"),
    ("okta", "next link"),
    ("paddle", "id cursor, no time filter"),
];

pub async fn run(rows: &mut Vec<Row>) -> Result<()> {
    println!(
        "\n## 9. reconciliation over {EVENTS} events already stored (fake provider APIs, SQLite ledger)"
    );
    let events = stripe_events_over(EVENTS, SPAN_MS, "bench");
    let fake = FakeStripe::new(events.clone());
    let url = fake.start().await;
    let ids: Vec<String> = events.iter().map(|(id, _, _)| id.clone()).collect();
    let provider = Stripe::new(url.parse()?, fake.key.clone(), None).map_err(anyhow::Error::msg)?;
    let source = SourceName::parse("payments").context("source name")?;
    let reconciler = Reconciler::new(source, "stripe", Arc::new(provider), LOOKBACK, SETTLE);
    measure(rows, "stripe (id cursor)", &reconciler, &ids, &|| fake.requests()).await?;

    for (name, style) in PAGING_STYLES {
        let fake = all_fakes()
            .into_iter()
            .find(|f| f.provider() == name)
            .with_context(|| format!("no fake {name}"))?;
        let events = events_over(fake.as_ref(), EVENTS, SPAN_MS, 0);
        fake.api().add_all(events.clone());
        let url = fake.clone().start();
        let prefix = format!("BENCH_{}", name.to_uppercase());
        let written = source_config(fake.as_ref(), &prefix, &url, "{ kind = \"log\" }", "", false);
        for (k, v) in written.env() {
            std::env::set_var(k, v);
        }
        let config = Config::from_toml(&written.toml).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        let source = SourceName::parse(name).context("source name")?;
        let block = config.sources[&source]
            .reconcile
            .as_ref()
            .context("the reconcile block")?;
        let reconciler = Reconciler::from_config(&source, block, &LocalSecrets)
            .await
            .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        let ids: Vec<String> = events.into_iter().map(|e| e.id).collect();
        let api = fake.clone();
        measure(rows, &format!("{name} ({style})"), &reconciler, &ids, &|| {
            api.api().requests()
        })
        .await?;
    }
    Ok(())
}

/// Stores `ids` as delivered, then runs `reconciler` twice over them: the first run and the steady state.
async fn measure(
    rows: &mut Vec<Row>,
    label: &str,
    reconciler: &Reconciler,
    ids: &[String],
    requests: &dyn Fn() -> usize,
) -> Result<()> {
    let dir = tempfile::TempDir::new()?;
    let ledger = SqliteLedger::open(dir.path(), 4096, Duration::from_secs(30))?;
    for id in ids {
        let body = bytes::Bytes::from(format!("{{\"id\":\"{id}\"}}"));
        ledger
            .create(NewEvent {
                key: EventKey::new(
                    reconciler.source().clone(),
                    EventId::parse(id).context("event id")?,
                ),
                event_type: Some("delivered".into()),
                payload_sha256: format!("{:x}", body.len()),
                payload: body,
                headers: Vec::new(),
                origin: Default::default(),
                resent_bodies: Default::default(),
            })
            .await?;
    }
    let (queue, _deliveries) = InProcessQueue::new(ids.len() * 2);
    for run in [1, 2] {
        let before = requests();
        let started = Instant::now();
        let summary = reconciler
            .run(&ledger, queue.as_ref(), RunOptions::default(), &mut |_| {})
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let took = started.elapsed();
        let name = if run == 1 {
            "first run"
        } else {
            "next run (steady state)"
        };
        row(
            rows,
            &format!("reconcile {label}, {name}: listed / already stored / recovered"),
            format!("{} / {} / {}", summary.listed, summary.present, summary.recovered),
            "recovered 0",
        );
        row(
            rows,
            &format!("reconcile {label}, {name}: API requests, ledger reads, time"),
            format!(
                "{} requests, {} existence reads, {:.0} ms",
                requests() - before,
                summary.existence_reads,
                took.as_secs_f64() * 1000.0
            ),
            "-",
        );
    }
    Ok(())
}
