//! The crash points (shared/src/failpoint.rs): for each named point, a real `inbox serve` built with the
//! `failpoints` feature aborts there (`INBOX_FAILPOINT=point@K`: on its Kth pass, a few requests in) while a client
//! resends each of 200 distinct signed events until it gets a 2xx; the test restarts the server without the fail
//! point whenever it dies. Nothing acknowledged is lost, nothing is stored twice, and no event reaches the
//! downstream more often than one delivery plus one per crash.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::common::*;
use inbox_core::schemes::Scheme;

const SOURCE: &str = "points";
const EVENTS: usize = 200;
const CONCURRENCY: usize = 8;

/// GIVEN a server forwarding to a counting sink that aborts at `point` on its `at`th pass
/// WHEN a client sends 200 distinct events 8 at a time, and the server is restarted (without the fail point)
/// whenever it dies
/// THEN it died at the point, every event is acknowledged and ends COMPLETED, the store holds exactly one record
/// per event id, and the sink saw each event at least once and at most 1 + crashes times.
async fn crash_at(point: &str, at: u32) {
    let started = Instant::now();
    let sink = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let config = format!(
        "[retry]\nbase = \"200ms\"\n[sweeper]\ninterval = \"1s\"\ngrace = \"1s\"\n\
         [sources.{SOURCE}]\nscheme = \"github\"\nsecrets = [\"env:POINTS_SECRET\"]\n\
         handler = {{ kind = \"forward\", url = \"{}/points\", timeout = \"5s\" }}\n",
        sink.url()
    );
    let armed = format!("{point}@{at}");
    let mut app = spawn_app(
        &config,
        &[("POINTS_SECRET", &secret), ("INBOX_FAILPOINT", &armed)],
    );
    // Only the first process is armed: every restart runs without the fail point.
    app.set_env("INBOX_FAILPOINT", None);
    let run = rand_id(point);
    let client = Resender::new(
        (0..EVENTS).map(|i| format!("{run}-{i:03}")).collect(),
        app.url(),
        SOURCE,
        Signer::new(Scheme::Github, &secret),
    );
    let give_up_at = Instant::now() + Duration::from_secs(40);
    let workers: Vec<_> = (0..CONCURRENCY)
        .map(|_| tokio::spawn(client.clone().send_all(give_up_at)))
        .collect();

    // Watch the server: when it dies, restart it on the same data dir (and port, if still free). Processing
    // points fire only once the handlers run, so keep watching until everything is COMPLETED too.
    let mut crashes = 0;
    let watch_until = Instant::now() + Duration::from_secs(45);
    let mut checked = Instant::now();
    loop {
        if app.has_exited() {
            crashes += 1;
            app.restart();
            *client.base.write().expect("lock") = app.url();
        }
        if client.done.load(Ordering::SeqCst) == CONCURRENCY && checked.elapsed() > Duration::from_millis(250)
        {
            checked = Instant::now();
            let counts = app.status_counts();
            if counts.get("COMPLETED") == Some(&EVENTS) && counts.len() == 1 {
                break;
            }
        }
        assert!(
            Instant::now() < watch_until,
            "{point}: not all COMPLETED within 45 s; statuses now {:?}",
            app.status_counts()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for w in workers {
        w.await.expect("a client worker panicked");
    }
    assert!(
        app.log().contains(&format!("failpoint {armed} hit")),
        "{point}: the fail point never fired (is inbox built with the `failpoints` feature?)"
    );
    assert!(crashes >= 1, "{point}: the server never died");
    assert_eq!(
        client.given_up.load(Ordering::SeqCst),
        0,
        "{point}: events never acknowledged"
    );
    assert_eq!(client.acked.load(Ordering::SeqCst), EVENTS);

    // Every acknowledged event ended COMPLETED (the watch above), on a server that is still up.
    assert!(!app.has_exited(), "{point}: the restarted server died too");

    // Exactly one record per event id, and only ours; each delivered at least once, at most once per crash more.
    let doubled = assert_stored_once_and_delivered(&app, &sink, SOURCE, &client.ids, 1 + crashes, point);
    eprintln!(
        "crashpoint {armed}: {EVENTS} events, {crashes} crash(es), {} resends, {doubled} delivered twice, \
         0 lost, 0 stored twice; {:?}",
        client.resent(),
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn crash_after_verify() {
    crash_at("after_verify", 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn crash_after_write_before_enqueue() {
    crash_at("after_write_before_enqueue", 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn crash_after_enqueue_before_answer() {
    crash_at("after_enqueue_before_answer", 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn crash_after_claim() {
    crash_at("after_claim", 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn crash_after_handler_before_settle() {
    crash_at("after_handler_before_settle", 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn crash_after_settle() {
    crash_at("after_settle", 20).await;
}
