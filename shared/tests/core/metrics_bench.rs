//! What the metrics cost where they are counted: the receiver's hot path (a per-source counter from two threads),
//! the worker's latency histogram, and one `/metrics` render. Ignored in normal runs; it measures, it asserts
//! nothing about speed. Run it optimised:
//!
//! ```text
//! cargo test --release -p inbox-core --test core metrics_bench:: -- --ignored --nocapture
//! ```
//!
//! Where no release build of the dependencies exists yet, optimising only the crates measured is much quicker:
//! add `--config profile.dev.package.<crate>.opt-level=3` for inbox-core, prometheus-client, parking_lot,
//! parking_lot_core, lock_api, dtoa and itoa (and `debug-assertions=false`, `overflow-checks=false` for
//! inbox-core) to the same command without `--release`. Two cores shared with other work make single runs
//! noisy: compare several, old and new interleaved.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use inbox_core::metrics::{Metrics, Reject};
use inbox_core::model::SourceName;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// Increments per thread per case.
const OPS: usize = 10_000_000;
const SOURCES: usize = 20;

fn sources() -> Vec<SourceName> {
    (0..SOURCES)
        .map(|i| SourceName::parse(&format!("source-{i:02}")).unwrap())
        .collect()
}

/// Runs `op(thread, i)` OPS times on each of two threads at once; nanoseconds per call, per thread.
fn two_threads(op: impl Fn(usize, usize) + Send + Sync + 'static) -> f64 {
    let op = Arc::new(op);
    let start = Instant::now();
    let threads: Vec<_> = (0..2)
        .map(|t| {
            let op = op.clone();
            std::thread::spawn(move || {
                for i in 0..OPS {
                    op(t, i);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    start.elapsed().as_nanos() as f64 / OPS as f64
}

#[test]
#[ignore = "a measurement: run with --release --ignored --nocapture"]
fn metrics_cost_on_the_hot_path_and_to_render() {
    let m = Arc::new(Metrics::new(&sources()));
    let report = |what: &str, ns: f64| eprintln!("{what:<58} {ns:>8.2} ns/op per thread");

    // Warm up (page in, spin up the cores).
    let w = m.clone();
    two_threads(move |_, _| w.accepted(0));

    let a = m.clone();
    report(
        "accepted(), both threads on one source",
        two_threads(move |_, _| a.accepted(3)),
    );
    let a = m.clone();
    report(
        "accepted(), each thread its own source",
        two_threads(move |t, _| a.accepted(t)),
    );
    let a = m.clone();
    report(
        "accepted(), sources round-robin",
        two_threads(move |_, i| a.accepted(i % SOURCES)),
    );
    let a = m.clone();
    report(
        "rejected(signature), each thread its own source",
        two_threads(move |t, _| a.rejected(t, Reject::Signature)),
    );
    let a = m.clone();
    report(
        "rejected(unknown source)",
        two_threads(move |_, _| a.rejected(Metrics::UNKNOWN, Reject::UnknownSource)),
    );
    let a = m.clone();
    report(
        "completed() (histogram), each thread its own source",
        two_threads(move |t, i| a.completed(t, Duration::from_micros((i % 2_000) as u64 * 37), 1_500)),
    );

    // The alternative to per-source handles: look the labelled series up in its Family on every count.
    let family = Arc::new(Family::<Vec<(String, String)>, Counter>::default());
    let labels: Arc<Vec<Vec<(String, String)>>> = Arc::new(
        sources()
            .iter()
            .map(|s| vec![("source".to_owned(), s.as_str().to_owned())])
            .collect(),
    );
    for l in labels.iter() {
        family.get_or_create_owned(l);
    }
    let (f, l) = (family.clone(), labels.clone());
    report(
        "Family::get_or_create(source).inc(), each thread its own",
        two_threads(move |t, _| {
            f.get_or_create(&l[t]).inc();
        }),
    );

    let rounds = 2_000;
    let mut bytes = 0;
    let start = Instant::now();
    for _ in 0..rounds {
        bytes = std::hint::black_box(m.render()).len();
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / f64::from(rounds);
    eprintln!("render(), {SOURCES} sources, {bytes} bytes {us:>31.1} µs/render");
}
