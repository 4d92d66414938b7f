//! The reads that must never scan the table, planned by a real PostgreSQL (`INBOX_TEST_POSTGRES_URL`, which
//! ./test.sh starts): the sweeper's, retention's, the console's overview and every listing filter. Sequential scans
//! are switched off for the session, so a plan that still holds one has no index to serve it; where one index is
//! the point (the completed events counted from `events_expiry_source` alone), its name is asked for too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::time::Duration;

use tokio_postgres::types::ToSql;

use super::ports::{
    list_query, PURGE_BODIES, PURGE_EVENTS, SUMMARY_COMPLETED, SUMMARY_OLDEST, SUMMARY_OPEN, SUMMARY_TIMELINE,
};
use super::transitions::due_query;
use super::{Options, PostgresStore};
use crate::model::{EventId, SourceName, Status};
use crate::ports::{Cursor, ListFilter};

/// A store migrated into a schema of its own, or `None` (after a loud line) when no server is configured.
async fn store() -> Option<(PostgresStore, String, String)> {
    let Ok(base) = std::env::var("INBOX_TEST_POSTGRES_URL") else {
        assert_ne!(
            std::env::var("INBOX_REQUIRE_POSTGRES").as_deref(),
            Ok("1"),
            "INBOX_REQUIRE_POSTGRES=1 but INBOX_TEST_POSTGRES_URL is unset"
        );
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: INBOX_TEST_POSTGRES_URL is unset (./test.sh sets it)"
        );
        return None;
    };
    let schema = format!("plans_{:016x}", rand::random::<u64>());
    let (client, connection) = tokio_postgres::connect(&base, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .unwrap();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    let store = PostgresStore::open(Options::new(url, Duration::from_secs(60)))
        .await
        .unwrap();
    Some((store, base, schema))
}

async fn plan(store: &PostgresStore, sql: &str, params: &[&(dyn ToSql + Sync)]) -> String {
    let c = store.client().await.unwrap();
    c.batch_execute("SET enable_seqscan = off").await.unwrap();
    let rows = c.query(&format!("EXPLAIN {sql}"), params).await.unwrap();
    let plan = rows
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect::<Vec<_>>()
        .join("\n");
    c.batch_execute("RESET enable_seqscan").await.unwrap();
    plan
}

fn no_scan(what: &str, plan: &str) {
    assert!(!plan.contains("Seq Scan"), "{what} scans a table:\n{plan}");
}

#[tokio::test]
async fn every_read_of_the_overview_the_sweeper_and_retention_is_served_by_an_index() {
    let Some((store, base, schema)) = store().await else {
        return;
    };
    let now = 1_800_000_000_000_i64;
    let limit = 100_i64;
    let hour = 3_600_000_i64;

    let completed = plan(&store, SUMMARY_COMPLETED, &[&now]).await;
    assert!(
        completed.contains("Index Only Scan using events_expiry_source"),
        "the completed events are not counted from the retention index alone:\n{completed}"
    );
    let open = plan(&store, SUMMARY_OPEN, &[]).await;
    assert!(open.contains("events_open"), "{open}");
    let oldest = plan(&store, SUMMARY_OLDEST, &[]).await;
    assert!(oldest.contains("events_open"), "{oldest}");
    no_scan(
        "the overview's chart",
        &plan(&store, SUMMARY_TIMELINE, &[&now, &hour]).await,
    );
    let due = plan(&store, &due_query(), &[&now, &limit]).await;
    assert!(due.contains("events_due"), "{due}");
    let purge = plan(&store, PURGE_EVENTS, &[&now, &limit]).await;
    assert!(purge.contains("events_expiry_source"), "{purge}");
    no_scan(
        "retention's bodies",
        &plan(&store, PURGE_BODIES, &[&now, &limit]).await,
    );

    drop_schema(&base, &schema).await;
}

#[tokio::test]
async fn every_listing_filter_is_served_by_an_index() {
    let Some((store, base, schema)) = store().await else {
        return;
    };
    let now = 1_800_000_000_000_i64;
    let source = SourceName::parse("stripe").unwrap();
    let base_filter = ListFilter {
        limit: 50,
        ..Default::default()
    };
    let mut filters = vec![("no filter", base_filter.clone())];
    for status in Status::ALL {
        filters.push((
            status.as_str(),
            ListFilter {
                status: Some(status),
                ..base_filter.clone()
            },
        ));
    }
    filters.push((
        "a source",
        ListFilter {
            source: Some(source.clone()),
            ..base_filter.clone()
        },
    ));
    filters.push((
        "a source and a status",
        ListFilter {
            source: Some(source.clone()),
            status: Some(Status::Dead),
            ..base_filter.clone()
        },
    ));
    filters.push((
        "a type",
        ListFilter {
            event_type: Some("invoice.paid".to_owned()),
            ..base_filter.clone()
        },
    ));
    filters.push((
        "a source's id",
        ListFilter {
            source: Some(source.clone()),
            event_id: Some(EventId::parse("evt_1").unwrap()),
            ..base_filter.clone()
        },
    ));
    filters.push((
        "a time range and a cursor",
        ListFilter {
            received_from: Some(now - 86_400_000),
            received_to: Some(now),
            before: Some(Cursor {
                received_at: now - 1_000,
                source,
                event_id: EventId::parse("evt_9").unwrap(),
            }),
            ..base_filter.clone()
        },
    ));
    for (what, filter) in filters {
        let (sql, values) = list_query(&filter, now);
        let params: Vec<&(dyn ToSql + Sync)> =
            values.iter().map(|v| v.as_ref() as &(dyn ToSql + Sync)).collect();
        no_scan(what, &plan(&store, &sql, &params).await);
    }

    drop_schema(&base, &schema).await;
}

async fn drop_schema(base: &str, schema: &str) {
    let (client, connection) = tokio_postgres::connect(base, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .unwrap();
}
