//! The duplicate storm: 10,000 deliveries of 1,000 event ids, 64 at a time, in random order, to a real
//! `inbox serve`. Every answer is 200, the store holds 1,000 records, and the downstream saw 1,000 effects: one
//! per `Idempotency-Key`, none twice.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;
use inbox_core::schemes::Scheme;
use rand::seq::SliceRandom;
use serde_json::json;

const SOURCE: &str = "storm";
const IDS: usize = 1_000;
const DELIVERIES: usize = 10_000;
const CONCURRENCY: usize = 64;

/// GIVEN a server forwarding to a counting sink
/// WHEN 10,000 signed deliveries of 1,000 distinct events (each 10 times) arrive in random order, 64 at a time
/// THEN every answer is 200 (accepted the first time, duplicate after), there are 1,000 records all COMPLETED,
/// and the sink saw exactly one delivery per idempotency key.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_thousand_deliveries_of_a_thousand_events_make_a_thousand_effects() {
    let started = Instant::now();
    let sink = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let config = format!(
        "[sources.{SOURCE}]\nscheme = \"github\"\nsecrets = [\"env:STORM_SECRET\"]\n\
         handler = {{ kind = \"forward\", url = \"{}/storm\", timeout = \"5s\" }}\n",
        sink.url()
    );
    let app = spawn_app(&config, &[("STORM_SECRET", &secret)]);
    let run = rand_id("storm");
    let ids: Vec<String> = (0..IDS).map(|i| format!("{run}-{i:04}")).collect();
    let mut order: Vec<usize> = (0..DELIVERIES).map(|d| d % IDS).collect();
    order.shuffle(&mut rand::rng());
    let order = Arc::new(order);
    let ids = Arc::new(ids);
    let signer = Arc::new(Signer::new(Scheme::Github, &secret));
    let next = Arc::new(AtomicUsize::new(0));
    let answers: Arc<Mutex<HashMap<(u16, String), usize>>> = Arc::default();
    let url = app.webhook_url(SOURCE);
    let workers: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let (order, ids, signer, next, answers, url) = (
                order.clone(),
                ids.clone(),
                signer.clone(),
                next.clone(),
                answers.clone(),
                url.clone(),
            );
            tokio::spawn(async move {
                let http = client();
                loop {
                    let n = next.fetch_add(1, Ordering::SeqCst);
                    let Some(i) = order.get(n) else { break };
                    let id = &ids[*i];
                    let body = json!({"id": id, "action": "opened"}).to_string();
                    let a = post(
                        &http,
                        &url,
                        body.clone(),
                        &signer.headers(body.as_bytes(), id, None),
                    )
                    .await;
                    let kind = str_field(&a.json, "status");
                    *answers.lock().expect("lock").entry((a.status, kind)).or_default() += 1;
                }
            })
        })
        .collect();
    for w in workers {
        w.await.expect("a storm worker panicked");
    }
    let sent_in = started.elapsed();
    let answers = answers.lock().expect("lock").clone();
    let ok: usize = answers
        .iter()
        .filter(|((s, _), _)| *s == 200)
        .map(|(_, n)| n)
        .sum();
    assert_eq!(ok, DELIVERIES, "every delivery answered 200: {answers:?}");
    assert_eq!(
        answers.get(&(200, "accepted".to_owned())),
        Some(&IDS),
        "one acceptance per event id: {answers:?}"
    );

    app.wait_all_completed(IDS, Duration::from_secs(30), "every event is COMPLETED");
    assert_eq!(app.events().len(), IDS, "records in the store");

    // The effects, keyed on the idempotency key: one each, none twice (no crash here, so none may repeat).
    let mut effects: HashMap<String, usize> = HashMap::new();
    for r in sink.requests() {
        *effects
            .entry(r.header("idempotency-key").unwrap_or_default())
            .or_default() += 1;
    }
    assert_eq!(effects.len(), IDS, "distinct idempotency keys at the sink");
    let doubled: Vec<_> = effects.iter().filter(|(_, n)| **n > 1).collect();
    assert!(doubled.is_empty(), "effects doubled: {doubled:?}");
    for id in ids.iter() {
        assert_eq!(effects.get(&format!("{SOURCE}:{id}")), Some(&1), "{id}");
    }
    eprintln!(
        "storm: {DELIVERIES} deliveries of {IDS} ids ({} duplicates) sent in {sent_in:?}; {IDS} records, {} effects, \
         0 doubled; all COMPLETED at {:?}",
        DELIVERIES - IDS,
        sink.count(),
        started.elapsed()
    );
}
