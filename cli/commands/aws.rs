//! `inbox aws init` and `inbox aws play`: the AWS runtime's resources, and what AWS does around the functions.

use std::time::Duration;

use anyhow::{Context, Result};

use inbox_core::aws::init::{create_stack, QueueSettings};
use inbox_core::aws::Resources;

use crate::shutdown_signal;

pub async fn init(prefix: String, max_receive_count: u32) -> Result<()> {
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let settings = QueueSettings {
        max_receive_count,
        ..QueueSettings::default()
    };
    let resources = create_stack(&sdk, &prefix, settings)
        .await
        .map_err(anyhow::Error::msg)?;
    for line in resources.env_lines() {
        println!("{line}");
    }
    Ok(())
}

/// `inbox aws play`: pumps both queues and keeps the schedules until Ctrl-C, a line per batch or run.
pub async fn play(lambda: &str, functions: &[String], sweep_every: u64, reconcile_every: u64) -> Result<()> {
    use inbox_core::aws::play::Player;
    let resources = Resources::from_env()?;
    let dlq = resources
        .dlq_url
        .clone()
        .context("INBOX_DLQ_URL is not set (`inbox aws init` prints it)")?;
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let mut player = Player::new(aws_sdk_sqs::Client::new(&sdk), lambda);
    for f in functions {
        let (name, url) = f
            .split_once('=')
            .with_context(|| format!("--function {f}: expected NAME=URL"))?;
        player = player.serving(name, url);
    }
    let schedules = [
        ("sweeper", Duration::from_secs(sweep_every)),
        ("reconciler", Duration::from_secs(reconcile_every)),
    ];
    let mut next: Vec<tokio::time::Instant> = schedules.iter().map(|_| tokio::time::Instant::now()).collect();
    eprintln!("playing the event source mappings and schedules against {lambda}; Ctrl-C stops");
    let stop = shutdown_signal();
    tokio::pin!(stop);
    loop {
        let round = async {
            for (queue, function) in [(&resources.queue_url, "processor"), (&dlq, "alarm")] {
                match player.pump(queue, function, Duration::from_secs(1)).await {
                    Ok(p) if p.received > 0 => eprintln!(
                        "{function}: {} received, {} deleted, {} left for SQS to deliver again",
                        p.received, p.deleted, p.left
                    ),
                    Ok(_) => {}
                    Err(e) => eprintln!("{function}: {e}"),
                }
            }
            for ((function, every), at) in schedules.iter().zip(next.iter_mut()) {
                if every.is_zero() || tokio::time::Instant::now() < *at {
                    continue;
                }
                *at = tokio::time::Instant::now() + *every;
                match player.tick(function).await {
                    Ok(answer) => eprintln!("{function}: {answer}"),
                    Err(e) => eprintln!("{function}: {e}"),
                }
            }
        };
        tokio::select! {
            () = round => {}
            () = &mut stop => return Ok(()),
        }
    }
}
