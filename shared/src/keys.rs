//! Keys a request points at (docs/DESIGN.md "Providers: who can send"): PayPal's and AWS SNS's signing
//! certificates, JWK sets. The port [`KeySource`] fetches them beside the request, bounded in time and cached; a
//! key the provider cannot be reached for is a 503 (the sender retries), never a 401. The scheme has already
//! checked that the URL is on one of the provider's own HTTPS hosts, so nothing is fetched from a host the request
//! chose freely. [`HttpsKeys`] is the one adapter: HTTPS only, no redirects, a certificate checked to a trusted
//! root (Mozilla's, plus any in `INBOX_TRUST_ROOTS`) before its key is used.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use crate::schemes::request::{jwks_key, spki_of_certificate};
use crate::schemes::{KeyRequest, PublicKey};

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
}

/// Fetches the keys requests point at, and confirms subscriptions (AWS SNS's `SubscribeURL`).
#[async_trait]
pub trait KeySource: Send + Sync + 'static {
    async fn fetch(&self, request: &KeyRequest) -> Result<PublicKey, KeyFetchError>;
    /// `GET`s a confirmation URL the scheme has checked to be the provider's.
    async fn confirm(&self, url: &str) -> Result<(), KeyFetchError>;
}

/// The HTTPS adapter as the environment configures it, for a runtime's start: a bad setting fails the start,
/// naming the variable.
pub fn from_env() -> Result<std::sync::Arc<dyn KeySource>, crate::config::ConfigError> {
    HttpsKeys::from_env()
        .map(|k| std::sync::Arc::new(k) as std::sync::Arc<dyn KeySource>)
        .map_err(|e| crate::config::ConfigError::new("environment", e.to_string()))
}

/// How long one fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a fetched key is used before it is fetched again.
const CACHE_FOR: Duration = Duration::from_secs(3600);
/// Keys cached at most (a provider rotates a few; a request cannot add hosts).
const CACHE_ENTRIES: usize = 256;
/// The largest certificate chain or key set read.
const MAX_KEY_BYTES: usize = 64 * 1024;

/// The HTTPS adapter of [`KeySource`].
pub struct HttpsKeys {
    client: reqwest::Client,
    anchors: Vec<CertificateDer<'static>>,
    /// `host -> address`: where to connect for a provider host (`INBOX_CONNECT_TO`, like curl's `--connect-to`),
    /// for tests that stand a local server in for the provider; the TLS name checked stays the provider's.
    connect_to: HashMap<String, SocketAddr>,
    cache: Mutex<HashMap<String, (PublicKey, Instant)>>,
}

impl HttpsKeys {
    /// From the environment: `INBOX_TRUST_ROOTS` (a PEM file of roots trusted beside Mozilla's) and
    /// `INBOX_CONNECT_TO` (`host=ip:port,...`). Both are for private deployments and tests; unset, the adapter
    /// trusts Mozilla's roots and connects to the provider's hosts as DNS has them.
    pub fn from_env() -> Result<Self, KeyFetchError> {
        let extra = match std::env::var_os("INBOX_TRUST_ROOTS") {
            None => Vec::new(),
            Some(path) => {
                let pem = std::fs::read(&path).map_err(|e| {
                    KeyFetchError::Unavailable(format!("INBOX_TRUST_ROOTS {}: {e}", path.to_string_lossy()))
                })?;
                CertificateDer::pem_slice_iter(&pem)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| {
                        KeyFetchError::Unavailable(format!("INBOX_TRUST_ROOTS: not PEM certificates: {e}"))
                    })?
            }
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
            cache: Mutex::new(HashMap::new()),
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
impl KeySource for HttpsKeys {
    async fn fetch(&self, request: &KeyRequest) -> Result<PublicKey, KeyFetchError> {
        let cache_key = match request {
            KeyRequest::Certificate { url, .. } => url.clone(),
            KeyRequest::Jwks { url, kid } | KeyRequest::JwkByPost { url, kid, .. } => format!("{url}#{kid}"),
        };
        if let Some((key, at)) = crate::sync::lock(&self.cache).get(&cache_key) {
            if at.elapsed() < CACHE_FOR {
                return Ok(key.clone());
            }
        }
        let body = match request {
            KeyRequest::JwkByPost { url, .. } => {
                self.post_json(url, request.post_body().unwrap_or_default())
                    .await?
            }
            _ => self.get(request.url()).await?,
        };
        let key = match request {
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
        };
        let mut cache = crate::sync::lock(&self.cache);
        if cache.len() >= CACHE_ENTRIES {
            cache.clear();
        }
        cache.insert(cache_key, (key.clone(), Instant::now()));
        Ok(key)
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
}
