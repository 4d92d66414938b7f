//! The soak: signed, distinct events at a steady rate for a fixed time to a real `inbox serve` that
//! forwards to a sink; memory must stay flat and every event must complete. A short run is part of the suite;
//! the long one is a documented command (RELIABILITY.md):
//!
//! ```sh
//! INBOX_SOAK_SECS=600 INBOX_SOAK_RATE=1000 cargo test --release --test serve soak:: -- --nocapture
//! ```
//! Loopback only; bounded by the rate times the duration.

use std::time::{Duration, Instant};

use crate::common::*;
use inbox_core::schemes::Scheme;
use serde_json::json;

const SOURCE: &str = "soak";

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Resident memory of a process, KiB, from /proc.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// GIVEN a server forwarding every event to a sink
/// WHEN distinct signed events arrive at a steady rate for the whole run
/// THEN every one is answered 200 and delivered, and the server's memory in the second half of the run stays
/// within a small margin of the first half's peak (no growth per event).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn steady_load_keeps_memory_flat_and_completes_every_event() {
    let secs = env_u64("INBOX_SOAK_SECS", 12);
    let rate = env_u64("INBOX_SOAK_RATE", 200);
    let sink = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let config = format!(
        "[sources.{SOURCE}]\nscheme = \"stripe\"\nsecrets = [\"env:SOAK_SECRET\"]\n\
         handler = {{ kind = \"forward\", url = \"{}/soak\", timeout = \"5s\" }}\n",
        sink.url()
    );
    let app = spawn_app(&config, &[("SOAK_SECRET", &secret)]);
    let signer = Signer::new(Scheme::Stripe, &secret);
    let client = client();
    let url = app.webhook_url(SOURCE);
    let run = rand_id("soak");
    let padding = "x".repeat(1500);

    let started = Instant::now();
    let total = secs * rate;
    let mut samples: Vec<(Duration, u64)> = Vec::new();
    let mut inflight = tokio::task::JoinSet::new();
    let mut sent = 0u64;
    let mut failures = 0u64;
    let mut next_sample = Duration::ZERO;
    while sent < total {
        // Open loop: event n leaves at n / rate seconds, whatever the answers do.
        let due = Duration::from_secs_f64(sent as f64 / rate as f64);
        let now = started.elapsed();
        if now < due {
            tokio::time::sleep(due - now).await;
        }
        if started.elapsed() >= next_sample {
            samples.push((started.elapsed(), rss_kib(app.pid())));
            next_sample += Duration::from_millis(500);
        }
        let id = format!("evt_{run}_{sent}");
        let body =
            json!({"id": id, "type": "charge.succeeded", "data": {"n": sent, "pad": padding}}).to_string();
        let headers = signer.headers(body.as_bytes(), &id, None);
        let (client, url) = (client.clone(), url.clone());
        inflight.spawn(async move { post(&client, &url, body, &headers).await.status });
        sent += 1;
        while let Some(done) = inflight.try_join_next() {
            if done.unwrap_or(0) != 200 {
                failures += 1;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(secs * 3 + 30),
            "the run overran its time bound"
        );
    }
    while let Some(done) = inflight.join_next().await {
        if done.unwrap_or(0) != 200 {
            failures += 1;
        }
    }
    let sending = started.elapsed();
    assert_eq!(failures, 0, "every event is answered 200");

    let sink_deadline = Instant::now() + Duration::from_secs(60);
    while (sink.count() as u64) < total && Instant::now() < sink_deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        sink.count() as u64,
        total,
        "every event was delivered downstream once"
    );
    app.wait_all_completed(total as usize, Duration::from_secs(60), "soak events");

    // Memory: the second half's peak within 25% (+4 MiB) of the first half's.
    let half = sending / 2;
    let first = samples
        .iter()
        .filter(|(t, _)| *t < half)
        .map(|(_, r)| *r)
        .max()
        .unwrap_or(0);
    let second = samples
        .iter()
        .filter(|(t, _)| *t >= half)
        .map(|(_, r)| *r)
        .max()
        .unwrap_or(0);
    eprintln!(
        "soak: {total} events at {rate}/s over {:.1} s; RSS peak first half {first} KiB, second half {second} KiB",
        sending.as_secs_f64()
    );
    assert!(
        first > 0 && second > 0,
        "memory was sampled ({} samples)",
        samples.len()
    );
    assert!(
        second <= first + first / 4 + 4096,
        "memory grew: {first} KiB then {second} KiB"
    );
}
