//! The serverless runtime: the DynamoDB ledger (in [`crate::stores::dynamodb`]), the SQS queue ([`sqs`]), bodies in
//! S3 ([`s3`]),
//! alarms on SNS ([`sns`]), metrics as EMF lines ([`emf`]), secrets from Secrets Manager and SSM, how the Lambda
//! functions find their resources and configuration, and the handler each function runs ([`functions`]). The
//! functions' `main`s only call into here.

#[cfg(feature = "cloudwatch")]
pub mod charts;
pub mod emf;
pub mod functions;
#[cfg(feature = "operator")]
pub mod init;
#[cfg(feature = "operator")]
pub mod play;
pub mod s3;
pub mod sdk;
mod secrets;
pub mod sns;
pub mod sqs;

use std::sync::Arc;
use std::time::Duration;

use aws_config::SdkConfig;

pub use secrets::AwsSecrets;

use crate::aws::s3::S3Payloads;
use crate::aws::sqs::SqsQueue;
use crate::clock::World;
use crate::config::{Config, ConfigError, ReconcileConfig, RetryPolicy};
use crate::handlers::Registry;
use crate::intake::{Intake, Order};
use crate::machine::Machine;
use crate::metrics::Metrics;
use crate::model::SourceName;
use crate::ports::Store;
use crate::receiver::Receiver;
use crate::reconcile::Reconciler;
use crate::secrets::SecretResolver;
use crate::source::Sources;
use crate::stores::dynamodb::DynamoLedger;

/// The resources a function works on, from the environment the template sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resources {
    pub table: String,
    pub queue_url: String,
    pub dlq_url: Option<String>,
    pub bucket: Option<String>,
    pub topic_arn: Option<String>,
    /// The work queue's `maxReceiveCount` (`INBOX_MAX_RECEIVE_COUNT`, the template's `MaxReceiveCount`): the
    /// retry budgets are checked against it at start ([`check_receive_budget`]).
    pub max_receive_count: Option<u32>,
    /// The payload bucket's expiry of completed events' bodies, in days (`INBOX_RETENTION_DAYS`, the template's
    /// `RetentionDays`): the config's `retention_days` must agree ([`check_retention`]).
    pub retention_days: Option<u32>,
}

/// The environment variable that carries the work queue's `maxReceiveCount`.
pub const MAX_RECEIVE_COUNT_ENV: &str = "INBOX_MAX_RECEIVE_COUNT";
/// The environment variable that carries the template's `RetentionDays`.
pub const RETENTION_DAYS_ENV: &str = "INBOX_RETENTION_DAYS";

/// Refuses a config whose retention differs from the one the payload bucket expires bodies by: shorter, and a
/// body would outlive its event; longer, and a body would go while its event may still be replayed.
pub fn check_retention(config: &Config, retention_days: u32) -> Result<(), ConfigError> {
    if config.retention == Duration::from_secs(u64::from(retention_days) * 86_400) {
        return Ok(());
    }
    Err(ConfigError::new(
        "retention_days",
        format!(
            "retention_days = {} but the payload bucket expires completed events' bodies after RetentionDays = \
             {retention_days} ({RETENTION_DAYS_ENV}): set the template's RetentionDays to the config's \
             retention_days",
            config.retention.as_secs() / 86_400
        ),
    ))
}

/// The receives an event's message may take before its retry budget is spent, at worst: one per attempt, and one
/// more for each 11¾ hours of a wait past the first (a wait longer than SQS lets a message hide comes back early,
/// is found not due, and is hidden again).
pub fn receives_needed(policy: &RetryPolicy) -> u64 {
    let hide = crate::aws::sqs::MAX_VISIBILITY.as_millis().max(1);
    let mut receives = u64::from(policy.max_attempts);
    for attempt in 1..policy.max_attempts {
        let wait = crate::machine::longest_backoff(policy, attempt);
        receives += u64::try_from(wait.as_millis().div_ceil(hide).saturating_sub(1)).unwrap_or(u64::MAX);
    }
    receives
}

/// Refuses a retry budget that the work queue's redrive policy would cut short: with `maxReceiveCount` receives
/// or fewer needed, SQS could move an event's message to the dead-letter queue before `max_attempts`.
/// One receive is kept spare, for a redelivery found under a live lease.
pub fn check_receive_budget(config: &Config, max_receive_count: u32) -> Result<(), ConfigError> {
    let policies = std::iter::once(("retry".to_owned(), &config.retry)).chain(
        config
            .sources
            .iter()
            .map(|(name, s)| (format!("sources.{name}.retry"), &s.retry)),
    );
    for (at, policy) in policies {
        let needed = receives_needed(policy);
        if needed >= u64::from(max_receive_count) {
            return Err(ConfigError::new(
                format!("{at}.max_attempts"),
                format!(
                    "{at}.max_attempts = {} with {at}.cap = {} needs up to {needed} receives of an event's message, \
                     but the work queue moves a message to the dead-letter queue after MaxReceiveCount = \
                     {max_receive_count} receives ({MAX_RECEIVE_COUNT_ENV}): raise the template's MaxReceiveCount \
                     above {needed}, or lower {at}.max_attempts or {at}.cap",
                    policy.max_attempts,
                    humantime::format_duration(policy.cap),
                ),
            ));
        }
    }
    Ok(())
}

impl Resources {
    pub fn from_env() -> Result<Self, ConfigError> {
        let required = |name: &str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| ConfigError::new(name, "environment variable not set"))
        };
        let optional = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Ok(Self {
            table: required("INBOX_TABLE")?,
            queue_url: required("INBOX_QUEUE_URL")?,
            dlq_url: optional("INBOX_DLQ_URL"),
            bucket: optional("INBOX_BUCKET"),
            topic_arn: optional("INBOX_ALARM_TOPIC_ARN"),
            max_receive_count: match optional(MAX_RECEIVE_COUNT_ENV) {
                None => None,
                Some(v) => Some(v.trim().parse().map_err(|_| {
                    ConfigError::new(MAX_RECEIVE_COUNT_ENV, "not a whole number of receives")
                })?),
            },
            retention_days: match optional(RETENTION_DAYS_ENV) {
                None => None,
                Some(v) => Some(
                    v.trim()
                        .parse()
                        .map_err(|_| ConfigError::new(RETENTION_DAYS_ENV, "not a whole number of days"))?,
                ),
            },
        })
    }

    /// `export NAME=value` lines for a shell, as `inbox aws init` prints them.
    pub fn env_lines(&self) -> Vec<String> {
        let mut lines = vec![
            format!("export INBOX_TABLE={}", self.table),
            format!("export INBOX_QUEUE_URL={}", self.queue_url),
        ];
        let optional = [
            ("INBOX_DLQ_URL", &self.dlq_url),
            ("INBOX_BUCKET", &self.bucket),
            ("INBOX_ALARM_TOPIC_ARN", &self.topic_arn),
        ];
        if let Some(n) = self.max_receive_count {
            lines.push(format!("export {MAX_RECEIVE_COUNT_ENV}={n}"));
        }
        if let Some(n) = self.retention_days {
            lines.push(format!("export {RETENTION_DAYS_ENV}={n}"));
        }
        for (name, value) in optional {
            if let Some(v) = value {
                lines.push(format!("export {name}={v}"));
            }
        }
        lines
    }
}

/// The sources config: `INBOX_CONFIG` (the TOML inline, for local runs and tests) or `INBOX_CONFIG_PARAMETER`
/// (an SSM parameter holding it, so a config change needs no code deployment), read with `store`'s SSM client.
pub async fn load_config(store: &AwsSecrets) -> Result<Config, ConfigError> {
    let var = |k| std::env::var(k).ok();
    config_from(var("INBOX_CONFIG"), var("INBOX_CONFIG_PARAMETER"), store).await
}

/// [`load_config`] given the two variables' values.
pub async fn config_from(
    inline: Option<String>,
    parameter: Option<String>,
    store: &AwsSecrets,
) -> Result<Config, ConfigError> {
    if let Some(text) = inline {
        return Config::from_toml(&text);
    }
    let Some(name) = parameter else {
        return Err(ConfigError::new(
            "INBOX_CONFIG_PARAMETER",
            "set it (an SSM parameter holding the config) or INBOX_CONFIG (the config inline)",
        ));
    };
    let text = store
        .parameter(&name)
        .await
        .map_err(|e| ConfigError::new("INBOX_CONFIG_PARAMETER", format!("{name}: {e}")))?;
    Config::from_toml(&text)
}

/// The SDK clients, built once. Tests build them with interceptors to count calls.
#[derive(Clone, Debug)]
pub struct Clients {
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub sqs: aws_sdk_sqs::Client,
    /// Only the settings of these two: their clients are built on first use ([`S3Payloads`] for a body past the
    /// item limit, [`sns::SnsNotifier`] for a dead event), which most cold starts never reach.
    pub s3: aws_sdk_s3::Config,
    pub sns: aws_sdk_sns::Config,
}

impl Clients {
    pub fn new(sdk: &SdkConfig) -> Self {
        Self {
            dynamodb: aws_sdk_dynamodb::Client::new(sdk),
            s3: S3Payloads::config(sdk),
            sqs: aws_sdk_sqs::Client::new(sdk),
            sns: aws_sdk_sns::Config::from(sdk),
        }
    }
}

/// Everything a worker function (processor, alarm, sweeper) needs, built once per cold start; tests and the bench
/// build one to receive as well.
pub struct Runtime {
    pub config: Config,
    pub resources: Resources,
    pub clients: Clients,
    pub ledger: Arc<DynamoLedger>,
    pub queue: Arc<SqsQueue>,
    pub machine: Arc<Machine>,
    pub metrics: Arc<Metrics>,
    /// Where the functions write their metrics (stdout, for CloudWatch Logs).
    pub emf: emf::Sink,
    pub sources: Sources,
    /// The keys requests point at, for the receiver this runtime builds.
    pub keys: Arc<dyn crate::keys::KeySource>,
    /// The clock and randomness of its decisions: the system's.
    pub world: World,
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// What every function reads first: the SDK settings, its resources, the config, and the store secrets come from.
async fn start() -> Result<(SdkConfig, Resources, Config, AwsSecrets), RuntimeError> {
    let sdk = sdk::load().await;
    let resources = Resources::from_env()?;
    let secrets = AwsSecrets::new(&sdk);
    let config = load_config(&secrets).await?;
    if let Some(days) = resources.retention_days {
        check_retention(&config, days)?;
    }
    Ok((sdk, resources, config, secrets))
}

/// The receiver function's start: every secret read and no handler built, and only the parts receiving uses (the
/// ledger, its payload bucket, the queue). No machine, handler or alarm is built here, so the linker leaves them
/// (the handlers' HTTP client, the SNS client) out of the receiver's binary, and its cold start does not map them.
pub async fn receiver_from_env() -> Result<Arc<Receiver>, RuntimeError> {
    let (sdk, resources, config, secrets) = start().await?;
    let sources = Sources::receiving(&config, &secrets).await?;
    let (ledger, queue) = store(
        aws_sdk_dynamodb::Client::new(&sdk),
        aws_sdk_sqs::Client::new(&sdk),
        S3Payloads::config(&sdk),
        &resources,
        &config,
    );
    let metrics = Arc::new(Metrics::new(sources.names()));
    let world = World::system();
    let keys = crate::keys::from_env(world.clock.clone())?;
    Ok(receiver(
        sources,
        ledger,
        queue,
        metrics,
        config.sweeper.grace,
        keys,
        world,
    ))
}

/// The reconciler function's start: the ledger, its payload bucket and the queue, and the sources that have a
/// `reconcile` block. Only the provider credentials are read (never the webhook signing secrets), and each one
/// when its source first runs: a credential that cannot be read fails its source alone, naming it, and is asked
/// for again at the next invocation.
pub async fn reconciler_from_env() -> Result<ReconcilerRuntime, RuntimeError> {
    let (sdk, resources, config, secrets) = start().await?;
    let clients = Clients::new(&sdk);
    Ok(ReconcilerRuntime::new(
        &clients,
        Arc::new(secrets),
        &resources,
        &config,
    ))
}

/// Everything the reconciler function needs, built once per cold start.
pub struct ReconcilerRuntime {
    pub ledger: Arc<DynamoLedger>,
    pub queue: Arc<SqsQueue>,
    /// One slot per reconciled source, in [`ReconcilerRuntime::sources`]' order.
    pub metrics: Arc<Metrics>,
    /// Where the function writes its metrics (stdout, for CloudWatch Logs).
    pub emf: emf::Sink,
    sources: Vec<ReconciledSource>,
    secrets: Arc<dyn SecretResolver>,
    /// The clock its runs are measured on: the system's.
    pub world: World,
}

/// One source with a `reconcile` block, and its reconciler once its credentials have been read.
pub(crate) struct ReconciledSource {
    pub(crate) name: SourceName,
    pub(crate) config: ReconcileConfig,
    /// Taken out for a run (the run's budget is set on it) and put back after; `None` until built. Invocations of
    /// one container never overlap, so the lock is never contended.
    pub(crate) built: tokio::sync::Mutex<Option<Reconciler>>,
}

impl ReconcilerRuntime {
    /// Reads no secret: each source's credentials are read at its first run ([`functions::reconciler`]).
    pub fn new(
        clients: &Clients,
        secrets: Arc<dyn SecretResolver>,
        resources: &Resources,
        config: &Config,
    ) -> Self {
        let sources: Vec<ReconciledSource> = config
            .sources
            .iter()
            .filter_map(|(name, sc)| {
                sc.reconcile.as_ref().map(|r| ReconciledSource {
                    name: name.clone(),
                    config: r.clone(),
                    built: tokio::sync::Mutex::new(None),
                })
            })
            .collect();
        let names: Vec<SourceName> = sources.iter().map(|s| s.name.clone()).collect();
        let (ledger, queue) = store(
            clients.dynamodb.clone(),
            clients.sqs.clone(),
            clients.s3.clone(),
            resources,
            config,
        );
        Self {
            ledger,
            queue,
            metrics: Arc::new(Metrics::new(&names)),
            emf: emf::Sink::Stdout,
            sources,
            secrets,
            world: World::system(),
        }
    }

    /// The reconciled sources' names, in metric slot order.
    pub fn source_names(&self) -> Vec<SourceName> {
        self.sources.iter().map(|s| s.name.clone()).collect()
    }

    pub(crate) fn sources(&self) -> &[ReconciledSource] {
        &self.sources
    }

    pub(crate) fn secrets(&self) -> &dyn SecretResolver {
        self.secrets.as_ref()
    }
}

/// The ledger (with its payload bucket, where one is set) and the queue, as every function uses them.
fn store(
    dynamodb: aws_sdk_dynamodb::Client,
    sqs: aws_sdk_sqs::Client,
    s3: aws_sdk_s3::Config,
    resources: &Resources,
    config: &Config,
) -> (Arc<DynamoLedger>, Arc<SqsQueue>) {
    let payloads = resources.bucket.as_ref().map(|b| S3Payloads::new(s3, b.clone()));
    let ledger = Arc::new(DynamoLedger::new(
        dynamodb,
        resources.table.clone(),
        payloads,
        config.sweeper.grace,
    ));
    let queue = Arc::new(SqsQueue::new(sqs, resources.queue_url.clone()));
    (ledger, queue)
}

/// How long past the receiver's own timeout its create may still land: a write in flight when the invocation
/// ended reaches DynamoDB within seconds, or never.
pub const ANNOUNCE_MARGIN: Duration = Duration::from_secs(60);

/// The same router `inbox serve` runs, for `lambda_http`: without `/metrics` (metrics go to CloudWatch as EMF
/// lines here).
fn receiver(
    sources: Sources,
    ledger: Arc<DynamoLedger>,
    queue: Arc<SqsQueue>,
    metrics: Arc<Metrics>,
    resend_grace: Duration,
    keys: Arc<dyn crate::keys::KeySource>,
    world: World,
) -> Arc<Receiver> {
    // A container sees a sliver of the traffic: the alarms that count are CloudWatch's, on the EMF metrics; here
    // the episodes are only logged.
    let health = Arc::new(crate::delivery_health::DeliveryHealth::new(
        sources.names(),
        crate::delivery_health::Thresholds::default(),
        Arc::new(crate::delivery_health::LogAlarm),
        world.clone(),
    ));
    Arc::new(Receiver {
        sources,
        intake: Intake {
            ledger,
            queue,
            metrics: metrics.clone(),
            health: health.clone(),
            resend_grace,
            // The work queue vouches for a record from the moment its message is sent (DynamoDB with SQS).
            order: Order::AnnounceThenWrite {
                window: crate::aws::functions::configured_timeout() + ANNOUNCE_MARGIN,
            },
            // The processor function runs the handlers, from the queue.
            runner: None,
            world: world.clone(),
        },
        metrics,
        read_timeout: Duration::from_secs(25),
        // One request per invocation, its body already read by the runtime: the bound is one largest body.
        inflight: crate::receiver::InflightBytes::new(crate::config::MAX_BODY_BYTES_LIMIT),
        health,
        rejections: Default::default(),
        keys,
        world,
    })
}

impl Runtime {
    /// A worker's start: the environment and the config, read once; no secret is read, since workers never verify
    /// a signature (least privilege). Fails naming what is missing.
    pub async fn from_env(handlers: Registry) -> Result<Self, RuntimeError> {
        let (sdk, resources, config, _) = start().await?;
        Self::new(Clients::new(&sdk), None, resources, config, handlers).await
    }

    pub async fn new(
        clients: Clients,
        secrets: Option<&dyn SecretResolver>,
        resources: Resources,
        config: Config,
        handlers: Registry,
    ) -> Result<Self, RuntimeError> {
        if let Some(n) = resources.max_receive_count {
            check_receive_budget(&config, n)?;
        }
        let sources = Sources::build(&config, secrets, &handlers).await?;
        let world = World::system();
        let keys = crate::keys::from_env(world.clock.clone())?;
        let metrics = Arc::new(Metrics::new(sources.names()));
        let (ledger, queue) = store(
            clients.dynamodb.clone(),
            clients.sqs.clone(),
            clients.s3.clone(),
            &resources,
            &config,
        );
        let alarm = Arc::new(sns::SnsNotifier::new(
            clients.sns.clone(),
            resources.topic_arn.clone(),
        ));
        // A worker name per container; each claim adds its own random token.
        let owner = format!("lambda:{:08x}", world.random.next_u64() as u32);
        let shared: Arc<dyn Store> = ledger.clone();
        let machine = Arc::new(
            Machine::new(
                shared.clone(),
                shared,
                sources.clone(),
                metrics.clone(),
                alarm,
                config.retention,
                owner,
            )
            .with_world(world.clone()),
        );
        Ok(Self {
            config,
            resources,
            clients,
            ledger,
            queue,
            machine,
            metrics,
            emf: emf::Sink::Stdout,
            sources,
            keys,
            world,
        })
    }

    /// The receiver over this runtime's parts, as [`receiver_from_env`] builds it for the receiver function.
    pub fn receiver(&self) -> Arc<Receiver> {
        receiver(
            self.sources.clone(),
            self.ledger.clone(),
            self.queue.clone(),
            self.metrics.clone(),
            self.config.sweeper.grace,
            self.keys.clone(),
            self.world.clone(),
        )
    }
}
