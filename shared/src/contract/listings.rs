//! Listings and the summary: newest first, filtered by status, source, type, id and time, paged by a cursor that
//! neither skips nor repeats; counts that agree with the listings where the store counts; nothing but events.

use std::time::Duration;

use super::{all, eventually, ids, key, new_event, of_status, source, Harness, LONG};
use crate::model::{EventId, NewEvent, ResentBodies, SourceName, Status};
use crate::ports::{Checkpoint, Created, Cursor, ListFilter};

pub async fn list_filters_by_status_and_source(h: &dyn Harness) {
    let l = h.open(LONG).await;
    for i in 0..5 {
        l.create(new_event(&format!("e{i}"), "b")).await.unwrap();
        // Distinct receive times, so "newest first" is one order.
        h.advance(Duration::from_millis(2));
    }
    l.claim(&key("e0"), "w", LONG).await.unwrap();
    let (received, processing) = (of_status(Status::Received), of_status(Status::Processing));
    let received = eventually(
        &*l,
        || l.list(&received),
        |r| r.as_ref().is_ok_and(|r| r.len() == 4),
    )
    .await
    .unwrap();
    assert_eq!(ids(&received), ["e4", "e3", "e2", "e1"], "newest first");
    // Lists carry no payloads: a listing answers `Record`s, which have none.
    let processing = eventually(
        &*l,
        || l.list(&processing),
        |r| r.as_ref().is_ok_and(|r| r.len() == 1),
    )
    .await;
    assert_eq!(ids(&processing.unwrap()), ["e0"]);
    let other = SourceName::parse("other").unwrap();
    for status in [None, Some(Status::Received), Some(Status::Dead)] {
        let filter = ListFilter {
            status,
            source: Some(other.clone()),
            limit: 100,
            ..Default::default()
        };
        assert!(l.list(&filter).await.unwrap().is_empty(), "{status:?}");
    }
    let mine = ListFilter {
        status: Some(Status::Received),
        source: Some(source()),
        limit: 2,
        ..Default::default()
    };
    assert_eq!(ids(&l.list(&mine).await.unwrap()), ["e4", "e3"]);
    assert_eq!(ids(&l.list(&all(2)).await.unwrap()), ["e4", "e3"]);
    assert!(l.list(&of_status(Status::Completed)).await.unwrap().is_empty());
}

/// The console's filters: type, id, a time range, and cursor pages that neither skip nor repeat.
pub async fn list_filters_by_type_id_time_and_pages_with_a_cursor(h: &dyn Harness) {
    let l = h.open(LONG).await;
    let mut times = Vec::new();
    for i in 0..7 {
        let mut e = new_event(&format!("e{i}"), &format!("b{i}"));
        e.event_type = Some(if i % 2 == 0 { "even" } else { "odd" }.into());
        l.create(e).await.unwrap();
        times.push(l.get(&key(&format!("e{i}"))).await.unwrap().unwrap().received_at);
        h.advance(Duration::from_millis(2));
    }
    // GIVEN two of them dead, so the dead listing comes from the sparse index where the store has one.
    for id in ["e1", "e4"] {
        l.mark_dead(&key(id), "gone").await.unwrap();
    }
    let filter = |f: ListFilter| ListFilter { limit: 100, ..f };
    let odd = filter(ListFilter {
        event_type: Some("odd".into()),
        ..Default::default()
    });
    assert_eq!(ids(&l.list(&odd).await.unwrap()), ["e5", "e3", "e1"]);
    let one = filter(ListFilter {
        event_id: Some(EventId::parse("e2").unwrap()),
        ..Default::default()
    });
    assert_eq!(ids(&l.list(&one).await.unwrap()), ["e2"]);
    let window = filter(ListFilter {
        received_from: Some(times[2]),
        received_to: Some(times[5]),
        ..Default::default()
    });
    assert_eq!(ids(&l.list(&window).await.unwrap()), ["e4", "e3", "e2"]);
    let dead_even = filter(ListFilter {
        status: Some(Status::Dead),
        event_type: Some("even".into()),
        ..Default::default()
    });
    let dead_even = eventually(
        &*l,
        || l.list(&dead_even),
        |r| r.as_ref().is_ok_and(|r| r.len() == 1),
    )
    .await;
    assert_eq!(ids(&dead_even.unwrap()), ["e4"]);
    // WHEN paging by threes THEN every event comes once, newest first.
    let mut seen = Vec::new();
    let mut before = None;
    loop {
        let page = l
            .list(&ListFilter {
                limit: 3,
                before: before.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        before = Some(Cursor::after(last));
        seen.extend(ids(&page));
    }
    assert_eq!(seen, ["e6", "e5", "e4", "e3", "e2", "e1", "e0"]);
    // The overview's counts agree with the listings.
    let summary = eventually(
        &*l,
        || l.summary(),
        |s| {
            s.as_ref()
                .is_ok_and(|s| s.by_status.contains(&(Status::Dead, Some(2))))
        },
    )
    .await
    .unwrap();
    if l.lists_by_scan(&of_status(Status::Received)) {
        // A store that would read the whole table to list received events does not count them in the overview.
        assert!(
            summary.by_status.contains(&(Status::Received, None)),
            "{summary:?}"
        );
        assert_eq!(summary.oldest_open, None);
    } else {
        assert!(
            summary.by_status.contains(&(Status::Received, Some(5))),
            "{summary:?}"
        );
        assert_eq!(summary.oldest_open, Some(times[0]));
    }
    assert!(
        summary.by_source.contains(&(source(), Status::Dead, 2)),
        "{summary:?}"
    );
    // An id filtered without its source is found under every source that has it.
    let mut elsewhere = new_event("e2", "b-elsewhere");
    elsewhere.key.source = SourceName::parse("other").unwrap();
    l.create(elsewhere).await.unwrap();
    let mut sources: Vec<String> = l
        .list(&one)
        .await
        .unwrap()
        .iter()
        .map(|e| format!("{}/{}", e.source.as_str(), e.event_id.as_str()))
        .collect();
    sources.sort();
    assert_eq!(sources, ["other/e2", "src/e2"]);
}

/// Body markers and checkpoints share the store with the events: no listing, filter, index or count ever sees
/// them as events, whatever kind of item came first.
pub async fn listings_and_indexes_hold_only_events(h: &dyn Harness) {
    let l = h.open(Duration::ZERO).await;
    l.save_checkpoint(&source(), &Checkpoint::default())
        .await
        .unwrap();
    for (id, bodies) in [
        ("e1", ResentBodies::Marked { within: LONG }),
        ("e2", ResentBodies::Refused { within: LONG }),
    ] {
        let event = NewEvent {
            resent_bodies: bodies,
            ..new_event(id, id)
        };
        assert_eq!(l.create(event).await.unwrap(), Created::New);
        // Distinct receive times, so "newest first" is one order.
        h.advance(Duration::from_millis(1));
    }
    let listed = l.list(&all(100)).await.unwrap();
    assert_eq!(ids(&listed), ["e2", "e1"], "{listed:?}");
    for status in Status::ALL {
        let want: &[&str] = if status == Status::Received {
            &["e2", "e1"]
        } else {
            &[]
        };
        let listed = l.list(&of_status(status)).await.unwrap();
        assert_eq!(ids(&listed), want, "{status}");
    }
    let by_source = ListFilter {
        source: Some(source()),
        limit: 100,
        ..Default::default()
    };
    assert_eq!(l.list(&by_source).await.unwrap().len(), 2);
    // A minute on, every one of them is due (no grace: they are due at once).
    h.advance(Duration::from_secs(60));
    let due = eventually(
        &*l,
        || async { l.due(Duration::ZERO, 100).await.unwrap() },
        |d| d.len() >= 2,
    )
    .await;
    assert_eq!(due.len(), 2, "{due:?}");
    let summary = l.summary().await.unwrap();
    let counted: u64 = summary.by_status.iter().filter_map(|(_, n)| *n).sum();
    assert!(counted <= 2, "{summary:?}");
}
