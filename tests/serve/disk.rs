//! The disk failing under a real `inbox serve` (docs/DESIGN.md, "A failed sync is the end of trust"): a sync or a
//! checkpoint that meets an injected I/O error while committed batches wait behind it (the writer's own inline
//! checkpoint, which needs a WAL of 4,096 pages, is injected in-process in `shared/tests/core/sqlite.rs`), and a
//! failed `fsync` of the WAL followed by a power loss, on a file system that behaves as Linux does after one
//! (`testkit::faultfs`), on every path that syncs the WAL.
//!
//! Every answer a client got is recorded with when it was sent; the server must answer nothing 200 once it has met
//! the failure, stop itself (exit non-zero, the cause logged at error), and after a restart hold every event it
//! answered 200, in a store that opens.
//!
//! The power-loss trials: `cargo test --test serve disk::a_failed_wal_fsync -- --nocapture` prints one line a
//! trial; `INBOX_FSYNC_TRIALS=N` runs N of them (21 by default, a third on each path).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use testkit::faultfs::{Disk, FsyncFault};

use crate::common::*;

const SOURCE: &str = "disk";

fn config() -> String {
    format!(
        "[sweeper]\ninterval = \"1s\"\ngrace = \"1s\"\n\
         [sources.{SOURCE}]\nscheme = \"github\"\nsecrets = [\"env:DISK_SECRET\"]\nhandler = {{ kind = \"log\" }}\n"
    )
}

/// Waits for the server to exit on its own, for at most `deadline`.
async fn exit_of(app: &mut App, deadline: Duration) -> Option<ExitStatus> {
    let until = Instant::now() + deadline;
    while Instant::now() < until {
        if let Some(status) = app.exit_status() {
            return Some(status);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

/// The number a log line gives for `field=N`, the last time it appears.
fn logged(log: &str, field: &str) -> Option<usize> {
    let at = log.rfind(&format!("{field}="))?;
    log[at + field.len() + 1..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// GIVEN a server whose store meets an injected I/O error at `point` (`name@at:eio`: held 200 ms first, so that
/// committed batches wait behind it), under `clients` senders of new events
/// WHEN the failure comes
/// THEN no request sent after the first answer that is not a 2xx is answered 200, the server exits non-zero with the cause logged at
/// error, and after a restart every event it answered 200 is stored and completes.
async fn end_of_trust_at(point: &str, at: u32, clients: usize, body: usize, path: &str) {
    let secret = rand_secret();
    let armed = format!("{point}@{at}:eio");
    let mut app = spawn_app(
        &config(),
        &[("DISK_SECRET", &secret), ("INBOX_FAILPOINT", &armed)],
    );
    app.set_env("INBOX_FAILPOINT", None);
    let run = rand_id(point);
    let senders = Clients::start(
        app.url(),
        &secret,
        &run,
        Load {
            source: SOURCE,
            clients,
            body,
            duplicates: 0.0,
            seed: 0,
        },
    );
    let status = exit_of(&mut app, Duration::from_secs(90)).await;
    let sent = senders.stop().await;
    let log = app.log();
    let status =
        status.unwrap_or_else(|| panic!("{point}: the server did not stop itself within 90 s; log:\n{log}"));
    assert!(
        !status.success(),
        "{point}: the server exited {status} after a failed sync"
    );
    assert!(
        log.contains("ERROR") && log.contains("the disk failed a sync") && log.contains(path),
        "{point}: no error line naming {path:?}; log:\n{log}"
    );

    // The first answer that is not a 2xx (a 503, or no answer once the server is gone) marks the failure: nothing
    // sent after it was answered 200. (A failure met with nothing in flight is answered by no 503 at all.)
    let failed_at = sent
        .iter()
        .filter(|s| !s.status.is_some_and(|c| (200..300).contains(&c)))
        .map(|s| s.answered)
        .min()
        .unwrap_or_else(|| panic!("{point}: every request was answered 2xx: {:?}", tally(&sent)));
    let late: Vec<_> = sent
        .iter()
        .filter(|s| s.sent > failed_at && s.status.is_some_and(|c| (200..300).contains(&c)))
        .collect();
    assert!(late.is_empty(), "{point}: answered after the failure: {late:?}");

    // Restarted: every acknowledged event is there, and everything stored completes.
    app.restart();
    let acked = acknowledged(&sent);
    let stored: HashSet<String> = app.event_keys().into_iter().map(|(_, id)| id).collect();
    let lost: Vec<_> = acked.iter().filter(|id| !stored.contains(**id)).collect();
    assert!(lost.is_empty(), "{point}: acknowledged and lost: {lost:?}");
    app.wait_all_completed(stored.len(), Duration::from_secs(60), point);
    eprintln!(
        "end of trust at {armed}: answers {:?}, {} acknowledged, 0 lost, {} stored, committed batches waiting: {:?}, \
         exit {status}",
        tally(&sent),
        acked.len(),
        stored.len(),
        logged(&log, "committed_batches_waiting"),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_wal_sync_is_the_end_of_trust() {
    end_of_trust_at("sqlite_wal_sync", 40, 8, 200, "sync thread").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_checkpoint_is_the_end_of_trust() {
    end_of_trust_at("sqlite_checkpoint", 20, 8, 200, "checkpointer").await;
}

/// A WAL of 4,096 pages of 4 KiB, each with its frame header: past it the writer checkpoints inline.
const INLINE_EXTENT: u64 = 32 + 4096 * (4096 + 24);

/// The syncs of the WAL, by the thread that makes them (`/proc/TID/comm`, 15 characters) and how far the WAL has
/// grown: the sync thread's, the checkpointer thread's, the writer's next one (most often the header of a WAL it
/// starts over, which SQLite syncs even at `synchronous=NORMAL`), and the writer's inline checkpoint (of a WAL
/// grown past 4,096 pages). The server's own error line says which it met.
const PATHS: [(&str, &str, u64); 4] = [
    ("sync thread", "inbox-sqlite-sy", 0),
    ("checkpointer", "inbox-sqlite-ch", 0),
    ("writer", "inbox-sqlite-wr", 0),
    ("inline checkpoint", "inbox-sqlite-wr", INLINE_EXTENT),
];

/// What one power-loss trial saw.
struct Trial {
    path: &'static str,
    met_by: String,
    /// The failure as the server's error line names it.
    logged: String,
    waiting: Option<usize>,
    answers: BTreeMap<&'static str, usize>,
    acked: usize,
    lost: usize,
    opened: bool,
    exited: Option<ExitStatus>,
    cut_after: Duration,
}

/// GIVEN a server on the fault file system, under 8 senders of new events
/// WHEN the next `fsync` of the WAL by the thread of `path` fails (its pages marked clean, never stored), and the
/// power is cut a random moment (0–1.5 s) after, with the clients still sending (the server killed if still up)
/// THEN the store opens again, and holds every event that was answered 200, before the failure and after.
async fn power_loss_trial((path, thread, min_extent): (&'static str, &str, u64), seed: u64) -> Trial {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let root = tempfile::Builder::new()
        .prefix("inbox-faultfs-")
        .tempdir()
        .expect("temp dir");
    let mount = root.path().join("mnt");
    std::fs::create_dir(&mount).expect("mount point");
    let disk = Disk::mount(&mount).unwrap_or_else(|e| panic!("{e}"));
    let data = mount.join("data");
    let secret = rand_secret();
    let mut app = spawn_app_in(&config(), &[("DISK_SECRET", &secret)], Some(&data));
    let run = rand_id("power");
    let body = if path == "inline checkpoint" { 4_000 } else { 1_000 };
    let senders = Clients::start(
        app.url(),
        &secret,
        &run,
        Load {
            source: SOURCE,
            clients: 8,
            body,
            duplicates: 0.0,
            seed,
        },
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    disk.fail_fsync(FsyncFault {
        file: "inbox.db-wal".into(),
        thread: Some(thread.into()),
        min_extent,
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while disk.armed() {
        assert!(
            Instant::now() < deadline,
            "{path}: no fsync of the WAL by {thread} within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let cut_after = Duration::from_millis(rng.random_range(0..1_500));
    tokio::time::sleep(cut_after).await;
    let exited = app.exit_status();
    if app.running() {
        app.kill();
    }
    disk.power_cut();
    let sent = senders.stop().await;
    let log = app.log();
    let met = disk.met();

    // The store opens, and holds what was acknowledged.
    app.restart();
    let stored: HashSet<String> = app.event_keys().into_iter().map(|(_, id)| id).collect();
    app.kill();
    let acked = acknowledged(&sent);
    let lost = acked.iter().filter(|id| !stored.contains(**id)).count();
    let intact = rusqlite::Connection::open(data.join("inbox.db"))
        .and_then(|c| c.query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0)))
        .unwrap_or_else(|e| e.to_string());
    assert_eq!(intact, "ok", "{path}: integrity_check after the restart");
    drop(disk);
    Trial {
        path,
        met_by: met.first().map_or_else(|| "-".into(), |m| m.thread.clone()),
        logged: log
            .split("path=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or("-")
            .to_owned(),
        waiting: logged(&log, "committed_batches_waiting"),
        answers: tally(&sent),
        acked: acked.len(),
        lost,
        opened: true,
        exited,
        cut_after,
    }
}

/// Runs the trials, a quarter on each path, and prints one line a trial and the totals; fails if any event that was
/// answered 200 is gone, or a store does not open.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_wal_fsync_then_power_loss_loses_nothing_acknowledged() {
    if !Path::new("/dev/fuse").exists() && std::env::var_os("CI").is_none() {
        eprintln!("SKIPPED: no /dev/fuse (CI requires it)");
        return;
    }
    let trials: usize = std::env::var("INBOX_FSYNC_TRIALS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(24);
    let mut seen = Vec::new();
    for t in 0..trials {
        let trial = power_loss_trial(PATHS[t % PATHS.len()], t as u64).await;
        eprintln!(
            "trial {t:2}: {:17} met by {:15} ({}) batches waiting {:>2} answers {:?} acknowledged {:4} lost {} \
             store opens {} server exited {} power cut {:?} after",
            trial.path,
            trial.met_by,
            trial.logged,
            trial.waiting.map_or_else(|| "-".into(), |w| w.to_string()),
            trial.answers,
            trial.acked,
            trial.lost,
            trial.opened,
            trial.exited.map_or_else(|| "no (killed)".into(), |s| s.to_string()),
            trial.cut_after,
        );
        seen.push(trial);
    }
    let lost: usize = seen.iter().map(|t| t.lost).sum();
    let acked: usize = seen.iter().map(|t| t.acked).sum();
    eprintln!(
        "{trials} trials: {acked} acknowledged, {lost} lost, {} stores that would not open",
        seen.iter().filter(|t| !t.opened).count()
    );
    for (path, _, _) in PATHS {
        assert!(
            seen.iter()
                .any(|t| t.path == path && t.met_by.starts_with("inbox-sqlite")),
            "no trial met the failure on the {path}"
        );
    }
    assert_eq!(lost, 0, "events answered 200 were lost");
}
