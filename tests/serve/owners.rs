//! A live instance is never judged gone while it runs an event (docs/DESIGN.md, "Owners, leases and clocks"): real
//! `inbox serve` processes on one PostgreSQL, each event's attempts timed by the destination itself, while one
//! instance is busy with a purge that outlasts the liveness period, while a TCP hop in front of one instance cuts it
//! off from the database, and while the database itself is stopped. Whatever happens, no two attempts of one event
//! are in flight at once, and no event the destination answered is sent again. Without a PostgreSQL the tests print
//! SKIPPED and pass, unless `INBOX_REQUIRE_POSTGRES=1`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::common::*;
use crate::postgres::{Cluster, Database};
use inbox_core::schemes::Scheme;

const SOURCE: &str = "slow";
/// The liveness period the instances run with: the fence is up 3 s after the last renewed beat, another instance
/// may judge one gone 6 s after it.
const LIVENESS: &str = "6s";
/// How long the destination holds each request before it answers: longer than the liveness period, so an attempt is
/// in flight when an instance is judged.
const HOLD: Duration = Duration::from_secs(20);

/// What the destination saw of one attempt: when it came, and when it was answered or abandoned by its sender.
#[derive(Clone, Debug)]
struct Attempt {
    started: Instant,
    ended: Option<(Instant, Ended)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// The destination answered 200: delivered.
    Answered,
    /// The sender closed the connection before the answer (its handler was cancelled, or its process died).
    Abandoned,
}

/// A destination that holds every request [`HOLD`] before answering 200, and notes for each event (by its
/// `Idempotency-Key`) when each attempt started and how it ended, on the test's monotonic clock. Raw TCP, so that a
/// sender that gives up mid-request is seen the moment it closes its connection.
struct Destination {
    addr: std::net::SocketAddr,
    attempts: Arc<Mutex<BTreeMap<String, Vec<Attempt>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Destination {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let attempts: Arc<Mutex<BTreeMap<String, Vec<Attempt>>>> = Arc::default();
        let task = tokio::spawn({
            let attempts = attempts.clone();
            async move {
                while let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(serve_connection(stream, attempts.clone()));
                }
            }
        });
        Self { addr, attempts, task }
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    fn attempts(&self) -> BTreeMap<String, Vec<Attempt>> {
        self.attempts.lock().unwrap().clone()
    }

    fn started(&self) -> usize {
        self.attempts().values().map(Vec::len).sum()
    }

    /// Each event's attempts, one line each, relative to `t0`: what a failing assertion shows.
    fn log(&self, t0: Instant) -> String {
        let at = |t: Instant| format!("{:>6.1}s", t.saturating_duration_since(t0).as_secs_f64());
        let mut out = String::new();
        for (event, attempts) in self.attempts() {
            for (n, a) in attempts.iter().enumerate() {
                let end = a.ended.map_or("still in flight".to_owned(), |(t, how)| {
                    format!("{how:?} at {}", at(t))
                });
                out.push_str(&format!(
                    "{event} attempt {}: START at {}, {end}\n",
                    n + 1,
                    at(a.started)
                ));
            }
        }
        out
    }

    /// No two attempts of one event in flight at once, and none after one was answered.
    fn assert_one_at_a_time_and_none_after_delivery(&self, t0: Instant) {
        for (event, attempts) in self.attempts() {
            for pair in attempts.windows(2) {
                let (first, next) = (&pair[0], &pair[1]);
                let Some((ended, how)) = first.ended else {
                    panic!(
                        "{event}: a second attempt started while the first was in flight\n{}",
                        self.log(t0)
                    );
                };
                assert!(
                    next.started >= ended,
                    "{event}: an attempt started before the one before it ended\n{}",
                    self.log(t0)
                );
                assert_eq!(
                    how,
                    Ended::Abandoned,
                    "{event}: sent again after it was delivered\n{}",
                    self.log(t0)
                );
            }
        }
    }
}

impl Drop for Destination {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves one connection's requests in turn: each noted at its start, held, answered (or found abandoned).
async fn serve_connection(mut stream: TcpStream, attempts: Arc<Mutex<BTreeMap<String, Vec<Attempt>>>>) {
    let mut buf = Vec::new();
    loop {
        // The head, then the body by its Content-Length.
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let header = |name: &str| {
            head.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}:")).map(|v| v.trim().to_owned()))
        };
        let length: usize = header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        while buf.len() < head_end + length {
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..head_end + length);
        let event = header("idempotency-key").unwrap_or_else(|| "(no idempotency key)".into());
        let index = {
            let mut attempts = attempts.lock().unwrap();
            let list = attempts.entry(event.clone()).or_default();
            list.push(Attempt {
                started: Instant::now(),
                ended: None,
            });
            list.len() - 1
        };
        let end = |how| {
            attempts.lock().unwrap().get_mut(&event).unwrap()[index].ended = Some((Instant::now(), how))
        };
        // Held; a sender that closes its side meanwhile has abandoned the attempt.
        let mut probe = [0u8; 1];
        tokio::select! {
            () = tokio::time::sleep(HOLD) => {}
            _ = stream.read(&mut probe) => {
                end(Ended::Abandoned);
                return;
            }
        }
        let answer = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: text/plain\r\n\r\nok";
        if stream.write_all(answer.as_bytes()).await.is_err() {
            end(Ended::Abandoned);
            return;
        }
        end(Ended::Answered);
    }
}

/// A TCP hop in front of the database for one instance: it forwards both ways until [`Hop::cut`], then forwards
/// nothing (the bytes wait in the sockets' buffers, new connections wait to be accepted) until [`Hop::heal`], as a
/// network partition does to a TCP connection.
struct Hop {
    addr: std::net::SocketAddr,
    cut: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Hop {
    async fn start(to: std::net::SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let cut = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let cut = cut.clone();
            async move {
                loop {
                    while cut.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    let Ok((client, _)) = listener.accept().await else {
                        return;
                    };
                    let cut = cut.clone();
                    tokio::spawn(async move {
                        let Ok(server) = TcpStream::connect(to).await else {
                            return;
                        };
                        let (cr, cw) = client.into_split();
                        let (sr, sw) = server.into_split();
                        tokio::join!(pipe(cr, sw, cut.clone()), pipe(sr, cw, cut));
                    });
                }
            }
        });
        Self { addr, cut, task }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Hop {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies `from` to `to`, reading nothing while the hop is cut.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    cut: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        while cut.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                while cut.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                if to.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// An instance on the database at `url` (a reference to `INBOX_DATABASE_URL`), forwarding [`SOURCE`] to `to`, and
/// `quick` to `quick`.
fn instance(url: &str, to: &str, quick: &str, secret: &str) -> App {
    let config = format!(
        "[store]\nkind = \"postgres\"\nurl = \"env:INBOX_DATABASE_URL\"\nliveness = \"{LIVENESS}\"\n\
         [retry]\nbase = \"200ms\"\ncap = \"1s\"\n[sweeper]\ngrace = \"2s\"\ninterval = \"2s\"\n\
         [sources.{SOURCE}]\nscheme = \"github\"\nsecrets = [\"env:SHARED_SECRET\"]\n\
         handler = {{ kind = \"forward\", url = \"{to}\", timeout = \"30s\" }}\n\
         [sources.quick]\nscheme = \"github\"\nsecrets = [\"env:SHARED_SECRET\"]\n\
         handler = {{ kind = \"forward\", url = \"{quick}\", timeout = \"5s\" }}\n"
    );
    spawn_app(&config, &[("SHARED_SECRET", secret), ("INBOX_DATABASE_URL", url)])
}

/// What every test here starts with: its clock's zero, the destination that times attempts, a quick sink for the
/// `quick` source, and the sources' secret.
struct Scene {
    t0: Instant,
    destination: Destination,
    quick: Sink,
    secret: String,
}

impl Scene {
    async fn start() -> Self {
        Self {
            t0: Instant::now(),
            destination: Destination::start().await,
            quick: Sink::start(&[], 200).await,
            secret: rand_secret(),
        }
    }

    /// An instance on the database at `url`.
    fn instance(&self, url: &str) -> App {
        instance(url, &self.destination.url(), &self.quick.url(), &self.secret)
    }

    /// No two attempts of one event in flight at once, none after a delivery, and each of `ids` delivered once.
    fn assert_each_delivered_once(&self, what: &str, ids: &[String]) {
        let (destination, t0) = (&self.destination, self.t0);
        println!("{what}: the destination saw\n{}", destination.log(t0));
        destination.assert_one_at_a_time_and_none_after_delivery(t0);
        for id in ids {
            let attempts = destination
                .attempts()
                .get(&format!("{SOURCE}:{id}"))
                .cloned()
                .unwrap_or_default();
            let delivered = attempts
                .iter()
                .filter(|a| matches!(a.ended, Some((_, Ended::Answered))))
                .count();
            assert_eq!(
                delivered,
                1,
                "{id} delivered {delivered} times\n{}",
                destination.log(t0)
            );
        }
    }
}

/// Sends one signed event of `source` to `app`; it must be accepted.
async fn send(app: &App, source: &str, id: &str, secret: &str) {
    let body = serde_json::json!({ "id": id }).to_string();
    let signer = Signer::new(Scheme::Github, secret);
    let answer = post(
        &client(),
        &app.webhook_url(source),
        body.clone(),
        &signer.headers(body.as_bytes(), id, Some("push")),
    )
    .await;
    assert_eq!(answer.json["status"], "accepted", "{}", answer.text);
}

/// The host and port of a `postgres://` URL.
fn server_of(url: &str) -> std::net::SocketAddr {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.split_once('@').map_or(rest, |(_, r)| r);
    let host = rest.split(['/', '?']).next().unwrap();
    host.parse().unwrap_or_else(|e| panic!("{host}: {e}"))
}

/// Waits until every one of `ids` is COMPLETED, as `app` reads the store.
fn all_completed(app: &App, ids: &[String], within: Duration) {
    wait_every(
        within,
        Duration::from_millis(500),
        "every event COMPLETED",
        &mut || ids.iter().all(|id| app.status_of(SOURCE, id) == "COMPLETED"),
    );
}

/// GIVEN two instances on one database whose retention purge is slow (a trigger on the events table makes each
/// delete take a second, so every purge statement runs until the statement timeout: 10 s, beyond the 6 s liveness
/// period), and two events at each instance whose destination holds every request 20 s
/// WHEN whichever instance leads the sweep is busy in that purge while its events are in flight
/// THEN no instance is judged gone: each event is attempted once and delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_busy_instance_is_not_judged_gone() {
    let Some(db) = Database::fresh().await else {
        return;
    };
    let scene = Scene::start().await;
    let apps = [scene.instance(&db.url()), scene.instance(&db.url())];
    // GIVEN completed events past retention, and a purge that cannot delete them within its statement timeout.
    for n in 0..30 {
        send(&apps[n % 2], "quick", &rand_id("old"), &scene.secret).await;
    }
    wait_every(
        Duration::from_secs(30),
        Duration::from_millis(200),
        "30 quick events COMPLETED",
        &mut || apps[0].status_counts().get("COMPLETED").copied().unwrap_or(0) >= 30,
    );
    db.sql(
        "CREATE FUNCTION slow_delete() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN PERFORM pg_sleep(1); RETURN OLD; END $$;
         CREATE TRIGGER slow_purge BEFORE DELETE ON events FOR EACH ROW EXECUTE FUNCTION slow_delete();
         UPDATE events SET expires_at = 1 WHERE status = 'COMPLETED';",
    )
    .await;
    // WHEN events are in flight at both instances while the sweep's leader is stuck in its purge.
    let ids: Vec<String> = (0..4).map(|_| rand_id("busy")).collect();
    for (n, id) in ids.iter().enumerate() {
        send(&apps[n % 2], SOURCE, id, &scene.secret).await;
    }
    wait_until(
        Duration::from_secs(10),
        "every event reaches the destination",
        || scene.destination.started() >= ids.len(),
    );
    all_completed(&apps[0], &ids, Duration::from_secs(120));
    // THEN the purge was stuck past the liveness period, and still every event ran once.
    assert!(
        apps.iter().any(|a| a.log().contains("purge failed")),
        "no purge outlasted its statement timeout: the scenario did not happen"
    );
    scene.assert_each_delivered_once("a busy instance", &ids);
    assert_eq!(scene.destination.started(), ids.len(), "attempted more than once");
    for app in &apps {
        assert!(
            !app.log().contains("their leases ended"),
            "a live instance was judged gone:\n{}",
            app.log()
        );
    }
    db.drop().await;
}

/// GIVEN two instances on one database, one of them reaching it through a TCP hop, and an event running at that
/// one whose destination holds every request 20 s
/// WHEN the hop is cut for 15 s (a partition: the other instance still reaches the database)
/// THEN the cut-off instance stops its handler before the other may judge it gone; the other runs the event again
/// only after the first attempt was abandoned, and the event is delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_instance_cut_off_from_the_database_stops_its_handlers_before_another_runs_them() {
    let Some(db) = Database::fresh().await else {
        return;
    };
    let scene = Scene::start().await;
    let server = server_of(&db.url());
    let hop = Hop::start(server).await;
    let cut_off = scene.instance(&db.url().replacen(&server.to_string(), &hop.addr.to_string(), 1));
    let other = scene.instance(&db.url());
    let id = rand_id("cut");
    send(&cut_off, SOURCE, &id, &scene.secret).await;
    wait_until(
        Duration::from_secs(10),
        "the first attempt reaches the destination",
        || scene.destination.started() >= 1,
    );
    hop.cut();
    tokio::time::sleep(Duration::from_secs(15)).await;
    hop.heal();
    all_completed(&other, std::slice::from_ref(&id), Duration::from_secs(90));
    scene.assert_each_delivered_once("an instance cut off", std::slice::from_ref(&id));
    assert!(
        cut_off.log().contains("could not renew its heartbeat"),
        "the cut-off instance did not fence itself:\n{}",
        cut_off.log()
    );
    drop(other);
    drop(cut_off);
    db.drop().await;
}

/// GIVEN two instances on a database of the test's own, an event running at each, whose destination holds every
/// request 20 s
/// WHEN the database is stopped (`pg_ctl stop -m fast`) for 12 s, twice the liveness period, and started again
/// THEN no instance ends the other's leases while it still runs them: every event's attempts follow one another,
/// and each is delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_outage_ends_no_live_instances_leases() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let scene = Scene::start().await;
    let apps = [scene.instance(&cluster.url()), scene.instance(&cluster.url())];
    let ids: Vec<String> = (0..2).map(|_| rand_id("outage")).collect();
    for (app, id) in apps.iter().zip(&ids) {
        send(app, SOURCE, id, &scene.secret).await;
    }
    wait_until(
        Duration::from_secs(10),
        "both first attempts reach the destination",
        || scene.destination.started() >= 2,
    );
    cluster.pg_ctl(&["stop", "-m", "fast", "-w"]);
    tokio::time::sleep(Duration::from_secs(12)).await;
    cluster.pg_ctl(&["start", "-w"]);
    all_completed(&apps[0], &ids, Duration::from_secs(120));
    scene.assert_each_delivered_once("a database outage", &ids);
}
