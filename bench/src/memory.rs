//! `memory`: the peak memory of `inbox serve` (its defaults: 1 MiB bodies, 64 MiB of them in flight) while its SQLite
//! writer is held up and 2,000 clients, 200 at a time, each send a signed 1 MiB body and hang up once the server
//! has read it, so that no answer holds their bodies and only the in-flight bound does. The writer is held by
//! another connection keeping `BEGIN IMMEDIATE` open on the database (Python's sqlite3 module, which the bench
//! needs nowhere else); 127.0.0.1 only, bounded in count and time.

use std::collections::HashSet;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use inbox_core::schemes::{Identity, Scheme};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::watch;

use testkit::sockets::{attempt, Attempt};

use crate::{proc, row, InboxServer, Opts, Row};

const CLIENTS: usize = 2_000;
const AT_ONCE: usize = 200;
/// `max_body_bytes` and `max_inflight_bytes` as the server has them by default.
const BODY: usize = 1 << 20;
const BOUND_MIB: f64 = 64.0;
/// After the server has read a whole body, how long a client waits for an answer before it hangs up.
const RETRY_AFTER: Duration = Duration::from_secs(1);

pub async fn hang_ups(opts: &Opts, inbox: &Path, rows: &mut Vec<Row>) -> Result<()> {
    println!(
        "\n## 10. memory (2,000 clients hanging up after a 1 MiB body while the writer is held; 64 MiB in flight)"
    );
    let send_for = Duration::from_secs(if opts.quick { 10 } else { 20 });
    let server = InboxServer::start(inbox, "{ kind = \"log\" }", "").await?;
    let idle = proc::vm_hwm_mib(server.pid)?;

    // Hold the writer: its `BEGIN IMMEDIATE` waits on this lock (its busy timeout, 10 s, then it fails the batch).
    let db = server.data_dir().join("inbox.db");
    let mut holder = tokio::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import sqlite3, sys\n\
             c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)\n\
             c.execute('BEGIN IMMEDIATE')\n\
             print('held', flush=True)\n\
             sys.stdin.read()\n",
        )
        .arg(&db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("python3 (its sqlite3 module holds the writer's lock)")?;
    let mut held = BufReader::new(holder.stdout.take().context("stdout piped")?).lines();
    match tokio::time::timeout(Duration::from_secs(15), held.next_line()).await {
        Ok(Ok(Some(line))) if line == "held" => {}
        _ => bail!("python3 could not take the write lock on {}", db.display()),
    }

    let (read_tx, read_rx) = watch::channel(Arc::new(HashSet::new()));
    let port = server.addr.port();
    let watcher = tokio::spawn(async move {
        loop {
            let Ok(read) = tokio::task::spawn_blocking(move || testkit::sockets::read_in_full(port)).await
            else {
                break;
            };
            if read_tx.send(Arc::new(read)).is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let key = Scheme::Stripe.key_from_secret(crate::SECRET)?;
    let key = Arc::new(key);
    let next = Arc::new(AtomicUsize::new(0));
    let (hung_up, refused, cut) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let started = Instant::now();
    let until = started + send_for;
    let mut rss_seen = 0f64;
    let workers: Vec<_> = (0..AT_ONCE)
        .map(|_| {
            let (next, hung_up, refused, cut, key, read, addr) = (
                next.clone(),
                hung_up.clone(),
                refused.clone(),
                cut.clone(),
                key.clone(),
                read_rx.clone(),
                server.addr,
            );
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= CLIENTS || Instant::now() > until {
                        break;
                    }
                    let id = format!("evt_mem_{i}");
                    let head = format!("{{\"id\":\"{id}\",\"object\":\"event\",\"type\":\"bench.memory\",\"pad\":\"");
                    let mut body = head.into_bytes();
                    body.resize(BODY - 2, b'x');
                    body.extend_from_slice(b"\"}");
                    loop {
                        let identity = Identity {
                            event_id: id.clone(),
                            event_type: None,
                        };
                        let now = inbox_core::time::now_ms() / 1000;
                        let mut req = format!(
                            "POST /webhooks/stripe HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
                             content-length: {BODY}\r\n"
                        );
                        for (name, value) in Scheme::Stripe.sign(&key, &body, &identity, now) {
                            req.push_str(&format!("{name}: {}\r\n", value.to_str().unwrap_or("")));
                        }
                        req.push_str("\r\n");
                        match attempt(addr, req.as_bytes(), &body, read.clone()).await {
                            Attempt::HungUp => {
                                hung_up.fetch_add(1, Ordering::Relaxed);
                                break;
                            }
                            Attempt::Answered(503) => refused.fetch_add(1, Ordering::Relaxed),
                            Attempt::Answered(_) => cut.fetch_add(1, Ordering::Relaxed),
                        };
                        if Instant::now() + RETRY_AFTER > until {
                            break;
                        }
                        tokio::time::sleep(RETRY_AFTER).await;
                    }
                }
            })
        })
        .collect();
    while !workers.iter().all(|w| w.is_finished()) {
        rss_seen = rss_seen.max(vm_rss_mib(server.pid).unwrap_or(0.0));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for w in workers {
        let _ = w.await;
    }
    watcher.abort();
    let peak = proc::vm_hwm_mib(server.pid)?;
    let took = started.elapsed();
    // Let the writer go (closing its stdin ends the script, which rolls back), then stop the server.
    drop(holder.stdin.take());
    let _ = tokio::time::timeout(Duration::from_secs(10), holder.wait()).await;
    server.stop().await;
    let hung_up = hung_up.load(Ordering::Relaxed);
    row(
        rows,
        "memory: peak (VmHWM) with clients hanging up, writer held",
        format!(
            "{peak:.1} MiB (idle {idle:.1} MiB, {:.1} over it; bound {BOUND_MIB:.0} MiB; RSS seen {rss_seen:.1} MiB)",
            peak - idle
        ),
        "< idle + bound + connections",
    );
    row(
        rows,
        "memory: clients hung up after their body / 503s / cut off",
        format!(
            "{hung_up} ({:.0} MiB) / {} / {} in {:.1} s",
            hung_up as f64 * BODY as f64 / f64::from(1 << 20),
            refused.load(Ordering::Relaxed),
            cut.load(Ordering::Relaxed),
            took.as_secs_f64()
        ),
        "-",
    );
    Ok(())
}

/// `VmRSS` of `pid`, in MiB.
fn vm_rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}
