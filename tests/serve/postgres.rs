//! Many `inbox serve` on one PostgreSQL database (docs/DESIGN.md, "Many instances: PostgreSQL"): three real server
//! processes share one ledger, each a full receiver and worker, while they are SIGKILLed, while the database cuts
//! their connections, and while the same events reach all three at once. Each test has a schema of its own in the
//! server `INBOX_TEST_POSTGRES_URL` names (./test.sh starts one); without it the tests print SKIPPED and pass, unless
//! `INBOX_REQUIRE_POSTGRES=1`.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use inbox_core::schemes::Scheme;

const SOURCE: &str = "shared";
const INSTANCES: usize = 3;

/// A schema of the test's own on the test server, dropped when the test passes.
pub(crate) struct Database {
    base: String,
    schema: String,
}

impl Database {
    pub(crate) async fn fresh() -> Option<Self> {
        let Ok(base) = std::env::var("INBOX_TEST_POSTGRES_URL") else {
            assert_ne!(
                std::env::var("INBOX_REQUIRE_POSTGRES").as_deref(),
                Ok("1"),
                "INBOX_REQUIRE_POSTGRES=1 but INBOX_TEST_POSTGRES_URL is unset"
            );
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: INBOX_TEST_POSTGRES_URL is unset (./test.sh starts a PostgreSQL)"
            );
            return None;
        };
        let db = Self {
            base,
            schema: format!("serve_{:016x}", rand::random::<u64>()),
        };
        db.sql(&format!("CREATE SCHEMA {}", db.schema)).await;
        Some(db)
    }

    /// The URL the servers get (as a secret, by reference): every session in the test's schema, and named after it.
    pub(crate) fn url(&self) -> String {
        let sep = if self.base.contains('?') { '&' } else { '?' };
        format!(
            "{}{sep}options=-c%20search_path%3D{}&application_name={}",
            self.base, self.schema, self.schema
        )
    }

    /// The test's schema.
    pub(crate) fn schema(&self) -> &str {
        &self.schema
    }

    /// Runs the statements of `sql` (one simple query: a dump, a transaction of its own) on a connection of its own,
    /// in the test's schema unless they set another.
    pub(crate) async fn batch(&self, sql: &str) {
        let (client, connection) = tokio_postgres::connect(&self.base, tokio_postgres::NoTls)
            .await
            .expect("connect to the test PostgreSQL");
        tokio::spawn(connection);
        client
            .batch_execute(&format!("SET search_path = {}, public;\n{sql}", self.schema))
            .await
            .unwrap_or_else(|e| {
                let detail = e.as_db_error().map(|d| format!(": {}", d.message()));
                panic!("the batch failed: {e}{}", detail.unwrap_or_default())
            });
    }

    /// Runs `sql` in the test's schema on a connection of its own; the first column of each row, as text.
    pub(crate) async fn sql(&self, sql: &str) -> Vec<String> {
        let (client, connection) = tokio_postgres::connect(&self.base, tokio_postgres::NoTls)
            .await
            .expect("connect to the test PostgreSQL");
        tokio::spawn(connection);
        client
            .batch_execute(&format!("SET search_path = {}, public", self.schema))
            .await
            .expect("search_path");
        client
            .simple_query(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .into_iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
                _ => None,
            })
            .collect()
    }

    /// Ends every connection this test's servers hold (`pg_terminate_backend`; their sessions are named after the
    /// schema), as a database restart or a failover does to them. How many.
    async fn cut_connections(&self) -> usize {
        self.sql(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE application_name = '{}' AND pid <> pg_backend_pid()",
            self.schema
        ))
        .await
        .len()
    }

    pub(crate) async fn drop(self) {
        self.sql(&format!("DROP SCHEMA {} CASCADE", self.schema)).await;
    }
}

/// `INSTANCES` servers on `db`, forwarding to `sink`.
fn instances(db: &Database, sink: &Sink, secret: &str) -> Vec<App> {
    instances_with(db, sink, secret, INSTANCES, "")
}

/// `n` servers on `db`, forwarding to `sink`, the source configured with `extra` besides.
fn instances_with(db: &Database, sink: &Sink, secret: &str, n: usize, extra: &str) -> Vec<App> {
    let config = format!(
        "[store]\nkind = \"postgres\"\nurl = \"env:INBOX_DATABASE_URL\"\n\
         [retry]\nbase = \"200ms\"\n[sweeper]\ngrace = \"2s\"\ninterval = \"5s\"\n\
         [sources.{SOURCE}]\nscheme = \"github\"\nsecrets = [\"env:SHARED_SECRET\"]\n{extra}\
         handler = {{ kind = \"forward\", url = \"{}/shared\", timeout = \"5s\" }}\n",
        sink.url()
    );
    let url = db.url();
    (0..n)
        .map(|_| {
            spawn_app(
                &config,
                &[("SHARED_SECRET", secret), ("INBOX_DATABASE_URL", &url)],
            )
        })
        .collect()
}

/// One sender per instance, each with its share of `ids`.
fn senders(apps: &[App], ids: &[String], secret: &str) -> Vec<Arc<Resender>> {
    apps.iter()
        .enumerate()
        .map(|(i, app)| {
            let share = ids.iter().skip(i).step_by(apps.len()).cloned().collect();
            Resender::new(share, app.url(), SOURCE, Signer::new(Scheme::Github, secret))
        })
        .collect()
}

fn acked(senders: &[Arc<Resender>]) -> usize {
    senders.iter().map(|s| s.acked.load(Ordering::SeqCst)).sum()
}

/// Every sender's events acknowledged (none given up, no answer a 5xx but 503).
async fn all_acknowledged(senders: &[Arc<Resender>], workers: Vec<tokio::task::JoinHandle<()>>, n: usize) {
    for w in workers {
        w.await.expect("a sender panicked");
    }
    let given_up: usize = senders.iter().map(|s| s.given_up.load(Ordering::SeqCst)).sum();
    let broken: usize = senders.iter().map(|s| s.broken.load(Ordering::SeqCst)).sum();
    assert_eq!(given_up, 0, "events never acknowledged");
    assert_eq!(broken, 0, "answers 5xx other than 503");
    assert_eq!(acked(senders), n);
}

/// GIVEN three `inbox serve` on one database, forwarding to a counting sink, and 1,500 distinct events sent to
/// them, a third each, 16 at a time per instance
/// WHEN each instance in turn is SIGKILLed mid-stream and restarted
/// THEN every event is acknowledged and ends COMPLETED, the ledger holds exactly one record per id, and the sink
/// saw each at least once and at most once more per kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn three_instances_sigkilled_in_turn_lose_nothing_and_store_nothing_twice() {
    const EVENTS: usize = 1_500;
    const KILL_AT: [usize; INSTANCES] = [300, 700, 1_100];
    let Some(db) = Database::fresh().await else {
        return;
    };
    let started = Instant::now();
    let sink = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let mut apps = instances(&db, &sink, &secret);
    let run = rand_id("pg");
    let ids: Vec<String> = (0..EVENTS).map(|i| format!("{run}-{i:04}")).collect();
    let senders = senders(&apps, &ids, &secret);
    let give_up_at = Instant::now() + Duration::from_secs(60);
    let workers: Vec<_> = senders
        .iter()
        .flat_map(|s| (0..16).map(move |_| tokio::spawn(s.clone().send_all(give_up_at))))
        .collect();
    for (victim, threshold) in KILL_AT.into_iter().enumerate() {
        wait_every(
            Duration::from_secs(60),
            Duration::from_millis(2),
            format!("{threshold} events are acknowledged"),
            &mut || acked(&senders) >= threshold,
        );
        apps[victim].kill();
        assert!(
            acked(&senders) < EVENTS,
            "the senders finished before the kill: not mid-stream"
        );
        apps[victim].restart();
        *senders[victim].base.write().expect("lock") = apps[victim].url();
    }
    all_acknowledged(&senders, workers, EVENTS).await;
    apps[2].wait_all_completed(
        EVENTS,
        Duration::from_secs(90),
        "every acknowledged event is COMPLETED",
    );
    let doubled = assert_stored_once_and_delivered(
        &apps[0],
        &sink,
        SOURCE,
        &ids,
        1 + KILL_AT.len(),
        "three instances",
    );
    eprintln!(
        "three instances, SIGKILLed at {KILL_AT:?}: all COMPLETED at {:?}; {doubled} delivered more than once",
        started.elapsed()
    );
    db.drop().await;
}

/// GIVEN three instances receiving 1,200 distinct events
/// WHEN the database ends every connection they hold, three times mid-stream (`pg_terminate_backend`, what a
/// database restart or a failover does to them)
/// THEN no answer is a 5xx other than 503, every event is acknowledged and ends COMPLETED, stored once, delivered
/// at most once more per cut (a settle lost with its connection).
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn connections_cut_by_the_database_answer_503_and_lose_nothing() {
    const EVENTS: usize = 1_200;
    const CUT_AT: [usize; 3] = [250, 600, 900];
    let Some(db) = Database::fresh().await else {
        return;
    };
    let sink = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let apps = instances(&db, &sink, &secret);
    let run = rand_id("cut");
    let ids: Vec<String> = (0..EVENTS).map(|i| format!("{run}-{i:04}")).collect();
    let senders = senders(&apps, &ids, &secret);
    let give_up_at = Instant::now() + Duration::from_secs(60);
    let workers: Vec<_> = senders
        .iter()
        .flat_map(|s| (0..16).map(move |_| tokio::spawn(s.clone().send_all(give_up_at))))
        .collect();
    let mut cut = Vec::new();
    for threshold in CUT_AT {
        wait_every(
            Duration::from_secs(60),
            Duration::from_millis(2),
            format!("{threshold} events are acknowledged"),
            &mut || acked(&senders) >= threshold,
        );
        cut.push(db.cut_connections().await);
    }
    assert!(cut.iter().all(|n| *n > 0), "no connection was cut: {cut:?}");
    all_acknowledged(&senders, workers, EVENTS).await;
    apps[0].wait_all_completed(
        EVENTS,
        Duration::from_secs(90),
        "every acknowledged event is COMPLETED",
    );
    assert_stored_once_and_delivered(&apps[1], &sink, SOURCE, &ids, 1 + CUT_AT.len(), "connections cut");
    let refused: usize = senders.iter().map(|s| s.refused.load(Ordering::SeqCst)).sum();
    eprintln!("connections cut ({cut:?} each time): {refused} answers 503, none other than 200 and 503");
    db.drop().await;
}

/// GIVEN three instances
/// WHEN the same 300 events are sent to all three at once (a sender retrying on another node, a load balancer)
/// THEN each is stored once and delivered exactly once: duplicates are answered, never run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn the_same_events_at_every_instance_at_once_run_once() {
    const EVENTS: usize = 300;
    let Some(db) = Database::fresh().await else {
        return;
    };
    let sink = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let apps = instances(&db, &sink, &secret);
    let run = rand_id("dup");
    let ids: Vec<String> = (0..EVENTS).map(|i| format!("{run}-{i:03}")).collect();
    // Every instance gets every id.
    let senders: Vec<_> = apps
        .iter()
        .map(|app| {
            Resender::new(
                ids.clone(),
                app.url(),
                SOURCE,
                Signer::new(Scheme::Github, &secret),
            )
        })
        .collect();
    let give_up_at = Instant::now() + Duration::from_secs(60);
    let workers: Vec<_> = senders
        .iter()
        .flat_map(|s| (0..8).map(move |_| tokio::spawn(s.clone().send_all(give_up_at))))
        .collect();
    all_acknowledged(&senders, workers, EVENTS * INSTANCES).await;
    apps[0].wait_all_completed(EVENTS, Duration::from_secs(60), "every event is COMPLETED");
    assert_stored_once_and_delivered(
        &apps[2],
        &sink,
        SOURCE,
        &ids,
        1,
        "the same events at every instance",
    );
    db.drop().await;
}

/// GIVEN two instances on one database, a source with `refuse_resent_bodies = true`
/// WHEN 60 bodies are each sent under two ids at once, one id to each instance, all 120 deliveries together (a
///   captured delivery replayed under a fresh id through another node)
/// THEN every delivery is answered 200 (503s retried), each body is stored once, under one of its two ids, the other
///   answered as a duplicate of it, and each body is forwarded once.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn one_body_under_two_ids_at_two_instances_at_once_is_stored_and_run_once_where_refused() {
    const PAIRS: usize = 60;
    let Some(db) = Database::fresh().await else {
        return;
    };
    let sink = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let apps = instances_with(&db, &sink, &secret, 2, "refuse_resent_bodies = true\n");
    let run = rand_id("body");
    let barrier = Arc::new(tokio::sync::Barrier::new(PAIRS * 2));
    let mut deliveries = Vec::new();
    for n in 0..PAIRS {
        let body = serde_json::json!({"run": run, "n": n, "action": "opened"}).to_string();
        for (app, side) in apps.iter().zip(["a", "b"]) {
            let (url, body, barrier) = (app.webhook_url(SOURCE), body.clone(), barrier.clone());
            let id = format!("{run}-{n:02}-{side}");
            let signer = Signer::new(Scheme::Github, &secret);
            deliveries.push(tokio::spawn(async move {
                let http = client();
                barrier.wait().await;
                let give_up_at = Instant::now() + Duration::from_secs(30);
                loop {
                    let a = post(
                        &http,
                        &url,
                        body.clone(),
                        &signer.headers(body.as_bytes(), &id, Some("push")),
                    )
                    .await;
                    if a.status != 503 || Instant::now() > give_up_at {
                        return (id, n, a);
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }));
        }
    }
    let mut answered = std::collections::HashMap::<String, Answer>::new();
    for d in deliveries {
        let (id, _, a) = d.await.expect("a delivery task");
        assert_eq!(a.status, 200, "{id}: {}", a.text);
        answered.insert(id, a);
    }
    wait_until(Duration::from_secs(60), "the stored events are COMPLETED", || {
        let counts = apps[0].status_counts();
        counts.len() == 1 && counts.contains_key("COMPLETED")
    });
    // Past two sweeps: a body stored twice would have been forwarded twice by now.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let stored: std::collections::HashSet<String> = apps[1]
        .events()
        .iter()
        .map(|e| str_field(e, "event_id"))
        .collect();
    let mut forwarded = std::collections::HashMap::<u64, usize>::new();
    for r in sink.requests() {
        *forwarded
            .entry(r.json()["n"].as_u64().unwrap_or(u64::MAX))
            .or_default() += 1;
    }
    let (mut twice, mut wrong) = (Vec::new(), Vec::new());
    for n in 0..PAIRS {
        let (a, b) = (format!("{run}-{n:02}-a"), format!("{run}-{n:02}-b"));
        match (stored.contains(&a), stored.contains(&b)) {
            (true, true) => twice.push(n),
            (false, false) => wrong.push(format!("{n}: neither stored")),
            (true, false) | (false, true) => {
                let (kept, refused) = if stored.contains(&a) { (&a, &b) } else { (&b, &a) };
                let (k, r) = (&answered[kept].json, &answered[refused].json);
                if k["status"] != "accepted" || r["status"] != "duplicate" || r["event_id"] != kept.as_str() {
                    wrong.push(format!("{n}: {k} / {r}"));
                }
            }
        }
    }
    let forwarded_twice = forwarded.values().filter(|n| **n > 1).count();
    eprintln!(
        "one body under two ids at two instances, {PAIRS} pairs: {} stored twice, {forwarded_twice} forwarded more \
         than once",
        twice.len()
    );
    assert!(twice.is_empty(), "bodies stored twice: {twice:?}");
    assert!(wrong.is_empty(), "{wrong:?}");
    assert_eq!(stored.len(), PAIRS, "one record per body");
    assert_eq!(forwarded.len(), PAIRS, "every body forwarded: {forwarded:?}");
    assert_eq!(
        forwarded_twice, 0,
        "a body forwarded more than once: {forwarded:?}"
    );
    db.drop().await;
}

/// GIVEN three instances, a downstream that answers its first request 500 and every later one 200, each after 1 s
/// WHEN the instance running the first attempt is paused (SIGSTOP) while its handler waits, past its lease, and
/// resumed (SIGCONT) once another instance has run the event to COMPLETED
/// THEN the paused instance's late settle (its failure) is refused: the event stays COMPLETED after 2 attempts,
/// and the paused instance says its lease was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_instances_late_settle_changes_nothing() {
    let Some(db) = Database::fresh().await else {
        return;
    };
    let sink = Sink::start(&[500], 200).await;
    sink.delay(Duration::from_secs(1));
    let secret = rand_secret();
    let apps = instances(&db, &sink, &secret);
    let id = rand_id("paused");
    let body = serde_json::json!({"id": id}).to_string();
    let signer = Signer::new(Scheme::Github, &secret);
    let a = post(
        &client(),
        &apps[0].webhook_url(SOURCE),
        body.clone(),
        &signer.headers(body.as_bytes(), &id, Some("push")),
    )
    .await;
    assert_eq!(a.json["status"], "accepted", "{}", a.text);
    wait_until(
        Duration::from_secs(10),
        "the first attempt reaches the downstream",
        || sink.count() >= 1,
    );
    apps[0].signal("-STOP");
    // Its lease (the 5 s handler timeout and the margin) runs out; another instance's sweep takes the event.
    wait_until(
        Duration::from_secs(40),
        "another instance completes the event",
        || apps[1].status_of(SOURCE, &id) == "COMPLETED",
    );
    apps[0].signal("-CONT");
    wait_until(
        Duration::from_secs(20),
        "the resumed instance finds its lease lost",
        || apps[0].log().contains("the lease was lost before the settle"),
    );
    let event = apps[2].event(SOURCE, &id).expect("the event is stored");
    assert_eq!(str_field(&event, "status"), "COMPLETED", "{event}");
    assert_eq!(event["attempts"], 2, "{event}");
    assert_eq!(sink.count(), 2, "one delivery per attempt");
    db.drop().await;
}

/// A PostgreSQL cluster of the test's own (initdb in a temporary directory, a free loopback port; as the
/// unprivileged `postgres` user when the test runs as root), so that stopping it stops no other test's database.
pub(crate) struct Cluster {
    bin: std::path::PathBuf,
    dir: tempfile::TempDir,
    as_user: Vec<&'static str>,
    port: u16,
}

impl Cluster {
    pub(crate) fn start() -> Option<Self> {
        let Ok(bin) = std::env::var("INBOX_TEST_POSTGRES_BIN") else {
            assert_ne!(
                std::env::var("INBOX_REQUIRE_POSTGRES").as_deref(),
                Ok("1"),
                "INBOX_REQUIRE_POSTGRES=1 but INBOX_TEST_POSTGRES_BIN (PostgreSQL's bin directory) is unset"
            );
            let _ = writeln!(std::io::stderr(), "SKIPPED: INBOX_TEST_POSTGRES_BIN is unset");
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("inbox-pg-own")
            .tempdir()
            .expect("temp dir");
        let root = std::process::Command::new("id")
            .arg("-u")
            .output()
            .expect("id")
            .stdout
            == b"0\n";
        let as_user = if root {
            let chown = std::process::Command::new("chown")
                .arg("postgres")
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(chown.success(), "chown postgres {}", dir.path().display());
            vec!["runuser", "-u", "postgres", "--"]
        } else {
            vec![]
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let cluster = Self {
            bin: bin.into(),
            dir,
            as_user,
            port,
        };
        let data = cluster.dir.path().join("data");
        cluster.run(
            "initdb",
            &[
                "-D",
                &data.display().to_string(),
                "-A",
                "trust",
                "-U",
                "inbox",
                "--no-sync",
            ],
        );
        cluster.pg_ctl(&["start", "-w"]);
        Some(cluster)
    }

    pub(crate) fn url(&self) -> String {
        format!(
            "postgres://inbox@127.0.0.1:{}/postgres?application_name=restart-test",
            self.port
        )
    }

    fn run(&self, program: &str, args: &[&str]) {
        let program = self.bin.join(program);
        let mut cmd = match self.as_user.split_first() {
            Some((first, rest)) => {
                let mut c = std::process::Command::new(first);
                c.args(rest).arg(&program);
                c
            }
            None => std::process::Command::new(&program),
        };
        let out = cmd.args(args).output().expect("run a PostgreSQL tool");
        assert!(
            out.status.success(),
            "{} {args:?}: {}",
            program.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `pg_ctl ACTION`, on the cluster's directory, port and log.
    pub(crate) fn pg_ctl(&self, action: &[&str]) {
        let data = self.dir.path().join("data").display().to_string();
        let log = self.dir.path().join("server.log").display().to_string();
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=on",
            self.port,
            self.dir.path().display()
        );
        let mut args = vec!["-D", &data, "-l", &log, "-o", &options];
        args.extend_from_slice(action);
        self.run("pg_ctl", &args);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.dir.path().join("data").display().to_string();
        let mut cmd = match self.as_user.split_first() {
            Some((first, rest)) => {
                let mut c = std::process::Command::new(first);
                c.args(rest).arg(self.bin.join("pg_ctl"));
                c
            }
            None => std::process::Command::new(self.bin.join("pg_ctl")),
        };
        let _ = cmd.args(["-D", &data, "-m", "immediate", "stop"]).output();
    }
}

/// GIVEN three instances on a database of the test's own, receiving 1,200 distinct events with duplicates (every
/// tenth sent twice, to another instance)
/// WHEN the database crashes mid-stream (`pg_ctl stop -m immediate`: no shutdown checkpoint, recovery from the WAL
/// at the next start), stays away 3 s, and starts again
/// THEN while it is away the instances answer 503 (never 500 nor 200), and afterwards every event is acknowledged,
/// stored once and COMPLETED, delivered at most once more (a settle lost with the database).
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn the_database_crashed_and_started_again_mid_storm_loses_nothing() {
    const EVENTS: usize = 1_200;
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let db = Database {
        base: cluster.url(),
        schema: "public".into(),
    };
    let sink = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let apps = instances(&db, &sink, &secret);
    let run = rand_id("restart");
    let ids: Vec<String> = (0..EVENTS).map(|i| format!("{run}-{i:04}")).collect();
    let mut senders = senders(&apps, &ids, &secret);
    // Duplicates: every tenth id again, to the next instance.
    for (i, app) in apps.iter().enumerate() {
        let again: Vec<String> = ids.iter().skip(i).step_by(INSTANCES * 10).cloned().collect();
        let next = &apps[(i + 1) % apps.len()];
        let _ = app;
        senders.push(Resender::new(
            again,
            next.url(),
            SOURCE,
            Signer::new(Scheme::Github, &secret),
        ));
    }
    let expected: usize = senders.iter().map(|s| s.ids.len()).sum();
    let give_up_at = Instant::now() + Duration::from_secs(90);
    let workers: Vec<_> = senders
        .iter()
        .flat_map(|s| (0..8).map(move |_| tokio::spawn(s.clone().send_all(give_up_at))))
        .collect();
    wait_every(
        Duration::from_secs(60),
        Duration::from_millis(2),
        "400 events are acknowledged",
        &mut || acked(&senders) >= 400,
    );
    let before = acked(&senders);
    cluster.pg_ctl(&["stop", "-m", "immediate"]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let refused_while_away: usize = senders.iter().map(|s| s.refused.load(Ordering::SeqCst)).sum();
    let acked_while_away = acked(&senders) - before;
    cluster.pg_ctl(&["start", "-w"]);
    all_acknowledged(&senders, workers, expected).await;
    apps[0].wait_all_completed(
        EVENTS,
        Duration::from_secs(120),
        "every acknowledged event is COMPLETED",
    );
    assert_stored_once_and_delivered(
        &apps[1],
        &sink,
        SOURCE,
        &ids,
        2,
        "the database crashed and started again",
    );
    assert!(refused_while_away > 0, "no 503 while the database was away");
    eprintln!(
        "database crashed at {before} acknowledgements for 3 s: {refused_while_away} answers 503 meanwhile, \
         {acked_while_away} acknowledged in the first moments (answers already on their way); all {expected} \
         deliveries ({EVENTS} events) acknowledged and COMPLETED"
    );
}

/// GIVEN three instances with a notify URL, one attempt a source, and a downstream answering 500 to everything
/// WHEN 60 events go DEAD across the instances (each alarm sent by the instance that buried it, any unsent one by
/// the sweep's leader), then, the downstream fixed, two operators replay the dead events at once (two `inbox replay`
/// beside the running servers)
/// THEN each dead event's alarm went out exactly once, each was replayed once (`replays` 1, never 2), and each ends
/// COMPLETED after exactly two deliveries (the failed attempt and the replayed one).
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn alarms_and_replays_raced_by_many_instances_happen_once() {
    const EVENTS: usize = 60;
    let Some(db) = Database::fresh().await else {
        return;
    };
    let sink = Sink::start(&[], 500).await;
    let notify = Sink::start(&[], 200).await;
    let secret = rand_secret();
    let config = format!(
        "[store]\nkind = \"postgres\"\nurl = \"env:INBOX_DATABASE_URL\"\n\
         [alarm]\nnotify_url = \"{}/alerts\"\n\
         [retry]\nmax_attempts = 1\n[sweeper]\ngrace = \"1s\"\ninterval = \"2s\"\n\
         [sources.{SOURCE}]\nscheme = \"github\"\nsecrets = [\"env:SHARED_SECRET\"]\n\
         handler = {{ kind = \"forward\", url = \"{}/shared\", timeout = \"5s\" }}\n",
        notify.url(),
        sink.url()
    );
    let url = db.url();
    let apps: Vec<App> = (0..INSTANCES)
        .map(|_| {
            spawn_app(
                &config,
                &[("SHARED_SECRET", &secret), ("INBOX_DATABASE_URL", &url)],
            )
        })
        .collect();
    let run = rand_id("dead");
    let ids: Vec<String> = (0..EVENTS).map(|i| format!("{run}-{i:02}")).collect();
    let senders = senders(&apps, &ids, &secret);
    let give_up_at = Instant::now() + Duration::from_secs(60);
    let workers: Vec<_> = senders
        .iter()
        .flat_map(|s| (0..4).map(move |_| tokio::spawn(s.clone().send_all(give_up_at))))
        .collect();
    all_acknowledged(&senders, workers, EVENTS).await;
    wait_until(Duration::from_secs(60), "every event is DEAD", || {
        apps[0].status_counts().get("DEAD").copied() == Some(EVENTS)
    });
    wait_until(Duration::from_secs(30), "an alarm for every dead event", || {
        notify.count() >= EVENTS
    });
    // Past the grace and two sweeps: any second alarm would be out by now.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut alarms = std::collections::HashMap::<String, usize>::new();
    for r in notify.requests() {
        let body: serde_json::Value = serde_json::from_slice(&r.body).expect("an alarm is JSON");
        *alarms.entry(str_field(&body, "event_id")).or_default() += 1;
    }
    assert_eq!(alarms.len(), EVENTS, "an alarm for each dead event");
    assert!(
        alarms.values().all(|n| *n == 1),
        "an alarm sent twice: {alarms:?}"
    );

    sink.answer(200);
    let replays: Vec<_> = apps[..2]
        .iter()
        .map(|app| {
            let (config, env) = (
                app.config_path().to_owned(),
                [
                    ("SHARED_SECRET", secret.clone()),
                    ("INBOX_DATABASE_URL", url.clone()),
                ],
            );
            std::thread::spawn(move || {
                std::process::Command::new(INBOX)
                    .args(["replay", "--status", "dead", "--config"])
                    .arg(config)
                    .envs(env)
                    .output()
                    .expect("run inbox replay")
            })
        })
        .collect();
    for replay in replays {
        let out = replay.join().expect("a replay thread");
        assert!(
            out.status.success(),
            "inbox replay: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    apps[1].wait_all_completed(
        EVENTS,
        Duration::from_secs(60),
        "every replayed event is COMPLETED",
    );
    for event in apps[2].events() {
        assert_eq!(event["replays"], 1, "replayed once: {event}");
    }
    let mut deliveries = std::collections::HashMap::<String, usize>::new();
    for r in sink.requests() {
        *deliveries
            .entry(r.header("x-inbox-event-id").unwrap_or_default())
            .or_default() += 1;
    }
    assert_eq!(deliveries.len(), EVENTS);
    assert!(
        deliveries.values().all(|n| *n == 2),
        "not two deliveries each: {deliveries:?}"
    );
    db.drop().await;
}
