//! `cargo run --release -p bench -- [--quick] [--only=verify,filter,ceiling,accept,e2e,aws] [--workers=N] [--inbox=PATH]
//! [--baseline=PATH]`: the benchmark suite
//!. Measures, in one run on this machine, a bare axum ceiling, `inbox serve` accepting signed distinct events, end to end through `forward` to
//! a local sink, the duplicate path, and the AWS path's calls, write units, zip sizes, cold starts and cost.
//! Every load loop is bounded in count and time and talks to 127.0.0.1 only. See BENCHMARKS.md.

mod aws;
mod durable;
mod filter;
mod hardening;
mod load;
mod memory;
mod postgres;
mod proc;
mod reconcile;
mod verify;
mod wrk;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpListener;
use tokio::process::{Child, Command};

use load::{EventGen, Stats};

/// The secret the bench's Stripe source verifies with (never a real one).
pub const SECRET: &str = "whsec_bench_secret";
/// What `--only=` may name. `readers` and `slow`, `wrk` (Debian's
/// package), `memory` (clients hanging up while the writer is held) and `postgres` (Debian's PostgreSQL and wrk) run
/// only when named.
const PARTS: [&str; 12] = [
    "verify",
    "filter",
    "ceiling",
    "accept",
    "e2e",
    "aws",
    "readers",
    "slow",
    "reconcile",
    "wrk",
    "memory",
    "postgres",
];
/// The parts a run without `--only` leaves out.
const ON_REQUEST: [&str; 5] = ["readers", "slow", "wrk", "memory", "postgres"];
/// Connections of the closed-loop load (keep-alive).
const CONNS: usize = 64;
/// Handlers at a time in the end-to-end server (`server.workers`; the default is 16): `forward` waits on the
/// network, so more of them keep the 2 cores busy. `--workers=N` sets it.
const E2E_WORKERS: usize = 64;

pub struct Opts {
    pub quick: bool,
    pub rounds: usize,
    pub round_secs: f64,
    pub e2e_events: u64,
    pub root: PathBuf,
    /// `server.workers` of the end-to-end server.
    pub e2e_workers: usize,
    /// The parts to run (`--only ceiling,accept,e2e,aws`); all when empty.
    pub only: Vec<String>,
    /// `--inbox=PATH`: the `inbox` to measure, instead of the one beside this binary.
    pub inbox: Option<PathBuf>,
    /// `--baseline=PATH` (the `wrk` part): another `inbox`, measured in the same rounds, alternating.
    pub baseline: Option<PathBuf>,
    /// Where this binary is: the release `inbox`, `bench-hello` and the functions' binaries are looked up here
    /// first (the same target directory), then in `target/release`.
    pub bin_dir: PathBuf,
}

impl Opts {
    pub fn runs(&self, part: &str) -> bool {
        (self.only.is_empty() && !ON_REQUEST.contains(&part)) || self.only.iter().any(|p| p == part)
    }

    /// Where cargo-lambda puts what it builds: `lambda/` in this binary's target directory (which
    /// `CARGO_TARGET_DIR` may have moved), else in the repo's `target/`.
    pub fn lambda_dir(&self) -> PathBuf {
        match self.bin_dir.parent() {
            Some(target) if target.join("lambda").is_dir() => target.join("lambda"),
            _ => self.root.join("target/lambda"),
        }
    }

    pub fn binary(&self, name: &str) -> PathBuf {
        let here = self.bin_dir.join(name);
        if here.exists() {
            here
        } else {
            self.root.join("target/release").join(name)
        }
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--ceiling-server") {
        return ceiling_server();
    }
    if let Some(dir) = args
        .iter()
        .find_map(|a| a.strip_prefix("--durable-ceiling-server="))
    {
        return durable::serve(Path::new(dir));
    }
    let quick = args.iter().any(|a| a == "--quick");
    let only: Vec<String> = args
        .iter()
        .filter_map(|a| a.strip_prefix("--only="))
        .flat_map(|list| list.split(','))
        .map(str::to_owned)
        .collect();
    if let Some(bad) = only.iter().find(|p| !PARTS.contains(&p.as_str())) {
        bail!("--only: unknown part {bad:?}; the parts are {}", PARTS.join(","));
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("bench/ has a parent")?
        .to_path_buf();
    let opts = Opts {
        quick,
        rounds: if quick { 2 } else { 5 },
        round_secs: if quick { 1.5 } else { 4.0 },
        e2e_events: if quick { 3_000 } else { 20_000 },
        root,
        only,
        e2e_workers: args
            .iter()
            .find_map(|a| a.strip_prefix("--workers="))
            .map(|n| n.parse().context("--workers=N"))
            .transpose()?
            .unwrap_or(E2E_WORKERS),
        inbox: args
            .iter()
            .find_map(|a| a.strip_prefix("--inbox="))
            .map(PathBuf::from),
        baseline: args
            .iter()
            .find_map(|a| a.strip_prefix("--baseline="))
            .map(PathBuf::from),
        bin_dir: std::env::current_exe()?
            .parent()
            .context("the binary's directory")?
            .to_path_buf(),
    };
    // The AWS emulator's address goes into the environment before any thread starts, as ./test.sh exports it.
    let moto_port = aws::prepare_env();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(run(opts, moto_port))
}

/// The ceiling: a bare axum HTTP/1 server answering 200 to a POST, in its own process like `inbox serve`.
fn ceiling_server() -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        println!("listening on http://{}", listener.local_addr()?);
        let app = Router::new().route("/webhooks/{source}", post(|| async { StatusCode::OK }));
        axum::serve(listener, app).await?;
        Ok(())
    })
}

/// One row of the printed table.
pub struct Row {
    pub name: String,
    pub value: String,
    pub goal: String,
}

fn row(rows: &mut Vec<Row>, name: &str, value: String, goal: &str) {
    println!("  {name:<44} {value}");
    rows.push(Row {
        name: name.to_owned(),
        value,
        goal: goal.to_owned(),
    });
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

async fn run(opts: Opts, moto_port: Option<u16>) -> Result<()> {
    let started = Instant::now();
    let mut rows = Vec::new();
    println!(
        "# webhook-inbox benchmarks ({})",
        if opts.quick { "--quick" } else { "full" }
    );
    println!("{}", proc::machine());
    println!(
        "rounds: {} (medians shown), closed loop {} s a round at {CONNS} keep-alive connections",
        opts.rounds, opts.round_secs
    );

    let inbox = opts.inbox.clone().unwrap_or_else(|| opts.binary("inbox"));
    println!("inbox binary: {}", inbox.display());
    // `verify` and `filter` time the core's code in this process: only the other parts start the server.
    let needs_server = PARTS
        .iter()
        .any(|p| !["verify", "filter"].contains(p) && opts.runs(p));
    if needs_server && !inbox.exists() {
        bail!(
            "{} is missing: run `cargo build --release -p webhook-inbox` first",
            inbox.display()
        );
    }
    let round = Duration::from_secs_f64(opts.round_secs);

    // 1. Ceiling.
    if opts.runs("verify") {
        verify::run(&opts, &mut rows)?;
    }
    let ceiling = if !opts.runs("ceiling") {
        f64::NAN
    } else {
        let exe = std::env::current_exe()?;
        let mut child = Command::new(exe)
            .arg("--ceiling-server")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let addr = listening(&mut child, "listening on http://").await?;
        let gen = Arc::new(EventGen::new("ceil"));
        let mut rates = Vec::new();
        for _ in 0..opts.rounds {
            let s = load::closed_loop(addr, CONNS, round, u64::MAX, gen.clone().fresh()).await;
            rates.push(s.rate());
        }
        let _ = child.start_kill();
        let rate = median(rates);
        println!("\n## 1. ceiling (bare axum HTTP/1, 200 to a POST)");
        row(&mut rows, "ceiling: requests/s", format!("{rate:.0}"), "-");
        rate
    };

    // 2. Accept.
    if opts.runs("accept") {
        println!("\n## 2. accept (`inbox serve`, handler log, every 200 durable: SQLite WAL synchronous=FULL, committed before the answer)");
        let server = InboxServer::start(&inbox, "{ kind = \"log\" }", "").await?;
        let gen = Arc::new(EventGen::new("acc"));
        let (mut rates, mut p50, mut p99, mut cpu, mut non200) = (vec![], vec![], vec![], vec![], 0u64);
        for _ in 0..opts.rounds {
            let c0 = proc::cpu_seconds(server.pid)?;
            let s = load::closed_loop(server.addr, CONNS, round, u64::MAX, gen.clone().fresh()).await;
            let c1 = proc::cpu_seconds(server.pid)?;
            non200 += s.non200();
            rates.push(s.rate());
            p50.push(s.percentile_ms(50.0));
            p99.push(s.percentile_ms(99.0));
            cpu.push((c1 - c0) / s.ok.max(1) as f64 * 1e6);
        }
        let rate = median(rates);
        // The handlers ran meanwhile on the same cores, behind the accepting: wait until every accepted event is
        // COMPLETED (the backlog past the in-memory queue comes back from the ledger), then read the peak memory.
        let drain_started = Instant::now();
        let drained = loop {
            let (accepted, completed) = (
                server.metric("accepted").await?,
                server.metric("completed").await?,
            );
            if completed >= accepted {
                break Some((accepted, drain_started.elapsed()));
            }
            if drain_started.elapsed() > Duration::from_secs(300) {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let hwm = proc::vm_hwm_mib(server.pid)?;
        server.stop().await;
        // p99 at half the measured max rate, open loop (latency from each request's scheduled time), on a fresh
        // server so that no backlog of the closed-loop rounds is still being processed meanwhile.
        let server = InboxServer::start(&inbox, "{ kind = \"log\" }", "").await?;
        let mut half_p99 = Vec::new();
        let mut half_rate = Vec::new();
        for _ in 0..opts.rounds {
            let s = load::open_loop(server.addr, CONNS, rate / 2.0, round, gen.clone().fresh()).await;
            non200 += s.non200();
            half_p99.push(s.percentile_ms(99.0));
            half_rate.push(s.rate());
        }
        server.stop().await;
        let (p50, p99, cpu, half_p99, half_rate) = (
            median(p50),
            median(p99),
            median(cpu),
            median(half_p99),
            median(half_rate),
        );
        row(
            &mut rows,
            "accept: events/s",
            format!("{rate:.0} ({:.0}% of ceiling)", rate / ceiling * 100.0),
            ">= 25% of ceiling",
        );
        row(
            &mut rows,
            "accept: p50 / p99 latency (closed loop)",
            format!("{p50:.2} ms / {p99:.2} ms"),
            "-",
        );
        row(
            &mut rows,
            "accept: p99 at half max rate (open loop)",
            format!("{half_p99:.2} ms at {half_rate:.0}/s"),
            "< 10 ms",
        );
        row(
            &mut rows,
            "accept: server CPU per event",
            format!("{cpu:.0} us"),
            "-",
        );
        row(
            &mut rows,
            "accept: backlog all COMPLETED after the last round",
            match drained {
                Some((n, took)) => format!("{n} events, {:.1} s later", took.as_secs_f64()),
                None => "not within 300 s".into(),
            },
            "-",
        );
        row(
            &mut rows,
            "accept: peak memory (VmHWM)",
            format!("{hwm:.1} MiB"),
            "< 64 MiB",
        );
        row(
            &mut rows,
            "accept: answers other than 200",
            format!("{non200}"),
            "0",
        );
    }

    // 3 and 4. End to end, then the duplicate path.
    if opts.runs("e2e") {
        println!(
        "\n## 3. end to end (accepted, forwarded to a local sink, COMPLETED; server.workers = {}) and 4. duplicates",
        opts.e2e_workers
    );
        let sink = Sink::start().await?;
        let handler = format!(
            "{{ kind = \"forward\", url = \"http://{}/sink\", timeout = \"10s\" }}",
            sink.addr
        );
        let server = InboxServer::start(&inbox, &handler, &format!("workers = {}", opts.e2e_workers)).await?;
        let (mut e2e, mut accept_rates, mut dup, mut non200) = (vec![], vec![], vec![], 0u64);
        let (mut spans, mut cpu) = (Vec::new(), Vec::new());
        let limit = Duration::from_secs(180);
        for r in 0..opts.rounds {
            let gen = Arc::new(EventGen::new(&format!("e2e{r}")));
            let before = sink.count();
            let c0 = proc::cpu_seconds(server.pid)?;
            let t0 = Instant::now();
            let s = load::closed_loop(server.addr, CONNS, limit, opts.e2e_events, gen.clone()).await;
            non200 += s.non200();
            accept_rates.push(s.rate());
            let target = before + s.ok;
            // Done when the server has counted every event COMPLETED (its settle committed), read from
            // /metrics; the sink must have seen each of them too.
            let done = loop {
                if server.completed().await? >= target && sink.count() >= target {
                    break Some(t0.elapsed());
                }
                if t0.elapsed() > limit {
                    break None;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            };
            let Some(done) = done else {
                println!(
                    "  round {r}: not all completed within {limit:?} ({} of {})",
                    sink.count() - before,
                    s.ok
                );
                continue;
            };
            e2e.push(s.ok as f64 / done.as_secs_f64());
            spans.push(done.as_secs_f64());
            cpu.push((proc::cpu_seconds(server.pid)? - c0) / s.ok.max(1) as f64 * 1e6);
            // 4. The same events again (re-signed now): every answer is a duplicate of a COMPLETED event.
            let d = load::closed_loop(server.addr, CONNS, limit, opts.e2e_events, gen.clone()).await;
            non200 += d.non200();
            dup.push(d.rate());
        }
        let hwm = proc::vm_hwm_mib(server.pid)?;
        server.stop().await;
        row(
            &mut rows,
            &format!(
                "end to end: events/s ({} events, {} workers)",
                opts.e2e_events, opts.e2e_workers
            ),
            format!("{:.0}", median(e2e)),
            ">= 10,000/s",
        );
        row(
            &mut rows,
            "end to end: first request to last COMPLETED",
            format!(
                "{:.2} s (accepting alone: {:.0}/s)",
                median(spans),
                median(accept_rates)
            ),
            "-",
        );
        row(
            &mut rows,
            "end to end: server CPU per completed event",
            format!("{:.0} us (received, forwarded, settled)", median(cpu)),
            "-",
        );
        row(
            &mut rows,
            "duplicates: answers/s",
            format!("{:.0}", median(dup)),
            "-",
        );
        row(
            &mut rows,
            "end to end: peak memory (VmHWM)",
            format!("{hwm:.1} MiB"),
            "< 64 MiB",
        );
        row(
            &mut rows,
            "end to end + duplicates: answers other than 200",
            format!("{non200}"),
            "0",
        );
    }

    if opts.runs("filter") {
        filter::run(&mut rows)?;
    }

    // 5 and 6. The AWS path and its cost.
    if opts.runs("aws") {
        println!("\n## 5. AWS path");
        aws::run(&opts, moto_port, &mut rows).await;
    }

    // 7 and 8. Reads beside the writer, and slow clients.
    if opts.runs("readers") {
        hardening::readers(&opts, &inbox, &mut rows).await?;
    }
    if opts.runs("slow") {
        hardening::slow_clients(&opts, &inbox, &mut rows).await?;
    }
    // 9. The same ceiling and accept, measured by wrk.
    if opts.runs("wrk") {
        wrk::run(&opts, &inbox, &mut rows).await?;
    }
    if opts.runs("reconcile") {
        reconcile::run(&mut rows).await?;
    }
    // 10. Clients hanging up while the writer is held: what the in-flight bound holds.
    if opts.runs("memory") {
        memory::hang_ups(&opts, &inbox, &mut rows).await?;
    }
    // 11. Many instances on one PostgreSQL, beside SQLite, and PostgreSQL's own commit rate.
    if opts.runs("postgres") {
        postgres::run_section(&opts, &inbox, &mut rows).await?;
    }

    println!("\n## summary");
    println!("| figure | value | goal |");
    println!("| --- | --- | --- |");
    for r in &rows {
        println!("| {} | {} | {} |", r.name, r.value.replace('|', "/"), r.goal);
    }
    println!("\nbench took {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Reads the child's stdout until a line starting with `prefix` names the address.
async fn listening(child: &mut Child, prefix: &str) -> Result<SocketAddr> {
    let stdout = child.stdout.take().context("stdout piped")?;
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await? {
            if let Some(rest) = line.find(prefix).map(|i| &line[i + prefix.len()..]) {
                return Ok::<_, anyhow::Error>(rest.trim().to_owned());
            }
        }
        bail!("the server exited before listening")
    })
    .await
    .context("the server did not listen within 30 s")??;
    // Keep draining stdout so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(line.parse()?)
}

/// A real `inbox serve` in a temporary data directory, one Stripe source.
struct InboxServer {
    child: Child,
    addr: SocketAddr,
    pid: u32,
    dir: tempfile::TempDir,
}

impl InboxServer {
    /// `server`: extra lines of the `[server]` table.
    async fn start(bin: &Path, handler: &str, server: &str) -> Result<Self> {
        let dir = tempfile::TempDir::new()?;
        let config = dir.path().join("inbox.toml");
        std::fs::write(
            &config,
            format!(
                "[server]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n{}\n\
                 [sources.stripe]\nscheme = \"stripe\"\nsecrets = [\"env:BENCH_STRIPE_SECRET\"]\nhandler = {handler}\n",
                dir.path().join("data").display(),
                server
            ),
        )?;
        let mut child = Command::new(bin)
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .env("BENCH_STRIPE_SECRET", SECRET)
            .env("INBOX_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let pid = child.id().context("pid")?;
        let addr = listening(&mut child, "inbox: listening on http://").await?;
        Ok(Self {
            child,
            addr,
            pid,
            dir,
        })
    }

    /// Where its events are stored.
    fn data_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("data")
    }

    /// The server's count of COMPLETED events.
    async fn completed(&self) -> Result<u64> {
        self.metric("completed").await
    }

    /// `inbox_{name}_total` on `/metrics`, over every source.
    async fn metric(&self, name: &str) -> Result<u64> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(self.addr).await?;
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
            .await?;
        let mut text = String::new();
        stream.read_to_string(&mut text).await?;
        let prefix = format!("inbox_{name}_total{{");
        text.lines()
            .filter(|l| l.starts_with(&prefix))
            .map(|l| l.rsplit(' ').next().unwrap_or("").parse::<u64>())
            .sum::<Result<u64, _>>()
            .with_context(|| format!("inbox_{name}_total on /metrics"))
    }

    async fn stop(mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status();
        if tokio::time::timeout(Duration::from_secs(25), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.start_kill();
        }
    }
}

/// The `forward` handler's destination: counts POSTs, answers 200.
struct Sink {
    addr: SocketAddr,
    count: Arc<AtomicU64>,
}

impl Sink {
    async fn start() -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let count = Arc::new(AtomicU64::new(0));
        let c = count.clone();
        let app = Router::new().route(
            "/sink",
            post(move |_body: bytes::Bytes| {
                let c = c.clone();
                async move {
                    c.fetch_add(1, Ordering::Relaxed);
                    StatusCode::OK
                }
            }),
        );
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, count })
    }

    fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

impl Stats {
    fn non200(&self) -> u64 {
        self.errors
            + self
                .statuses
                .iter()
                .filter(|(s, _)| **s != 200)
                .map(|(_, n)| n)
                .sum::<u64>()
    }
}
