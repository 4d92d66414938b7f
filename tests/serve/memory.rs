//! The receiver's bound on request bytes in memory (`server.max_inflight_bytes`) against clients that hang up,
//! end to end against a real `inbox serve`: a client that disconnects once its body is read must not take the
//! body's share of the bound with it while its create still waits for the SQLite writer with the body.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;
use inbox_core::schemes::Scheme;
use serde_json::json;
use testkit::sockets::{attempt, Attempt};

const SOURCE: &str = "mem";
/// `server.max_inflight_bytes` of the server under test.
const BOUND: usize = 32 << 20;
/// Each delivery's body: the source's whole `max_body_bytes`.
const BODY: usize = 1 << 20;
/// `server.max_pending_writes`: deep enough to hold every client's create, so only the bound stops them.
const PENDING: usize = 2_000;
const CLIENTS: usize = 2_000;
const AT_ONCE: usize = 200;
/// What the server may hold over its idle peak beyond the bound. The bound counts body bytes as they arrive, and a
/// counted byte costs more than one resident: each body's buffer grows by doubling as its chunks arrive, hyper's
/// read buffers hold chunks ahead of the handler (200 connections here), and the allocator keeps what was freed.
/// Measured with this load: 116-157 MiB over the idle peak with the bound held, against 700-810 MiB when the
/// clients that hang up take their bytes out of the count.
const MARGIN: usize = 192 << 20;
/// A client answered 503 (the bound is reached) tries again after this, as its `Retry-After: 1` says.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How long the clients keep trying. The writer fails a batch it could not start after its busy timeout (10 s),
/// which frees that batch's bytes; before the fix the clients are all through well within this.
const SEND_FOR: Duration = Duration::from_secs(20);

/// GIVEN a server with 32 MiB for request bodies in memory and room for 2,000 waiting writes, whose SQLite writer
/// is held up (another connection keeps `BEGIN IMMEDIATE` open on its database)
/// WHEN 2,000 clients, 200 at a time, each send a signed 1 MiB body under its own delivery id and hang up once the
/// server has read it (a 503 is tried again after its Retry-After, for 20 s)
/// THEN the server's peak resident memory stays within the bound plus a margin over its idle peak; and once the
/// writer is let go the server is healthy, and accepts and stores a normal delivery (the bytes came back).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clients_hanging_up_while_the_writer_waits_keep_memory_within_the_bound() {
    let started = Instant::now();
    let secret = rand_secret();
    let config = format!(
        "[server]\nmax_inflight_bytes = {BOUND}\nmax_pending_writes = {PENDING}\n\
         [sources.{SOURCE}]\nscheme = \"github\"\nsecrets = [\"env:MEM_SECRET\"]\nmax_body_bytes = {BODY}\n\
         refuse_resent_bodies = false\nhandler = {{ kind = \"log\" }}\n"
    );
    let app = spawn_app(&config, &[("MEM_SECRET", &secret)]);
    let signer = Signer::new(Scheme::Github, &secret);
    let http = client();
    let url = app.webhook_url(SOURCE);
    let pid = app.pid();

    // One normal delivery first, so the idle peak includes a whole pass through the receiver and the writer.
    let warm = rand_id("warm");
    let small = json!({"id": warm, "action": "opened"}).to_string();
    let a = post(
        &http,
        &url,
        small.clone(),
        &signer.headers(small.as_bytes(), &warm, Some("push")),
    )
    .await;
    assert_eq!(a.status, 200, "warm-up delivery: {}", a.text);
    let baseline = proc_status_bytes(pid, "VmHWM");

    // One body for every client: GitHub signs the body alone, so one signature serves every delivery id (and the
    // source takes byte-identical bodies as distinct events). The server still reads each into memory of its own.
    let mut body = json!({"action": "opened", "pad": ""}).to_string().into_bytes();
    let pad_at = body.len() - 2;
    body.splice(pad_at..pad_at, std::iter::repeat_n(b'x', BODY - body.len()));
    assert_eq!(body.len(), BODY);
    let signature: Vec<(String, String)> = signer
        .headers(&body, "unused", Some("push"))
        .into_iter()
        .filter(|(name, _)| !name.as_str().eq_ignore_ascii_case("x-github-delivery"))
        .map(|(name, value)| (name.to_string(), value.to_str().expect("ASCII").to_owned()))
        .collect();
    let body = Arc::new(body);

    // Hold the writer: its `BEGIN IMMEDIATE` waits for this lock (up to its busy timeout, then fails the batch).
    let db = rusqlite::Connection::open(app.data_dir().join("inbox.db")).expect("open the server's database");
    db.busy_timeout(Duration::from_secs(10)).expect("busy timeout");
    db.execute_batch("BEGIN IMMEDIATE").expect("take the write lock");

    let run = rand_id("hang");
    let next = Arc::new(AtomicUsize::new(0));
    let hung_up = Arc::new(AtomicUsize::new(0));
    let given_up = Arc::new(AtomicUsize::new(0));
    let answers: Arc<Mutex<std::collections::BTreeMap<u16, usize>>> = Arc::default();
    let until = Instant::now() + SEND_FOR;
    let addr = app.addr();
    let (read_tx, read_rx) = tokio::sync::watch::channel(Arc::new(std::collections::HashSet::new()));
    let watcher = tokio::spawn(async move {
        loop {
            let port = addr.port();
            let read = tokio::task::spawn_blocking(move || testkit::sockets::read_in_full(port))
                .await
                .expect("read /proc/net/tcp");
            if read_tx.send(Arc::new(read)).is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let workers: Vec<_> = (0..AT_ONCE)
        .map(|_| {
            let (next, hung_up, given_up, answers, body, signature, run, read) = (
                next.clone(),
                hung_up.clone(),
                given_up.clone(),
                answers.clone(),
                body.clone(),
                signature.clone(),
                run.clone(),
                read_rx.clone(),
            );
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= CLIENTS {
                        break;
                    }
                    let mut head = format!(
                        "POST /webhooks/{SOURCE} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
                         content-length: {BODY}\r\nx-github-delivery: {run}-{i:04}\r\n"
                    );
                    for (name, value) in &signature {
                        head.push_str(&format!("{name}: {value}\r\n"));
                    }
                    head.push_str("\r\n");
                    loop {
                        match attempt(addr, head.as_bytes(), &body, read.clone()).await {
                            Attempt::HungUp => {
                                hung_up.fetch_add(1, Ordering::SeqCst);
                                break;
                            }
                            Attempt::Answered(status) => {
                                *answers.lock().expect("lock").entry(status).or_default() += 1;
                            }
                        }
                        if Instant::now() + RETRY_AFTER > until {
                            given_up.fetch_add(1, Ordering::SeqCst);
                            break;
                        }
                        tokio::time::sleep(RETRY_AFTER).await;
                    }
                    if Instant::now() > until {
                        break;
                    }
                }
            })
        })
        .collect();
    // Resident memory now and then, for the figures.
    let mut rss_peak_seen = 0;
    while !workers.iter().all(|w| w.is_finished()) {
        rss_peak_seen = rss_peak_seen.max(proc_status_bytes(pid, "VmRSS"));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for w in workers {
        w.await.expect("a client panicked");
    }
    watcher.abort();
    let peak = proc_status_bytes(pid, "VmHWM");
    let sent_in = started.elapsed();
    let hung_up = hung_up.load(Ordering::SeqCst);
    let answers = answers.lock().expect("lock").clone();
    eprintln!(
        "memory: idle peak {:.1} MiB; peak under load {:.1} MiB (VmRSS seen up to {:.1} MiB); allowed {:.1} MiB \
         (bound {:.0} MiB + margin {:.0} MiB over the idle peak); {hung_up} clients hung up after their body, {} \
         gave up, answers {answers:?}; at {sent_in:?}",
        mib(baseline),
        mib(peak),
        mib(rss_peak_seen),
        mib(baseline + BOUND + MARGIN),
        mib(BOUND),
        mib(MARGIN),
        given_up.load(Ordering::SeqCst),
    );
    // The load did what it claims: more bytes hung up on than the bound.
    assert!(
        hung_up * BODY > BOUND,
        "only {hung_up} clients sent a whole body and hung up: the load did not test the bound"
    );
    assert!(
        answers.keys().all(|s| [0, 503].contains(s)),
        "while the writer is held, the only answer is 503 (or a cut-off connection): {answers:?}"
    );
    assert!(
        peak <= baseline + BOUND + MARGIN,
        "peak resident memory {:.1} MiB passed the bound: idle peak {:.1} MiB + max_inflight_bytes {:.0} MiB + \
         margin {:.0} MiB = {:.1} MiB; {hung_up} clients had hung up after their 1 MiB body",
        mib(peak),
        mib(baseline),
        mib(BOUND),
        mib(MARGIN),
        mib(baseline + BOUND + MARGIN),
    );

    // Let the writer go: the server is healthy and a normal delivery is accepted and stored.
    db.execute_batch("ROLLBACK").expect("release the write lock");
    drop(db);
    let health = get(&http, &format!("{}/healthz", app.url())).await;
    assert_eq!(
        health.status, 200,
        "healthz after the writer was let go: {}",
        health.text
    );
    // The creates still queued keep their bytes until the writer is done with them, so the first answers may be
    // 503 (bound full) for a moment; a sender tries again, as Retry-After says.
    let after = rand_id("after");
    let small = json!({"id": after, "action": "closed"}).to_string();
    let give_up = Instant::now() + Duration::from_secs(15);
    let a = loop {
        let a = post(
            &http,
            &url,
            small.clone(),
            &signer.headers(small.as_bytes(), &after, Some("push")),
        )
        .await;
        if a.status != 503 || Instant::now() > give_up {
            break a;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        a.status, 200,
        "a normal delivery after the writer was let go (tried for 15 s): {}",
        a.text
    );
    assert_eq!(str_field(&a.json, "status"), "accepted", "{}", a.text);
    let stored = app
        .event(SOURCE, &after)
        .expect("the delivery after the hold is stored");
    assert_eq!(str_field(&stored, "event_id"), after);
    // What the hung-up clients left is stored under their own ids, or not at all; nothing else.
    for (source, id) in app.event_keys() {
        assert_eq!(source, SOURCE);
        assert!(
            id == warm || id == after || id.starts_with(&run),
            "an event nobody sent: {id}"
        );
    }
    eprintln!("memory: done in {:?}", started.elapsed());
}
