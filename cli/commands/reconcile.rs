//! `inbox reconcile`: ask the provider's API which events exist and ingest those the ledger lacks.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use inbox_core::config::Config;
use inbox_core::model::SourceName;
use inbox_core::ports::{LedgerIsTheQueue, Queue};
use inbox_core::reconcile::{Progress, Reconciler, RunOptions};
use inbox_core::secrets::LocalSecrets;
use inbox_core::time::rfc3339;

use crate::{load, Store, StoreArgs};

pub async fn run(
    store: StoreArgs,
    source: SourceName,
    since: Option<Duration>,
    dry_run: bool,
    json: bool,
) -> Result<()> {
    let (config, reconciler) = if store.aws {
        let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .load()
            .await;
        let secrets = inbox_core::aws::AwsSecrets::new(&sdk);
        let config = inbox_core::aws::load_config(&secrets).await?;
        let block = reconcile_block(&config, &source)?;
        since_within_retention(since, &config)?;
        let r = Reconciler::from_config(&source, block, &secrets).await?;
        (config, r)
    } else {
        let Some(path) = &store.config else {
            bail!("inbox reconcile needs the config that holds the source's reconcile block: --config FILE (or --aws)");
        };
        let config = load(path)?;
        let block = reconcile_block(&config, &source)?;
        since_within_retention(since, &config)?;
        let r = Reconciler::from_config(&source, block, &LocalSecrets).await?;
        (config, r)
    };
    drop(config);
    // Opened once the request is known to be sound, so a refused one touches nothing.
    let opened = open(&store, dry_run).await?;
    let queue: Arc<dyn Queue> = opened.queue.unwrap_or_else(|| Arc::new(LedgerIsTheQueue));
    let bar = indicatif::ProgressBar::new(1000);
    if json || !std::io::stderr().is_terminal() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {percent}% {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut progress = |p: &Progress| {
        bar.set_position((p.fraction() * 1000.0) as u64);
        bar.set_message(format!(
            "listed {}, already stored {}, recovered {}",
            p.summary.listed, p.summary.present, p.summary.recovered
        ));
    };
    let options = RunOptions { since, dry_run };
    let run = reconciler
        .run(opened.ledger.as_ref(), queue.as_ref(), options, &mut progress)
        .await;
    bar.finish_and_clear();
    let (summary, error) = match run {
        Ok(summary) => (summary, None),
        Err(e) => (e.summary, Some(e.to_string())),
    };
    if json {
        let mut v = serde_json::to_value(summary)?;
        v["source"] = serde_json::json!(source);
        v["error"] = serde_json::json!(error);
        if let Some(w) = summary.window {
            v["window"] = serde_json::json!({"from": rfc3339(w.from_ms), "to": rfc3339(w.to_ms)});
        }
        println!("{v}");
    } else {
        let verb = if dry_run { "would recover" } else { "recovered" };
        println!(
            "{source}: listed {}, already stored {}, {verb} {}, failed {} ({} API requests, {} ledger reads)",
            summary.listed,
            summary.present,
            summary.recovered,
            summary.failed,
            summary.requests,
            summary.existence_reads
        );
        if let Some(w) = summary.window {
            println!("window: {} to {}", rfc3339(w.from_ms), rfc3339(w.to_ms));
        }
        if summary.retried + summary.given_up + summary.kept > 0 {
            println!(
                "failed events of earlier runs: {} tried again, {} given up (older than the lookback); {} kept for \
                 the next runs",
                summary.retried, summary.given_up, summary.kept
            );
        }
        if !dry_run && summary.recovered > 0 && !store.aws {
            println!("a running `inbox serve` processes the recovered events within the sweeper's grace");
        }
    }
    match error {
        Some(e) => bail!(e),
        None => Ok(()),
    }
}

/// The ledger to reconcile into. A data directory that exists but holds no `inbox.db` yet (configured, and no
/// `inbox serve` has run or no webhook arrived) is an empty ledger: a dry run reads it as one, creating nothing, so
/// that the credentials can be checked before the first event; a real run creates the store there, as `inbox
/// serve` would, and the events it recovers wait in it for the server. A directory that does not exist is a wrong
/// path, named, for either: neither creates it.
async fn open(store: &StoreArgs, dry_run: bool) -> Result<Store> {
    if store.aws {
        return store.open().await;
    }
    if let Some(shared) = store.shared().await? {
        return Ok(shared);
    }
    let dir = store.data_dir()?;
    if !dir.is_dir() {
        bail!(
            "no data directory at {}: check --data-dir or the config's server.data_dir (`inbox serve` creates it \
             on its first start)",
            dir.display()
        );
    }
    if dir.join("inbox.db").exists() || !dry_run {
        return store.open_sqlite(&dir);
    }
    // No ledger yet, and a dry run creates none: an empty reference store answers what an empty ledger would
    // (nothing stored), and what it is told it keeps to itself.
    Ok(Store {
        ledger: Arc::new(inbox_core::stores::memory::MemoryStore::new(store.grace()?)),
        queue: None,
    })
}

/// `--since` reaches back at most `retention_days`: past retention a completed event's record is gone, and the run
/// would take it for one never received and run its handler again.
fn since_within_retention(since: Option<Duration>, config: &Config) -> Result<()> {
    match since {
        Some(since) if since > config.retention => bail!(
            "--since {} is longer than retention_days ({}): past retention the ledger cannot tell an event never \
             received from one done and forgotten, so recovering it could run its handler again",
            whole_units(since),
            config.retention.as_secs() / 86_400
        ),
        _ => Ok(()),
    }
}

/// `d` in hours, or minutes, or seconds, whichever is whole (`48h`, `90m`), as the docs write `--since`.
fn whole_units(d: Duration) -> String {
    let secs = d.as_secs();
    match [(3_600, "h"), (60, "m")]
        .into_iter()
        .find(|(unit, _)| secs > 0 && secs.is_multiple_of(*unit))
    {
        Some((unit, name)) => format!("{}{name}", secs / unit),
        None => format!("{secs}s"),
    }
}

fn reconcile_block<'a>(
    config: &'a Config,
    source: &SourceName,
) -> Result<&'a inbox_core::config::ReconcileConfig> {
    config
        .sources
        .get(source)
        .with_context(|| format!("no source {source} in the config"))?
        .reconcile
        .as_ref()
        .with_context(|| format!("sources.{source} has no [sources.{source}.reconcile] block"))
}
