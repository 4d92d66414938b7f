//! Helpers for the end-to-end suites: a real `inbox serve` child process on a random port and a fresh data
//! directory ([`spawn_app`]), the `inbox` operator commands against its data directory, a scripted HTTP sink that
//! records every delivery ([`Sink`]), fresh signatures made with the core's own `Scheme::sign`, and a
//! [`wait_until`] for effects that become true eventually.

use std::collections::VecDeque;
use std::fmt::Display;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use inbox_core::schemes::{Identity, Key, Scheme};
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::Value;

/// The `inbox` binary of this package.
pub const INBOX: &str = env!("CARGO_BIN_EXE_inbox");

/// How long `inbox serve` may take to print its listening line.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A fresh random id with a readable prefix, so that tests running in parallel never share an event.
pub fn rand_id(prefix: &str) -> String {
    format!("{prefix}_{:016x}", rand::random::<u64>())
}

/// A fresh random secret: 32 hex characters, which is also valid base64 (so `whsec_` + it is a Standard
/// Webhooks / Svix secret of 24 bytes).
pub fn rand_secret() -> String {
    format!("{:016x}{:016x}", rand::random::<u64>(), rand::random::<u64>())
}

pub fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

// ---------------------------------------------------------------------------------------------------------
// The server under test.

/// A running (or stopped) `inbox serve` child process with its own temp dir: `inbox.toml`, `data/`, `serve.log`.
pub struct App {
    #[allow(dead_code)] // never read: held for its drop, which deletes the directory
    dir: tempfile::TempDir,
    config_path: PathBuf,
    data_dir: PathBuf,
    log_path: PathBuf,
    env: Vec<(String, String)>,
    child: Option<Child>,
    addr: SocketAddr,
    /// The operator commands find the store by the config (a shared PostgreSQL store), not by the data directory.
    by_config: bool,
}

/// Writes `config` into a fresh temp dir and starts `inbox serve --listen 127.0.0.1:0` on it. `env` (secrets) is
/// set in the child's environment only. Panics, showing the server's log, if it does not come up.
pub fn spawn_app(config: &str, env: &[(&str, &str)]) -> App {
    spawn_app_in(config, env, None)
}

/// [`spawn_app`], with the data directory at `data_dir` where given (a file system of the test's own, say).
pub fn spawn_app_in(config: &str, env: &[(&str, &str)], data_dir: Option<&Path>) -> App {
    let dir = tempfile::Builder::new()
        .prefix("inbox-e2e-")
        .tempdir()
        .expect("temp dir");
    let config_path = dir.path().join("inbox.toml");
    std::fs::write(&config_path, config).expect("write config");
    let mut app = App {
        config_path,
        data_dir: data_dir.map_or_else(|| dir.path().join("data"), Path::to_path_buf),
        log_path: dir.path().join("serve.log"),
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        child: None,
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        by_config: config.contains("kind = \"postgres\""),
        dir,
    };
    if let Err(e) = app.start(SocketAddr::from(([127, 0, 0, 1], 0))) {
        panic!("inbox serve did not start: {e}");
    }
    app
}

impl App {
    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The URL a source receives on.
    pub fn webhook_url(&self, source: &str) -> String {
        format!("{}/webhooks/{source}", self.url())
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The config file the server reads at each start.
    pub fn config_path(&self) -> &Path {
        &self.config_path
    }

    /// Replaces the config that the next [`App::restart`] reads.
    pub fn write_config(&self, config: &str) {
        std::fs::write(&self.config_path, config).expect("write config");
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the server is not running").id()
    }

    /// Sets (or, with `None`, removes) a variable of the server's environment for its next start.
    pub fn set_env(&mut self, name: &str, value: Option<&str>) {
        self.env.retain(|(k, _)| k != name);
        if let Some(value) = value {
            self.env.push((name.to_owned(), value.to_owned()));
        }
    }

    /// Whether the server process has exited on its own (a crash): then it is reaped and forgotten, ready for
    /// [`App::restart`].
    pub fn has_exited(&mut self) -> bool {
        let exited = self
            .child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))));
        if exited {
            self.child = None;
        }
        exited
    }

    /// How the server process ended, once it has exited on its own (then it is reaped and forgotten, as by
    /// [`App::has_exited`]); `None` while it runs.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        let status = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
        if status.is_some() {
            self.child = None;
        }
        status
    }

    /// Whether a server process is running (started and not yet reaped).
    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// Everything the server processes of this app wrote on stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    fn start(&mut self, listen: SocketAddr) -> Result<(), String> {
        assert!(
            self.child.is_none(),
            "the server is still running: kill or terminate it first"
        );
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .map_err(|e| format!("log file: {e}"))?;
        let mut child = Command::new(INBOX)
            .arg("serve")
            .arg("--config")
            .arg(&self.config_path)
            .arg("--listen")
            .arg(listen.to_string())
            .arg("--data-dir")
            .arg(&self.data_dir)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("INBOX_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot run {INBOX}: {e}"))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel::<String>();
        // Reads stdout to its end so the child never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(addr) = line.strip_prefix("inbox: listening on http://") {
                        self.addr = addr
                            .trim()
                            .parse()
                            .map_err(|e| format!("bad listening line {line:?}: {e}"))?;
                        self.child = Some(child);
                        return Ok(());
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = child.wait().map_err(|e| e.to_string())?;
                    return Err(format!(
                        "inbox serve exited ({status}) before listening; log:\n{}",
                        self.log()
                    ));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "inbox serve printed no listening line within {START_TIMEOUT:?}; log:\n{}",
                        self.log()
                    ));
                }
            }
        }
    }

    /// Sends the server process a signal with `kill` (`-STOP`, `-CONT`, ...).
    pub fn signal(&self, name: &str) {
        let sent = Command::new("kill")
            .args([name, &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill {name}");
    }

    /// SIGKILL: the process dies at once, whatever it was doing.
    pub fn kill(&mut self) {
        let mut child = self.child.take().expect("the server is not running");
        child.kill().expect("SIGKILL");
        child.wait().expect("wait after SIGKILL");
    }

    /// SIGTERM, then waits (up to 40 s) for the process to exit, and asserts it exited 0.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("the server is not running");
        let sent = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM failed");
        let deadline = Instant::now() + Duration::from_secs(40);
        let status = loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "inbox serve did not exit within 40 s of SIGTERM; log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(
            status.success(),
            "inbox serve exited with {status} after SIGTERM, not 0; log:\n{}",
            self.log()
        );
        status
    }

    /// Starts the server again on the same data dir, on the same port if it is still free (else a new one:
    /// read [`App::url`] again).
    pub fn restart(&mut self) {
        let same = self.addr;
        if let Err(first) = self.start(same) {
            if !first.contains("cannot listen") {
                panic!("inbox serve did not restart: {first}");
            }
            if let Err(e) = self.start(SocketAddr::from(([127, 0, 0, 1], 0))) {
                panic!("inbox serve did not restart: {e}");
            }
        }
    }

    /// Runs `inbox ARGS... --data-dir D` (or, for a shared store, `--config C`) to completion.
    pub fn inbox(&self, args: &[&str]) -> Output {
        let (flag, path) = if self.by_config {
            ("--config", &self.config_path)
        } else {
            ("--data-dir", &self.data_dir)
        };
        Command::new(INBOX)
            .args(args)
            .arg(flag)
            .arg(path)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .expect("run inbox")
    }

    /// Every stored event, as `inbox events list --json` prints them (one JSON object per line).
    pub fn events(&self) -> Vec<Value> {
        let out = self.inbox(&["events", "list", "--json", "--limit", "100000"]);
        assert!(
            out.status.success(),
            "inbox events list failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
            .collect()
    }

    /// `(source, event_id)` of every stored event, sorted.
    pub fn event_keys(&self) -> Vec<(String, String)> {
        let mut keys: Vec<_> = self
            .events()
            .iter()
            .map(|e| (str_field(e, "source"), str_field(e, "event_id")))
            .collect();
        keys.sort();
        keys
    }

    /// One event with its payload and kept headers (`inbox events show --json --payload`); `None` if absent.
    pub fn event(&self, source: &str, event_id: &str) -> Option<Value> {
        let out = self.inbox(&["events", "show", source, event_id, "--json", "--payload"]);
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("no event"), "inbox events show failed: {err}");
            return None;
        }
        Some(serde_json::from_slice(&out.stdout).expect("events show prints JSON"))
    }

    /// How many stored events are in each status.
    pub fn status_counts(&self) -> std::collections::BTreeMap<String, usize> {
        let mut counts = std::collections::BTreeMap::new();
        for e in self.events() {
            *counts.entry(str_field(&e, "status")).or_insert(0) += 1;
        }
        counts
    }

    /// Waits until exactly `n` events are stored and all are COMPLETED; on time-out, panics with the counts.
    pub fn wait_all_completed(&self, n: usize, deadline: Duration, what: &str) {
        let until = Instant::now() + deadline;
        loop {
            let counts = self.status_counts();
            if counts.get("COMPLETED") == Some(&n) && counts.len() == 1 {
                return;
            }
            if Instant::now() > until {
                panic!("timed out after {deadline:?} waiting until {what}: {n} COMPLETED; statuses now {counts:?}");
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The event's status, or "" if it is not stored.
    pub fn status_of(&self, source: &str, event_id: &str) -> String {
        self.event(source, event_id)
            .map(|e| str_field(&e, "status"))
            .unwrap_or_default()
    }
}

impl Drop for App {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(80).collect();
            eprintln!("---- last lines of the inbox serve log ----");
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

/// A string field of a JSON object, or "" if absent or not a string.
pub fn str_field(v: &Value, name: &str) -> String {
    v.get(name).and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// What a crash run must leave: one record per sent id and no other, and each id delivered to `sink` at least once
/// and at most `max` times, always with its idempotency key. Returns how many ids were delivered more than once.
pub fn assert_stored_once_and_delivered(
    app: &App,
    sink: &Sink,
    source: &str,
    sent: &[String],
    max: usize,
    what: &str,
) -> usize {
    use std::collections::{HashMap, HashSet};
    let events = app.events();
    assert_eq!(events.len(), sent.len(), "{what}: records in the store");
    let stored: HashSet<String> = events.iter().map(|e| str_field(e, "event_id")).collect();
    let ids: HashSet<String> = sent.iter().cloned().collect();
    assert_eq!(stored, ids, "{what}: the stored ids are exactly the sent ids");

    let mut deliveries: HashMap<String, usize> = HashMap::new();
    for r in sink.requests() {
        let id = r.header("x-inbox-event-id").unwrap_or_default();
        assert_eq!(
            r.header("idempotency-key"),
            Some(format!("{source}:{id}")),
            "{what}: every delivery carries its idempotency key"
        );
        *deliveries.entry(id).or_default() += 1;
    }
    for id in sent {
        let n = deliveries.get(id).copied().unwrap_or(0);
        assert!(
            (1..=max).contains(&n),
            "{what}: {id} was delivered {n} times (1..={max})"
        );
    }
    assert_eq!(
        deliveries.len(),
        sent.len(),
        "{what}: the sink saw ids that were never sent"
    );
    deliveries.values().filter(|n| **n > 1).count()
}

/// Runs `inbox serve` on `config` and expects it to fail at start: returns its exit status and stderr.
pub fn serve_fails(config: &str, env: &[(&str, &str)], unset: &[&str]) -> (ExitStatus, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let config_path = dir.path().join("inbox.toml");
    std::fs::write(&config_path, config).expect("write config");
    let mut cmd = Command::new(INBOX);
    cmd.arg("serve")
        .arg("--config")
        .arg(&config_path)
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .envs(env.iter().copied())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for name in unset {
        cmd.env_remove(name);
    }
    let mut child = cmd.spawn().expect("run inbox serve");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("inbox serve kept running on a bad config");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let mut stdout = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut stdout);
    }
    (status, format!("{stdout}{stderr}"))
}

/// Polls `check` until it holds, for at most `deadline`; panics naming `what` otherwise. For effects that
/// become true eventually (processing, retries, replays), never as a sleep.
pub fn wait_until(deadline: Duration, what: impl Display, mut check: impl FnMut() -> bool) {
    wait_every(deadline, Duration::from_millis(100), what, &mut check);
}

/// [`wait_until`] with a chosen polling interval.
pub fn wait_every(deadline: Duration, every: Duration, what: impl Display, check: &mut dyn FnMut() -> bool) {
    let until = Instant::now() + deadline;
    loop {
        if check() {
            return;
        }
        if Instant::now() > until {
            panic!("timed out after {deadline:?} waiting until {what}");
        }
        std::thread::sleep(every);
    }
}

// ---------------------------------------------------------------------------------------------------------
// Talking to the server.

/// A client for 127.0.0.1 only: no proxy from the environment, a bounded wait.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(15))
        .build()
        .expect("client")
}

/// An answer: status and body (parsed as JSON if it is JSON, else `Value::Null`), and the raw text.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub json: Value,
    pub text: String,
}

impl Answer {
    /// Asserts the error shape of the contract: `{"error": "...", "code": "..."}` with both non-empty strings.
    pub fn assert_error(&self, status: u16, context: &str) {
        assert_eq!(self.status, status, "{context}: {}", self.text);
        for field in ["error", "code"] {
            let value = self.json.get(field).and_then(Value::as_str).unwrap_or_default();
            assert!(
                !value.is_empty(),
                "{context}: the error body has no {field:?}: {}",
                self.text
            );
        }
    }
}

/// POSTs `body` with `headers` (and `content-type: application/json`) to `url`.
pub async fn post(
    client: &reqwest::Client,
    url: &str,
    body: impl Into<Vec<u8>>,
    headers: &[(HeaderName, HeaderValue)],
) -> Answer {
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.into());
    for (name, value) in headers {
        req = req.header(name.clone(), value.clone());
    }
    let resp = req.send().await.unwrap_or_else(|e| panic!("POST {url}: {e}"));
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    let json = serde_json::from_str(&text).unwrap_or(Value::Null);
    Answer { status, json, text }
}

pub async fn get(client: &reqwest::Client, url: &str) -> Answer {
    let resp = client
        .get(url)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    let json = serde_json::from_str(&text).unwrap_or(Value::Null);
    Answer { status, json, text }
}

/// Sends a raw HTTP/1.1 request (`head` without its final blank line, then each of `chunks` as written) and
/// reads the answer until the server closes the connection or 10 s pass. For what a normal client will not send:
/// a declared length with no body, a chunked body that never ends.
pub async fn raw_request(addr: SocketAddr, head: &str, chunks: &[Vec<u8>]) -> Answer {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(format!("{head}\r\n\r\n").as_bytes())
        .await
        .expect("write head");
    for chunk in chunks {
        // The server may answer and close before reading everything: that is allowed, stop writing.
        if stream.write_all(chunk).await.is_err() {
            break;
        }
    }
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        let mut part = [0u8; 4096];
        loop {
            match stream.read(&mut part).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    buf.extend_from_slice(&part[..n]);
                    // One answer is enough: stop once the declared body is complete.
                    if complete_response(&buf) {
                        break;
                    }
                }
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    assert!(
        read.is_ok() || !buf.is_empty(),
        "no answer within 10 s to a raw request"
    );
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let json = match (body.find('{'), body.rfind('}')) {
        (Some(a), Some(b)) if a < b => serde_json::from_str(&body[a..=b]).unwrap_or(Value::Null),
        _ => Value::Null,
    };
    Answer { status, json, text }
}

fn complete_response(buf: &[u8]) -> bool {
    let text = String::from_utf8_lossy(buf);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    let length = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse::<usize>().ok())?
    });
    length.is_some_and(|n| body.len() >= n)
}

// ---------------------------------------------------------------------------------------------------------
// Signing like the providers do.

/// Signs deliveries for one source with the core's own `Scheme::sign`.
pub struct Signer {
    pub scheme: Scheme,
    key: Key,
}

impl Signer {
    pub fn new(scheme: Scheme, secret: &str) -> Self {
        let key = scheme.key_from_secret(secret).expect("a usable secret");
        Self { scheme, key }
    }

    /// The signature (and id/type/timestamp) headers for `body` as if sent at `now_unix`.
    pub fn headers_at(
        &self,
        body: &[u8],
        event_id: &str,
        event_type: Option<&str>,
        now_unix: i64,
    ) -> Vec<(HeaderName, HeaderValue)> {
        let identity = Identity {
            event_id: event_id.to_owned(),
            event_type: event_type.map(str::to_owned),
        };
        self.scheme.sign(&self.key, body, &identity, now_unix)
    }

    /// Signed now.
    pub fn headers(
        &self,
        body: &[u8],
        event_id: &str,
        event_type: Option<&str>,
    ) -> Vec<(HeaderName, HeaderValue)> {
        self.headers_at(body, event_id, event_type, now_unix())
    }
}

// ---------------------------------------------------------------------------------------------------------
// The sink: a downstream service that answers a script and records every request.

/// One request the sink received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// When it arrived, on the wall clock (a due time is one).
    pub at: SystemTime,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

struct SinkState {
    /// Statuses to answer, in order; then `then` for ever.
    script: Mutex<VecDeque<u16>>,
    then: AtomicU16,
    delay: Mutex<Duration>,
    requests: Mutex<Vec<Recorded>>,
}

/// An HTTP server on 127.0.0.1:0 inside the test: answers the scripted statuses (each request takes the next one;
/// after the script, the `then` status) after an optional delay, and records every request as it arrives.
pub struct Sink {
    addr: SocketAddr,
    state: Arc<SinkState>,
    task: tokio::task::JoinHandle<()>,
}

impl Sink {
    /// Must run inside a multi-threaded tokio runtime (the test's), which serves it.
    pub async fn start(script: &[u16], then: u16) -> Sink {
        let state = Arc::new(SinkState {
            script: Mutex::new(script.iter().copied().collect()),
            then: AtomicU16::new(then),
            delay: Mutex::new(Duration::ZERO),
            requests: Mutex::new(Vec::new()),
        });
        let app = axum::Router::new().fallback(record).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the sink");
        let addr = listener.local_addr().expect("sink address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Sink { addr, state, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().expect("sink lock").clone()
    }

    pub fn count(&self) -> usize {
        self.state.requests.lock().expect("sink lock").len()
    }

    /// From now on answer `status` to everything.
    pub fn answer(&self, status: u16) {
        self.state.script.lock().expect("sink lock").clear();
        self.state.then.store(status, Ordering::SeqCst);
    }

    /// Wait this long before answering each request (recorded on arrival).
    pub fn delay(&self, delay: Duration) {
        *self.state.delay.lock().expect("sink lock") = delay;
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn record(
    axum::extract::State(state): axum::extract::State<Arc<SinkState>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, &'static str) {
    state.requests.lock().expect("sink lock").push(Recorded {
        path: uri.path().to_owned(),
        headers,
        body,
        at: SystemTime::now(),
    });
    let status = state
        .script
        .lock()
        .expect("sink lock")
        .pop_front()
        .unwrap_or_else(|| state.then.load(Ordering::SeqCst));
    let delay = *state.delay.lock().expect("sink lock");
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        "sink",
    )
}

// ---------------------------------------------------------------------------------------------------------
// A sender that retries: each event until some answer is a 2xx, across connection errors, refusals and restarts.

/// Sends distinct signed GitHub-style events to `/webhooks/{source}`, `workers` at a time, each until a 2xx (as a
/// webhook sender's retries do). `base` may be changed while it runs (a restarted server on a new port).
pub struct Resender {
    pub ids: Vec<String>,
    pub base: std::sync::RwLock<String>,
    source: String,
    signer: Signer,
    next: std::sync::atomic::AtomicUsize,
    pub acked: std::sync::atomic::AtomicUsize,
    pub errors: std::sync::atomic::AtomicUsize,
    pub refused: std::sync::atomic::AtomicUsize,
    pub given_up: std::sync::atomic::AtomicUsize,
    pub done: std::sync::atomic::AtomicUsize,
    /// Answers 5xx other than 503 (a store out of reach must be 503, never 500).
    pub broken: std::sync::atomic::AtomicUsize,
}

impl Resender {
    pub fn new(ids: Vec<String>, base: String, source: &str, signer: Signer) -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self {
            ids,
            base: std::sync::RwLock::new(base),
            source: source.to_owned(),
            signer,
            next: Default::default(),
            acked: Default::default(),
            errors: Default::default(),
            refused: Default::default(),
            given_up: Default::default(),
            done: Default::default(),
            broken: Default::default(),
        })
    }

    /// Sends that got no answer or a non-2xx one (each was sent again).
    pub fn resent(&self) -> usize {
        use std::sync::atomic::Ordering::SeqCst;
        self.errors.load(SeqCst) + self.refused.load(SeqCst)
    }

    /// One worker: takes the next event and sends it until some answer is a 2xx, or `give_up_at` passes.
    pub async fn send_all(self: std::sync::Arc<Self>, give_up_at: Instant) {
        use std::sync::atomic::Ordering::SeqCst;
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(5))
            .build()
            .expect("client");
        loop {
            let i = self.next.fetch_add(1, SeqCst);
            let Some(id) = self.ids.get(i) else { break };
            let body = serde_json::json!({"id": id, "n": i, "action": "opened"}).to_string();
            loop {
                let url = format!("{}/webhooks/{}", self.base.read().expect("lock"), self.source);
                let mut req = http
                    .post(url)
                    .header("content-type", "application/json")
                    .body(body.clone());
                for (name, value) in self.signer.headers(body.as_bytes(), id, Some("push")) {
                    req = req.header(name, value);
                }
                match req.send().await {
                    Ok(resp) if resp.status().is_success() => {
                        self.acked.fetch_add(1, SeqCst);
                        break;
                    }
                    Ok(resp) => {
                        if resp.status().is_server_error() && resp.status().as_u16() != 503 {
                            self.broken.fetch_add(1, SeqCst);
                        }
                        self.refused.fetch_add(1, SeqCst)
                    }
                    Err(_) => self.errors.fetch_add(1, SeqCst),
                };
                if Instant::now() > give_up_at {
                    self.given_up.fetch_add(1, SeqCst);
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        self.done.fetch_add(1, SeqCst);
    }
}

// ---------------------------------------------------------------------------------------------------------
// Senders that record every answer, and what the store holds: for the fault suites (`disk`, `faults`).

/// One delivery as its client saw it: the id, the SHA-256 of the body sent, when it was sent and answered, the
/// status (`None`: no answer, the connection failed) and a 503's `Retry-After`.
#[derive(Clone, Debug)]
pub struct Sent {
    pub id: String,
    pub digest: [u8; 32],
    pub sent: Instant,
    pub answered: Instant,
    pub status: Option<u16>,
    pub retry_after: Option<String>,
}

impl Sent {
    pub fn acked(&self) -> bool {
        self.status.is_some_and(|c| (200..300).contains(&c))
    }
}

/// The load [`Clients`] send: to `source`, `clients` at once, bodies of `body` random characters (which compress
/// little), a share `duplicates` of the sends repeating an id the client sent before (with the same body), each
/// client's bodies and choices drawn from `seed` and its number.
#[derive(Clone, Debug)]
pub struct Load {
    pub source: &'static str,
    pub clients: usize,
    pub body: usize,
    pub duplicates: f64,
    pub seed: u64,
}

/// Clients sending signed GitHub-style events until `stop`, each answered or not; every 2xx is an acknowledgement
/// the server must keep. `acked` and `refused` (503s) count the answers as they come.
pub struct Clients {
    stop: Arc<std::sync::atomic::AtomicBool>,
    pub acked: Arc<std::sync::atomic::AtomicUsize>,
    pub refused: Arc<std::sync::atomic::AtomicUsize>,
    tasks: Vec<tokio::task::JoinHandle<Vec<Sent>>>,
}

impl Clients {
    pub fn start(base: String, secret: &str, run: &str, load: Load) -> Clients {
        use rand::{Rng, SeedableRng};
        use sha2::Digest;
        use std::sync::atomic::{AtomicBool, AtomicUsize};
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(AtomicUsize::new(0));
        let refused = Arc::new(AtomicUsize::new(0));
        let signer = Arc::new(Signer::new(Scheme::Github, secret));
        let tasks = (0..load.clients)
            .map(|c| {
                let (stop, acked, refused, signer, base, run, load) = (
                    stop.clone(),
                    acked.clone(),
                    refused.clone(),
                    signer.clone(),
                    base.clone(),
                    run.to_owned(),
                    load.clone(),
                );
                tokio::spawn(async move {
                    let http = reqwest::Client::builder()
                        .no_proxy()
                        .timeout(Duration::from_secs(10))
                        .build()
                        .expect("client");
                    let mut rng =
                        rand::rngs::StdRng::seed_from_u64(load.seed ^ (c as u64).wrapping_mul(0x9e37_79b9));
                    let mut sent = Vec::new();
                    let mut mine: Vec<(String, String)> = Vec::new();
                    let url = format!("{base}/webhooks/{}", load.source);
                    for i in 0.. {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        let (id, payload) = if !mine.is_empty() && rng.random_bool(load.duplicates) {
                            mine[rng.random_range(0..mine.len())].clone()
                        } else {
                            let id = format!("{run}-{c}-{i}");
                            let pad: String = (0..load.body)
                                .map(|_| char::from(rng.sample(rand::distr::Alphanumeric)))
                                .collect();
                            let payload = serde_json::json!({"id": id, "pad": pad}).to_string();
                            mine.push((id.clone(), payload.clone()));
                            (id, payload)
                        };
                        let digest: [u8; 32] = sha2::Sha256::digest(payload.as_bytes()).into();
                        let mut req = http.post(&url).header("content-type", "application/json");
                        for (name, value) in signer.headers(payload.as_bytes(), &id, Some("push")) {
                            req = req.header(name, value);
                        }
                        let at = Instant::now();
                        let answer = req.body(payload).send().await.ok();
                        let status = answer.as_ref().map(|r| r.status().as_u16());
                        let retry_after = answer
                            .as_ref()
                            .and_then(|r| r.headers().get("retry-after"))
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_owned);
                        match status {
                            Some(200..=299) => acked.fetch_add(1, Ordering::SeqCst),
                            Some(503) => refused.fetch_add(1, Ordering::SeqCst),
                            _ => 0,
                        };
                        sent.push(Sent {
                            id,
                            digest,
                            sent: at,
                            answered: Instant::now(),
                            status,
                            retry_after,
                        });
                        if !status.is_some_and(|c| (200..300).contains(&c)) {
                            // Refused, or the server is gone (or going): do not spin.
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                    sent
                })
            })
            .collect();
        Clients {
            stop,
            acked,
            refused,
            tasks,
        }
    }

    pub async fn stop(self) -> Vec<Sent> {
        self.stop.store(true, Ordering::SeqCst);
        let mut all = Vec::new();
        for t in self.tasks {
            all.extend(t.await.expect("a client panicked"));
        }
        all
    }
}

/// Counts of the answers by kind: `200` (2xx), `503`, other statuses, and no answer.
pub fn tally(sent: &[Sent]) -> std::collections::BTreeMap<&'static str, usize> {
    let mut t = std::collections::BTreeMap::new();
    for s in sent {
        let kind = match s.status {
            Some(200..=299) => "200",
            Some(503) => "503",
            Some(_) => "other",
            None => "none",
        };
        *t.entry(kind).or_insert(0) += 1;
    }
    t
}

/// The ids answered 2xx at least once, each once.
pub fn acknowledged(sent: &[Sent]) -> Vec<&str> {
    let mut seen = std::collections::HashSet::new();
    sent.iter()
        .filter(|s| s.acked() && seen.insert(s.id.as_str()))
        .map(|s| s.id.as_str())
        .collect()
}

/// Each stored event's id, and the SHA-256 of every body stored under it (`None`: missing, or not decoding).
pub type Bodies = std::collections::HashMap<String, Vec<Option<[u8; 32]>>>;

/// Every event of `source` in the SQLite store at `data_dir`, read from its files (the server stopped): its id
/// and the SHA-256 of each stored body under that id (more than one would be a double), `None` for a body that
/// is missing or does not decode. Also `PRAGMA integrity_check`'s answer.
pub fn stored_bodies(data_dir: &Path, source: &str) -> (String, Bodies) {
    use sha2::Digest;
    let conn = rusqlite::Connection::open(data_dir.join("inbox.db")).expect("open the store's database");
    let intact = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0))
        .unwrap_or_else(|e| e.to_string());
    let mut stmt = conn
        .prepare(
            "SELECT e.event_id, p.body, p.encoding FROM events e LEFT JOIN payloads p ON p.event = e.id \
             WHERE e.source = ?1",
        )
        .expect("prepare");
    let mut all = Bodies::default();
    let rows = stmt
        .query_map([source], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<Vec<u8>>>(1)?,
                r.get::<_, Option<i64>>(2)?,
            ))
        })
        .expect("read the events");
    for row in rows {
        let (id, body, encoding) = row.expect("a row");
        let body = match (body, encoding) {
            (Some(b), Some(0)) => Some(b),
            (Some(b), Some(1)) => inbox_core::compression::decompress(&b).ok(),
            _ => None,
        };
        all.entry(id)
            .or_default()
            .push(body.map(|b| sha2::Sha256::digest(&b).into()));
    }
    (intact, all)
}

/// The events sent checked against the store: how many were acknowledged, how many of those are missing, and how
/// many sent are stored with another body than the one sent, or more than once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Kept {
    pub acked: usize,
    pub lost: usize,
    pub wrong: usize,
    pub doubled: usize,
}

/// Every id sent is looked at: an acknowledged one must be stored; one stored (acknowledged or not) must hold the
/// body sent under it (every send of an id carries the same body), once.
pub fn kept(sent: &[Sent], stored: &Bodies) -> Kept {
    let acked: std::collections::HashSet<&str> = acknowledged(sent).into_iter().collect();
    let mut k = Kept {
        acked: acked.len(),
        ..Kept::default()
    };
    let mut seen = std::collections::HashSet::new();
    for s in sent {
        if !seen.insert(s.id.as_str()) {
            continue;
        }
        match stored.get(&s.id).map(Vec::as_slice) {
            None | Some([]) => k.lost += usize::from(acked.contains(s.id.as_str())),
            Some([one]) => k.wrong += usize::from(*one != Some(s.digest)),
            Some(_) => k.doubled += 1,
        }
    }
    k
}

/// `VmHWM` (peak resident memory) or `VmRSS` of a process, in bytes.
pub fn proc_status_bytes(pid: u32, field: &str) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/PID/status");
    let kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    kib * 1024
}

pub fn mib(bytes: usize) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}
