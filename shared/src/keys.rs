//! Keys a request points at (docs/DESIGN.md "Providers: who can send"): PayPal's and AWS SNS's signing
//! certificates, JWK sets. The port [`KeySource`] fetches them beside the request, bounded in time and cached; a
//! key the provider cannot be reached for is a 503 (the sender retries), never a 401. The scheme has already
//! checked that the URL is one the provider serves its keys at (its host, its path, a key id of its shape), so
//! nothing is fetched from a place the request chose freely.
//!
//! Anyone can post a request naming a key, signed or not, so a fetch is work a stranger can ask for: [`CachedKeys`]
//! makes one fetch per key at a time (requests for a key being fetched wait for that fetch and share its outcome),
//! remembers a failed fetch for [`FAILED_FOR`] as it remembers a key for [`CACHE_FOR`], and holds at most
//! [`CACHE_ENTRIES`] keys, evicting the least recently used. A key set at the provider's own URL (Google's) is
//! fetched whole and each request's `kid` picked in it, so invented `kid`s are no fetches of their own. A source
//! may start [`FETCHES_PER_MINUTE`] fetches a minute of keys a request chose (a certificate URL, a `kid` asked for
//! by `POST`); what no forged request can make it want, the provider's key set and the keys that verified one of
//! its deliveries, has a share of its own ([`RESERVED_FETCHES_PER_MINUTE`]). Those keys are kept per source apart
//! from the cache ([`PROVEN_KEYS`]): a flood of invented keys can neither push them out nor keep them from being
//! fetched again, and past their hour they are used while no fetch is allowed. What a flood can still do is keep
//! a source from fetching a key of the request's choosing that has verified nothing in this process yet (after a
//! start or a Lambda cold start, or a provider's new certificate or Plaid key) for as long as it keeps that
//! source's open share spent: such a delivery is answered 503, and its sender retries.
//! [`HttpsKeys`] is the one way out: HTTPS only, no redirects, a certificate checked to a trusted root (Mozilla's,
//! plus any in `INBOX_TRUST_ROOTS`) and to the provider's names before its key is used.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

// Tokio's clock: a paused runtime (a simulation, a test) moves the cache's expiries and the budget's window.

use async_trait::async_trait;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::sync::watch;

use crate::clock::Clock;
use crate::schemes::request::{jwks, jwks_key, spki_of_certificate};
use crate::schemes::{KeyRequest, PublicKey};
use crate::sync::lock;

/// Why the key a request points at cannot be used.
#[derive(Clone, Debug, thiserror::Error)]
pub enum KeyFetchError {
    /// It could not be had (the host unreachable or answering an error, a chain to no trusted root, a key set
    /// without the key): the receiver answers 503 and the sender retries.
    #[error("{0}")]
    Unavailable(String),
    /// What the provider's URL served is not the provider's key (a certificate from a trusted root, but issued to
    /// another name): the request is a forgery, refused 401 like any other.
    #[error("{0}")]
    Forged(String),
    /// The key is not cached and the source has started the fetches its share allows within the last minute
    /// ([`FETCHES_PER_MINUTE`], [`RESERVED_FETCHES_PER_MINUTE`]): nothing more is fetched for it until
    /// `retry_after` has passed. A 503 (the sender retries; SNS and PayPal do), never a 401: the request may well
    /// be the provider's.
    #[error("the source's key fetches for this minute are spent; the next in {retry_after:?}")]
    Budget { retry_after: Duration },
}

/// Fetches the keys requests point at, and confirms subscriptions (AWS SNS's `SubscribeURL`).
#[async_trait]
pub trait KeySource: Send + Sync + 'static {
    /// The key `request` points at, for a request to `source`: whatever a source's requests make this fetch is
    /// bounded per source ([`FETCHES_PER_MINUTE`]), so a flood at one source cannot spend another's.
    async fn fetch(&self, source: &str, request: &KeyRequest) -> Result<PublicKey, KeyFetchError>;
    /// The key `fetch` gave for `request` has verified a delivery to `source`: it is the provider's, and is kept
    /// for the source apart from the keys anyone's requests make it fetch ([`PROVEN_KEYS`]).
    fn verified(&self, source: &str, request: &KeyRequest);
    /// `GET`s a confirmation URL the scheme has checked to be the provider's.
    async fn confirm(&self, url: &str) -> Result<(), KeyFetchError>;
}

/// The HTTPS adapter behind the cache, as the environment configures it, for a runtime's start: a bad setting fails
/// the start, naming the variable.
pub fn from_env(clock: Arc<dyn Clock>) -> Result<Arc<dyn KeySource>, crate::config::ConfigError> {
    HttpsKeys::from_env()
        .map(|k| Arc::new(CachedKeys::new(k, clock)) as Arc<dyn KeySource>)
        .map_err(|e| crate::config::ConfigError::new("environment", e.to_string()))
}

/// How long one fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a fetched key is used before it is fetched again.
pub const CACHE_FOR: Duration = Duration::from_secs(3600);
/// How long a fetch that failed is remembered: the requests for that key meanwhile get its answer (503, or 401 for
/// a certificate under another name) without a fetch of their own. Short, so that a provider's host back from an
/// outage is asked again soon: SNS and PayPal retry a 503 later than this.
pub const FAILED_FOR: Duration = Duration::from_secs(30);
/// Fetches a source may start within [`BUDGET_WINDOW`] for keys a request chose (a certificate's URL, a `kid` asked
/// for by `POST`) that have verified none of its deliveries. Anyone can post requests naming such keys, and each
/// one not cached is a fetch: past this, requests for them are answered 503 with `Retry-After` until a fetch of the
/// window is a minute old, while requests whose key is cached or proven ([`PROVEN_KEYS`]) go on as usual. A
/// provider rotates its keys rarely: a real source needs a fetch of a new key now and then, never ten a minute.
pub const FETCHES_PER_MINUTE: usize = 10;
/// Fetches a source may start within [`BUDGET_WINDOW`] that no forged request can make it want: of a key set at the
/// provider's own URL (Google's JWK set, which a request does not name, only picks a key in), or of a key that
/// verified one of the source's deliveries. A share of its own, so that invented keys, however many, cannot keep
/// the source from fetching these; once it is spent they may take what [`FETCHES_PER_MINUTE`] has left, and past
/// that a proven key is used though past its hour. A source spends it only when many of its proven keys are due in
/// one minute: a set is fetched once per [`KID_REFETCH_AFTER`] at most for the `kid`s it lacks, a key once an hour.
pub const RESERVED_FETCHES_PER_MINUTE: usize = 10;
/// The window [`FETCHES_PER_MINUTE`] and [`RESERVED_FETCHES_PER_MINUTE`] are counted over.
pub const BUDGET_WINDOW: Duration = Duration::from_secs(60);
/// Keys (and failed fetches) cached at most: a provider rotates a few. Past it the least recently used goes, a
/// failed fetch before a key. Anyone's requests fill it (a key of another SNS region or account fetches as well as
/// the source's own), so the keys that verified a delivery are kept apart from it ([`PROVEN_KEYS`]).
pub const CACHE_ENTRIES: usize = 256;
/// Keys kept per source that verified one of its real deliveries: a provider serves a few at a time (a certificate
/// per SNS region, a set's current and next keys). Kept apart from the cache, out of reach of forged requests: only
/// a verified delivery adds one, and past this the one that verified a delivery longest ago goes. A proven key is
/// answered from here for its hour, fetched again after it on the reserved share, and used past it while no fetch
/// is allowed.
pub const PROVEN_KEYS: usize = 32;
/// A key set is fetched again for a `kid` it does not hold at most once per this: a provider publishes a key in its
/// set before it signs with it, and invented `kid`s make one fetch of the set per this, whatever their number.
pub const KID_REFETCH_AFTER: Duration = Duration::from_secs(30);
/// The largest certificate chain or key set read.
const MAX_KEY_BYTES: usize = 64 * 1024;

/// What a fetch ends with.
type Outcome = Result<PublicKey, KeyFetchError>;

/// A way to fetch keys: the network behind [`CachedKeys`] ([`HttpsKeys`]), or a test's stand-in.
#[async_trait]
pub trait Fetcher: Send + Sync + 'static {
    async fn fetch(&self, request: &KeyRequest) -> Outcome;
    /// `GET`s a confirmation URL the scheme has checked to be the provider's.
    async fn confirm(&self, url: &str) -> Result<(), KeyFetchError>;
}

/// [`KeySource`] over a [`Fetcher`]: cached, one fetch per key at a time, failures remembered briefly. The fetch
/// runs on a task of its own, so a request that gives up waiting (its client went away) neither cancels it for
/// the others nor leaves the key half fetched.
pub struct CachedKeys<F> {
    fetcher: Arc<F>,
    cache: Arc<Mutex<Cache>>,
    /// What the cache's ages and the fetch budget's minute are measured on.
    clock: Arc<dyn Clock>,
}

impl<F: Fetcher> CachedKeys<F> {
    pub fn new(fetcher: F, clock: Arc<dyn Clock>) -> Self {
        CachedKeys {
            fetcher: Arc::new(fetcher),
            cache: Arc::new(Mutex::new(Cache::default())),
            clock,
        }
    }
}

/// A reading of the clock as the cache measures it: the time since the epoch.
fn reading(clock: &dyn Clock) -> Duration {
    Duration::from_millis(u64::try_from(clock.now_ms()).unwrap_or(0))
}

/// What a request's key is fetched as, and how its key is had from what is fetched.
struct Target {
    /// The cache's key: a certificate's URL (the scheme's spelling of it), a key set's URL, a key asked for by
    /// `POST` by its URL and `kid`.
    id: String,
    /// The `kid` to pick from a key set fetched whole; `None` where what is fetched is the request's key itself.
    kid: Option<String>,
}

impl Target {
    fn of(request: &KeyRequest) -> Self {
        match request {
            KeyRequest::Certificate { url, .. } => Target {
                id: url.clone(),
                kid: None,
            },
            // The set, not the key: a request picks a key in it, so a thousand invented `kid`s are one set.
            KeyRequest::Jwks { url, kid } => Target {
                id: url.clone(),
                kid: Some(kid.clone()),
            },
            KeyRequest::JwkByPost { url, kid, .. } => Target {
                id: format!("{url}#{kid}"),
                kid: None,
            },
        }
    }

    /// Whether a request chose what is fetched, so that a forger can vary it freely: a certificate's URL, a `kid`
    /// asked for by `POST`. A key set's URL is the scheme's own (the provider's documented one), never the request's.
    fn chosen_by_request(&self) -> bool {
        self.kid.is_none()
    }

    /// Whether `key` holds this request's key: it is the key, or a set holding the `kid`.
    fn answered_by(&self, key: &PublicKey) -> bool {
        match (&self.kid, key) {
            (Some(kid), PublicKey::Jwks(keys)) => keys.iter().any(|(k, _)| k == kid),
            _ => true,
        }
    }

    /// This request's key out of what was had for it: the set's key with the `kid`, or what was fetched.
    fn pick(&self, outcome: Outcome) -> Outcome {
        match (&self.kid, outcome) {
            (Some(kid), Ok(PublicKey::Jwks(keys))) => {
                let found: Vec<_> = keys.into_iter().filter(|(k, _)| k == kid).collect();
                if found.is_empty() {
                    Err(KeyFetchError::Unavailable(format!(
                        "the key set holds no key {kid:?}"
                    )))
                } else {
                    Ok(PublicKey::Jwks(found))
                }
            }
            (_, outcome) => outcome,
        }
    }
}

#[async_trait]
impl<F: Fetcher> KeySource for CachedKeys<F> {
    async fn fetch(&self, source: &str, request: &KeyRequest) -> Result<PublicKey, KeyFetchError> {
        let target = Target::of(request);
        let waiting = match lock(&self.cache).lookup(&target, source, reading(self.clock.as_ref())) {
            Lookup::Cached(outcome) => return target.pick(outcome),
            Lookup::InFlight(waiting) => waiting,
            Lookup::Fetch(done) => {
                let waiting = done.subscribe();
                let (fetcher, cache, request) = (self.fetcher.clone(), self.cache.clone(), request.clone());
                let clock = self.clock.clone();
                let (source, id) = (source.to_owned(), target.id.clone());
                tokio::spawn(async move {
                    let outcome = fetcher.fetch(&request).await;
                    // Once per fetch (at most FETCHES_PER_MINUTE a minute for a source), not per request.
                    if let Err(e) = &outcome {
                        tracing::info!(source, error = %e, "a key could not be fetched; remembered for 30 s");
                    }
                    // Cached before it is announced: a request arriving in between finds it, not a fetch gone.
                    lock(&cache).settle(&id, outcome.clone(), reading(clock.as_ref()));
                    done.send_replace(Some(outcome));
                });
                waiting
            }
        };
        target.pick(shared(waiting).await)
    }

    fn verified(&self, source: &str, request: &KeyRequest) {
        lock(&self.cache).verified(&Target::of(request), source);
    }

    async fn confirm(&self, url: &str) -> Result<(), KeyFetchError> {
        self.fetcher.confirm(url).await
    }
}

/// The outcome of a fetch in flight, once it is known.
async fn shared(mut waiting: watch::Receiver<Option<Outcome>>) -> Outcome {
    match waiting.wait_for(Option::is_some).await {
        Ok(outcome) => outcome.clone().unwrap_or_else(|| {
            Err(KeyFetchError::Unavailable(
                "the key fetch ended without an answer".into(),
            ))
        }),
        Err(_) => Err(KeyFetchError::Unavailable("the key fetch stopped".into())),
    }
}

/// What [`Cache::lookup`] found for a key.
enum Lookup {
    /// A key (or a set holding it), or a failure, fresh enough to answer with.
    Cached(Outcome),
    /// A fetch of it is under way: wait for its outcome.
    InFlight(watch::Receiver<Option<Outcome>>),
    /// Nothing usable: the caller fetches it, and announces the outcome on this (after [`Cache::settle`]).
    Fetch(watch::Sender<Option<Outcome>>),
}

/// The keys, the failures and the fetches in flight, by [`Target`]; each source's proven keys and its fetches of
/// the last minute: no I/O, and the time is handed in (a reading of the clock, as the time since the epoch).
#[derive(Default)]
struct Cache {
    entries: HashMap<String, Entry>,
    /// Counts lookups and verified deliveries: an entry's `used` is the count at its last lookup, so the smallest
    /// is the least recently used; a proven key's `verified`, at its last verified delivery.
    tick: u64,
    /// When each source's fetches of the last [`BUDGET_WINDOW`] started (sources are the configuration's, so this
    /// holds a few entries whatever requests arrive).
    budgets: HashMap<String, Budget>,
    /// Each source's keys that verified one of its deliveries, by target ([`PROVEN_KEYS`] at most a source).
    proven: HashMap<String, HashMap<String, Proven>>,
}

/// A source's fetches of the last [`BUDGET_WINDOW`], when each started, oldest first: those any request can ask for
/// ([`FETCHES_PER_MINUTE`]), and those of proven keys and the provider's key sets ([`RESERVED_FETCHES_PER_MINUTE`]).
#[derive(Default)]
struct Budget {
    open: VecDeque<Duration>,
    reserved: VecDeque<Duration>,
}

/// A key that verified a real delivery: the key (a whole set, for a set), until when it is used without a fetch,
/// and the [`Cache::tick`] of the last delivery it verified.
struct Proven {
    key: PublicKey,
    until: Duration,
    verified: u64,
}

struct Entry {
    state: State,
    used: u64,
    /// A fresh set fetched again for a `kid` it does not hold: meanwhile the set answers the `kid`s it holds, and
    /// the requests for others wait for this.
    refresh: Option<watch::Receiver<Option<Outcome>>>,
}

enum State {
    /// A fetch's outcome, used until `until`; `fetched` is when it was had (or a set last tried again).
    Ready {
        outcome: Outcome,
        fetched: Duration,
        until: Duration,
    },
    Pending(watch::Receiver<Option<Outcome>>),
}

/// Whether the task of a fetch in flight is still there to announce it (a task that panicked is fetched again).
fn alive(waiting: &watch::Receiver<Option<Outcome>>) -> bool {
    waiting.has_changed().is_ok()
}

impl Cache {
    fn lookup(&mut self, target: &Target, source: &str, now: Duration) -> Lookup {
        self.tick += 1;
        let proven = self.proven.get(source).and_then(|keys| keys.get(&target.id));
        if let Some(proven) = proven.filter(|p| now < p.until && target.answered_by(&p.key)) {
            return Lookup::Cached(Ok(proven.key.clone()));
        }
        let proven = proven.map(|p| p.key.clone());
        let (mut stale, mut refresh) = (None, false);
        if let Some(entry) = self.entries.get_mut(&target.id) {
            entry.used = self.tick;
            match &entry.state {
                State::Ready {
                    outcome: Ok(key),
                    fetched,
                    until,
                } if now < *until => {
                    if target.answered_by(key) {
                        return Lookup::Cached(Ok(key.clone()));
                    }
                    // A fresh set without the kid: fetched again once KID_REFETCH_AFTER has passed; until then the
                    // answer is that it holds no such key.
                    if let Some(waiting) = entry.refresh.as_ref().filter(|w| alive(w)) {
                        return Lookup::InFlight(waiting.clone());
                    }
                    if now < *fetched + KID_REFETCH_AFTER {
                        return Lookup::Cached(Ok(key.clone()));
                    }
                    refresh = true;
                }
                State::Ready { outcome, until, .. } if now < *until => {
                    return Lookup::Cached(outcome.clone())
                }
                State::Ready { outcome: Ok(key), .. } => stale = Some(key.clone()),
                State::Pending(waiting) if alive(waiting) => return Lookup::InFlight(waiting.clone()),
                _ => {}
            }
        }
        // What no forged request can make the source want takes the reserved share: the provider's key set, whose
        // URL is the scheme's, and a key that verified one of the source's deliveries.
        let reserved = !target.chosen_by_request() || proven.is_some();
        if let Err(retry_after) = self.spend(source, reserved, now) {
            // A key past its hour is still the provider's key: better than a 503 while the budget is spent. A
            // proven one first: forged requests cannot push it out of its store as they can out of the cache.
            let fallback = proven.or(stale).filter(|key| target.answered_by(key));
            return Lookup::Cached(fallback.ok_or(KeyFetchError::Budget { retry_after }));
        }
        let (done, waiting) = watch::channel(None);
        match self.entries.get_mut(&target.id) {
            Some(entry) if refresh => entry.refresh = Some(waiting),
            _ => self.put(&target.id, State::Pending(waiting), now),
        }
        Lookup::Fetch(done)
    }

    /// Counts a fetch `source` starts now: on the reserved share if `reserved` and it has room, else on the open
    /// one if it has; else how long until a fetch of the window leaves it.
    fn spend(&mut self, source: &str, reserved: bool, now: Duration) -> Result<(), Duration> {
        let budget = self.budgets.entry(source.to_owned()).or_default();
        let open = |budget: &mut Budget| take(&mut budget.open, FETCHES_PER_MINUTE, now);
        if !reserved {
            return open(budget);
        }
        match take(&mut budget.reserved, RESERVED_FETCHES_PER_MINUTE, now) {
            Ok(()) => Ok(()),
            Err(reserved_after) => open(budget).map_err(|open_after| open_after.min(reserved_after)),
        }
    }

    /// Keeps a fetch's outcome: a key for [`CACHE_FOR`] (the proven stores' copies too), a failure for
    /// [`FAILED_FOR`]. A failure does not replace a fresh key: a set fetched again for a `kid` it lacks goes on
    /// answering the `kid`s it holds while its host is down, and is not tried again before [`KID_REFETCH_AFTER`].
    fn settle(&mut self, id: &str, outcome: Outcome, now: Duration) {
        if let Ok(key) = &outcome {
            for proven in self.proven.values_mut().filter_map(|keys| keys.get_mut(id)) {
                proven.key = key.clone();
                proven.until = now + CACHE_FOR;
            }
        }
        if let Some(entry) = self.entries.get_mut(id) {
            entry.refresh = None;
            if let (
                Err(_),
                State::Ready {
                    outcome: Ok(_),
                    fetched,
                    until,
                },
            ) = (&outcome, &mut entry.state)
            {
                if now < *until {
                    *fetched = now;
                    return;
                }
            }
        }
        let until = now + if outcome.is_ok() { CACHE_FOR } else { FAILED_FOR };
        let fetched = now;
        self.put(
            id,
            State::Ready {
                outcome,
                fetched,
                until,
            },
            now,
        );
    }

    /// Keeps the key the cache holds for `target` among `source`'s proven keys: it has just verified one of its
    /// deliveries. (A key pushed out of the cache between its fetch and that check is proven by a later delivery.)
    fn verified(&mut self, target: &Target, source: &str) {
        self.tick += 1;
        let tick = self.tick;
        let cached = match self.entries.get(&target.id).map(|entry| &entry.state) {
            Some(State::Ready {
                outcome: Ok(key),
                until,
                ..
            }) if target.answered_by(key) => Some((key.clone(), *until)),
            _ => None,
        };
        let keys = self.proven.entry(source.to_owned()).or_default();
        if let Some(proven) = keys.get_mut(&target.id) {
            proven.verified = tick;
            return;
        }
        let Some((key, until)) = cached else { return };
        if keys.len() >= PROVEN_KEYS {
            let oldest = keys
                .iter()
                .min_by_key(|(_, proven)| proven.verified)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                keys.remove(&oldest);
            }
        }
        keys.insert(
            target.id.clone(),
            Proven {
                key,
                until,
                verified: tick,
            },
        );
    }

    fn put(&mut self, id: &str, state: State, now: Duration) {
        if let Some(entry) = self.entries.get_mut(id) {
            entry.state = state;
            return;
        }
        if self.entries.len() >= CACHE_ENTRIES {
            self.evict(now);
        }
        self.entries.insert(
            id.to_owned(),
            Entry {
                state,
                used: self.tick,
                refresh: None,
            },
        );
    }

    /// Drops one entry, the least recently used of the first kind there is: expired, a failure, a key, and a
    /// fetch in flight last (its waiters keep their own handle on it).
    fn evict(&mut self, now: Duration) {
        let rank = |entry: &Entry| match &entry.state {
            State::Ready { until, .. } if *until <= now => 0,
            State::Ready { outcome: Err(_), .. } => 1,
            State::Ready { outcome: Ok(_), .. } => 2,
            State::Pending(_) => 3,
        };
        let victim = self
            .entries
            .iter()
            .min_by_key(|(_, entry)| (rank(entry), entry.used))
            .map(|(id, _)| id.clone());
        if let Some(victim) = victim {
            self.entries.remove(&victim);
        }
    }
}

/// Counts a fetch started now in `started` (a share's starts, oldest first), if fewer than `limit` started within
/// the last [`BUDGET_WINDOW`]; else how long until the oldest of them leaves the window.
fn take(started: &mut VecDeque<Duration>, limit: usize, now: Duration) -> Result<(), Duration> {
    while started
        .front()
        .is_some_and(|at| now.saturating_sub(*at) >= BUDGET_WINDOW)
    {
        started.pop_front();
    }
    if started.len() < limit {
        started.push_back(now);
        return Ok(());
    }
    let oldest = started.front().copied().unwrap_or(now);
    Err((oldest + BUDGET_WINDOW).saturating_sub(now))
}

/// The HTTPS [`Fetcher`].
pub struct HttpsKeys {
    client: reqwest::Client,
    anchors: Vec<CertificateDer<'static>>,
    /// `host -> address`: where to connect for a provider host (`INBOX_CONNECT_TO`, like curl's `--connect-to`),
    /// for tests that stand a local server in for the provider; the TLS name checked stays the provider's.
    connect_to: HashMap<String, SocketAddr>,
}

/// Why a PEM file of roots could not be read.
#[derive(Debug)]
pub enum RootsFileError {
    Read(std::io::Error),
    NotPem(rustls_pki_types::pem::Error),
}

/// The certificates of a PEM file of roots an operator trusts beside the web's: `INBOX_TRUST_ROOTS` for the
/// providers' key hosts, `store.ca_file` for PostgreSQL. Each caller names its setting in its own error.
pub fn read_roots(path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, RootsFileError> {
    let pem = std::fs::read(path).map_err(RootsFileError::Read)?;
    CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(RootsFileError::NotPem)
}

impl HttpsKeys {
    /// From the environment: `INBOX_TRUST_ROOTS` (a PEM file of roots trusted beside Mozilla's) and
    /// `INBOX_CONNECT_TO` (`host=ip:port,...`). Both are for private deployments and tests; unset, the adapter
    /// trusts Mozilla's roots and connects to the provider's hosts as DNS has them.
    pub fn from_env() -> Result<Self, KeyFetchError> {
        let extra = match std::env::var_os("INBOX_TRUST_ROOTS") {
            None => Vec::new(),
            Some(path) => read_roots(std::path::Path::new(&path)).map_err(|e| {
                KeyFetchError::Unavailable(match e {
                    RootsFileError::Read(e) => format!("INBOX_TRUST_ROOTS {}: {e}", path.to_string_lossy()),
                    RootsFileError::NotPem(e) => format!("INBOX_TRUST_ROOTS: not PEM certificates: {e}"),
                })
            })?,
        };
        let mut connect_to = HashMap::new();
        if let Ok(spec) = std::env::var("INBOX_CONNECT_TO") {
            for pair in spec.split(',').filter(|p| !p.is_empty()) {
                let (host, addr) = pair.split_once('=').ok_or_else(|| {
                    KeyFetchError::Unavailable(format!("INBOX_CONNECT_TO: {pair:?} is not host=ip:port"))
                })?;
                let addr: SocketAddr = addr.parse().map_err(|_| {
                    KeyFetchError::Unavailable(format!("INBOX_CONNECT_TO: {addr:?} is not ip:port"))
                })?;
                connect_to.insert(host.to_ascii_lowercase(), addr);
            }
        }
        Self::new(extra, connect_to)
    }

    pub fn new(
        extra_roots: Vec<CertificateDer<'static>>,
        connect_to: HashMap<String, SocketAddr>,
    ) -> Result<Self, KeyFetchError> {
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .https_only(true)
            .no_proxy()
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(FETCH_TIMEOUT);
        for root in &extra_roots {
            let cert = reqwest::Certificate::from_der(root.as_ref())
                .map_err(|e| KeyFetchError::Unavailable(format!("a trust root: {e}")))?;
            builder = builder.add_root_certificate(cert);
        }
        for (host, addr) in &connect_to {
            builder = builder.resolve(host, *addr);
        }
        let client = builder
            .build()
            .map_err(|e| KeyFetchError::Unavailable(format!("cannot build the HTTPS client: {e}")))?;
        let mut anchors: Vec<CertificateDer<'static>> = webpki_root_certs::TLS_SERVER_ROOT_CERTS.to_vec();
        anchors.extend(extra_roots);
        Ok(HttpsKeys {
            client,
            anchors,
            connect_to,
        })
    }

    /// The URL to ask: the same, but on the port a connect-to override names.
    fn target(&self, url: &str) -> Result<reqwest::Url, KeyFetchError> {
        let mut parsed = reqwest::Url::parse(url)
            .map_err(|_| KeyFetchError::Unavailable("the key URL does not parse".into()))?;
        let host = parsed.host_str().unwrap_or("").to_ascii_lowercase();
        if let Some(addr) = self.connect_to.get(&host) {
            parsed
                .set_port(Some(addr.port()))
                .map_err(|_| KeyFetchError::Unavailable("cannot set the key URL's port".into()))?;
        }
        Ok(parsed)
    }

    async fn get(&self, url: &str) -> Result<Vec<u8>, KeyFetchError> {
        self.read(self.client.get(self.target(url)?)).await
    }

    /// `POST`s a JSON body (an API's key endpoint, with the source's credentials in it).
    async fn post_json(&self, url: &str, body: &[u8]) -> Result<Vec<u8>, KeyFetchError> {
        let request = self
            .client
            .post(self.target(url)?)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_vec());
        self.read(request).await
    }

    /// Sends `request` and reads a successful answer of at most `MAX_KEY_BYTES`. Errors name no URL: a POST's
    /// carries nothing secret, but a provider's URL may.
    async fn read(&self, request: reqwest::RequestBuilder) -> Result<Vec<u8>, KeyFetchError> {
        let unreachable = |e: reqwest::Error| {
            KeyFetchError::Unavailable(format!("the provider's key host: {}", e.without_url()))
        };
        let response = request.send().await.map_err(unreachable)?;
        if !response.status().is_success() {
            return Err(KeyFetchError::Unavailable(format!(
                "the provider's key host answered {}",
                response.status()
            )));
        }
        let bytes = response.bytes().await.map_err(unreachable)?;
        if bytes.len() > MAX_KEY_BYTES {
            return Err(KeyFetchError::Unavailable(format!(
                "the provider's key is over {MAX_KEY_BYTES} bytes"
            )));
        }
        Ok(bytes.to_vec())
    }

    /// The leaf's key, once the chain (leaf first, then intermediates) is checked to a trusted root, now, and the
    /// leaf to be issued to one of `names` (a DNS name of its subjectAltName). A chain to no trusted root is a key
    /// not had (503); a trusted certificate under another name is not the provider's (a forgery, 401): whoever
    /// holds a domain can be issued one for it, and the provider's URL never serves it.
    fn certified_key(&self, pem: &[u8], names: &[String]) -> Result<PublicKey, KeyFetchError> {
        let bad = |why: String| KeyFetchError::Unavailable(format!("the provider's certificate: {why}"));
        let chain = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(format!("not PEM: {e}")))?;
        let (leaf, intermediates) = chain.split_first().ok_or_else(|| bad("no certificate".into()))?;
        let anchors = self
            .anchors
            .iter()
            .filter_map(|a| webpki::anchor_from_trusted_cert(a).ok())
            .collect::<Vec<_>>();
        let cert = webpki::EndEntityCert::try_from(leaf).map_err(|e| bad(e.to_string()))?;
        cert.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &anchors,
            intermediates,
            UnixTime::now(),
            webpki::KeyUsage::required_if_present(SERVER_AUTH),
            None,
            None,
        )
        .map_err(|e| bad(format!("not from a trusted root ({e})")))?;
        let issued_to = |name: &String| {
            ServerName::try_from(name.as_str())
                .is_ok_and(|name| cert.verify_is_valid_for_subject_name(&name).is_ok())
        };
        if !names.iter().any(issued_to) {
            return Err(KeyFetchError::Forged(format!(
                "the provider's certificate is not issued to {}",
                names.join(" or ")
            )));
        }
        let spki = spki_of_certificate(leaf.as_ref()).ok_or_else(|| bad("its key cannot be read".into()))?;
        Ok(PublicKey::Rsa(spki))
    }
}

/// id-kp-serverAuth (1.3.6.1.5.5.7.3.1), DER-encoded.
const SERVER_AUTH: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01];

#[async_trait]
impl Fetcher for HttpsKeys {
    async fn fetch(&self, request: &KeyRequest) -> Outcome {
        let body = match request {
            KeyRequest::JwkByPost { url, .. } => {
                self.post_json(url, request.post_body().unwrap_or_default())
                    .await?
            }
            _ => self.get(request.url()).await?,
        };
        Ok(match request {
            KeyRequest::Certificate { names, .. } => self.certified_key(&body, names)?,
            // The whole set: the cache picks each request's `kid` in it.
            KeyRequest::Jwks { .. } => {
                let text = std::str::from_utf8(&body)
                    .map_err(|_| KeyFetchError::Unavailable("the key set is not UTF-8".into()))?;
                jwks(text).ok_or_else(|| KeyFetchError::Unavailable("the key set holds no key".into()))?
            }
            KeyRequest::JwkByPost { kid, .. } => {
                let answer: serde_json::Value = serde_json::from_slice(&body)
                    .map_err(|_| KeyFetchError::Unavailable("the key answer is not JSON".into()))?;
                let jwk = answer
                    .get("key")
                    .ok_or_else(|| KeyFetchError::Unavailable("the key answer holds no key".into()))?;
                jwks_key(&jwk.to_string(), kid)
                    .ok_or_else(|| KeyFetchError::Unavailable(format!("no key {kid:?} in the answer")))?
            }
        })
    }

    async fn confirm(&self, url: &str) -> Result<(), KeyFetchError> {
        self.get(url).await.map(drop)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::sync::atomic::Ordering::SeqCst;

    use super::*;

    /// A file of the test-only keys and certificates (tests/data/keys/make.sh).
    fn file(name: &str) -> Vec<u8> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/keys");
        std::fs::read(dir.join(name)).unwrap()
    }

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    /// GIVEN the test root trusted, and certificates for one key from it under PayPal's name, SNS's name and a name
    /// of no provider's (as anyone can be issued for a domain of their own)
    /// THEN each is the provider's key only under the provider's names: under another it is a forgery (not a key
    /// that could not be had), and a certificate from an untrusted root is a key not had, whatever its name.
    #[test]
    fn a_certificate_is_the_providers_only_under_the_providers_names() {
        let root = CertificateDer::from_pem_slice(&file("root.pem")).unwrap();
        let keys = HttpsKeys::new(vec![root], HashMap::new()).unwrap();
        let paypal = names(&[
            "messageverificationcerts.paypal.com",
            "messageverificationcerts.sandbox.paypal.com",
        ]);
        let sns = names(&["sns.amazonaws.com", "sns.us-east-1.amazonaws.com"]);
        let key = |pem: &str, names: &[String]| keys.certified_key(&file(pem), names);

        let paypals = key("signer.pem", &paypal).unwrap();
        let snss = key("sns-signer.pem", &sns).unwrap();
        assert_eq!(paypals, snss, "one signing key under two names");
        for (pem, wanted) in [
            ("other-name.pem", &paypal),
            ("other-name.pem", &sns),
            ("signer.pem", &sns),
            ("sns-signer.pem", &paypal),
        ] {
            assert!(
                matches!(key(pem, wanted), Err(KeyFetchError::Forged(_))),
                "{pem} for {wanted:?}: {:?}",
                key(pem, wanted).map(|_| "the provider's key")
            );
        }
        assert!(matches!(
            key("untrusted.pem", &paypal),
            Err(KeyFetchError::Unavailable(_))
        ));
    }

    /// A stand-in for the network: records what it fetches, answers each with `answer` once `open` is true.
    struct Fake {
        fetched: Mutex<Vec<String>>,
        open: watch::Receiver<bool>,
        answer: Box<dyn Fn(&KeyRequest) -> Outcome + Send + Sync>,
    }

    #[async_trait]
    impl Fetcher for Fake {
        async fn fetch(&self, request: &KeyRequest) -> Outcome {
            lock(&self.fetched).push(fetched_as(request));
            let _ = self.open.clone().wait_for(|open| *open).await;
            (self.answer)(request)
        }
        async fn confirm(&self, _url: &str) -> Result<(), KeyFetchError> {
            Ok(())
        }
    }

    fn fake(
        answer: impl Fn(&KeyRequest) -> Outcome + Send + Sync + 'static,
    ) -> (Arc<CachedKeys<Fake>>, watch::Sender<bool>) {
        let (open, opened) = watch::channel(false);
        let fetcher = Fake {
            fetched: Mutex::new(Vec::new()),
            open: opened,
            answer: Box::new(answer),
        };
        (
            Arc::new(CachedKeys::new(fetcher, Arc::new(crate::clock::SystemClock))),
            open,
        )
    }

    fn fetches(keys: &CachedKeys<Fake>) -> usize {
        lock(&keys.fetcher.fetched).len()
    }

    /// What a fetch is recorded as: its URL, and a `kid` asked for by `POST`.
    fn fetched_as(request: &KeyRequest) -> String {
        match request {
            KeyRequest::JwkByPost { url, kid, .. } => format!("{url}#{kid}"),
            _ => request.url().to_owned(),
        }
    }

    /// How many times `request`'s key was fetched.
    fn fetches_of(keys: &CachedKeys<Fake>, request: &KeyRequest) -> usize {
        let wanted = fetched_as(request);
        lock(&keys.fetcher.fetched)
            .iter()
            .filter(|fetched| **fetched == wanted)
            .count()
    }

    fn certificate(n: usize) -> KeyRequest {
        KeyRequest::Certificate {
            url: format!("https://sns.us-east-1.amazonaws.com/SimpleNotificationService-{n:032x}.pem"),
            names: names(&["sns.amazonaws.com"]),
        }
    }

    fn a_key(_: &KeyRequest) -> Outcome {
        Ok(PublicKey::Rsa(vec![1, 2, 3]))
    }

    const GOOGLE: &str = "https://www.googleapis.com/oauth2/v3/certs";

    /// A token's key in Google's set, by `kid`.
    fn google(kid: &str) -> KeyRequest {
        KeyRequest::Jwks {
            url: GOOGLE.to_owned(),
            kid: kid.to_owned(),
        }
    }

    /// A JWK set of these `kid`s.
    fn set(kids: &[&str]) -> PublicKey {
        PublicKey::Jwks(
            kids.iter()
                .map(|kid| ((*kid).to_owned(), format!(r#"{{"kty":"RSA","kid":"{kid}"}}"#)))
                .collect(),
        )
    }

    /// GIVEN a Google source (its keys in one set at Google's URL) and a forger who sends it a hundred tokens a
    /// minute for five minutes, each naming an invented `kid` of Google's shape
    /// WHEN a real delivery comes in the middle of each minute naming a key not cached before the flood began:
    /// Google's key, then (from the third minute) one Google has added to its set since; and in the fifth minute
    /// Google's key host is down
    /// THEN every real delivery gets its key (through the outage too, from the set already had), and the set is
    /// fetched at most once per KID_REFETCH_AFTER however many `kid`s are invented.
    #[tokio::test(start_paused = true)]
    async fn invented_kids_do_not_keep_a_real_key_from_being_fetched() {
        let (rotated, down) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (keys, open) = fake({
            let (rotated, down) = (rotated.clone(), down.clone());
            move |_| match (rotated.load(SeqCst), down.load(SeqCst)) {
                (_, true) => Err(KeyFetchError::Unavailable("503".into())),
                (false, false) => Ok(set(&["k1"])),
                (true, false) => Ok(set(&["k1", "k2"])),
            }
        });
        open.send_replace(true);
        for minute in 0..5 {
            rotated.store(minute >= 2, SeqCst);
            down.store(minute == 4, SeqCst);
            let real = if minute < 2 { "k1" } else { "k2" };
            for n in 0..100 {
                let invented = format!("{:040x}", minute * 1000 + n);
                assert!(keys.fetch("google", &google(&invented)).await.is_err());
                if n == 50 {
                    let key = keys
                        .fetch("google", &google(real))
                        .await
                        .unwrap_or_else(|e| panic!("minute {minute}: a real delivery's key: {e}"));
                    assert_eq!(key, set(&[real]), "minute {minute}");
                    keys.verified("google", &google(real));
                }
                tokio::time::advance(BUDGET_WINDOW / 100).await;
            }
        }
        let most = 1 + (5 * BUDGET_WINDOW).as_secs() / KID_REFETCH_AFTER.as_secs();
        assert!(
            fetches(&keys) as u64 <= most,
            "{} fetches of the set for 500 invented kids",
            fetches(&keys)
        );
    }

    /// GIVEN an SNS source whose eleven certificates (a topic in each of eleven regions) each verified a real
    /// delivery
    /// WHEN a forger names, ten a minute at each of four sources (their budgets), 400 certificate URLs of SNS's
    /// shape that all fetch (another account's or region's certificate is as real), until every one of the
    /// source's keys is out of the cache
    /// THEN a real delivery within the hour is answered with its key and no fetch, while invented keys spend the
    /// source's budget; and past the hour, ten of its keys are fetched again (the reserved share) and the
    /// eleventh, no fetch left to it, is answered with its key past its hour rather than a 503.
    #[tokio::test(start_paused = true)]
    async fn keys_that_verified_deliveries_outlive_a_flood_of_invented_keys() {
        let (keys, open) = fake(a_key);
        open.send_replace(true);
        let minute = || tokio::time::advance(BUDGET_WINDOW);
        let real: Vec<KeyRequest> = (0..=RESERVED_FETCHES_PER_MINUTE).map(certificate).collect();
        // Keys not proven yet take the open share: six this minute, the rest the next.
        for (n, request) in real.iter().enumerate() {
            if n == 6 {
                minute().await;
            }
            keys.fetch("sns", request).await.unwrap();
            keys.verified("sns", request);
        }
        minute().await;
        let mut invented = (1000..).map(certificate);
        for _ in 0..10 {
            for source in ["sns", "paypal", "plaid", "google"] {
                for request in invented.by_ref().take(FETCHES_PER_MINUTE) {
                    keys.fetch(source, &request).await.unwrap();
                }
            }
            minute().await;
        }
        assert!(
            real.iter()
                .all(|request| !lock(&keys.cache).entries.contains_key(request.url())),
            "the flood left a real key in the cache"
        );

        for request in invented.by_ref().take(FETCHES_PER_MINUTE) {
            keys.fetch("sns", &request).await.unwrap();
        }
        let before = fetches(&keys);
        for request in &real {
            let key = keys.fetch("sns", request).await;
            assert_eq!(key.unwrap(), PublicKey::Rsa(vec![1, 2, 3]), "within its hour");
        }
        assert_eq!(
            fetches(&keys),
            before,
            "a proven key fetched again within its hour"
        );

        tokio::time::advance(CACHE_FOR).await;
        for request in invented.by_ref().take(FETCHES_PER_MINUTE) {
            keys.fetch("sns", &request).await.unwrap();
        }
        let before = fetches(&keys);
        for request in &real {
            let key = keys.fetch("sns", request).await;
            assert_eq!(key.unwrap(), PublicKey::Rsa(vec![1, 2, 3]), "past its hour");
        }
        assert_eq!(fetches(&keys) - before, RESERVED_FETCHES_PER_MINUTE);
        assert_eq!(
            fetches_of(&keys, &real[RESERVED_FETCHES_PER_MINUTE]),
            1,
            "the fall-back"
        );
    }

    /// GIVEN an SNS source whose certificate, and a Plaid source whose key, verified a real delivery, and a forger
    /// who keeps each source's fetches spent with invented certificate URLs and key ids
    /// WHEN the keys' hour has passed and the provider now serves another key at each (renewed)
    /// THEN a real delivery gets the new key: a proven key is fetched again on the reserved share, not answered
    /// with the old one for want of a fetch.
    #[tokio::test(start_paused = true)]
    async fn a_proven_key_is_fetched_again_while_invented_keys_spend_the_budget() {
        let plaid = |kid: &str| KeyRequest::JwkByPost {
            url: "https://production.plaid.com/webhook_verification_key/get".to_owned(),
            kid: kid.to_owned(),
            body: crate::schemes::Key::new(b"{}".to_vec()),
        };
        let real_kid = "bfbd5111-8e33-4643-8ced-b2e642a72f3c";
        let renewed = Arc::new(AtomicBool::new(false));
        let (keys, open) = fake({
            let (renewed, sns) = (renewed.clone(), certificate(1).url().to_owned());
            move |request| {
                let key = vec![u8::from(renewed.load(SeqCst)) + 1];
                match request {
                    KeyRequest::Certificate { url, .. } if *url == sns => Ok(PublicKey::Rsa(key)),
                    KeyRequest::JwkByPost { kid, .. } if kid == real_kid => Ok(PublicKey::P256(key)),
                    _ => Err(KeyFetchError::Unavailable("404".into())),
                }
            }
        });
        open.send_replace(true);
        let invented = |source: &str, n: usize| match source {
            "sns" => certificate(1000 + n),
            _ => plaid(&format!("00000000-0000-4000-8000-{:012x}", 1000 + n)),
        };
        let real = [("sns", certificate(1)), ("plaid", plaid(real_kid))];
        for (source, request) in &real {
            keys.fetch(source, request).await.unwrap();
            keys.verified(source, request);
        }
        tokio::time::advance(CACHE_FOR + Duration::from_secs(1)).await;
        renewed.store(true, SeqCst);
        let renewed_keys = [PublicKey::Rsa(vec![2]), PublicKey::P256(vec![2])];
        for ((source, request), renewed_key) in real.iter().zip(renewed_keys) {
            for n in 0..FETCHES_PER_MINUTE {
                assert!(keys.fetch(source, &invented(source, n)).await.is_err());
            }
            assert!(
                matches!(
                    keys.fetch(source, &invented(source, 999)).await,
                    Err(KeyFetchError::Budget { .. })
                ),
                "{source}: the budget is spent"
            );
            let key = keys.fetch(source, request).await.unwrap();
            assert_eq!(key, renewed_key, "{source}");
            assert_eq!(fetches_of(&keys, request), 2, "{source}");
        }
    }

    /// A certificate's target in the cache, for tests of the cache alone.
    fn target(id: &str) -> Target {
        Target {
            id: id.to_owned(),
            kid: None,
        }
    }

    /// GIVEN a fetch of a key that does not answer yet
    /// WHEN twenty requests want that key at once
    /// THEN one fetch is made; every request waits for it (none is answered before it ends) and gets its key.
    #[tokio::test]
    async fn concurrent_requests_for_one_key_share_one_fetch() {
        let (keys, open) = fake(a_key);
        let waiting: Vec<_> = (0..20)
            .map(|_| {
                let keys = keys.clone();
                tokio::spawn(async move { keys.fetch("src", &certificate(1)).await })
            })
            .collect();
        // On this one-thread runtime each task runs up to its first wait per yield.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(fetches(&keys), 1, "one fetch for twenty requests");
        assert!(
            waiting.iter().all(|w| !w.is_finished()),
            "a request was answered before the fetch ended"
        );
        open.send_replace(true);
        for w in waiting {
            assert_eq!(w.await.unwrap().unwrap(), PublicKey::Rsa(vec![1, 2, 3]));
        }
        assert_eq!(fetches(&keys), 1);
        // Another key is another fetch.
        keys.fetch("src", &certificate(2)).await.unwrap();
        assert_eq!(fetches(&keys), 2);
    }

    /// GIVEN a key whose host fails
    /// WHEN requests for it keep coming
    /// THEN it is fetched once, and they get that failure (a 503) until FAILED_FOR has passed; then it is fetched
    /// again. A key is kept CACHE_FOR.
    #[tokio::test]
    async fn a_failed_fetch_is_remembered_for_a_while() {
        let (keys, open) = fake(|_| {
            Err(KeyFetchError::Unavailable(
                "the provider's key host answered 503".into(),
            ))
        });
        open.send_replace(true);
        for _ in 0..5 {
            assert!(matches!(
                keys.fetch("src", &certificate(1)).await,
                Err(KeyFetchError::Unavailable(_))
            ));
        }
        assert_eq!(fetches(&keys), 1, "a failure is not fetched again at once");

        let (t0, mut cache) = (Duration::from_secs(1_000_000), Cache::default());
        let failed = Err(KeyFetchError::Unavailable("down".into()));
        assert!(matches!(cache.lookup(&target("u"), "src", t0), Lookup::Fetch(_)));
        cache.settle("u", failed, t0);
        let just_before = t0 + FAILED_FOR - Duration::from_millis(1);
        assert!(matches!(
            cache.lookup(&target("u"), "src", just_before),
            Lookup::Cached(Err(_))
        ));
        assert!(matches!(
            cache.lookup(&target("u"), "src", t0 + FAILED_FOR),
            Lookup::Fetch(_)
        ));
        cache.settle("u", Ok(PublicKey::Rsa(vec![1])), t0 + FAILED_FOR);
        let later = t0 + FAILED_FOR + CACHE_FOR - Duration::from_millis(1);
        assert!(matches!(
            cache.lookup(&target("u"), "src", later),
            Lookup::Cached(Ok(_))
        ));
        assert!(matches!(
            cache.lookup(&target("u"), "src", later + Duration::from_millis(1)),
            Lookup::Fetch(_)
        ));
    }

    /// A fetch whose task died (a panic) leaves no entry that makes every later request wait for nothing.
    #[test]
    fn a_fetch_that_died_is_fetched_again() {
        let (now, mut cache) = (Duration::from_secs(1_000_000), Cache::default());
        let Lookup::Fetch(done) = cache.lookup(&target("u"), "src", now) else {
            panic!("not fetched")
        };
        assert!(matches!(
            cache.lookup(&target("u"), "src", now),
            Lookup::InFlight(_)
        ));
        drop(done);
        assert!(matches!(cache.lookup(&target("u"), "src", now), Lookup::Fetch(_)));
    }

    /// GIVEN a full cache of keys
    /// WHEN a new key comes in
    /// THEN the least recently used one goes, and only it (the cache is never emptied); and a failed fetch goes
    /// before any key, even one used longer ago.
    #[test]
    fn a_full_cache_evicts_the_least_recently_used_entry() {
        let (now, mut cache) = (Duration::from_secs(1_000_000), Cache::default());
        let key = |n: usize| format!("https://example/{n}");
        for n in 0..CACHE_ENTRIES {
            // A source each: the budget is not what this is about.
            assert!(matches!(
                cache.lookup(&target(&key(n)), &key(n), now),
                Lookup::Fetch(_)
            ));
            cache.settle(&key(n), Ok(PublicKey::Rsa(vec![1])), now);
        }
        // Key 0 is used again; key 1 is now the least recently used.
        assert!(matches!(
            cache.lookup(&target(&key(0)), "src", now),
            Lookup::Cached(Ok(_))
        ));
        assert!(matches!(
            cache.lookup(&target("new"), "new", now),
            Lookup::Fetch(_)
        ));
        assert_eq!(cache.entries.len(), CACHE_ENTRIES);
        assert!(
            !cache.entries.contains_key(&key(1)),
            "the least recently used key stayed"
        );
        assert!((0..CACHE_ENTRIES)
            .filter(|n| *n != 1)
            .all(|n| cache.entries.contains_key(&key(n))));

        cache.settle("new", Err(KeyFetchError::Unavailable("down".into())), now);
        assert!(matches!(
            cache.lookup(&target("newer"), "newer", now),
            Lookup::Fetch(_)
        ));
        assert!(!cache.entries.contains_key("new"), "a failure outlived a key");
        assert!(cache.entries.contains_key(&key(2)));
        assert_eq!(cache.entries.len(), CACHE_ENTRIES);
    }

    /// GIVEN a source whose requests name a new key each (as invented ones are)
    /// THEN FETCHES_PER_MINUTE of them are fetched and no more, the rest answered "budget spent" with the time until
    /// the oldest fetch is a minute old; keys cached meanwhile are answered as usual (an expired one too, rather
    /// than not at all), another source's budget is its own, and a minute later the source may fetch again.
    #[test]
    fn a_source_starts_at_most_its_budget_of_fetches_a_minute() {
        let (t0, mut cache) = (Duration::from_secs(1_000_000), Cache::default());
        let key = |n: usize| format!("https://example/{n}");
        assert!(matches!(
            cache.lookup(&target("real"), "paypal", t0),
            Lookup::Fetch(_)
        ));
        cache.settle("real", Ok(PublicKey::Rsa(vec![7])), t0);
        let mut fetched = 1;
        for n in 0..1000 {
            let at = t0 + Duration::from_millis(10 * n as u64);
            match cache.lookup(&target(&key(n)), "paypal", at) {
                Lookup::Fetch(_) => fetched += 1,
                Lookup::Cached(Err(KeyFetchError::Budget { retry_after })) => {
                    assert_eq!(
                        retry_after,
                        BUDGET_WINDOW - (at - t0),
                        "until the first fetch is a minute old"
                    );
                }
                _ => panic!("{n}: neither fetched nor refused for the budget"),
            }
        }
        assert_eq!(fetched, FETCHES_PER_MINUTE, "fetches started within a minute");
        let during = t0 + Duration::from_secs(20);
        assert!(matches!(
            cache.lookup(&target("real"), "paypal", during),
            Lookup::Cached(Ok(_))
        ));
        assert!(
            matches!(cache.lookup(&target(&key(5000)), "sns", during), Lookup::Fetch(_)),
            "one source spent another's"
        );
        // An hour on, the real key is past CACHE_FOR: kept in use while the budget is spent again.
        let hour = t0 + CACHE_FOR + Duration::from_secs(1);
        for n in 0..FETCHES_PER_MINUTE {
            assert!(matches!(
                cache.lookup(&target(&key(10_000 + n)), "paypal", hour),
                Lookup::Fetch(_)
            ));
        }
        assert!(matches!(
            cache.lookup(&target("real"), "paypal", hour),
            Lookup::Cached(Ok(_))
        ));
        assert!(matches!(
            cache.lookup(&target(&key(20_000)), "paypal", hour),
            Lookup::Cached(Err(KeyFetchError::Budget { .. }))
        ));
        // A minute after those fetches, one more may start.
        assert!(matches!(
            cache.lookup(&target(&key(20_000)), "paypal", hour + BUDGET_WINDOW),
            Lookup::Fetch(_)
        ));
    }

    /// The same through the port: a thousand requests naming invented keys make FETCHES_PER_MINUTE fetches; a
    /// request for a key cached before is answered with it.
    #[tokio::test]
    async fn a_thousand_invented_keys_make_the_budget_of_fetches() {
        let (keys, open) = fake(|request| match request {
            KeyRequest::Certificate { url, .. } if url.ends_with("1.pem") => a_key(request),
            _ => Err(KeyFetchError::Unavailable("404".into())),
        });
        open.send_replace(true);
        keys.fetch("paypal", &certificate(1)).await.unwrap();
        let mut budget = 0;
        for n in 2..1002 {
            if let Err(KeyFetchError::Budget { .. }) = keys.fetch("paypal", &certificate(n << 4)).await {
                budget += 1;
            }
        }
        assert_eq!(fetches(&keys), FETCHES_PER_MINUTE);
        assert_eq!(budget, 1000 - (FETCHES_PER_MINUTE - 1));
        assert!(
            keys.fetch("paypal", &certificate(1)).await.is_ok(),
            "the cached key"
        );
    }
}
