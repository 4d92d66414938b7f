//! The crash test: `inbox serve` is SIGKILLed three times while a client sends 2,000 distinct signed events with
//! retries, and restarted on the same data directory each time. Nothing acknowledged is lost, nothing is stored
//! twice, and no event reaches the downstream more often than one delivery plus one per crash.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::common::*;
use inbox_core::schemes::Scheme;
use serde_json::json;

const SOURCE: &str = "crash";
const EVENTS: usize = 2_000;
const CONCURRENCY: usize = 32;
/// The server is killed when the client has this many acknowledgements.
const KILL_AT: [usize; 3] = [400, 1_000, 1_600];

/// GIVEN a server forwarding to a counting sink, and a client sending 2,000 distinct events 32 at a time
/// WHEN the server is SIGKILLed three times mid-stream and restarted on the same data dir each time
/// THEN every event is acknowledged and ends COMPLETED, the store holds exactly one record per event id, and the
/// sink saw each event at least once and at most 1 + 3 times.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn sigkill_while_receiving_loses_nothing_and_stores_nothing_twice() {
    let started = Instant::now();
    let sink = Sink::start(&[], 200).await;
    let secret = rand_secret();
    // The default sweeper (grace 30 s, interval 1 m): the restart scan alone must hand out what the killed
    // process held in memory.
    let config = format!(
        "[retry]\nbase = \"200ms\"\n[sources.{SOURCE}]\nscheme = \"github\"\nsecrets = [\"env:CRASH_SECRET\"]\n\
         handler = {{ kind = \"forward\", url = \"{}/crash\", timeout = \"5s\" }}\n",
        sink.url()
    );
    let mut app = spawn_app(&config, &[("CRASH_SECRET", &secret)]);
    let run = rand_id("crash");
    let client = Resender::new(
        (0..EVENTS).map(|i| format!("{run}-{i:04}")).collect(),
        app.url(),
        SOURCE,
        Signer::new(Scheme::Github, &secret),
    );
    let give_up_at = Instant::now() + Duration::from_secs(40);
    let workers: Vec<_> = (0..CONCURRENCY)
        .map(|_| tokio::spawn(client.clone().send_all(give_up_at)))
        .collect();

    // Kill mid-stream, restart on the same data dir (and port, if still free), three times.
    let mut killed_at = Vec::new();
    for threshold in KILL_AT {
        wait_every(
            Duration::from_secs(30),
            Duration::from_millis(2),
            format!("{threshold} events are acknowledged"),
            &mut || client.acked.load(Ordering::SeqCst) >= threshold,
        );
        let acked = client.acked.load(Ordering::SeqCst);
        app.kill();
        killed_at.push(acked);
        assert!(
            acked < EVENTS,
            "the client finished before the kill: not mid-stream"
        );
        app.restart();
        *client.base.write().expect("lock") = app.url();
    }
    for w in workers {
        w.await.expect("a client worker panicked");
    }
    let sent_in = started.elapsed();
    assert_eq!(
        client.given_up.load(Ordering::SeqCst),
        0,
        "events never acknowledged"
    );
    assert_eq!(client.acked.load(Ordering::SeqCst), EVENTS);

    // Every acknowledged event ends COMPLETED.
    app.wait_all_completed(
        EVENTS,
        Duration::from_secs(30),
        "every acknowledged event is COMPLETED",
    );

    // Exactly one record per event id, and only ours; each delivered at least once, at most once per crash more.
    let doubled =
        assert_stored_once_and_delivered(&app, &sink, SOURCE, &client.ids, 1 + KILL_AT.len(), "crash test");
    eprintln!(
        "crash test: killed at {killed_at:?} acknowledgements; all sent in {sent_in:?} ({} connection errors, \
         {} non-2xx answers); all COMPLETED at {:?}; {doubled} events delivered more than once",
        client.errors.load(Ordering::SeqCst),
        client.refused.load(Ordering::SeqCst),
        started.elapsed()
    );
}

/// GIVEN events accepted but not processed yet (a slow downstream and two workers keep them queued in memory)
/// WHEN the server is SIGKILLed and restarted with the default sweeper settings
/// THEN the restart scan hands them out at once ("whatever an earlier process left open is handed out again
/// now"): all COMPLETED within 10 s, not after the sweeper's grace and interval (30 s + 1 min).
#[tokio::test(flavor = "multi_thread")]
async fn restart_hands_out_accepted_events_at_once() {
    const N: usize = 20;
    let sink = Sink::start(&[], 200).await;
    sink.delay(Duration::from_millis(500));
    let secret = rand_secret();
    let config = format!(
        "[server]\nworkers = 2\n[sources.{SOURCE}]\nscheme = \"github\"\nsecrets = [\"env:CRASH_SECRET\"]\n\
         handler = {{ kind = \"forward\", url = \"{}/crash\", timeout = \"5s\" }}\n",
        sink.url()
    );
    let mut app = spawn_app(&config, &[("CRASH_SECRET", &secret)]);
    let signer = Signer::new(Scheme::Github, &secret);
    let http = client();
    let run = rand_id("restart");
    let ids: Vec<String> = (0..N).map(|i| format!("{run}-{i:02}")).collect();
    for id in &ids {
        let body = json!({"id": id}).to_string();
        let a = post(
            &http,
            &app.webhook_url(SOURCE),
            body.clone(),
            &signer.headers(body.as_bytes(), id, Some("push")),
        )
        .await;
        assert_eq!(a.json["status"], "accepted", "{}", a.text);
    }
    wait_until(Duration::from_secs(10), "the first handler is in flight", || {
        sink.count() >= 1
    });

    app.kill();
    let open = app
        .events()
        .iter()
        .filter(|e| str_field(e, "status") != "COMPLETED")
        .count();
    assert!(
        open >= N / 2,
        "GIVEN most events still open at the kill, got {open}"
    );
    sink.delay(Duration::ZERO);
    app.restart();
    app.wait_all_completed(
        N,
        Duration::from_secs(10),
        "the events left open by the killed server are COMPLETED after the restart",
    );
}
