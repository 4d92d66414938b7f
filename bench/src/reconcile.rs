//! The figure: one reconciliation run over 10,000 events that are all stored already (a healthy webhook
//! path), against the fake Stripe API (testkit::providers) and the real SQLite ledger: its API requests, ledger
//! reads and time; then the steady state, a run that re-reads only the overlap below its checkpoint.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use inbox_core::embedded::sqlite::SqliteLedger;
use inbox_core::embedded::InProcessQueue;
use inbox_core::model::{EventId, EventKey, NewEvent, SourceName};
use inbox_core::ports::Ledger;
use inbox_core::reconcile::stripe::Stripe;
use inbox_core::reconcile::{Reconciler, RunOptions};
use testkit::providers::{stripe_events_over, FakeStripe, LOOKBACK, SETTLE};

use crate::{row, Row};

const EVENTS: usize = 10_000;

pub async fn run(rows: &mut Vec<Row>) -> Result<()> {
    println!("\n## 9. reconciliation over {EVENTS} events already stored (fake Stripe API, SQLite ledger)");
    let events = stripe_events_over(EVENTS, 70 * 3_600_000, "bench");
    let fake = FakeStripe::new(events.clone());
    let url = fake.start().await;
    let dir = tempfile::TempDir::new()?;
    let ledger = SqliteLedger::open(dir.path(), 4096, Duration::from_secs(30))?;
    let source = SourceName::parse("payments").context("source name")?;
    for (id, _, _) in &events {
        let body = bytes::Bytes::from(format!("{{\"id\":\"{id}\"}}"));
        ledger
            .create(NewEvent {
                key: EventKey::new(source.clone(), EventId::parse(id).context("event id")?),
                event_type: Some("invoice.paid".into()),
                payload_sha256: format!("{:x}", body.len()),
                payload: body,
                headers: Vec::new(),
                origin: Default::default(),
                resent_bodies: Default::default(),
                announced: false,
            })
            .await?;
    }
    let provider = Stripe::new(url.parse()?, fake.key.clone(), None).map_err(anyhow::Error::msg)?;
    let reconciler = Reconciler::new(source, "stripe", Arc::new(provider), LOOKBACK, SETTLE);
    let (queue, _deliveries) = InProcessQueue::new(EVENTS * 2);
    for run in [1, 2] {
        let before = fake.requests();
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
            &format!("reconcile, {name}: listed / already stored / recovered"),
            format!("{} / {} / {}", summary.listed, summary.present, summary.recovered),
            "recovered 0",
        );
        row(
            rows,
            &format!("reconcile, {name}: API requests, ledger reads, time"),
            format!(
                "{} requests, {} existence reads, {:.0} ms",
                fake.requests() - before,
                summary.existence_reads,
                took.as_secs_f64() * 1000.0
            ),
            "-",
        );
    }
    Ok(())
}
