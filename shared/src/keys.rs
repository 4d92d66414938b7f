//! Keys a request points at (docs/DESIGN.md "Providers: who can send"): PayPal's and AWS SNS's signing
//! certificates, JWK sets. The port [`KeySource`] fetches them beside the request, bounded in time and cached; a
//! key the provider cannot be reached for is a 503 (the sender retries), never a 401. The scheme has already
//! checked that the URL is one the provider serves its keys at (its host, its path, a key id of its shape), so
//! nothing is fetched from a place the request chose freely.
//!
//! Anyone can post a request naming a key, signed or not, so a fetch is work a stranger can ask for: [`CachedKeys`]
//! makes one fetch per key at a time (requests for a key being fetched wait for that fetch and share its outcome),
//! remembers a failed fetch for [`FAILED_FOR`] as it remembers a key for [`CACHE_FOR`], and holds at most
//! [`CACHE_ENTRIES`] keys, evicting the least recently used. [`HttpsKeys`] is the one way out: HTTPS only, no
//! redirects, a certificate checked to a trusted root (Mozilla's, plus any in `INBOX_TRUST_ROOTS`) and to the
//! provider's names before its key is used.

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
use crate::schemes::request::{jwks_key, spki_of_certificate};
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
    /// The key is not cached and the source has started [`FETCHES_PER_MINUTE`] fetches within the last minute:
    /// nothing more is fetched for it until `retry_after` has passed. A 503 (the sender retries; SNS and PayPal
    /// do), never a 401: the request may well be the provider's.
    #[error("the source's key fetches for this minute are spent; the next in {retry_after:?}")]
    Budget { retry_after: Duration },
}

/// Fetches the keys requests point at, and confirms subscriptions (AWS SNS's `SubscribeURL`).
#[async_trait]
pub trait KeySource: Send + Sync + 'static {
    /// The key `request` points at, for a request to `source`: whatever a source's requests make this fetch is
    /// bounded per source ([`FETCHES_PER_MINUTE`]), so a flood at one source cannot spend another's.
    async fn fetch(&self, source: &str, request: &KeyRequest) -> Result<PublicKey, KeyFetchError>;
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
/// Fetches a source may start within [`BUDGET_WINDOW`]. Each key a request names that is not cached is a fetch, and
/// anyone can post requests naming keys: past this, requests whose key is not cached are answered 503 with
/// `Retry-After` until a fetch of the window is a minute old, while requests whose key is cached go on as usual.
/// A provider rotates its keys rarely: a real source needs a fetch now and then, never ten a minute.
pub const FETCHES_PER_MINUTE: usize = 10;
/// The window [`FETCHES_PER_MINUTE`] is counted over.
pub const BUDGET_WINDOW: Duration = Duration::from_secs(60);
/// Keys (and failed fetches) cached at most: a provider rotates a few. Past it the least recently used goes, a
/// failed fetch before a key, so that requests for keys nobody else asks for cannot push the real keys out.
pub const CACHE_ENTRIES: usize = 256;
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

/// One key, one cache entry: a certificate by its URL (the scheme's spelling of it), a JWK by its set and `kid`.
fn cache_key(request: &KeyRequest) -> String {
    match request {
        KeyRequest::Certificate { url, .. } => url.clone(),
        KeyRequest::Jwks { url, kid } | KeyRequest::JwkByPost { url, kid, .. } => format!("{url}#{kid}"),
    }
}

#[async_trait]
impl<F: Fetcher> KeySource for CachedKeys<F> {
    async fn fetch(&self, source: &str, request: &KeyRequest) -> Result<PublicKey, KeyFetchError> {
        let key = cache_key(request);
        let waiting = match lock(&self.cache).lookup(&key, source, reading(self.clock.as_ref())) {
            Lookup::Cached(outcome) => return outcome,
            Lookup::InFlight(waiting) => waiting,
            Lookup::Fetch(done) => {
                let waiting = done.subscribe();
                let (fetcher, cache, request) = (self.fetcher.clone(), self.cache.clone(), request.clone());
                let clock = self.clock.clone();
                let source = source.to_owned();
                tokio::spawn(async move {
                    let outcome = fetcher.fetch(&request).await;
                    // Once per fetch (at most FETCHES_PER_MINUTE a minute for a source), not per request.
                    if let Err(e) = &outcome {
                        tracing::info!(source, error = %e, "a key could not be fetched; remembered for 30 s");
                    }
                    // Cached before it is announced: a request arriving in between finds it, not a fetch gone.
                    lock(&cache).settle(&key, outcome.clone(), reading(clock.as_ref()));
                    done.send_replace(Some(outcome));
                });
                waiting
            }
        };
        shared(waiting).await
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
    /// A key, or a failure, fresh enough to answer with.
    Cached(Outcome),
    /// A fetch of it is under way: wait for its outcome.
    InFlight(watch::Receiver<Option<Outcome>>),
    /// Nothing usable: the caller fetches it, and announces the outcome on this (after [`Cache::settle`]).
    Fetch(watch::Sender<Option<Outcome>>),
}

/// The keys, the failures and the fetches in flight, by [`cache_key`], and each source's fetches of the last
/// minute: no I/O, and the time is handed in (a reading of the clock, as the time since the epoch).
#[derive(Default)]
struct Cache {
    entries: HashMap<String, Entry>,
    /// Counts lookups: an entry's `used` is the count at its last one, so the smallest is the least recently used.
    tick: u64,
    /// When each source's fetches of the last [`BUDGET_WINDOW`] started, oldest first (sources are the
    /// configuration's, so this holds a few entries whatever requests arrive).
    started: HashMap<String, VecDeque<Duration>>,
}

struct Entry {
    state: State,
    used: u64,
}

enum State {
    Ready { outcome: Outcome, until: Duration },
    Pending(watch::Receiver<Option<Outcome>>),
}

impl Cache {
    fn lookup(&mut self, key: &str, source: &str, now: Duration) -> Lookup {
        self.tick += 1;
        let mut stale = None;
        if let Some(entry) = self.entries.get_mut(key) {
            entry.used = self.tick;
            match &entry.state {
                State::Ready { outcome, until } if now < *until => return Lookup::Cached(outcome.clone()),
                State::Ready { outcome: Ok(key), .. } => stale = Some(key.clone()),
                // A fetch whose task is gone (it panicked) is fetched again.
                State::Pending(waiting) if waiting.has_changed().is_ok() => {
                    return Lookup::InFlight(waiting.clone())
                }
                _ => {}
            }
        }
        if let Err(retry_after) = self.spend(source, now) {
            // A key past its hour is still the provider's key: better than a 503 while the budget is spent.
            return Lookup::Cached(stale.ok_or(KeyFetchError::Budget { retry_after }));
        }
        let (done, waiting) = watch::channel(None);
        self.put(key, State::Pending(waiting), now);
        Lookup::Fetch(done)
    }

    /// Counts a fetch `source` starts now, if it has started fewer than [`FETCHES_PER_MINUTE`] within the last
    /// [`BUDGET_WINDOW`]; else how long until the oldest of them leaves the window.
    fn spend(&mut self, source: &str, now: Duration) -> Result<(), Duration> {
        let started = self.started.entry(source.to_owned()).or_default();
        while started
            .front()
            .is_some_and(|at| now.saturating_sub(*at) >= BUDGET_WINDOW)
        {
            started.pop_front();
        }
        if started.len() < FETCHES_PER_MINUTE {
            started.push_back(now);
            return Ok(());
        }
        let oldest = started.front().copied().unwrap_or(now);
        Err((oldest + BUDGET_WINDOW).saturating_sub(now))
    }

    /// Keeps a fetch's outcome: a key for [`CACHE_FOR`], a failure for [`FAILED_FOR`].
    fn settle(&mut self, key: &str, outcome: Outcome, now: Duration) {
        let until = now + if outcome.is_ok() { CACHE_FOR } else { FAILED_FOR };
        self.put(key, State::Ready { outcome, until }, now);
    }

    fn put(&mut self, key: &str, state: State, now: Duration) {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.state = state;
            return;
        }
        if self.entries.len() >= CACHE_ENTRIES {
            self.evict(now);
        }
        self.entries.insert(
            key.to_owned(),
            Entry {
                state,
                used: self.tick,
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
            .map(|(key, _)| key.clone());
        if let Some(victim) = victim {
            self.entries.remove(&victim);
        }
    }
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
            KeyRequest::Jwks { kid, .. } => {
                let text = std::str::from_utf8(&body)
                    .map_err(|_| KeyFetchError::Unavailable("the key set is not UTF-8".into()))?;
                jwks_key(text, kid)
                    .ok_or_else(|| KeyFetchError::Unavailable(format!("the key set holds no key {kid:?}")))?
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

    /// A stand-in for the network: counts its fetches, answers each with `answer` once `open` is true.
    struct Fake {
        fetches: std::sync::atomic::AtomicUsize,
        open: watch::Receiver<bool>,
        answer: fn(&KeyRequest) -> Outcome,
    }

    #[async_trait]
    impl Fetcher for Fake {
        async fn fetch(&self, request: &KeyRequest) -> Outcome {
            self.fetches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = self.open.clone().wait_for(|open| *open).await;
            (self.answer)(request)
        }
        async fn confirm(&self, _url: &str) -> Result<(), KeyFetchError> {
            Ok(())
        }
    }

    fn fake(answer: fn(&KeyRequest) -> Outcome) -> (Arc<CachedKeys<Fake>>, watch::Sender<bool>) {
        let (open, opened) = watch::channel(false);
        let fetcher = Fake {
            fetches: 0.into(),
            open: opened,
            answer,
        };
        (
            Arc::new(CachedKeys::new(fetcher, Arc::new(crate::clock::SystemClock))),
            open,
        )
    }

    fn fetches(keys: &CachedKeys<Fake>) -> usize {
        keys.fetcher.fetches.load(std::sync::atomic::Ordering::SeqCst)
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
        assert!(matches!(cache.lookup("u", "src", t0), Lookup::Fetch(_)));
        cache.settle("u", failed, t0);
        let just_before = t0 + FAILED_FOR - Duration::from_millis(1);
        assert!(matches!(
            cache.lookup("u", "src", just_before),
            Lookup::Cached(Err(_))
        ));
        assert!(matches!(
            cache.lookup("u", "src", t0 + FAILED_FOR),
            Lookup::Fetch(_)
        ));
        cache.settle("u", Ok(PublicKey::Rsa(vec![1])), t0 + FAILED_FOR);
        let later = t0 + FAILED_FOR + CACHE_FOR - Duration::from_millis(1);
        assert!(matches!(cache.lookup("u", "src", later), Lookup::Cached(Ok(_))));
        assert!(matches!(
            cache.lookup("u", "src", later + Duration::from_millis(1)),
            Lookup::Fetch(_)
        ));
    }

    /// A fetch whose task died (a panic) leaves no entry that makes every later request wait for nothing.
    #[test]
    fn a_fetch_that_died_is_fetched_again() {
        let (now, mut cache) = (Duration::from_secs(1_000_000), Cache::default());
        let Lookup::Fetch(done) = cache.lookup("u", "src", now) else {
            panic!("not fetched")
        };
        assert!(matches!(cache.lookup("u", "src", now), Lookup::InFlight(_)));
        drop(done);
        assert!(matches!(cache.lookup("u", "src", now), Lookup::Fetch(_)));
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
            assert!(matches!(cache.lookup(&key(n), &key(n), now), Lookup::Fetch(_)));
            cache.settle(&key(n), Ok(PublicKey::Rsa(vec![1])), now);
        }
        // Key 0 is used again; key 1 is now the least recently used.
        assert!(matches!(cache.lookup(&key(0), "src", now), Lookup::Cached(Ok(_))));
        assert!(matches!(cache.lookup("new", "new", now), Lookup::Fetch(_)));
        assert_eq!(cache.entries.len(), CACHE_ENTRIES);
        assert!(
            !cache.entries.contains_key(&key(1)),
            "the least recently used key stayed"
        );
        assert!((0..CACHE_ENTRIES)
            .filter(|n| *n != 1)
            .all(|n| cache.entries.contains_key(&key(n))));

        cache.settle("new", Err(KeyFetchError::Unavailable("down".into())), now);
        assert!(matches!(cache.lookup("newer", "newer", now), Lookup::Fetch(_)));
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
        assert!(matches!(cache.lookup("real", "paypal", t0), Lookup::Fetch(_)));
        cache.settle("real", Ok(PublicKey::Rsa(vec![7])), t0);
        let mut fetched = 1;
        for n in 0..1000 {
            let at = t0 + Duration::from_millis(10 * n as u64);
            match cache.lookup(&key(n), "paypal", at) {
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
            cache.lookup("real", "paypal", during),
            Lookup::Cached(Ok(_))
        ));
        assert!(
            matches!(cache.lookup(&key(5000), "sns", during), Lookup::Fetch(_)),
            "one source spent another's"
        );
        // An hour on, the real key is past CACHE_FOR: kept in use while the budget is spent again.
        let hour = t0 + CACHE_FOR + Duration::from_secs(1);
        for n in 0..FETCHES_PER_MINUTE {
            assert!(matches!(
                cache.lookup(&key(10_000 + n), "paypal", hour),
                Lookup::Fetch(_)
            ));
        }
        assert!(matches!(
            cache.lookup("real", "paypal", hour),
            Lookup::Cached(Ok(_))
        ));
        assert!(matches!(
            cache.lookup(&key(20_000), "paypal", hour),
            Lookup::Cached(Err(KeyFetchError::Budget { .. }))
        ));
        // A minute after those fetches, one more may start.
        assert!(matches!(
            cache.lookup(&key(20_000), "paypal", hour + BUDGET_WINDOW),
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
