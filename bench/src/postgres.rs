//! `--only=postgres`: `inbox serve` over PostgreSQL with 1, 2 and 3 instances on one database, beside one over
//! SQLite, under wrk (`-c32`, the same signed deliveries as section 9, wrk's threads spread over the instances), in
//! alternating order each round; then PostgreSQL's own commit rate on this machine for reference: `pgbench` with 32
//! clients, each transaction one 2 KiB insert committed with `synchronous_commit = on`; and the claim latency over a
//! table of 1,000,000 completed and 10,000 open events.
//!
//! The database: `INBOX_BENCH_POSTGRES_URL` where set (a server of your own), else a throwaway cluster of Debian's
//! PostgreSQL started for the run (as the unprivileged `postgres` user when run as root), `fsync` on.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::process::Command;

use crate::wrk::{script_over, sign_deliveries, wrk_threads, GITHUB};
use crate::{median, row, InboxServer, Opts, Row, SECRET};
use inbox_core::schemes::Scheme;

/// One way of running: its label, its store's config lines, and its servers.
struct Setup {
    label: String,
    /// PostgreSQL's: the database's name, whose commits are counted.
    database: Option<String>,
    servers: Vec<InboxServer>,
    /// Transactions the database committed per event accepted, each round.
    commits: Vec<f64>,
    rates: Vec<f64>,
    p50: Vec<f64>,
    p99: Vec<f64>,
    non2xx: u64,
}

impl Setup {
    async fn start(
        label: &str,
        inbox: &Path,
        store: &str,
        instances: usize,
        database: Option<String>,
    ) -> Result<Self> {
        let mut servers = Vec::new();
        for _ in 0..instances {
            servers.push(InboxServer::start(inbox, "{ kind = \"log\" }", &format!("{store}{GITHUB}")).await?);
        }
        Ok(Self {
            label: label.to_owned(),
            database,
            servers,
            commits: vec![],
            rates: vec![],
            p50: vec![],
            p99: vec![],
            non2xx: 0,
        })
    }

    fn addrs(&self) -> Vec<SocketAddr> {
        self.servers.iter().map(|s| s.addr).collect()
    }

    /// Waits until its servers together COMPLETED all they accepted (two minutes at most).
    async fn drain(&self) -> Result<()> {
        let until = std::time::Instant::now() + Duration::from_secs(120);
        loop {
            let (mut accepted, mut completed) = (0, 0);
            for s in &self.servers {
                accepted += s.metric("accepted").await?;
                completed += s.metric("completed").await?;
            }
            if completed >= accepted {
                return Ok(());
            }
            if std::time::Instant::now() > until {
                bail!("{}: the backlog was not worked off within 120 s", self.label);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The PostgreSQL the run uses: a URL, and the throwaway cluster behind it if the run started one.
struct Postgres {
    url: String,
    cluster: Option<(PathBuf, Vec<String>, tempfile::TempDir)>,
}

impl Postgres {
    async fn start() -> Result<Self> {
        if let Ok(url) = std::env::var("INBOX_BENCH_POSTGRES_URL") {
            return Ok(Self { url, cluster: None });
        }
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .context("no PostgreSQL in /usr/lib/postgresql: apt-get install postgresql, or set INBOX_BENCH_POSTGRES_URL")?
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|p| p.join("initdb").exists())
            .max()
            .context("no initdb under /usr/lib/postgresql")?;
        let dir = tempfile::Builder::new().prefix("bench-pg").tempdir()?;
        let root = std::process::Command::new("id").arg("-u").output()?.stdout == b"0\n";
        let as_user: Vec<String> = if root {
            std::process::Command::new("chown")
                .args(["postgres", &dir.path().display().to_string()])
                .status()?;
            ["runuser", "-u", "postgres", "--"].map(String::from).to_vec()
        } else {
            vec![]
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let data = dir.path().join("data");
        run(
            &as_user,
            &bin.join("initdb"),
            &["-D", &data.display().to_string(), "-A", "trust", "-U", "inbox"],
        )
        .await?;
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=256MB",
            dir.path().display()
        );
        run(
            &as_user,
            &bin.join("pg_ctl"),
            &[
                "-D",
                &data.display().to_string(),
                "-l",
                &dir.path().join("log").display().to_string(),
                "-w",
                "start",
                "-o",
                &options,
            ],
        )
        .await?;
        Ok(Self {
            url: format!("postgres://inbox@127.0.0.1:{port}/postgres"),
            cluster: Some((bin, as_user, dir)),
        })
    }

    /// A fresh database, its URL.
    async fn database(&self, name: &str) -> Result<String> {
        self.sql(&format!("CREATE DATABASE {name}")).await?;
        Ok(match self.url.rsplit_once('/') {
            Some((server, _)) => format!("{server}/{name}"),
            None => bail!("no database in {}", self.url),
        })
    }

    /// Transactions `database` has committed so far (`pg_stat_database`; 0 for none).
    async fn commits(&self, database: Option<&str>) -> Result<i64> {
        let Some(database) = database else {
            return Ok(0);
        };
        let (client, connection) = tokio_postgres::connect(&self.url, tokio_postgres::NoTls).await?;
        tokio::spawn(connection);
        // The statistics of this transaction's snapshot are not cached from an earlier read.
        client.batch_execute("SELECT pg_stat_clear_snapshot()").await?;
        let row = client
            .query_one(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = $1",
                &[&database],
            )
            .await?;
        Ok(row.get(0))
    }

    async fn sql(&self, sql: &str) -> Result<()> {
        let (client, connection) = tokio_postgres::connect(&self.url, tokio_postgres::NoTls).await?;
        tokio::spawn(connection);
        client.batch_execute(sql).await?;
        Ok(())
    }

    /// `pgbench` with 32 clients for `secs`: each transaction one 2 KiB row inserted under a fresh key, committed
    /// with `synchronous_commit = on`. Transactions a second.
    async fn reference(&self, secs: u64, dir: &Path) -> Result<f64> {
        let url = self.database("bench_reference").await?;
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
        tokio::spawn(connection);
        client
            .batch_execute("CREATE TABLE ref (id text PRIMARY KEY, body text NOT NULL)")
            .await?;
        let script = dir.join("reference.sql");
        std::fs::write(
            &script,
            "INSERT INTO ref (id, body) VALUES (md5(random()::text || clock_timestamp()::text), repeat('x', 2048));\n",
        )?;
        let pgbench = match &self.cluster {
            Some((bin, _, _)) => bin.join("pgbench"),
            None => PathBuf::from("pgbench"),
        };
        let out = Command::new(pgbench)
            .args(["-n", "-c", "32", "-j", "2", "-T", &secs.to_string(), "-f"])
            .arg(&script)
            .arg(&url)
            .output()
            .await
            .context("cannot run pgbench")?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find_map(|l| {
                l.strip_prefix("tps = ")
                    .and_then(|r| r.split_whitespace().next()?.parse().ok())
            })
            .with_context(|| {
                format!(
                    "pgbench printed no tps: {text}{}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some((bin, as_user, dir)) = &self.cluster {
            let data = dir.path().join("data");
            let mut cmd =
                std::process::Command::new(as_user.first().map_or(bin.join("pg_ctl"), PathBuf::from));
            if !as_user.is_empty() {
                cmd.args(&as_user[1..]).arg(bin.join("pg_ctl"));
            }
            let _ = cmd
                .args(["-D", &data.display().to_string(), "-m", "immediate", "stop"])
                .output();
        }
    }
}

async fn run(as_user: &[String], program: &Path, args: &[&str]) -> Result<()> {
    let mut cmd = match as_user.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(program);
            c
        }
        None => Command::new(program),
    };
    let out = cmd.args(args).output().await?;
    if !out.status.success() {
        bail!(
            "{} failed: {}",
            program.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

pub async fn run_section(opts: &Opts, inbox: &Path, rows: &mut Vec<Row>) -> Result<()> {
    println!(
        "\n## 11. PostgreSQL: 1, 2 and 3 instances on one database, beside SQLite (wrk -c32; alternated)"
    );
    let secs = if opts.quick { 5 } else { 15 };
    let rounds = opts.rounds.clamp(3, 5);
    let pg = Postgres::start().await?;
    let dir = tempfile::TempDir::new()?;
    let mut setups = vec![Setup::start("SQLite, 1 instance", inbox, "", 1, None).await?];
    for n in 1..=3 {
        let url = pg.database(&format!("bench_{n}")).await?;
        let url_file = dir.path().join(format!("url{n}"));
        std::fs::write(&url_file, url)?;
        let store = format!(
            "[store]\nkind = \"postgres\"\nurl = \"file:{}\"\n",
            url_file.display()
        );
        let label = format!("PostgreSQL, {n} instance{}", if n > 1 { "s" } else { "" });
        setups.push(Setup::start(&label, inbox, &store, n, Some(format!("bench_{n}"))).await?);
    }
    let key = Scheme::Github.key_from_secret(SECRET)?;
    for round in 0..rounds {
        let deliveries = dir.path().join("deliveries.txt");
        sign_deliveries(&key, round + 100, &deliveries)?;
        let order: Vec<usize> = if round % 2 == 0 {
            (0..setups.len()).collect()
        } else {
            (0..setups.len()).rev().collect()
        };
        for i in order {
            for s in &setups {
                s.drain().await?;
            }
            let setup = &mut setups[i];
            let addrs = setup.addrs();
            let threads = u32::try_from(addrs.len().max(2)).unwrap_or(2);
            let script = dir.path().join(format!("round{round}-{i}.lua"));
            std::fs::write(&script, script_over(&deliveries, threads, &addrs))?;
            let commits_before = pg.commits(setup.database.as_deref()).await?;
            let run = wrk_threads(addrs[0], threads, secs, &script).await?;
            let commits = pg.commits(setup.database.as_deref()).await? - commits_before;
            if setup.database.is_some() {
                setup.commits.push(commits as f64 / run.requests.max(1) as f64);
            }
            println!(
                "  round {round}: {} {:.0}/s (p50 {:.2} ms, p99 {:.2} ms, {} not 2xx)",
                setup.label, run.rate, run.p50_ms, run.p99_ms, run.non2xx
            );
            setup.rates.push(run.rate);
            setup.p50.push(run.p50_ms);
            setup.p99.push(run.p99_ms);
            setup.non2xx += run.non2xx;
        }
    }
    for s in &setups {
        s.drain().await?;
    }
    claim_latency(&pg, rows).await?;
    let reference = pg.reference(secs, dir.path()).await?;
    println!(
        "  pgbench: {reference:.0} transactions/s (32 clients, one 2 KiB insert each, synchronous commit)"
    );
    row(
        rows,
        "postgres: pgbench, 32 clients, a 2 KiB insert a transaction (transactions/s)",
        format!("{reference:.0}"),
        "-",
    );
    for s in setups {
        let rate = median(s.rates.clone());
        row(
            rows,
            &format!("postgres: accept, {}, events/s", s.label),
            format!(
                "{rate:.0} ({:.0}% of pgbench's); p50 {:.2} ms / p99 {:.2} ms; {} not 2xx{}",
                rate / reference * 100.0,
                median(s.p50.clone()),
                median(s.p99.clone()),
                s.non2xx,
                if s.commits.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; {:.2} database commits an accepted event (its batch's share, and its settle)",
                        median(s.commits.clone())
                    )
                }
            ),
            "-",
        );
        for server in s.servers {
            server.stop().await;
        }
    }
    Ok(())
}

/// Claim latency over a big table: 1,000,000 COMPLETED events kept for retention and 10,000 open ones, seeded by
/// SQL (the open ones with 2 KiB bodies; a completed one's body is never read by a claim); then the sweeper's read of what is due (100 at a time) and 1,000 claims, each timed. What claims and the
/// sweeper read is the partial index of open work, so neither grows with the completed events kept.
async fn claim_latency(pg: &Postgres, rows: &mut Vec<Row>) -> Result<()> {
    use inbox_core::ports::{Claim, Ledger, SweepIndex};
    use inbox_core::stores::postgres::{Options, PostgresStore};
    const COMPLETED: i64 = 1_000_000;
    const OPEN: i64 = 10_000;
    let url = pg.database("bench_claims").await?;
    let store = PostgresStore::open(Options::new(url.clone(), Duration::from_secs(30))).await?;
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let seeded = std::time::Instant::now();
    client
        .batch_execute(&format!(
            "INSERT INTO events (source, event_id, event_type, status, payload_sha256, received_at, updated_at,
                                 completed_at, expires_at, attempts, origin)
             SELECT 'gh', 'done-' || n, 'push', 'COMPLETED', md5(n::text), 1, 1, 1, 9000000000000, 1, 'webhook'
             FROM generate_series(1, {COMPLETED}) n;
             INSERT INTO events (source, event_id, event_type, status, payload_sha256, received_at, updated_at,
                                 due_at, origin)
             SELECT 'gh', 'open-' || n, 'push', 'RECEIVED', md5(n::text), 1, 1, n, 'webhook'
             FROM generate_series(1, {OPEN}) n;
             INSERT INTO payloads (event, headers, body, encoding)
             SELECT id, '[]', convert_to(repeat('x', 2048), 'UTF8'), 0 FROM events WHERE status = 'RECEIVED';"
        ))
        .await?;
    // Each on its own: VACUUM runs in no transaction, and a string of statements is one.
    client.batch_execute("VACUUM ANALYZE events").await?;
    client.batch_execute("VACUUM ANALYZE payloads").await?;
    println!(
        "  seeded {COMPLETED} completed and {OPEN} open events in {:.1?}",
        seeded.elapsed()
    );
    let (mut due, mut claims) = (vec![], vec![]);
    for _ in 0..200 {
        let t = std::time::Instant::now();
        let found = store.due(Duration::MAX, 100).await?;
        due.push(t.elapsed().as_secs_f64() * 1e3);
        if found.len() != 100 {
            bail!("the sweeper read {} due events, not 100", found.len());
        }
    }
    for n in 1..=1_000 {
        let key = inbox_core::model::EventKey::new(
            inbox_core::model::SourceName::parse("gh")?,
            inbox_core::model::EventId::parse(&format!("open-{n}"))?,
        );
        let t = std::time::Instant::now();
        let claim = store.claim(&key, "bench:1:x", Duration::from_secs(60)).await?;
        claims.push(t.elapsed().as_secs_f64() * 1e3);
        if !matches!(claim, Claim::Claimed(_)) {
            bail!("open-{n} was not claimed: {claim:?}");
        }
    }
    // What the claims and the sweeper read (the partial index of open work) beside what is kept.
    let sizes = client
        .query_one(
            "SELECT pg_relation_size('events_due'), pg_relation_size('events_open'), pg_relation_size('events'),
                    pg_total_relation_size('events')",
            &[],
        )
        .await?;
    let mib = |i: usize| sizes.get::<_, i64>(i) as f64 / (1024.0 * 1024.0);
    row(
        rows,
        "postgres: with 1,000,000 completed and 10,000 open events: the due index / the open index / the events table / with all its indexes",
        format!("{:.2} MiB / {:.2} MiB / {:.0} MiB / {:.0} MiB", mib(0), mib(1), mib(2), mib(3)),
        "-",
    );
    let pct = |mut v: Vec<f64>, p: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() as f64 - 1.0) * p).round() as usize]
    };
    row(
        rows,
        "postgres: with 1,000,000 completed and 10,000 open events: claim p50 / p99; the sweeper's read of 100 due p50 / p99",
        format!(
            "{:.2} ms / {:.2} ms; {:.2} ms / {:.2} ms",
            pct(claims.clone(), 0.5),
            pct(claims, 0.99),
            pct(due.clone(), 0.5),
            pct(due, 0.99)
        ),
        "-",
    );
    Ok(())
}
