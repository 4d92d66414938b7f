//! What the PostgreSQL store does beyond the ports' contract (which `ledger::postgres::` runs): owners' heartbeats
//! and roles run out on the database's clock, two handles (two instances) racing on the same ids create each once,
//! racing on one body under two ids store it once (refused) or mark one of the two (marked), and a database migrated
//! by a newer binary is refused.

use std::sync::Arc;
use std::time::Duration;

use crate::ledger::postgres::PostgresHarness;
use inbox_core::contract::{key, new_event};
use inbox_core::model::{NewEvent, ResentBodies};
use inbox_core::ports::{Claim, Created, GoneOwners, Ledger, Settled, Settlement, Upkeep};
use inbox_core::stores::postgres::{Options, PostgresStore};

const LONG: Duration = Duration::from_secs(3600);

/// A store over the harness's schema whose heartbeats vouch for `liveness`, on the database's clock.
async fn store_with_liveness(h: &PostgresHarness, liveness: Duration) -> PostgresStore {
    let mut options = Options::new(h.url(), LONG);
    options.pool_size = 4;
    options.liveness = liveness;
    PostgresStore::open(options).await.unwrap()
}

/// GIVEN an instance holding a lease and keeping a heartbeat of 300 ms, and another instance
/// WHEN the first stops its heartbeat (a SIGKILL, a lost machine) and 300 ms pass on the database's clock
/// THEN the other sees it gone and ends its lease at once (long before the lease's hour), and its event can be
/// claimed; an owner that renewed its heartbeat in time keeps its leases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_whose_heartbeat_ran_out_loses_its_leases_at_once() {
    let Some(h) = PostgresHarness::start().await else {
        return;
    };
    let first = store_with_liveness(&h, Duration::from_millis(300)).await;
    let other = store_with_liveness(&h, Duration::from_millis(300)).await;
    for id in ["held", "alive"] {
        first.create(new_event(id, id)).await.unwrap();
    }
    first.heartbeat("first:1").await.unwrap();
    other.heartbeat("alive:1").await.unwrap();
    assert!(matches!(
        first.claim(&key("held"), "first:1:aa", LONG).await.unwrap(),
        Claim::Claimed(_)
    ));
    assert!(matches!(
        other.claim(&key("alive"), "alive:1:bb", LONG).await.unwrap(),
        Claim::Claimed(_)
    ));
    assert_eq!(
        other.gone_owners("other:1").await.unwrap(),
        GoneOwners::These(vec![])
    );

    tokio::time::sleep(Duration::from_millis(400)).await;
    other.heartbeat("alive:1").await.unwrap();
    let gone = other.gone_owners("other:1").await.unwrap();
    assert_eq!(gone, GoneOwners::These(vec!["first:1".into()]));
    assert_eq!(other.end_leases(&gone).await.unwrap(), 1);
    assert!(matches!(
        other.claim(&key("held"), "other:1:cc", LONG).await.unwrap(),
        Claim::Claimed(_)
    ));
    assert_eq!(
        other.claim(&key("alive"), "other:1:dd", LONG).await.unwrap(),
        Claim::OwnedElsewhere,
        "the lease of an owner that kept its heartbeat"
    );
    h.finish_now().await;
}

/// GIVEN a role held for 200 ms
/// WHEN its holder stops renewing it and 300 ms pass on the database's clock
/// THEN another asker takes it in the next term, and the old holder is refused until it runs out again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_passes_on_once_its_hold_ran_out_in_a_later_term() {
    let Some(h) = PostgresHarness::start().await else {
        return;
    };
    let s = h.store(LONG, None).await;
    let first = s
        .lead("sweep", "a:1", Duration::from_millis(200))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        s.lead("sweep", "b:1", Duration::from_millis(200)).await.unwrap(),
        None
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let next = s
        .lead("sweep", "b:1", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next, first + 1);
    assert_eq!(
        s.lead("sweep", "a:1", Duration::from_secs(60)).await.unwrap(),
        None
    );
    h.finish_now().await;
}

/// GIVEN two handles on one database (two instances)
/// WHEN each creates the same 50 ids, 4 times over, all at once
/// THEN every id is created exactly once; every other create is answered as its duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_racing_on_the_same_ids_create_each_once() {
    let Some(h) = PostgresHarness::start().await else {
        return;
    };
    let stores = [
        Arc::new(h.store(LONG, None).await),
        Arc::new(h.store(LONG, None).await),
    ];
    let mut tasks = Vec::new();
    for round in 0..4 {
        for (i, store) in stores.iter().enumerate() {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let mut created = Vec::new();
                for n in 0..50 {
                    // Each task in its own order, so that batches overlap every way.
                    let n = if (round + i) % 2 == 0 { n } else { 49 - n };
                    let id = format!("id-{n:02}");
                    created.push((id.clone(), store.create(new_event(&id, &id)).await.unwrap()));
                }
                created
            }));
        }
    }
    let mut new = std::collections::BTreeMap::<String, usize>::new();
    for task in tasks {
        for (id, created) in task.await.unwrap() {
            match created {
                Created::New => *new.entry(id).or_default() += 1,
                Created::Duplicate { .. } => {}
                other => panic!("{id}: {other:?}"),
            }
        }
    }
    assert_eq!(new.len(), 50, "every id created");
    assert!(new.values().all(|n| *n == 1), "created twice: {new:?}");
    h.finish_now().await;
}

/// `pairs` bodies, each created under two ids at once, one through each of two handles (two instances), every
/// create in flight together; each pair's two answers, in the order (`{run}-{n}-a` through `stores[0]`,
/// `{run}-{n}-b` through `stores[1]`).
async fn race_resent_bodies(
    stores: &[Arc<PostgresStore>; 2],
    resent_bodies: ResentBodies,
    run: &str,
    pairs: usize,
) -> Vec<(String, Created, String, Created)> {
    let barrier = Arc::new(tokio::sync::Barrier::new(pairs * 2));
    let mut tasks = Vec::new();
    for n in 0..pairs {
        for (store, side) in stores.iter().zip(["a", "b"]) {
            let (store, barrier) = (store.clone(), barrier.clone());
            let id = format!("{run}-{n:02}-{side}");
            let body = format!("{run}-body-{n:02}");
            tasks.push(tokio::spawn(async move {
                let event = NewEvent {
                    resent_bodies,
                    ..new_event(&id, &body)
                };
                barrier.wait().await;
                let created = store.create(event).await.unwrap();
                (id, created)
            }));
        }
    }
    let mut answers = Vec::new();
    let mut tasks = tasks.into_iter();
    while let (Some(a), Some(b)) = (tasks.next(), tasks.next()) {
        let ((a, created_a), (b, created_b)) = (a.await.unwrap(), b.await.unwrap());
        answers.push((a, created_a, b, created_b));
    }
    answers
}

/// [`race_resent_bodies`] over two handles on `h`'s database (two instances), four rounds through both and a fifth
/// through one (each body's two creates in one batch, or in two one after the other): every round's answers.
async fn race_rounds(
    h: &PostgresHarness,
    mode: ResentBodies,
    prefix: &str,
    pairs: usize,
) -> Vec<(String, Created, String, Created)> {
    let stores = [
        Arc::new(h.store(LONG, None).await),
        Arc::new(h.store(LONG, None).await),
    ];
    let mut answers = Vec::new();
    for round in 0..5 {
        let stores = if round < 4 {
            stores.clone()
        } else {
            [stores[0].clone(), stores[0].clone()]
        };
        answers.extend(race_resent_bodies(&stores, mode, &format!("{prefix}{round}"), pairs).await);
    }
    answers
}

/// GIVEN two handles on one database (two instances), a source that refuses resent bodies
/// WHEN 60 bodies are each created under two ids at once, one id through each instance, all 120 creates together
///   (group-committed on both sides), four rounds over, and a fifth through one instance
/// THEN each body is stored once: one of its two creates is new, the other is answered as a duplicate of it, and
///   only the new one is stored. (A holder looked up before the insert let both transactions store the body.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_racing_on_one_body_under_two_ids_store_it_once_where_resent_bodies_are_refused() {
    const PAIRS: usize = 60;
    let Some(h) = PostgresHarness::start().await else {
        return;
    };
    let refused = ResentBodies::Refused { within: LONG };
    let mut wrong = Vec::new();
    for (a, created_a, b, created_b) in race_rounds(&h, refused, "r", PAIRS).await {
        match (&created_a, &created_b) {
            (Created::New, Created::Duplicate { event_id, .. }) if event_id.as_str() == a => {}
            (Created::Duplicate { event_id, .. }, Created::New) if event_id.as_str() == b => {}
            other => wrong.push(format!("{a} / {b}: {other:?}")),
        }
    }
    let twice = h
        .sql("SELECT payload_sha256 FROM events GROUP BY payload_sha256 HAVING count(*) > 1")
        .await;
    assert_eq!(
        (twice, wrong.len()),
        (0, 0),
        "of {} bodies, {twice} stored twice; answers not one new and one duplicate of it, the first few: {:?}",
        PAIRS * 5,
        &wrong[..wrong.len().min(5)]
    );
    assert_eq!(h.sql("SELECT 1 FROM events").await, (PAIRS * 5) as u64);
    h.finish_now().await;
}

/// GIVEN two handles on one database (two instances), a source that marks resent bodies (the default)
/// WHEN 60 bodies are each created under two ids at once, one id through each instance, all 120 creates together,
///   four rounds over, and a fifth through one instance
/// THEN both ids of each body are stored, exactly one unmarked (the holder) and the other marked `resent_of` it, and
///   so answered: never both unmarked.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_racing_on_one_body_under_two_ids_mark_exactly_one_as_resent() {
    const PAIRS: usize = 60;
    let Some(h) = PostgresHarness::start().await else {
        return;
    };
    let marked = ResentBodies::Marked { within: LONG };
    let mut wrong = Vec::new();
    for (a, created_a, b, created_b) in race_rounds(&h, marked, "m", PAIRS).await {
        match (&created_a, &created_b) {
            (Created::New, Created::Resent { of }) if of.as_str() == a => {}
            (Created::Resent { of }, Created::New) if of.as_str() == b => {}
            other => wrong.push(format!("{a} / {b}: {other:?}")),
        }
    }
    // Per body: two records, one unmarked, and the other marked with the unmarked one's id.
    let unmarked_pairs = h
        .sql(
            "SELECT payload_sha256 FROM events GROUP BY payload_sha256
             HAVING count(*) FILTER (WHERE resent_of IS NULL) <> 1 OR count(*) <> 2",
        )
        .await;
    let marked_right = h
        .sql(
            "SELECT 1 FROM events r JOIN events h
               ON h.source = r.source AND h.event_id = r.resent_of AND h.payload_sha256 = r.payload_sha256
              AND h.resent_of IS NULL",
        )
        .await;
    assert_eq!(
        (unmarked_pairs, marked_right, wrong.len()),
        (0, (PAIRS * 5) as u64, 0),
        "of {} bodies, {unmarked_pairs} not one holder and one marked; answers not one new and one resent of it, \
         the first few: {:?}",
        PAIRS * 5,
        &wrong[..wrong.len().min(5)]
    );
    h.finish_now().await;
}

/// A TCP forwarder between a store and the test server that can cut the database off: every connection it
/// forwards ends, and every later one is accepted and never answered, as when the database's host is gone and its
/// packets are dropped (a connection attempt then waits for its time-out, unlike a refused one).
struct Cuttable {
    addr: std::net::SocketAddr,
    cut: tokio::sync::watch::Sender<bool>,
}

impl Cuttable {
    async fn start(upstream: String) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (cut, cut_seen) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            let mut unanswered = Vec::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                if *cut_seen.borrow() {
                    unanswered.push(inbound);
                    continue;
                }
                let (upstream, mut cut_seen) = (upstream.clone(), cut_seen.clone());
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut_seen.wait_for(|cut| *cut) => {}
                    }
                });
            }
        });
        Self { addr, cut }
    }

    /// `url` (the test server's) through this forwarder.
    fn url(&self, url: &str) -> String {
        let config: tokio_postgres::Config = url.parse().unwrap();
        let host = match &config.get_hosts()[0] {
            tokio_postgres::config::Host::Tcp(host) => host.clone(),
            other => panic!("the test server is not on TCP: {other:?}"),
        };
        let server = format!("{host}:{}", config.get_ports()[0]);
        assert!(url.contains(&server), "{url}");
        url.replacen(&server, &self.addr.to_string(), 1)
    }

    fn cut(&self) {
        self.cut.send_replace(true);
    }
}

/// A direct connection to the test server, in the harness's schema, holding `event_id`'s row locked in a
/// transaction until it is rolled back: a completion of it waits in its statement meanwhile, and the completions
/// that come after it queue for the next statement, all together.
async fn lock_row(h: &PostgresHarness, event_id: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&h.base, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(&format!(
            "SET search_path = {}; BEGIN; SELECT 1 FROM events WHERE event_id = '{event_id}' FOR UPDATE",
            h.schema
        ))
        .await
        .unwrap();
    client
}

/// GIVEN an instance holding the leases of its events, its completions queued behind one that waits on a row lock
/// WHEN the next batch's statement is refused by the server for one completion's sake (a retention past int8)
/// THEN the others of that batch complete one at a time, and only that one fails
/// AND WHEN, with 20 completions queued so, the database goes out of reach (its connections cut, new ones never
///   answered, as when its host is gone)
/// THEN all 20 are answered with the error within one connection time-out and a margin (15 s), rather than settled
///   one at a time after a connection time-out (5 s) each, nor answered as lost leases.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_batch_of_completions_falls_back_only_for_a_statement_and_fails_fast_without_a_database() {
    const QUEUED: usize = 20;
    let Some(h) = PostgresHarness::start().await else {
        return;
    };
    let config: tokio_postgres::Config = h.base.parse().unwrap();
    let server = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(host) => format!("{host}:{}", config.get_ports()[0]),
        other => panic!("the test server is not on TCP: {other:?}"),
    };
    let proxy = Cuttable::start(server).await;
    let mut options = Options::new(proxy.url(&h.url()), LONG);
    options.pool_size = 4;
    let store = Arc::new(PostgresStore::open(options).await.unwrap());
    let owner = "me:1:aa";
    let ids: Vec<String> = (0..7 + QUEUED).map(|n| format!("c{n:02}")).collect();
    for id in &ids {
        store.create(new_event(id, id)).await.unwrap();
        assert!(matches!(
            store.claim(&key(id), owner, LONG).await.unwrap(),
            Claim::Claimed(_)
        ));
    }
    let complete = |id: &str, retention: Duration| {
        let (store, key) = (store.clone(), key(id));
        tokio::spawn(async move {
            store
                .settle(&key, owner, Settlement::Completed { retention })
                .await
        })
    };
    let in_flight = |task: &tokio::task::JoinHandle<_>| !task.is_finished();

    // A statement error: c01..c04 and c05 (whose expiry overflows int8) in one batch behind c00.
    let locked = lock_row(&h, "c00").await;
    let first = complete("c00", LONG);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(in_flight(&first), "the completion of a locked row did not wait");
    let mut batch: Vec<_> = ids[1..5].iter().map(|id| complete(id, LONG)).collect();
    batch.push(complete("c05", Duration::MAX));
    tokio::time::sleep(Duration::from_millis(300)).await;
    locked.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(first.await.unwrap().unwrap(), Settled::Done);
    let overflowed = batch.pop().unwrap().await.unwrap();
    assert!(overflowed.is_err(), "{overflowed:?}");
    for (id, task) in ids[1..5].iter().zip(batch) {
        assert_eq!(task.await.unwrap().unwrap(), Settled::Done, "{id}: one at a time");
    }

    // The database out of reach: c06 waits on its row, c07..c20 queue behind it; then the cut.
    let locked = lock_row(&h, "c06").await;
    let first = complete("c06", LONG);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(in_flight(&first), "the completion of a locked row did not wait");
    let queued: Vec<_> = ids[7..].iter().map(|id| complete(id, LONG)).collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cut_at = std::time::Instant::now();
    proxy.cut();
    let answers = tokio::time::timeout(Duration::from_secs(30), async {
        let mut answers = vec![first.await.unwrap()];
        for task in queued {
            answers.push(task.await.unwrap());
        }
        answers
    })
    .await;
    let took = cut_at.elapsed();
    eprintln!(
        "{} completions answered {took:?} after the database went out of reach",
        ids.len() - 6
    );
    let answers = answers.unwrap_or_else(|_| panic!("the completions still wait {took:?} after the cut"));
    assert!(
        answers.iter().all(Result::is_err),
        "a completion without a database answered: {answers:?}"
    );
    assert!(took < Duration::from_secs(15), "answered {took:?} after the cut");
    locked.batch_execute("ROLLBACK").await.unwrap();
    drop(store);
    h.finish_now().await;
}

/// GIVEN a database a newer binary migrated (its schema version past this binary's)
/// WHEN this binary opens it
/// THEN it is refused, both versions named, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_a_newer_binary_migrated_is_refused() {
    let Some(h) = PostgresHarness::start().await else {
        return;
    };
    drop(h.store(LONG, None).await);
    h.sql("INSERT INTO schema_versions (version) VALUES (999)").await;
    let refused = PostgresStore::open(Options::new(h.url(), LONG))
        .await
        .err()
        .expect("refused");
    let message = refused.to_string();
    assert!(message.contains("999") && message.contains("newer"), "{message}");
    h.finish_now().await;
}

/// GIVEN another instance's transaction that has inserted an id and holds it, not yet committed
/// WHEN this instance creates the same id (its insert waits on the other's row) and the other transaction rolls back
///   (its connection lost, its statement failed)
/// THEN this create stores the event, once, and answers it as new: a row nobody committed is no duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_duplicate_whose_first_transaction_rolls_back_is_stored_once() {
    let Some(h) = PostgresHarness::start().await else {
        return;
    };
    let store = Arc::new(h.store(LONG, None).await);
    let (other, connection) = tokio_postgres::connect(&h.base, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    other
        .batch_execute(&format!(
            "SET search_path = {}; BEGIN;
             INSERT INTO events (source, event_id, status, payload_sha256, received_at, updated_at, origin)
             VALUES ('{}', 'raced', 'RECEIVED', 'sha-of-first', 1, 1, 'webhook')",
            h.schema,
            key("raced").source.as_str()
        ))
        .await
        .unwrap();

    let creating = tokio::spawn({
        let store = store.clone();
        async move { store.create(new_event("raced", "second")).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !creating.is_finished(),
        "the create did not wait for the other transaction's row"
    );
    other.batch_execute("ROLLBACK").await.unwrap();

    let created = tokio::time::timeout(Duration::from_secs(10), creating)
        .await
        .expect("the create still waits after the rollback")
        .unwrap()
        .unwrap();
    assert_eq!(created, Created::New);
    assert_eq!(h.sql("SELECT 1 FROM events WHERE event_id = 'raced'").await, 1);
    let stored = store.get(&key("raced")).await.unwrap().unwrap();
    assert_eq!(&stored.payload[..], b"second");
    h.finish_now().await;
}

/// Takes the harness's schema back to version 1, as the release before the console's index left it: the retention
/// index without the source, no version 2.
async fn back_to_version_1(h: &PostgresHarness) {
    drop(h.store(LONG, None).await);
    h.sql(
        "DROP INDEX events_expiry_source;
         CREATE INDEX events_expiry ON events (expires_at) WHERE status = 'COMPLETED';
         DELETE FROM schema_versions WHERE version = 2",
    )
    .await;
}

/// A direct connection to the test server in the harness's schema, as an operator's `psql`.
async fn operator(h: &PostgresHarness) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&h.base, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(&format!("SET search_path = {}", h.schema))
        .await
        .unwrap();
    client
}

/// GIVEN a database at schema version 1 holding 300,000 completed events
/// WHEN a store whose statement timeout is 100 ms opens it (migration 2 builds an index on that table), and another
///   session writes an event, with a lock timeout of 200 ms, while the index is being built
/// THEN the migration completes past the statement timeout (the database at version 2, the index valid, the old one
///   gone), and the write went through during the build: a plain `CREATE INDEX` in the migration's transaction was
///   cancelled at every start, and held every write meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_building_an_index_outlasts_the_statement_timeout_and_holds_no_write() {
    let Some(h) = PostgresHarness::start().await else {
        return;
    };
    back_to_version_1(&h).await;
    let source = key("x").source;
    let loaded = std::time::Instant::now();
    h.sql(&format!(
        "INSERT INTO events (source, event_id, status, payload_sha256, received_at, updated_at, origin, expires_at)
         SELECT '{source}', 'old-' || n, 'COMPLETED', 'sha', n, n, 'webhook', n FROM generate_series(1, 300000) n"
    ))
    .await;
    eprintln!("300,000 events loaded in {:?}", loaded.elapsed());
    let mut options = Options::new(h.url(), LONG);
    options.pool_size = 2;
    options.statement_timeout = Duration::from_millis(100);
    let started = std::time::Instant::now();
    let opening = tokio::spawn(PostgresStore::open(options));
    let psql = operator(&h).await;
    let building = format!(
        "SELECT 1 FROM pg_stat_progress_create_index WHERE relid = '{}.events'::regclass",
        h.schema
    );
    let mut written_during_build = None;
    while !opening.is_finished() && started.elapsed() < Duration::from_secs(60) {
        if !psql.query(&building, &[]).await.unwrap().is_empty() {
            written_during_build = Some(
                psql.batch_execute(&format!(
                    "SET lock_timeout = '200ms';
                     INSERT INTO events (source, event_id, status, payload_sha256, received_at, updated_at, origin)
                     VALUES ('{source}', 'during-the-build', 'RECEIVED', 'sha', 1, 1, 'webhook')"
                ))
                .await,
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let opened = opening.await.unwrap();
    eprintln!("opened (migrated) in {:?}", started.elapsed());
    let store = opened.expect("the migration failed");
    match written_during_build {
        Some(written) => written.expect("a write during the index build"),
        None => panic!("the index build was never seen running"),
    }
    assert_eq!(h.sql("SELECT 1 FROM schema_versions WHERE version = 2").await, 1);
    assert_eq!(
        h.sql("SELECT 1 FROM pg_index WHERE indexrelid = to_regclass('events_expiry_source') AND indisvalid")
            .await,
        1
    );
    assert_eq!(
        h.sql("SELECT 1 FROM pg_class WHERE oid = to_regclass('events_expiry')")
            .await,
        0,
        "the index migration 2 replaces"
    );
    drop(store);
    h.finish_now().await;
}

/// GIVEN a database at schema version 1 where a concurrent build of migration 2's index was cut short, leaving an
///   invalid index of that name behind (here: a unique build that failed on duplicates)
/// WHEN a store opens it
/// THEN the invalid index is dropped and built again as the migration defines it, valid, and the database is at
///   version 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_index_a_cut_short_build_left_is_built_again() {
    let Some(h) = PostgresHarness::start().await else {
        return;
    };
    back_to_version_1(&h).await;
    let source = key("x").source;
    h.sql(&format!(
        "INSERT INTO events (source, event_id, status, payload_sha256, received_at, updated_at, origin, expires_at)
         SELECT '{source}', 'old-' || n, 'COMPLETED', 'sha', n, n, 'webhook', n FROM generate_series(1, 2) n"
    ))
    .await;
    let psql = operator(&h).await;
    let failed = psql
        .batch_execute(
            "CREATE UNIQUE INDEX CONCURRENTLY events_expiry_source ON events (source) WHERE status = 'COMPLETED'",
        )
        .await;
    assert!(failed.is_err(), "the unique build did not fail");
    let invalid =
        "SELECT 1 FROM pg_index WHERE indexrelid = to_regclass('events_expiry_source') AND NOT indisvalid";
    assert_eq!(h.sql(invalid).await, 1, "no invalid index left");

    let store = PostgresStore::open(Options::new(h.url(), LONG))
        .await
        .expect("the migration failed");
    let definition: String = psql
        .query_one(
            "SELECT pg_get_indexdef(indexrelid) FROM pg_index
             WHERE indexrelid = to_regclass('events_expiry_source') AND indisvalid",
            &[],
        )
        .await
        .expect("no valid index")
        .get(0);
    assert!(
        definition.contains("(expires_at, source)") && !definition.contains("UNIQUE"),
        "{definition}"
    );
    assert_eq!(h.sql("SELECT 1 FROM schema_versions WHERE version = 2").await, 1);
    drop(store);
    h.finish_now().await;
}

/// GIVEN a server whose sessions for this store start with `synchronous_commit = off` (here set by the URL's options,
///   as a role's or a database's setting would)
/// WHEN the store opens
/// THEN it is refused, the setting named: through a pooler in transaction mode what a session sets for itself need
///   not hold, and a commit acknowledged there could be lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_that_start_without_synchronous_commit_are_refused() {
    let Some(h) = PostgresHarness::start().await else {
        return;
    };
    let url = format!("{}%20-c%20synchronous_commit%3Doff", h.url());
    let refused = PostgresStore::open(Options::new(url, LONG))
        .await
        .err()
        .expect("a server without synchronous commits was taken");
    assert!(
        refused.to_string().contains("synchronous_commit = off"),
        "{refused}"
    );
    h.finish_now().await;
}

/// The throwaway server ./test.sh starts speaks TLS with a certificate from the test root
/// (tests/data/keys/postgres-root.pem) for localhost and 127.0.0.1: `INBOX_TEST_POSTGRES_TLS=1` says so.
fn tls_server() -> bool {
    let on = std::env::var("INBOX_TEST_POSTGRES_TLS").as_deref() == Ok("1");
    if !on {
        eprintln!(
            "SKIPPED: TLS to PostgreSQL: INBOX_TEST_POSTGRES_TLS is unset (./test.sh's own server sets it)"
        );
    }
    on
}

const TEST_ROOT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/data/keys/postgres-root.pem"
);

/// GIVEN a server whose certificate comes from a private root
/// WHEN the store connects with `sslmode=require` and that root in `ca_file`
/// THEN every connection it holds is TLS; without the root, the same URL is refused at open, the certificate
///   named as the cause and the URL's password nowhere in the error; a `ca_file` that holds no certificate is
///   refused as such.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslmode_require_connects_over_tls_to_a_certificate_it_can_check_and_only_then() {
    let Some(h) = PostgresHarness::start().await else {
        return;
    };
    if !tls_server() {
        return;
    }
    let name = format!("tls-{}", h.schema);
    let url =
        format!("{}&sslmode=require&application_name={name}", h.url()).replace("inbox@", "inbox:hunter2@");
    let mut options = Options::new(url, LONG);
    options.pool_size = 3;
    options.ca_file = Some(TEST_ROOT.into());
    let store = PostgresStore::open(options.clone()).await.unwrap();
    store.create(new_event("over-tls", "b")).await.unwrap();
    let held = format!(
        "SELECT 1 FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.application_name = '{name}'"
    );
    let all = h.sql(&held).await;
    assert!(all >= 1, "no connection of the store's is open");
    assert_eq!(
        h.sql(&format!("{held} AND s.ssl AND s.version LIKE 'TLS%'"))
            .await,
        all
    );

    let mut unchecked = options.clone();
    unchecked.ca_file = None;
    let e = PostgresStore::open(unchecked)
        .await
        .err()
        .expect("a certificate from an unknown root was trusted");
    let e = e.to_string();
    assert!(e.contains("certificate"), "{e}");
    assert!(!e.contains("hunter2"), "{e}");

    let mut not_pem = options;
    not_pem.ca_file = Some(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml").into());
    let e = PostgresStore::open(not_pem)
        .await
        .err()
        .expect("a ca_file without a certificate was taken");
    assert!(e.to_string().contains("no PEM certificate"), "{e}");
    drop(store);
    h.finish_now().await;
}
