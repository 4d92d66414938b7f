//! The `filter` part: what a route's filter costs per event, for a typical body and for hostile 1 MiB ones, each
//! judged in a loop; the median of the rounds. The budget (`routing::filter::BUDGET`) is what keeps the hostile
//! cases to milliseconds: a filter that would walk more is stopped with the verdict `error`.

use std::time::Instant;

use anyhow::Result;
use inbox_core::routing::{Facts, Filter, Verdict};

use crate::{median, row, Row};

const ROUNDS: usize = 9;

/// A Stripe event of typical size (2 KiB).
fn typical() -> Vec<u8> {
    let pad = "x".repeat(1600);
    format!(
        r#"{{"id":"evt_1","type":"invoice.paid","data":{{"object":{{"id":"in_1","amount_paid":2500,"currency":"usd","lines":{{"data":[{{"amount":2000}},{{"amount":500}}]}},"description":"{pad}"}}}}}}"#
    )
    .into_bytes()
}

/// 1 MiB of one-character numbers in a list: the most values a body of that size can hold.
fn many_values() -> Vec<u8> {
    let mut b = br#"{"type":"x","data":{"object":{"id":"o"}},"items":["#.to_vec();
    while b.len() < (1 << 20) - 4 {
        b.extend_from_slice(b"1,");
    }
    b.extend_from_slice(b"1]}");
    b
}

/// A list of `n` small numbers, as a filter may walk within what it may keep.
fn values(n: usize) -> Vec<u8> {
    let items = vec!["1"; n].join(",");
    format!(r#"{{"type":"x","items":[{items}]}}"#).into_bytes()
}

/// 1 MiB in one string.
fn one_string() -> Vec<u8> {
    format!(r#"{{"type":"x","text":"{}"}}"#, "a".repeat((1 << 20) - 40)).into_bytes()
}

/// Nested as deep as the JSON parser allows, 1 MiB wide.
fn deep_and_wide() -> Vec<u8> {
    let mut s = String::from(r#"{"type":"x","a":"#);
    s.push_str(&"[".repeat(100));
    while s.len() < (1 << 20) - 200 {
        s.push_str(r#"{"k":"v"},"#);
    }
    s.push_str(r#"{"k":"v"}"#);
    s.push_str(&"]".repeat(100));
    s.push('}');
    s.into_bytes()
}

pub fn run(rows: &mut Vec<Row>) -> Result<()> {
    println!("\n## filters: one route's filter per event");
    let cases: [(&str, &str, Vec<u8>); 9] = [
        (
            "type only, 2 KiB body",
            r#"event_type.startsWith("invoice.")"#,
            typical(),
        ),
        (
            "body field, 2 KiB body",
            r#"event_type.startsWith("invoice.") && body.data.object.amount_paid > 1000"#,
            typical(),
        ),
        (
            "body field, 1 MiB of values",
            r#"body.data.object.id == "o""#,
            many_values(),
        ),
        (
            "walk every value, 1 MiB of values",
            "body.items.exists(i, i == 2)",
            many_values(),
        ),
        (
            "map and size, 1 MiB of values",
            "body.items.map(i, i + 1).size() > 0",
            many_values(),
        ),
        (
            "walk a list of 2,000 values",
            "body.items.exists(i, i == 2)",
            values(2_000),
        ),
        (
            "walk it once per value (budget)",
            "body.items.exists(i, body.items.exists(j, i == j + 5))",
            values(2_000),
        ),
        (
            "contains, 1 MiB string",
            r#"body.text.contains("b")"#,
            one_string(),
        ),
        (
            "whole body, 1 MiB deep and wide",
            "size(body) > 0 && body.a.size() > 0",
            deep_and_wide(),
        ),
    ];
    for (name, source, body) in cases {
        let filter = Filter::compile(source)?;
        let facts = Facts {
            body: &body,
            headers: &[],
            event_type: Some("invoice.paid"),
            source: "stripe",
            provider: "stripe",
            received_at: 0,
        };
        let mut verdict = filter.judge(&facts);
        // Enough judgements a round to measure microseconds; one for the slow ones.
        let per_round = if body.len() > 4096 { 3 } else { 2000 };
        let mut times = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let t = Instant::now();
            for _ in 0..per_round {
                verdict = filter.judge(&facts);
            }
            times.push(t.elapsed().as_secs_f64() * 1e6 / per_round as f64);
        }
        let word = match &verdict {
            Verdict::Error(e) if e.contains("budget") => "error: budget spent",
            Verdict::Error(e) if e.contains("more than") => "error: too much kept",
            v => v.as_str(),
        };
        row(
            rows,
            &format!("filter: {name}"),
            format!("{:.0} us ({word})", median(times)),
            "a few ms at most",
        );
    }
    Ok(())
}
