//! `--only=wrk` (issue 16): the ceiling and accept figures measured by `wrk` (Debian's package), a load generator
//! at least as efficient as any we would write, so that the ratio to the ceiling is not a ratio to a weak client.
//! `wrk -t2 -c32 --latency`, GitHub-signed 2 KiB bodies with a fresh delivery id each (GitHub signs the body, not
//! the id, so one signature serves every request; the source does not refuse resent bodies), every 200 durable.
//! Ceiling and accept rounds alternate, on one server each.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use inbox_core::schemes::{Identity, Scheme};
use tokio::process::Command;

use crate::{listening, median, proc, row, InboxServer, Opts, Row, SECRET};

/// Connections and threads, as the issue measured.
const CONNECTIONS: u32 = 32;
const THREADS: u32 = 2;

/// What one wrk run printed.
struct Run {
    rate: f64,
    p50_ms: f64,
    p99_ms: f64,
    requests: u64,
    non2xx: u64,
}

/// The Lua script: a fresh delivery id per request (`{round}-{thread}-{n}`), the one body and its signature.
fn script(body: &str, signature: &str, round: usize) -> String {
    format!(
        r#"local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
local n = 0
local body = [==[{body}]==]
request = function()
  n = n + 1
  return wrk.format("POST", "/webhooks/gh", {{
    ["Content-Type"] = "application/json",
    ["X-Hub-Signature-256"] = "{signature}",
    ["X-GitHub-Event"] = "push",
    ["X-GitHub-Delivery"] = "wrk-{round}-" .. tid .. "-" .. n,
  }}, body)
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
    })
}

async fn wrk(addr: std::net::SocketAddr, secs: u64, script_path: &Path) -> Result<Run> {
    let out = Command::new("wrk")
        .args(["-t", &THREADS.to_string(), "-c", &CONNECTIONS.to_string()])
        .args(["-d", &format!("{secs}s"), "--latency", "-s"])
        .arg(script_path)
        .arg(format!("http://{addr}"))
        .output()
        .await
        .context("cannot run wrk: install it (Debian: apt-get install wrk)")?;
    if !out.status.success() {
        bail!("wrk failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    parse(&String::from_utf8_lossy(&out.stdout))
}

pub async fn run(opts: &Opts, inbox: &Path, rows: &mut Vec<Row>) -> Result<()> {
    println!(
        "\n## 9. wrk (-t{THREADS} -c{CONNECTIONS}, GitHub-signed 2 KiB bodies, a fresh id each; ceiling and accept alternated)"
    );
    let secs = if opts.quick { 5 } else { 15 };
    let rounds = opts.rounds.clamp(3, 5);
    let body = format!(r#"{{"ref":"refs/heads/main","pad":"{}"}}"#, "x".repeat(2048 - 36));
    let key = Scheme::Github.key_from_secret(SECRET)?;
    let identity = Identity {
        event_id: "unused".into(),
        event_type: Some("push".into()),
    };
    let signature = Scheme::Github
        .sign(&key, body.as_bytes(), &identity, 0)
        .into_iter()
        .find(|(name, _)| name.as_str() == "x-hub-signature-256")
        .and_then(|(_, v)| v.to_str().ok().map(str::to_owned))
        .context("the GitHub scheme signs with x-hub-signature-256")?;
    let dir = tempfile::TempDir::new()?;

    let exe = std::env::current_exe()?;
    let mut ceiling = Command::new(exe)
        .arg("--ceiling-server")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let ceiling_addr = listening(&mut ceiling, "listening on http://").await?;
    let github = "[sources.gh]\nscheme = \"github\"\nsecrets = [\"env:BENCH_STRIPE_SECRET\"]\n\
                  refuse_resent_bodies = false\nhandler = { kind = \"log\" }\n";
    let server = InboxServer::start(inbox, "{ kind = \"log\" }", github).await?;

    let (mut ceilings, mut accepts, mut p50, mut p99, mut cpu) = (vec![], vec![], vec![], vec![], vec![]);
    let mut non2xx = 0;
    for round in 0..rounds {
        let path = dir.path().join(format!("round{round}.lua"));
        std::fs::write(&path, script(&body, &signature, round))?;
        let c = wrk(ceiling_addr, secs, &path).await?;
        ceilings.push(c.rate);
        let c0 = proc::cpu_seconds(server.pid)?;
        let a = wrk(server.addr, secs, &path).await?;
        let c1 = proc::cpu_seconds(server.pid)?;
        non2xx += a.non2xx;
        accepts.push(a.rate);
        p50.push(a.p50_ms);
        p99.push(a.p99_ms);
        cpu.push((c1 - c0) / a.requests.max(1) as f64 * 1e6);
        println!(
            "  round {round}: ceiling {:.0}/s, accept {:.0}/s (p50 {:.2} ms, p99 {:.2} ms, {} requests, {} not 2xx)",
            c.rate, a.rate, a.p50_ms, a.p99_ms, a.requests, a.non2xx
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let accepted = server.metric("accepted").await?;
    let hwm = proc::vm_hwm_mib(server.pid)?;
    let _ = ceiling.start_kill();
    server.stop().await;
    let (ceiling, accept) = (median(ceilings), median(accepts));
    row(
        rows,
        "wrk: ceiling (bare axum), requests/s",
        format!("{ceiling:.0} (client: wrk)"),
        "-",
    );
    row(
        rows,
        "wrk: accept, events/s",
        format!("{accept:.0} ({:.1}% of ceiling)", accept / ceiling * 100.0),
        ">= 35% of ceiling",
    );
    row(
        rows,
        "wrk: accept p50 / p99 (closed loop, c=32)",
        format!("{:.2} ms / {:.2} ms", median(p50), median(p99)),
        "p99 < 10 ms",
    );
    row(
        rows,
        "wrk: server CPU per accepted event",
        format!("{:.0} us", median(cpu)),
        "-",
    );
    row(
        rows,
        "wrk: events stored / answers not 2xx; peak memory",
        format!("{accepted} / {non2xx}; {hwm:.1} MiB"),
        "0 not 2xx; < 64 MiB",
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
