//! `inbox replay`: dead (or, with --force, completed) events back to RECEIVED.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::{bail, Result};

use inbox_core::model::{EventId, EventKey, Record, SourceName, Status};
use inbox_core::ports::{ListFilter, Replay};

use crate::Store;

pub async fn run(
    store: Store,
    status: Status,
    source: Option<SourceName>,
    event_id: Option<String>,
    dry_run: bool,
    force: bool,
) -> Result<()> {
    match status {
        Status::Dead => {}
        Status::Completed if force => {}
        Status::Completed => bail!("replaying completed events runs their handler again: add --force"),
        other => bail!("only dead or completed events can be replayed, not {other}"),
    }
    let ledger = store.ledger;
    let keys: Vec<EventKey> = match (&source, event_id) {
        (Some(source), Some(id)) => vec![EventKey::new(source.clone(), EventId::parse(&id)?)],
        _ => ledger
            .list(&ListFilter {
                status: Some(status),
                source,
                limit: usize::MAX,
                ..Default::default()
            })
            .await?
            .iter()
            .map(Record::key)
            .collect(),
    };
    if dry_run {
        for key in &keys {
            println!("would replay {key}");
        }
        println!("dry run: {} event(s) would be replayed", keys.len());
        return Ok(());
    }
    let bar = indicatif::ProgressBar::new(keys.len() as u64);
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let (mut replayed, mut skipped) = (0usize, 0usize);
    for key in &keys {
        match ledger.replay(key, force).await? {
            Replay::Replayed => {
                replayed += 1;
                if let Some(queue) = &store.queue {
                    if let Err(e) = queue.enqueue(key, Duration::ZERO).await {
                        bar.suspend(|| {
                            eprintln!("{key}: replayed, not enqueued ({e}); the sweeper will send it")
                        });
                    }
                }
            }
            Replay::NotEligible(st) => {
                skipped += 1;
                bar.suspend(|| eprintln!("skipped {key}: it is {st}"));
            }
            Replay::Missing => {
                skipped += 1;
                bar.suspend(|| eprintln!("skipped {key}: no such event"));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if store.queue.is_some() {
        println!("replayed {replayed} event(s), skipped {skipped}");
    } else {
        println!("replayed {replayed} event(s), skipped {skipped}; a running `inbox serve` picks them up within seconds");
    }
    Ok(())
}
