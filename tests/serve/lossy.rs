//! Lossy delivery, end to end, for every provider reconciliation reads (docs/DESIGN.md "Reconciliation"): a sender
//! creates events in the provider's API (a local fake of it, `testkit::providers`) and sends each as the provider's
//! signed webhook to a real `inbox serve`, but a random tenth never arrive and a few are answered 500 before any
//! write (the ledger's own file refuses their insert while they are sent, as a full disk would). Reconciliation runs
//! beside receiving on its interval: within two intervals of the last send every event is stored exactly once and
//! forwarded once, and a webhook arriving later for a recovered id is a duplicate that counts no mismatch.
//!
//! `RECONCILE_ONLY=paddle,okta` runs some providers alone; the table it prints is the acceptance figures.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::HeaderMap;
use inbox_core::config::Config;
use inbox_core::secrets::LocalSecrets;
use inbox_core::source::Sources;
use rand::SeedableRng;
use testkit::providers::{fakes, source_config, Event, Fake, Receiving};

use crate::common::*;
use crate::sender::{fates, signed, Fate};

/// The reconcile interval and settle time of every source here: short, so that the test takes seconds.
const INTERVAL: Duration = Duration::from_secs(4);
const SETTLE: &str = "1s";
/// Events per provider.
const EVENTS: usize = 30;
/// Of them, answered 500 before any write.
const REFUSED: usize = 2;

/// The test-only keys and certificates (tests/data/keys/make.sh).
fn keys() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/keys")
}

/// One provider under test: its fake, how its source receives, and what happened to each event.
struct Lane {
    fake: Arc<dyn Fake>,
    receiving: Receiving,
    events: Vec<Event>,
    /// What happens to each event's webhook, by the event's number.
    fates: Vec<Fate>,
    dropped: BTreeSet<String>,
    refused: BTreeSet<String>,
    recovered_after: Option<Duration>,
}

impl Lane {
    fn name(&self) -> &'static str {
        self.fake.provider()
    }
}

async fn send(url: &str, headers: HeaderMap, body: Vec<u8>) -> (u16, serde_json::Value) {
    let response = client()
        .post(url)
        .headers(headers)
        .body(body)
        .send()
        .await
        .expect("send a webhook");
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    )
}

/// The ids stored per source, read from the ledger's own file as an operator's `sqlite3` would.
fn stored(db: &rusqlite::Connection) -> BTreeMap<String, Vec<String>> {
    let mut statement = db
        .prepare("SELECT source, event_id FROM events")
        .expect("prepare");
    let rows = statement
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .expect("query");
    let mut by_source: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for row in rows {
        let (source, id) = row.expect("a row");
        by_source.entry(source).or_default().push(id);
    }
    by_source
}

/// GIVEN every provider's fake API and a real `inbox serve` with a source per provider, each reconciled every 4 s
/// WHEN 30 events per provider are created and sent as signed webhooks, a random tenth dropped and two answered 500
/// before any write
/// THEN within two intervals of the last send every event is stored exactly once and forwarded once, those the
/// webhook path lost recovered as reconciled; and each lost one, sent again later, is a duplicate with no mismatch.
#[tokio::test(flavor = "multi_thread")]
async fn every_provider_recovers_a_lossy_delivery_within_two_intervals() {
    let sink = Sink::start(&[], 200).await;
    let mut lanes: Vec<Lane> = Vec::new();
    let mut config = String::new();
    let mut env: Vec<(String, String)> = Vec::new();
    let mut key_routes = HashMap::new();
    let mut key_hosts = Vec::new();
    for fake in fakes() {
        let url = fake.clone().start();
        let name = fake.provider();
        let prefix = format!("LOSSY_{}", name.to_uppercase());
        let written = source_config(
            fake.as_ref(),
            &prefix,
            &url,
            &format!(
                "{{ kind = \"forward\", url = \"{}/{name}\", timeout = \"5s\" }}",
                sink.url()
            ),
            &format!(
                "interval = \"{}s\"\nsettle = \"{SETTLE}\"\nlookback = \"1h\"\n",
                INTERVAL.as_secs()
            ),
            false,
        );
        config.push_str(&written.toml);
        env.extend(written.env().cloned());
        let receiving = written.receiving;
        if let Some(host) = &receiving.key_host {
            key_routes.insert(host.path.clone(), host.body.clone());
            key_hosts.push(host.host);
        }
        lanes.push(Lane {
            fake,
            receiving,
            events: Vec::new(),
            fates: Vec::new(),
            dropped: BTreeSet::new(),
            refused: BTreeSet::new(),
            recovered_after: None,
        });
    }
    assert!(!lanes.is_empty(), "no provider to run (RECONCILE_ONLY?)");

    // A key host (PayPal's certificate URL) on the test-only root, where a provider's scheme fetches one.
    let _key_server = if key_hosts.is_empty() {
        None
    } else {
        let read = |f: &str| std::fs::read(keys().join(f)).expect("a test key");
        let server =
            testkit::https::HttpsServer::start(&read("host.pem"), &read("host.key"), key_routes).await;
        let connect_to: Vec<String> = key_hosts
            .iter()
            .map(|h| format!("{h}={}", server.addr()))
            .collect();
        env.push(("INBOX_CONNECT_TO".into(), connect_to.join(",")));
        env.push((
            "INBOX_TRUST_ROOTS".into(),
            keys().join("root.pem").display().to_string(),
        ));
        Some(server)
    };
    // This process signs with the same secrets the server verifies with.
    for (name, value) in &env {
        std::env::set_var(name, value);
    }
    let parsed = Config::from_toml(&config).unwrap_or_else(|e| panic!("{e}\n{config}"));
    let sources = Sources::receiving(&parsed, &LocalSecrets)
        .await
        .expect("the sources");
    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let app = spawn_app(&config, &env_refs);

    // The fates, drawn once per lane from a fixed seed: a tenth dropped, two refused, the rest delivered.
    let mut rng = rand::rngs::StdRng::seed_from_u64(27);
    for lane in &mut lanes {
        lane.fates = fates(&mut rng, EVENTS, REFUSED);
    }

    // The ledger's own file refuses a refused event's insert while it is sent: the receiver answers 500, nothing
    // written.
    let db = rusqlite::Connection::open(app.data_dir().join("inbox.db")).expect("open the ledger's file");
    db.busy_timeout(Duration::from_secs(10)).expect("busy timeout");

    // The sender: one event per lane in turn, each created just before its webhook.
    let mut late: Vec<(usize, Event)> = Vec::new();
    for i in 0..EVENTS {
        for (l, lane) in lanes.iter_mut().enumerate() {
            let created_ms = inbox_core::time::now_ms();
            let event = Event {
                id: lane.fake.event_id(i, created_ms),
                event_type: lane.fake.event_type().to_owned(),
                created_ms,
            };
            lane.events.push(event.clone());
            let fate = lane.fates[i];
            // A lost event is in the provider's list from its creation. A delivered one is listed once its
            // webhook is answered: on a loaded host signing and sending can take longer than the settle time,
            // and a reconciler that stored it first would make its own webhook a duplicate, a race this test
            // is not about.
            if fate != Fate::Delivered {
                lane.fake.api().add(event.clone());
            }
            if fate == Fate::Dropped {
                lane.dropped.insert(event.id.clone());
                late.push((l, event));
                continue;
            }
            if fate == Fate::Refused {
                db.execute_batch(&format!(
                    "CREATE TRIGGER lossy_refuse BEFORE INSERT ON events WHEN NEW.event_id = '{}' \
                     BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
                    event.id.replace('\'', "''")
                ))
                .expect("create the trigger");
            }
            let (headers, body) = signed(&sources, &*lane.fake, &lane.receiving, &event);
            let (status, answer) = send(&app.webhook_url(lane.name()), headers, body).await;
            if fate == Fate::Refused {
                db.execute_batch("DROP TRIGGER lossy_refuse;")
                    .expect("drop the trigger");
                assert!(status >= 500, "{} {}: {status} {answer}", lane.name(), event.id);
                lane.refused.insert(event.id.clone());
                late.push((l, event));
            } else {
                assert_eq!(
                    (status, answer["status"].as_str()),
                    (200, Some("accepted")),
                    "{} {}: {answer}",
                    lane.name(),
                    event.id
                );
                lane.fake.api().add(event);
            }
        }
    }
    let sent_at = Instant::now();

    // Full recovery: every event of every lane stored.
    let deadline = sent_at + INTERVAL * 5;
    loop {
        let now = stored(&db);
        for lane in lanes.iter_mut().filter(|l| l.recovered_after.is_none()) {
            let have: BTreeSet<&String> = now.get(lane.name()).into_iter().flatten().collect();
            if lane.events.iter().all(|e| have.contains(&e.id)) {
                lane.recovered_after = Some(sent_at.elapsed());
            }
        }
        if lanes.iter().all(|l| l.recovered_after.is_some()) || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let now = stored(&db);
    for lane in &lanes {
        let have: BTreeSet<&String> = now.get(lane.name()).into_iter().flatten().collect();
        let missing: Vec<&String> = lane
            .events
            .iter()
            .map(|e| &e.id)
            .filter(|id| !have.contains(id))
            .collect();
        assert!(
            missing.is_empty(),
            "{}: not recovered after {:?}: {missing:?}\n{}",
            lane.name(),
            sent_at.elapsed(),
            app.log()
        );
        let rows = now.get(lane.name()).map_or(0, Vec::len);
        assert_eq!(rows, EVENTS, "{}: records in the store", lane.name());
    }

    // Forwarded once each.
    let total = lanes.len() * EVENTS;
    wait_until(Duration::from_secs(30), "every event forwarded", || {
        sink.count() >= total
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut forwards: HashMap<(String, String), usize> = HashMap::new();
    for r in sink.requests() {
        let id = r.header("x-inbox-event-id").unwrap_or_default();
        *forwards
            .entry((r.path.trim_start_matches('/').to_owned(), id))
            .or_default() += 1;
    }
    for lane in &lanes {
        for e in &lane.events {
            let n = forwards
                .get(&(lane.name().to_owned(), e.id.clone()))
                .copied()
                .unwrap_or(0);
            assert_eq!(n, 1, "{} {}: forwarded {n} times", lane.name(), e.id);
        }
    }
    assert_eq!(
        forwards.values().sum::<usize>(),
        total,
        "forwards beyond the events sent"
    );

    // The lost ones arrive late after all: duplicates, no mismatch.
    let mut duplicates: HashMap<&str, usize> = HashMap::new();
    for (l, event) in &late {
        let lane = &lanes[*l];
        let (headers, body) = signed(&sources, &*lane.fake, &lane.receiving, event);
        let (status, answer) = send(&app.webhook_url(lane.name()), headers, body).await;
        assert!(
            status == 200 && crate::sender::all_duplicates(&answer),
            "{} {}: {status} {answer}",
            lane.name(),
            event.id
        );
        *duplicates.entry(lane.name()).or_default() += 1;
    }
    let metrics = get(&client(), &format!("{}/metrics", app.url())).await.text;
    let events = app.events();
    println!("\nprovider    sent  dropped  500s  recovered  late duplicates  forwarded  recovered within");
    for lane in &lanes {
        let name = lane.name();
        assert!(
            metrics.contains(&format!("inbox_payload_mismatch_total{{source=\"{name}\"}} 0")),
            "{name}: a mismatch was counted\n{metrics}"
        );
        let reconciled: BTreeSet<String> = events
            .iter()
            .filter(|e| e["source"] == name && e["origin"] == "reconciled")
            .map(|e| str_field(e, "event_id"))
            .collect();
        let lost: BTreeSet<String> = lane.dropped.union(&lane.refused).cloned().collect();
        assert_eq!(
            reconciled, lost,
            "{name}: the reconciled events are exactly the lost ones"
        );
        let after = lane.recovered_after.expect("recovered");
        println!(
            "{name:<11} {EVENTS:>4}  {:>7}  {:>4}  {:>9}  {:>15}  {:>9}  {:>7.1} s",
            lane.dropped.len(),
            lane.refused.len(),
            reconciled.len(),
            duplicates.get(name).copied().unwrap_or(0),
            lane.events
                .iter()
                .map(|e| forwards
                    .get(&(name.to_owned(), e.id.clone()))
                    .copied()
                    .unwrap_or(0))
                .sum::<usize>(),
            after.as_secs_f64()
        );
        assert!(
            after <= INTERVAL * 2,
            "{name}: full recovery took {after:?}, more than two intervals ({:?})",
            INTERVAL * 2
        );
    }
}
