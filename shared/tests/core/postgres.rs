//! What the PostgreSQL store does beyond the ports' contract (which `ledger::postgres::` runs): owners' heartbeats
//! and roles run out on the database's clock, two handles (two instances) racing on the same ids create each once,
//! and a database migrated by a newer binary is refused.

use std::sync::Arc;
use std::time::Duration;

use crate::ledger::postgres::PostgresHarness;
use inbox_core::contract::{key, new_event};
use inbox_core::ports::{Claim, Created, GoneOwners, Ledger, Upkeep};
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
        first.create(new_event(id, id), None).await.unwrap();
    }
    first.heartbeat("first:1").await.unwrap();
    other.heartbeat("alive:1").await.unwrap();
    assert!(matches!(
        first.claim(&key("held"), "first:1:aa", LONG, None).await.unwrap(),
        Claim::Claimed(_)
    ));
    assert!(matches!(
        other
            .claim(&key("alive"), "alive:1:bb", LONG, None)
            .await
            .unwrap(),
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
    assert_eq!(other.end_leases(&gone, None).await.unwrap(), 1);
    assert!(matches!(
        other.claim(&key("held"), "other:1:cc", LONG, None).await.unwrap(),
        Claim::Claimed(_)
    ));
    assert_eq!(
        other
            .claim(&key("alive"), "other:1:dd", LONG, None)
            .await
            .unwrap(),
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
                    created.push((id.clone(), store.create(new_event(&id, &id), None).await.unwrap()));
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
