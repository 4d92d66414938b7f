//! Handler tests: every page and action over a real SQLite store and a real listener on 127.0.0.1:0, one file per
//! part of the console (`browse`, `replay`, `guard`, `login`); this one holds what they share.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod browse;
mod guard;
mod login;
mod replay;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use secrecy::SecretString;

use inbox_core::model::{EventId, EventKey, NewEvent, SourceName, Status};
use inbox_core::ports::{Ledger, Settlement};
use inbox_core::stores::sqlite::SqliteLedger;

use crate::filters::encode;
use crate::{Console, SessionPolicy, CSP};

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
        .create(NewEvent {
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
        })
        .await
        .unwrap();
    let k = key(source, id);
    let settle = |s| async { ledger.settle(&k, "w", s).await.unwrap() };
    match end {
        None | Some(Status::Received) => {}
        Some(Status::Dead) => {
            ledger.mark_dead(&k, "handler said 500 <i>x</i>").await.unwrap();
        }
        Some(st) => {
            ledger.claim(&k, "w", Duration::from_secs(60)).await.unwrap();
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
        self.ledger.get(&key(source, id)).await.unwrap().unwrap().status
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
