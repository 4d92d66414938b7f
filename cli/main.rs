//! `inbox`: runs the embedded runtime (`inbox serve`) and operates on its events (list, show, replay, send).
#![forbid(unsafe_code)]

mod commands;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, Parser, Subcommand};
use std::sync::Arc;

use inbox_core::aws::s3::S3Payloads;
use inbox_core::aws::sqs::SqsQueue;
use inbox_core::aws::Resources;
use inbox_core::config::Config;
use inbox_core::model::{SourceName, Status};
use inbox_core::ports::Queue;
use inbox_core::stores::dynamodb::DynamoLedger;
use inbox_core::stores::sqlite::SqliteLedger;

/// mimalloc instead of the system allocator: on the receiver's hot path glibc's malloc spent a large share of the
/// server's CPU consolidating free chunks and giving pages back (madvise, with a TLB shootdown on every core).
/// Built without its transparent huge pages (`no_thp`, Cargo.toml): with them, each region it touched was a huge
/// page to zero and keep, so `inbox serve` held far more memory at the same speed. The measurements:
/// docs/bench-log/2026-11-30.md and 2026-12-01.md.
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
        #[arg(long, default_value = inbox_console::DEFAULT_LISTEN)]
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
    /// The routes of a config, and what a route does with one event.
    Routes {
        #[command(subcommand)]
        command: RoutesCommand,
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
        /// The body; by default a small event with a fresh id, where the source's scheme looks for it.
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
        /// A PKCS#8 private key (PEM) to sign with, for the asymmetric schemes (ed25519, ecdsa, rsa, jwt): the
        /// source's config holds only the public key.
        #[arg(long)]
        private_key: Option<PathBuf>,
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
enum RoutesCommand {
    /// Each route: its sources, its destination and its filter.
    List {
        #[arg(long)]
        config: PathBuf,
    },
    /// A route's verdict on one event (matched, filtered, error, or not-taken when the route does not take its
    /// source), and for a filtered one the first `&&` clause that was false.
    Test {
        #[arg(long)]
        config: PathBuf,
        route: inbox_core::model::RouteName,
        /// A stored event, SOURCE/ID (from the config's store).
        #[arg(long, conflicts_with = "file", required_unless_present = "file")]
        event: Option<String>,
        /// Where the stored event is, instead of the config's `server.data_dir` (SQLite).
        #[arg(long, requires = "event")]
        data_dir: Option<PathBuf>,
        /// A body in a file, as --source would receive it.
        #[arg(long, requires = "source")]
        file: Option<PathBuf>,
        /// The source the file's body comes from.
        #[arg(long, requires = "file")]
        source: Option<SourceName>,
        /// A header sent with the file's body, 'Name: value' (repeatable): the type is found where the source's
        /// scheme finds it.
        #[arg(long = "header", requires = "file")]
        headers: Vec<String>,
        /// The event's type, instead of where the scheme finds it.
        #[arg(long, requires = "file")]
        event_type: Option<String>,
        /// One JSON object.
        #[arg(long)]
        json: bool,
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

/// Where the events are: the store a config file names (SQLite in its data directory, or PostgreSQL), a data
/// directory given directly, or, with `--aws`, the stack named by `INBOX_TABLE`, `INBOX_QUEUE_URL` and
/// `INBOX_BUCKET` (default credential chain).
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
    ledger: Arc<dyn inbox_core::ports::Store>,
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
        if self.aws {
            let grace = self.grace()?;
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
        if let Some(store) = self.shared().await? {
            return Ok(store);
        }
        let dir = self.data_dir()?;
        if !dir.join("inbox.db").exists() {
            bail!("no events stored in {} (no inbox.db there)", dir.display());
        }
        self.open_sqlite(&dir)
    }

    /// The PostgreSQL store the config names (`[store] kind = "postgres"`), if it names one: the database every
    /// `inbox serve` of that config shares (a running one finds what is replayed by its poll).
    async fn shared(&self) -> Result<Option<Store>> {
        let Some(path) = &self.config else {
            return Ok(None);
        };
        let config = load(path)?;
        if config.store == inbox_core::config::StoreConfig::Sqlite {
            return Ok(None);
        }
        let ledger = inbox_core::stores::open(&config, &inbox_core::clock::World::system(), false).await?;
        Ok(Some(Store { ledger, queue: None }))
    }

    /// The local data directory: `--data-dir`, else the config's `server.data_dir`.
    fn data_dir(&self) -> Result<PathBuf> {
        Ok(match (&self.config, &self.data_dir) {
            (_, Some(dir)) => dir.clone(),
            (Some(path), None) => load(path)?.server.data_dir,
            (None, None) => bail!("say where the events are: --config FILE, --data-dir DIR or --aws"),
        })
    }

    /// The SQLite ledger in `dir`, its `inbox.db` created if absent, as `inbox serve` creates it.
    fn open_sqlite(&self, dir: &Path) -> Result<Store> {
        let ledger = SqliteLedger::open(dir, 1024, self.grace()?)?;
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
        } => commands::serve::run(config, listen, data_dir).await,
        Command::Events {
            command:
                EventsCommand::List {
                    store,
                    status,
                    source,
                    limit,
                    json,
                },
        } => commands::events::list(store, status, source, limit, json).await,
        Command::Events {
            command:
                EventsCommand::Show {
                    store,
                    source,
                    event_id,
                    json,
                    payload,
                },
        } => commands::events::show(store, source, event_id, json, payload).await,
        Command::Replay {
            store,
            status,
            source,
            event_id,
            dry_run,
            force,
        } => commands::replay::run(store.open().await?, status, source, event_id, dry_run, force).await,
        Command::Console {
            store,
            listen,
            insecure_cookie,
            session_idle,
            session_lifetime,
        } => {
            let policy = inbox_console::SessionPolicy {
                idle: session_idle,
                lifetime: session_lifetime,
                secure_cookie: !insecure_cookie,
            };
            commands::console::run(store, listen, policy).await
        }
        Command::Aws {
            command:
                AwsCommand::Play {
                    lambda,
                    functions,
                    sweep_every,
                    reconcile_every,
                },
        } => commands::aws::play(&lambda, &functions, sweep_every, reconcile_every).await,
        Command::Aws {
            command:
                AwsCommand::Init {
                    prefix,
                    max_receive_count,
                },
        } => commands::aws::init(prefix, max_receive_count).await,
        Command::Send {
            config,
            source,
            body,
            event_id,
            event_type,
            url,
            private_key,
        } => {
            commands::send::run(
                &config,
                source,
                body,
                event_id,
                event_type,
                url,
                private_key.as_deref(),
            )
            .await
        }
        Command::Reconcile {
            store,
            source,
            since,
            dry_run,
            json,
        } => commands::reconcile::run(store, source, since, dry_run, json).await,
        Command::Routes {
            command: RoutesCommand::List { config },
        } => commands::routes::list(&config),
        Command::Routes {
            command:
                RoutesCommand::Test {
                    config,
                    route,
                    event,
                    data_dir,
                    file,
                    source,
                    headers,
                    event_type,
                    json,
                },
        } => {
            let subject = match (event, file, source) {
                (Some(event), _, _) => commands::routes::Subject::Stored { event, data_dir },
                (None, Some(path), Some(source)) => commands::routes::Subject::File {
                    path,
                    source,
                    headers,
                    event_type,
                },
                _ => bail!("say which event: --event SOURCE/ID, or --file F --source S"),
            };
            commands::routes::test(&config, route, subject, json).await
        }
    }
}

fn duration(text: &str) -> Result<Duration, String> {
    inbox_core::time::parse_duration(text)
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
