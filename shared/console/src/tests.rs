//! Handler tests: every page and action over a real SQLite store and a real listener on 127.0.0.1:0.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use secrecy::SecretString;

use inbox_core::config::Config;
use inbox_core::model::{EventId, EventKey, NewEvent, SourceName, Status};
use inbox_core::ports::{Checkpoint, Checkpoints, Ledger, RunRecord, Settlement, Store};
use inbox_core::stores::sqlite::SqliteLedger;

use crate::filters::encode;
use crate::guard::is_loopback_host;
use crate::{check_listen, replay_event, Console, Replayed, SessionPolicy, StartError, CSP};

const HOSTILE: &str = r#"{"note":"<script>alert(1)</script>","x":"\"><img src=x onerror=alert(1)>","y":"</textarea><b>bold</b>"}"#;

struct App {
    base: String,
    ledger: Arc<SqliteLedger>,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

fn key(source: &str, id: &str) -> EventKey {
    EventKey::new(SourceName::parse(source).unwrap(), EventId::parse(id).unwrap())
}

async fn put(ledger: &SqliteLedger, source: &str, id: &str, body: &[u8], end: Option<Status>) {
    ledger
        .create(
            NewEvent {
                key: key(source, id),
                event_type: Some("charge.<b>failed</b>".into()),
                payload: bytes::Bytes::copy_from_slice(body),
                payload_sha256: "00".into(),
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    ("x-note".into(), "<script>alert('h')</script>".into()),
                    ("stripe-signature".into(), "t=1,v1=secretish".into()),
                ],
                origin: Default::default(),
                resent_bodies: Default::default(),
            },
            None,
        )
        .await
        .unwrap();
    let k = key(source, id);
    let settle = |s| async { ledger.settle(&k, "w", s, None).await.unwrap() };
    match end {
        None | Some(Status::Received) => {}
        Some(Status::Dead) => {
            ledger
                .mark_dead(&k, "handler said 500 <i>x</i>", None)
                .await
                .unwrap();
        }
        Some(st) => {
            ledger
                .claim(&k, "w", Duration::from_secs(60), None)
                .await
                .unwrap();
            match st {
                Status::Completed => {
                    settle(Settlement::Completed {
                        retention: Duration::from_secs(3600),
                    })
                    .await;
                }
                Status::Failed => {
                    settle(Settlement::Failed {
                        error: "timeout".into(),
                        delay: Duration::from_secs(600),
                    })
                    .await;
                }
                _ => {}
            }
        }
    }
}

async fn spawn(token: Option<&str>) -> App {
    spawn_console(token, |c| c).await
}

/// A console over a fresh store, as `build` finishes it (sessions, config).
async fn spawn_console(token: Option<&str>, build: impl FnOnce(Console) -> Console) -> App {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Arc::new(SqliteLedger::open(dir.path(), 64, Duration::from_secs(60)).unwrap());
    let console = build(Console::new(
        ledger.clone(),
        None,
        token.map(SecretString::from),
        "test store",
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, console.router()).await });
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    App {
        base: format!("http://{addr}"),
        ledger,
        http,
        _dir: dir,
    }
}

impl App {
    async fn get(&self, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
    }
    async fn page(&self, path: &str) -> String {
        let r = self.get(path).await;
        assert_eq!(r.status(), 200, "{path}");
        r.text().await.unwrap()
    }
    fn origin(&self) -> String {
        self.base.clone()
    }
    /// A form POST, as a browser on `origin` would send it.
    async fn post(&self, path: &str, origin: Option<&str>, form: &[(&str, &str)]) -> reqwest::Response {
        let body = form
            .iter()
            .map(|(k, v)| format!("{k}={}", encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let mut req = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        req.send().await.unwrap()
    }
    async fn status_of(&self, source: &str, id: &str) -> Status {
        self.ledger
            .get(&key(source, id), None)
            .await
            .unwrap()
            .unwrap()
            .status
    }
}

fn csrf_of(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").expect("a csrf field") + "name=\"csrf\" value=\"".len();
    page[at..].split('"').next().unwrap().to_owned()
}

fn assert_secure_headers(r: &reqwest::Response) {
    let h = r.headers();
    assert_eq!(h["content-security-policy"], CSP, "{}", r.url());
    assert!(!CSP.contains("unsafe-inline") && !CSP.contains("script-src"));
    assert_eq!(h["x-frame-options"], "DENY");
    assert_eq!(h["x-content-type-options"], "nosniff");
}

#[tokio::test]
async fn every_answer_carries_the_security_headers() {
    let app = spawn(None).await;
    put(&app.ledger, "stripe", "e1", b"{}", Some(Status::Dead)).await;
    for path in [
        "/",
        "/events",
        "/events?status=DEAD",
        "/event?source=stripe&id=e1",
        "/event/raw?source=stripe&id=e1",
        "/replay?status=DEAD",
        "/style.css",
        "/login",
        "/nope",
        "/event?source=stripe&id=missing",
        "/events?status=BOGUS",
    ] {
        assert_secure_headers(&app.get(path).await);
    }
    assert_eq!(app.get("/nope").await.status(), 404);
    assert_eq!(app.get("/event?source=stripe&id=missing").await.status(), 404);
    let bad = app.get("/events?status=BOGUS").await;
    assert_eq!(bad.status(), 400);
    assert!(bad.text().await.unwrap().contains("status"));
    let refused = app.post("/event/replay", None, &[]).await;
    assert_secure_headers(&refused);
    let css = app.get("/style.css").await;
    assert!(css.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/css"));
}

#[tokio::test]
async fn the_overview_counts_by_status_and_source_shows_dead_first_and_reconciliation() {
    let app = spawn(None).await;
    put(&app.ledger, "stripe", "done", b"{}", Some(Status::Completed)).await;
    put(&app.ledger, "stripe", "dead-1", b"{}", Some(Status::Dead)).await;
    put(&app.ledger, "github", "failing", b"{}", Some(Status::Failed)).await;
    put(&app.ledger, "github", "waiting", b"{}", None).await;
    let page = app.page("/").await;
    assert!(page.contains("dead-1"), "the dead event is listed");
    assert!(
        page.find("Dead events").unwrap() < page.find("By source").unwrap(),
        "dead first"
    );
    assert!(page.contains("<svg"), "the chart");
    assert!(page.contains("Oldest open event"));
    assert!(!page.contains("n/a"), "SQLite counts every status, zero included");
    assert!(
        !page.contains("<h2>Reconciliation</h2>"),
        "no panel without a checkpoint"
    );
    assert!(page.contains("href=\"/events?source=github\""));
    // GIVEN a reconciliation run recorded for stripe THEN the panel shows what it recovered.
    let run = RunRecord {
        started_at: 1,
        finished_at: 2,
        listed: 40,
        present: 37,
        recovered: 3,
        failed: 0,
        error: Some("provider said <b>429</b>".into()),
    };
    let cp = Checkpoint {
        scanned_to: 1_000,
        last_run: Some(run),
        ..Default::default()
    };
    app.ledger
        .save_checkpoint(&SourceName::parse("stripe").unwrap(), &cp)
        .await
        .unwrap();
    let page = app.page("/").await;
    assert!(page.contains("<h2>Reconciliation</h2>"));
    assert!(page.contains("provider said &lt;b&gt;429&lt;/b&gt;"));
    assert!(
        page.contains("Start the console with --config"),
        "without the config it says which sources it shows"
    );
}

/// A config where `stripe` and `quiet` reconcile and `github` does not.
fn reconciling_config() -> Config {
    let source = |name: &str, reconcile: bool| {
        let block = if reconcile {
            format!("[sources.{name}.reconcile]\nprovider = \"stripe\"\napi_key = \"env:STRIPE_KEY\"\n")
        } else {
            String::new()
        };
        format!(
            "[sources.{name}]\nscheme = \"stripe\"\nsecrets = [\"env:SECRET\"]\nhandler = {{ kind = \"log\" }}\n{block}"
        )
    };
    let text = [
        source("stripe", true),
        source("quiet", true),
        source("github", false),
    ]
    .concat();
    Config::from_toml(&text).unwrap()
}

#[tokio::test]
async fn the_overview_shows_every_reconciled_sources_last_run_from_the_config() {
    let app = spawn_console(None, |c| c.with_config(&reconciling_config())).await;
    // GIVEN stripe, healthy: its events all completed, and a run that found nothing missing; quiet, a source
    // that receives nothing, and a run of its own; github reconciles nothing.
    put(&app.ledger, "stripe", "done", b"{}", Some(Status::Completed)).await;
    put(&app.ledger, "github", "gh", b"{}", Some(Status::Completed)).await;
    let page = app.page("/").await;
    assert!(page.contains("<h2>Reconciliation</h2>"), "{page}");
    assert!(
        page.contains("<td>quiet</td><td colspan=\"7\">no run yet</td>"),
        "{page}"
    );
    assert!(
        page.contains("<td>stripe</td><td colspan=\"7\">no run yet</td>"),
        "{page}"
    );
    let run = |finished_at, listed| Checkpoint {
        scanned_to: finished_at - 300_000,
        last_run: Some(RunRecord {
            started_at: finished_at - 2_000,
            finished_at,
            listed,
            present: listed,
            recovered: 0,
            failed: 0,
            error: None,
        }),
        ..Default::default()
    };
    let at = 1_780_000_000_000;
    for (source, listed) in [("stripe", 17), ("quiet", 0)] {
        let cp = run(at, listed);
        app.ledger
            .save_checkpoint(&SourceName::parse(source).unwrap(), &cp)
            .await
            .unwrap();
    }
    // THEN both runs are shown, ok, with when they finished; github has no row.
    let page = app.page("/").await;
    let finished = inbox_core::time::rfc3339(at);
    for (source, listed) in [("stripe", 17), ("quiet", 0)] {
        let row = format!(
            "<td>{source}</td><td>{finished}</td><td class=\"num\">{listed}</td><td class=\"num\">{listed}</td>"
        );
        assert!(page.contains(&row), "{row} in {page}");
    }
    assert!(!page.contains("<td>github</td>"), "{page}");
    assert!(!page.contains("no run yet"));
    assert!(!page.contains("Start the console with --config"));
}

#[tokio::test]
async fn the_event_page_links_a_resent_body_to_the_event_that_held_it_first() {
    let app = spawn(None).await;
    let marked = |id: &str| NewEvent {
        key: key("stripe", id),
        event_type: Some("charge.succeeded".into()),
        payload: bytes::Bytes::from_static(b"{\"amount\":100}"),
        payload_sha256: "ab".repeat(32),
        headers: vec![],
        origin: Default::default(),
        resent_bodies: inbox_core::model::ResentBodies::Marked {
            within: Duration::from_secs(3600),
        },
    };
    app.ledger.create(marked("first"), None).await.unwrap();
    app.ledger.create(marked("again"), None).await.unwrap();
    let page = app.page("/event?source=stripe&id=again").await;
    assert!(
        page.contains("<dt>resent of</dt><dd class=\"id\"><a href=\"/event?source=stripe&amp;id=first\" id=\"resent-of\">first</a></dd>"),
        "{page}"
    );
    let first = app.page("/event?source=stripe&id=first").await;
    assert!(!first.contains("resent of"), "only where set");
}

#[tokio::test]
async fn events_filter_by_every_field_in_the_url_and_page_with_a_cursor() {
    let app = spawn(None).await;
    for i in 0..120 {
        let st = if i % 3 == 0 { Some(Status::Dead) } else { None };
        put(&app.ledger, "stripe", &format!("evt_{i:03}"), b"{}", st).await;
    }
    put(&app.ledger, "github", "gh-1", b"{}", None).await;
    let first = app.page("/events").await;
    assert!(first.contains("gh-1") && first.contains("evt_119"));
    let next = first
        .split("class=\"next\" href=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("a next page link")
        .replace("&amp;", "&");
    let second = app.page(&next).await;
    assert!(
        !second.contains("evt_119") && second.contains("evt_070"),
        "no repeats"
    );
    let dead = app.page("/events?status=DEAD&source=stripe").await;
    assert!(dead.contains("evt_117") && !dead.contains("evt_118"));
    assert!(dead.contains("Replay these"));
    let one = app.page("/events?id=evt_005").await;
    assert!(one.contains("evt_005") && !one.contains("evt_006"));
    let typed = app
        .page("/events?type=charge.%3Cb%3Efailed%3C%2Fb%3E&source=github")
        .await;
    assert!(typed.contains("gh-1") && !typed.contains("evt_0"));
    assert!(app
        .page("/events?from=2999-01-01T00:00")
        .await
        .contains("No events match"));
    assert!(app
        .page("/events?to=2000-01-01T00:00:00Z")
        .await
        .contains("No events match"));
    assert!(app.page("/events?from=2000-01-01T00:00").await.contains("gh-1"));
    assert_eq!(app.get("/events?from=yesterday").await.status(), 400);
    assert_eq!(app.get("/events?before=junk").await.status(), 400);
}

#[tokio::test]
async fn a_hostile_payload_is_rendered_inert() {
    let app = spawn(None).await;
    let id = r#""><img src=x onerror=alert(1)><script>alert(2)</script>"#;
    put(&app.ledger, "stripe", id, HOSTILE.as_bytes(), Some(Status::Dead)).await;
    put(
        &app.ledger,
        "stripe",
        "text",
        b"</textarea><script>alert(3)</script>",
        None,
    )
    .await;
    for path in [
        format!("/event?source=stripe&id={}", encode(id)),
        "/event?source=stripe&id=text".to_owned(),
        "/".to_owned(),
        "/events".to_owned(),
    ] {
        let page = app.page(&path).await;
        for raw in ["<script>", "<img", "</textarea>", "<b>", "<i>"] {
            assert!(!page.contains(raw), "{path} holds {raw} unescaped");
        }
    }
    let page = app.page(&format!("/event?source=stripe&id={}", encode(id))).await;
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "shown, as text"
    );
    assert!(page.contains("&lt;img src=x onerror=alert(1)&gt;"));
    assert!(page.contains("&lt;/textarea&gt;"));
    assert!(page.contains("(JSON,"), "JSON is pretty-printed");
    assert!(page.contains("\n  &quot;note&quot;"), "indented");
    assert!(
        page.contains("x-note") && page.contains("&lt;script&gt;alert('h')"),
        "kept headers, escaped"
    );
    assert!(!page.contains("secretish"), "signature headers are not rendered");
}

#[tokio::test]
async fn binary_payloads_show_a_hex_preview_and_download_as_an_attachment() {
    let app = spawn(None).await;
    let body: Vec<u8> = (0..=255u8).chain([0xff, 0xfe, b'<']).collect();
    put(&app.ledger, "stripe", "bin", &body, None).await;
    let page = app.page("/event?source=stripe&id=bin").await;
    assert!(page.contains("binary (hex preview)"));
    assert!(page.contains("00000000  00 01 02 03"));
    let raw = app.get("/event/raw?source=stripe&id=bin").await;
    assert_secure_headers(&raw);
    assert_eq!(raw.headers()["content-type"], "application/octet-stream");
    assert_eq!(
        raw.headers()["content-disposition"],
        "attachment; filename=\"stripe-bin.bin\""
    );
    assert_eq!(raw.bytes().await.unwrap().as_ref(), body.as_slice());
    let hostile = app
        .get(&format!("/event/raw?source=stripe&id={}", encode("a\"b;c")))
        .await;
    assert_eq!(hostile.status(), 404);
}

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

#[tokio::test]
async fn a_loopback_console_answers_only_to_loopback_host_names() {
    let app = spawn(None).await;
    let r = app
        .http
        .get(format!("{}/", app.base))
        .header("host", "rebind.evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    for host in ["localhost:3001", "127.0.0.1", "[::1]:80"] {
        assert!(is_loopback_host(host), "{host}");
    }
}

#[test]
fn a_non_loopback_listener_needs_a_token() {
    let any: SocketAddr = "0.0.0.0:3001".parse().unwrap();
    let local: SocketAddr = "127.0.0.1:3001".parse().unwrap();
    assert!(matches!(
        check_listen(any, None),
        Err(StartError::TokenRequired(_))
    ));
    assert!(check_listen(local, None).is_ok());
    let short = SecretString::from("short");
    assert!(matches!(
        check_listen(any, Some(&short)),
        Err(StartError::WeakToken)
    ));
    let good = SecretString::from("a-long-enough-token");
    assert!(check_listen(any, Some(&good)).is_ok());
}

#[tokio::test]
async fn with_a_token_every_request_needs_it() {
    let app = spawn(Some(TOKEN)).await;
    put(&app.ledger, "stripe", "zz-dead", b"{}", Some(Status::Dead)).await;
    for path in [
        "/",
        "/events",
        "/event?source=stripe&id=zz-dead",
        "/event/raw?source=stripe&id=zz-dead",
        "/replay?status=DEAD",
    ] {
        let r = app.get(path).await;
        assert_eq!(r.status(), 401, "{path}");
        assert_secure_headers(&r);
        let page = r.text().await.unwrap();
        assert!(page.contains("Log in") && !page.contains("zz-dead"), "{path}");
        let wrong = app
            .http
            .get(format!("{}{path}", app.base))
            .bearer_auth("wrong-token-wrong-token")
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status(), 401, "{path}");
        let right = app
            .http
            .get(format!("{}{path}", app.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(right.status(), 200, "{path}");
    }
    let r = app
        .post(
            "/event/replay",
            Some(&app.origin()),
            &[("source", "stripe"), ("id", "zz-dead")],
        )
        .await;
    assert_eq!(r.status(), 401);
    // The login form: a wrong token is refused, the right one sets a strict, script-proof cookie.
    let login = app.page("/login").await;
    let csrf = csrf_of(&login);
    let origin = app.origin();
    let r = app
        .post("/login", Some(&origin), &[("token", "nope"), ("csrf", &csrf)])
        .await;
    assert_eq!(r.status(), 401);
    assert!(r.headers().get("set-cookie").is_none());
    let r = app
        .post(
            "/login",
            Some("http://evil.example"),
            &[("token", TOKEN), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(r.status(), 403);
    let r = app
        .post("/login", Some(&origin), &[("token", TOKEN), ("csrf", &csrf)])
        .await;
    assert_eq!(r.status(), 303);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(!cookie.contains(TOKEN), "the cookie is not the token");
    let session = cookie.split(';').next().unwrap().to_owned();
    let page = app
        .http
        .get(format!("{}/event?source=stripe&id=zz-dead", app.base))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    let csrf = csrf_of(&page);
    // A forged cookie is no session.
    let forged = app
        .http
        .get(format!("{}/", app.base))
        .header("cookie", "inbox_console=00.00")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    // With the session, a replay still needs its CSRF token.
    let post = |csrf: String| {
        app.http
            .post(format!("{}/event/replay", app.base))
            .header("cookie", &session)
            .header("origin", &origin)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("source=stripe&id=zz-dead&csrf={csrf}"))
            .send()
    };
    assert_eq!(post(String::new()).await.unwrap().status(), 403);
    assert_eq!(
        post(console_csrf_of_anonymous(&app).await)
            .await
            .unwrap()
            .status(),
        403
    );
    assert_eq!(post(csrf).await.unwrap().status(), 303);
    assert_eq!(app.status_of("stripe", "zz-dead").await, Status::Received);
}

/// The anonymous token (the login page's) is not a session's token.
async fn console_csrf_of_anonymous(app: &App) -> String {
    csrf_of(&app.page("/login").await)
}

const TOKEN: &str = "correct-horse-battery-staple";

/// Logs in through the form as a browser would; the `Set-Cookie` it answered with.
async fn log_in(app: &App) -> String {
    let csrf = csrf_of(&app.page("/login").await);
    let r = app
        .post(
            "/login",
            Some(&app.origin()),
            &[("token", TOKEN), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(r.status(), 303);
    r.headers()["set-cookie"].to_str().unwrap().to_owned()
}

/// The `name=value` a browser sends back for a `Set-Cookie`.
fn sent_back(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap().to_owned()
}

impl App {
    async fn get_with(&self, path: &str, cookie: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.base))
            .header("cookie", cookie)
            .send()
            .await
            .unwrap()
    }
}

fn short(idle: Duration, lifetime: Duration) -> SessionPolicy {
    SessionPolicy {
        idle,
        lifetime,
        ..SessionPolicy::default()
    }
}

#[tokio::test]
async fn the_session_cookie_is_secure_unless_the_console_is_told_otherwise() {
    let app = spawn(Some(TOKEN)).await;
    let set = log_in(&app).await;
    let attrs: Vec<&str> = set.split(';').map(str::trim).collect();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/", "Secure", "Max-Age=43200"] {
        assert!(attrs.contains(&attr), "{attr} in {set}");
    }
    // A plain HTTP request to another host is warned that the browser will drop it; one through a TLS proxy is not.
    let login = |host: &'static str, proto: Option<&'static str>| {
        let mut r = app.http.get(format!("{}/login", app.base)).header("host", host);
        if let Some(p) = proto {
            r = r.header("x-forwarded-proto", p);
        }
        async move { r.send().await.unwrap().text().await.unwrap() }
    };
    assert!(login("console.internal:3001", None)
        .await
        .contains("--insecure-cookie"));
    assert!(!login("console.internal", Some("https"))
        .await
        .contains("--insecure-cookie"));
    assert!(!login("127.0.0.1:3001", None).await.contains("--insecure-cookie"));

    // WHEN the console is told the cookie travels over plain HTTP THEN it is not Secure, and nothing warns.
    let plain = spawn_console(Some(TOKEN), |c| {
        c.with_sessions(SessionPolicy {
            secure_cookie: false,
            ..SessionPolicy::default()
        })
    })
    .await;
    let set = log_in(&plain).await;
    assert!(!set.contains("Secure") && set.contains("HttpOnly"), "{set}");
    let r = plain
        .http
        .get(format!("{}/login", plain.base))
        .header("host", "console.internal:3001")
        .send()
        .await
        .unwrap();
    assert!(!r.text().await.unwrap().contains("--insecure-cookie"));
}

#[tokio::test]
async fn an_idle_session_is_refused() {
    let idle = Duration::from_millis(1500);
    let app = spawn_console(Some(TOKEN), |c| {
        c.with_sessions(short(idle, Duration::from_secs(3600)))
    })
    .await;
    let cookie = sent_back(&log_in(&app).await);
    // Used within the idle time, twice over the idle time in all: each use counts.
    for _ in 0..3 {
        assert_eq!(app.get_with("/", &cookie).await.status(), 200);
        tokio::time::sleep(idle / 2).await;
    }
    // WHEN it is left alone longer THEN it is refused, said so, and dropped from the browser.
    tokio::time::sleep(idle + Duration::from_millis(200)).await;
    let r = app.get_with("/", &cookie).await;
    assert_eq!(r.status(), 401);
    let clear = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        clear.starts_with("inbox_console=;") && clear.contains("Max-Age=0"),
        "{clear}"
    );
    assert!(r.text().await.unwrap().contains("Your session has ended"));
    assert_eq!(app.get_with("/events", &cookie).await.status(), 401, "for good");
    // A new login works.
    let again = sent_back(&log_in(&app).await);
    assert_eq!(app.get_with("/", &again).await.status(), 200);
}

#[tokio::test]
async fn a_session_ends_at_its_lifetime_however_busy() {
    let lifetime = Duration::from_secs(2);
    let app = spawn_console(Some(TOKEN), |c| {
        c.with_sessions(short(Duration::from_secs(3600), lifetime))
    })
    .await;
    let logged_in = std::time::Instant::now();
    let cookie = sent_back(&log_in(&app).await);
    let mut served = 0;
    let refused_after = loop {
        let r = app.get_with("/events", &cookie).await;
        let elapsed = logged_in.elapsed();
        if r.status() == 401 {
            break elapsed;
        }
        assert_eq!(r.status(), 200);
        served += 1;
        assert!(elapsed < lifetime * 3, "still served {elapsed:?} after the login");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(served >= 3, "served {served} times before the end");
    assert!(refused_after >= lifetime, "refused after {refused_after:?}");
    assert_eq!(app.get_with("/", &cookie).await.status(), 401);
}

#[tokio::test]
async fn logging_out_ends_the_session_on_the_server() {
    let app = spawn(Some(TOKEN)).await;
    put(&app.ledger, "stripe", "d1", b"{}", Some(Status::Dead)).await;
    let cookie = sent_back(&log_in(&app).await);
    let page = app.get_with("/events", &cookie).await.text().await.unwrap();
    assert!(page.contains("action=\"/logout\""), "a logout button");
    let csrf = csrf_of(&page);
    let logout = |csrf: String, origin: &'static str| {
        let (http, url, cookie) = (app.http.clone(), format!("{}/logout", app.base), cookie.clone());
        let origin = if origin.is_empty() {
            app.origin()
        } else {
            origin.to_owned()
        };
        async move {
            http.post(url)
                .header("cookie", cookie)
                .header("origin", origin)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("csrf={csrf}"))
                .send()
                .await
                .unwrap()
        }
    };
    // Without its CSRF token, or from another site, a logout is refused and the session lives on.
    assert_eq!(logout(String::new(), "").await.status(), 403);
    assert_eq!(logout(csrf.clone(), "http://evil.example").await.status(), 403);
    assert_eq!(app.get_with("/", &cookie).await.status(), 200);
    assert_eq!(
        app.get_with("/logout", &cookie).await.status(),
        405,
        "a GET logs nobody out"
    );
    // WHEN the button posts THEN the browser is sent to the login page, told to drop the cookie
    let r = logout(csrf.clone(), "").await;
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/login");
    let clear = r.headers()["set-cookie"].to_str().unwrap();
    assert!(
        clear.starts_with("inbox_console=;") && clear.contains("Max-Age=0"),
        "{clear}"
    );
    // AND the old cookie, sent anyway (a copy of it), lets nothing in: no page, no replay.
    for path in ["/", "/events", "/event?source=stripe&id=d1"] {
        assert_eq!(app.get_with(path, &cookie).await.status(), 401, "{path}");
    }
    let replay = app
        .http
        .post(format!("{}/event/replay", app.base))
        .header("cookie", &cookie)
        .header("origin", app.origin())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("source=stripe&id=d1&csrf={csrf}"))
        .send()
        .await
        .unwrap();
    assert_eq!(replay.status(), 401);
    assert_eq!(app.status_of("stripe", "d1").await, Status::Dead);
}

#[tokio::test]
async fn every_page_of_a_logged_in_session_carries_the_logout_button() {
    let app = spawn(Some(TOKEN)).await;
    put(&app.ledger, "stripe", "d1", b"{}", Some(Status::Dead)).await;
    let cookie = sent_back(&log_in(&app).await);
    for path in [
        "/",
        "/events",
        "/event?source=stripe&id=d1",
        "/replay?status=DEAD",
        "/login",
        "/nope",
        "/events?status=BOGUS",
    ] {
        let page = app.get_with(path, &cookie).await.text().await.unwrap();
        assert!(
            page.contains("<form class=\"logout\" method=\"post\" action=\"/logout\">"),
            "{path}"
        );
    }
    // Nothing to log out of: a loopback console without a token, or a bearer token.
    let open = spawn(None).await;
    assert!(!open.page("/").await.contains("/logout"));
    let bearer = app
        .http
        .get(format!("{}/", app.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert!(!bearer.text().await.unwrap().contains("/logout"));
}
