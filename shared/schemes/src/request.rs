//! What a verifier sees of a delivery ([`Request`]), what it verifies with ([`Credentials`]), and what the receiver
//! answers without storing ([`Answer`]) or stores ([`Identified`]).

use std::borrow::Cow;
use std::fmt;

use http::{HeaderMap, HeaderName, Method, Uri};
use percent_encoding::percent_decode_str;

use crate::identity::Identity;
use crate::key::Key;

/// One delivery as received: the method, the path and query, the headers, the raw body bytes, and when it arrived
/// (UTC milliseconds on the receiver's clock; 0 where no clock matters).
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub method: &'a Method,
    pub uri: &'a Uri,
    pub headers: &'a HeaderMap,
    pub body: &'a [u8],
    pub received_ms: i64,
}

impl<'a> Request<'a> {
    /// A `POST` with no query: what most tests need.
    pub fn post(uri: &'a Uri, headers: &'a HeaderMap, body: &'a [u8]) -> Self {
        Request {
            method: &Method::POST,
            uri,
            headers,
            body,
            received_ms: 0,
        }
    }

    /// The first value of a query parameter, percent-decoded (`+` is a space, as in forms).
    pub fn query(&self, name: &str) -> Option<String> {
        pairs(self.uri.query().unwrap_or("")).find_map(|(k, v)| (k == name).then_some(v))
    }

    /// Whether the body is `application/x-www-form-urlencoded`.
    pub fn is_form(&self) -> bool {
        self.headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.trim_start()
                    .to_ascii_lowercase()
                    .starts_with("application/x-www-form-urlencoded")
            })
    }

    /// The first value of a form field of the body, percent-decoded; `None` if absent or the body is not UTF-8.
    pub fn form(&self, name: &str) -> Option<String> {
        form_pairs(self.body)?.find_map(|(k, v)| (k == name).then_some(v))
    }

    /// Every form field of the body, in order; `None` if the body is not UTF-8.
    pub fn form_fields(&self) -> Option<Vec<(String, String)>> {
        Some(form_pairs(self.body)?.collect())
    }

    /// The first value of a header as text: `None` if absent or not UTF-8.
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.headers
            .get(name)
            .and_then(|v| std::str::from_utf8(v.as_bytes()).ok())
    }
}

fn form_pairs(body: &[u8]) -> Option<impl Iterator<Item = (String, String)> + '_> {
    Some(pairs(std::str::from_utf8(body).ok()?))
}

/// `a=1&b=two+words` as decoded pairs (`application/x-www-form-urlencoded`).
pub(crate) fn pairs(text: &str) -> impl Iterator<Item = (String, String)> + '_ {
    text.split('&').filter(|p| !p.is_empty()).map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (decode_form(k).into_owned(), decode_form(v).into_owned())
    })
}

fn decode_form(text: &str) -> Cow<'_, str> {
    if !text.contains(['+', '%']) {
        return Cow::Borrowed(text);
    }
    let spaced = text.replace('+', " ");
    Cow::Owned(percent_decode_str(&spaced).decode_utf8_lossy().into_owned())
}

/// What a source verifies with, as its configuration gives it (docs/DESIGN.md "Providers: who can send").
#[derive(Clone, Default)]
pub struct Credentials {
    /// Shared secrets as keys (HMAC keys, tokens, `user:password`), several for rotation.
    pub secrets: Vec<Key>,
    /// A verification key as the provider prints it, parsed.
    pub public_key: Option<PublicKey>,
    /// The endpoint's public URL as registered with the provider, where the provider signs the URL.
    pub url: Option<String>,
    /// The token a `GET` handshake must carry (Meta's `hub.verify_token`).
    pub verify_token: Option<Key>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("secrets", &self.secrets.len())
            .field("public_key", &self.public_key.as_ref().map(PublicKey::kind))
            .field("url", &self.url)
            .field("verify_token", &self.verify_token.is_some())
            .finish()
    }
}

impl Credentials {
    /// Only shared secrets: what the HMAC and token schemes need.
    pub fn secrets(secrets: Vec<Key>) -> Self {
        Credentials {
            secrets,
            ..Credentials::default()
        }
    }
}

/// A public verification key, decoded. The bytes are what the verifier takes: the raw 32 bytes for Ed25519, an
/// X9.62 point or SubjectPublicKeyInfo DER for P-256, SubjectPublicKeyInfo or PKCS#1 DER for RSA; a JWK set's keys
/// by id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PublicKey {
    Ed25519(Vec<u8>),
    P256(Vec<u8>),
    Rsa(Vec<u8>),
    /// JSON Web Keys by `kid`, each as its JSON object's text.
    Jwks(Vec<(String, String)>),
}

impl PublicKey {
    pub fn kind(&self) -> &'static str {
        match self {
            PublicKey::Ed25519(_) => "ed25519",
            PublicKey::P256(_) => "p256",
            PublicKey::Rsa(_) => "rsa",
            PublicKey::Jwks(_) => "jwks",
        }
    }
}

/// A key the request points at, to be fetched by the receiver before `verify` (bounded in time, cached; a fetch
/// that fails is a 503, never a 401). The scheme has already checked that `url` is on one of the provider's own
/// HTTPS hosts: a request that names any other host is refused before anything is fetched.
#[derive(Clone, Debug)]
pub enum KeyRequest {
    /// A PEM certificate (chain) whose leaf holds the key; checked by the fetcher to a trusted root, and to be
    /// issued to one of `names` (a DNS name of its subjectAltName): the names the provider's own signing
    /// certificates carry. A certificate from a trusted root under any other name is not the provider's.
    Certificate { url: String, names: Vec<String> },
    /// A JWK set at the provider's own URL (the scheme's, never the request's); the key with this `kid` is the
    /// one. The receiver fetches the set whole and picks each request's `kid` in it, so a `kid` is no fetch of its
    /// own.
    Jwks { url: String, kid: String },
    /// One JWK, returned as `{"key": JWK}` for a `POST` of `body` (JSON naming the key id and the source's API
    /// credentials, never shown in `Debug`): Plaid's `/webhook_verification_key/get`.
    JwkByPost { url: String, kid: String, body: Key },
}

impl KeyRequest {
    /// What a `POST` for the key sends (it holds the source's API credentials: never log it).
    pub fn post_body(&self) -> Option<&[u8]> {
        match self {
            KeyRequest::JwkByPost { body, .. } => Some(body.expose()),
            _ => None,
        }
    }

    pub fn url(&self) -> &str {
        match self {
            KeyRequest::Certificate { url, .. }
            | KeyRequest::Jwks { url, .. }
            | KeyRequest::JwkByPost { url, .. } => url,
        }
    }
}

/// `url` if it is `https://` on one of `hosts`, with no user info and the default port; `None` if not. A `*` label
/// of a host matches one DNS label of letters, digits and hyphens, so `sns.*.amazonaws.com` admits
/// `sns.us-east-1.amazonaws.com` and nothing deeper (no bucket host such as `x.s3.amazonaws.com`).
pub fn provider_https_url(url: &str, hosts: &[&str]) -> Option<String> {
    let uri: Uri = url.parse().ok()?;
    if uri.scheme_str() != Some("https") {
        return None;
    }
    let authority = uri.authority()?;
    if authority.as_str().contains('@') || authority.port().is_some_and(|p| p.as_u16() != 443) {
        return None;
    }
    let host = authority.host().to_ascii_lowercase();
    let label = |l: &str| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let matches = |pattern: &&str| {
        let (want, got): (Vec<&str>, Vec<&str>) = (pattern.split('.').collect(), host.split('.').collect());
        want.len() == got.len()
            && want.iter().zip(&got).all(|(w, g)| {
                if *w == "*" {
                    label(g)
                } else {
                    w.eq_ignore_ascii_case(g)
                }
            })
    };
    hosts.iter().any(matches).then(|| url.to_owned())
}

/// An `https://` URL as a provider's key hosts serve them: its host in lower case, its path and its query. Only
/// what [`HttpsUrl::parse`] admits: no user info, the default port, no fragment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpsUrl {
    pub host: String,
    pub path: String,
    pub query: Option<String>,
}

impl HttpsUrl {
    pub fn parse(url: &str) -> Option<HttpsUrl> {
        if url.contains('#') {
            return None;
        }
        let uri: Uri = url.parse().ok()?;
        if uri.scheme_str() != Some("https") {
            return None;
        }
        let authority = uri.authority()?;
        if authority.as_str().contains('@') || authority.port().is_some_and(|p| p.as_u16() != 443) {
            return None;
        }
        Some(HttpsUrl {
            host: authority.host().to_ascii_lowercase(),
            path: uri.path().to_owned(),
            query: uri.query().map(str::to_owned),
        })
    }

    /// The URL as fetched: `https://host/path?query`, the host in lower case and no port, so that one resource
    /// has one spelling (and one cache entry).
    pub fn canonical(&self) -> String {
        match &self.query {
            Some(query) => format!("https://{}{}?{query}", self.host, self.path),
            None => format!("https://{}{}", self.host, self.path),
        }
    }
}

/// What the receiver answers instead of storing (a handshake), or instead of its usual JSON (a provider's required
/// answer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    /// A URL the receiver fetches (`GET`) once the answer is decided, to confirm a subscription (AWS SNS's
    /// `SubscribeURL`); already checked to be on the provider's own HTTPS hosts.
    pub confirm: Option<String>,
    /// Headers the provider requires on the answer (Asana's `X-Hook-Secret` echo).
    pub headers: Vec<(HeaderName, String)>,
}

impl Answer {
    pub fn json(value: &serde_json::Value) -> Self {
        Answer {
            status: 200,
            content_type: "application/json",
            body: value.to_string().into_bytes(),
            confirm: None,
            headers: Vec::new(),
        }
    }

    pub fn text(body: impl Into<Vec<u8>>) -> Self {
        Answer {
            status: 200,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
            confirm: None,
            headers: Vec::new(),
        }
    }

    /// The same answer with a header added.
    pub fn with_header(mut self, name: HeaderName, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub fn empty(status: u16) -> Self {
        Answer {
            status,
            content_type: "text/plain; charset=utf-8",
            body: Vec::new(),
            confirm: None,
            headers: Vec::new(),
        }
    }
}

/// What a verified delivery holds: one event, or several (a batched delivery), each with its own bytes to store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Identified {
    /// One event: the body as received is its payload.
    One(Identity),
    /// Several events in one request, each stored as its own event with its item's bytes as its payload.
    Batch(Vec<Item>),
}

/// One event of a batched delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub identity: Identity,
    /// The item's bytes as they appear in the delivery (a JSON value's text).
    pub payload: Vec<u8>,
}

/// What a signer returns: the headers to send, and where the signature lives in the body, the body to send.
#[derive(Clone, Debug, Default)]
pub struct Signed {
    pub headers: Vec<(HeaderName, String)>,
    pub body: Option<Vec<u8>>,
}

/// The kind of public key a scheme verifies with, when its family fixes one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Curve {
    Ed25519,
    P256,
}

/// Reads a `public_key` as providers print them: hex or base64 of the raw key (Ed25519), base64 DER or PEM
/// (SubjectPublicKeyInfo, PKCS#1 RSA, or a certificate, whose key is taken), or a JWK set (JSON).
/// `curve` is the key the scheme expects, if it names one; otherwise the length decides (32 bytes: Ed25519).
pub(crate) fn parse_public_key(
    curve: Option<Curve>,
    text: &str,
) -> Result<PublicKey, crate::errors::KeyError> {
    use base64::Engine as _;
    let bad = |why: &str| crate::errors::KeyError::PublicKey(why.to_owned());
    let text = text.trim();
    if text.starts_with('{') {
        return jwks(text).ok_or_else(|| bad("not a JWK or a JWK set"));
    }
    let der = if text.starts_with("-----BEGIN") {
        let block = pem::parse(text).map_err(|_| bad("not valid PEM"))?;
        if block.tag() == "CERTIFICATE" {
            spki_of_certificate(block.contents())
                .ok_or_else(|| bad("a certificate whose key cannot be read"))?
        } else {
            block.contents().to_vec()
        }
    } else if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        hex::decode(text).map_err(|_| bad("not hex"))?
    } else {
        crate::encoding::BASE64
            .decode(text)
            .map_err(|_| bad("not hex, base64 or PEM"))?
    };
    Ok(match curve {
        Some(Curve::Ed25519) => PublicKey::Ed25519(match der.len() {
            32 => der,
            44 => der[12..].to_vec(), // SubjectPublicKeyInfo: a 12-byte header, then the key
            _ => return Err(bad("an Ed25519 key is 32 bytes")),
        }),
        Some(Curve::P256) => PublicKey::P256(p256_point(&der).ok_or_else(|| bad("not a P-256 key"))?),
        _ if der.len() == 32 => PublicKey::Ed25519(der),
        _ => PublicKey::Rsa(der),
    })
}

/// The uncompressed point of a P-256 key given as SubjectPublicKeyInfo DER or as the point itself.
fn p256_point(der: &[u8]) -> Option<Vec<u8>> {
    match der.len() {
        65 if der[0] == 4 => Some(der.to_vec()),
        91 => Some(der[26..].to_vec()),
        _ => None,
    }
}

/// A JWK set (`{"keys": [...]}`) or a single JWK, by `kid`.
pub fn jwks(text: &str) -> Option<PublicKey> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let keys = match value.get("keys") {
        Some(serde_json::Value::Array(keys)) => keys.clone(),
        _ => vec![value],
    };
    let keys: Vec<(String, String)> = keys
        .into_iter()
        .filter(|k| k.get("kty").is_some())
        .map(|k| {
            (
                k.get("kid").and_then(|v| v.as_str()).unwrap_or("").to_owned(),
                k.to_string(),
            )
        })
        .collect();
    (!keys.is_empty()).then_some(PublicKey::Jwks(keys))
}

/// The SubjectPublicKeyInfo DER inside an X.509 certificate's DER: the third element of the TBS certificate
/// after version, serial, signature, issuer, validity and subject. A small DER walk; `None` if malformed.
pub fn spki_of_certificate(der: &[u8]) -> Option<Vec<u8>> {
    /// One DER element: its tag, the whole element, its contents, and what follows it.
    type Element<'a> = (u8, &'a [u8], &'a [u8], &'a [u8]);
    fn element(input: &[u8]) -> Option<Element<'_>> {
        let tag = *input.first()?;
        let first = *input.get(1)? as usize;
        let (len, header) = if first < 0x80 {
            (first, 2)
        } else {
            let n = first & 0x7f;
            if n == 0 || n > 4 {
                return None;
            }
            let mut len = 0usize;
            for i in 0..n {
                len = (len << 8) | *input.get(2 + i)? as usize;
            }
            (len, 2 + n)
        };
        let end = header.checked_add(len)?;
        let whole = input.get(..end)?;
        Some((tag, whole, &whole[header..], &input[end..]))
    }
    let (_, _, cert, _) = element(der)?;
    let (_, _, mut tbs, _) = element(cert)?;
    if tbs.first() == Some(&0xa0) {
        tbs = element(tbs)?.3; // explicit version
    }
    // serial, signature algorithm, issuer, validity, subject
    for _ in 0..5 {
        tbs = element(tbs)?.3;
    }
    let (tag, spki, _, _) = element(tbs)?;
    (tag == 0x30).then(|| spki.to_vec())
}

/// The key with `kid` from a JWK set's text.
pub fn jwks_key(text: &str, kid: &str) -> Option<PublicKey> {
    match jwks(text)? {
        PublicKey::Jwks(keys) => {
            let found: Vec<_> = keys.into_iter().filter(|(k, _)| k == kid).collect();
            (!found.is_empty()).then_some(PublicKey::Jwks(found))
        }
        other => Some(other),
    }
}
