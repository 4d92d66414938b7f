//! Counters both runtimes keep: Prometheus text (OpenMetrics, rendered by `prometheus-client`) on `/metrics`
//! embedded, EMF log lines on AWS.
//!
//! The receiver counts on its hot path, so each source's counters are looked up once, at start, and kept as
//! handles: a count is one atomic add, as with the hand-written counters before (see `tests/metrics_bench.rs`);
//! looking a labelled series up in its `Family` on every count would take a lock and hash the labels each time.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use prometheus_client::encoding::{text, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::model::SourceName;
/// Why a request was turned away.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reject {
    UnknownSource,
    TooLarge,
    Signature,
    Timestamp,
    MissingId,
    MalformedBody,
    SlowClient,
    Unavailable,
    /// The key the request points at could not be had (503).
    KeyUnavailable,
    /// The source's key fetches for the minute are spent, and the request's key is not cached (503).
    KeyBudget,
}

impl Reject {
    pub const ALL: [Reject; 10] = [
        Reject::UnknownSource,
        Reject::TooLarge,
        Reject::Signature,
        Reject::Timestamp,
        Reject::MissingId,
        Reject::MalformedBody,
        Reject::SlowClient,
        Reject::Unavailable,
        Reject::KeyUnavailable,
        Reject::KeyBudget,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Reject::UnknownSource => "unknown_source",
            Reject::TooLarge => "too_large",
            Reject::Signature => "signature",
            Reject::Timestamp => "timestamp",
            Reject::MissingId => "missing_id",
            Reject::MalformedBody => "malformed_body",
            Reject::SlowClient => "slow_client",
            Reject::Unavailable => "unavailable",
            Reject::KeyUnavailable => "key_unavailable",
            Reject::KeyBudget => "key_budget",
        }
    }
}

/// The labels of the per-source series; the empty source is requests to unknown sources.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabel {
    source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RejectLabels {
    source: String,
    reason: &'static str,
}

/// One slot's handles into the registry's families (clones share the count).
struct PerSource {
    accepted: Counter,
    duplicate: Counter,
    payload_mismatch: Counter,
    resent_body: Counter,
    completed: Counter,
    retried: Counter,
    dead: Counter,
    reconciled: Counter,
    enqueue_failed: Counter,
    dead_lettered: Counter,
    rejected: [Counter; Reject::ALL.len()],
}

/// Processing latency buckets, seconds.
const BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0,
];

/// The `Content-Type` of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// One slot per configured source, plus one for requests to unknown sources.
pub struct Metrics {
    registry: Registry,
    names: Vec<String>,
    per: Vec<PerSource>,
    latency: Histogram,
    /// Time from receipt to completion, summed (ms) and counted: EMF only.
    age_sum_ms: AtomicU64,
    age_count: AtomicU64,
}

/// One source's counts since the last [`Metrics::drain`] (AWS emits them per invocation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Empty for requests to unknown sources.
    pub source: String,
    pub accepted: u64,
    pub duplicate: u64,
    pub rejected: u64,
    pub completed: u64,
    pub retried: u64,
    pub dead: u64,
    /// Duplicates whose payload differed from the first one's.
    pub payload_mismatch: u64,
    /// Events stored whose body (same source and type) another event held already: marked `resent_of`.
    pub resent_body: u64,
    /// Of `rejected`: refused for their signature or timestamp (401).
    pub signature_rejected: u64,
    /// Events the webhook path lost and reconciliation recovered.
    pub reconciled: u64,
    /// Events stored whose enqueue failed after the write (the sweeper enqueues them later).
    pub enqueue_failed: u64,
    /// Messages the work queue's redrive policy moved to the dead-letter queue (AWS).
    pub dead_lettered: u64,
}

impl Counts {
    pub fn is_zero(&self) -> bool {
        self.accepted
            + self.duplicate
            + self.rejected
            + self.completed
            + self.retried
            + self.dead
            + self.reconciled
            + self.enqueue_failed
            + self.dead_lettered
            == 0
    }
}

/// The counter a metric call goes to: a source's index, or [`Metrics::UNKNOWN`].
pub type Slot = usize;

/// Reads a counter and leaves zero behind (EMF reports counts per flush).
fn take(c: &Counter) -> u64 {
    c.inner().swap(0, Relaxed)
}

impl Metrics {
    pub const UNKNOWN: Slot = usize::MAX;

    pub fn new(sources: &[SourceName]) -> Self {
        // prometheus-client ends each help text with a full stop and each counter's name with `_total`.
        let mut registry = Registry::with_prefix("inbox");
        let family = |registry: &mut Registry, name: &str, help: &str| {
            let f = Family::<SourceLabel, Counter>::default();
            registry.register(name, help, f.clone());
            f
        };
        let accepted = family(&mut registry, "accepted", "Events accepted and stored");
        let duplicate = family(&mut registry, "duplicate", "Deliveries of events already stored");
        let payload_mismatch = family(
            &mut registry,
            "payload_mismatch",
            "Duplicates whose payload differed from the first",
        );
        let resent_body = family(
            &mut registry,
            "resent_body",
            "Events stored whose body another event of the source and type held already",
        );
        let completed = family(&mut registry, "completed", "Events whose handler succeeded");
        let retried = family(
            &mut registry,
            "retried",
            "Handler attempts that failed and will be retried",
        );
        let dead = family(&mut registry, "dead", "Events moved to the dead letters");
        let reconciled = family(
            &mut registry,
            "reconciled",
            "Events the webhook path lost, recovered from the provider's API",
        );
        let enqueue_failed = family(
            &mut registry,
            "enqueue_failed",
            "Events stored whose enqueue failed after the write; the sweeper enqueues them later",
        );
        let dead_lettered = family(
            &mut registry,
            "dead_lettered",
            "Messages the work queue's redrive policy moved to the dead-letter queue",
        );
        let rejected = Family::<RejectLabels, Counter>::default();
        registry.register("rejected", "Requests turned away, by reason", rejected.clone());
        let latency = Histogram::new(BUCKETS);
        registry.register_with_unit(
            "processing",
            "Handler run time per attempt",
            Unit::Seconds,
            latency.clone(),
        );

        let mut names: Vec<String> = sources.iter().map(|s| s.as_str().to_owned()).collect();
        names.push(String::new());
        let per = names
            .iter()
            .map(|name| {
                let label = SourceLabel { source: name.clone() };
                let rejected = Reject::ALL.map(|r| {
                    rejected.get_or_create_owned(&RejectLabels {
                        source: name.clone(),
                        reason: r.as_str(),
                    })
                });
                // The unknown-source slot shows its rejections and dead events (of a source since removed from the
                // config); it cannot accept, so its other counters stay out of `/metrics` (EMF still drains them).
                let series = |f: &Family<SourceLabel, Counter>| {
                    if name.is_empty() {
                        Counter::default()
                    } else {
                        f.get_or_create_owned(&label)
                    }
                };
                PerSource {
                    accepted: series(&accepted),
                    duplicate: series(&duplicate),
                    payload_mismatch: series(&payload_mismatch),
                    resent_body: series(&resent_body),
                    completed: series(&completed),
                    retried: series(&retried),
                    dead: dead.get_or_create_owned(&label),
                    reconciled: series(&reconciled),
                    enqueue_failed: series(&enqueue_failed),
                    dead_lettered: dead_lettered.get_or_create_owned(&label),
                    rejected,
                }
            })
            .collect();
        Self {
            registry,
            names,
            per,
            latency,
            age_sum_ms: AtomicU64::new(0),
            age_count: AtomicU64::new(0),
        }
    }

    fn slot(&self, slot: Slot) -> &PerSource {
        let last = self.per.len() - 1;
        &self.per[slot.min(last)]
    }

    pub fn accepted(&self, s: Slot) {
        self.slot(s).accepted.inc();
    }
    pub fn duplicate(&self, s: Slot) {
        self.slot(s).duplicate.inc();
    }
    pub fn payload_mismatch(&self, s: Slot) {
        self.slot(s).payload_mismatch.inc();
    }
    pub fn resent_body(&self, s: Slot) {
        self.slot(s).resent_body.inc();
    }
    pub fn rejected(&self, s: Slot, reason: Reject) {
        let i = Reject::ALL.iter().position(|r| *r == reason).unwrap_or(0);
        self.slot(s).rejected[i].inc();
    }
    /// `age_ms`: from receipt to completion.
    pub fn completed(&self, s: Slot, took: Duration, age_ms: i64) {
        self.slot(s).completed.inc();
        self.latency.observe(took.as_secs_f64());
        self.age_sum_ms
            .fetch_add(u64::try_from(age_ms).unwrap_or(0), Relaxed);
        self.age_count.fetch_add(1, Relaxed);
    }

    /// Every source's counts since the last call, and the mean age at completion (ms) — resetting them.
    pub fn drain(&self) -> (Vec<Counts>, Option<f64>) {
        let counts = self
            .names
            .iter()
            .zip(&self.per)
            .map(|(n, p)| {
                let rejected = p.rejected.each_ref().map(take);
                let refused = |r: Reject| {
                    Reject::ALL
                        .iter()
                        .position(|a| *a == r)
                        .map_or(0, |i| rejected[i])
                };
                Counts {
                    source: n.clone(),
                    accepted: take(&p.accepted),
                    duplicate: take(&p.duplicate),
                    rejected: rejected.iter().sum(),
                    completed: take(&p.completed),
                    retried: take(&p.retried),
                    dead: take(&p.dead),
                    payload_mismatch: take(&p.payload_mismatch),
                    resent_body: take(&p.resent_body),
                    signature_rejected: refused(Reject::Signature) + refused(Reject::Timestamp),
                    reconciled: take(&p.reconciled),
                    enqueue_failed: take(&p.enqueue_failed),
                    dead_lettered: take(&p.dead_lettered),
                }
            })
            .collect();
        let (sum, n) = (self.age_sum_ms.swap(0, Relaxed), self.age_count.swap(0, Relaxed));
        (counts, (n > 0).then(|| sum as f64 / n as f64))
    }
    pub fn retried(&self, s: Slot, took: Duration) {
        self.slot(s).retried.inc();
        self.latency.observe(took.as_secs_f64());
    }
    pub fn dead(&self, s: Slot) {
        self.slot(s).dead.inc();
    }
    pub fn enqueue_failed(&self, s: Slot) {
        self.slot(s).enqueue_failed.inc();
    }
    pub fn dead_lettered(&self, s: Slot) {
        self.slot(s).dead_lettered.inc();
    }
    /// `n` events recovered by a reconciliation run of source `s`.
    pub fn reconciled(&self, s: Slot, n: u64) {
        self.slot(s).reconciled.inc_by(n);
    }

    /// Totals by name (`accepted`, `duplicate`, `rejected`, `completed`, `retried`, `dead`) over every source.
    pub fn total(&self, name: &str) -> u64 {
        self.per
            .iter()
            .map(|p| match name {
                "accepted" => p.accepted.get(),
                "duplicate" => p.duplicate.get(),
                "payload_mismatch" => p.payload_mismatch.get(),
                "resent_body" => p.resent_body.get(),
                "completed" => p.completed.get(),
                "retried" => p.retried.get(),
                "dead" => p.dead.get(),
                "reconciled" => p.reconciled.get(),
                "enqueue_failed" => p.enqueue_failed.get(),
                "dead_lettered" => p.dead_lettered.get(),
                "rejected" => p.rejected.iter().map(Counter::get).sum(),
                _ => 0,
            })
            .sum()
    }

    /// The OpenMetrics text format ([`CONTENT_TYPE`]); its samples read the same as Prometheus text 0.0.4's
    /// (`inbox_accepted_total{source="stripe"} 2`).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096 + 2048 * self.names.len());
        if let Err(e) = text::encode(&mut out, &self.registry) {
            // Writing to a String does not fail; a label that cannot be encoded would.
            tracing::warn!(error = %e, "cannot render the metrics");
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_by_source_and_reason() {
        let m = Metrics::new(&[SourceName::parse("stripe").unwrap()]);
        m.accepted(0);
        m.accepted(0);
        m.rejected(0, Reject::Signature);
        m.rejected(Metrics::UNKNOWN, Reject::UnknownSource);
        m.completed(0, Duration::from_millis(30), 1500);
        let text = m.render();
        assert!(
            text.contains("inbox_accepted_total{source=\"stripe\"} 2"),
            "{text}"
        );
        assert!(text.contains("inbox_rejected_total{source=\"stripe\",reason=\"signature\"} 1"));
        assert!(text.contains("inbox_rejected_total{source=\"\",reason=\"unknown_source\"} 1"));
        assert!(text.contains("inbox_processing_seconds_bucket{le=\"0.05\"} 1"));
        assert!(text.contains("inbox_processing_seconds_bucket{le=\"0.025\"} 0"));
        assert!(text.contains("inbox_processing_seconds_count 1"), "{text}");
        assert!(text.contains("# TYPE inbox_accepted counter"), "{text}");
        assert!(
            text.contains("# HELP inbox_accepted Events accepted and stored.\n"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
        // The unknown-source slot cannot accept: no such series.
        assert!(!text.contains("inbox_accepted_total{source=\"\"}"), "{text}");
        assert_eq!(m.total("rejected"), 2);
        let (counts, age) = m.drain();
        assert_eq!(
            (counts[0].accepted, counts[0].rejected, counts[1].rejected),
            (2, 1, 1)
        );
        assert_eq!(age, Some(1500.0));
        assert!(m.drain().0.iter().all(Counts::is_zero), "drain resets");
    }
}
