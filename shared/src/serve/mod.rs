//! `inbox serve`: the receiver, the state machine's workers, the sweeper, the reconcilers and the alarm in one
//! process, over any store (the configuration picks it: [`crate::stores::open`]) and an in-process queue. The
//! workers are in [`workers`], the loops beside them (sweeper, retention, reconciliation) in [`upkeep`], the
//! queue in [`queue`], the notify-URL alarm in [`alarm`].

mod alarm;
mod queue;
mod upkeep;
mod workers;

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

pub use alarm::NotifyUrl;
pub use queue::{Deliveries, InProcessQueue};

use crate::clock::World;
use crate::config::{Config, ConfigError};
use crate::delivery_health::{DeliveryHealth, Thresholds};
use crate::handlers::{http_client, Registry};
use crate::intake::{Intake, Order};
use crate::machine::Machine;
use crate::metrics::Metrics;
use crate::ports::{Store, StoreError};
use crate::receiver::{router, InflightBytes, Receiver};
use crate::reconcile::reconcilers;
use crate::secrets::LocalSecrets;
use crate::source::Sources;
use upkeep::{run_reconciler, run_sweeper};
use workers::{refill, run_workers, Pool};

/// Pointers waiting in memory; past it the backlog waits in the ledger and the workers refill from there.
const QUEUE_CAPACITY: usize = 20_000;
/// How long in-flight handlers get to finish at shutdown before their leases are given back.
const DRAIN: Duration = Duration::from_secs(20);
/// How long requests in flight get to be answered 503 once the store failed, before the process stops.
const FAILED_DRAIN: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Io(String),
}

/// Runs until `shutdown` resolves, then stops accepting, lets in-flight handlers finish (or gives their leases
/// back) and returns. `on_listen` is told the bound address (the port may have been 0). The store is the one the
/// configuration names, opened for serving; the clock and randomness are the system's.
pub async fn serve(
    config: Config,
    handlers: Registry,
    on_listen: impl FnOnce(std::net::SocketAddr),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let world = World::system();
    let store = crate::stores::open(&config, &world, true).await?;
    run(config, handlers, store, world, on_listen, shutdown).await
}

/// [`serve`] over `store`, on `world`'s clock and randomness.
pub async fn run(
    config: Config,
    handlers: Registry,
    store: Arc<dyn Store>,
    world: World,
    on_listen: impl FnOnce(std::net::SocketAddr),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let sources = Sources::build(&config, Some(&LocalSecrets), &handlers).await?;
    let reconcilers = reconcilers(&config, &LocalSecrets, &world).await?;
    let metrics = Arc::new(Metrics::new(sources.names()));
    let alarm = Arc::new(NotifyUrl::new(http_client(), config.alarm.notify_url.clone()));
    let health = Arc::new(DeliveryHealth::new(
        sources.names(),
        Thresholds::default(),
        alarm.clone(),
        world.clone(),
    ));
    // This process's name in its leases: unique to it, so that its leases can be told from every other's (on a
    // shared store, every other machine's too).
    let owner = format!(
        "serve:{}:{}:{:08x}",
        std::process::id(),
        world.now_ms(),
        world.random.up_to(u64::from(u32::MAX))
    );
    // Alarms go out on a task of their own: a slow notify URL holds up neither start-up nor the workers.
    let machine = Arc::new(
        Machine::new(
            store.clone(),
            store.clone(),
            sources.clone(),
            metrics.clone(),
            alarm,
            config.retention,
            owner.clone(),
        )
        .with_world(world.clone())
        .with_background_alarms(),
    );
    let (queue, deliveries) = InProcessQueue::new(QUEUE_CAPACITY);

    // The restart scan: the leases of owners the store can prove gone end now, and whatever is open is handed
    // out again (an earlier process's in-memory queue died with it).
    store.heartbeat(&owner).await?;
    let gone = store.gone_owners(&owner).await?;
    let expired = store.end_leases(&gone, None).await?;
    let found = refill(&machine, &queue, config.sweeper.grace).await?;
    tracing::info!(
        expired_leases = expired,
        requeued = found.enqueued(),
        "start-up sweep done"
    );

    let (stop_tx, stop_rx) = watch::channel(false);
    let (pool, claimed) = Pool::new(machine.clone(), config.server.workers);
    let workers = tokio::spawn(run_workers(
        machine.clone(),
        queue.clone(),
        deliveries,
        pool.clone(),
        claimed,
        config.sweeper.grace,
        stop_rx.clone(),
    ));
    let sweeper = tokio::spawn(run_sweeper(
        machine.clone(),
        store.clone(),
        queue.clone(),
        owner.clone(),
        config.sweeper.interval,
        stop_rx.clone(),
    ));
    // Reconciliation: a task per source with a `reconcile` block, on its interval, beside receiving.
    let mut reconciling = JoinSet::new();
    for reconciler in reconcilers {
        let slot = sources
            .get(reconciler.source().as_str())
            .map_or(Metrics::UNKNOWN, |s| s.index);
        reconciling.spawn(run_reconciler(
            reconciler,
            store.clone(),
            queue.clone(),
            metrics.clone(),
            slot,
            world.clone(),
            owner.clone(),
            stop_rx.clone(),
        ));
    }

    let receiver = Arc::new(Receiver {
        sources,
        intake: Intake {
            ledger: store.clone(),
            queue: queue.clone(),
            metrics: metrics.clone(),
            health: health.clone(),
            resend_grace: config.sweeper.grace,
            // The ledger is its own queue: nothing is sent ahead of a create.
            order: Order::WriteThenEnqueue,
            // A new event runs at once in a free worker, claimed in its create's own write.
            runner: Some(pool),
            world: world.clone(),
        },
        metrics,
        read_timeout: config.server.read_timeout,
        inflight: InflightBytes::new(config.server.max_inflight_bytes),
        health,
        rejections: Default::default(),
        keys: crate::keys::from_env(world.clock.clone())?,
        world,
    });
    let listener = TcpListener::bind(config.server.listen)
        .await
        .map_err(|e| ServeError::Io(format!("cannot listen on {}: {e}", config.server.listen)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| ServeError::Io(format!("no local address: {e}")))?;
    tracing::info!(%addr, "inbox serve is listening");
    on_listen(addr);
    // A store that can no longer be trusted (SQLite: a failed sync) ends the process, as a shutdown would but
    // without waiting for handlers: nothing it writes can be answered as durable any more, and a restart recovers
    // from what the disk holds.
    let failed: Arc<OnceLock<String>> = Arc::default();
    let stopping = {
        let (store, failed) = (store.clone(), failed.clone());
        async move {
            tokio::select! {
                () = shutdown => {}
                cause = store.failure() => { let _ = failed.set(cause); }
            }
        }
    };
    let serving = axum::serve(listener, router(receiver, true)).with_graceful_shutdown(stopping);
    let failing = async {
        let cause = store.failure().await;
        // The requests in flight are answered 503 (every write is refused); a client still sending its body is
        // not waited for past this.
        tokio::time::sleep(FAILED_DRAIN).await;
        cause
    };
    tokio::select! {
        served = serving => served.map_err(|e| ServeError::Io(format!("server: {e}")))?,
        cause = failing => { let _ = failed.set(cause); }
    }
    if let Some(cause) = failed.get() {
        let _ = stop_tx.send(true);
        reconciling.abort_all();
        return Err(ServeError::Store(StoreError::Unavailable(format!(
            "stopped: {cause}; restart to recover from what the disk holds"
        ))));
    }

    tracing::info!("shutting down: no new requests; finishing in-flight handlers");
    let _ = stop_tx.send(true);
    let _ = sweeper.await;
    // A run cut short leaves its checkpoint where it was: the next one lists that window again.
    reconciling.abort_all();
    let _ = workers.await;
    let released = store.give_back(&owner, None).await?;
    if released > 0 {
        tracing::warn!(
            released,
            "handlers still running at shutdown: their leases were given back"
        );
    }
    Ok(())
}
