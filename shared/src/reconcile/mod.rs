//! Reconciliation (docs/DESIGN.md "Reconciliation"): a periodic job, independent of the webhook endpoint, that asks
//! the provider's API which events exist and ingests those the ledger lacks, through the receiver's own
//! conditional create with `origin = reconciled`, then enqueues them.
//!
//! A provider is one file behind [`Provider`]: it lists one page of a window, newest first, and fetches an item's
//! payload where the listing does not carry it (or where an earlier run kept the item as failed). The walk, the
//! batched existence reads, the rate-limit waits, the budgets, the failed events kept for later runs and the
//! checkpoint live here, once for every provider.

mod api;
mod connect;
// The providers, one file each (keep sorted).
pub mod chargebee;
pub mod github;
pub mod gitlab;
pub mod gocardless;
pub mod mailgun;
pub mod okta;
pub mod paddle;
pub mod paypal;
pub mod persona;
pub mod polar;
pub mod square;
pub mod stripe;
pub mod workos;

pub use api::rate_limit_wait;
pub(crate) use api::{api_client, endpoint, json, transport_error};

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::clock::World;
use crate::config::{ConfigError, ReconcileConfig};
use crate::model::{EventId, EventKey, KeptHeaders, NewEvent, Origin, SourceName};
use crate::ports::{Created, FailedEvent, Queue, RunRecord, Store, StoreError};
use crate::secrets::SecretResolver;
use crate::time::{ms, rfc3339};

/// Creation times in UTC milliseconds, `[from_ms, to_ms)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Window {
    pub from_ms: i64,
    pub to_ms: i64,
}

impl Window {
    pub fn contains(&self, at_ms: i64) -> bool {
        self.from_ms <= at_ms && at_ms < self.to_ms
    }
}

/// One event as the provider lists it.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The id the webhook would carry (Stripe `id`, GitHub `guid` = `X-GitHub-Delivery`); parsed by the run.
    pub id: String,
    pub event_type: Option<String>,
    pub created_ms: i64,
    /// The payload to store, where the listing carries it (Stripe); `None` where [`Provider::fetch`] must get it,
    /// and for an event an earlier run kept as failed.
    pub payload: Option<Bytes>,
    /// Headers kept with the event, as the receiver keeps them for a webhook.
    pub headers: KeptHeaders,
    /// What [`Provider::fetch`] needs to find the item (GitHub: the delivery's numeric id; Stripe: the event id),
    /// kept with a failed event so that a later run can fetch it again.
    pub handle: String,
}

/// A listed item's payload, from its detail.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub payload: Bytes,
    pub event_type: Option<String>,
    pub headers: KeptHeaders,
}

/// One page of a listing: the items in the window, newest first, and the cursor of the next page (`None` at
/// the end of the window).
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub items: Vec<Listed>,
    pub next: Option<String>,
}

/// A provider's API, reduced to what a run needs.
#[async_trait]
pub trait Provider: Send + Sync {
    /// One page of the events created in `window`, newest first; `cursor` is the previous page's `next`. The
    /// same id may appear more than once (GitHub redeliveries); the run counts it once.
    async fn list(&self, window: Window, cursor: Option<&str>) -> Result<Page, ProviderError>;

    /// The payload of an item without one: a listed item whose listing does not carry it, or a failed event kept
    /// from an earlier run, rebuilt from its id, `handle`, creation time and type. A [`ProviderError::Failed`] here
    /// (a detail that answers 404, one without a payload) fails this item alone; the run goes on without it.
    async fn fetch(&self, item: &Listed) -> Result<Fetched, ProviderError>;
}

/// What a provider's answer means for the run. No text here ever holds a credential: texts are built from the
/// status and our own words, never from request headers or the provider's error bodies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// Wait and ask again: `wait` as the provider said (`Retry-After`, `X-RateLimit-Reset`), or `None` when it
    /// did not say (the run then backs off exponentially).
    #[error("rate limited by the provider")]
    RateLimited { wait: Option<Duration> },
    /// The credentials were refused (401, or a 403 that is not a rate limit): no retry helps.
    #[error("bad credentials: {0}")]
    BadCredentials(String),
    /// Anything else: a 5xx, a transport error, a response that does not parse.
    #[error("{0}")]
    Failed(String),
}

/// The most failed events a checkpoint keeps. More than that is not a few bad items but one cause failing them all
/// (a ledger refusing every create, every detail answering 404): the run then ends with the checkpoint unchanged,
/// giving none of them up, and says so. It also bounds the checkpoint's record (a DynamoDB item holds 400 KB; one
/// failed event takes at most about 600 bytes).
pub const MAX_FAILED_KEPT: usize = 500;

/// How long and how far one run may go. A run that spends either ends early with the checkpoint unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Wall time, rate-limit waits included.
    pub time: Duration,
    /// Listing pages (detail fetches are not pages).
    pub pages: u32,
}

impl Default for Budget {
    /// Ten minutes (below a Lambda's 15) and 2,000 pages (200,000 events: far more than 72 h of most accounts).
    fn default() -> Self {
        Self {
            time: Duration::from_secs(600),
            pages: 2_000,
        }
    }
}

/// The least overlap a run re-reads below its checkpoint. The provider's clock and ours differ, and a listing
/// index can lag its writes by a little: an event created just below the last run's upper end may have been
/// invisible then. Re-reading a few minutes costs a page or less at steady state and closes that gap.
pub const MIN_OVERLAP: Duration = Duration::from_secs(5 * 60);

/// What a run is asked to do.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// Look back this far instead of the configured lookback, ignoring the checkpoint (`inbox reconcile
    /// --since`). The checkpoint still advances if the window reaches it.
    pub since: Option<Duration>,
    /// List and read the ledger, but create and enqueue nothing and save no checkpoint.
    pub dry_run: bool,
}

/// A run's counts: what `inbox reconcile` prints and the run record keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub window: Option<Window>,
    /// Distinct ids listed in the window.
    pub listed: u64,
    /// Already in the ledger (a webhook that won a race with the create counts here too).
    pub present: u64,
    /// Created by this run (in a dry run: would have been).
    pub recovered: u64,
    /// Listed (or kept from an earlier run) but not stored: an id the ledger cannot take, a detail that answered 404
    /// or carried no payload, a create the ledger refused. All but the first kind are kept for the next runs.
    pub failed: u64,
    /// Failed events kept by earlier runs and tried again (each also counted as present, recovered or failed).
    pub retried: u64,
    /// Failed events given up because they are older than the lookback now: never stored.
    pub given_up: u64,
    /// Failed events the checkpoint keeps for the next runs.
    pub kept: u64,
    /// Listing pages read.
    pub pages: u64,
    /// Requests sent to the provider, rate-limited ones and detail fetches included.
    pub requests: u64,
    /// Batched existence reads of the ledger (one per page with items).
    pub existence_reads: u64,
    pub dry_run: bool,
}

/// Where a run is, for a progress bar.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub summary: Summary,
    /// The oldest creation time listed so far; the walk goes from the window's end down to its start.
    pub reached_ms: i64,
}

impl Progress {
    /// How much of the window has been walked, 0.0 to 1.0.
    pub fn fraction(&self) -> f64 {
        let Some(w) = self.summary.window else {
            return 1.0;
        };
        let span = (w.to_ms - w.from_ms).max(1) as f64;
        ((w.to_ms - self.reached_ms.clamp(w.from_ms, w.to_ms)) as f64 / span).clamp(0.0, 1.0)
    }
}

/// Why a run ended early. The text names the source and never holds a credential.
#[derive(Debug, thiserror::Error)]
#[error("reconcile {source_name}: {kind}")]
pub struct RunError {
    pub source_name: SourceName,
    pub kind: RunErrorKind,
    /// What the run did before it ended (recovered events stay recovered).
    pub summary: Summary,
}

#[derive(Debug, thiserror::Error)]
pub enum RunErrorKind {
    #[error("the {provider} API refused the credentials ({detail}); check sources.{source_name}.reconcile")]
    BadCredentials {
        provider: &'static str,
        source_name: SourceName,
        detail: String,
    },
    #[error("rate limited for {0:?}, past the run's time budget")]
    RateLimited(Duration),
    #[error("the provider failed: {0}")]
    Provider(String),
    #[error("the ledger failed: {0}")]
    Store(#[from] StoreError),
    #[error("the run spent its {0} budget before the end of the window")]
    Budget(&'static str),
    #[error(
        "{0} events could not be stored, more than the {MAX_FAILED_KEPT} a checkpoint keeps for later runs; the \
         log names each with its reason"
    )]
    TooManyFailed(usize),
}

/// A reconciler for every source with a `reconcile` block, credentials resolved: at start, so that a reference that
/// cannot be read fails the start naming the field (a credential the provider refuses is a failed run instead).
pub async fn reconcilers(
    config: &crate::config::Config,
    secrets: &dyn SecretResolver,
    world: &World,
) -> Result<Vec<Reconciler>, ConfigError> {
    let mut all = Vec::new();
    for (name, source) in &config.sources {
        if let Some(reconcile) = &source.reconcile {
            all.push(
                Reconciler::from_config(name, reconcile, secrets)
                    .await?
                    .with_world(world.clone()),
            );
        }
    }
    Ok(all)
}

/// One source's reconciliation: its provider and its times. Built once; [`Reconciler::run`] is called on the
/// interval (embedded: a task of `inbox serve`; AWS: the scheduled function) or by hand (`inbox reconcile`).
pub struct Reconciler {
    source: SourceName,
    provider_name: &'static str,
    provider: Arc<dyn Provider>,
    lookback: Duration,
    settle: Duration,
    /// How late the provider may add an event to a listing already read (`ProviderConfig::listing_lag`).
    listing_lag: Duration,
    interval: Duration,
    budget: Budget,
    /// The clock its windows and checkpoints are measured on.
    world: World,
}

impl Reconciler {
    /// Resolves the credentials and builds the provider the config names. Errors name the field
    /// (`sources.X.reconcile.api_key`) and never hold a value.
    pub async fn from_config(
        source: &SourceName,
        config: &ReconcileConfig,
        secrets: &dyn SecretResolver,
    ) -> Result<Reconciler, ConfigError> {
        let at = format!("sources.{source}.reconcile");
        let provider = connect::connect(&config.provider, &at, &config.api_base, secrets).await?;
        Ok(Reconciler {
            source: source.clone(),
            provider_name: config.provider.name(),
            provider,
            lookback: config.lookback,
            settle: config.settle,
            listing_lag: config.provider.listing_lag(),
            interval: config.interval,
            budget: Budget::default(),
            world: World::system(),
        })
    }

    /// A reconciler over any provider (tests, and programs embedding webhook-inbox with their own provider).
    pub fn new(
        source: SourceName,
        provider_name: &'static str,
        provider: Arc<dyn Provider>,
        lookback: Duration,
        settle: Duration,
    ) -> Reconciler {
        Reconciler {
            source,
            provider_name,
            provider,
            lookback,
            settle,
            listing_lag: Duration::ZERO,
            interval: crate::config::DEFAULT_RECONCILE_INTERVAL,
            budget: Budget::default(),
            world: World::system(),
        }
    }

    /// Measures its windows and checkpoints on `world`'s clock (the system's by default).
    pub fn with_world(mut self, world: World) -> Reconciler {
        self.world = world;
        self
    }

    /// Runs every `interval` where the runtime schedules it (the configuration's by [`Reconciler::from_config`]; a
    /// simulation's own).
    pub fn with_interval(mut self, interval: Duration) -> Reconciler {
        self.interval = interval;
        self
    }

    /// Sets the budget (the AWS function passes its remaining time, less a margin to record the run).
    pub fn with_budget(mut self, budget: Budget) -> Reconciler {
        self.budget = budget;
        self
    }

    pub fn source(&self) -> &SourceName {
        &self.source
    }

    /// How often the runtime should run it.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// How far below the checkpoint a run re-reads: the settle time, the provider's listing lag, and at least
    /// [`MIN_OVERLAP`].
    pub fn overlap(&self) -> Duration {
        self.settle.max(MIN_OVERLAP).max(self.listing_lag)
    }

    /// One run: lists `[max(now − lookback, checkpoint − overlap), now − settle)` to the end of the provider's
    /// pagination, creates and enqueues what the ledger lacks, then tries again the failed events earlier runs
    /// kept. An event that cannot be stored fails alone: it is counted, logged with its id and kept for the next
    /// runs. The checkpoint (and the failed events it keeps) advances only if the whole window was listed. Every run
    /// but a dry one is recorded in the checkpoint's `last_run`, failed or not.
    pub async fn run(
        &self,
        ledger: &dyn Store,
        queue: &dyn Queue,
        options: RunOptions,
        progress: &mut (dyn FnMut(&Progress) + Send),
    ) -> Result<Summary, RunError> {
        let started_at = self.world.now_ms();
        let fail = |kind: RunErrorKind, summary: Summary| RunError {
            source_name: self.source.clone(),
            kind,
            summary,
        };
        let checkpoint = ledger
            .checkpoint(&self.source)
            .await
            .map_err(|e| fail(e.into(), Summary::default()))?
            .unwrap_or_default();
        let lookback_floor = started_at - ms(self.lookback);
        let floor = started_at - ms(options.since.unwrap_or(self.lookback));
        let from_ms = match options.since {
            None if checkpoint.scanned_to > 0 => floor.max(checkpoint.scanned_to - ms(self.overlap())),
            _ => floor,
        };
        let window = Window {
            from_ms,
            to_ms: started_at - ms(self.settle),
        };
        let mut pass = Pass {
            ledger,
            queue,
            deadline: started_at.saturating_add(ms(self.budget.time)),
            dry_run: options.dry_run,
            summary: Summary {
                window: Some(window),
                dry_run: options.dry_run,
                ..Summary::default()
            },
            seen: HashSet::new(),
            earlier: checkpoint
                .failed
                .iter()
                .map(|f| (f.id.clone(), f.clone()))
                .collect(),
            failed: Vec::new(),
        };
        let walked = if window.from_ms < window.to_ms {
            self.walk(&mut pass, window, progress).await
        } else {
            Ok(())
        };
        let walked = match walked {
            Ok(()) => self.retry(&mut pass, lookback_floor).await,
            Err(kind) => Err(kind),
        };
        let mut summary = pass.summary;
        if options.dry_run {
            return walked.map(|()| summary).map_err(|kind| fail(kind, summary));
        }

        // The checkpoint advances only over a window listed completely and joined to what was listed before
        // (or reaching the lookback's floor, below which nothing is wanted): never over a gap. The failed events
        // it keeps change only with a complete run too; a run that ended early is started over by the next.
        let mut next = checkpoint.clone();
        let joined = window.from_ms <= checkpoint.scanned_to.max(lookback_floor);
        if walked.is_ok() {
            if joined {
                next.scanned_to = checkpoint.scanned_to.max(window.to_ms);
            }
            let mut failed = pass.failed;
            failed.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then(a.id.cmp(&b.id)));
            next.failed = failed;
        }
        summary.kept = next.failed.len() as u64;
        next.last_run = Some(RunRecord {
            started_at,
            finished_at: self.world.now_ms(),
            listed: summary.listed,
            present: summary.present,
            recovered: summary.recovered,
            failed: summary.failed,
            error: walked.as_ref().err().map(ToString::to_string),
        });
        let saved = ledger.save_checkpoint(&self.source, &next).await;
        match (walked, saved) {
            (Err(kind), _) => {
                tracing::warn!(source = %self.source, error = %kind, ?summary, "reconciliation ended early; the checkpoint stays where it was");
                Err(fail(kind, summary))
            }
            (Ok(()), Err(e)) => Err(fail(e.into(), summary)),
            (Ok(()), Ok(())) => {
                tracing::info!(source = %self.source, ?summary, "reconciliation run done");
                Ok(summary)
            }
        }
    }

    async fn walk(
        &self,
        pass: &mut Pass<'_>,
        window: Window,
        progress: &mut (dyn FnMut(&Progress) + Send),
    ) -> Result<(), RunErrorKind> {
        let mut cursor: Option<String> = None;
        let mut reached_ms = window.to_ms;
        loop {
            if pass.summary.pages >= u64::from(self.budget.pages) {
                return Err(RunErrorKind::Budget("page"));
            }
            let page = self
                .call(pass.deadline, &mut pass.summary, || {
                    self.provider.list(window, cursor.as_deref())
                })
                .await?;
            pass.summary.pages += 1;

            // One id once per run, whatever the provider lists again (GitHub: a guid per delivery attempt).
            let mut fresh = Vec::with_capacity(page.items.len());
            for item in page.items {
                reached_ms = reached_ms.min(item.created_ms);
                if !window.contains(item.created_ms) || !pass.seen.insert(item.id.clone()) {
                    continue;
                }
                pass.summary.listed += 1;
                match EventId::parse(&item.id) {
                    Ok(id) => fresh.push((id, item)),
                    // Not kept: no later run can store an id the ledger cannot take.
                    Err(e) => {
                        pass.summary.failed += 1;
                        tracing::warn!(source = %self.source, reason = %e, "reconciliation: listed an id the ledger cannot take");
                    }
                }
            }
            if !fresh.is_empty() {
                let ids: Vec<EventId> = fresh.iter().map(|(id, _)| id.clone()).collect();
                pass.summary.existence_reads += 1;
                let present = pass.ledger.present(&self.source, &ids).await?;
                for (id, item) in fresh {
                    if present.contains(&id) {
                        pass.summary.present += 1;
                        continue;
                    }
                    let attempts = pass.earlier.get(&id).map_or(0, |f| f.attempts);
                    self.recover(pass, id, item, attempts).await?;
                }
            }
            if page.next.is_none() {
                reached_ms = window.from_ms;
            }
            progress(&Progress {
                summary: pass.summary,
                reached_ms,
            });
            match page.next {
                // A cursor that does not move would walk the same page until the budget is spent.
                Some(next) if cursor.as_deref() == Some(next.as_str()) => {
                    return Err(RunErrorKind::Provider(
                        "the provider answered the same next page again".into(),
                    ))
                }
                Some(next) => cursor = Some(next),
                None => return Ok(()),
            }
            if self.world.now_ms() >= pass.deadline {
                return Err(RunErrorKind::Budget("time"));
            }
        }
    }

    /// The failed events earlier runs kept and this run's window did not list: each given up once it is older
    /// than the lookback (nothing below it is looked for, and the config keeps the lookback within the ledger's
    /// retention, past which a webhook that delivered it meanwhile would be forgotten), dropped once the ledger has
    /// it, else fetched and stored again. Those the time budget leaves untried stay kept as they were.
    async fn retry(&self, pass: &mut Pass<'_>, floor_ms: i64) -> Result<(), RunErrorKind> {
        let mut due: Vec<FailedEvent> = std::mem::take(&mut pass.earlier)
            .into_values()
            .filter(|f| !pass.seen.contains(f.id.as_str()))
            .collect();
        due.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then(a.id.cmp(&b.id)));
        due.retain(|f| {
            if f.created_ms >= floor_ms {
                return true;
            }
            pass.summary.given_up += 1;
            let created = rfc3339(f.created_ms);
            if pass.dry_run {
                tracing::info!(source = %self.source, event_id = %f.id, %created, "reconciliation (dry run): would give up on a failed event older than the lookback");
            } else {
                tracing::error!(
                    source = %self.source, event_id = %f.id, %created, attempts = f.attempts,
                    "reconciliation gave up on an event it could not store: it is older than the lookback now"
                );
            }
            false
        });
        if due.is_empty() {
            return Ok(());
        }
        let ids: Vec<EventId> = due.iter().map(|f| f.id.clone()).collect();
        pass.summary.existence_reads += 1;
        let present = pass.ledger.present(&self.source, &ids).await?;
        for f in due {
            if self.world.now_ms() >= pass.deadline {
                pass.failed.push(f);
                continue;
            }
            pass.summary.retried += 1;
            if present.contains(&f.id) {
                pass.summary.present += 1;
                continue;
            }
            let item = Listed {
                id: f.id.as_str().to_owned(),
                event_type: f.event_type,
                created_ms: f.created_ms,
                payload: None,
                headers: Vec::new(),
                handle: f.handle,
            };
            self.recover(pass, f.id, item, f.attempts).await?;
        }
        Ok(())
    }

    /// Stores one event the ledger lacks and enqueues it. One that cannot be stored is counted, logged with its id
    /// and kept for the next runs (`attempts` earlier runs failed it already); only what fails the provider or the
    /// run as a whole ends the run.
    async fn recover(
        &self,
        pass: &mut Pass<'_>,
        id: EventId,
        item: Listed,
        attempts: u32,
    ) -> Result<(), RunErrorKind> {
        let created = rfc3339(item.created_ms);
        if pass.dry_run {
            pass.summary.recovered += 1;
            tracing::info!(source = %self.source, event_id = %id, event_type = item.event_type.as_deref().unwrap_or(""), %created, "reconciliation (dry run): would recover");
            return Ok(());
        }
        let (key, event_type) = match self.store(pass, &id, &item).await? {
            Ok(Stored::New(key, event_type)) => (key, event_type),
            // A webhook won the race since the existence read: it is delivered, not recovered.
            Ok(Stored::Present) => {
                pass.summary.present += 1;
                return Ok(());
            }
            Err(reason) => {
                let attempts = attempts.saturating_add(1);
                pass.summary.failed += 1;
                tracing::warn!(
                    source = %self.source, event_id = %id, event_type = item.event_type.as_deref().unwrap_or(""),
                    %created, attempts, %reason, "reconciliation could not store an event; the next runs try it again"
                );
                pass.failed.push(FailedEvent {
                    id,
                    handle: item.handle,
                    created_ms: item.created_ms,
                    event_type: item.event_type,
                    attempts,
                });
                if pass.failed.len() > MAX_FAILED_KEPT {
                    return Err(RunErrorKind::TooManyFailed(pass.failed.len()));
                }
                return Ok(());
            }
        };
        pass.summary.recovered += 1;
        tracing::warn!(
            source = %self.source, event_id = %key.event_id, event_type = event_type.as_deref().unwrap_or(""),
            %created, "reconciled: an event the webhook path never delivered"
        );
        if let Err(e) = pass.queue.enqueue(&key, Duration::ZERO).await {
            tracing::warn!(source = %self.source, event_id = %key.event_id, error = %e, "enqueue failed after the durable write; the sweeper will pick it up");
        }
        Ok(())
    }

    /// The create of one event, its payload fetched where the item has none. `Ok(Err(reason))` when this event
    /// alone cannot be stored: its detail failed (404, no payload) or the ledger refused the create.
    async fn store(
        &self,
        pass: &mut Pass<'_>,
        id: &EventId,
        item: &Listed,
    ) -> Result<Result<Stored, String>, RunErrorKind> {
        let (payload, event_type, headers) = match &item.payload {
            Some(p) => (p.clone(), item.event_type.clone(), item.headers.clone()),
            None => {
                let provider = &self.provider;
                let fetched = self
                    .call(pass.deadline, &mut pass.summary, move || async move {
                        match provider.fetch(item).await {
                            Err(ProviderError::Failed(reason)) => Ok(Err(reason)),
                            other => other.map(Ok),
                        }
                    })
                    .await?;
                match fetched {
                    Ok(f) => (f.payload, f.event_type.or(item.event_type.clone()), f.headers),
                    Err(reason) => return Ok(Err(reason)),
                }
            }
        };
        let key = EventKey::new(self.source.clone(), id.clone());
        let event = NewEvent {
            key: key.clone(),
            event_type: event_type.clone(),
            payload_sha256: hex::encode(Sha256::digest(&payload)),
            payload,
            headers,
            origin: Origin::Reconciled,
            // The id comes from the provider's API, not from a signed body that could be replayed under fresh ids.
            resent_bodies: Default::default(),
        };
        Ok(match pass.ledger.create(event).await {
            // Resent only where a create looks for resent bodies, which a reconciled one does not: stored all the same.
            Ok(Created::New | Created::Resent { .. }) => Ok(Stored::New(key, event_type)),
            Ok(Created::Duplicate { .. }) => Ok(Stored::Present),
            Err(e) => Err(format!("the ledger refused it: {e}")),
        })
    }

    /// One provider request, waiting out rate limits as told while the budget lasts.
    async fn call<T, F, Fut>(
        &self,
        deadline: i64,
        summary: &mut Summary,
        mut request: F,
    ) -> Result<T, RunErrorKind>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, ProviderError>>,
    {
        let mut backoff = Duration::from_secs(1);
        loop {
            summary.requests += 1;
            // No request outlives the run's budget (each has its own timeout besides, `api_client`).
            let left = u64::try_from(deadline.saturating_sub(self.world.now_ms())).unwrap_or(0);
            let Ok(answer) = tokio::time::timeout(Duration::from_millis(left), request()).await else {
                return Err(RunErrorKind::Budget("time"));
            };
            match answer {
                Ok(v) => return Ok(v),
                Err(ProviderError::RateLimited { wait }) => {
                    let wait = wait.unwrap_or_else(|| {
                        let b = backoff;
                        backoff = (backoff * 2).min(Duration::from_secs(60));
                        b
                    });
                    if self.world.now_ms().saturating_add(ms(wait)) > deadline {
                        return Err(RunErrorKind::RateLimited(wait));
                    }
                    tracing::info!(source = %self.source, ?wait, "reconciliation: rate limited; waiting as told");
                    tokio::time::sleep(wait).await;
                }
                Err(ProviderError::BadCredentials(detail)) => {
                    return Err(RunErrorKind::BadCredentials {
                        provider: self.provider_name,
                        source_name: self.source.clone(),
                        detail,
                    })
                }
                Err(ProviderError::Failed(text)) => return Err(RunErrorKind::Provider(text)),
            }
        }
    }
}

/// What one run carries from the walk to the retries.
struct Pass<'a> {
    ledger: &'a dyn Store,
    queue: &'a dyn Queue,
    /// When the run's time budget ends, on the world's clock (epoch ms).
    deadline: i64,
    dry_run: bool,
    summary: Summary,
    /// Every id the walk listed: one id once per run, whatever the provider lists again.
    seen: HashSet<String>,
    /// The failed events earlier runs kept, by id.
    earlier: HashMap<EventId, FailedEvent>,
    /// The failed events to keep after this run.
    failed: Vec<FailedEvent>,
}

/// What a create did with an event the existence read found missing.
enum Stored {
    New(EventKey, Option<String>),
    /// A webhook stored it since the existence read.
    Present,
}

#[cfg(test)]
mod tests;
