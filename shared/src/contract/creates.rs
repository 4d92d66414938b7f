//! Creates and duplicates: one record per `(source, event_id)`, durable once answered, the first payload standing;
//! a batch in one write; a create claimed in its own write where the store claims in a create; an announced create
//! out of the sweeper's index where the store trusts announcements.

use std::time::Duration;

use super::{eventually, ids, key, new_event, Harness, ATOMICITY, LONG, RETAIN};
use crate::model::{NewEvent, Origin, Status};
use crate::ports::{Claim, Created, Settled};

pub async fn create_is_conditional_and_durable(h: &dyn Harness) {
    let l = h.open(LONG).await;
    assert_eq!(l.create(new_event("e1", "{}")).await.unwrap(), Created::New);
    let since = l.get(&key("e1")).await.unwrap().unwrap().updated_at;
    assert_eq!(
        l.create(new_event("e1", "{\"other\":1}")).await.unwrap(),
        Created::Duplicate {
            event_id: key("e1").event_id,
            status: Status::Received,
            payload_sha256: "sha-of-{}".into(),
            origin: Origin::Webhook,
            since,
        },
        "the first payload stands"
    );
    drop(l);
    // GIVEN a fresh handle on the same store WHEN reading THEN the first payload is there.
    let l = h.open(LONG).await;
    let e = l.get(&key("e1")).await.unwrap().unwrap();
    assert_eq!(e.payload.as_ref(), b"{}");
    assert_eq!(e.status, Status::Received);
    assert_eq!(e.event_type.as_deref(), Some("t.created"));
    assert_eq!(
        e.headers,
        vec![("content-type".to_owned(), "application/json".to_owned())]
    );
    assert_eq!(e.attempts, 0);
    assert_eq!(
        (e.received_at, e.updated_at),
        (h.now(), h.now()),
        "stamped on the store's clock"
    );
    assert!(l.get(&key("absent")).await.unwrap().is_none());
}

pub async fn concurrent_creates_of_one_event_make_one_record(h: &dyn Harness) {
    let l = h.open(LONG).await;
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let l = l.clone();
            tokio::spawn(async move { l.create(new_event("same", "{}")).await.unwrap() })
        })
        .collect();
    let mut created = 0;
    for t in tasks {
        if t.await.unwrap() == Created::New {
            created += 1;
        }
    }
    assert_eq!(created, 1, "{ATOMICITY}");
    assert_eq!(l.list(&super::all(100)).await.unwrap().len(), 1);
}

/// `create_claimed`: a store that claims in a create ([`Capabilities::claims_in_create`]) makes the record
/// PROCESSING under the caller's lease in the create's own write and answers it; any other creates RECEIVED and
/// answers no record. Either way a duplicate claims nothing.
///
/// [`Capabilities::claims_in_create`]: crate::ports::Capabilities::claims_in_create
pub async fn a_create_claimed_is_processing_under_its_lease_where_the_store_claims_in_a_create(
    h: &dyn Harness,
) {
    let l = h.open(LONG).await;
    let claims_in_create = l.capabilities().claims_in_create;
    let body = r#"{"id":"c1","data":{"object":"charge","amount":2000}}"#;
    let (created, claimed) = l
        .create_claimed(new_event("c1", body), "w:1", LONG)
        .await
        .unwrap();
    assert_eq!(created, Created::New);
    assert_eq!(
        claimed.is_some(),
        claims_in_create,
        "claimed in the create: {claimed:?}"
    );
    let stored = l.get(&key("c1")).await.unwrap().unwrap();
    match claimed {
        Some(event) => {
            assert_eq!(event.status, Status::Processing);
            assert_eq!(event.attempts, 1);
            assert_eq!(event.lease_owner.as_deref(), Some("w:1"));
            assert_eq!(event.lease_until, Some(h.now() + LONG.as_millis() as i64));
            assert_eq!(event.payload.as_ref(), body.as_bytes());
            assert_eq!(event.headers, new_event("c1", body).headers);
            // The record answered is the record stored, to the field.
            assert_eq!(event, stored);
            // Another worker cannot take it while the lease lives; its owner settles it.
            assert_eq!(
                l.claim(&key("c1"), "w:2", LONG).await.unwrap(),
                Claim::OwnedElsewhere
            );
            assert_eq!(
                l.settle(&key("c1"), "w:2", RETAIN).await.unwrap(),
                Settled::LeaseLost
            );
            assert_eq!(l.settle(&key("c1"), "w:1", RETAIN).await.unwrap(), Settled::Done);
        }
        None => {
            assert_eq!(stored.status, Status::Received);
            assert_eq!(stored.attempts, 0);
            assert!(matches!(
                l.claim(&key("c1"), "w:2", LONG).await.unwrap(),
                Claim::Claimed(_)
            ));
            assert_eq!(l.settle(&key("c1"), "w:2", RETAIN).await.unwrap(), Settled::Done);
        }
    }
    let (again, claimed) = l
        .create_claimed(new_event("c1", body), "w:3", LONG)
        .await
        .unwrap();
    assert!(
        matches!(
            again,
            Created::Duplicate {
                status: Status::Completed,
                ..
            }
        ),
        "{again:?}"
    );
    assert_eq!(claimed, None);
    assert_eq!(
        l.get(&key("c1")).await.unwrap().unwrap().status,
        Status::Completed
    );
}

/// `create_announced`: where the queue vouches for a record whose message went out first
/// ([`Capabilities::trusts_announcements`]), it stays out of the sweeper's index; anywhere else it is indexed as any
/// create. Either way it is the same record, claimable, and a duplicate of itself.
///
/// [`Capabilities::trusts_announcements`]: crate::ports::Capabilities::trusts_announcements
pub async fn an_announced_create_is_left_out_of_the_sweep_index_only_where_the_store_trusts_announcements(
    h: &dyn Harness,
) {
    let l = h.open(Duration::ZERO).await;
    assert_eq!(
        l.create_announced(new_event("announced", "a")).await.unwrap(),
        Created::New
    );
    assert_eq!(l.create(new_event("written", "w")).await.unwrap(), Created::New);
    let expected: &[&str] = if l.capabilities().trusts_announcements {
        &["written"]
    } else {
        &["announced", "written"]
    };
    let due = eventually(
        &*l,
        || l.due(Duration::ZERO, 100),
        |d| d.as_ref().is_ok_and(|d| d.len() >= expected.len()),
    )
    .await;
    let mut due = ids(&due.unwrap());
    due.sort();
    assert_eq!(due, expected);
    let e = l.get(&key("announced")).await.unwrap().unwrap();
    assert_eq!((e.status, e.payload.as_ref()), (Status::Received, &b"a"[..]));
    assert!(matches!(
        l.create_announced(new_event("announced", "b")).await.unwrap(),
        Created::Duplicate {
            status: Status::Received,
            ..
        }
    ));
    assert!(matches!(
        l.claim(&key("announced"), "w", LONG).await.unwrap(),
        Claim::Claimed(_)
    ));
}

/// A batched delivery: every item created (or found) in one write, answered in order; its retry finds every item
/// stored, and stores none twice. Its items had no message sent ahead of them: every store indexes them.
pub async fn a_batch_is_created_in_one_write_and_its_retry_finds_the_items_stored(h: &dyn Harness) {
    let l = h.open(Duration::ZERO).await;
    l.create(new_event("b1", "first")).await.unwrap();
    let batch = || -> Vec<NewEvent> {
        (0..3)
            .map(|i| new_event(&format!("b{i}"), &format!("item {i}")))
            .collect()
    };
    let answers = l.create_batch(batch()).await.unwrap();
    assert_eq!(answers.len(), 3);
    assert_eq!((&answers[0], &answers[2]), (&Created::New, &Created::New));
    assert!(
        matches!(&answers[1], Created::Duplicate { event_id, .. } if event_id.as_str() == "b1"),
        "{answers:?}"
    );
    assert_eq!(
        l.get(&key("b1")).await.unwrap().unwrap().payload.as_ref(),
        b"first",
        "the first payload stands"
    );
    for i in [0, 2] {
        let e = l.get(&key(&format!("b{i}"))).await.unwrap().unwrap();
        assert_eq!(e.payload.as_ref(), format!("item {i}").as_bytes());
        assert_eq!((e.status, e.received_at), (Status::Received, h.now()));
    }
    let retried = l.create_batch(batch()).await.unwrap();
    assert!(
        retried.iter().all(|c| matches!(c, Created::Duplicate { .. })),
        "{retried:?}"
    );
    assert_eq!(l.list(&super::all(100)).await.unwrap().len(), 3);
    let due = eventually(
        &*l,
        || l.due(Duration::ZERO, 100),
        |d| d.as_ref().is_ok_and(|d| d.len() >= 3),
    )
    .await;
    assert_eq!(
        due.unwrap().len(),
        3,
        "a batch's items are the sweeper's until their messages go out"
    );
    assert!(l.create_batch(Vec::new()).await.unwrap().is_empty());
}

/// No item of a batch looks for resent bodies, whatever it asks (a batch's scheme signs each id with its body): a
/// body another live event holds is stored unmarked, and no item's body is remembered for the creates after it.
pub async fn a_batch_item_looks_for_no_resent_bodies(h: &dyn Harness) {
    use crate::model::ResentBodies;
    let l = h.open(LONG).await;
    let marked = |id: &str, body: &str| NewEvent {
        resent_bodies: ResentBodies::Marked { within: LONG },
        ..new_event(id, body)
    };
    assert_eq!(l.create(marked("h1", "same")).await.unwrap(), Created::New);
    let answers = l
        .create_batch(vec![marked("b1", "same"), marked("b2", "other")])
        .await
        .unwrap();
    assert_eq!(answers, [Created::New, Created::New]);
    assert_eq!(l.get(&key("b1")).await.unwrap().unwrap().resent_of, None);
    assert_eq!(
        l.create(marked("x2", "other")).await.unwrap(),
        Created::New,
        "a batch item's body was remembered"
    );
}
