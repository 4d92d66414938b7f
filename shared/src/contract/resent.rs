//! Resent bodies: a body stored again under a fresh id of the same source and type is its own event, marked with
//! the first live holder's id, or, where the source refuses resent bodies, answered as the stored event. Signed
//! nonces: a second event under one signed delivery's nonce is answered as the stored event.

use std::time::Duration;

use super::{all, key, new_event, Harness, LONG};
use crate::model::{EventId, NewEvent, ResentBodies, Status};
use crate::ports::Created;

/// Where the scheme signs the body but not the id, a captured delivery resent under fresh
/// ids is a duplicate of the stored event.
/// A body stored again under a fresh id of the same type is its own event by default, marked with the id that
/// held it first; distinct events do carry identical bytes.
pub async fn a_body_resent_under_a_fresh_id_is_stored_and_marked(h: &dyn Harness) {
    let l = h.open(LONG).await;
    let marked = |id: &str, body: &str| NewEvent {
        resent_bodies: ResentBodies::Marked { within: LONG },
        ..new_event(id, body)
    };
    assert_eq!(l.create(marked("e1", "same")).await.unwrap(), Created::New);
    assert_eq!(
        l.create(marked("e2", "same")).await.unwrap(),
        Created::Resent {
            of: EventId::parse("e1").unwrap()
        }
    );
    let e2 = l
        .get(&key("e2"))
        .await
        .unwrap()
        .expect("a resent body was dropped");
    assert_eq!((e2.payload.as_ref(), e2.status), (&b"same"[..], Status::Received));
    assert_eq!(e2.resent_of.as_ref().map(EventId::as_str), Some("e1"));
    assert_eq!(l.get(&key("e1")).await.unwrap().unwrap().resent_of, None);
    // A third copy names the first holder too.
    assert_eq!(
        l.create(marked("e2b", "same")).await.unwrap(),
        Created::Resent {
            of: EventId::parse("e1").unwrap()
        }
    );
    // A retry of either is its own duplicate; the same body under another type is not a resend.
    for id in ["e1", "e2"] {
        assert!(matches!(
            l.create(marked(id, "same")).await.unwrap(),
            Created::Duplicate { event_id, .. } if event_id.as_str() == id
        ));
    }
    let other_type = NewEvent {
        event_type: Some("t.deleted".into()),
        ..marked("e3", "same")
    };
    assert_eq!(l.create(other_type).await.unwrap(), Created::New);
    // Sources that do not look for resent bodies store it unmarked.
    assert_eq!(l.create(new_event("e4", "same")).await.unwrap(), Created::New);
    assert_eq!(l.get(&key("e4")).await.unwrap().unwrap().resent_of, None);
    assert_eq!(l.list(&all(10)).await.unwrap().len(), 5);
}

/// A source that opts in refuses a resent body of the same type as a duplicate of the stored event.
pub async fn a_refusing_source_answers_a_resent_body_as_the_stored_event(h: &dyn Harness) {
    let l = h.open(LONG).await;
    let refused = |id: &str, body: &str| NewEvent {
        resent_bodies: ResentBodies::Refused { within: LONG },
        ..new_event(id, body)
    };
    assert_eq!(l.create(refused("e1", "same")).await.unwrap(), Created::New);
    let Created::Duplicate { event_id, .. } = l.create(refused("e2", "same")).await.unwrap() else {
        panic!("a resent body was stored under a fresh id")
    };
    assert_eq!(event_id.as_str(), "e1");
    assert!(l.get(&key("e2")).await.unwrap().is_none());
    assert!(matches!(
        l.create(refused("e1", "same")).await.unwrap(),
        Created::Duplicate { event_id, .. } if event_id.as_str() == "e1"
    ));
    // Keyed on the type too, and on the body.
    let other_type = NewEvent {
        event_type: Some("t.deleted".into()),
        ..refused("e3", "same")
    };
    assert_eq!(l.create(other_type).await.unwrap(), Created::New);
    assert_eq!(l.create(refused("e4", "other")).await.unwrap(), Created::New);
}

/// A body is remembered for its window (the retention): within it a fresh id is a resend, from its end on the same
/// body under a fresh id is a first delivery, and is remembered in its turn. (A store that keeps the window's end in
/// seconds rounds it down: it forgets a body a second early at most.)
pub async fn a_body_past_its_window_is_stored_unmarked(h: &dyn Harness) {
    let l = h.open(LONG).await;
    let window = Duration::from_secs(60);
    let marked = |id: &str| NewEvent {
        resent_bodies: ResentBodies::Marked { within: window },
        ..new_event(id, "same")
    };
    assert_eq!(l.create(marked("e1")).await.unwrap(), Created::New);
    h.advance(window - Duration::from_secs(1));
    assert_eq!(
        l.create(marked("e2")).await.unwrap(),
        Created::Resent {
            of: EventId::parse("e1").unwrap()
        }
    );
    h.advance(Duration::from_secs(1));
    assert_eq!(l.create(marked("e3")).await.unwrap(), Created::New);
    assert_eq!(l.get(&key("e3")).await.unwrap().unwrap().resent_of, None);
    assert_eq!(
        l.create(marked("e4")).await.unwrap(),
        Created::Resent {
            of: EventId::parse("e3").unwrap()
        }
    );
}

/// Where the signature covers a nonce of its own per delivery but neither the id nor the body (Mailgun's token), the
/// nonce is remembered in the body's place: another id under a nonce a live event holds, whatever its body, is
/// answered as a duplicate of that event and stores nothing, always (a nonce is never another event's, so it is
/// refused where a body would be marked); the same id again is its own duplicate; another nonce is another event.
pub async fn a_signed_nonce_under_another_id_is_answered_as_the_event_it_came_with(h: &dyn Harness) {
    let l = h.open(LONG).await;
    let signed = |id: &str, body: &str, nonce: &str| NewEvent {
        resent_bodies: ResentBodies::signed_nonce(nonce.as_bytes(), LONG),
        ..new_event(id, body)
    };
    assert_eq!(l.create(signed("e1", "first", "n1")).await.unwrap(), Created::New);
    // The captured signature beside another event, under a fresh id.
    let Created::Duplicate {
        event_id,
        payload_sha256,
        ..
    } = l.create(signed("e2", "forged", "n1")).await.unwrap()
    else {
        panic!("a second event under one signed nonce was stored")
    };
    assert_eq!(
        (event_id.as_str(), payload_sha256.as_str()),
        ("e1", "sha-of-first")
    );
    assert!(l.get(&key("e2")).await.unwrap().is_none());
    // The holder stays the first event: a third try names it too.
    assert!(matches!(
        l.create(signed("e2b", "forged again", "n1")).await.unwrap(),
        Created::Duplicate { event_id, .. } if event_id.as_str() == "e1"
    ));
    // The delivery sent again (a retry: same id, same nonce) is its own duplicate, as is a retry under a fresh nonce.
    for nonce in ["n1", "n9"] {
        assert!(matches!(
            l.create(signed("e1", "first", nonce)).await.unwrap(),
            Created::Duplicate { event_id, .. } if event_id.as_str() == "e1"
        ));
    }
    // Another delivery (another nonce) is another event, whatever its body.
    assert_eq!(
        l.create(signed("e3", "forged", "n2")).await.unwrap(),
        Created::New
    );
    let ids: Vec<String> = l
        .list(&all(10))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.event_id.to_string())
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(
        ids.contains(&"e1".to_owned()) && ids.contains(&"e3".to_owned()),
        "{ids:?}"
    );
}
