//! `inbox`: runs the embedded runtime (`inbox serve`) and operates on its events (list, show, replay, send).
#![forbid(unsafe_code)]

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use std::sync::Arc;

use inbox_core::aws::dynamodb::DynamoLedger;
use inbox_core::aws::s3::S3Payloads;
use inbox_core::embedded::sqlite::SqliteLedger;
use inbox_core::aws::sqs::SqsQueue;
use inbox_core::aws::init::{create_stack, QueueSettings};
use inbox_core::aws::Resources;
use inbox_core::config::Config;
use inbox_core::handlers::{http_client, Registry};
use inbox_core::model::{Event, EventId, EventKey, SourceName, Status};
use inbox_core::ports::{Ledger, ListFilter, Queue, Replay};
use inbox_core::reconcile::{Progress, Reconciler, RunOptions};
use inbox_core::schemes::Identity;
use inbox_core::secrets::LocalSecrets;
use inbox_core::source::Sources;
use inbox_core::time::{now_ms, rfc3339};

/// mimalloc instead of the system allocator: on the receiver's hot path glibc's malloc spent a tenth of the
/// server's CPU consolidating free chunks and giving pages back (madvise, with a TLB shootdown on every core).
/// Built without its transparent huge pages (`no_thp`, Cargo.toml): with them, `inbox serve`'s peak memory end to
/// end was 55 MiB instead of 34, at the same speed (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "inbox", version, about = "webhook-inbox: store first, process later")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Receive webhooks and process them, on the embedded store.
    Serve {
        #[arg(long)]
        config: PathBuf,
        /// Overrides `server.listen`.
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
        /// Overrides `server.data_dir`.
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// List or show stored events.
    Events {
        #[command(subcommand)]
        command: EventsCommand,
    },
    /// Move dead (or, with --force, completed) events back to RECEIVED so they run again.
    Replay {
        #[command(flatten)]
        store: StoreArgs,
        /// Which events: dead (default) or completed (needs --force).
        #[arg(long, default_value = "dead")]
        status: Status,
        #[arg(long)]
        source: Option<SourceName>,
        /// Only this event (with --source).
        #[arg(long, requires = "source")]
        event_id: Option<String>,
        /// Say what would be replayed, change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Allow replaying completed events (their handler runs again).
        #[arg(long)]
        force: bool,
    },
    /// Ask the provider's API which events exist and ingest those the ledger lacks (the source's `reconcile`
    /// block says how): for an outage longer than the sender retries, or to check delivery by hand.
    Reconcile {
        #[command(flatten)]
        store: StoreArgs,
        #[arg(long)]
        source: SourceName,
        /// Look back this far (e.g. 72h) instead of from the checkpoint.
        #[arg(long, value_parser = duration)]
        since: Option<Duration>,
        /// List and compare, create and enqueue nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print the summary as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Serve the operator console (a web page) over the same store: overview, events, one event, replay.
    Console {
        #[command(flatten)]
        store: StoreArgs,
        /// Where to listen; anything but loopback needs INBOX_CONSOLE_TOKEN.
        #[arg(long, default_value = inbox_core::console::DEFAULT_LISTEN)]
        listen: std::net::SocketAddr,
        /// Leave `Secure` off the session cookie, for a console reached over plain HTTP on a private network
        /// (browsers keep a Secure cookie only from HTTPS and from loopback).
        #[arg(long)]
        insecure_cookie: bool,
        /// A login ends after this long without a request.
        #[arg(long, value_parser = duration, default_value = "30m")]
        session_idle: Duration,
        /// A login ends this long after it began, however busy.
        #[arg(long, value_parser = duration, default_value = "12h")]
        session_lifetime: Duration,
    },
    /// The AWS runtime's resources.
    Aws {
        #[command(subcommand)]
        command: AwsCommand,
    },
    /// Send a signed test webhook to a running server, signed with the source's first secret.
    Send {
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        source: SourceName,
        /// The body; by default a small JSON event with a fresh id.
        #[arg(long)]
        body: Option<String>,
        /// The event id, for schemes that carry it in a header; by default a fresh one.
        #[arg(long)]
        event_id: Option<String>,
        #[arg(long)]
        event_type: Option<String>,
        /// The server's base URL; by default `server.listen` from the config.
        #[arg(long)]
        url: Option<String>,
    },
}

#[derive(Subcommand)]
enum AwsCommand {
    /// Play what AWS does around the functions, for functions served by `cargo lambda watch` (Lambda's Invoke API
    /// at --lambda): the event source mappings (work queue to the processor, dead-letter queue to the alarm
    /// function, with partial batch failures) and the schedules (the sweeper every minute, the reconciler every
    /// five). The queues are INBOX_QUEUE_URL and INBOX_DLQ_URL, as `inbox aws init` prints them. Stops on Ctrl-C.
    Play {
        #[arg(long, default_value = "http://127.0.0.1:9000")]
        lambda: String,
        /// A function served elsewhere than --lambda, as NAME=URL (one `cargo lambda watch -p NAME -P PORT` per
        /// function); repeatable.
        #[arg(long = "function", value_name = "NAME=URL")]
        functions: Vec<String>,
        /// Seconds between two sweeper runs.
        #[arg(long, default_value_t = 60)]
        sweep_every: u64,
        /// Seconds between two reconciler runs; 0 runs no reconciler (no source has a `reconcile` block).
        #[arg(long, default_value_t = 300)]
        reconcile_every: u64,
    },
    /// Create the table, queues, bucket and topic wherever the SDK points (AWS_ENDPOINT_URL: the emulator,
    /// LocalStack, a sandbox account) as the template defines them, and print the functions' environment.
    Init {
        #[arg(long)]
        prefix: String,
        #[arg(long, default_value_t = 25)]
        max_receive_count: u32,
    },
}

#[derive(Subcommand)]
enum EventsCommand {
    List {
        #[command(flatten)]
        store: StoreArgs,
        #[arg(long)]
        status: Option<Status>,
        #[arg(long)]
        source: Option<SourceName>,
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    Show {
        #[command(flatten)]
        store: StoreArgs,
        source: SourceName,
        event_id: String,
        #[arg(long)]
        json: bool,
        /// Print the stored payload too.
        #[arg(long)]
        payload: bool,
    },
}

/// Where the events are: the data directory named by a config file or given directly, or, with `--aws`, the
/// stack named by `INBOX_TABLE`, `INBOX_QUEUE_URL` and `INBOX_BUCKET` (default credential chain).
#[derive(Args)]
struct StoreArgs {
    #[arg(long, conflicts_with_all = ["data_dir", "aws"])]
    config: Option<PathBuf>,
    #[arg(long, conflicts_with = "aws")]
    data_dir: Option<PathBuf>,
    /// Work on the AWS stack instead of a local data directory.
    #[arg(long)]
    aws: bool,
}

/// An opened ledger, and the queue to re-send replayed events to (AWS; a running `inbox serve` notices by itself).
struct Store {
    ledger: Arc<dyn Ledger>,
    queue: Option<Arc<dyn Queue>>,
}

impl StoreArgs {
    /// The sweeper's grace from the config when one is named (the default otherwise): the ledger stamps due times
    /// with it, so the CLI's writes must agree with the server's.
    fn grace(&self) -> Result<Duration> {
        Ok(match &self.config {
            Some(path) => load(path)?.sweeper.grace,
            None => inbox_core::config::SweeperConfig::default().grace,
        })
    }

    async fn open(&self) -> Result<Store> {
        let grace = self.grace()?;
        if self.aws {
            let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
                .load()
                .await;
            let res = Resources::from_env()?;
            let payloads = res
                .bucket
                .as_ref()
                .map(|b| S3Payloads::new(S3Payloads::config(&sdk), b.clone()));
            let ledger = DynamoLedger::new(
                aws_sdk_dynamodb::Client::new(&sdk),
                res.table.clone(),
                payloads,
                grace,
            );
            let queue = SqsQueue::new(aws_sdk_sqs::Client::new(&sdk), res.queue_url.clone());
            return Ok(Store {
                ledger: Arc::new(ledger),
                queue: Some(Arc::new(queue)),
            });
        }
        let dir = match (&self.config, &self.data_dir) {
            (_, Some(dir)) => dir.clone(),
            (Some(path), None) => load(path)?.server.data_dir,
            (None, None) => bail!("say where the events are: --config FILE, --data-dir DIR or --aws"),
        };
        if !dir.join("inbox.db").exists() {
            bail!("no events stored in {} (no inbox.db there)", dir.display());
        }
        let ledger = SqliteLedger::open(&dir, 1024, grace)?;
        Ok(Store {
            ledger: Arc::new(ledger),
            queue: None,
        })
    }
}

fn load(path: &Path) -> Result<Config> {
    Ok(Config::load(path)?)
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("INBOX_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(run(cli))
}

async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Serve {
            config,
            listen,
            data_dir,
        } => {
            let mut config = load(&config)?;
            if let Some(listen) = listen {
                config.server.listen = listen;
            }
            if let Some(dir) = data_dir {
                config.server.data_dir = dir;
            }
            let on_listen = |addr| println!("inbox: listening on http://{addr}");
            inbox_core::embedded::serve(config, Registry::new(http_client()), on_listen, shutdown_signal())
                .await?;
            Ok(())
        }
        Command::Events {
            command:
                EventsCommand::List {
                    store,
                    status,
                    source,
                    limit,
                    json,
                },
        } => {
            let ledger = store.open().await?.ledger;
            let events = ledger
                .list(&ListFilter {
                    status,
                    source,
                    limit,
                    ..Default::default()
                })
                .await?;
            if json {
                for e in &events {
                    println!("{}", event_json(e, false));
                }
            } else {
                print_table(&events);
            }
            Ok(())
        }
        Command::Events {
            command:
                EventsCommand::Show {
                    store,
                    source,
                    event_id,
                    json,
                    payload,
                },
        } => {
            let ledger = store.open().await?.ledger;
            let key = EventKey::new(source, EventId::parse(&event_id)?);
            let Some(event) = ledger.get(&key).await? else {
                bail!("no event {key}");
            };
            if json {
                println!("{}", event_json(&event, payload));
            } else {
                print_event(&event, payload);
            }
            Ok(())
        }
        Command::Replay {
            store,
            status,
            source,
            event_id,
            dry_run,
            force,
        } => replay(store.open().await?, status, source, event_id, dry_run, force).await,
        Command::Console {
            store,
            listen,
            insecure_cookie,
            session_idle,
            session_lifetime,
        } => {
            let policy = inbox_core::console::SessionPolicy {
                idle: session_idle,
                lifetime: session_lifetime,
                secure_cookie: !insecure_cookie,
            };
            console(store, listen, policy).await
        }
        Command::Aws {
            command:
                AwsCommand::Play {
                    lambda,
                    functions,
                    sweep_every,
                    reconcile_every,
                },
        } => play(&lambda, &functions, sweep_every, reconcile_every).await,
        Command::Aws {
            command:
                AwsCommand::Init {
                    prefix,
                    max_receive_count,
                },
        } => {
            let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
                .load()
                .await;
            let settings = QueueSettings {
                max_receive_count,
                ..QueueSettings::default()
            };
            let resources = create_stack(&sdk, &prefix, settings)
                .await
                .map_err(anyhow::Error::msg)?;
            for line in resources.env_lines() {
                println!("{line}");
            }
            Ok(())
        }
        Command::Send {
            config,
            source,
            body,
            event_id,
            event_type,
            url,
        } => send(&config, source, body, event_id, event_type, url).await,
        Command::Reconcile {
            store,
            source,
            since,
            dry_run,
            json,
        } => reconcile(store, source, since, dry_run, json).await,
    }
}

fn duration(text: &str) -> Result<Duration, String> {
    inbox_core::time::parse_duration(text)
}

/// Where embedded events wait when no process holds the in-memory queue: in the ledger itself. A running `inbox
/// serve` takes them from there (its sweep, within the sweeper's grace), as it does after a restart.
struct LedgerIsTheQueue;

#[async_trait::async_trait]
impl Queue for LedgerIsTheQueue {
    async fn enqueue(&self, _key: &EventKey, _delay: Duration) -> Result<(), inbox_core::ports::QueueError> {
        Ok(())
    }
}

async fn reconcile(
    store: StoreArgs,
    source: SourceName,
    since: Option<Duration>,
    dry_run: bool,
    json: bool,
) -> Result<()> {
    let (config, reconciler) = if store.aws {
        let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .load()
            .await;
        let secrets = inbox_core::aws::AwsSecrets::new(&sdk);
        let config = inbox_core::aws::load_config(&secrets).await?;
        let block = reconcile_block(&config, &source)?;
        since_within_retention(since, &config)?;
        let r = Reconciler::from_config(&source, block, &secrets).await?;
        (config, r)
    } else {
        let Some(path) = &store.config else {
            bail!("inbox reconcile needs the config that holds the source's reconcile block: --config FILE (or --aws)");
        };
        let config = load(path)?;
        let block = reconcile_block(&config, &source)?;
        since_within_retention(since, &config)?;
        let r = Reconciler::from_config(&source, block, &LocalSecrets).await?;
        (config, r)
    };
    drop(config);
    // Opened once the request is known to be sound, so a refused one touches nothing.
    let opened = store.open().await?;
    let queue: Arc<dyn Queue> = opened.queue.unwrap_or_else(|| Arc::new(LedgerIsTheQueue));
    let bar = indicatif::ProgressBar::new(1000);
    if json || !std::io::stderr().is_terminal() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {percent}% {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut progress = |p: &Progress| {
        bar.set_position((p.fraction() * 1000.0) as u64);
        bar.set_message(format!(
            "listed {}, already stored {}, recovered {}",
            p.summary.listed, p.summary.present, p.summary.recovered
        ));
    };
    let options = RunOptions { since, dry_run };
    let run = reconciler
        .run(opened.ledger.as_ref(), queue.as_ref(), options, &mut progress)
        .await;
    bar.finish_and_clear();
    let (summary, error) = match run {
        Ok(summary) => (summary, None),
        Err(e) => (e.summary, Some(e.to_string())),
    };
    if json {
        let mut v = serde_json::to_value(summary)?;
        v["source"] = serde_json::json!(source);
        v["error"] = serde_json::json!(error);
        if let Some(w) = summary.window {
            v["window"] = serde_json::json!({"from": rfc3339(w.from_ms), "to": rfc3339(w.to_ms)});
        }
        println!("{v}");
    } else {
        let verb = if dry_run { "would recover" } else { "recovered" };
        println!(
            "{source}: listed {}, already stored {}, {verb} {}, failed {} ({} API requests, {} ledger reads)",
            summary.listed,
            summary.present,
            summary.recovered,
            summary.failed,
            summary.requests,
            summary.existence_reads
        );
        if let Some(w) = summary.window {
            println!("window: {} to {}", rfc3339(w.from_ms), rfc3339(w.to_ms));
        }
        if summary.retried + summary.given_up + summary.kept > 0 {
            println!(
                "failed events of earlier runs: {} tried again, {} given up (older than the lookback); {} kept for \
                 the next runs",
                summary.retried, summary.given_up, summary.kept
            );
        }
        if !dry_run && summary.recovered > 0 && !store.aws {
            println!("a running `inbox serve` processes the recovered events within the sweeper's grace");
        }
    }
    match error {
        Some(e) => bail!(e),
        None => Ok(()),
    }
}

/// `--since` reaches back at most `retention_days`: past retention a completed event's record is gone, and the run
/// would take it for one never received and run its handler again.
fn since_within_retention(since: Option<Duration>, config: &Config) -> Result<()> {
    match since {
        Some(since) if since > config.retention => bail!(
            "--since {} is longer than retention_days ({}): past retention the ledger cannot tell an event never \
             received from one done and forgotten, so recovering it could run its handler again",
            whole_units(since),
            config.retention.as_secs() / 86_400
        ),
        _ => Ok(()),
    }
}

/// `d` in hours, or minutes, or seconds, whichever is whole (`48h`, `90m`), as the docs write `--since`.
fn whole_units(d: Duration) -> String {
    let secs = d.as_secs();
    match [(3_600, "h"), (60, "m")]
        .into_iter()
        .find(|(unit, _)| secs > 0 && secs.is_multiple_of(*unit))
    {
        Some((unit, name)) => format!("{}{name}", secs / unit),
        None => format!("{secs}s"),
    }
}

fn reconcile_block<'a>(
    config: &'a Config,
    source: &SourceName,
) -> Result<&'a inbox_core::config::ReconcileConfig> {
    config
        .sources
        .get(source)
        .with_context(|| format!("no source {source} in the config"))?
        .reconcile
        .as_ref()
        .with_context(|| format!("sources.{source} has no [sources.{source}.reconcile] block"))
}

/// `inbox aws play`: pumps both queues and keeps the schedules until Ctrl-C, a line per batch or run.
async fn play(lambda: &str, functions: &[String], sweep_every: u64, reconcile_every: u64) -> Result<()> {
    use inbox_core::aws::play::Player;
    let resources = Resources::from_env()?;
    let dlq = resources
        .dlq_url
        .clone()
        .context("INBOX_DLQ_URL is not set (`inbox aws init` prints it)")?;
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let mut player = Player::new(aws_sdk_sqs::Client::new(&sdk), lambda);
    for f in functions {
        let (name, url) = f
            .split_once('=')
            .with_context(|| format!("--function {f}: expected NAME=URL"))?;
        player = player.serving(name, url);
    }
    let schedules = [
        ("sweeper", Duration::from_secs(sweep_every)),
        ("reconciler", Duration::from_secs(reconcile_every)),
    ];
    let mut next: Vec<tokio::time::Instant> = schedules.iter().map(|_| tokio::time::Instant::now()).collect();
    eprintln!("playing the event source mappings and schedules against {lambda}; Ctrl-C stops");
    let stop = shutdown_signal();
    tokio::pin!(stop);
    loop {
        let round = async {
            for (queue, function) in [(&resources.queue_url, "processor"), (&dlq, "alarm")] {
                match player.pump(queue, function, Duration::from_secs(1)).await {
                    Ok(p) if p.received > 0 => eprintln!(
                        "{function}: {} received, {} deleted, {} left for SQS to deliver again",
                        p.received, p.deleted, p.left
                    ),
                    Ok(_) => {}
                    Err(e) => eprintln!("{function}: {e}"),
                }
            }
            for ((function, every), at) in schedules.iter().zip(next.iter_mut()) {
                if every.is_zero() || tokio::time::Instant::now() < *at {
                    continue;
                }
                *at = tokio::time::Instant::now() + *every;
                match player.tick(function).await {
                    Ok(answer) => eprintln!("{function}: {answer}"),
                    Err(e) => eprintln!("{function}: {e}"),
                }
            }
        };
        tokio::select! {
            () = round => {}
            () = &mut stop => return Ok(()),
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = ctrl_c => {},
                _ = term.recv() => {},
            }
        }
        Err(_) => {
            let _ = ctrl_c.await;
        }
    }
}

fn event_json(e: &Event, payload: bool) -> serde_json::Value {
    let time = |t: Option<i64>| t.map(rfc3339);
    let mut v = serde_json::json!({
        "source": e.source,
        "event_id": e.event_id,
        "event_type": e.event_type,
        "status": e.status,
        "attempts": e.attempts,
        "replays": e.replays,
        "received_at": rfc3339(e.received_at),
        "updated_at": rfc3339(e.updated_at),
        "next_attempt_at": time(e.next_attempt_at),
        "completed_at": time(e.completed_at),
        "expires_at": time(e.expires_at),
        "last_error": e.last_error,
        "payload_sha256": e.payload_sha256,
        "origin": e.origin,
        "replayed_at": time(e.replayed_at),
        "resent_of": e.resent_of,
    });
    if payload {
        v["headers"] = serde_json::json!(e.headers);
        v["payload"] = serde_json::json!(String::from_utf8_lossy(&e.payload));
    }
    v
}

fn print_table(events: &[Event]) {
    println!(
        "{:<24}  {:<12}  {:<36}  {:<24}  {:<10}  {:>8}",
        "RECEIVED_AT", "SOURCE", "EVENT_ID", "TYPE", "STATUS", "ATTEMPTS"
    );
    for e in events {
        println!(
            "{:<24}  {:<12}  {:<36}  {:<24}  {:<10}  {:>8}",
            rfc3339(e.received_at),
            e.source,
            e.event_id,
            e.event_type.as_deref().unwrap_or("-"),
            e.status,
            e.attempts
        );
    }
}

fn print_event(e: &Event, payload: bool) {
    let time = |t: Option<i64>| t.map_or_else(|| "-".to_owned(), rfc3339);
    println!("source:          {}", e.source);
    println!("event_id:        {}", e.event_id);
    println!("event_type:      {}", e.event_type.as_deref().unwrap_or("-"));
    println!(
        "resent_of:       {}",
        e.resent_of.as_ref().map_or("-", |id| id.as_str())
    );
    println!("status:          {}", e.status);
    println!("attempts:        {} (replays: {})", e.attempts, e.replays);
    println!("last_error:      {}", e.last_error.as_deref().unwrap_or("-"));
    println!("received_at:     {}", rfc3339(e.received_at));
    println!("updated_at:      {}", rfc3339(e.updated_at));
    println!("next_attempt_at: {}", time(e.next_attempt_at));
    println!("completed_at:    {}", time(e.completed_at));
    println!("payload_sha256:  {}", e.payload_sha256);
    if payload {
        for (name, value) in &e.headers {
            println!("header:          {name}: {value}");
        }
        println!("payload:\n{}", String::from_utf8_lossy(&e.payload));
    }
}

async fn replay(
    store: Store,
    status: Status,
    source: Option<SourceName>,
    event_id: Option<String>,
    dry_run: bool,
    force: bool,
) -> Result<()> {
    match status {
        Status::Dead => {}
        Status::Completed if force => {}
        Status::Completed => bail!("replaying completed events runs their handler again: add --force"),
        other => bail!("only dead or completed events can be replayed, not {other}"),
    }
    let ledger = store.ledger;
    let keys: Vec<EventKey> = match (&source, event_id) {
        (Some(source), Some(id)) => vec![EventKey::new(source.clone(), EventId::parse(&id)?)],
        _ => ledger
            .list(&ListFilter {
                status: Some(status),
                source,
                limit: usize::MAX,
                ..Default::default()
            })
            .await?
            .iter()
            .map(Event::key)
            .collect(),
    };
    if dry_run {
        for key in &keys {
            println!("would replay {key}");
        }
        println!("dry run: {} event(s) would be replayed", keys.len());
        return Ok(());
    }
    let bar = indicatif::ProgressBar::new(keys.len() as u64);
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let (mut replayed, mut skipped) = (0usize, 0usize);
    for key in &keys {
        match ledger.replay(key, force).await? {
            Replay::Replayed => {
                replayed += 1;
                if let Some(queue) = &store.queue {
                    if let Err(e) = queue.enqueue(key, Duration::ZERO).await {
                        bar.suspend(|| {
                            eprintln!("{key}: replayed, not enqueued ({e}); the sweeper will send it")
                        });
                    }
                }
            }
            Replay::NotEligible(st) => {
                skipped += 1;
                bar.suspend(|| eprintln!("skipped {key}: it is {st}"));
            }
            Replay::Missing => {
                skipped += 1;
                bar.suspend(|| eprintln!("skipped {key}: no such event"));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if store.queue.is_some() {
        println!("replayed {replayed} event(s), skipped {skipped}");
    } else {
        println!("replayed {replayed} event(s), skipped {skipped}; a running `inbox serve` picks them up within seconds");
    }
    Ok(())
}

async fn console(
    store: StoreArgs,
    listen: std::net::SocketAddr,
    policy: inbox_core::console::SessionPolicy,
) -> Result<()> {
    let token = std::env::var(inbox_core::console::TOKEN_ENV)
        .ok()
        .filter(|t| !t.is_empty())
        .map(secrecy::SecretString::from);
    inbox_core::console::check_listen(listen, token.as_ref())?;
    if policy.idle.is_zero() || policy.lifetime.is_zero() {
        bail!("--session-idle and --session-lifetime must be longer than 0");
    }
    if token.is_some() && !policy.secure_cookie {
        tracing::warn!("console: the session cookie is not Secure (--insecure-cookie): a browser sends it over plain HTTP");
    }
    let name = if store.aws {
        format!(
            "DynamoDB table {}",
            std::env::var("INBOX_TABLE").unwrap_or_default()
        )
    } else {
        match (&store.data_dir, &store.config) {
            (Some(dir), _) => format!("SQLite in {}", dir.display()),
            (None, Some(config)) => format!("SQLite named by {}", config.display()),
            (None, None) => String::new(),
        }
    };
    let aws = store.aws;
    let opened = store.open().await?;
    let mut console =
        inbox_core::console::Console::new(opened.ledger, opened.queue, token, name).with_sessions(policy);
    // The config names the sources that reconcile, for the overview: the one named, or on AWS the stack's
    // (INBOX_CONFIG or INBOX_CONFIG_PARAMETER, as the functions read it), where the operator's shell has it.
    if aws {
        // DynamoDB cannot draw the chart without a scan: the functions' metrics in CloudWatch do.
        let sdk = inbox_core::aws::sdk::load().await;
        console = console.with_timeline(std::sync::Arc::new(
            inbox_core::aws::charts::CloudWatchTimeline::new(&sdk),
        ));
        let set = |k| std::env::var_os(k).is_some_and(|v| !v.is_empty());
        if set("INBOX_CONFIG") || set("INBOX_CONFIG_PARAMETER") {
            let secrets = inbox_core::aws::AwsSecrets::new(&sdk);
            console = console.with_config(&inbox_core::aws::load_config(&secrets).await?);
        } else {
            tracing::warn!(
                "console: neither INBOX_CONFIG nor INBOX_CONFIG_PARAMETER is set: the overview shows reconciliation \
                 only for sources with failed or dead events"
            );
        }
    } else if let Some(path) = &store.config {
        console = console.with_config(&load(path)?);
    }
    let app = console.router();
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    println!("inbox console: http://{}", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await?;
    Ok(())
}

async fn send(
    config_path: &Path,
    source: SourceName,
    body: Option<String>,
    event_id: Option<String>,
    event_type: Option<String>,
    url: Option<String>,
) -> Result<()> {
    let config = load(config_path)?;
    let sources = Sources::receiving(&config, &LocalSecrets).await?;
    let src = sources
        .get(source.as_str())
        .with_context(|| format!("no source {source} in {}", config_path.display()))?;
    let key = src.keys.first().context("the source has no secret")?;
    let now = now_ms();
    let event_id = event_id.unwrap_or_else(|| format!("evt_{now:x}{:04x}", rand_u16()));
    let event_type = event_type.unwrap_or_else(|| "inbox.test".to_owned());
    let body = body.unwrap_or_else(|| {
        serde_json::json!({"id": event_id, "event_id": event_id, "type": event_type, "created": now / 1000})
            .to_string()
    });
    let identity = Identity {
        event_id,
        event_type: Some(event_type),
    };
    let headers = src.scheme.sign(key, body.as_bytes(), &identity, now / 1000);
    let base = url.unwrap_or_else(|| format!("http://{}", config.server.listen));
    let client = http_client();
    let mut req = client
        .get()
        .post(format!("{}/webhooks/{source}", base.trim_end_matches('/')))
        .header("content-type", "application/json")
        .body(body);
    for (name, value) in headers {
        req = req.header(name, value);
    }
    let resp = req.send().await.context("sending")?;
    let status = resp.status();
    println!(
        "HTTP {} {}",
        status.as_u16(),
        resp.text().await.unwrap_or_default()
    );
    if !status.is_success() {
        std::process::exit(1);
    }
    Ok(())
}

fn rand_u16() -> u16 {
    (std::process::id() as u16) ^ (now_ms() as u16).rotate_left(7)
}
