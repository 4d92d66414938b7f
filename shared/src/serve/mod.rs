//! `inbox serve`: the receiver, the state machine's workers, the sweeper, the reconcilers and the alarm in one
//! process, over any store (the configuration picks it: [`crate::stores::open`]) and an in-process queue. The
//! instance without its HTTP edge is in [`instance`]; its workers in [`workers`], its heartbeat and fence in
//! [`liveness`], the loops beside them (sweeper, retention, reconciliation) in [`upkeep`], the queue in [`queue`],
//! the notify-URL alarm in [`alarm`].

mod alarm;
mod instance;
mod liveness;
mod queue;
mod upkeep;
mod workers;

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::net::TcpListener;

pub use alarm::NotifyUrl;
pub use instance::{Instance, Parts, QueueLayer, Settings};
pub use liveness::Pace;
pub use queue::{Deliveries, InProcessQueue};

use crate::clock::World;
use crate::config::{Config, ConfigError};
use crate::delivery_health::{DeliveryHealth, Thresholds};
use crate::handlers::{http_client, Registry};
use crate::metrics::Metrics;
use crate::ports::{Store, StoreError};
use crate::receiver::{router, InflightBytes, Receiver};
use crate::reconcile::reconcilers;
use crate::secrets::LocalSecrets;
use crate::source::Sources;

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
    let instance = Instance::start(Parts {
        sources: sources.clone(),
        store: store.clone(),
        world: world.clone(),
        metrics: metrics.clone(),
        alarm,
        health: health.clone(),
        reconcilers,
        settings: Settings {
            workers: config.server.workers,
            grace: config.sweeper.grace,
            sweep_every: config.sweeper.interval,
            retention: config.retention,
            queue_capacity: QUEUE_CAPACITY,
        },
        queue_layer: None,
    })
    .await?;

    let receiver = Arc::new(Receiver {
        sources,
        intake: instance.intake(),
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
        instance.halt();
        return Err(ServeError::Store(StoreError::Unavailable(format!(
            "stopped: {cause}; restart to recover from what the disk holds"
        ))));
    }

    tracing::info!("shutting down: no new requests; finishing in-flight handlers");
    let released = instance.stop().await?;
    if released > 0 {
        tracing::warn!(
            released,
            "handlers still running at shutdown: their leases were given back"
        );
    }
    Ok(())
}
