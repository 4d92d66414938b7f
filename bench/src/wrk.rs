//! `--only=wrk`: the ceiling and accept figures measured by `wrk` (Debian's package), a load generator
//! at least as efficient as any we would write, so that the ratio to the ceiling is not a ratio to a weak client.
//! `wrk -t2 -c32 --latency`, GitHub-signed 2 KiB bodies, each distinct and under a fresh UUID-shaped delivery id
//! as GitHub sends them, every 200 durable. Each round's deliveries are signed here beforehand (wrk cannot sign)
//! and read by the script from a file. One body under fresh ids would flatter the store: every event after the
//! first would be a resent body, whose body is not remembered, and sequential ids append to the unique key where
//! real ones land on a random page of it.
//! Ceiling, durable ceiling (`durable.rs`: append + group `fdatasync`) and accept rounds alternate, on one server
//! each (and a baseline `inbox`, with `--baseline=PATH`); each round starts once every server has worked off the
//! backlog of the rounds before. Then end to end under wrk: a server forwarding to a local sink, wrk until at least
//! 20,000 events are accepted, first request to last COMPLETED.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use inbox_core::schemes::{Identity, Scheme};
use tokio::process::Command;

use crate::load::{self, EventGen};
use crate::{listening, median, proc, row, InboxServer, Opts, Row, SECRET};

/// Connections and threads, as the issue measured.
const CONNECTIONS: u32 = 32;
const THREADS: u32 = 2;

/// What one wrk run printed.
pub(crate) struct Run {
    pub rate: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub requests: u64,
    pub non2xx: u64,
    /// The CPU (user + system) of wrk's sending threads per request, in µs: wrk shares the cores with the server
    /// under test. Its main thread is left out: it builds a Lua state for each thread before the run, reading
    /// every delivery of the round, seconds of CPU that no request waits on.
    client_us: f64,
    /// The same over the run's duration: the cores wrk took from the server.
    client_cores: f64,
}

/// Deliveries signed for one round: more than any server here has accepted in a round (BENCHMARKS.md and
/// docs/bench-log/ have the highest rates).
const DELIVERIES: usize = 400_000;
/// The body around each delivery's id, 2 KiB in all.
const BODY_HEAD: &str = r#"{"ref":"refs/heads/main","delivery":""#;
const BODY_PAD: usize = 2048 - 84;

/// What follows the id in each body.
fn body_tail() -> String {
    format!(r#"","pad":"{}"}}"#, "x".repeat(BODY_PAD))
}

/// The body of delivery `id`: 2 KiB, distinct per id. The script rebuilds it from the same two parts.
fn body(id: &str) -> String {
    format!("{BODY_HEAD}{id}{}", body_tail())
}

/// A UUID-shaped id for delivery `n` of `round`, spread like GitHub's (splitmix64 of the pair).
fn delivery_id(round: usize, n: usize) -> String {
    let mix = |mut z: u64| {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let seed = ((round as u64) << 32) | n as u64;
    let (a, b) = (mix(seed), mix(!seed));
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | (b >> 48) & 0x3fff,
        b & 0xffff_ffff_ffff
    )
}

/// Writes round `round`'s deliveries to `path`, a line each: the id and the body's `X-Hub-Signature-256`.
pub(crate) fn sign_deliveries(key: &inbox_core::schemes::Key, round: usize, path: &Path) -> Result<()> {
    let mut out = String::with_capacity(DELIVERIES * 110);
    for n in 0..DELIVERIES {
        let id = delivery_id(round, n);
        let signature = github_signature(key, &body(&id))?;
        out.push_str(&id);
        out.push(' ');
        out.push_str(&signature);
        out.push('\n');
    }
    std::fs::write(path, out)?;
    Ok(())
}

/// The `X-Hub-Signature-256` GitHub sends with `body`.
fn github_signature(key: &inbox_core::schemes::Key, body: &str) -> Result<String> {
    let identity = Identity {
        event_id: "unused".into(),
        event_type: Some("push".into()),
    };
    Scheme::Github
        .sign(key, body.as_bytes(), &identity, 0)
        .into_iter()
        .find(|(name, _)| name.as_str() == "x-hub-signature-256")
        .and_then(|(_, v)| v.to_str().ok().map(str::to_owned))
        .context("the GitHub scheme signs with x-hub-signature-256")
}

/// The Lua script: each thread takes every other delivery of `deliveries` (its id, its body rebuilt around the id,
/// its signature). Past the last one, ids go on fresh (a suffix) over bodies already sent: resends, cheaper for
/// the store, so the file is sized past any rate seen.
fn script(deliveries: &Path) -> String {
    script_over(deliveries, THREADS, &[])
}

/// [`script`] for `threads` threads, thread `i` sending to `hosts[i % hosts.len()]` (several servers under one wrk);
/// with no hosts, every thread to the address on wrk's command line.
pub(crate) fn script_over(deliveries: &Path, threads: u32, hosts: &[std::net::SocketAddr]) -> String {
    let path = deliveries.display();
    let hosts = hosts
        .iter()
        .map(|a| format!("{{\"{}\", \"{}\"}}", a.ip(), a.port()))
        .collect::<Vec<_>>()
        .join(", ");
    let tail = body_tail();
    format!(
        r#"local ids, sigs = {{}}, {{}}
for line in io.lines("{path}") do
  local id, sig = line:match("^(%S+) (%S+)$")
  ids[#ids + 1] = id
  sigs[#sigs + 1] = sig
end
local threads = 0
local hosts = {{{hosts}}}
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
  if #hosts > 0 then
    local host = hosts[(threads - 1) % #hosts + 1]
    thread.addr = wrk.lookup(host[1], host[2])[1]
  end
end
local n = 0
local head = [==[{BODY_HEAD}]==]
local tail = [==[{tail}]==]
request = function()
  local i = n * {threads} + tid
  n = n + 1
  local k = (i - 1) % #ids + 1
  local id = ids[k]
  local wraps = math.floor((i - 1) / #ids)
  local delivery = id
  if wraps > 0 then delivery = id .. "-" .. wraps end
  return wrk.format("POST", "/webhooks/gh", {{
    ["Content-Type"] = "application/json",
    ["X-Hub-Signature-256"] = sigs[k],
    ["X-GitHub-Event"] = "push",
    ["X-GitHub-Delivery"] = delivery,
  }}, head .. id .. tail)
end
"#
    )
}

/// A duration as wrk prints it (`1.73ms`, `850.00us`, `1.02s`), in ms.
fn ms(text: &str) -> Option<f64> {
    let (number, unit) = text.split_at(text.find(|c: char| c.is_ascii_alphabetic())?);
    let n: f64 = number.parse().ok()?;
    Some(match unit {
        "us" => n / 1e3,
        "ms" => n,
        "s" => n * 1e3,
        "m" => n * 60e3,
        _ => return None,
    })
}

fn parse(out: &str) -> Result<Run> {
    let field = |prefix: &str| -> Option<&str> {
        out.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(prefix))
            .map(str::trim)
    };
    let rate: f64 = field("Requests/sec:")
        .context("no Requests/sec in wrk's output")?
        .parse()?;
    let p50 = field("50%").and_then(ms).context("no 50% latency")?;
    let p99 = field("99%").and_then(ms).context("no 99% latency")?;
    let requests = out
        .lines()
        .find(|l| l.contains("requests in"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .context("no request count")?;
    let non2xx = field("Non-2xx or 3xx responses:")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Ok(Run {
        rate,
        p50_ms: p50,
        p99_ms: p99,
        requests,
        non2xx,
        client_us: 0.0,
        client_cores: 0.0,
    })
}

async fn wrk(addr: std::net::SocketAddr, secs: u64, script_path: &Path) -> Result<Run> {
    wrk_threads(addr, THREADS, secs, script_path).await
}

/// [`wrk`] with `threads` threads (the script made for as many: [`script_over`]).
pub(crate) async fn wrk_threads(
    addr: std::net::SocketAddr,
    threads: u32,
    secs: u64,
    script_path: &Path,
) -> Result<Run> {
    let child = Command::new("wrk")
        .args(["-t", &threads.to_string(), "-c", &CONNECTIONS.to_string()])
        .args(["-d", &format!("{secs}s"), "--latency", "-s"])
        .arg(script_path)
        .arg(format!("http://{addr}"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("cannot run wrk: install it (Debian: apt-get install wrk)")?;
    let pid = child.id().context("wrk has no pid")?;
    // wrk's own CPU: its sending threads, read every 20 ms until they end (so at most that much is missed); the
    // largest reading, since the sum falls to nothing once they have ended and only the main thread prints.
    let output = child.wait_with_output();
    tokio::pin!(output);
    let mut client: f64 = 0.0;
    let out = loop {
        tokio::select! {
            out = &mut output => break out?,
            () = tokio::time::sleep(Duration::from_millis(20)) => {
                if let Ok(cpu) = proc::threads_cpu_seconds(pid) {
                    client = client.max(cpu);
                }
            }
        }
    };
    if !out.status.success() {
        bail!("wrk failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut run = parse(&stdout)?;
    run.client_us = client / run.requests.max(1) as f64 * 1e6;
    run.client_cores = client / secs as f64;
    Ok(run)
}

/// One `inbox` under test: its server and what its rounds measured.
struct Measured {
    label: String,
    inbox: std::path::PathBuf,
    server: InboxServer,
    accepts: Vec<f64>,
    p50: Vec<f64>,
    p99: Vec<f64>,
    cpu: Vec<f64>,
    /// wrk's own CPU per request and the cores it took, each round.
    client_us: Vec<f64>,
    client_cores: Vec<f64>,
    non2xx: u64,
}

pub(crate) const GITHUB: &str =
    "[sources.gh]\nscheme = \"github\"\nsecrets = [\"env:BENCH_STRIPE_SECRET\"]\n\
                      refuse_resent_bodies = false\nhandler = { kind = \"log\" }\n";

impl Measured {
    async fn start(label: &str, inbox: &Path) -> Result<Self> {
        Ok(Self {
            label: label.to_owned(),
            inbox: inbox.to_owned(),
            server: InboxServer::start(inbox, "{ kind = \"log\" }", GITHUB).await?,
            accepts: vec![],
            p50: vec![],
            p99: vec![],
            cpu: vec![],
            client_us: vec![],
            client_cores: vec![],
            non2xx: 0,
        })
    }

    async fn round(&mut self, secs: u64, script: &Path) -> Result<Run> {
        let c0 = proc::cpu_seconds(self.server.pid)?;
        let a = wrk(self.server.addr, secs, script).await?;
        let c1 = proc::cpu_seconds(self.server.pid)?;
        self.non2xx += a.non2xx;
        self.accepts.push(a.rate);
        self.p50.push(a.p50_ms);
        self.p99.push(a.p99_ms);
        self.cpu.push((c1 - c0) / a.requests.max(1) as f64 * 1e6);
        self.client_us.push(a.client_us);
        self.client_cores.push(a.client_cores);
        Ok(a)
    }
}

/// Waits until every server has COMPLETED all it accepted (at most two minutes): an accept round leaves a
/// backlog that its server works off afterwards, and that work must not run beside the next measured round.
async fn drain(measured: &[Measured]) -> Result<()> {
    let until = std::time::Instant::now() + Duration::from_secs(120);
    for m in measured {
        while m.server.metric("completed").await? < m.server.metric("accepted").await? {
            if std::time::Instant::now() > until {
                bail!("the backlog of inbox{} was not worked off within 120 s", m.label);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

pub async fn run(opts: &Opts, inbox: &Path, rows: &mut Vec<Row>) -> Result<()> {
    println!(
        "\n## 9. wrk (-t{THREADS} -c{CONNECTIONS}, GitHub-signed 2 KiB bodies, distinct, under fresh UUID-shaped ids; ceiling and accept alternated)"
    );
    let secs = if opts.quick { 5 } else { 15 };
    let rounds = opts.rounds.clamp(3, 5);
    let key = Scheme::Github.key_from_secret(SECRET)?;
    let dir = tempfile::TempDir::new()?;

    let exe = std::env::current_exe()?;
    let mut ceiling = Command::new(exe)
        .arg("--ceiling-server")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let ceiling_addr = listening(&mut ceiling, "listening on http://").await?;
    let durable_dir = tempfile::TempDir::new()?;
    let mut durable = Command::new(std::env::current_exe()?)
        .arg(format!(
            "--durable-ceiling-server={}",
            durable_dir.path().display()
        ))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let durable_addr = listening(&mut durable, "listening on http://").await?;
    // This build, and the baseline if one was named: both measured in every round, in alternating order.
    let mut measured = vec![Measured::start("", inbox).await?];
    if let Some(baseline) = &opts.baseline {
        println!("baseline inbox: {}", baseline.display());
        measured.push(Measured::start(" (baseline)", baseline).await?);
    }

    let mut ceilings = vec![];
    let (mut durables, mut durable_p50, mut durable_p99, mut durable_non2xx) = (vec![], vec![], vec![], 0);
    // wrk's own CPU per request and cores, beside the plain and the durable ceiling.
    let (mut client_us, mut client_cores) = ([vec![], vec![]], [vec![], vec![]]);
    for round in 0..rounds {
        let path = dir.path().join(format!("round{round}.lua"));
        let deliveries = dir.path().join("deliveries.txt");
        sign_deliveries(&key, round, &deliveries)?;
        std::fs::write(&path, script(&deliveries))?;
        drain(&measured).await?;
        let c = wrk(ceiling_addr, secs, &path).await?;
        ceilings.push(c.rate);
        client_us[0].push(c.client_us);
        client_cores[0].push(c.client_cores);
        println!(
            "  round {round}: ceiling {:.0}/s (wrk's own CPU {:.1} us a request)",
            c.rate, c.client_us
        );
        let d = wrk(durable_addr, secs, &path).await?;
        durables.push(d.rate);
        durable_p50.push(d.p50_ms);
        durable_p99.push(d.p99_ms);
        durable_non2xx += d.non2xx;
        client_us[1].push(d.client_us);
        client_cores[1].push(d.client_cores);
        println!(
            "  round {round}: durable ceiling {:.0}/s (p50 {:.2} ms, p99 {:.2} ms, wrk's own CPU {:.1} us a request)",
            d.rate, d.p50_ms, d.p99_ms, d.client_us
        );
        let order: Vec<usize> = if round % 2 == 0 {
            (0..measured.len()).collect()
        } else {
            (0..measured.len()).rev().collect()
        };
        for i in order {
            drain(&measured).await?;
            let m = &mut measured[i];
            let a = m.round(secs, &path).await?;
            println!(
                "  round {round}: accept{} {:.0}/s (p50 {:.2} ms, p99 {:.2} ms, {} requests, {} not 2xx, wrk's own \
                 CPU {:.1} us a request)",
                m.label, a.rate, a.p50_ms, a.p99_ms, a.requests, a.non2xx, a.client_us
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    drain(&measured).await?;
    let _ = ceiling.start_kill();
    let _ = durable.start_kill();
    let ceiling = median(ceilings);
    let durable = median(durables);
    let durable_p99 = median(durable_p99);
    row(
        rows,
        "wrk: ceiling (bare axum), requests/s",
        format!("{ceiling:.0} (client: wrk)"),
        "-",
    );
    row(
        rows,
        "wrk: durable ceiling (append + group fdatasync), requests/s",
        format!(
            "{durable:.0}; p50 {:.2} ms / p99 {durable_p99:.2} ms; {durable_non2xx} not 2xx",
            median(durable_p50)
        ),
        "-",
    );
    let [ceiling_us, durable_us] = client_us;
    let [ceiling_cores, durable_cores] = client_cores;
    row(
        rows,
        "wrk: the client's own CPU a request (cores it took), ceiling / durable ceiling",
        format!(
            "{:.1} us ({:.2}) / {:.1} us ({:.2})",
            median(ceiling_us),
            median(ceiling_cores),
            median(durable_us),
            median(durable_cores)
        ),
        "-",
    );
    for m in measured {
        let accepted = m.server.metric("accepted").await?;
        let hwm = proc::vm_hwm_mib(m.server.pid)?;
        m.server.stop().await;
        let accept = median(m.accepts);
        let label = &m.label;
        row(
            rows,
            &format!("wrk: accept{label}, events/s"),
            format!(
                "{accept:.0} ({:.1}% of the durable ceiling, {:.1}% of the plain one)",
                accept / durable * 100.0,
                accept / ceiling * 100.0
            ),
            ">= 50% of the durable ceiling",
        );
        let p99 = median(m.p99);
        row(
            rows,
            &format!("wrk: accept{label} p50 / p99 (closed loop, c=32)"),
            format!(
                "{:.2} ms / {p99:.2} ms ({:.1}× the durable ceiling's p99)",
                median(m.p50),
                p99 / durable_p99
            ),
            "p99 <= 3× the durable ceiling's",
        );
        row(
            rows,
            &format!("wrk: server CPU per accepted event{label}"),
            format!("{:.0} us", median(m.cpu)),
            "-",
        );
        row(
            rows,
            &format!("wrk: the client's own CPU a request (cores it took), accept{label}"),
            format!("{:.1} us ({:.2})", median(m.client_us), median(m.client_cores)),
            "-",
        );
        row(
            rows,
            &format!("wrk: events stored / answers not 2xx; peak memory{label}"),
            format!("{accepted} / {}; {hwm:.1} MiB", m.non2xx),
            "0 not 2xx; < 64 MiB",
        );
        // Open loop at half the rate wrk measured, on a fresh server (no backlog of the closed loop behind it):
        // request i is due at start + i/rate and its latency counts from then, so a stall is not hidden.
        // wrk has no open loop; the bench's own generator is not the limit at half the rate.
        let server = InboxServer::start(&m.inbox, "{ kind = \"log\" }", "").await?;
        let gen = Arc::new(EventGen::new(&format!("half{label}")));
        let (mut p99, mut rates, mut non200) = (vec![], vec![], 0);
        for _ in 0..rounds {
            let s = load::open_loop(
                server.addr,
                CONNECTIONS as usize,
                accept / 2.0,
                Duration::from_secs(4),
                gen.clone().fresh(),
            )
            .await;
            non200 += s.non200();
            p99.push(s.percentile_ms(99.0));
            rates.push(s.rate());
        }
        server.stop().await;
        row(
            rows,
            &format!("wrk: accept{label} p99 at half that rate (open loop)"),
            format!(
                "{:.2} ms at {:.0}/s ({non200} not 200)",
                median(p99),
                median(rates)
            ),
            "< 10 ms",
        );
    }
    end_to_end(opts, inbox, &dir, &key, durable, rows).await
}

/// End to end under wrk: `inbox serve` forwarding to a local sink; wrk runs until at least `opts.e2e_events` are
/// accepted, then the clock runs to the last COMPLETED. Events/s = accepted / (first request to last COMPLETED).
async fn end_to_end(
    opts: &Opts,
    inbox: &Path,
    dir: &tempfile::TempDir,
    key: &inbox_core::schemes::Key,
    durable: f64,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let sink = crate::Sink::start().await?;
    let handler = format!(
        "{{ kind = \"forward\", url = \"http://{}/sink\", timeout = \"10s\" }}",
        sink.addr
    );
    // The GitHub source forwarding, on the workers the e2e part uses.
    let github = GITHUB.replace("handler = { kind = \"log\" }", &format!("handler = {handler}"));
    let server = InboxServer::start(
        inbox,
        &handler,
        &format!("workers = {}\n{github}", opts.e2e_workers),
    )
    .await?;
    let path = dir.path().join("e2e.lua");
    let (mut rates, mut cpu, mut non2xx, mut accepted_total) = (vec![], vec![], 0, 0u64);
    for round in 0..3 {
        let deliveries = dir.path().join("deliveries.txt");
        sign_deliveries(key, 100 + round, &deliveries)?;
        std::fs::write(&path, script(&deliveries))?;
        let before = server.metric("completed").await?;
        let c0 = proc::cpu_seconds(server.pid)?;
        let t0 = std::time::Instant::now();
        // Long enough for the events asked for at the rate accept reached, and at least 5 s.
        let secs = (opts.e2e_events as f64 / (durable * 0.2).max(500.0))
            .ceil()
            .max(5.0) as u64;
        let a = wrk(server.addr, secs, &path).await?;
        non2xx += a.non2xx;
        let accepted = server.metric("accepted").await? - accepted_total;
        accepted_total += accepted;
        let until = t0 + Duration::from_secs(300);
        while server.metric("completed").await? < before + accepted {
            if std::time::Instant::now() > until {
                bail!("end to end under wrk: not all COMPLETED within 300 s");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let span = t0.elapsed().as_secs_f64();
        rates.push(accepted as f64 / span);
        cpu.push((proc::cpu_seconds(server.pid)? - c0) / accepted.max(1) as f64 * 1e6);
        println!(
            "  end to end round {round}: {accepted} events accepted in {secs} s, all COMPLETED {span:.2} s after the \
             first request: {:.0}/s",
            accepted as f64 / span
        );
    }
    let hwm = proc::vm_hwm_mib(server.pid)?;
    server.stop().await;
    let e2e = median(rates);
    row(
        rows,
        "wrk: end to end (forward to a sink), events/s",
        format!("{e2e:.0} ({:.1}% of the durable ceiling)", e2e / durable * 100.0),
        ">= 33% of the durable ceiling",
    );
    row(
        rows,
        "wrk: end to end, server CPU per completed event",
        format!("{:.0} us", median(cpu)),
        "-",
    );
    row(
        rows,
        "wrk: end to end, answers not 2xx; sink saw; peak memory",
        format!("{non2xx}; {}; {hwm:.1} MiB", sink.count()),
        "0; < 64 MiB",
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_delivery_is_a_distinct_2_kib_body_under_a_uuid_shaped_id() {
        let ids: std::collections::HashSet<String> = (0..2)
            .flat_map(|r| (0..1000).map(move |n| delivery_id(r, n)))
            .collect();
        assert_eq!(ids.len(), 2000, "ids repeat");
        let id = delivery_id(3, 7);
        assert_eq!(id.len(), 36);
        assert_eq!(id.split('-').map(str::len).collect::<Vec<_>>(), [8, 4, 4, 4, 12]);
        assert_eq!(&id[14..15], "4", "{id}");
        let b = body(&id);
        assert_eq!(b.len(), 2048);
        assert!(b.contains(&id) && serde_json::from_str::<serde_json::Value>(&b).is_ok());
        assert_ne!(body(&delivery_id(3, 8)), b);
    }

    #[test]
    fn wrk_output_is_read() {
        let out = "Running 15s test @ http://127.0.0.1:3000\n  2 threads and 32 connections\n\
                   Latency Distribution\n     50%    1.73ms\n     75%    2.10ms\n     90%    4.00ms\n     99%   15.34ms\n\
                   236790 requests in 15.00s, 20.10MB read\n  Non-2xx or 3xx responses: 3\n\
                   Requests/sec:  15786.00\nTransfer/sec:      1.34MB\n";
        let run = parse(out).unwrap();
        assert_eq!((run.rate, run.requests, run.non2xx), (15786.0, 236_790, 3));
        assert!((run.p50_ms - 1.73).abs() < 1e-9 && (run.p99_ms - 15.34).abs() < 1e-9);
        assert_eq!(ms("850.00us"), Some(0.85));
        assert_eq!(ms("1.02s"), Some(1020.0));
    }
}
