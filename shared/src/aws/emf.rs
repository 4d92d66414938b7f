//! Metrics on AWS as CloudWatch Embedded Metric Format log lines: no client, no extra call. One line per source
//! with counts since the last flush (dimension `Source`), and one without dimensions for the totals.

use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};

use crate::metrics::{Counts, Metrics};
use crate::time::now_ms;

pub const NAMESPACE: &str = "WebhookInbox";

fn line(dimensions: Value, values: &[(&str, f64, &str)], extra: Map<String, Value>) -> Value {
    let metrics: Vec<Value> = values
        .iter()
        .map(|(n, _, unit)| json!({"Name": n, "Unit": unit}))
        .collect();
    let mut root = extra;
    root.insert(
        "_aws".into(),
        json!({
            "Timestamp": now_ms(),
            "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": dimensions, "Metrics": metrics}],
        }),
    );
    for (name, value, _) in values {
        root.insert((*name).into(), json!(value));
    }
    Value::Object(root)
}

fn values(c: &Counts) -> Vec<(&'static str, f64, &'static str)> {
    [
        ("Accepted", c.accepted),
        ("Duplicate", c.duplicate),
        ("Rejected", c.rejected),
        ("Completed", c.completed),
        ("Retried", c.retried),
        ("DeadEvents", c.dead),
        ("PayloadMismatch", c.payload_mismatch),
        ("ResentBody", c.resent_body),
        ("SignatureRejected", c.signature_rejected),
        ("Reconciled", c.reconciled),
        ("EnqueueFailed", c.enqueue_failed),
        ("DeadLettered", c.dead_lettered),
    ]
    .into_iter()
    .filter(|(_, v)| *v > 0)
    .map(|(n, v)| (n, v as f64, "Count"))
    .collect()
}

/// The EMF lines for what happened since the last call (none when nothing did).
pub fn lines(metrics: &Metrics) -> Vec<String> {
    let (counts, age) = metrics.drain();
    let mut out = Vec::new();
    let mut total = Counts::default();
    for c in counts.iter().filter(|c| !c.is_zero()) {
        total.accepted += c.accepted;
        total.duplicate += c.duplicate;
        total.rejected += c.rejected;
        total.completed += c.completed;
        total.retried += c.retried;
        total.dead += c.dead;
        total.payload_mismatch += c.payload_mismatch;
        total.resent_body += c.resent_body;
        total.signature_rejected += c.signature_rejected;
        total.reconciled += c.reconciled;
        total.enqueue_failed += c.enqueue_failed;
        total.dead_lettered += c.dead_lettered;
        if !c.source.is_empty() {
            let mut extra = Map::new();
            extra.insert("Source".into(), json!(c.source));
            out.push(line(json!([["Source"]]), &values(c), extra).to_string());
        }
    }
    let mut totals = values(&total);
    if let Some(age) = age {
        totals.push(("AgeAtCompletion", age, "Milliseconds"));
    }
    if !totals.is_empty() {
        out.push(line(json!([[]]), &totals, Map::new()).to_string());
    }
    out
}

/// Where the lines go: stdout in a function, where Lambda sends them to CloudWatch Logs (which extracts the
/// metrics); or kept, for a test to read what a function emitted.
#[derive(Clone, Default)]
pub enum Sink {
    #[default]
    Stdout,
    Kept(Arc<Mutex<Vec<String>>>),
}

impl Sink {
    pub fn kept() -> Self {
        Self::Kept(Arc::default())
    }

    pub fn write(&self, line: String) {
        match self {
            Sink::Stdout => println!("{line}"),
            Sink::Kept(kept) => crate::sync::lock(kept).push(line),
        }
    }

    /// Writes what happened since the last flush.
    pub fn flush(&self, metrics: &Metrics) {
        for l in lines(metrics) {
            self.write(l);
        }
    }

    /// The lines kept so far, taken (none on stdout).
    pub fn take(&self) -> Vec<String> {
        match self {
            Sink::Stdout => Vec::new(),
            Sink::Kept(kept) => std::mem::take(&mut *crate::sync::lock(kept)),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::SourceName;

    #[test]
    fn lines_follow_the_embedded_metric_format() {
        let m = Metrics::new(&[SourceName::parse("stripe").unwrap()]);
        assert!(lines(&m).is_empty(), "nothing happened, nothing is emitted");
        m.accepted(0);
        m.dead(0);
        let out = lines(&m);
        assert_eq!(out.len(), 2);
        let per: Value = serde_json::from_str(&out[0]).unwrap();
        assert_eq!(per["Source"], "stripe");
        assert_eq!(per["Accepted"], 1.0);
        assert_eq!(per["_aws"]["CloudWatchMetrics"][0]["Namespace"], NAMESPACE);
        assert_eq!(
            per["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["Source"]])
        );
        let names: Vec<_> = per["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["Name"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["Accepted", "DeadEvents"]);
        let total: Value = serde_json::from_str(&out[1]).unwrap();
        assert_eq!(total["DeadEvents"], 1.0);
        assert_eq!(total["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([[]]));
        assert!(lines(&m).is_empty(), "counts are per flush");
    }

    /// The delivery-health alarms and the reconciliation alarm in the template read these names, per source and
    /// in the totals line (no dimension).
    #[test]
    fn reconciled_mismatches_and_401s_are_emitted_when_counted() {
        let m = Metrics::new(&[
            SourceName::parse("stripe").unwrap(),
            SourceName::parse("github").unwrap(),
        ]);
        m.reconciled(0, 3);
        m.duplicate(0);
        m.payload_mismatch(0);
        m.rejected(1, crate::metrics::Reject::Signature);
        m.rejected(1, crate::metrics::Reject::Timestamp);
        m.rejected(1, crate::metrics::Reject::MissingId);
        let out: Vec<Value> = lines(&m)
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(out.len(), 3, "{out:?}");
        let names = |v: &Value| -> Vec<String> {
            v["_aws"]["CloudWatchMetrics"][0]["Metrics"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["Name"].as_str().unwrap().to_owned())
                .collect()
        };
        let stripe = &out[0];
        assert_eq!(stripe["Source"], "stripe");
        assert_eq!(names(stripe), ["Duplicate", "PayloadMismatch", "Reconciled"]);
        assert_eq!(stripe["Reconciled"], 3.0);
        assert_eq!(stripe["PayloadMismatch"], 1.0);
        let github = &out[1];
        assert_eq!(github["Source"], "github");
        assert_eq!(names(github), ["Rejected", "SignatureRejected"]);
        assert_eq!(github["Rejected"], 3.0);
        assert_eq!(
            github["SignatureRejected"], 2.0,
            "signature and timestamp refusals are 401s"
        );
        let total = &out[2];
        assert_eq!(total["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([[]]));
        assert_eq!(
            names(total),
            [
                "Duplicate",
                "Rejected",
                "PayloadMismatch",
                "SignatureRejected",
                "Reconciled"
            ]
        );
        assert_eq!(total["Reconciled"], 3.0);
        assert_eq!(total["PayloadMismatch"], 1.0);
        assert_eq!(total["SignatureRejected"], 2.0);
        assert!(lines(&m).is_empty(), "counts are per flush");
    }
}
