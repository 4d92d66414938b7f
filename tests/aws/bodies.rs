//! Bodies kept in S3, against docs/DESIGN.md "Retention and expiry": every body kept apart goes within a day of its event's expiry,
//! and a dead event's body stays. The emulator applies no lifecycle rule, so each test drives one path (a refused
//! create, a lost race, a failure after the put, a crash between the settle and the countdown, a forced replay
//! racing a late countdown, a dead event, an older object layout), then lists every object with its tags and every
//! record, and checks one invariant over them ([`check`]) with the template's rules evaluated as S3 documents them
//! (`lifecycle.rs`):
//! - an object a record points at never expires while its event is open or dead (it is kept: tagged
//!   `inbox-body=kept`, or untagged as older releases wrote it; pending, which expires only after any message could
//!   have been claimed, is allowed before the event's first claim), and counts down once the event is COMPLETED,
//!   to within a day after the event's own expiry;
//! - an object no record points at expires;
//! - no record points at an object that is not there.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use inbox_core::aws::functions;
use inbox_core::aws::init::{create_stack, QueueSettings};
use inbox_core::aws::s3::S3Payloads;
use inbox_core::model::{NewEvent, Status};
use inbox_core::ports::{Claim, Created, Ledger, Queue, Replay, Settled, Settlement, StoreError};
use inbox_core::stores::dynamodb::DynamoLedger;
use inbox_core::time::now_ms;
use sha2::Digest;
use testkit::calls::CallCounter;
use yaml_rust2::{Yaml, YamlLoader};

use crate::lifecycle;
use crate::stack::{
    batch, bodies_in_s3, deliver, emulator, key, noise, poll_until, prefix, receive, stack, Stack, Stored,
};

const DAY: i64 = 86_400_000;
/// The template's RetentionDays at its default, which the stacks' configs keep (retention_days = 30).
const RETENTION: Duration = Duration::from_secs(30 * 86_400);

/// A Stripe event body too large for a DynamoDB item even compressed.
fn big(id: &str) -> String {
    serde_json::json!({"id": id, "object": "event", "type": "t", "pad": noise(600 * 1024)}).to_string()
}

/// `body` for `id`, written straight into the ledger as a receiver whose read missed the record would (its
/// message sent first, so no index entry; the body's SHA-256 as the receiver computes it).
fn created(id: &str, body: &str) -> NewEvent {
    NewEvent {
        key: key(id),
        event_type: None,
        payload: bytes::Bytes::from(body.to_owned()),
        payload_sha256: hex::encode(sha2::Sha256::digest(body.as_bytes())),
        headers: vec![],
        origin: Default::default(),
        resent_bodies: Default::default(),
    }
}

/// What a record says about its body and its state.
#[derive(Debug)]
struct Record {
    pk: String,
    status: String,
    attempts: i64,
    body: Option<String>,
    expires_at_ms: Option<i64>,
    index: Option<String>,
}

/// Every event record of the stack's table.
async fn records(stack: &Stack) -> Vec<Record> {
    let ledger = &stack.rt.ledger;
    let mut out = Vec::new();
    let mut start = None;
    loop {
        let page = ledger
            .client()
            .scan()
            .table_name(ledger.table())
            .consistent_read(true)
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .unwrap();
        for item in page.items() {
            let s = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
            let n = |name: &str| {
                item.get(name)
                    .and_then(|v| v.as_n().ok())
                    .map(|v| v.parse::<i64>().unwrap())
            };
            if !item.contains_key("event_id") {
                continue; // checkpoints and body markers
            }
            out.push(Record {
                pk: s("pk").unwrap(),
                status: s("status").unwrap(),
                attempts: n("attempts").unwrap_or(0),
                body: s("payload_s3_key"),
                expires_at_ms: n("expires_at").map(|secs| secs * 1000),
                index: s("gsi1pk"),
            });
        }
        match page.last_evaluated_key {
            Some(k) if !k.is_empty() => start = Some(k),
            _ => return out,
        }
    }
}

/// Lists every object and record, prints them, and checks the invariant of the file's header. Returns both.
async fn check(sdk: &aws_config::SdkConfig, stack: &Stack, when: &str) -> (Vec<Stored>, Vec<Record>) {
    let rules = lifecycle::of_the_template();
    let objects = bodies_in_s3(sdk, stack).await;
    let records = records(stack).await;
    eprintln!("{when}:");
    for (k, tags, _) in &objects {
        eprintln!("  object {k} {tags:?}");
    }
    for r in &records {
        eprintln!(
            "  record {} {} attempts={} body={:?} index={:?}",
            r.pk, r.status, r.attempts, r.body, r.index
        );
    }
    let now = now_ms();
    for (k, tags, created) in &objects {
        let expiry = lifecycle::expiry(&rules, k, tags, *created);
        let pointed = records.iter().find(|r| r.body.as_deref() == Some(k));
        match pointed {
            Some(r) if r.status == "COMPLETED" => {
                let event_expiry = r.expires_at_ms.unwrap();
                let body_expiry =
                    expiry.unwrap_or_else(|| panic!("{when}: {k} of the completed {} never expires", r.pk));
                assert!(
                    (event_expiry..=event_expiry + DAY).contains(&body_expiry),
                    "{when}: {k} of {} expires at {body_expiry}, its event at {event_expiry}",
                    r.pk
                );
            }
            Some(r) => {
                let before_first_claim = r.status == "RECEIVED" && r.attempts == 0;
                let tagged = |v: &str| tags == &[("inbox-body".to_owned(), v.to_owned())];
                assert!(
                    tags.is_empty() || tagged("kept") || (tagged("pending") && before_first_claim),
                    "{when}: {k} of the {} {} is tagged {tags:?}",
                    r.status,
                    r.pk
                );
                // Pending: gone only after any message of its event could have been claimed (SQS keeps one at
                // most 14 days).
                assert!(
                    expiry.is_none_or(|at| at >= now + 14 * DAY),
                    "{when}: {k} of the {} {} expires at {expiry:?}",
                    r.status,
                    r.pk
                );
            }
            None => assert!(
                expiry.is_some(),
                "{when}: no record points at {k} {tags:?}, and it never expires"
            ),
        }
    }
    for r in &records {
        if let Some(body) = &r.body {
            assert!(
                objects.iter().any(|(k, _, _)| k == body),
                "{when}: {} points at {body}, which is not there",
                r.pk
            );
        }
    }
    (objects, records)
}

fn under<'a>(objects: &'a [Stored], id: &str) -> Vec<&'a Stored> {
    let prefix = format!("payloads/stripe/{id}/");
    objects
        .iter()
        .filter(|(k, _, _)| k.starts_with(&prefix))
        .collect()
}

fn record<'a>(records: &'a [Record], id: &str) -> &'a Record {
    let pk = key(id).pk();
    records.iter().find(|r| r.pk == pk).unwrap()
}

/// A delivery whose create is refused (a duplicate the receiver's read missed, with the same body or another)
/// writes a body of its own that nothing points at, and that expires; it never rewrites the live event's body, not
/// even the completed one's, which keeps counting down.
#[tokio::test]
async fn a_refused_create_leaves_a_body_that_expires_and_rewrites_no_live_one() {
    let Some(sdk) = emulator().await else { return };
    let stack = stack(&sdk, QueueSettings::default(), "").await;
    let ledger = &stack.rt.ledger;
    // GIVEN a completed event and a received one, both with their bodies in S3
    let done = big("evt_refused_done");
    assert_eq!(deliver(&stack, &done).await.0, 200);
    poll_until(
        &stack,
        "evt_refused_done",
        Status::Completed,
        Duration::from_secs(30),
    )
    .await;
    let open = big("evt_refused_open");
    let new = ledger.create(created("evt_refused_open", &open)).await.unwrap();
    assert_eq!(new, Created::New);
    check(&sdk, &stack, "given").await;

    // WHEN each is delivered again past the receiver's read, with its own body and with another
    for (id, body) in [("evt_refused_done", &done), ("evt_refused_open", &open)] {
        for again in [body.clone(), big(id)] {
            let answer = ledger.create(created(id, &again)).await.unwrap();
            assert!(matches!(answer, Created::Duplicate { .. }), "{answer:?}");
        }
    }

    // THEN each left one body of its own to expire, and the live events' bodies are as they were
    let (objects, records) = check(&sdk, &stack, "after the refused creates").await;
    for id in ["evt_refused_done", "evt_refused_open"] {
        assert_eq!(under(&objects, id).len(), 3, "{id}: {objects:?}");
    }
    assert_eq!(record(&records, "evt_refused_done").status, "COMPLETED");
    let read = ledger.get(&key("evt_refused_done")).await.unwrap().unwrap();
    assert_eq!(read.payload.as_ref(), done.as_bytes(), "the first body stands");
}

/// Two first deliveries of one id at once: the one that loses the conditional create leaves its body to expire.
#[tokio::test]
async fn a_lost_duplicate_race_leaves_its_body_to_expire() {
    let Some(sdk) = emulator().await else { return };
    let stack = stack(&sdk, QueueSettings::default(), "").await;
    let ledger = &stack.rt.ledger;
    let (a, b) = (big("evt_race_body"), big("evt_race_body"));
    let (first, second) = tokio::join!(
        ledger.create(created("evt_race_body", &a)),
        ledger.create(created("evt_race_body", &b))
    );
    let outcomes = [first.unwrap(), second.unwrap()];
    assert_eq!(
        outcomes.iter().filter(|c| **c == Created::New).count(),
        1,
        "{outcomes:?}"
    );
    let (objects, _) = check(&sdk, &stack, "after the race").await;
    assert_eq!(under(&objects, "evt_race_body").len(), 2, "{objects:?}");

    // AND the winner runs to completion on its own body
    stack
        .rt
        .queue
        .enqueue(&key("evt_race_body"), Duration::ZERO)
        .await
        .unwrap();
    poll_until(
        &stack,
        "evt_race_body",
        Status::Completed,
        Duration::from_secs(30),
    )
    .await;
    check(&sdk, &stack, "after the winner completed").await;
}

/// The body is written, then the create fails (the table is not there: the receiver answers 503): the body that no
/// record will ever point at expires.
#[tokio::test]
async fn a_create_that_fails_after_its_put_leaves_a_body_that_expires() {
    let Some(sdk) = emulator().await else { return };
    let stack = stack(&sdk, QueueSettings::default(), "").await;
    let bucket = stack.rt.resources.bucket.clone().unwrap();
    let broken = DynamoLedger::new(
        stack.rt.ledger.client().clone(),
        format!("{}-gone", stack.rt.ledger.table()),
        Some(S3Payloads::new(S3Payloads::config(&sdk), bucket)),
        Duration::ZERO,
    );
    let failed = broken
        .create(created("evt_put_then_503", &big("evt_put_then_503")))
        .await;
    assert!(matches!(failed, Err(StoreError::Unavailable(_))), "{failed:?}");
    let (objects, records) = check(&sdk, &stack, "after the failed create").await;
    assert_eq!(
        (under(&objects, "evt_put_then_503").len(), records.len()),
        (1, 0),
        "{objects:?}"
    );
}

/// A worker that dies after its COMPLETED settle and before its body's countdown leaves the countdown owed in the
/// ledger (the record stays in the sparse index's `body#` partition); the sweeper starts it.
#[tokio::test]
async fn a_crash_between_the_settle_and_the_countdown_is_finished_by_the_sweeper() {
    let Some(sdk) = emulator().await else { return };
    let stack = stack(&sdk, QueueSettings::default(), "").await;
    let ledger = &stack.rt.ledger;
    let id = "evt_settled_then_died";
    assert_eq!(deliver(&stack, &big(id)).await.0, 200);
    // GIVEN the state such a worker leaves: claimed (its lease over), settled COMPLETED, no countdown
    let Claim::Claimed(_) = ledger
        .claim(&key(id), "dead-worker", Duration::from_millis(1))
        .await
        .unwrap()
    else {
        panic!("not claimed")
    };
    let completed = Settlement::Completed { retention: RETENTION };
    assert_eq!(
        ledger.settle(&key(id), "dead-worker", completed).await.unwrap(),
        Settled::Done
    );
    let records = records(&stack).await;
    let owed = record(&records, id);
    assert_eq!(owed.status, "COMPLETED");
    assert!(
        owed.index.as_deref().is_some_and(|p| p.starts_with("body#")),
        "the countdown is owed in the ledger: {owed:?}"
    );

    // WHEN the sweeper runs
    functions::sweeper(&stack.rt).await.unwrap();

    // THEN the body counts down from about the completion, and the record left the index
    let (_, records) = check(&sdk, &stack, "after the sweep").await;
    assert_eq!(record(&records, id).index, None);
    // AND a second sweep has nothing left to do
    functions::sweeper(&stack.rt).await.unwrap();
    check(&sdk, &stack, "after a second sweep").await;
}

/// A forced replay of an event that completed a moment ago, before its worker started the body's countdown: the
/// reopened event gets a copy of the body, so the countdown that lands after the replay hits only the old object.
#[tokio::test]
async fn a_forced_replay_racing_a_late_countdown_keeps_the_reopened_events_body() {
    let Some(sdk) = emulator().await else { return };
    let stack = stack(&sdk, QueueSettings::default(), "").await;
    let ledger = &stack.rt.ledger;
    let id = "evt_replayed_in_the_race";
    let body = big(id);
    assert_eq!(deliver(&stack, &body).await.0, 200);
    // GIVEN a worker that settled COMPLETED and has not started the countdown yet
    let Claim::Claimed(claimed) = ledger
        .claim(&key(id), "slow-worker", Duration::from_secs(60))
        .await
        .unwrap()
    else {
        panic!("not claimed")
    };
    // The body the claim read, as its record named it.
    let claimed_body = record(&records(&stack).await, id).body.clone();
    assert!(claimed_body.is_some(), "{claimed:?}: its body is not in S3");
    let completed = Settlement::Completed { retention: RETENTION };
    assert_eq!(
        ledger.settle(&key(id), "slow-worker", completed).await.unwrap(),
        Settled::Done
    );
    // WHEN an operator force-replays it, and then the worker's countdown lands
    assert_eq!(ledger.replay(&key(id), true).await.unwrap(), Replay::Replayed);
    ledger.completed(&key(id), "slow-worker").await.unwrap();

    // THEN the reopened event's body does not count down; the old one, which nothing points at, does
    let (objects, records) = check(&sdk, &stack, "after the replay and the late countdown").await;
    assert_eq!(under(&objects, id).len(), 2, "{objects:?}");
    assert_ne!(record(&records, id).body, claimed_body);

    // AND the reopened event runs to completion on its copy (its first message is still queued)
    poll_until(&stack, id, Status::Completed, Duration::from_secs(30)).await;
    check(&sdk, &stack, "after the replayed event completed").await;
    let read = ledger.get(&key(id)).await.unwrap().unwrap();
    assert_eq!(read.payload.as_ref(), body.as_bytes());
}

/// Dead events keep their bodies: one redriven into the dead-letter queue before any claim, and one that died after
/// a forced replay that raced its worker's late countdown. Both alarms recorded, both bodies kept.
#[tokio::test]
async fn a_dead_events_body_stays() {
    let Some(sdk) = emulator().await else { return };
    let stack = stack(&sdk, QueueSettings::default(), "max_attempts = 1").await;
    let ledger = &stack.rt.ledger;
    // GIVEN an event whose message is redriven into the DLQ before any claim
    let redriven = "evt_dead_unclaimed";
    assert_eq!(deliver(&stack, &big(redriven)).await.0, 200);
    let records = receive(&stack.sqs, &stack.rt.resources.queue_url, 5).await;
    assert_eq!(records.len(), 1);
    crate::stack::delete(&stack, &records[0]).await;
    let response = functions::alarm(&stack.rt, batch(records)).await;
    assert!(response.batch_item_failures.is_empty(), "{response:?}");

    // AND one completed, force-replayed before its worker's late countdown, then failing for good
    let replayed = "evt_dead_after_replay";
    ledger.create(created(replayed, &big(replayed))).await.unwrap();
    let Claim::Claimed(_claimed) = ledger
        .claim(&key(replayed), "slow-worker", Duration::from_secs(60))
        .await
        .unwrap()
    else {
        panic!("not claimed")
    };
    let completed = Settlement::Completed { retention: RETENTION };
    ledger
        .settle(&key(replayed), "slow-worker", completed)
        .await
        .unwrap();
    assert_eq!(
        ledger.replay(&key(replayed), true).await.unwrap(),
        Replay::Replayed
    );
    ledger.completed(&key(replayed), "slow-worker").await.unwrap();
    stack
        .switch
        .failing
        .store(true, std::sync::atomic::Ordering::SeqCst);
    stack
        .rt
        .queue
        .enqueue(&key(replayed), Duration::ZERO)
        .await
        .unwrap();
    poll_until(&stack, replayed, Status::Dead, Duration::from_secs(30)).await;
    // The sweeper records any alarm still owed.
    functions::sweeper(&stack.rt).await.unwrap();

    // THEN both are DEAD with their alarms recorded, and neither body expires
    let (objects, records) = check(&sdk, &stack, "after the deaths").await;
    for id in [redriven, replayed] {
        let r = record(&records, id);
        assert_eq!(r.status, "DEAD", "{r:?}");
        let event = ledger.get(&key(id)).await.unwrap().unwrap();
        assert!(event.notified_at.is_some(), "{id}: alarm not recorded");
        let (_, tags, _) = objects
            .iter()
            .find(|(k, _, _)| Some(k) == r.body.as_ref())
            .unwrap();
        assert_eq!(tags, &[("inbox-body".to_owned(), "kept".to_owned())], "{id}");
    }
}

/// The countdown acts on the object the record names: one of an older layout counts down like any, and a body
/// kept in the item asks nothing of S3, however large it was before compression.
#[tokio::test]
async fn the_countdown_acts_on_the_object_the_record_names() {
    let Some(sdk) = emulator().await else { return };
    let stack = stack(&sdk, QueueSettings::default(), "").await;
    let ledger = &stack.rt.ledger;
    let bucket = stack.rt.resources.bucket.clone().unwrap();
    let s3 = aws_sdk_s3::Client::from_conf(S3Payloads::config(&sdk));
    // GIVEN a record of an older layout: its object named otherwise, written untagged
    let id = "evt_older_layout";
    let old_key = format!("payloads/stripe/{id}/written-by-an-older-release");
    let body = big(id);
    s3.put_object()
        .bucket(&bucket)
        .key(&old_key)
        .body(zstd::bulk::compress(body.as_bytes(), 3).unwrap().into())
        .send()
        .await
        .unwrap();
    let now = now_ms().to_string();
    let item: HashMap<String, AttributeValue> = [
        ("pk", key(id).pk()),
        ("source", "stripe".to_owned()),
        ("event_id", id.to_owned()),
        ("status", "RECEIVED".to_owned()),
        ("payload_sha256", "0".repeat(64)),
        ("headers", "[]".to_owned()),
        ("payload_s3_key", old_key.clone()),
        ("payload_encoding", "zstd".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), AttributeValue::S(v)))
    .chain(["received_at", "updated_at"].map(|k| (k.to_owned(), AttributeValue::N(now.clone()))))
    .collect();
    ledger
        .client()
        .put_item()
        .table_name(ledger.table())
        .set_item(Some(item))
        .send()
        .await
        .unwrap();
    // WHEN it runs to completion THEN its own object counts down
    stack.rt.queue.enqueue(&key(id), Duration::ZERO).await.unwrap();
    poll_until(&stack, id, Status::Completed, Duration::from_secs(30)).await;
    let (objects, _) = check(&sdk, &stack, "after the older record completed").await;
    assert_eq!(under(&objects, id).len(), 1, "{objects:?}");

    // GIVEN a body of 300 KB that compresses into the item, through a ledger whose S3 calls are counted
    let counter = CallCounter::default();
    let counted = DynamoLedger::new(
        ledger.client().clone(),
        ledger.table(),
        Some(S3Payloads::new(
            S3Payloads::config(&sdk)
                .to_builder()
                .interceptor(counter.clone())
                .build(),
            bucket,
        )),
        Duration::ZERO,
    );
    let inline = serde_json::json!({"id": "evt_inline", "pad": "ab".repeat(150 * 1024)}).to_string();
    counted.create(created("evt_inline", &inline)).await.unwrap();
    let Claim::Claimed(claimed) = counted
        .claim(&key("evt_inline"), "w", Duration::from_secs(60))
        .await
        .unwrap()
    else {
        panic!("not claimed")
    };
    assert_eq!(claimed.payload.len(), inline.len());
    let completed = Settlement::Completed { retention: RETENTION };
    counted.settle(&key("evt_inline"), "w", completed).await.unwrap();
    // WHEN its body's retention starts THEN S3 is not asked anything
    counted.completed(&key("evt_inline"), "w").await.unwrap();
    let calls = counter.take();
    assert!(
        calls.keys().all(|c| !c.starts_with("s3.")),
        "an inline body asked S3: {calls:?}"
    );
    check(&sdk, &stack, "after the inline event completed").await;
}

/// A lifecycle rule as both sides state it: id, status, filter, and what it expires.
fn rule_of_template(doc: &Yaml, rule: &Yaml) -> String {
    let days = |v: &Yaml| match v {
        Yaml::Integer(n) => Some(*n),
        Yaml::String(name) => doc["Parameters"][name.as_str()]["Default"].as_i64(),
        _ => None,
    };
    let tags: Vec<String> = rule["TagFilters"]
        .as_vec()
        .map(|list| {
            list.iter()
                .map(|t| format!("{}={}", t["Key"].as_str().unwrap(), t["Value"].as_str().unwrap()))
                .collect()
        })
        .unwrap_or_default();
    format!(
        "{} {} prefix={:?} tags={tags:?} days={:?} delete_markers={:?} noncurrent_days={:?} abort_days={:?}",
        rule["Id"].as_str().unwrap(),
        rule["Status"].as_str().unwrap(),
        rule["Prefix"].as_str().unwrap_or(""),
        days(&rule["ExpirationInDays"]),
        rule["ExpiredObjectDeleteMarker"].as_bool(),
        days(&rule["NoncurrentVersionExpiration"]["NoncurrentDays"]),
        days(&rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"]),
    )
}

fn rule_of_bucket(rule: &aws_sdk_s3::types::LifecycleRule) -> String {
    let filter = rule.filter();
    let tags: Vec<String> = filter
        .and_then(|f| f.tag())
        .map(|t| vec![format!("{}={}", t.key(), t.value())])
        .unwrap_or_default();
    format!(
        "{} {} prefix={:?} tags={tags:?} days={:?} delete_markers={:?} noncurrent_days={:?} abort_days={:?}",
        rule.id().unwrap(),
        rule.status().as_str(),
        filter.and_then(|f| f.prefix()).unwrap_or(""),
        rule.expiration().and_then(|e| e.days()).map(i64::from),
        rule.expiration().and_then(|e| e.expired_object_delete_marker()),
        rule.noncurrent_version_expiration()
            .and_then(|e| e.noncurrent_days())
            .map(i64::from),
        rule.abort_incomplete_multipart_upload()
            .and_then(|a| a.days_after_initiation())
            .map(i64::from),
    )
}

/// `inbox aws init` gives its bucket the template's lifecycle rules, and a pending body outlives any message.
#[tokio::test]
async fn the_templates_and_aws_inits_lifecycle_rules_agree() {
    let Some(sdk) = emulator().await else { return };
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/infra/template.yaml");
    let doc = YamlLoader::load_from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap()
        .remove(0);
    let declared: BTreeSet<String> = doc["Resources"]["PayloadBucket"]["Properties"]
        ["LifecycleConfiguration"]["Rules"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|r| rule_of_template(&doc, r))
        .collect();
    let resources = create_stack(&sdk, &prefix(), QueueSettings::default())
        .await
        .unwrap();
    let s3 = aws_sdk_s3::Client::from_conf(S3Payloads::config(&sdk));
    let set = s3
        .get_bucket_lifecycle_configuration()
        .bucket(resources.bucket.unwrap())
        .send()
        .await
        .expect("the bucket has lifecycle rules");
    let applied: BTreeSet<String> = set.rules().iter().map(rule_of_bucket).collect();
    eprintln!("template: {declared:#?}\naws init: {applied:#?}");
    assert_eq!(applied, declared);

    // The pending rule outlives the longest a message waits for the claim or burial that keeps its body: the
    // dead-letter queue's retention, counted from the first send.
    let dlq_days = doc["Resources"]["DeadLetterQueue"]["Properties"]["MessageRetentionPeriod"]
        .as_i64()
        .unwrap()
        / 86_400;
    let work_days = doc["Resources"]["WorkQueue"]["Properties"]["MessageRetentionPeriod"]
        .as_i64()
        .unwrap()
        / 86_400;
    assert!(work_days <= dlq_days);
    assert!(
        declared
            .iter()
            .any(|r| r.contains("tags=[\"inbox-body=pending\"]")
                && r.contains(&format!("days=Some({})", inbox_core::aws::s3::PENDING_DAYS))),
        "{declared:?}"
    );
    assert!(i64::from(inbox_core::aws::s3::PENDING_DAYS) > dlq_days);
}
