//! Faults of real machines under real `inbox serve` processes on the SQLite store (the default): the power going
//! out in the middle of a storm, a disk that fills up, a disk that syncs slowly, and a process that is paused
//! while its handlers run.
//!
//! - `power_loss_at_random_moments_of_a_storm_loses_nothing_acknowledged`: the data directory on the fault file
//!   system (`testkit::faultfs`); 16 clients send new events and repeats of them (a quarter of the sends); at a
//!   random moment (seeded: 0–2.5 s after the first acknowledgement) the server is killed (SIGKILL) and the power cut (every file holds what its syncs
//!   stored); restarted on what survived, the store opens and passes `integrity_check`, every event answered 200
//!   before the cut is there once with the body that was sent, and everything stored completes.
//!   `INBOX_POWER_TRIALS=N` runs N trials (8 by default, about 2 s each).
//! - `a_full_disk_is_a_503_until_space_returns_without_a_restart`: the data directory on a small `tmpfs` that a
//!   filler file leaves 8 MiB of; clients send bodies of random characters until the disk is full: every answer
//!   is 200 or 503 with `Retry-After` (never another status, never a dropped connection); the filler is deleted
//!   and the same process accepts again; nothing acknowledged is lost or altered; it stops cleanly on SIGTERM.
//! - `a_slow_disk_pushes_back_early_with_bounded_memory`: every `fsync` of the fault file system takes 100 ms;
//!   128 clients against a writer queue of 64: the server answers 503 with `Retry-After` within the first
//!   seconds, its resident memory stays within a bound, and after a clean stop and a power cut every event
//!   answered 200 is there.
//! - `a_paused_process_settles_late_with_only_the_documented_repeats`: four events in the hands of a `forward`
//!   handler whose downstream holds each request 2 s; the server is stopped (SIGSTOP) for 10 s, past the 7 s
//!   leases (handler timeout 3 s + 4 s), and resumed (SIGCONT). Its sweeper was stopped with it, so a late settle
//!   that nobody took over stands. What runs an event again is named in the log: the handler's time-out (tokio's
//!   monotonic clock ran on through the pause, so it fires as the process resumes, though the downstream answered
//!   meanwhile: a retryable failure, retried), or the sweeper taking an ended lease over (the late settle then
//!   refused). Every event ends COMPLETED, each with as many deliveries downstream as attempts recorded, at most
//!   two, under one idempotency key.
//!
//! Each trial prints one line (`--nocapture`): runs, acknowledged, 503s, lost, doubled (and memory where it is
//! measured). The seed of the random draws is printed; `INBOX_FAULTS_SEED=N` draws the same bodies, repeats and
//! moments of the cuts again (the timing of the processes is not repeated).
//!
//! Run them: `cargo test --test serve faults:: -- --nocapture` (as root, with `/dev/fuse`: CI has both; without
//! them, and outside CI, the tests that need them say SKIPPED).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use testkit::faultfs::Disk;

use crate::common::*;
use inbox_core::schemes::Scheme;

const SOURCE: &str = "faults";

/// A server logging what it receives; `server` is a `[server]` table or nothing.
fn config(server: &str) -> String {
    format!(
        "{server}[sweeper]\ninterval = \"1s\"\ngrace = \"1s\"\n\
         [sources.{SOURCE}]\nscheme = \"github\"\nsecrets = [\"env:FAULTS_SECRET\"]\nhandler = {{ kind = \"log\" }}\n"
    )
}

/// The seed of a test's random draws: `INBOX_FAULTS_SEED`, or a fresh one; printed either way.
fn seed(test: &str) -> u64 {
    let seed = std::env::var("INBOX_FAULTS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("{test}: seed {seed} (INBOX_FAULTS_SEED={seed} draws the same)");
    seed
}

/// Whether the test can mount what it needs (root, and `/dev/fuse` where `fuse`); outside CI a machine without them
/// skips the test, in CI it fails at the mount.
fn can_mount(fuse: bool) -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n");
    let ok = root && (!fuse || Path::new("/dev/fuse").exists());
    if !ok && std::env::var_os("CI").is_none() {
        eprintln!("SKIPPED: needs root{}", if fuse { " and /dev/fuse" } else { "" });
        return false;
    }
    true
}

/// A fresh mount point under a temporary directory (kept as long as the returned directory is).
fn mount_point() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::Builder::new()
        .prefix("inbox-faults-")
        .tempdir()
        .expect("temp dir");
    let at = root.path().join("mnt");
    std::fs::create_dir(&at).expect("mount point");
    (root, at)
}

/// The 503s among `sent`, the `Retry-After` values they carried, and how many carried none (or not a number of
/// seconds).
fn refusals(sent: &[Sent]) -> (Vec<&Sent>, std::collections::BTreeSet<&str>, usize) {
    let refused: Vec<&Sent> = sent.iter().filter(|s| s.status == Some(503)).collect();
    let values = refused.iter().filter_map(|s| s.retry_after.as_deref()).collect();
    let without = refused
        .iter()
        .filter(|s| {
            s.retry_after
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
                .is_none()
        })
        .count();
    (refused, values, without)
}

// ---------------------------------------------------------------------------------------------------------
// 1. Power loss at random moments of a storm.

/// What one power-cut trial saw.
struct Cut {
    after: Duration,
    /// Pages written and never synced, gone with the power.
    unsynced: usize,
    answers: BTreeMap<&'static str, usize>,
    kept: Kept,
    stored: usize,
    intact: String,
}

/// GIVEN a server on the fault file system under 16 senders of new events and repeats
/// WHEN the power goes at a random moment (0–2.5 s after the first acknowledgement): the server killed (SIGKILL),
/// every file cut back to what its syncs stored
/// THEN a server restarted on what survived opens the store, which passes `integrity_check` and holds every event
/// answered 200 once, with the body sent; and everything stored completes.
async fn power_cut_trial(seed: u64) -> Cut {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (_root, mount) = mount_point();
    let disk = Disk::mount(&mount).unwrap_or_else(|e| panic!("{e}"));
    let data = mount.join("data");
    let secret = rand_secret();
    let mut app = spawn_app_in(&config(""), &[("FAULTS_SECRET", &secret)], Some(&data));
    let senders = Clients::start(
        app.url(),
        &secret,
        &rand_id("cut"),
        Load {
            source: SOURCE,
            clients: 16,
            body: 1_000,
            duplicates: 0.25,
            seed,
        },
    );
    // The storm has begun once something is acknowledged (a loaded machine may take a while to answer the first).
    let until = Instant::now() + Duration::from_secs(30);
    while senders.acked.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < until, "nothing acknowledged within 30 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let after = Duration::from_millis(rng.random_range(0..2_500));
    tokio::time::sleep(after).await;
    // The power goes: the process with it, then every file is what its syncs stored.
    app.kill();
    let unsynced = disk.power_cut();
    let sent = senders.stop().await;

    app.restart();
    let stored = app.events().len();
    if stored > 0 {
        app.wait_all_completed(
            stored,
            Duration::from_secs(60),
            "everything stored completes after the cut",
        );
    }
    app.kill();
    let (intact, bodies) = stored_bodies(&data, SOURCE);
    drop(disk);
    Cut {
        after,
        unsynced,
        answers: tally(&sent),
        kept: kept(&sent, &bodies),
        stored,
        intact,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn power_loss_at_random_moments_of_a_storm_loses_nothing_acknowledged() {
    if !can_mount(true) {
        return;
    }
    let trials: usize = std::env::var("INBOX_POWER_TRIALS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(8);
    let seed = seed("power loss");
    let mut total = Kept::default();
    for t in 0..trials {
        let cut = power_cut_trial(seed.wrapping_add(t as u64)).await;
        eprintln!(
            "power cut {t}: {:?} after the first 200, {} pages unsynced; runs 1, answers {:?}, acknowledged {}, 503s {}, \
             lost {}, doubled {}, other body {}, stored {}, integrity {}",
            cut.after,
            cut.unsynced,
            cut.answers,
            cut.kept.acked,
            cut.answers.get("503").unwrap_or(&0),
            cut.kept.lost,
            cut.kept.doubled,
            cut.kept.wrong,
            cut.stored,
            cut.intact,
        );
        assert_eq!(cut.intact, "ok", "trial {t}: integrity_check after the restart");
        assert_eq!(
            cut.answers.get("other"),
            None,
            "trial {t}: answers other than 200 and 503"
        );
        assert!(
            cut.kept.acked > 0,
            "trial {t}: nothing was acknowledged before the cut"
        );
        assert_eq!(
            (cut.kept.lost, cut.kept.doubled, cut.kept.wrong),
            (0, 0, 0),
            "trial {t}: acknowledged and lost, stored twice, or stored with another body"
        );
        total.acked += cut.kept.acked;
    }
    eprintln!(
        "power loss: {trials} runs, {} acknowledged, 0 lost, 0 doubled",
        total.acked
    );
}

// ---------------------------------------------------------------------------------------------------------
// 2. A full disk.

/// A `tmpfs` mounted for the test, unmounted when dropped (also when the test fails).
struct Tmpfs {
    at: PathBuf,
}

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Tmpfs {
        let done = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "inbox-faults"])
            .arg(at)
            .status()
            .expect("run mount");
        assert!(
            done.success(),
            "mount -t tmpfs at {} failed (root is needed)",
            at.display()
        );
        Tmpfs { at: at.to_path_buf() }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let done = Command::new("umount").arg(&self.at).status();
        if !done.is_ok_and(|s| s.success()) {
            // Still busy (a server not yet reaped): detach it now, it goes once the last user does.
            let _ = Command::new("umount").arg("-l").arg(&self.at).status();
        }
    }
}

/// GIVEN a server whose data directory is on a 32 MiB `tmpfs` that a filler file leaves 8 MiB of
/// WHEN 8 clients send events of 4,000 random characters (and repeats) until the disk is full, and for 2 s more
/// THEN every answer is a 200 or a 503 with `Retry-After` (no other status, no connection dropped, the process
/// still up); once the filler is deleted the same process accepts again and answers no 503 a second later; it
/// stops cleanly on SIGTERM, and its store (which passes `integrity_check`) holds every event answered 200, once,
/// with the body sent; restarted, it completes them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_disk_is_a_503_until_space_returns_without_a_restart() {
    if !can_mount(false) {
        return;
    }
    let seed = seed("disk full");
    let (_root, mount) = mount_point();
    let fs = Tmpfs::mount(&mount, "32m");
    let filler = fs.at.join("filler");
    std::fs::write(&filler, vec![0xa5u8; 24 << 20]).expect("write the filler");
    let data = mount.join("data");
    let secret = rand_secret();
    let mut app = spawn_app_in(&config(""), &[("FAULTS_SECRET", &secret)], Some(&data));
    let started = Instant::now();
    let senders = Clients::start(
        app.url(),
        &secret,
        &rand_id("full"),
        Load {
            source: SOURCE,
            clients: 8,
            body: 4_000,
            duplicates: 0.1,
            seed,
        },
    );
    let until = Instant::now() + Duration::from_secs(60);
    while senders.refused.load(Ordering::SeqCst) == 0 {
        assert!(
            app.exit_status().is_none(),
            "the server stopped on a full disk; log:\n{}",
            app.log()
        );
        assert!(
            Instant::now() < until,
            "no 503 within 60 s: the disk never filled"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let full_after = started.elapsed();
    // Full for 2 s more: the clients keep sending (and are refused).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        app.exit_status().is_none(),
        "the server stopped on a full disk; log:\n{}",
        app.log()
    );
    let acked_when_full = senders.acked.load(Ordering::SeqCst);
    std::fs::remove_file(&filler).expect("delete the filler");
    let freed = Instant::now();
    let until = freed + Duration::from_secs(30);
    while senders.acked.load(Ordering::SeqCst) < acked_when_full + 500 {
        assert!(
            app.exit_status().is_none(),
            "the server stopped; log:\n{}",
            app.log()
        );
        assert!(
            Instant::now() < until,
            "the server did not accept again within 30 s of the space returning: {} acknowledged since",
            senders.acked.load(Ordering::SeqCst) - acked_when_full
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let sent = senders.stop().await;
    assert!(
        app.exit_status().is_none(),
        "the server stopped; log:\n{}",
        app.log()
    );

    let answers = tally(&sent);
    let (refused, retry_after, without_retry_after) = refusals(&sent);
    let accepted_after = sent.iter().filter(|s| s.sent > freed && s.acked()).count();
    let refused_late = refused
        .iter()
        .filter(|s| s.sent > freed + Duration::from_secs(1))
        .count();
    let log = app.log();
    // The refusals are the full disk's (SQLite's SQLITE_FULL), as the server logs them.
    let full_logged = log.matches("database or disk is full").count();
    app.terminate();
    let (intact, bodies) = stored_bodies(&data, SOURCE);
    let k = kept(&sent, &bodies);
    eprintln!(
        "disk full: full {full_after:?} in; runs 1, answers {answers:?}, acknowledged {}, 503s {} (Retry-After \
         {retry_after:?}, {} without, {} sent over 1 s after the space returned, {full_logged} log lines of a full \
         disk), accepted after {accepted_after}, lost {}, doubled {}, other body {}, stored {}, integrity {intact}",
        k.acked,
        refused.len(),
        without_retry_after,
        refused_late,
        k.lost,
        k.doubled,
        k.wrong,
        bodies.len(),
    );
    assert_eq!(
        answers.get("other"),
        None,
        "only 200 and 503 on a full disk: {answers:?}; log:\n{log}"
    );
    assert_eq!(answers.get("none"), None, "no connection dropped: {answers:?}");
    assert!(!refused.is_empty(), "the full disk was never answered 503");
    assert!(full_logged > 0, "no refusal logged for a full disk; log:\n{log}");
    assert_eq!(without_retry_after, 0, "503s without a Retry-After");
    assert!(
        accepted_after >= 500,
        "accepting did not resume once the space returned"
    );
    assert_eq!(refused_late, 0, "503s a second after the space returned");
    assert_eq!(intact, "ok", "integrity_check");
    assert_eq!(
        (k.lost, k.doubled, k.wrong),
        (0, 0, 0),
        "acknowledged and lost, doubled or altered"
    );

    app.restart();
    app.wait_all_completed(
        bodies.len(),
        Duration::from_secs(60),
        "everything stored completes",
    );
    app.kill();
    drop(fs);
}

// ---------------------------------------------------------------------------------------------------------
// 3. A slow disk.

/// Each `fsync` of the slow disk.
const SLOW_FSYNC: Duration = Duration::from_millis(100);
/// What the server may hold at its peak over its peak before the storm: 128 connections' bodies of 2 KB and 64
/// waiting writes are a few MiB; the rest is the runtime's and the allocator's slack (measured: +12 MiB).
const SLOW_MEMORY_BOUND: usize = 32 << 20;

/// GIVEN a server on the fault file system, a writer queue of 64 (`server.max_pending_writes`), and every `fsync`
/// taking 100 ms
/// WHEN 128 clients send events (and repeats) for 10 s
/// THEN 503s with `Retry-After` come within the first 5 s and no other failure, the server's peak resident memory
/// grows by less than 32 MiB over its peak before the storm; after a clean stop and a power cut every event
/// answered 200 is stored once with its body, and the store passes `integrity_check`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_disk_pushes_back_early_with_bounded_memory() {
    if !can_mount(true) {
        return;
    }
    let seed = seed("slow disk");
    let (_root, mount) = mount_point();
    let disk = Disk::mount(&mount).unwrap_or_else(|e| panic!("{e}"));
    let data = mount.join("data");
    let secret = rand_secret();
    let mut app = spawn_app_in(
        &config("[server]\nmax_pending_writes = 64\n"),
        &[("FAULTS_SECRET", &secret)],
        Some(&data),
    );
    let pid = app.pid();
    let idle = proc_status_bytes(pid, "VmHWM");
    disk.slow_fsync(SLOW_FSYNC);
    let started = Instant::now();
    let senders = Clients::start(
        app.url(),
        &secret,
        &rand_id("slow"),
        Load {
            source: SOURCE,
            clients: 128,
            body: 2_000,
            duplicates: 0.1,
            seed,
        },
    );
    let mut rss_peak = 0;
    let mut first_503 = None;
    while started.elapsed() < Duration::from_secs(10) {
        rss_peak = rss_peak.max(proc_status_bytes(pid, "VmRSS"));
        if first_503.is_none() && senders.refused.load(Ordering::SeqCst) > 0 {
            first_503 = Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let sent = senders.stop().await;
    let hwm = proc_status_bytes(pid, "VmHWM");
    let (syncs, _) = disk.syncs();
    disk.slow_fsync(Duration::ZERO);
    app.terminate();
    let unsynced = disk.power_cut();
    let (intact, bodies) = stored_bodies(&data, SOURCE);
    let k = kept(&sent, &bodies);
    let answers = tally(&sent);
    let (refused, retry_after, without_retry_after) = refusals(&sent);
    let slowest = sent
        .iter()
        .filter(|s| s.acked())
        .map(|s| s.answered - s.sent)
        .max()
        .unwrap_or_default();
    eprintln!(
        "slow disk ({SLOW_FSYNC:?} a sync, {syncs} syncs): runs 1, answers {answers:?}, acknowledged {}, 503s {} (first \
         after {first_503:?}, Retry-After {retry_after:?}, {without_retry_after} without), lost {}, doubled {}, other body {}, slowest 200 \
         {slowest:?}, {unsynced} pages unsynced at the cut; memory: peak before {:.1} MiB, VmRSS peak seen {:.1} MiB, VmHWM after {:.1} MiB (+{:.1} MiB), \
         integrity {intact}",
        k.acked,
        refused.len(),
        k.lost,
        k.doubled,
        k.wrong,
        mib(idle),
        mib(rss_peak),
        mib(hwm),
        mib(hwm.saturating_sub(idle)),
    );
    assert_eq!(answers.get("other"), None, "only 200 and 503: {answers:?}");
    assert_eq!(answers.get("none"), None, "no connection dropped: {answers:?}");
    assert!(
        first_503.is_some_and(|at| at < Duration::from_secs(5)),
        "no 503 within 5 s of a storm on a slow disk (first after {first_503:?})"
    );
    assert_eq!(without_retry_after, 0, "503s without a Retry-After");
    assert!(k.acked > 0, "nothing acknowledged");
    assert!(
        hwm.saturating_sub(idle) < SLOW_MEMORY_BOUND,
        "peak resident memory grew by {:.1} MiB, over {:.0} MiB",
        mib(hwm.saturating_sub(idle)),
        mib(SLOW_MEMORY_BOUND)
    );
    assert_eq!(intact, "ok", "integrity_check");
    assert_eq!(
        (k.lost, k.doubled, k.wrong),
        (0, 0, 0),
        "acknowledged and lost, doubled or altered"
    );
    drop(disk);
}

// ---------------------------------------------------------------------------------------------------------
// 4. A paused process.

/// Events in the hands of the paused server's handlers.
const PAUSED_EVENTS: usize = 4;

/// GIVEN a server forwarding to a downstream that holds each request 2 s (handler timeout 3 s: leases of 7 s), and
/// four events whose deliveries the downstream holds
/// WHEN the server is stopped (SIGSTOP) for 10 s, past every lease, and resumed (SIGCONT)
/// THEN every event ends COMPLETED; each was delivered as many times as the store counts attempts, at most twice
/// (a late settle nobody took over stands: the sweeper was paused too; a repeat is the sweeper's take-over of an
/// ended lease or the handler's time-out, both documented), always under its one idempotency key.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_process_settles_late_with_only_the_documented_repeats() {
    let sink = Sink::start(&[], 200).await;
    sink.delay(Duration::from_secs(2));
    let secret = rand_secret();
    let config = format!(
        "[sweeper]\ninterval = \"1s\"\ngrace = \"1s\"\n\
         [sources.{SOURCE}]\nscheme = \"github\"\nsecrets = [\"env:FAULTS_SECRET\"]\n\
         handler = {{ kind = \"forward\", url = \"{}/paused\", timeout = \"3s\" }}\n",
        sink.url()
    );
    let app = spawn_app(&config, &[("FAULTS_SECRET", &secret)]);
    let signer = Signer::new(Scheme::Github, &secret);
    let http = client();
    let ids: Vec<String> = (0..PAUSED_EVENTS).map(|_| rand_id("paused")).collect();
    for id in &ids {
        let body = serde_json::json!({"id": id}).to_string();
        let a = post(
            &http,
            &app.webhook_url(SOURCE),
            body.clone(),
            &signer.headers(body.as_bytes(), id, Some("push")),
        )
        .await;
        assert_eq!(a.json["status"], "accepted", "{}", a.text);
    }
    wait_until(
        Duration::from_secs(10),
        "every delivery reaches the downstream",
        || sink.count() >= PAUSED_EVENTS,
    );
    app.signal("-STOP");
    tokio::time::sleep(Duration::from_secs(10)).await;
    let during = sink.count();
    app.signal("-CONT");
    wait_until(
        Duration::from_secs(40),
        "every event is COMPLETED after the pause",
        || ids.iter().all(|id| app.status_of(SOURCE, id) == "COMPLETED"),
    );
    let requests = sink.requests();
    let log = app.log();
    let mut repeats = 0;
    let mut timed_out = 0;
    let mut attempts_seen = Vec::new();
    for id in &ids {
        let event = app.event(SOURCE, id).expect("stored");
        let attempts = event["attempts"].as_u64().unwrap_or(0) as usize;
        let key = format!("{SOURCE}:{id}");
        let deliveries = requests
            .iter()
            .filter(|r| r.header("idempotency-key").as_deref() == Some(key.as_str()))
            .count();
        assert_eq!(str_field(&event, "status"), "COMPLETED", "{event}");
        assert_eq!(
            deliveries, attempts,
            "{id}: a delivery for each attempt the store counts: {event}"
        );
        assert!(
            (1..=2).contains(&attempts),
            "{id}: {attempts} attempts after one pause: {event}"
        );
        // A repeat has a cause the log names: the first attempt's settle was a retryable failure (its handler's
        // time-out, whose clock ran on through the pause), or it was refused because the sweeper took the ended
        // lease over.
        let said = |what: &str| {
            log.lines()
                .any(|l| l.contains(&format!("event_id={id}")) && l.contains(what))
        };
        if attempts == 2 {
            let timeout = said("failed, will retry");
            assert!(
                timeout || said("lease was lost"),
                "{id}: delivered twice with no time-out and no lost lease logged; log:\n{log}"
            );
            timed_out += usize::from(timeout);
        }
        repeats += attempts - 1;
        attempts_seen.push(attempts);
    }
    assert_eq!(
        requests.len(),
        ids.len() + repeats,
        "no delivery downstream but the events' attempts"
    );
    eprintln!(
        "paused process: runs 1, {} events, deliveries {} ({} during the 10 s pause), attempts {attempts_seen:?}, repeats \
         {repeats} ({timed_out} after a late settle of a time-out, {} after a late settle refused for a lost lease), \
         lost 0",
        ids.len(),
        requests.len(),
        during - PAUSED_EVENTS,
        repeats - timed_out,
    );
}
