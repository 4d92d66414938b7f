//! Replay: one event (CSRF token and Origin), two at once, and a filter's after its dry run.

use inbox_core::ports::Store;

use super::*;
use crate::{replay_event, Replayed};

#[tokio::test]
async fn replaying_one_event_needs_the_csrf_token_and_the_same_origin() {
    let app = spawn(None).await;
    put(&app.ledger, "stripe", "d1", b"{}", Some(Status::Dead)).await;
    let page = app.page("/event?source=stripe&id=d1").await;
    let csrf = csrf_of(&page);
    let origin = app.origin();
    let form = |t: &'static str| vec![("source", "stripe"), ("id", "d1"), ("csrf", t)];
    // Missing and wrong CSRF tokens.
    let r = app
        .post(
            "/event/replay",
            Some(&origin),
            &[("source", "stripe"), ("id", "d1")],
        )
        .await;
    assert_eq!(r.status(), 403);
    let r = app.post("/event/replay", Some(&origin), &form("00ff")).await;
    assert_eq!(r.status(), 403);
    // A cross-site origin, and none at all, with the right token.
    let good: Vec<(&str, &str)> = vec![("source", "stripe"), ("id", "d1"), ("csrf", &csrf)];
    let r = app
        .post("/event/replay", Some("http://evil.example"), &good)
        .await;
    assert_eq!(r.status(), 403);
    let r = app.post("/event/replay", None, &good).await;
    assert_eq!(r.status(), 403);
    let r = app
        .http
        .post(format!("{}/event/replay", app.base))
        .header("origin", &origin)
        .header("sec-fetch-site", "cross-site")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("source=stripe&id=d1&csrf={csrf}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(
        app.status_of("stripe", "d1").await,
        Status::Dead,
        "nothing changed"
    );
    // WHEN the console's own form posts THEN it replays, once.
    let r = app.post("/event/replay", Some(&origin), &good).await;
    assert_eq!(r.status(), 303);
    let to = r.headers()["location"].to_str().unwrap().to_owned();
    assert!(to.ends_with("flash=replayed"), "{to}");
    assert_eq!(app.status_of("stripe", "d1").await, Status::Received);
    assert!(app.page(&to).await.contains("Replayed: it is RECEIVED again"));
    let again = app.post("/event/replay", Some(&origin), &good).await;
    assert!(again.headers()["location"]
        .to_str()
        .unwrap()
        .ends_with("flash=skipped"));
    // A GET never changes state.
    assert_eq!(app.get("/event/replay?source=stripe&id=d1").await.status(), 405);
}

#[tokio::test]
async fn two_replays_at_once_replay_once() {
    let app = spawn(None).await;
    put(&app.ledger, "stripe", "race", b"{}", Some(Status::Dead)).await;
    let k = key("stripe", "race");
    let l: &dyn Store = app.ledger.as_ref();
    let (a, b) = tokio::join!(replay_event(l, None, &k, false), replay_event(l, None, &k, false));
    let outcomes = [a.unwrap(), b.unwrap()];
    assert_eq!(
        outcomes.iter().filter(|o| **o == Replayed::Replayed).count(),
        1,
        "{outcomes:?}"
    );
}

#[tokio::test]
async fn a_bulk_replay_counts_first_then_replays_what_was_confirmed() {
    let app = spawn(None).await;
    for i in 0..5 {
        put(&app.ledger, "stripe", &format!("d{i}"), b"{}", Some(Status::Dead)).await;
    }
    put(&app.ledger, "github", "gd", b"{}", Some(Status::Dead)).await;
    put(&app.ledger, "stripe", "ok", b"{}", Some(Status::Completed)).await;
    let confirm = app.page("/replay?status=DEAD&source=stripe").await;
    assert!(confirm.contains("id=\"count\">5<"), "the dry run counts");
    assert_eq!(
        app.status_of("stripe", "d0").await,
        Status::Dead,
        "a dry run changes nothing"
    );
    let csrf = csrf_of(&confirm);
    let origin = app.origin();
    // Without the token: refused.
    let r = app
        .post(
            "/replay",
            Some(&origin),
            &[("status", "DEAD"), ("source", "stripe"), ("expected", "5")],
        )
        .await;
    assert_eq!(r.status(), 403);
    // A count that no longer matches asks again.
    let stale = [
        ("status", "DEAD"),
        ("source", "stripe"),
        ("expected", "4"),
        ("csrf", csrf.as_str()),
    ];
    let r = app.post("/replay", Some(&origin), &stale).await;
    assert!(r.text().await.unwrap().contains("id=\"count\">5<"));
    assert_eq!(app.status_of("stripe", "d0").await, Status::Dead);
    let ok = [
        ("status", "DEAD"),
        ("source", "stripe"),
        ("expected", "5"),
        ("csrf", csrf.as_str()),
    ];
    let r = app.post("/replay", Some(&origin), &ok).await;
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("5 event(s) replayed"));
    for i in 0..5 {
        assert_eq!(app.status_of("stripe", &format!("d{i}")).await, Status::Received);
    }
    assert_eq!(
        app.status_of("github", "gd").await,
        Status::Dead,
        "outside the filter"
    );
    assert_eq!(app.status_of("stripe", "ok").await, Status::Completed);
    // Only dead or completed events are replayed in bulk.
    assert_eq!(app.get("/replay?status=RECEIVED").await.status(), 400);
    assert_eq!(app.get("/replay").await.status(), 400);
}
