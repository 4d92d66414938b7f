//! The hardening figures: `readers` (`inbox events list` in a loop from another process while accept runs,
//! against accept alone, in alternating rounds) and `slow` (2,000 clients sending one byte a second beside normal
//! signed deliveries: what is answered, and the server's peak memory). Bounded in count and time, 127.0.0.1 only.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::load::{self, EventGen};
use crate::{median, proc, row, InboxServer, Opts, Row, CONNS};

/// The pauses between two `inbox events list` runs of the readers' loop: an operator's `watch -n 1`, and one five
/// times as eager. Unpaced, the loop starts ~60 processes a second, and what it measures is their start-up CPU on a
/// 2-core machine, not the store's locks; the lists' own CPU is reported beside the rates.
const LIST_EVERY: [Duration; 2] = [Duration::from_millis(1000), Duration::from_millis(200)];

/// Accept rounds with and without `inbox events list` looping beside them, alternated on one server, for each
/// pace of the loop.
pub async fn readers(opts: &Opts, inbox: &Path, rows: &mut Vec<Row>) -> Result<()> {
    println!(
        "\n## 7. reads beside the writer (`inbox events list` looping in another process during accept)"
    );
    let server = InboxServer::start(inbox, "{ kind = \"log\" }", "").await?;
    let gen = Arc::new(EventGen::new("rd"));
    let round = Duration::from_secs_f64(opts.round_secs);
    for pace in LIST_EVERY {
        let (mut alone, mut beside) = (Vec::new(), Vec::new());
        let (mut non200, mut lists, mut list_errors) = (0u64, 0u64, 0u64);
        let cpu_before = proc::children_cpu_seconds()?;
        for r in 0..opts.rounds * 2 {
            let with_reader = r % 2 == 1;
            let stop = Arc::new(AtomicBool::new(false));
            let (done, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
            let reader = with_reader.then(|| {
                let (stop, done, failed) = (stop.clone(), done.clone(), failed.clone());
                let (bin, dir) = (inbox.to_owned(), server.data_dir());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let out = std::process::Command::new(&bin)
                            .args(["events", "list", "--limit", "100", "--data-dir"])
                            .arg(&dir)
                            .env("INBOX_LOG", "error")
                            .output();
                        match out {
                            Ok(o) if o.status.success() => done.fetch_add(1, Ordering::Relaxed),
                            _ => failed.fetch_add(1, Ordering::Relaxed),
                        };
                        std::thread::sleep(pace);
                    }
                })
            });
            let s = load::closed_loop(server.addr, CONNS, round, u64::MAX, gen.clone().fresh()).await;
            stop.store(true, Ordering::Relaxed);
            if let Some(reader) = reader {
                let _ = reader.join();
            }
            non200 += s.non200();
            lists += done.load(Ordering::Relaxed);
            list_errors += failed.load(Ordering::Relaxed);
            if with_reader {
                beside.push(s.rate());
            } else {
                alone.push(s.rate());
            }
        }
        let cpu = proc::children_cpu_seconds()? - cpu_before;
        let beside_secs = opts.round_secs * opts.rounds as f64;
        let (alone, beside) = (median(alone), median(beside));
        let every = pace.as_millis();
        row(
            rows,
            &format!("readers: accept alone / beside `events list` every {every} ms"),
            format!(
                "{alone:.0}/s / {beside:.0}/s ({:+.1}%)",
                (beside / alone - 1.0) * 100.0
            ),
            "within 5%",
        );
        row(
            rows,
            &format!("readers (every {every} ms): lists run / failed; answers other than 200"),
            format!("{lists} / {list_errors}; {non200}"),
            "0 failed; 0",
        );
        row(
            rows,
            &format!("readers (every {every} ms): the lists' own CPU"),
            format!(
                "{:.1} ms a list, {:.1}% of the 2 cores while they ran",
                cpu * 1e3 / lists.max(1) as f64,
                cpu / beside_secs / 2.0 * 100.0
            ),
            "-",
        );
    }
    server.stop().await;
    Ok(())
}

/// 2,000 slow clients beside normal deliveries, twice: declaring a webhook-sized body (2 KiB), and declaring the
/// whole 1 MiB limit (the worst case for memory).
pub async fn slow_clients(opts: &Opts, inbox: &Path, rows: &mut Vec<Row>) -> Result<()> {
    println!("\n## 8. slow clients (2,000 connections sending one byte a second; 1 MiB body limit, 64 MiB in flight)");
    let hold = Duration::from_secs(if opts.quick { 8 } else { 20 });
    for declared in [2048usize, 1024 * 1024] {
        let server = InboxServer::start(inbox, "{ kind = \"log\" }", "").await?;
        let stop = Arc::new(AtomicBool::new(false));
        let (connected, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let mut slow = Vec::new();
        for _ in 0..2000 {
            let (stop, connected, refused, addr) =
                (stop.clone(), connected.clone(), refused.clone(), server.addr);
            slow.push(tokio::spawn(async move {
                let Ok(mut stream) = TcpStream::connect(addr).await else {
                    refused.fetch_add(1, Ordering::Relaxed);
                    return;
                };
                let head = format!(
                    "POST /webhooks/stripe HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
                     stripe-signature: t=1,v1=00\r\ncontent-length: {declared}\r\n\r\n"
                );
                if stream.write_all(head.as_bytes()).await.is_err() {
                    refused.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                connected.fetch_add(1, Ordering::Relaxed);
                let started = Instant::now();
                while !stop.load(Ordering::Relaxed) && started.elapsed() < hold + Duration::from_secs(5) {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    if stream.write_all(b" ").await.is_err() {
                        refused.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                }
            }));
        }
        // Let the slow ones connect, then send normal deliveries beside them for `hold`.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let normal = load::closed_loop(
            server.addr,
            4,
            hold,
            u64::MAX,
            Arc::new(EventGen::new(&format!("slow{declared}"))),
        )
        .await;
        let hwm = proc::vm_hwm_mib(server.pid)?;
        stop.store(true, Ordering::Relaxed);
        for t in slow {
            let _ = t.await;
        }
        server.stop().await;
        let answered: u64 = normal.statuses.values().sum();
        let mut statuses: Vec<_> = normal.statuses.iter().collect();
        statuses.sort();
        row(
            rows,
            &format!("slow clients declaring {declared} B: peak memory (VmHWM)"),
            format!("{hwm:.1} MiB"),
            "< 64 MiB + connections",
        );
        row(
            rows,
            &format!("slow clients declaring {declared} B: normal deliveries"),
            format!(
                "{answered} answered ({statuses:?}), {} unanswered; slow ones cut off early: {}",
                normal.errors,
                refused.load(Ordering::Relaxed)
            ),
            "all answered",
        );
    }
    Ok(())
}
