//! The stores this release writes, kept as fixtures (`tests/data/fixtures/`), and the test that starts `inbox serve`
//! on each: a store written by the previous release must open, every open event in it must finish, and every
//! completed one must still answer as a duplicate (docs/DESIGN.md, "Routing", "Compatibility"). Today the fixture's
//! schema is this binary's, so the test passes without a migration; it is the migration test of the next schema.
//!
//! [`write_the_release_fixtures`] (ignored; run by hand, tests/data/fixtures/README.md) writes them with this code: the
//! real receiver over real HTTP with signed deliveries, the real state machine with the `forward` handler and the
//! notify-URL alarm, and the real SQLite and PostgreSQL stores, all on one manual clock, so every time in them is
//! chosen. It then dumps each store as SQL text (SQLite by [`sqlite_dump`], PostgreSQL by `pg_dump`) and writes
//! `scene.json`: what each event is and was, which is all the test reads besides the dumps.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use inbox_core::clock::{Clock, ManualClock, SeededRandom, World};
use inbox_core::config::Config;
use inbox_core::delivery_health::{DeliveryHealth, LogAlarm, Thresholds};
use inbox_core::handlers::{http_client, Registry};
use inbox_core::intake::{Intake, Order};
use inbox_core::machine::{Machine, Outcome};
use inbox_core::metrics::Metrics;
use inbox_core::model::{EventId, EventKey, NewEvent, Origin, Record, SourceName, Status};
use inbox_core::ports::{
    Checkpoint, Claim, FailedEvent, LedgerIsTheQueue, Replay, RunRecord, Settled, Settlement, Store,
};
use inbox_core::receiver::{router, InflightBytes, Receiver};
use inbox_core::rules::DUE_SLACK_MS;
use inbox_core::schemes::Scheme;
use inbox_core::secrets::LocalSecrets;
use inbox_core::serve::NotifyUrl;
use inbox_core::source::Sources;
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{json, Value};

use crate::common::*;
use crate::postgres::Database;

/// The fixtures of the stores as this release leaves them: SQLite schema v9, PostgreSQL schema v2.
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/fixtures/v9");
/// The PostgreSQL schema the fixture's objects are dumped from (and named in, in the dump).
const DUMPED_SCHEMA: &str = "inbox_fixture";

const SECOND: i64 = 1_000;
const MINUTE: i64 = 60 * SECOND;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;
/// The generator's "now": the moment the fixture's stores stand at (2026-12-07T12:00:00Z). The test moves every time
/// in them by its own now less this ([`shift`]).
const WRITTEN_AT: i64 = 1_796_644_800_000;

/// The three sources of the scene and their schemes: a body-signing provider (GitHub: resent bodies are marked), one
/// that signs its id with the body and a timestamp (Stripe), and one that signs a nonce of its own (Mailgun).
const SOURCES: [&str; 3] = ["github", "stripe", "mailgun"];

fn scheme(source: &str) -> Scheme {
    match source {
        "github" => Scheme::Github,
        "stripe" => Scheme::Stripe,
        _ => Scheme::named("mailgun").expect("the mailgun provider"),
    }
}

/// The environment variable the test hands `source`'s secret in.
fn secret_var(source: &str) -> String {
    format!("FIXTURE_{}_SECRET", source.to_uppercase())
}

/// A delivery of `source` as its provider sends it at `unix`: the body and the headers. `body` is the event as the
/// provider serialises it; Mailgun's signature goes into the body (its `event-data` is `body`).
fn signed(
    source: &str,
    secret: &str,
    event_id: &str,
    event_type: Option<&str>,
    body: &str,
    unix: i64,
) -> (Vec<u8>, Vec<(HeaderName, HeaderValue)>) {
    use inbox_core::schemes::{Credentials, Identity, Request, Signer as SchemeSigner};
    let scheme = scheme(source);
    if source != "mailgun" {
        let headers = Signer::new(scheme, secret).headers_at(body.as_bytes(), event_id, event_type, unix);
        return (body.as_bytes().to_vec(), headers);
    }
    let key = scheme.key_from_secret(secret).expect("a usable secret");
    let (uri, headers) = (http::Uri::from_static("/"), http::HeaderMap::new());
    let identity = Identity {
        event_id: String::new(),
        event_type: None,
    };
    let signed = scheme
        .sign_request(
            &SchemeSigner::Secret(key),
            &Credentials::default(),
            &Request::post(&uri, &headers, body.as_bytes()),
            &identity,
            unix,
        )
        .expect("signed");
    (signed.body.expect("Mailgun signs inside the body"), Vec::new())
}

// ---------------------------------------------------------------------------------------------------------
// The scene: what the fixture holds, as `scene.json` says it.

/// One event of the fixture, as the generator left it.
struct Stored {
    source: String,
    event_id: String,
    event_type: Option<String>,
    /// What the provider sent (Mailgun: the `event-data`, which a fresh signature wraps).
    body: String,
    status: Status,
    attempts: u64,
    replays: u64,
    payload_sha256: String,
    resent_of: Option<String>,
    origin: String,
    next_attempt_at: Option<i64>,
    /// A dead event whose alarm has gone out.
    notified: bool,
}

impl Stored {
    fn key(&self) -> (String, String) {
        (self.source.clone(), self.event_id.clone())
    }
    fn is_open(&self) -> bool {
        self.status.is_open()
    }
}

/// `scene.json`, read.
struct Scene {
    written_at: i64,
    secrets: BTreeMap<String, String>,
    events: Vec<Stored>,
    /// A Mailgun delivery's signed nonce, and the event that holds it.
    nonce: (String, String),
    checkpoints: BTreeMap<String, Value>,
}

impl Scene {
    fn read() -> Scene {
        let path = Path::new(FIXTURES).join("scene.json");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let v: Value = serde_json::from_str(&text).expect("scene.json is JSON");
        let s = |v: &Value, f: &str| v[f].as_str().map(str::to_owned);
        let events = v["events"]
            .as_array()
            .expect("scene.json: events")
            .iter()
            .map(|e| Stored {
                source: s(e, "source").expect("source"),
                event_id: s(e, "event_id").expect("event_id"),
                event_type: s(e, "event_type"),
                body: s(e, "body").expect("body"),
                status: s(e, "status").expect("status").parse().expect("a status"),
                attempts: e["attempts"].as_u64().expect("attempts"),
                replays: e["replays"].as_u64().expect("replays"),
                payload_sha256: s(e, "payload_sha256").expect("payload_sha256"),
                resent_of: s(e, "resent_of"),
                origin: s(e, "origin").expect("origin"),
                next_attempt_at: e["next_attempt_at"].as_i64(),
                notified: e["notified_at"].as_i64().is_some(),
            })
            .collect();
        let map = |f: &str| -> BTreeMap<String, Value> {
            v[f].as_object()
                .unwrap_or_else(|| panic!("scene.json: {f}"))
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        Scene {
            written_at: v["written_at"].as_i64().expect("written_at"),
            secrets: map("secrets")
                .into_iter()
                .map(|(k, v)| (k, v.as_str().expect("a secret").to_owned()))
                .collect(),
            events,
            nonce: (
                s(&v["nonce"], "token").expect("nonce.token"),
                s(&v["nonce"], "event_id").expect("nonce.event_id"),
            ),
            checkpoints: map("checkpoints"),
        }
    }

    fn secret(&self, source: &str) -> &str {
        self.secrets.get(source).map_or("", String::as_str)
    }

    /// The servers' environment: each source's secret.
    fn env(&self) -> Vec<(String, String)> {
        SOURCES
            .iter()
            .map(|s| (secret_var(s), self.secret(s).to_owned()))
            .collect()
    }

    /// What the test relies on the fixture to hold; a fixture written again must still hold it all, or the test
    /// would check less than it says.
    fn assert_covers_every_state(&self) {
        let has = |what: &str, f: &dyn Fn(&Stored) -> bool| {
            assert!(self.events.iter().any(f), "the fixture holds no {what}");
        };
        has("RECEIVED event", &|e| e.status == Status::Received);
        has("PROCESSING event", &|e| e.status == Status::Processing);
        has("FAILED event due before it was written", &|e| {
            e.status == Status::Failed && e.next_attempt_at.is_some_and(|t| t <= self.written_at)
        });
        has("FAILED event due after it was written", &|e| {
            e.status == Status::Failed && e.next_attempt_at.is_some_and(|t| t > self.written_at)
        });
        has("DEAD event with its alarm sent", &|e| {
            e.status == Status::Dead && e.notified
        });
        has("DEAD event with its alarm owed", &|e| {
            e.status == Status::Dead && !e.notified
        });
        has("COMPLETED event", &|e| e.status == Status::Completed);
        has("replayed event", &|e| e.replays > 0 && e.is_open());
        has("resent body", &|e| e.resent_of.is_some());
        has("reconciled event", &|e| e.origin == "reconciled");
        let sources: BTreeSet<&str> = self.events.iter().map(|e| e.source.as_str()).collect();
        assert!(sources.len() >= 2, "the fixture holds one source only");
        assert!(!self.checkpoints.is_empty(), "the fixture holds no checkpoint");
    }
}

/// Moves every time the fixture's store holds by `delta` ms, as if it had been written `delta` later: what was due
/// is due, what was within retention (30 days) or the retry budget (24 h since received or replayed) still is, and
/// a lease or a heartbeat that had run out still has (an absolute time would serve only a while: completed events
/// would fall out of retention, and failed ones out of their budget, a month after the fixture was written). One
/// `UPDATE` per table that holds times the store reads: every time column of `events` (UTC ms), the remembered
/// bodies' expiry, and on PostgreSQL (`pg`) the heartbeats' and roles' ends; `prefix` qualifies the tables
/// (`schema.`). Left as written: reconciliation's checkpoints, whose times are inside JSON (no source of the test
/// reconciles, and the test finds them as written), and what only the database's clock wrote and nothing reads
/// (`owners.started_at`, `schema_versions.applied_at`).
fn shift(prefix: &str, delta: i64, pg: bool) -> String {
    let columns = [
        "received_at",
        "updated_at",
        "lease_until",
        "next_attempt_at",
        "completed_at",
        "expires_at",
        "notified_at",
        "replayed_at",
        "due_at",
    ]
    .map(|c| format!("{c} = {c} + {delta}"))
    .join(", ");
    let mut sql = format!(
        "UPDATE {prefix}events SET {columns};\nUPDATE {prefix}bodies SET expires_at = expires_at + {delta};\n"
    );
    if pg {
        let by = format!("{delta} * interval '1 millisecond'");
        sql.push_str(&format!(
            "UPDATE {prefix}owners SET alive_until = alive_until + {by};\n\
             UPDATE {prefix}leaders SET until = until + {by};\n"
        ));
    }
    sql
}

// ---------------------------------------------------------------------------------------------------------
// The test: the current binary on each fixture.

/// The test's configuration: the fixture's sources forwarding to `sink`, dead events' alarms to `sink`'s `/alarm`,
/// quick sweeps (a replay by another process is found within seconds); `store` names the store (empty: SQLite).
fn config(sink: &Sink, store: &str) -> String {
    let mut config = format!(
        "{store}[alarm]\nnotify_url = \"{0}/alarm\"\n[retry]\nbase = \"200ms\"\n[sweeper]\ngrace = \"2s\"\ninterval = \"2s\"\n",
        sink.url()
    );
    for source in SOURCES {
        config.push_str(&format!(
            "[sources.{source}]\nscheme = \"{}\"\nsecrets = [\"env:{}\"]\n\
             handler = {{ kind = \"forward\", url = \"{}/{source}\", timeout = \"5s\" }}\n",
            scheme(source).name(),
            secret_var(source),
            sink.url()
        ));
    }
    config
}

fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis()),
    )
    .unwrap_or(i64::MAX)
}

fn dump(name: &str) -> String {
    let path = Path::new(FIXTURES).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// GIVEN the SQLite store this release wrote (tests/data/fixtures/v9/sqlite.sql: every state an event can be in,
/// three sources, a resent body, a Mailgun nonce, a checkpoint), loaded into a fresh data directory with its times
/// moved to now
/// WHEN `inbox serve` starts on it
/// THEN see [`the_binary_finishes_the_fixture`]. About 50 s: the FAILED event due 20 s after the fixture's moment
/// is looked for by the sweeper after that release's grace (30 s) on top, as after any restart.
#[tokio::test(flavor = "multi_thread")]
async fn inbox_serve_finishes_every_open_event_of_a_sqlite_store_the_release_wrote() {
    let scene = Scene::read();
    scene.assert_covers_every_state();
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let loaded_at = now_ms();
    {
        let conn = rusqlite::Connection::open(data.join("inbox.db")).expect("a new database file");
        conn.execute_batch(&dump("sqlite.sql"))
            .expect("the SQLite fixture loads");
        conn.execute_batch(&shift("", loaded_at - scene.written_at, false))
            .expect("the fixture's times move to now");
    }
    let sink = Sink::start(&[], 200).await;
    let env = scene.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut app = spawn_app_in(&config(&sink, ""), &env, Some(&data));
    let store = inbox_core::stores::sqlite::SqliteLedger::open(&data, 64, Duration::from_secs(2))
        .expect("the store opens beside the server, as the operator commands do");
    the_binary_finishes_the_fixture(&scene, &app, &sink, loaded_at, &store).await;
    app.terminate();
}

/// GIVEN the PostgreSQL store this release wrote (tests/data/fixtures/v9/postgres.sql, the same scene as the SQLite
/// one), loaded into a schema of the test's own with its times moved to now
/// WHEN one `inbox serve` starts on it
/// THEN see [`the_binary_finishes_the_fixture`]. As long as on SQLite; the lease of the process that is gone ends
/// once this one has beaten its heartbeat for a liveness period (30 s), as after any restart.
#[tokio::test(flavor = "multi_thread")]
async fn inbox_serve_finishes_every_open_event_of_a_postgres_store_the_release_wrote() {
    let Some(db) = Database::fresh().await else {
        return;
    };
    let scene = Scene::read();
    scene.assert_covers_every_state();
    let schema = db.schema().to_owned();
    let loaded_at = now_ms();
    // One transaction: the test's empty schema gives way to the dumped one, renamed to it, and the times move.
    db.batch(&format!(
        "BEGIN;\nDROP SCHEMA {schema};\n{}\nALTER SCHEMA {DUMPED_SCHEMA} RENAME TO {schema};\n{}COMMIT;\n",
        dump("postgres.sql"),
        shift(&format!("{schema}."), loaded_at - scene.written_at, true)
    ))
    .await;
    let sink = Sink::start(&[], 200).await;
    let url = db.url();
    let mut env = scene.env();
    env.push(("INBOX_DATABASE_URL".to_owned(), url.clone()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let store_config = "[store]\nkind = \"postgres\"\nurl = \"env:INBOX_DATABASE_URL\"\n";
    let mut app = spawn_app(&config(&sink, store_config), &env);
    let store = inbox_core::stores::postgres::PostgresStore::open(
        inbox_core::stores::postgres::Options::new(url, Duration::from_secs(2)),
    )
    .await
    .expect("the store opens beside the server");
    the_binary_finishes_the_fixture(&scene, &app, &sink, loaded_at, &store).await;
    app.terminate();
    db.drop().await;
}

/// What a store the release wrote must give the binary under test (`app`, forwarding to `sink`; `store` the same
/// store opened beside it), the fixture's times moved by `loaded_at` less the time it was written:
/// - every event of the fixture is there, and no other;
/// - every COMPLETED and DEAD one sent again, signed now, is answered 200 duplicate in its state and runs nothing; a
///   Mailgun delivery under the nonce a completed event holds is answered as that event's duplicate;
/// - every RECEIVED, FAILED and PROCESSING one (whose lease ran out, or whose owner is gone) runs to COMPLETED,
///   forwarded exactly once with its body and `Idempotency-Key: {source}:{event_id}`, no sooner than its due time,
///   its attempts and replays counted on from the fixture's;
/// - DEAD ones stay DEAD; the alarm still owed goes out once, none goes out again; `inbox replay` of one runs it once;
/// - a resent body still shows the event it repeats, a reconciled event its origin, and the checkpoints are there.
async fn the_binary_finishes_the_fixture(
    scene: &Scene,
    app: &App,
    sink: &Sink,
    loaded_at: i64,
    store: &dyn Store,
) {
    let delta = loaded_at - scene.written_at;
    let started = std::time::Instant::now();
    let expected: BTreeSet<(String, String)> = scene.events.iter().map(Stored::key).collect();
    let found: BTreeSet<(String, String)> = app.event_keys().into_iter().collect();
    let lost: Vec<_> = expected.difference(&found).collect();
    let extra: Vec<_> = found.difference(&expected).collect();
    assert!(
        lost.is_empty() && extra.is_empty(),
        "the store the binary opened is not the fixture's: events lost {lost:?}, events not in the fixture {extra:?}"
    );

    // Sent again now, each finished event is a duplicate in its state.
    let client = client();
    for e in scene.events.iter().filter(|e| !e.is_open()) {
        let (body, headers) = signed(
            &e.source,
            scene.secret(&e.source),
            &e.event_id,
            e.event_type.as_deref(),
            &e.body,
            now_unix(),
        );
        let answer = post(&client, &app.webhook_url(&e.source), body, &headers).await;
        assert_eq!(
            (
                answer.status,
                &answer.json["status"],
                &answer.json["event_id"],
                &answer.json["state"]
            ),
            (200, &json!("duplicate"), &json!(e.event_id), &json!(e.status)),
            "{}/{} sent again: {}",
            e.source,
            e.event_id,
            answer.text
        );
    }
    // A Mailgun delivery that brings the nonce a stored event holds is that event's duplicate, whatever it carries.
    let (token, holder) = &scene.nonce;
    let forged = mailgun_with_token(scene.secret("mailgun"), token, &rand_id("forged"));
    let answer = post(&client, &app.webhook_url("mailgun"), forged, &[]).await;
    assert_eq!(
        (answer.status, &answer.json["status"], &answer.json["event_id"]),
        (200, &json!("duplicate"), &json!(holder)),
        "a second event under a stored Mailgun nonce: {}",
        answer.text
    );

    let open: Vec<&Stored> = scene.events.iter().filter(|e| e.is_open()).collect();
    let status_of = |events: &[Value], e: &Stored| {
        events
            .iter()
            .find(|v| str_field(v, "source") == e.source && str_field(v, "event_id") == e.event_id)
            .map(|v| str_field(v, "status"))
            .unwrap_or_default()
    };
    // Polled here rather than with `wait_until`, so that a time-out names the events and where they stand.
    let until = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let events = app.events();
        let unfinished: Vec<String> = open
            .iter()
            .map(|e| (e, status_of(&events, e)))
            .filter(|(_, status)| status != "COMPLETED")
            .map(|(e, status)| {
                format!(
                    "{}/{} ({} in the fixture) is {status}",
                    e.source, e.event_id, e.status
                )
            })
            .collect();
        if unfinished.is_empty() {
            break;
        }
        // DEAD is for good (short of a replay): no use waiting.
        assert!(
            std::time::Instant::now() < until && !unfinished.iter().any(|u| u.ends_with("is DEAD")),
            "open events of the fixture not COMPLETED: {unfinished:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let finished = started.elapsed();
    let owed: Vec<&Stored> = scene
        .events
        .iter()
        .filter(|e| e.status == Status::Dead && !e.notified)
        .collect();
    let alarms = || -> BTreeMap<String, usize> {
        let mut n = BTreeMap::new();
        // Dead events' alarms only: a delivery-health alarm (the forged Mailgun delivery's payload mismatch) goes
        // to the same URL.
        for r in sink.requests().iter().filter(|r| r.path == "/alarm") {
            let alarm = r.json();
            if alarm["alarm"] == "event_dead" {
                *n.entry(str_field(&alarm, "event_id")).or_insert(0) += 1;
            }
        }
        n
    };
    wait_until(Duration::from_secs(30), "the alarms still owed went out", || {
        owed.iter().all(|e| alarms().contains_key(&e.event_id))
    });
    // Anything run twice, or run that must not be, shows by now.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let forwarded = |sink: &Sink| -> BTreeMap<(String, String), Vec<Recorded>> {
        let mut by = BTreeMap::<_, Vec<Recorded>>::new();
        for r in sink.requests().into_iter().filter(|r| r.path != "/alarm") {
            let key = (
                r.header("x-inbox-source").unwrap_or_default(),
                r.header("x-inbox-event-id").unwrap_or_default(),
            );
            by.entry(key).or_default().push(r);
        }
        by
    };
    let by_event = forwarded(sink);
    let ran: BTreeSet<(String, String)> = by_event.keys().cloned().collect();
    let should: BTreeSet<(String, String)> = open.iter().map(|e| e.key()).collect();
    assert_eq!(ran, should, "what ran is exactly the fixture's open events");
    let events = app.events();
    for e in &open {
        let got = &by_event[&e.key()];
        assert_eq!(
            got.len(),
            1,
            "{}/{} forwarded {} times",
            e.source,
            e.event_id,
            got.len()
        );
        let r = &got[0];
        assert_eq!(
            r.header("idempotency-key"),
            Some(format!("{}:{}", e.source, e.event_id)),
            "the idempotency key of {}/{}",
            e.source,
            e.event_id
        );
        assert_eq!(r.path, format!("/{}", e.source));
        assert_eq!(
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&r.body)),
            e.payload_sha256,
            "{}/{} forwarded another body than it was received with",
            e.source,
            e.event_id
        );
        // Due later than the fixture's moment: not run before its time came (as moved), less a claim's slack.
        if let Some(due) = e.next_attempt_at.filter(|t| *t > scene.written_at) {
            let due = due + delta;
            let at = i64::try_from(r.at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis())).unwrap_or(0);
            assert!(
                at >= due - DUE_SLACK_MS,
                "{}/{} ran {} ms before it was due",
                e.source,
                e.event_id,
                due - at
            );
        }
        let now = events
            .iter()
            .find(|v| str_field(v, "source") == e.source && str_field(v, "event_id") == e.event_id)
            .expect("listed");
        assert_eq!(
            (now["attempts"].as_u64(), now["replays"].as_u64()),
            (Some(e.attempts + 1), Some(e.replays)),
            "{}/{}: its attempts count on from the fixture's, its replays are kept: {now}",
            e.source,
            e.event_id
        );
    }
    for e in scene.events.iter().filter(|e| !e.is_open()) {
        assert_eq!(
            status_of(&events, e),
            e.status.as_str(),
            "{}/{} is still {}",
            e.source,
            e.event_id,
            e.status
        );
    }
    let sent = alarms();
    let want: BTreeMap<String, usize> = owed.iter().map(|e| (e.event_id.clone(), 1)).collect();
    assert_eq!(
        sent, want,
        "one alarm for each dead event that still owed one, none for the others"
    );

    for e in &scene.events {
        let shown = app.event(&e.source, &e.event_id).expect("shown");
        assert_eq!(
            (shown["resent_of"].as_str(), shown["origin"].as_str()),
            (e.resent_of.as_deref(), Some(e.origin.as_str())),
            "{}/{}: the event it repeats, and its origin",
            e.source,
            e.event_id
        );
    }

    // An operator replays one dead event: it runs once.
    let dead = scene
        .events
        .iter()
        .find(|e| e.status == Status::Dead)
        .expect("a dead event");
    let replayed = std::time::Instant::now();
    let out = app.inbox(&["replay", "--source", &dead.source, "--event-id", &dead.event_id]);
    assert!(
        out.status.success(),
        "inbox replay failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_until(Duration::from_secs(30), "the replayed event is COMPLETED", || {
        status_of(&app.events(), dead) == "COMPLETED"
    });
    let replay_took = replayed.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let by_event = forwarded(sink);
    assert_eq!(
        by_event.get(&dead.key()).map(Vec::len),
        Some(1),
        "the replayed {}/{} ran once",
        dead.source,
        dead.event_id
    );
    assert_eq!(by_event.len(), open.len() + 1, "the replay ran nothing else");
    let events = app.events();
    assert_eq!(
        events.len(),
        scene.events.len(),
        "nothing was stored besides the fixture"
    );
    for e in scene
        .events
        .iter()
        .filter(|e| e.status == Status::Dead && e.key() != dead.key())
    {
        assert_eq!(
            status_of(&events, e),
            "DEAD",
            "{}/{} is still DEAD",
            e.source,
            e.event_id
        );
    }

    eprintln!(
        "the fixture's {} open events COMPLETED {finished:?} after the server started; the replayed one {:?} after `inbox replay` started",
        open.len(),
        replay_took
    );
    for (source, want) in &scene.checkpoints {
        let found = store
            .checkpoint(&SourceName::parse(source).expect("a source name"))
            .await
            .expect("the checkpoint reads");
        assert_eq!(
            found.map(|c| serde_json::to_value(c).expect("a checkpoint is JSON")),
            Some(want.clone()),
            "the checkpoint of {source}"
        );
    }
}

/// A Mailgun delivery of a fresh `event_id` under `token`, signed now with `secret`: what a captured signature's
/// token brings beside another event (here signed afresh, so that it is within the tolerance whenever it runs).
fn mailgun_with_token(secret: &str, token: &str, event_id: &str) -> Vec<u8> {
    let timestamp = now_unix().to_string();
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, secret.as_bytes());
    let signature = hex::encode(aws_lc_rs::hmac::sign(
        &key,
        format!("{timestamp}{token}").as_bytes(),
    ));
    json!({
        "event-data": {"id": event_id, "timestamp": now_unix(), "event": "unsubscribed"},
        "signature": {"timestamp": timestamp, "token": token, "signature": signature},
    })
    .to_string()
    .into_bytes()
}

// ---------------------------------------------------------------------------------------------------------
// The generator.

/// The current code over one store, on one manual clock: the receiver on a real port, the machine with `forward`
/// handlers to `downstream` and its alarms to `alarms`.
struct Writer {
    clock: Arc<ManualClock>,
    store: Arc<dyn Store>,
    machine: Machine,
    downstream: Sink,
    alarms: Sink,
    secrets: BTreeMap<String, String>,
    receiver: String,
    server: tokio::task::JoinHandle<()>,
    http: reqwest::Client,
    /// Every event written, in order, with the body its provider sent.
    written: Vec<(EventKey, String)>,
}

/// The name of an `inbox serve` process in its leases, as it makes it: pid, start time, a random part.
fn owner(pid: u32, started: i64, tag: u32) -> String {
    format!("serve:{pid}:{started}:{tag:08x}")
}

impl Writer {
    async fn new(
        store: Arc<dyn Store>,
        clock: Arc<ManualClock>,
        secrets: &BTreeMap<String, String>,
    ) -> Writer {
        let world = World {
            clock: clock.clone(),
            random: SeededRandom::new(9),
        };
        let downstream = Sink::start(&[], 200).await;
        let alarms = Sink::start(&[], 200).await;
        let dir = tempfile::tempdir().expect("temp dir");
        let mut toml =
            "retention_days = 30\n[retry]\nbase = \"5m\"\ncap = \"1h\"\n[sweeper]\ngrace = \"30s\"\n"
                .to_owned();
        for source in SOURCES {
            let file = dir.path().join(source);
            std::fs::write(&file, &secrets[source]).expect("write a secret");
            toml.push_str(&format!(
                "[sources.{source}]\nscheme = \"{}\"\nsecrets = [\"file:{}\"]\n\
                 handler = {{ kind = \"forward\", url = \"{}/{source}\", timeout = \"5s\" }}\n",
                scheme(source).name(),
                file.display(),
                downstream.url()
            ));
        }
        let config = Config::from_toml(&toml).expect("the generator's config");
        let sources = Sources::build(&config, Some(&LocalSecrets), &Registry::new(http_client()))
            .await
            .expect("the sources");
        let metrics = Arc::new(Metrics::new(sources.names()));
        let notify = reqwest::Url::parse(&format!("{}/alarm", alarms.url())).expect("a URL");
        let machine = Machine::new(
            store.clone(),
            store.clone(),
            sources.clone(),
            metrics.clone(),
            Arc::new(NotifyUrl::new(http_client(), Some(notify))),
            config.retention,
            owner(4242, WRITTEN_AT - 4 * DAY, 0x1f2e_3d4c),
        )
        .with_world(world.clone());
        let health = Arc::new(DeliveryHealth::new(
            sources.names(),
            Thresholds::default(),
            Arc::new(LogAlarm),
            world.clone(),
        ));
        let receiver = Arc::new(Receiver {
            sources,
            intake: Intake {
                ledger: store.clone(),
                // Every event stays in the store's own index, as after a process that ended before its queue delivered them.
                queue: Arc::new(LedgerIsTheQueue),
                metrics: metrics.clone(),
                health: health.clone(),
                resend_grace: config.sweeper.grace,
                order: Order::WriteThenEnqueue,
                runner: None,
                world: world.clone(),
            },
            metrics,
            read_timeout: Duration::from_secs(30),
            inflight: InflightBytes::new(1 << 24),
            health,
            rejections: Default::default(),
            keys: inbox_core::keys::from_env(world.clock.clone()).expect("a key source"),
            world,
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the receiver");
        let addr = listener.local_addr().expect("its address");
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router(receiver, false)).await;
        });
        Writer {
            clock,
            store,
            machine,
            downstream,
            alarms,
            secrets: secrets.clone(),
            receiver: format!("http://{addr}"),
            server,
            http: client(),
            written: Vec::new(),
        }
    }

    /// The clock stands at `t` (ms) from here on.
    fn at(&self, t: i64) {
        self.clock.set(t);
    }

    /// A delivery of `source` signed and sent now, answered 200 accepted; its key.
    async fn receive(&mut self, source: &str, event_id: &str, event_type: &str, body: Value) -> EventKey {
        let body = body.to_string();
        let (sent, headers) = signed(
            source,
            &self.secrets[source],
            event_id,
            Some(event_type),
            &body,
            self.clock.now_ms() / 1000,
        );
        let answer = post(
            &self.http,
            &format!("{}/webhooks/{source}", self.receiver),
            sent,
            &headers,
        )
        .await;
        assert_eq!(answer.status, 200, "{source}/{event_id}: {}", answer.text);
        assert_eq!(
            answer.json["status"], "accepted",
            "{source}/{event_id}: {}",
            answer.text
        );
        let key = EventKey::new(
            SourceName::parse(source).expect("a source"),
            EventId::parse(answer.json["event_id"].as_str().expect("an id")).expect("an id"),
        );
        self.written.push((key.clone(), body));
        key
    }

    /// An event that reconciliation found missing and stored, as `Reconciler::run` creates one.
    async fn reconciled(&mut self, source: &str, event_id: &str, event_type: &str, body: Value) -> EventKey {
        use sha2::Digest;
        let body = body.to_string();
        let key = EventKey::new(
            SourceName::parse(source).expect("a source"),
            EventId::parse(event_id).expect("an id"),
        );
        let created = self
            .store
            .create(NewEvent {
                key: key.clone(),
                event_type: Some(event_type.to_owned()),
                payload_sha256: hex::encode(sha2::Sha256::digest(body.as_bytes())),
                payload: bytes::Bytes::from(body.clone()),
                headers: Vec::new(),
                origin: Origin::Reconciled,
                resent_bodies: Default::default(),
            })
            .await
            .expect("the create");
        assert_eq!(created, inbox_core::ports::Created::New);
        self.written.push((key.clone(), body));
        key
    }

    /// The machine runs `key` now, the destination answering `status` and the alarm URL `alarm`.
    async fn process(&self, key: &EventKey, status: u16, alarm: u16) -> Outcome {
        self.downstream.answer(status);
        self.alarms.answer(alarm);
        self.machine
            .process(key, Duration::from_secs(30))
            .await
            .expect("the machine runs it")
    }

    /// `owner`'s process claims `key` now for `lease` and is gone before it settles (its heartbeat beaten now, where
    /// the store keeps heartbeats: it runs out after the store's liveness).
    async fn claimed_by_a_gone_owner(&self, key: &EventKey, owner: &str, lease: Duration) {
        self.store.heartbeat(owner).await.expect("a heartbeat");
        let claim = self
            .store
            .claim(key, &format!("{owner}:00000000a11ce5ed"), lease)
            .await
            .expect("the claim");
        assert!(matches!(claim, Claim::Claimed(_)), "{key}: {claim:?}");
    }

    async fn stop(self) -> Vec<(EventKey, String)> {
        self.server.abort();
        let _ = self.server.await;
        self.written
    }
}

/// The scene, written into `store` on `clock`: a few days of three sources up to [`WRITTEN_AT`], leaving an event in
/// every state the store can hold. Answers each event written with the body its provider sent, the Mailgun nonce
/// and its holder, and the checkpoints saved.
async fn write_scene(
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
    secrets: &BTreeMap<String, String>,
) -> (Vec<(EventKey, String)>, Value) {
    let mut w = Writer::new(store.clone(), clock, secrets).await;
    let t = WRITTEN_AT;
    let stripe = |id: &str, kind: &str, at: i64, object: Value| {
        json!({"id": id, "object": "event", "type": kind, "created": at / 1000, "livemode": false,
               "data": {"object": object}})
    };

    // Three days before: a Stripe charge delivered and completed; a refund reconciliation found missing, completed.
    w.at(t - 3 * DAY);
    let completed = w
        .receive(
            "stripe",
            "evt_1QfixtureCompleted",
            "charge.succeeded",
            stripe(
                "evt_1QfixtureCompleted",
                "charge.succeeded",
                t - 3 * DAY,
                json!({"id": "ch_1", "amount": 1200}),
            ),
        )
        .await;
    w.at(t - 3 * DAY + 2 * SECOND);
    assert_eq!(w.process(&completed, 200, 200).await, Outcome::Completed);
    w.at(t - 3 * DAY + MINUTE);
    let reconciled = w
        .reconciled(
            "stripe",
            "evt_1QfixtureReconciled",
            "charge.refunded",
            stripe(
                "evt_1QfixtureReconciled",
                "charge.refunded",
                t - 3 * DAY,
                json!({"id": "ch_1", "refunded": true}),
            ),
        )
        .await;
    w.at(t - 3 * DAY + MINUTE + 2 * SECOND);
    assert_eq!(w.process(&reconciled, 200, 200).await, Outcome::Completed);

    // Two days before: a GitHub issue completed; a Stripe dispute refused by the destination (permanent), alarmed.
    w.at(t - 2 * DAY);
    let issue = json!({"action": "opened", "issue": {"number": 7, "title": "Fixtures"}, "repository": {"full_name": "octo-org/shop"}});
    let gh_completed = w
        .receive(
            "github",
            "0b8a5c2e-0000-4000-8000-000000000001",
            "issues",
            issue.clone(),
        )
        .await;
    w.at(t - 2 * DAY + SECOND);
    assert_eq!(w.process(&gh_completed, 200, 200).await, Outcome::Completed);
    w.at(t - 2 * DAY + MINUTE);
    let dead_notified = w
        .receive(
            "stripe",
            "evt_1QfixtureDeadNotified",
            "charge.dispute.created",
            stripe(
                "evt_1QfixtureDeadNotified",
                "charge.dispute.created",
                t - 2 * DAY,
                json!({"id": "dp_1"}),
            ),
        )
        .await;
    w.at(t - 2 * DAY + MINUTE + SECOND);
    assert_eq!(w.process(&dead_notified, 422, 200).await, Outcome::Dead);

    // The day before: a Mailgun delivery completed (its token remembered as the delivery's signed nonce).
    w.at(t - DAY);
    let mailgun_completed = w
        .receive(
            "mailgun",
            "",
            "delivered",
            json!({"id": "mgFixtureCompleted", "timestamp": (t - DAY) / 1000, "event": "delivered",
                   "recipient": "alice@example.com"}),
        )
        .await;
    w.at(t - DAY + SECOND);
    assert_eq!(w.process(&mailgun_completed, 200, 200).await, Outcome::Completed);

    // 30 hours before: a GitHub push that failed, then died (alarmed); replayed an hour before the end, so its
    // budget counts from the replay (its receipt is past the 24 h one).
    w.at(t - 30 * HOUR);
    let replayed = w
        .receive(
            "github",
            "0b8a5c2e-0000-4000-8000-000000000002",
            "push",
            json!({"ref": "refs/heads/main", "after": "6113728f27ae82c7b1a177c8d03f9e96e0adf246"}),
        )
        .await;
    assert!(matches!(w.process(&replayed, 503, 200).await, Outcome::Retry(_)));
    w.at(t - 29 * HOUR);
    assert_eq!(w.process(&replayed, 410, 200).await, Outcome::Dead);

    // 6 hours before: a GitHub issue the destination refused, whose alarm did not go out (the notify URL down).
    w.at(t - 6 * HOUR);
    let dead_owed = w
        .receive(
            "github",
            "0b8a5c2e-0000-4000-8000-000000000003",
            "issues",
            json!({"action": "closed", "issue": {"number": 7}}),
        )
        .await;
    w.at(t - 6 * HOUR + SECOND);
    assert_eq!(w.process(&dead_owed, 400, 503).await, Outcome::Dead);

    // 3 hours before: a Stripe payment failing three times, due again before the end.
    w.at(t - 3 * HOUR);
    let failed_due = w
        .receive(
            "stripe",
            "evt_1QfixtureFailedDue",
            "payment_intent.payment_failed",
            stripe(
                "evt_1QfixtureFailedDue",
                "payment_intent.payment_failed",
                t - 3 * HOUR,
                json!({"id": "pi_1"}),
            ),
        )
        .await;
    for at in [t - 3 * HOUR, t - 150 * MINUTE, t - 2 * HOUR] {
        w.at(at);
        assert!(matches!(
            w.process(&failed_due, 503, 200).await,
            Outcome::Retry(_)
        ));
    }

    // An hour before: the completed issue's body again under a fresh delivery id (stored, marked `resent_of`), and
    // the dead push replayed by an operator.
    w.at(t - HOUR);
    w.receive("github", "0b8a5c2e-0000-4000-8000-000000000004", "issues", issue)
        .await;
    w.at(t - HOUR + SECOND);
    assert_eq!(
        store.replay(&replayed, false).await.expect("the replay"),
        Replay::Replayed
    );

    // 40 minutes before: a GitHub star whose worker claimed it and crashed; its lease ran out 25 minutes before.
    w.at(t - 40 * MINUTE);
    let expired = w
        .receive(
            "github",
            "0b8a5c2e-0000-4000-8000-000000000005",
            "star",
            json!({"action": "created", "starred_at": "2026-12-07T11:20:00Z"}),
        )
        .await;
    w.at(t - 30 * MINUTE);
    w.claimed_by_a_gone_owner(
        &expired,
        &owner(5151, t - 2 * HOUR, 0x0bad_cafe),
        Duration::from_secs(300),
    )
    .await;

    // 20 minutes before: a Stripe invoice that failed once (later failed again: below).
    w.at(t - 20 * MINUTE);
    let failed_later = w
        .receive(
            "stripe",
            "evt_1QfixtureFailedLater",
            "invoice.payment_failed",
            stripe(
                "evt_1QfixtureFailedLater",
                "invoice.payment_failed",
                t - 20 * MINUTE,
                json!({"id": "in_1"}),
            ),
        )
        .await;
    assert!(matches!(
        w.process(&failed_later, 500, 200).await,
        Outcome::Retry(_)
    ));

    // 10 minutes before: a Mailgun open, not yet run; Stripe's reconciliation ran (one event it could not store).
    w.at(t - 10 * MINUTE);
    w.receive(
        "mailgun",
        "",
        "opened",
        json!({"id": "mgFixtureReceived", "timestamp": (t - 10 * MINUTE) / 1000, "event": "opened",
               "recipient": "bob@example.com"}),
    )
    .await;
    let checkpoint = Checkpoint {
        scanned_to: t - 15 * MINUTE,
        last_run: Some(RunRecord {
            started_at: t - 10 * MINUTE,
            finished_at: t - 10 * MINUTE + 3 * SECOND,
            listed: 4,
            present: 3,
            recovered: 0,
            failed: 1,
            error: None,
        }),
        failed: vec![FailedEvent {
            id: EventId::parse("evt_1QfixtureUnstored").expect("an id"),
            handle: "evt_1QfixtureUnstored".to_owned(),
            created_ms: t - DAY,
            event_type: Some("customer.updated".to_owned()),
            attempts: 2,
        }],
    };
    let stripe_source = SourceName::parse("stripe").expect("a source");
    store
        .save_checkpoint(&stripe_source, &checkpoint)
        .await
        .expect("the checkpoint");

    // 5 minutes before: a GitHub issue comment, not yet run.
    w.at(t - 5 * MINUTE);
    w.receive(
        "github",
        "0b8a5c2e-0000-4000-8000-000000000006",
        "issue_comment",
        json!({"action": "created", "comment": {"id": 1, "body": "LGTM"}}),
    )
    .await;

    // 2 minutes before: a Stripe customer claimed by a process that died a minute later, its lease 10 minutes long.
    w.at(t - 2 * MINUTE);
    let live = w
        .receive(
            "stripe",
            "evt_1QfixtureLeased",
            "customer.created",
            stripe(
                "evt_1QfixtureLeased",
                "customer.created",
                t - 2 * MINUTE,
                json!({"id": "cus_1"}),
            ),
        )
        .await;
    w.at(t - 90 * SECOND);
    w.claimed_by_a_gone_owner(
        &live,
        &owner(6262, t - HOUR, 0x00c0_ffee),
        Duration::from_secs(600),
    )
    .await;

    // 40 seconds before: the invoice fails again; its backoff drew a minute, so it is due 20 seconds after the end.
    w.at(t - 40 * SECOND);
    let token = w.machine.lease_owner();
    let claim = store
        .claim(&failed_later, &token, Duration::from_secs(30))
        .await
        .expect("the claim");
    assert!(matches!(claim, Claim::Claimed(_)), "{claim:?}");
    let settled = store
        .settle(
            &failed_later,
            &token,
            Settlement::Failed {
                error: "forward: HTTP 502".to_owned(),
                delay: Duration::from_secs(60),
            },
        )
        .await
        .expect("the settle");
    assert_eq!(settled, Settled::Done);

    w.at(t);
    let forwarded = w.downstream.count();
    let written = w.stop().await;
    assert!(forwarded > 0, "the scene ran nothing");
    let nonce = {
        let holder = &mailgun_completed;
        let event = store
            .get(holder)
            .await
            .expect("a read")
            .expect("the Mailgun event");
        let body: Value = serde_json::from_slice(&event.payload).expect("Mailgun's body is JSON");
        json!({"event_id": holder.event_id, "token": body["signature"]["token"]})
    };
    let checkpoints = json!({"stripe": serde_json::to_value(&checkpoint).expect("JSON")});
    (written, json!({"nonce": nonce, "checkpoints": checkpoints}))
}

/// A record as `scene.json` keeps it, with the body its provider sent.
fn scene_event(r: &Record, body: &str) -> Value {
    json!({
        "source": r.source,
        "event_id": r.event_id,
        "event_type": r.event_type,
        "status": r.status,
        "attempts": r.attempts,
        "replays": r.replays,
        "payload_sha256": r.payload_sha256,
        "received_at": r.received_at,
        "updated_at": r.updated_at,
        "lease_owner": r.lease_owner,
        "lease_until": r.lease_until,
        "next_attempt_at": r.next_attempt_at,
        "last_error": r.last_error,
        "completed_at": r.completed_at,
        "expires_at": r.expires_at,
        "notified_at": r.notified_at,
        "replayed_at": r.replayed_at,
        "origin": r.origin,
        "resent_of": r.resent_of,
        "body": body,
    })
}

/// The records of `written` as `store` holds them at the fixture's moment (where the scene leaves its clock).
async fn records(store: &dyn Store, written: &[(EventKey, String)]) -> Vec<Value> {
    let mut out = Vec::new();
    for (key, body) in written {
        let event = store
            .get(key)
            .await
            .expect("a read")
            .unwrap_or_else(|| panic!("{key} is not in the store"));
        out.push(scene_event(&event.record, body));
    }
    out
}

/// `conn`'s database as SQL text in the form of sqlite3's `.dump` (which `sqlite3 new.db < dump.sql` and rusqlite's
/// `execute_batch` both load), plus `PRAGMA user_version`, which `.dump` leaves out and the store's migrations read:
/// without it a loaded file would be taken for an empty one of version 0. The SQLite CLI is not needed to write or
/// load it (a fresh CI machine may not have one).
fn sqlite_dump(conn: &rusqlite::Connection) -> String {
    use rusqlite::types::ValueRef;
    let literal = |v: ValueRef<'_>| match v {
        ValueRef::Null => "NULL".to_owned(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => format!("{f:?}"),
        ValueRef::Text(t) => format!("'{}'", String::from_utf8_lossy(t).replace('\'', "''")),
        ValueRef::Blob(b) => format!("X'{}'", hex::encode(b)),
    };
    let mut out = String::from("PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\n");
    let tables: Vec<(String, String)> = conn
        .prepare("SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("the tables")
        .collect::<Result<_, _>>()
        .expect("the tables");
    for (name, sql) in tables {
        out.push_str(&format!("{sql};\n"));
        let mut stmt = conn
            .prepare(&format!("SELECT * FROM \"{name}\" ORDER BY rowid"))
            .expect("prepare");
        let columns = stmt.column_count();
        let mut rows = stmt.query([]).expect("the rows");
        while let Some(row) = rows.next().expect("a row") {
            let values: Vec<String> = (0..columns)
                .map(|i| literal(row.get_ref(i).expect("a value")))
                .collect();
            out.push_str(&format!("INSERT INTO {name} VALUES({});\n", values.join(",")));
        }
    }
    let rest: Vec<String> = conn
        .prepare(
            "SELECT sql FROM sqlite_schema WHERE type IN ('index', 'trigger', 'view') AND sql IS NOT NULL ORDER BY rowid",
        )
        .expect("prepare")
        .query_map([], |r| r.get(0))
        .expect("the indexes")
        .collect::<Result<_, _>>()
        .expect("the indexes");
    for sql in rest {
        out.push_str(&format!("{sql};\n"));
    }
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("user_version");
    out.push_str(&format!("PRAGMA user_version={version};\nCOMMIT;\n"));
    out
}

/// Every row of every table of `conn`, as text, for comparing a database with its dump loaded again.
fn sqlite_rows(conn: &rusqlite::Connection) -> Vec<String> {
    let tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
        )
        .expect("prepare")
        .query_map([], |r| r.get(0))
        .expect("the tables")
        .collect::<Result<_, _>>()
        .expect("the tables");
    let mut out = Vec::new();
    for name in tables {
        let mut stmt = conn
            .prepare(&format!("SELECT * FROM \"{name}\" ORDER BY rowid"))
            .expect("prepare");
        let columns = stmt.column_count();
        let mut rows = stmt.query([]).expect("the rows");
        while let Some(row) = rows.next().expect("a row") {
            let values: Vec<String> = (0..columns)
                .map(|i| format!("{:?}", row.get_ref(i).expect("a value")))
                .collect();
            out.push(format!("{name}: {}", values.join(", ")));
        }
    }
    out
}

/// The header every fixture file starts with.
fn header(what: &str) -> String {
    format!(
        "-- webhook-inbox: {what}, as this release writes it: the scene of tests/serve/fixtures.rs\n\
         -- (`write_the_release_fixtures`) at {WRITTEN_AT} ms (2026-12-07T12:00:00Z). Which commit wrote it and how to\n\
         -- write it again: tests/data/fixtures/README.md. Its events: scene.json.\n"
    )
}

/// Writes tests/data/fixtures/v9/ (`sqlite.sql`, `postgres.sql`, `scene.json`) with the current code; see the README
/// there. Needs PostgreSQL (`INBOX_TEST_POSTGRES_URL`) and its `pg_dump` (`INBOX_TEST_POSTGRES_BIN`, as ./test.sh
/// sets them).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "writes tests/data/fixtures/v9: run by hand, see tests/data/fixtures/README.md"]
async fn write_the_release_fixtures() {
    let base = std::env::var("INBOX_TEST_POSTGRES_URL")
        .expect("INBOX_TEST_POSTGRES_URL: the fixtures need PostgreSQL");
    let bin =
        std::env::var("INBOX_TEST_POSTGRES_BIN").expect("INBOX_TEST_POSTGRES_BIN: the directory of pg_dump");
    let out = PathBuf::from(FIXTURES);
    std::fs::create_dir_all(&out).expect("the fixtures' directory");
    let secrets: BTreeMap<String, String> = [
        ("github", "6f1d2c3b4a5968778695a4b3c2d1e0f1"),
        ("stripe", "whsec_0a1b2c3d4e5f60718293a4b5c6d7e8f9"),
        ("mailgun", "f7c1a0e2b9d84c3a5e6f70812a3b4c5d-5e6f7a8b-9c0d1e2f"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();

    // SQLite: a data directory of its own, the store as `inbox serve` opens it, on the scene's clock.
    let dir = tempfile::tempdir().expect("temp dir");
    let clock = ManualClock::at(WRITTEN_AT - 4 * DAY);
    let mut options = inbox_core::stores::sqlite::Options::new(4096, Duration::from_secs(30));
    options.serving = true;
    options.clock = clock.clone();
    let sqlite: Arc<dyn Store> = Arc::new(
        inbox_core::stores::sqlite::SqliteLedger::open_with(dir.path(), options).expect("the SQLite store"),
    );
    let (written, extra) = write_scene(sqlite.clone(), clock, &secrets).await;
    let scene_records = records(sqlite.as_ref(), &written).await;
    drop(sqlite);
    let conn = rusqlite::Connection::open(dir.path().join("inbox.db")).expect("the store's file");
    let sqlite_sql = sqlite_dump(&conn);
    // The dump loads into a new file as the same rows and version.
    let again = rusqlite::Connection::open_in_memory().expect("a database");
    again.execute_batch(&sqlite_sql).expect("the dump loads");
    assert_eq!(
        sqlite_rows(&again),
        sqlite_rows(&conn),
        "the dump loads as the same rows"
    );
    let version = |c: &rusqlite::Connection| {
        c.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
            .expect("version")
    };
    assert_eq!(version(&again), version(&conn));
    assert_eq!(
        version(&conn),
        9,
        "the SQLite schema is no longer v9: write the fixtures into a directory of its own"
    );

    // PostgreSQL: a schema of its own, the same scene on a clock of its own.
    let setup = |sql: String| {
        let base = base.clone();
        async move {
            let (client, connection) = tokio_postgres::connect(&base, tokio_postgres::NoTls)
                .await
                .expect("connect to PostgreSQL");
            tokio::spawn(connection);
            client.batch_execute(&sql).await.expect("set up the schema");
        }
    };
    setup(format!(
        "DROP SCHEMA IF EXISTS {DUMPED_SCHEMA} CASCADE; CREATE SCHEMA {DUMPED_SCHEMA}"
    ))
    .await;
    let sep = if base.contains('?') { '&' } else { '?' };
    let clock = ManualClock::at(WRITTEN_AT - 4 * DAY);
    let mut options = inbox_core::stores::postgres::Options::new(
        format!("{base}{sep}options=-c%20search_path%3D{DUMPED_SCHEMA}"),
        Duration::from_secs(30),
    );
    options.clock = Some(clock.clone());
    let pg: Arc<dyn Store> = Arc::new(
        inbox_core::stores::postgres::PostgresStore::open(options)
            .await
            .expect("the PostgreSQL store"),
    );
    let (pg_written, pg_extra) = write_scene(pg.clone(), clock, &secrets).await;
    let pg_records = records(pg.as_ref(), &pg_written).await;
    drop(pg);
    assert_eq!(pg_records, scene_records, "both stores hold the one scene");
    assert_eq!(pg_extra, extra);
    let dumped = std::process::Command::new(Path::new(&bin).join("pg_dump"))
        .args([
            "--schema",
            DUMPED_SCHEMA,
            "--no-owner",
            "--no-privileges",
            "--column-inserts",
            "--dbname",
            &base,
        ])
        .output()
        .expect("run pg_dump");
    assert!(
        dumped.status.success(),
        "pg_dump: {}",
        String::from_utf8_lossy(&dumped.stderr)
    );
    // psql's `\restrict` and `\unrestrict` (pg_dump since 15.14) carry a random key and mean nothing to the driver
    // the test loads the dump with: the dump is ours, and loaded by no psql.
    let postgres_sql: String = String::from_utf8(dumped.stdout)
        .expect("pg_dump writes UTF-8")
        .lines()
        .filter(|l| !l.starts_with("\\restrict") && !l.starts_with("\\unrestrict"))
        .map(|l| format!("{l}\n"))
        .collect();
    setup(format!("DROP SCHEMA {DUMPED_SCHEMA} CASCADE")).await;

    let scene = json!({
        "written_at": WRITTEN_AT,
        "note": "The scene of tests/serve/fixtures.rs as the stores of sqlite.sql and postgres.sql hold it: each event \
                 as its record stood at written_at, with the body its provider sent (Mailgun: the event-data, which \
                 the signature wraps). The secrets are the fixture's own, for signing deliveries again.",
        "secrets": secrets,
        "events": scene_records,
        "nonce": extra["nonce"],
        "checkpoints": extra["checkpoints"],
    });
    std::fs::write(
        out.join("sqlite.sql"),
        format!("{}{sqlite_sql}", header("the SQLite store (schema v9)")),
    )
    .expect("write sqlite.sql");
    std::fs::write(
        out.join("postgres.sql"),
        format!(
            "{}{postgres_sql}",
            header("the PostgreSQL store (schema v2), by pg_dump")
        ),
    )
    .expect("write postgres.sql");
    std::fs::write(
        out.join("scene.json"),
        format!("{}\n", serde_json::to_string_pretty(&scene).expect("JSON")),
    )
    .expect("write scene.json");
    eprintln!("wrote {} events into {}", written.len(), out.display());
}
