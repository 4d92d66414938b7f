//! The AWS path: calls and DynamoDB write units per event against moto (in-process functions, SDK calls counted
//! by an interceptor as tests/aws.rs does), the release zips' sizes, cold-start init time against a local Lambda
//! Runtime API stub, and the cost per million events from bench/prices-2026-11.toml.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use async_trait::async_trait;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use axum::routing::{get, post};
use axum::Router;
use inbox_core::aws::init::{create_stack, QueueSettings};
use inbox_core::aws::{functions, Clients, Runtime};
use inbox_core::config::Config;
use inbox_core::handlers::{http_client, Handler, HandlerError, Registry};
use inbox_core::model::Event;
use inbox_core::schemes::{Identity, Scheme};
use inbox_core::secrets::LocalSecrets;
use serde::Deserialize;
use testkit::calls::CallCounter;
use tokio::process::Command;
use tower::ServiceExt;

use crate::{median, row, Opts, Row, SECRET};

const FUNCTIONS: [&str; 4] = ["receiver", "processor", "alarm", "sweeper"];
/// The cold-start row of bench-hello as cargo-lambda builds it (`cargo lambda build --release -p bench --bin
/// bench-hello`), the baseline of the zips' rows.
const ZIG_HELLO: &str = "bench-hello (cargo-lambda's build)";
const ZIP_SUFFIX: &str = "(the zip's bootstrap)";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Where moto is installed, picks its port and exports the emulator's environment (before any thread starts).
pub fn prepare_env() -> Option<u16> {
    let python = root().join(".venv/bin/python");
    let has_moto = std::process::Command::new(&python)
        .args(["-c", "import moto"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_moto {
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .ok()?
        .port();
    std::env::set_var("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"));
    std::env::set_var("AWS_ACCESS_KEY_ID", "test");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "test");
    std::env::set_var("AWS_REGION", "us-east-1");
    std::env::set_var("AWS_TEST_SOURCE_SECRET", SECRET);
    Some(port)
}

pub async fn run(opts: &Opts, moto_port: Option<u16>, rows: &mut Vec<Row>) {
    // Zip sizes.
    for f in FUNCTIONS {
        let zip = opts.lambda_dir().join(f).join("bootstrap.zip");
        let value = match std::fs::metadata(&zip) {
            Ok(m) => format!("{:.2} MiB", m.len() as f64 / 1024.0 / 1024.0),
            Err(_) => "not built (cargo lambda build --release --output-format zip)".into(),
        };
        row(rows, &format!("zip size: {f}"), value, "< 8 MiB");
    }

    // Cold starts.
    match cold_starts(opts).await {
        Ok(list) => {
            let find = |wanted: &str| list.iter().find(|(n, _, _)| n == wanted).map(|(_, ms, _)| *ms);
            let hello = find("bench-hello");
            // The zips' bootstraps are linked by cargo-lambda (zig, stripped): they compare with a hello it built.
            let zig_hello = find(ZIG_HELLO).or(hello);
            for (name, ms, bin) in &list {
                let base = if name.ends_with(ZIP_SUFFIX) || name == ZIG_HELLO {
                    zig_hello
                } else {
                    hello
                };
                let ratio = base
                    .map(|h| format!(", {:.2}x hello", ms / h))
                    .unwrap_or_default();
                let goal = if name.starts_with("receiver") {
                    "<= 1.5x hello"
                } else {
                    "-"
                };
                row(
                    rows,
                    &format!("cold start init: {name}"),
                    format!("{ms:.1} ms{ratio} ({bin})"),
                    goal,
                );
            }
        }
        Err(e) => row(rows, "cold start init", format!("not measured: {e:#}"), "-"),
    }

    let Some(port) = moto_port else {
        row(
            rows,
            "AWS calls per event",
            "skipped: .venv/bin/python with moto is missing (./test.sh installs it)".into(),
            "-",
        );
        return;
    };
    let mut moto = match start_moto(port).await {
        Ok(c) => c,
        Err(e) => {
            row(
                rows,
                "AWS calls per event",
                format!("skipped: moto did not start: {e:#}"),
                "-",
            );
            return;
        }
    };
    let events = if opts.quick { 5 } else { 20 };
    // The same events through a source that does not look for resent bodies, and one that refuses them (the
    // opt-in; a marking source, GitHub's default, writes the same marker).
    for guard in [Guard::None, Guard::Refusing] {
        let result = calls_and_units(events, guard).await;
        match result {
            Ok(m) => {
                report(rows, &m, events, guard);
                cost(opts, rows, &m, guard);
            }
            Err(e) => row(
                rows,
                &format!("AWS calls per event{}", guard.label()),
                format!("failed: {e:#}"),
                "-",
            ),
        }
    }
    let _ = moto.start_kill();
}

/// Whether the measured source looks for resent bodies.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Guard {
    None,
    Refusing,
}

impl Guard {
    fn label(self) -> &'static str {
        match self {
            Guard::None => "",
            Guard::Refusing => " [refuse_resent_bodies = true]",
        }
    }
}

async fn start_moto(port: u16) -> Result<tokio::process::Child> {
    let log = std::fs::File::create(root().join("target/bench-moto.log"))?;
    // One request at a time, as ./test.sh runs it.
    let child = Command::new(root().join(".venv/bin/python"))
        .arg("-c")
        .arg(
            "import sys\n\
             from werkzeug.serving import run_simple\n\
             from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app\n\
             run_simple('127.0.0.1', int(sys.argv[1]), DomainDispatcherApplication(create_backend_app), threaded=False, request_handler=MotoRequestHandler)\n",
        )
        .arg(port.to_string())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return Ok(child);
        }
        if Instant::now() > deadline {
            bail!("not listening after 30 s (target/bench-moto.log)");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The handler: reads the item while it is PROCESSING (with a client that is not counted), so the claim's and the
/// completion's write units can be computed from the item's size before and after.
struct Probe {
    dynamodb: aws_sdk_dynamodb::Client,
    table: Mutex<String>,
    seen: Mutex<Option<Item>>,
}

type Item = HashMap<String, AttributeValue>;

#[async_trait]
impl Handler for Probe {
    async fn handle(&self, event: &Event) -> Result<(), HandlerError> {
        let table = self.table.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let item = get_item(&self.dynamodb, &table, &event.key().pk()).await;
        *self.seen.lock().unwrap_or_else(|e| e.into_inner()) = item;
        Ok(())
    }
}

async fn get_item(client: &aws_sdk_dynamodb::Client, table: &str, pk: &str) -> Option<Item> {
    client
        .get_item()
        .table_name(table)
        .key("pk", AttributeValue::S(pk.to_owned()))
        .consistent_read(true)
        .send()
        .await
        .ok()?
        .item
}

/// DynamoDB's item size: for each attribute, the UTF-8 length of its name plus its value's size — S: UTF-8 bytes;
/// B: bytes; N: (significant digits + 1) / 2 + 1; BOOL, NULL: 1; L, M: 3 + each element (+ 1 each) and, in M,
/// each key's length; SS/NS/BS: the sum of the members.
pub fn item_size(item: &Item) -> usize {
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

fn number_size(n: &str) -> usize {
    let digits: String = n.chars().filter(char::is_ascii_digit).collect();
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len().max(1);
    significant.div_ceil(2) + 1
}

fn value_size(v: &AttributeValue) -> usize {
    match v {
        AttributeValue::S(s) => s.len(),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::N(n) => number_size(n),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::L(l) => 3 + l.iter().map(|e| 1 + value_size(e)).sum::<usize>(),
        AttributeValue::M(m) => 3 + m.iter().map(|(k, e)| 1 + k.len() + value_size(e)).sum::<usize>(),
        AttributeValue::Ss(s) => s.iter().map(String::len).sum(),
        AttributeValue::Ns(s) => s.iter().map(|n| number_size(n)).sum(),
        AttributeValue::Bs(s) => s.iter().map(|b| b.as_ref().len()).sum(),
        _ => 0,
    }
}

fn units(bytes: usize, unit: usize) -> f64 {
    bytes.div_ceil(unit).max(1) as f64
}

/// Index writes of one table write for the sparse index (keys gsi1pk/gsi1sk; projection: META attributes):
/// entry added or removed: 1 write; key changed: 2 (delete + put); same key, item changed: 1. Each is charged
/// by the projected entry's size, in 1 KiB units.
fn index_units(before: Option<&Item>, after: Option<&Item>) -> f64 {
    let key = |i: Option<&Item>| i.and_then(|i| Some((i.get("gsi1pk")?.clone(), i.get("gsi1sk")?.clone())));
    let projected = |i: &Item| {
        i.iter()
            .filter(|(k, _)| !matches!(k.as_str(), "payload" | "payload_zstd" | "payload_encoding"))
            .map(|(k, v)| k.len() + value_size(v))
            .sum::<usize>()
    };
    match (key(before), key(after)) {
        (None, None) => 0.0,
        (Some(_), None) => units(projected(before.expect("some")), 1024),
        (None, Some(_)) => units(projected(after.expect("some")), 1024),
        (Some(a), Some(b)) if a != b => {
            units(projected(before.expect("some")), 1024) + units(projected(after.expect("some")), 1024)
        }
        (Some(_), Some(_)) => units(projected(after.expect("some")), 1024),
    }
}

#[derive(Default)]
pub struct Measured {
    receiver_calls: BTreeMap<String, f64>,
    processor_calls: BTreeMap<String, f64>,
    duplicate_calls: BTreeMap<String, f64>,
    /// Per event: table write units of the create, the claim and the completion; index write units.
    put_wcu: f64,
    /// Per event: write units of the resent-body marker (a small item of its own, put beside the create).
    marker_wcu: f64,
    claim_wcu: f64,
    complete_wcu: f64,
    index_wcu: f64,
    /// Per event: read units of the receiver's duplicate check (an eventually consistent `GetItem`).
    check_rru: f64,
    duplicate_wcu: f64,
    duplicate_rru: f64,
    body_bytes: f64,
    item_bytes: f64,
    receiver_ms: f64,
    processor_ms: f64,
}

/// How many calls of `op` one event made.
fn counted(calls: &HashMap<String, usize>, op: &str) -> f64 {
    calls.get(op).copied().unwrap_or(0) as f64
}

fn add(into: &mut BTreeMap<String, f64>, calls: HashMap<String, usize>, n: f64) {
    for (op, c) in calls {
        *into.entry(op).or_default() += c as f64 / n;
    }
}

async fn calls_and_units(events: usize, guard: Guard) -> Result<Measured> {
    let sdk = inbox_core::aws::sdk::load().await;
    let prefix = format!("bench{:08x}", inbox_core::time::now_ms() as u32);
    let resources = create_stack(&sdk, &prefix, QueueSettings::default())
        .await
        .map_err(|e| anyhow::anyhow!("create_stack: {e}"))?;
    let counter = CallCounter::default();
    let clients = Clients {
        dynamodb: aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(&sdk)
                .interceptor(counter.clone())
                .build(),
        ),
        sqs: aws_sdk_sqs::Client::from_conf(
            aws_sdk_sqs::config::Builder::from(&sdk)
                .interceptor(counter.clone())
                .build(),
        ),
        ..Clients::new(&sdk)
    };
    let raw_ddb = aws_sdk_dynamodb::Client::new(&sdk);
    let raw_sqs = aws_sdk_sqs::Client::new(&sdk);
    let probe = Arc::new(Probe {
        dynamodb: raw_ddb.clone(),
        table: Mutex::new(resources.table.clone()),
        seen: Mutex::new(None),
    });
    let config = Config::from_toml(&format!(
        "[sources.stripe]\nscheme = \"stripe\"\nsecrets = [\"env:AWS_TEST_SOURCE_SECRET\"]\n{}\
         handler = {{ kind = \"custom\", name = \"probe\", timeout = \"5s\" }}\n",
        if guard == Guard::Refusing {
            "refuse_resent_bodies = true\n"
        } else {
            ""
        }
    ))?;
    let registry = Registry::new(http_client()).register("probe", probe.clone());
    let rt = Runtime::new(clients, Some(&LocalSecrets), resources, config, registry).await?;
    let gen = crate::load::EventGen::new(&format!("aws{:x}", inbox_core::time::now_ms()));
    let key = Scheme::Stripe.key_from_secret(SECRET)?;
    let template: serde_json::Value =
        serde_json::from_str(include_str!("../../tests/data/function_url_event.json"))?;
    let n = events as f64;
    let mut m = Measured::default();
    let (mut recv_ms, mut proc_ms) = (Vec::new(), Vec::new());
    for i in 0..events as u64 {
        let body = gen.body(i);
        let id = format!(
            "evt_{}",
            body.split("\"id\":\"evt_")
                .nth(1)
                .and_then(|s| s.split('"').next())
                .unwrap_or("")
        );
        let deliver = || {
            let mut event = template.clone();
            let identity = Identity {
                event_id: id.clone(),
                event_type: None,
            };
            for (name, value) in Scheme::Stripe.sign(
                &key,
                body.as_bytes(),
                &identity,
                inbox_core::time::now_ms() / 1000,
            ) {
                event["headers"][name.as_str()] = serde_json::json!(value.to_str().unwrap_or(""));
            }
            event["rawPath"] = serde_json::json!("/webhooks/stripe");
            event["requestContext"]["http"]["path"] = serde_json::json!("/webhooks/stripe");
            event["body"] = serde_json::json!(body);
            let app = inbox_core::receiver::router(rt.receiver(), false);
            async move {
                let request = lambda_http::request::from_str(&event.to_string())?;
                let response = app.oneshot(request).await?;
                Ok::<u16, anyhow::Error>(response.status().as_u16())
            }
        };
        counter.take();
        let t = Instant::now();
        let status = deliver().await?;
        recv_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        if status != 200 {
            bail!("receiver answered {status}");
        }
        let last_receive = counter.take();
        add(&mut m.receiver_calls, last_receive.clone(), n);
        let pk = format!("stripe#{id}");
        let created = get_item(&raw_ddb, &rt.resources.table, &pk)
            .await
            .context("no item")?;

        // Play the event source mapping with uncounted calls; count the processor's own.
        let mut records = Vec::new();
        for _ in 0..50 {
            records = receive(&raw_sqs, &rt.resources.queue_url).await?;
            if !records.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if records.is_empty() {
            bail!("no message for {id}");
        }
        counter.take();
        let t = Instant::now();
        let deadline = u64::try_from(inbox_core::time::now_ms() + 30_000).unwrap_or(u64::MAX);
        let response = functions::processor(&rt, batch(records.clone()), deadline).await;
        proc_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        if !response.batch_item_failures.is_empty() {
            bail!("processor reported failures");
        }
        // The probe's own read goes through an uncounted client: what is counted is the processor's.
        add(&mut m.processor_calls, counter.take(), n);
        for r in &records {
            if let Some(h) = &r.receipt_handle {
                let _ = raw_sqs
                    .delete_message()
                    .queue_url(&rt.resources.queue_url)
                    .receipt_handle(h)
                    .send()
                    .await;
            }
        }
        let processing = probe
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .context("the probe did not run")?;
        let completed = get_item(&raw_ddb, &rt.resources.table, &pk)
            .await
            .context("no item")?;
        let (s0, s1, s2) = (item_size(&created), item_size(&processing), item_size(&completed));
        m.put_wcu += units(s0, 1024) / n;
        if guard == Guard::Refusing {
            let event_type = match created.get("event_type") {
                Some(AttributeValue::S(t)) => t.clone(),
                _ => String::new(),
            };
            // The receiver's hash of the body, as the item keeps it (32 bytes).
            let sha: String = match created.get("payload_sha256") {
                Some(AttributeValue::B(b)) => b.as_ref().iter().map(|x| format!("{x:02x}")).collect(),
                Some(AttributeValue::S(t)) => t.clone(),
                _ => bail!("no payload_sha256 on {pk}"),
            };
            let marker = get_item(
                &raw_ddb,
                &rt.resources.table,
                &format!("#body#stripe#{sha}#{event_type}"),
            )
            .await
            .context("no body marker")?;
            m.marker_wcu += units(item_size(&marker), 1024) / n;
        }
        m.claim_wcu += units(s0.max(s1), 1024) / n;
        m.complete_wcu += units(s1.max(s2), 1024) / n;
        m.index_wcu += (index_units(None, Some(&created))
            + index_units(Some(&created), Some(&processing))
            + index_units(Some(&processing), Some(&completed)))
            / n;
        m.body_bytes += body.len() as f64 / n;
        m.item_bytes += s0 as f64 / n;

        // The duplicate: the same delivery again.
        counter.take();
        let status = deliver().await?;
        if status != 200 {
            bail!("duplicate answered {status}");
        }
        let last_duplicate = counter.take();
        add(&mut m.duplicate_calls, last_duplicate.clone(), n);
        // A failed conditional write is charged like a write of the item as it stands (at least 1 unit); an
        // eventually consistent read, half a unit per 4 KB of the item (the projection does not reduce it).
        let dup = counted(&last_duplicate, "dynamodb.PutItem") > 0.0;
        m.duplicate_wcu += if dup { units(s2, 1024) / n } else { 0.0 };
        m.duplicate_rru += counted(&last_duplicate, "dynamodb.GetItem") * units(s2, 4096) * 0.5 / n;
        m.check_rru += counted(&last_receive, "dynamodb.GetItem") * units(s0, 4096) * 0.5 / n;
    }
    m.receiver_ms = median(recv_ms);
    m.processor_ms = median(proc_ms);
    Ok(m)
}

async fn receive(sqs: &aws_sdk_sqs::Client, url: &str) -> Result<Vec<SqsMessage>> {
    let out = sqs
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .wait_time_seconds(0)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await?;
    Ok(out.messages().iter().map(functions::as_delivered).collect())
}

fn batch(records: Vec<SqsMessage>) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = records;
    event
}

fn calls_text(calls: &BTreeMap<String, f64>) -> String {
    if calls.is_empty() {
        return "none".into();
    }
    calls
        .iter()
        .map(|(op, n)| format!("{n:.2} {op}"))
        .collect::<Vec<_>>()
        .join(" + ")
}

fn report(rows: &mut Vec<Row>, m: &Measured, events: usize, guard: Guard) {
    let label = guard.label();
    row(
        rows,
        &format!("AWS receiver calls per event ({events} events, moto){label}"),
        calls_text(&m.receiver_calls),
        if guard == Guard::None {
            "1 GetItem + 1 PutItem + 1 SendMessage"
        } else {
            "1 GetItem + 2 PutItem + 1 SendMessage"
        },
    );
    if guard != Guard::None {
        row(
            rows,
            &format!("DynamoDB WCU per event (resent-body marker){label}"),
            format!("{:.2}", m.marker_wcu),
            "<= 1 more than unguarded",
        );
    }
    row(
        rows,
        &format!("{}{label}", "AWS processor calls per event (batch of 1)"),
        calls_text(&m.processor_calls),
        "<= 2 UpdateItem",
    );
    row(
        rows,
        &format!("{}{label}", "AWS duplicate delivery calls"),
        calls_text(&m.duplicate_calls),
        "-",
    );
    row(
        rows,
        &format!("DynamoDB WCU per event (table){label}"),
        format!(
            "{:.2} (create {:.2} + claim {:.2} + complete {:.2}); body {:.0} B, item {:.0} B (zstd body)",
            m.put_wcu + m.claim_wcu + m.complete_wcu,
            m.put_wcu,
            m.claim_wcu,
            m.complete_wcu,
            m.body_bytes,
            m.item_bytes
        ),
        "-",
    );
    row(
        rows,
        &format!("{}{label}", "DynamoDB WCU per event (sparse index)"),
        format!("{:.2}", m.index_wcu),
        "-",
    );
    row(
        rows,
        &format!(
            "{}{label}",
            "DynamoDB RRU per event (the receiver's duplicate check)"
        ),
        format!("{:.2}", m.check_rru),
        "-",
    );
    row(
        rows,
        &format!("{}{label}", "DynamoDB per duplicate"),
        format!("{:.2} WCU + {:.2} RRU", m.duplicate_wcu, m.duplicate_rru),
        "-",
    );
    row(
        rows,
        &format!("{}{label}", "handler time against moto: receiver / processor"),
        format!("{:.1} ms / {:.1} ms", m.receiver_ms, m.processor_ms),
        "-",
    );
}

#[derive(Deserialize)]
struct Prices {
    date: String,
    source: String,
    lambda: LambdaPrices,
    dynamodb: DynamoPrices,
    sqs: SqsPrices,
    deployment: Deployment,
}

#[derive(Deserialize)]
struct LambdaPrices {
    arm64_per_gb_second: f64,
    x86_64_per_gb_second: f64,
    per_million_requests: f64,
}

#[derive(Deserialize)]
struct DynamoPrices {
    per_million_write_request_units: f64,
    per_million_read_request_units: f64,
}

#[derive(Deserialize)]
struct SqsPrices {
    per_million_requests: f64,
}

#[derive(Deserialize)]
struct Deployment {
    architecture: String,
    receiver_memory_mb: f64,
    processor_memory_mb: f64,
    processor_batch_size: f64,
}

/// Cost per million events on the happy path (free tiers ignored; the sweeper's once-a-minute run and the alarm
/// are fixed or failure-only, not per event).
fn cost(opts: &Opts, rows: &mut Vec<Row>, m: &Measured, guard: Guard) {
    let path = opts.root.join("bench/prices-2026-11.toml");
    let prices: Prices = match std::fs::read_to_string(&path)
        .map_err(anyhow::Error::from)
        .and_then(|t| toml::from_str(&t).map_err(anyhow::Error::from))
    {
        Ok(p) => p,
        Err(e) => {
            row(
                rows,
                "cost per million events",
                format!("not computed: {}: {e}", path.display()),
                "-",
            );
            return;
        }
    };
    let gbs_price = if prices.deployment.architecture == "x86_64" {
        prices.lambda.x86_64_per_gb_second
    } else {
        prices.lambda.arm64_per_gb_second
    };
    let million = 1e6;
    // Lambda bills duration in 1 ms steps.
    let receiver_gbs =
        million * m.receiver_ms.ceil() / 1000.0 * prices.deployment.receiver_memory_mb / 1024.0;
    let batch = prices.deployment.processor_batch_size.max(1.0);
    // The processor runs a batch's messages concurrently; a batch is charged at least the one-message duration.
    let processor_gbs =
        million / batch * m.processor_ms.ceil() / 1000.0 * prices.deployment.processor_memory_mb / 1024.0;
    let lambda_requests = million + million / batch;
    let lambda = (receiver_gbs + processor_gbs) * gbs_price
        + lambda_requests / million * prices.lambda.per_million_requests;
    let wru = m.put_wcu + m.marker_wcu + m.claim_wcu + m.complete_wcu + m.index_wcu;
    // The receiver's duplicate check, as measured; any read of the processor's, a whole unit each.
    let reads: f64 = m.check_rru
        + m.processor_calls
            .iter()
            .filter(|(op, _)| op.contains("GetItem") || op.contains("Query"))
            .map(|(_, n)| n)
            .sum::<f64>();
    let dynamo = wru * prices.dynamodb.per_million_write_request_units
        + reads * prices.dynamodb.per_million_read_request_units;
    // SQS: the receiver's SendMessage, and the event source mapping's ReceiveMessage and DeleteMessageBatch per batch.
    let sends: f64 = m
        .receiver_calls
        .iter()
        .filter(|(op, _)| op.starts_with("sqs."))
        .map(|(_, n)| n)
        .sum();
    let sqs_requests = sends + 2.0 / batch;
    let sqs = sqs_requests * prices.sqs.per_million_requests;
    let total = lambda + dynamo + sqs;
    row(
        rows,
        &format!(
            "cost per million events ({} prices, {}){}",
            prices.date,
            prices.deployment.architecture,
            guard.label()
        ),
        format!(
            "${total:.2} = Lambda ${lambda:.2} ({:.0} GB-s + {:.2} M requests) + DynamoDB ${dynamo:.2} ({wru:.2} WRU + {reads:.2} RRU/event) + SQS ${sqs:.2} ({sqs_requests:.2} requests/event) + Function URL $0",
            receiver_gbs + processor_gbs,
            lambda_requests / million
        ),
        "-",
    );
    println!("  prices: {}", prices.source);
}

/// Spawns each function's bootstrap with AWS_LAMBDA_RUNTIME_API at a local stub and measures from spawn to its
/// first `GET /2018-06-01/runtime/invocation/next`. Returns (name, median ms, which binary).
async fn cold_starts(opts: &Opts) -> Result<Vec<(String, f64, String)>> {
    let rounds = if opts.quick { 5 } else { 15 };
    let mut out = Vec::new();
    let mut list: Vec<(String, PathBuf)> = vec![("bench-hello".into(), opts.binary("bench-hello"))];
    // The release binaries, built like bench-hello, and the deployed bootstraps where cargo-lambda built them.
    for f in FUNCTIONS {
        list.push((f.into(), opts.binary(f)));
    }
    let unpacked = tempfile::TempDir::new()?;
    for f in FUNCTIONS {
        let zip = opts.lambda_dir().join(f).join("bootstrap.zip");
        let dir = unpacked.path().join(f);
        let ok = zip.exists()
            && std::process::Command::new("unzip")
                .arg("-q")
                .arg(&zip)
                .arg("-d")
                .arg(&dir)
                .status()
                .is_ok_and(|s| s.success());
        if ok {
            list.push((format!("{f} {ZIP_SUFFIX}"), dir.join("bootstrap")));
        }
    }
    let zig_hello = opts.lambda_dir().join("bench-hello/bootstrap");
    if zig_hello.exists() {
        list.insert(1, (ZIG_HELLO.to_owned(), zig_hello));
    }
    // Rounds interleave the binaries, so a noisy moment weighs on all of them alike.
    let list: Vec<(String, PathBuf)> = list
        .into_iter()
        .filter(|(name, bin)| {
            let there = bin.exists();
            if !there {
                out.push((name.clone(), f64::NAN, format!("{} missing", bin.display())));
            }
            there
        })
        .collect();
    let mut times = vec![Vec::new(); list.len()];
    for _ in 0..rounds {
        for ((name, bin), times) in list.iter().zip(&mut times) {
            times.push(init_once(bin).await.with_context(|| name.clone())?);
        }
    }
    for ((name, bin), times) in list.into_iter().zip(times) {
        let which = if bin.starts_with(unpacked.path()) {
            "target/lambda/*/bootstrap.zip, unzipped".to_owned()
        } else {
            bin.strip_prefix(&opts.root)
                .or_else(|_| bin.strip_prefix(opts.bin_dir.parent().unwrap_or(&opts.bin_dir)))
                .unwrap_or(&bin)
                .display()
                .to_string()
        };
        out.push((name, median(times), which));
    }
    Ok(out)
}

async fn init_once(bin: &Path) -> Result<f64> {
    let (tx, rx) = tokio::sync::oneshot::channel::<std::result::Result<Instant, String>>();
    let tx = Arc::new(Mutex::new(Some(tx)));
    let (t1, t2) = (tx.clone(), tx);
    let app = Router::new()
        .route(
            "/2018-06-01/runtime/invocation/next",
            get(move || {
                if let Some(tx) = t1.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    let _ = tx.send(Ok(Instant::now()));
                }
                async {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    axum::http::StatusCode::SERVICE_UNAVAILABLE
                }
            }),
        )
        .route(
            "/2018-06-01/runtime/init/error",
            post(move |body: String| {
                if let Some(tx) = t2.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    let _ = tx.send(Err(body));
                }
                async { axum::http::StatusCode::ACCEPTED }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let api = listener.local_addr()?;
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let config = "[sources.stripe]\nscheme = \"stripe\"\nsecrets = [\"env:BENCH_STRIPE_SECRET\"]\nhandler = { kind = \"log\" }\n";
    let spawned = Instant::now();
    let mut child = Command::new(bin)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("AWS_LAMBDA_RUNTIME_API", api.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", "bench")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "bench")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("INBOX_TABLE", "bench-events")
        .env("INBOX_QUEUE_URL", "http://127.0.0.1:9/000000000000/bench-queue")
        .env("INBOX_DLQ_URL", "http://127.0.0.1:9/000000000000/bench-dlq")
        .env("INBOX_BUCKET", "bench-payloads")
        .env(
            "INBOX_ALARM_TOPIC_ARN",
            "arn:aws:sns:us-east-1:000000000000:bench",
        )
        .env("INBOX_CONFIG", config)
        .env("BENCH_STRIPE_SECRET", SECRET)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let first = tokio::time::timeout(Duration::from_secs(20), rx).await;
    let _ = child.start_kill();
    let _ = child.wait().await;
    server.abort();
    match first {
        Ok(Ok(Ok(at))) => Ok((at - spawned).as_secs_f64() * 1000.0),
        Ok(Ok(Err(body))) => bail!("init error: {body}"),
        _ => bail!("no request to the Runtime API within 20 s"),
    }
}
