//! The operator console in a real browser: Debian's `chromium` driven through `chromedriver` over
//! WebDriver, against a console running in this process over a real SQLite store that an in-process
//! `inbox_core::serve::serve` is processing, with a `forward` handler to a sink in this test. The console has a
//! token, so the operator logs in through the form first (its `Secure` cookie kept by Chromium over plain HTTP to
//! loopback) and logs out through the button last.
//!
//! Needs `chromium` and `chromium-driver` (`apt-get install -y chromium chromium-driver`; `./test.sh` installs
//! them). Without them the test fails when `CI` is set and says SKIPPED loudly otherwise. Screenshots of the
//! overview and of an event page go to `target/console-screenshots/` of the workspace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::error::CmdError;
use fantoccini::{Client, ClientBuilder, Locator};
use inbox_console::Console;
use inbox_core::model::{EventId, EventKey, NewEvent, SourceName, Status};
use inbox_core::ports::{Ledger, Settlement};
use inbox_core::stores::sqlite::SqliteLedger;

/// The console's token, as `INBOX_CONSOLE_TOKEN` would give it.
const TOKEN: &str = "browser-test-console-token";

const HOSTILE: &str = r#"{"id":"evt_dead_1","note":"<script>window.__pwned=1;alert(1)</script>","x":"\"><img id=injected src=x onerror=alert(2)>","y":"</textarea><iframe id=framed></iframe>"}"#;

/// Kills what it holds when the test ends, however it ends.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn find(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn key(id: &str) -> EventKey {
    EventKey::new(SourceName::parse("shop").unwrap(), EventId::parse(id).unwrap())
}

fn new_event(id: &str, body: &str, event_type: &str) -> NewEvent {
    NewEvent {
        key: key(id),
        event_type: Some(event_type.into()),
        payload: bytes::Bytes::from(body.to_owned()),
        payload_sha256: "0".repeat(64),
        headers: vec![("content-type".into(), "application/json".into())],
        origin: Default::default(),
        resent_bodies: Default::default(),
    }
}

/// A downstream service: counts what `forward` delivers, per event id, and answers 200.
async fn sink() -> (SocketAddr, Arc<Mutex<HashMap<String, usize>>>) {
    let seen = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    let counter = seen.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let counter = counter.clone();
            async move {
                let id = headers
                    .get("idempotency-key")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_owned();
                *counter.lock().unwrap().entry(id).or_default() += 1;
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, seen)
}

/// GIVEN a store holding completed, failed and dead events (one dead with a hostile payload).
async fn seed(dir: &Path) {
    let ledger = SqliteLedger::open(dir, 64, Duration::from_secs(60)).unwrap();
    let long = Duration::from_secs(600);
    for i in 0..6 {
        let id = format!("evt_done_{i}");
        ledger
            .create(new_event(&id, r#"{"ok":true}"#, "order.paid"))
            .await
            .unwrap();
        ledger.claim(&key(&id), "seed", long).await.unwrap();
        let done = Settlement::Completed {
            retention: Duration::from_secs(86_400),
        };
        ledger.settle(&key(&id), "seed", done).await.unwrap();
    }
    ledger
        .create(new_event("evt_failing", "{}", "order.paid"))
        .await
        .unwrap();
    ledger.claim(&key("evt_failing"), "seed", long).await.unwrap();
    let failed = Settlement::Failed {
        error: "downstream said 503".into(),
        delay: Duration::from_secs(3_600),
    };
    ledger.settle(&key("evt_failing"), "seed", failed).await.unwrap();
    ledger
        .create(new_event("evt_dead_1", HOSTILE, "order.<b>refunded</b>"))
        .await
        .unwrap();
    ledger.claim(&key("evt_dead_1"), "seed", long).await.unwrap();
    let dead = Settlement::Dead {
        error: "downstream said 410 <script>alert(3)</script>".into(),
    };
    ledger.settle(&key("evt_dead_1"), "seed", dead).await.unwrap();
    ledger
        .create(new_event("evt_dead_2", "not json", "order.paid"))
        .await
        .unwrap();
    ledger.mark_dead(&key("evt_dead_2"), "gave up").await.unwrap();
}

async fn wait_for_http(url: &str, deadline: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < deadline {
        if reqwest::get(url).await.is_ok_and(|r| r.status().is_success()) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// How long a step waits for the page a submit or a click leads to.
const NAVIGATION: Duration = Duration::from_secs(15);

/// The element that marks the page a submit or a click leads to, once that page is there (see [`NAVIGATION`]).
async fn landed(c: &Client, mark: Locator<'_>) -> Result<Element, CmdError> {
    c.wait().at_most(NAVIGATION).for_element(mark).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_finds_a_dead_event_and_replays_it_in_a_real_browser() {
    let (Some(chromedriver), Some(chromium)) = (find("chromedriver"), find("chromium")) else {
        let why = "the console's browser test needs `chromium` and `chromium-driver` on PATH \
                   (apt-get install -y chromium chromium-driver; ./test.sh installs them)";
        if std::env::var_os("CI").is_some() {
            panic!("{why}");
        }
        eprintln!("\n!!!!!!!! SKIPPED: {why} !!!!!!!!\n");
        return;
    };
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/console-screenshots");
    std::fs::create_dir_all(&shots).unwrap();

    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    seed(&data).await;
    let (sink_addr, deliveries) = sink().await;

    // The embedded runtime, processing the same store, forwarding to the sink.
    let secret = tmp.path().join("secret");
    std::fs::write(&secret, "browser-test-secret").unwrap();
    let config = inbox_core::config::Config::from_toml(&format!(
        r#"
[server]
listen = "127.0.0.1:0"
data_dir = "{data}"

[sources.shop]
scheme = "hmac"
signature_header = "X-Signature"
algorithm = "sha256"
encoding = "hex"
id = "json:/id"
secrets = ["file:{secret}"]
handler = {{ kind = "forward", url = "http://{sink_addr}/hook", timeout = "5s" }}
"#,
        data = data.display(),
        secret = secret.display(),
    ))
    .unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (up_tx, up_rx) = tokio::sync::oneshot::channel::<SocketAddr>();
    let serve = tokio::spawn(async move {
        let registry = inbox_core::handlers::Registry::new(inbox_core::handlers::http_client());
        inbox_core::serve::serve(
            config,
            registry,
            move |addr| {
                let _ = up_tx.send(addr);
            },
            async move {
                let _ = stop_rx.await;
            },
        )
        .await
    });
    let serve_addr = tokio::time::timeout(Duration::from_secs(20), up_rx)
        .await
        .unwrap()
        .unwrap();
    assert!(wait_for_http(&format!("http://{serve_addr}/healthz"), Duration::from_secs(10)).await);

    // The console: its own ledger handle on the file, as `inbox console` in another process would have.
    let console_ledger = Arc::new(SqliteLedger::open(&data, 64, Duration::from_secs(60)).unwrap());
    let console = Console::new(
        console_ledger.clone(),
        None,
        Some(secrecy::SecretString::from(TOKEN)),
        "SQLite (browser test)",
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, console.router()).await });

    // chromedriver on a free port, Chromium headless with a fresh profile.
    let port = free_port();
    let _driver = Reaped(
        Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts"),
    );
    assert!(
        wait_for_http(
            &format!("http://127.0.0.1:{port}/status"),
            Duration::from_secs(20)
        )
        .await,
        "chromedriver did not answer"
    );
    let profile = tempfile::tempdir().unwrap();
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": chromium,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--no-first-run",
                "--disable-sync", "--window-size=1280,1000",
                format!("--user-data-dir={}", profile.path().display()),
            ],
        }),
    );
    let c = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("a WebDriver session");

    let result = async {
        // WHEN the operator opens the console THEN it asks for the token; once given, the overview shows the dead
        // events first.
        c.goto(&format!("{base}/")).await?;
        let form = c.form(Locator::Css("form[action='/login']")).await?;
        form.set_by_name("token", TOKEN).await?;
        form.submit().await?;
        landed(&c, Locator::Css("section.cards")).await?;
        let cookie = c.get_named_cookie("inbox_console").await?;
        assert_eq!(
            cookie.secure(),
            Some(true),
            "a Secure cookie, kept over HTTP to loopback"
        );
        assert_eq!(cookie.http_only(), Some(true));
        let session = format!("inbox_console={}", cookie.value());
        let text = c.find(Locator::Css("main")).await?.text().await?;
        assert!(
            text.contains("Dead events") && text.contains("evt_dead_1"),
            "{text}"
        );
        assert!(text.contains("COMPLETED") && text.contains("FAILED"), "{text}");
        std::fs::write(shots.join("overview.png"), c.screenshot().await?).unwrap();

        // WHEN they filter to dead events through the form
        c.goto(&format!("{base}/events")).await?;
        let form = c.form(Locator::Css("form.filters")).await?;
        form.set_by_name("status", "DEAD").await?;
        form.submit().await?;
        // A submit or a click may return before the page it leads to has loaded (chromedriver does not always wait
        // for a navigation that starts after the click): each step waits for its page before reading it.
        let start = Instant::now();
        let url = loop {
            let url = c.current_url().await?;
            if url.as_str().contains("status=DEAD") || start.elapsed() > NAVIGATION {
                break url;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(
            url.as_str().contains("status=DEAD"),
            "the filter is in the URL: {url}"
        );
        landed(&c, Locator::Css("table.events")).await?;
        let rows = c.find_all(Locator::Css("table.events tbody tr")).await?;
        assert_eq!(rows.len(), 2, "two dead events");

        // … and open one
        c.find(Locator::LinkText("evt_dead_1")).await?.click().await?;
        let status = landed(&c, Locator::Id("status")).await?.text().await?;
        assert_eq!(status, "DEAD");
        let payload = c.find(Locator::Id("payload")).await?.text().await?;
        assert!(
            payload.contains("<script>window.__pwned=1;alert(1)</script>"),
            "shown as text: {payload}"
        );
        assert_inert(&c).await?;
        std::fs::write(shots.join("event.png"), c.screenshot().await?).unwrap();
        c.set_window_size(375, 900).await?;
        std::fs::write(shots.join("event-375px.png"), c.screenshot().await?).unwrap();
        c.set_window_size(1280, 1000).await?;

        // WHEN they replay it THEN it runs again and reaches COMPLETED once the sink answers 200.
        c.find(Locator::Id("replay")).await?.click().await?;
        // Either answer the page can give (a skip is a warning), so a refused replay fails on its own words.
        let flash = landed(&c, Locator::Css("p.flash, p.warning"))
            .await?
            .text()
            .await?;
        assert!(flash.starts_with("Replayed"), "{flash}");
        let start = Instant::now();
        loop {
            let status = c.find(Locator::Id("status")).await?.text().await?;
            if status == "COMPLETED" {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "still {status} after 20 s"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
            c.refresh().await?;
        }
        assert_inert(&c).await?;
        std::fs::write(shots.join("event-completed.png"), c.screenshot().await?).unwrap();

        // WHEN they log out through the button THEN the login page is back, the browser dropped the cookie, and
        // the server refuses it too: a copy of it lets nothing in.
        let still = reqwest::Client::new()
            .get(format!("{base}/"))
            .header("cookie", &session)
            .send()
            .await
            .unwrap();
        assert_eq!(still.status(), 200, "the session is live before the logout");
        c.find(Locator::Id("logout")).await?.click().await?;
        landed(&c, Locator::Css("input[name='token']")).await?;
        assert!(
            c.get_named_cookie("inbox_console").await.is_err(),
            "the cookie is gone"
        );
        let copied = reqwest::Client::new()
            .get(format!("{base}/"))
            .header("cookie", &session)
            .send()
            .await
            .unwrap();
        assert_eq!(copied.status(), 401, "the session ended on the server");
        c.goto(&format!("{base}/events?status=DEAD")).await?;
        let text = c.find(Locator::Css("main")).await?.text().await?;
        assert!(text.contains("Log in") && !text.contains("evt_dead_2"), "{text}");
        Ok::<_, CmdError>(())
    }
    .await;
    let _ = c.close().await;
    result.unwrap();

    // Exactly one delivery for the replayed event; the other dead one was left alone.
    let seen = deliveries.lock().unwrap().clone();
    assert_eq!(seen.get("shop:evt_dead_1"), Some(&1), "{seen:?}");
    assert_eq!(seen.get("shop:evt_dead_2"), None, "{seen:?}");
    let e = console_ledger.get(&key("evt_dead_2")).await.unwrap().unwrap();
    assert_eq!(e.status, Status::Dead);

    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(20), serve).await;
}

/// The hostile payload ran nothing: no alert is open, no element it carried exists, and its script never set
/// its marker (the WebDriver script runs outside the page's CSP).
async fn assert_inert(c: &Client) -> Result<(), CmdError> {
    assert!(c.get_alert_text().await.is_err(), "an alert is open");
    for injected in ["#injected", "#framed", "main script", "main img", "main iframe"] {
        assert!(
            c.find_all(Locator::Css(injected)).await?.is_empty(),
            "{injected} was injected"
        );
    }
    let pwned = c.execute("return window.__pwned === undefined;", vec![]).await?;
    assert_eq!(pwned, serde_json::Value::Bool(true), "the payload's script ran");
    Ok(())
}
