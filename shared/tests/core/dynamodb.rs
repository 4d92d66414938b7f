//! What only the DynamoDB store does beyond the ports, and how: bodies in S3 past the inline limit, the item's
//! layout (its index keys, its TTL, the older formats it still reads), the shard hash, and a missing table. The
//! ports themselves it passes with every store (`crate::ledger::dynamodb`, the contract).
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use inbox_core::clock::Clock;
use inbox_core::contract::{key, new_event, Harness, LONG, RETAIN};
use inbox_core::model::{NewEvent, Status};
use inbox_core::ports::{Claim, Created, Ledger, Replay, Settlement, StoreError};
use inbox_core::stores::dynamodb::{shard_of, DynamoLedger, SHARDS};
use sha2::Digest;

use crate::ledger::dynamodb::DynamoHarness;

/// Runs `test` against a fresh table and bucket, then removes them.
async fn with_store<F>(test: impl FnOnce(Arc<DynamoHarness>) -> F)
where
    F: std::future::Future<Output = ()>,
{
    let Some(store) = DynamoHarness::start().await else {
        return;
    };
    let store = Arc::new(store);
    test(store.clone()).await;
    store.finish().await;
}

fn sized_event(id: &str, body: Vec<u8>) -> NewEvent {
    let sha = hex::encode(sha2::Sha256::digest(&body));
    NewEvent {
        payload: bytes::Bytes::from(body),
        payload_sha256: sha,
        ..new_event(id, "")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_inline_limit_goes_to_s3_and_comes_back() {
    with_store(|store| async move {
        let l = store.ledger(LONG).with_inline_limit(4 * 1024);
        // GIVEN 64 KiB that do not compress, and 512 KiB of JSON that compress far below the limit.
        let noise: Vec<u8> = (0..64 * 1024).map(|_| rand::random::<u8>()).collect();
        let json = "{\"k\":\"value\"},".repeat(512 * 1024 / 14).into_bytes();
        assert_eq!(
            l.create(sized_event("big", noise.clone())).await.unwrap(),
            Created::New
        );
        assert_eq!(
            l.create(sized_event("json", json.clone())).await.unwrap(),
            Created::New
        );

        let item = store.item(&key("big")).await;
        assert!(!item.contains_key("payload"), "the body left the item");
        let s3_key = item["payload_s3_key"].as_s().unwrap();
        // One object per write, under its event's prefix (`aws::s3::fresh_key`).
        assert!(s3_key.starts_with("payloads/src/big/"), "{s3_key}");
        assert!(!store.payloads.get(s3_key).await.unwrap().is_empty());

        let item = store.item(&key("json")).await;
        let stored = item["payload_zstd"].as_b().unwrap().as_ref().len();
        assert!(
            stored < json.len() / 10,
            "{stored} bytes stored for {}",
            json.len()
        );
        assert!(!item.contains_key("payload_s3_key"));

        // WHEN claimed THEN both bodies come back whole.
        for (id, body) in [("big", &noise), ("json", &json)] {
            let Claim::Claimed(e) = l.claim(&key(id), "w", LONG).await.unwrap() else {
                panic!("{id} not claimed")
            };
            assert!(e.payload.as_ref() == body.as_slice(), "{id}: the body differs");
            let got = l.get(&key(id)).await.unwrap().unwrap();
            assert!(got.payload.as_ref() == body.as_slice(), "{id}: the body differs");
        }
        // A duplicate of the offloaded body writes an object of its own (left to expire) and keeps the first
        // record, which still points at the first object.
        assert!(matches!(
            l.create(sized_event("big", noise.clone())).await.unwrap(),
            Created::Duplicate {
                status: Status::Processing,
                ..
            }
        ));
        assert_eq!(
            store.item(&key("big")).await["payload_s3_key"].as_s().unwrap(),
            s3_key
        );
    })
    .await;
}

#[tokio::test]
async fn the_shard_hash_is_stable() {
    // Items written by one release are queried by the next: these must never change.
    assert_eq!(shard_of("src#e1"), 0);
    assert_eq!(shard_of("src#e2"), 1);
    assert_eq!(shard_of("stripe#evt_1"), 2);
    assert_eq!(shard_of("github#0f3c"), 3);
    let spread: std::collections::HashSet<_> = (0..200).map(|i| shard_of(&format!("src#evt_{i}"))).collect();
    assert_eq!(spread.len(), SHARDS as usize, "every shard gets events");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_item_carries_the_index_keys_only_while_open_or_dead() {
    with_store(|store| async move {
        let l = store.ledger(Duration::from_secs(30));
        let index = |item: &HashMap<String, AttributeValue>| {
            let pk = item.get("gsi1pk").map(|v| v.as_s().unwrap().clone());
            let sk = item
                .get("gsi1sk")
                .map(|v| v.as_n().unwrap().parse::<i64>().unwrap());
            (pk, sk)
        };
        // A create whose message went out first takes no entry; one that enqueues after writing does.
        l.create_announced(new_event("e1", "a")).await.unwrap();
        assert_eq!(
            index(&store.item(&key("e1")).await),
            (None, None),
            "announced: out"
        );
        let t0 = store.clock().now_ms();
        l.create(new_event("e2", "b")).await.unwrap();
        let (pk, sk) = index(&store.item(&key("e2")).await);
        assert_eq!(pk.as_deref(), Some("open#1"));
        assert!(sk.unwrap() >= t0 + 30_000, "received: due after the grace");

        // A claim takes it out: its message vouches for it until the settle.
        l.claim(&key("e2"), "w", LONG).await.unwrap();
        assert_eq!(
            index(&store.item(&key("e2")).await),
            (None, None),
            "processing: out"
        );
        let failed = Settlement::Failed {
            error: "x".into(),
            delay: Duration::from_secs(5),
        };
        l.settle(&key("e2"), "w", failed).await.unwrap();
        let (pk, sk) = index(&store.item(&key("e2")).await);
        assert_eq!(pk.as_deref(), Some("open#1"), "failed: listed for operators");
        assert!(
            sk.unwrap() >= store.clock().now_ms() + 5_000 + 30_000 - 1_000,
            "due after the attempt and the grace"
        );
        l.mark_dead(&key("e2"), "x").await.unwrap();
        assert_eq!(index(&store.item(&key("e2")).await).0.as_deref(), Some("dead#1"));
        l.mark_notified(&key("e2")).await.unwrap();
        assert_eq!(
            index(&store.item(&key("e2")).await),
            (Some("dead#1".to_owned()), Some(i64::MAX)),
            "listed as dead, never due"
        );

        l.replay(&key("e2"), false).await.unwrap();
        l.claim(&key("e2"), "w", LONG).await.unwrap();
        l.settle(&key("e2"), "w", RETAIN).await.unwrap();
        let item = store.item(&key("e2")).await;
        assert_eq!(index(&item), (None, None), "completed: out of the index");
        // The TTL attribute is in epoch seconds, and the table expires items by it.
        let expires = item["expires_at"].as_n().unwrap().parse::<i64>().unwrap();
        assert!(
            (expires - (store.clock().now_ms() / 1000 + 3600)).abs() <= 5,
            "expires_at {expires}"
        );
        let ttl = store
            .dynamo
            .describe_time_to_live()
            .table_name(&store.name)
            .send()
            .await
            .unwrap();
        let ttl = ttl.time_to_live_description().unwrap();
        assert_eq!(ttl.attribute_name(), Some("expires_at"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_that_does_not_parse_is_corrupt() {
    with_store(|store| async move {
        let l = store.ledger(LONG);
        store
            .dynamo
            .put_item()
            .table_name(&store.name)
            .item("pk", AttributeValue::S(key("bad").pk()))
            .item("status", AttributeValue::S("WEIRD".into()))
            .send()
            .await
            .unwrap();
        assert!(matches!(l.get(&key("bad")).await, Err(StoreError::Corrupt(_))));
        assert!(matches!(
            l.claim(&key("bad"), "w", LONG).await,
            Err(StoreError::Corrupt(_))
        ));
    })
    .await;
}

/// Items written before the write units were cut (`payload` + `payload_encoding`, the hash in hex, `attempts`
/// and `replays` from the start) read, claim and replay as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_of_the_older_format_read_claim_and_replay_as_before() {
    with_store(|store| async move {
        let l = store.ledger(LONG);
        let sha = hex::encode(sha2::Sha256::digest(b"{\"old\":1}"));
        for (id, payload, encoding) in [
            (
                "old_zstd",
                zstd::bulk::compress(b"{\"old\":1}", 3).unwrap(),
                Some("zstd"),
            ),
            ("old_raw", b"{\"old\":1}".to_vec(), None),
        ] {
            let mut put = store
                .dynamo
                .put_item()
                .table_name(&store.name)
                .item("pk", AttributeValue::S(key(id).pk()))
                .item("source", AttributeValue::S("src".into()))
                .item("event_id", AttributeValue::S(id.into()))
                .item("status", AttributeValue::S("RECEIVED".into()))
                .item("payload_sha256", AttributeValue::S(sha.clone()))
                .item(
                    "received_at",
                    AttributeValue::N(store.clock().now_ms().to_string()),
                )
                .item(
                    "updated_at",
                    AttributeValue::N(store.clock().now_ms().to_string()),
                )
                .item("attempts", AttributeValue::N("0".into()))
                .item("replays", AttributeValue::N("0".into()))
                .item("payload", AttributeValue::B(payload.into()));
            if let Some(e) = encoding {
                put = put.item("payload_encoding", AttributeValue::S(e.into()));
            }
            put.send().await.unwrap();
            let Claim::Claimed(e) = l.claim(&key(id), "w", LONG).await.unwrap() else {
                panic!("{id} not claimed")
            };
            assert_eq!((e.payload.as_ref(), e.attempts), (&b"{\"old\":1}"[..], 1), "{id}");
            assert_eq!(e.payload_sha256, sha);
            l.settle(&key(id), "w", Settlement::Dead { error: "x".into() })
                .await
                .unwrap();
            assert_eq!(l.replay(&key(id), false).await.unwrap(), Replay::Replayed);
            let e = l.get(&key(id)).await.unwrap().unwrap();
            assert_eq!((e.attempts, e.replays, e.status), (0, 1, Status::Received));
        }
        // And a new item keeps no counter until it counts, and its hash as 32 bytes.
        l.create(new_event("new", "b")).await.unwrap();
        let item = store.item(&key("new")).await;
        assert!(!item.contains_key("attempts") && !item.contains_key("replays"));
        assert!(!item.contains_key("payload") && item.contains_key("payload_zstd"));
        l.claim(&key("new"), "w", LONG).await.unwrap();
        let e = l.get(&key("new")).await.unwrap().unwrap();
        assert_eq!((e.attempts, e.replays), (1, 0));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_store_is_unavailable_not_a_panic() {
    // A table that does not exist stands for a misconfigured or unreachable store.
    with_store(|store| async move {
        let l = DynamoLedger::new(store.dynamo.clone(), "no-such-table", None, LONG);
        let err = l.create(new_event("e1", "secret body")).await.unwrap_err();
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        assert!(!err.to_string().contains("secret body"), "{err}");
    })
    .await;
}
