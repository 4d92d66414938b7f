//! Counters both runtimes keep: Prometheus text on `/metrics` embedded, EMF log lines on AWS.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::model::SourceName;

/// Why a request was turned away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reject {
    UnknownSource,
    TooLarge,
    Signature,
    Timestamp,
    MissingId,
    MalformedBody,
    SlowClient,
    Unavailable,
}

impl Reject {
    pub const ALL: [Reject; 8] = [
        Reject::UnknownSource,
        Reject::TooLarge,
        Reject::Signature,
        Reject::Timestamp,
        Reject::MissingId,
        Reject::MalformedBody,
        Reject::SlowClient,
        Reject::Unavailable,
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
        }
    }
}

#[derive(Default)]
struct PerSource {
    accepted: AtomicU64,
    duplicate: AtomicU64,
    payload_mismatch: AtomicU64,
    completed: AtomicU64,
    retried: AtomicU64,
    dead: AtomicU64,
    rejected: [AtomicU64; Reject::ALL.len()],
}

type Getter = fn(&PerSource) -> &AtomicU64;

/// Processing latency buckets, seconds.
const BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0,
];

#[derive(Default)]
struct Histogram {
    counts: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

/// One slot per configured source, plus one for requests to unknown sources.
pub struct Metrics {
    names: Vec<String>,
    per: Vec<PerSource>,
    latency: Histogram,
    /// Time from receipt to completion, summed (ms) and counted.
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
}

impl Counts {
    pub fn is_zero(&self) -> bool {
        self.accepted + self.duplicate + self.rejected + self.completed + self.retried + self.dead == 0
    }
}

/// The counter a metric call goes to: a source's index, or [`Metrics::UNKNOWN`].
pub type Slot = usize;

impl Metrics {
    pub const UNKNOWN: Slot = usize::MAX;

    pub fn new(sources: &[SourceName]) -> Self {
        let mut names: Vec<String> = sources.iter().map(|s| s.as_str().to_owned()).collect();
        names.push(String::new());
        let per = names.iter().map(|_| PerSource::default()).collect();
        Self {
            names,
            per,
            latency: Histogram::default(),
            age_sum_ms: AtomicU64::new(0),
            age_count: AtomicU64::new(0),
        }
    }

    fn slot(&self, slot: Slot) -> &PerSource {
        let last = self.per.len() - 1;
        &self.per[slot.min(last)]
    }

    pub fn accepted(&self, s: Slot) {
        self.slot(s).accepted.fetch_add(1, Relaxed);
    }
    pub fn duplicate(&self, s: Slot) {
        self.slot(s).duplicate.fetch_add(1, Relaxed);
    }
    pub fn payload_mismatch(&self, s: Slot) {
        self.slot(s).payload_mismatch.fetch_add(1, Relaxed);
    }
    pub fn rejected(&self, s: Slot, reason: Reject) {
        let i = Reject::ALL.iter().position(|r| *r == reason).unwrap_or(0);
        self.slot(s).rejected[i].fetch_add(1, Relaxed);
    }
    /// `age_ms`: from receipt to completion.
    pub fn completed(&self, s: Slot, took: Duration, age_ms: i64) {
        self.slot(s).completed.fetch_add(1, Relaxed);
        self.observe(took);
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
            .map(|(n, p)| Counts {
                source: n.clone(),
                accepted: p.accepted.swap(0, Relaxed),
                duplicate: p.duplicate.swap(0, Relaxed),
                rejected: p.rejected.iter().map(|r| r.swap(0, Relaxed)).sum(),
                completed: p.completed.swap(0, Relaxed),
                retried: p.retried.swap(0, Relaxed),
                dead: p.dead.swap(0, Relaxed),
            })
            .collect();
        let (sum, n) = (self.age_sum_ms.swap(0, Relaxed), self.age_count.swap(0, Relaxed));
        (counts, (n > 0).then(|| sum as f64 / n as f64))
    }
    pub fn retried(&self, s: Slot, took: Duration) {
        self.slot(s).retried.fetch_add(1, Relaxed);
        self.observe(took);
    }
    pub fn dead(&self, s: Slot) {
        self.slot(s).dead.fetch_add(1, Relaxed);
    }

    fn observe(&self, took: Duration) {
        let secs = took.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|b| secs <= *b) {
            self.latency.counts[i].fetch_add(1, Relaxed);
        }
        self.latency.count.fetch_add(1, Relaxed);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.latency.sum_micros.fetch_add(micros, Relaxed);
    }

    /// Totals by name (`accepted`, `duplicate`, `rejected`, `completed`, `retried`, `dead`) over every source.
    pub fn total(&self, name: &str) -> u64 {
        self.per
            .iter()
            .map(|p| match name {
                "accepted" => p.accepted.load(Relaxed),
                "duplicate" => p.duplicate.load(Relaxed),
                "payload_mismatch" => p.payload_mismatch.load(Relaxed),
                "completed" => p.completed.load(Relaxed),
                "retried" => p.retried.load(Relaxed),
                "dead" => p.dead.load(Relaxed),
                "rejected" => p.rejected.iter().map(|r| r.load(Relaxed)).sum(),
                _ => 0,
            })
            .sum()
    }

    /// The Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        let counters: [(&str, &str, Getter); 6] = [
            ("accepted", "Events accepted and stored.", |p| &p.accepted),
            ("duplicate", "Deliveries of events already stored.", |p| {
                &p.duplicate
            }),
            (
                "payload_mismatch",
                "Duplicates whose payload differed from the first.",
                |p| &p.payload_mismatch,
            ),
            ("completed", "Events whose handler succeeded.", |p| &p.completed),
            (
                "retried",
                "Handler attempts that failed and will be retried.",
                |p| &p.retried,
            ),
            ("dead", "Events moved to the dead letters.", |p| &p.dead),
        ];
        for (name, help, get) in counters {
            let _ = writeln!(
                out,
                "# HELP inbox_{name}_total {help}\n# TYPE inbox_{name}_total counter"
            );
            for (n, p) in self.names.iter().zip(&self.per).filter(|(n, _)| !n.is_empty()) {
                let _ = writeln!(
                    out,
                    "inbox_{name}_total{{source=\"{n}\"}} {}",
                    get(p).load(Relaxed)
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP inbox_rejected_total Requests turned away, by reason.\n# TYPE inbox_rejected_total counter"
        );
        for (n, p) in self.names.iter().zip(&self.per) {
            for (reason, c) in Reject::ALL.iter().zip(&p.rejected) {
                let v = c.load(Relaxed);
                if v > 0 || !n.is_empty() {
                    let _ = writeln!(
                        out,
                        "inbox_rejected_total{{source=\"{n}\",reason=\"{}\"}} {v}",
                        reason.as_str()
                    );
                }
            }
        }
        let h = &self.latency;
        let _ = writeln!(
            out,
            "# HELP inbox_processing_seconds Handler run time per attempt.\n# TYPE inbox_processing_seconds histogram"
        );
        let mut cumulative = 0;
        for (b, c) in BUCKETS.iter().zip(&h.counts) {
            cumulative += c.load(Relaxed);
            let _ = writeln!(out, "inbox_processing_seconds_bucket{{le=\"{b}\"}} {cumulative}");
        }
        let count = h.count.load(Relaxed);
        let _ = writeln!(out, "inbox_processing_seconds_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(
            out,
            "inbox_processing_seconds_sum {}",
            h.sum_micros.load(Relaxed) as f64 / 1e6
        );
        let _ = writeln!(out, "inbox_processing_seconds_count {count}");
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
