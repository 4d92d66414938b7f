//! The console's page timings over a big SQLite store ("any events page over 1,000,000 stored events
//! answers in well under 100 ms"). Ignored by default: it writes a million rows first. Run it in release:
//!
//! ```text
//! CONSOLE_BENCH_EVENTS=1000000 cargo test --release -p inbox-console --test console bench:: -- --ignored --nocapture
//! ```
//!
//! The rows go straight into the file through SQLite (one transaction) after the ledger made the schema, so the
//! store looks like months of traffic: 90% completed, 5% dead, 3% failed, 2% received, over five sources and
//! twenty types, received over the last 48 hours. Each page is then asked for over HTTP, as a browser would, and
//! the time to the last byte measured: p50 and p99 of `ROUNDS` requests each.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use inbox_console::Console;
use inbox_core::stores::sqlite::SqliteLedger;

const ROUNDS: usize = 200;

fn fill(path: &std::path::Path, n: usize, now: i64) {
    let mut conn = rusqlite::Connection::open(path).unwrap();
    let tx = conn.transaction().unwrap();
    {
        let mut event = tx
            .prepare(
                "INSERT INTO events (id, source, event_id, event_type, status, payload_sha256, received_at,
                    updated_at, attempts, last_error, completed_at, expires_at, due_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8, ?9, ?10, ?11, ?12)",
            )
            .unwrap();
        let mut payload = tx
            .prepare("INSERT INTO payloads (event, headers, body) VALUES (?1, ?2, ?3)")
            .unwrap();
        let span = 48 * 3_600_000_i64;
        for i in 0..n {
            let id = i64::try_from(i).unwrap() + 1;
            let received = now - span + (span * id) / i64::try_from(n).unwrap();
            let (status, error, completed, expires, due) = match i % 100 {
                0..=4 => ("DEAD", Some("downstream said 500"), None, None, None),
                5..=7 => ("FAILED", Some("timeout"), None, None, Some(now + 60_000)),
                8..=9 => ("RECEIVED", None, None, None, Some(received + 60_000)),
                _ => (
                    "COMPLETED",
                    None,
                    Some(received + 50),
                    Some(received + 30 * 86_400_000),
                    None,
                ),
            };
            event
                .execute(rusqlite::params![
                    id,
                    format!("source{}", i % 5),
                    format!("evt_{i:09}"),
                    format!("type.{}", i % 20),
                    status,
                    "0".repeat(64),
                    received,
                    if status == "COMPLETED" { 1 } else { 3 },
                    error,
                    completed,
                    expires,
                    due,
                ])
                .unwrap();
            let body =
                format!(r#"{{"id":"evt_{i:09}","object":"event","data":{{"amount":{i},"currency":"eur"}}}}"#);
            payload
                .execute(rusqlite::params![
                    id,
                    r#"[["content-type","application/json"]]"#,
                    body.as_bytes()
                ])
                .unwrap();
        }
    }
    tx.commit().unwrap();
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes a million events first; run in release, see the top of this file"]
async fn console_pages_over_a_million_events() {
    let n: usize = std::env::var("CONSOLE_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    drop(SqliteLedger::open(dir.path(), 64, Duration::from_secs(60)).unwrap());
    let started = Instant::now();
    fill(&dir.path().join("inbox.db"), n, inbox_core::time::now_ms());
    println!("filled {n} events in {:.1?}", started.elapsed());

    let ledger = Arc::new(SqliteLedger::open(dir.path(), 64, Duration::from_secs(60)).unwrap());
    let console = Console::new(ledger, None, None, "bench");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, console.router()).await });
    let http = reqwest::Client::new();

    let first_page = http
        .get(format!("{base}/events"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let next = first_page
        .split("class=\"next\" href=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap()
        .replace("&amp;", "&");
    let mid = format!("evt_{:09}", n / 2);
    let pages = [
        ("events list (newest 50)", "/events".to_owned()),
        ("events list, page 2 (cursor)", next),
        ("dead events", "/events?status=DEAD".to_owned()),
        (
            "dead events of one source",
            "/events?status=DEAD&source=source0".to_owned(),
        ),
        ("one source", "/events?source=source3".to_owned()),
        ("one type", "/events?type=type.7".to_owned()),
        ("one event id", format!("/events?id={mid}")),
        (
            "a time window",
            "/events?from=2000-01-01T00:00&to=2100-01-01T00:00".to_owned(),
        ),
        (
            "one event",
            format!("/event?source=source{}&id={mid}", (n / 2) % 5),
        ),
        (
            "overview, later views (counts kept 5 s, taken again in the background)",
            "/".to_owned(),
        ),
        ("replay dry run (all dead)", "/replay?status=DEAD".to_owned()),
    ];
    println!("| page ({n} events) | p50 | p99 |");
    println!("|---|---|---|");
    // The overview's counts are taken by its first view and kept a few seconds (see `console::Counts`): that view
    // alone waits for them, timed here once.
    let t = Instant::now();
    let r = http.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.bytes().await.unwrap();
    println!(
        "| overview, first view after start (takes the counts) | {:.1} ms | - |",
        t.elapsed().as_secs_f64() * 1e3
    );
    for (name, path) in pages {
        let url = format!("{base}{path}");
        let mut times = Vec::with_capacity(ROUNDS);
        let rounds = if name.starts_with("replay") || name.starts_with("overview") {
            ROUNDS / 10
        } else {
            ROUNDS
        };
        for _ in 0..rounds {
            let t = Instant::now();
            let r = http.get(&url).send().await.unwrap();
            assert_eq!(r.status(), 200, "{path}");
            r.bytes().await.unwrap();
            times.push(t.elapsed());
            if name.starts_with("overview") {
                // Spread over 10 s, so that the counts are taken again in the background twice meanwhile.
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        times.sort();
        println!(
            "| {name} (`{path}`) | {:.1} ms | {:.1} ms |",
            percentile(&times, 0.5).as_secs_f64() * 1e3,
            percentile(&times, 0.99).as_secs_f64() * 1e3
        );
    }
}
