//! The signature families (docs/DESIGN.md "Providers: who can send"): the general `hmac`, `token`, `ed25519`,
//! `ecdsa`, `rsa` and `jwt`, and `custom` for what a provider signs its own way (fields inside the body). Every
//! provider preset is one of these with its parameters filled in.
//!
//! The parts they share: where a signature is and how it is written ([`Signature`]), what was signed
//! ([`Template`]), and where the signed timestamp is ([`Timestamp`]).

pub mod asymmetric;
pub mod hmac;
pub mod jwt;
pub mod token;

use std::borrow::Cow;
use std::str::FromStr;

use http::HeaderName;

use super::request::{Credentials, KeyRequest, PublicKey, Request, Signed};
use crate::clock::Clock;
use crate::encoding::{decode, Encoding};
use crate::errors::{ParseError, VerifyError};
use crate::headers::malformed;
use crate::identity::Identity;

pub use self::asymmetric::{Asymmetric, Rsa, RsaAlgorithm, RsaKey};
pub use self::hmac::{Hmac, SecretEncoding};
pub use self::jwt::Jwt;
pub use self::token::{Token, TokenAt};

/// How a request is verified.
#[derive(Clone, Debug)]
pub enum Family {
    Hmac(Hmac),
    Token(Token),
    Ed25519(Asymmetric),
    /// ECDSA over P-256 with SHA-256; the signature is ASN.1 DER (SendGrid) or the fixed 64 bytes `r || s`.
    Ecdsa(Asymmetric),
    Rsa(Rsa),
    Jwt(Jwt),
    Custom(Custom),
}

/// Signs a request like a provider: the signer, the source's credentials (its `url`), the request, the identity
/// to carry, the unix time.
pub type SignFn = fn(&Signer, &Credentials, &Request, &Identity, i64) -> Signed;

/// A provider that signs its own way (signatures inside the body, per item): its functions, pure like the rest.
#[derive(Clone, Copy)]
pub struct Custom {
    pub verify: fn(&Credentials, &Request, Clock) -> Result<(), VerifyError>,
    /// Whether the signature covers a timestamp `verify` checks against the tolerance.
    pub has_timestamp: bool,
    /// Signs like the provider does, for `inbox send` and the tests: the headers, and the body where the
    /// signature lives in it.
    pub sign: Option<SignFn>,
}

impl std::fmt::Debug for Custom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Custom")
    }
}

/// What signs a delivery like the provider would: a shared secret's key, or a private key (PKCS#8 DER) for the
/// asymmetric families.
#[derive(Clone, Debug)]
pub enum Signer {
    Secret(crate::key::Key),
    /// A PKCS#8 private key (Ed25519, P-256 or RSA), and for certificate-based RSA the URL the request names.
    Private {
        pkcs8: crate::key::Key,
        key_url: Option<String>,
    },
}

impl Family {
    pub fn name(&self) -> &'static str {
        match self {
            Family::Hmac(_) => "hmac",
            Family::Token(_) => "token",
            Family::Ed25519(_) => "ed25519",
            Family::Ecdsa(_) => "ecdsa",
            Family::Rsa(_) => "rsa",
            Family::Jwt(_) => "jwt",
            Family::Custom(_) => "custom",
        }
    }

    /// Whether the signature covers a timestamp that `verify` checks against its tolerance.
    pub fn has_timestamp(&self) -> bool {
        match self {
            Family::Hmac(h) => h.timestamp.is_some(),
            Family::Token(_) => false,
            Family::Ed25519(a) | Family::Ecdsa(a) => a.timestamp.is_some(),
            Family::Rsa(r) => r.spec.timestamp.is_some(),
            Family::Jwt(j) => j.max_age_secs.is_some(),
            Family::Custom(c) => c.has_timestamp,
        }
    }

    /// A key the request points at, to fetch before `verify`; `Err` if it points anywhere but the provider.
    pub fn key_request(&self, req: &Request, creds: &Credentials) -> Result<Option<KeyRequest>, VerifyError> {
        match self {
            Family::Rsa(r) => r.key_request(req),
            Family::Jwt(j) => j.key_request(req, creds),
            _ => Ok(None),
        }
    }

    pub fn verify(
        &self,
        creds: &Credentials,
        req: &Request,
        clock: Clock,
        fetched: Option<&PublicKey>,
    ) -> Result<(), VerifyError> {
        match self {
            Family::Hmac(h) => h.verify(&creds.secrets, req, creds, clock),
            Family::Token(t) => t.verify(&creds.secrets, req),
            Family::Ed25519(a) => a.verify_ed25519(creds, req, clock),
            Family::Ecdsa(a) => a.verify_p256(creds, req, clock),
            Family::Rsa(r) => r.verify(creds, req, clock, fetched),
            Family::Jwt(j) => j.verify(creds, req, clock, fetched),
            Family::Custom(c) => (c.verify)(creds, req, clock),
        }
    }

    /// Signs `req` like the provider does. `None` where this family cannot sign with what `signer` holds.
    pub fn sign(
        &self,
        signer: &Signer,
        req: &Request,
        creds: &Credentials,
        identity: &Identity,
        now_unix: i64,
    ) -> Option<Signed> {
        match (self, signer) {
            (Family::Hmac(h), Signer::Secret(key)) => Some(h.sign(key, req, creds, now_unix)),
            (Family::Token(t), Signer::Secret(key)) => Some(t.sign(key)),
            (Family::Ed25519(a), Signer::Private { pkcs8, .. }) => {
                a.sign_ed25519(pkcs8, req, creds, now_unix)
            }
            (Family::Ecdsa(a), Signer::Private { pkcs8, .. }) => a.sign_p256(pkcs8, req, creds, now_unix),
            (Family::Rsa(r), Signer::Private { pkcs8, key_url }) => {
                r.sign(pkcs8, key_url.as_deref(), req, creds, now_unix)
            }
            (Family::Jwt(j), signer) => j.sign(signer, req, now_unix),
            (Family::Custom(c), signer) => c.sign.map(|sign| sign(signer, creds, req, identity, now_unix)),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Where the signature is, and how it is written.

/// Where a value (a signature, a timestamp) is found in a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum At {
    Header(HeaderName),
    Query(String),
    /// An RFC 6901 pointer into a JSON body.
    Json(String),
    /// A field of a form-encoded body.
    Form(String),
}

impl At {
    /// Every value found there: each header value; one value elsewhere.
    pub fn values(&self, req: &Request) -> Result<Vec<String>, VerifyError> {
        let found = match self {
            At::Header(name) => {
                return crate::headers::header_values(req.headers, name)
                    .map(|v| v.into_iter().map(str::to_owned).collect())
            }
            At::Query(name) => req.query(name),
            At::Form(name) => req.form(name),
            At::Json(pointer) => super::json::at_pointers(req.body, &[pointer.as_str()])
                .ok()
                .and_then(|mut found| match found.pop().flatten() {
                    Some(super::json::Leaf::String(s) | super::json::Leaf::Number(s)) => Some(s),
                    _ => None,
                }),
        };
        found
            .map(|v| vec![v])
            .ok_or_else(|| VerifyError::MissingHeader(self.to_string()))
    }

    pub fn first(&self, req: &Request) -> Result<String, VerifyError> {
        let mut values = self.values(req)?;
        Ok(values.swap_remove(0))
    }
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            At::Header(name) => write!(f, "{name}"),
            At::Query(name) => write!(f, "query {name}"),
            At::Json(pointer) => write!(f, "json {pointer}"),
            At::Form(name) => write!(f, "form {name}"),
        }
    }
}

impl FromStr for At {
    type Err = ParseError;
    /// `header:NAME` (or a bare header name), `query:NAME`, `json:/pointer`, `form:NAME`.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let (kind, rest) = s.split_once(':').unwrap_or(("header", s));
        match kind {
            "header" => HeaderName::from_bytes(rest.as_bytes())
                .map(At::Header)
                .map_err(|_| ParseError(format!("{rest:?} is not a valid header name"))),
            "query" if !rest.is_empty() => Ok(At::Query(rest.to_owned())),
            "form" if !rest.is_empty() => Ok(At::Form(rest.to_owned())),
            "json" if rest.starts_with('/') => Ok(At::Json(rest.to_owned())),
            _ => Err(ParseError(format!(
                "{s:?} is not a place (expected \"header:NAME\", \"query:NAME\", \"form:NAME\" or \"json:/POINTER\")"
            ))),
        }
    }
}

/// How the signature value is written where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Format {
    /// The value (after the prefix) is one signature; several header values are several candidates.
    Plain,
    /// A list of signatures separated by `separator` (e.g. Standard Webhooks' `v1,sig1 v1,sig2`); each item may
    /// carry the prefix.
    List { separator: char },
    /// Key-value pairs, e.g. `t=123,v1=abc,v1=def` (`pair: ','`, `kv: '='`) or `ts=123;h1=abc`. Every value under
    /// one of `signature` is a candidate; `timestamp` names the pair that carries the signed timestamp.
    Pairs {
        pair: char,
        kv: char,
        timestamp: Option<String>,
        signature: Vec<String>,
    },
}

impl FromStr for Format {
    type Err = ParseError;
    /// `plain`, `list:SEP` (`list: ` for a space), or a pairs pattern such as `t={timestamp},v1={signature}` or
    /// `ts={timestamp};h1={signature}`.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        if s == "plain" {
            return Ok(Format::Plain);
        }
        if let Some(sep) = s.strip_prefix("list:") {
            let mut chars = sep.chars();
            return match (chars.next(), chars.next()) {
                (Some(separator), None) => Ok(Format::List { separator }),
                _ => Err(ParseError(format!("{s:?}: a list takes one separator character"))),
            };
        }
        let pair = [',', ';', ' ', '&']
            .into_iter()
            .find(|c| s.contains(*c))
            .ok_or_else(|| ParseError(format!("{s:?} is not a signature format (expected \"plain\", \"list:,\" or a pattern like \"t={{timestamp}},v1={{signature}}\")")))?;
        let mut timestamp = None;
        let mut signature = Vec::new();
        let mut kv = '=';
        for part in s.split(pair).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once(['=', ':'])
                .ok_or_else(|| ParseError(format!("{part:?} in {s:?} is not KEY={{...}}")))?;
            kv = part.as_bytes()[key.len()] as char;
            match value {
                "{timestamp}" => timestamp = Some(key.to_owned()),
                "{signature}" => signature.push(key.to_owned()),
                _ => {
                    return Err(ParseError(format!(
                        "{part:?} in {s:?}: the value must be {{timestamp}} or {{signature}}"
                    )))
                }
            }
        }
        if signature.is_empty() {
            return Err(ParseError(format!("{s:?} names no {{signature}}")));
        }
        Ok(Format::Pairs {
            pair,
            kv,
            timestamp,
            signature,
        })
    }
}

/// A signature and how to read it: where, in which format, behind which prefix, in which encoding.
#[derive(Clone, Debug)]
pub struct Signature {
    pub at: At,
    pub format: Format,
    /// Text before each signature (`sha256=`), stripped if present; a signature without it is still a candidate
    /// only if the prefix is empty.
    pub prefix: String,
    pub encoding: Encoding,
}

impl Signature {
    /// A plain header: `prefix` + encoded signature.
    pub fn header(name: &'static str, prefix: &str, encoding: Encoding) -> Self {
        Signature {
            at: At::Header(HeaderName::from_static(name)),
            format: Format::Plain,
            prefix: prefix.to_owned(),
            encoding,
        }
    }

    /// A header of key-value pairs, e.g. `pairs("paddle-signature", ';', Some("ts"), &["h1"], Encoding::Hex)`.
    pub fn pairs(
        name: &'static str,
        pair: char,
        timestamp: Option<&str>,
        signature: &[&str],
        encoding: Encoding,
    ) -> Self {
        Signature {
            at: At::Header(HeaderName::from_static(name)),
            format: Format::Pairs {
                pair,
                kv: '=',
                timestamp: timestamp.map(str::to_owned),
                signature: signature.iter().map(|s| (*s).to_owned()).collect(),
            },
            prefix: String::new(),
            encoding,
        }
    }

    /// A header holding a list of signatures separated by `separator`, each behind `prefix`.
    pub fn list(name: &'static str, separator: char, prefix: &str, encoding: Encoding) -> Self {
        Signature {
            at: At::Header(HeaderName::from_static(name)),
            format: Format::List { separator },
            prefix: prefix.to_owned(),
            encoding,
        }
    }

    /// The signatures the request carries, decoded (undecodable ones left out), and the timestamp the format
    /// carries beside them, if it does.
    pub fn read(&self, req: &Request) -> Result<(Vec<Vec<u8>>, Option<String>), VerifyError> {
        let values = self.at.values(req)?;
        let mut texts: Vec<String> = Vec::new();
        let mut timestamp = None;
        for value in &values {
            match &self.format {
                Format::Plain => texts.push(value.clone()),
                Format::List { separator } => texts.extend(
                    value
                        .split(*separator)
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned),
                ),
                Format::Pairs {
                    pair,
                    kv,
                    timestamp: ts_key,
                    signature,
                } => {
                    for part in value.split(*pair) {
                        let Some((key, v)) = part.trim().split_once(*kv) else {
                            continue;
                        };
                        if ts_key.as_deref() == Some(key) && timestamp.is_none() {
                            timestamp = Some(v.to_owned());
                        } else if signature.iter().any(|s| s == key) {
                            texts.push(v.to_owned());
                        }
                    }
                }
            }
        }
        let candidates = texts
            .iter()
            .filter_map(|t| {
                let t = t.trim();
                let t = if self.prefix.is_empty() {
                    t
                } else {
                    t.strip_prefix(self.prefix.as_str())?
                };
                decode(self.encoding, t)
            })
            .collect();
        Ok((candidates, timestamp))
    }

    /// The value to send for one signature (the inverse of `read`), given the timestamp where the format has one.
    pub fn write(&self, tag: &[u8], timestamp: Option<&str>) -> String {
        let encoded = format!("{}{}", self.prefix, crate::encoding::encode(self.encoding, tag));
        match &self.format {
            Format::Plain | Format::List { .. } => encoded,
            Format::Pairs {
                pair,
                kv,
                timestamp: ts_key,
                signature,
            } => {
                let mut parts = Vec::new();
                if let (Some(key), Some(ts)) = (ts_key, timestamp) {
                    parts.push(format!("{key}{kv}{ts}"));
                }
                parts.push(format!("{}{kv}{encoded}", signature[0]));
                parts.join(&pair.to_string())
            }
        }
    }

    /// The header it is sent in, where it is a header.
    pub fn header_name(&self) -> Option<&HeaderName> {
        match &self.at {
            At::Header(name) => Some(name),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// The signed timestamp.

/// In which unit a timestamp is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Seconds,
    Millis,
}

/// Where the signed timestamp is, and its unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timestamp {
    /// `None`: in the signature's own pairs (`t=...`).
    pub at: Option<At>,
    pub unit: Unit,
}

impl Timestamp {
    pub fn header(name: &'static str) -> Self {
        Timestamp {
            at: Some(At::Header(HeaderName::from_static(name))),
            unit: Unit::Seconds,
        }
    }

    /// The same place, written in milliseconds.
    pub fn millis(self) -> Self {
        Timestamp {
            unit: Unit::Millis,
            ..self
        }
    }

    /// In the signature header's pairs.
    pub fn in_signature() -> Self {
        Timestamp {
            at: None,
            unit: Unit::Seconds,
        }
    }

    /// Finds the timestamp's text (`beside`: what the signature's pairs carried) and checks it against `clock`.
    pub fn check(&self, req: &Request, beside: Option<String>, clock: Clock) -> Result<String, VerifyError> {
        let (text, place) = match &self.at {
            Some(at) => (at.first(req)?, at.to_string()),
            None => (
                beside.ok_or_else(|| VerifyError::MalformedHeader("signature (no timestamp)".to_owned()))?,
                "signature timestamp".to_owned(),
            ),
        };
        let digits = text.trim();
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(VerifyError::MalformedHeader(format!("{place} (not a unix time)")));
        }
        let seconds = match self.unit {
            Unit::Seconds => digits.parse::<i64>().unwrap_or(i64::MAX),
            Unit::Millis => digits.parse::<i64>().unwrap_or(i64::MAX) / 1000,
        };
        clock.check_unix(seconds)?;
        Ok(text)
    }

    /// The header a signer sends the timestamp in, with `now_unix` written in its unit; `None` where the timestamp
    /// lives elsewhere (in the signature's own pairs, the body).
    pub fn header_to_send(&self, now_unix: i64) -> Option<(HeaderName, String)> {
        match &self.at {
            Some(At::Header(name)) => Some((name.clone(), self.render(now_unix))),
            _ => None,
        }
    }

    /// `now_unix` written in this timestamp's unit.
    pub fn render(&self, now_unix: i64) -> String {
        match self.unit {
            Unit::Seconds => now_unix.to_string(),
            Unit::Millis => (now_unix * 1000).to_string(),
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// What was signed.

/// One piece of a signed string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    Literal(String),
    /// The raw body bytes.
    Body,
    /// The signed timestamp's text as received.
    Timestamp,
    /// The configured public URL (`url`), as the provider has it registered.
    Url,
    /// The request method, upper case.
    Method,
    /// The path and query as received (`/webhooks/x?a=1`).
    PathAndQuery,
    Header(HeaderName),
    Query(String),
    /// The form fields sorted by name, each name followed by its value, concatenated (Twilio, Mandrill).
    SortedParams,
}

/// A signed string's template: `{timestamp}.{body}`, `{url}{params}`, `v0:{timestamp}:{body}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template(pub Vec<Part>);

impl Template {
    /// The body alone: the default.
    pub fn body() -> Self {
        Template(vec![Part::Body])
    }

    /// A preset's template, written by hand (see [`Template::parse`]; `{id}` is not available: name the header).
    pub fn of(text: &str) -> Self {
        #[allow(clippy::expect_used)]
        Template::parse(text, None).expect("a preset's template parses")
    }

    /// Whether any part needs the configured `url`.
    pub fn uses_url(&self) -> bool {
        self.0.contains(&Part::Url)
    }

    pub fn uses(&self, part: &Part) -> bool {
        self.0.contains(part)
    }

    /// The bytes to sign, in order.
    pub fn render(
        &self,
        req: &Request,
        creds: &Credentials,
        timestamp: Option<&str>,
    ) -> Result<Vec<u8>, VerifyError> {
        Ok(self.parts(req, creds, timestamp)?.concat())
    }

    /// The bytes to sign as pieces, the body borrowed (a MAC takes them one after the other, with no copy).
    pub fn parts<'a>(
        &'a self,
        req: &Request<'a>,
        creds: &'a Credentials,
        timestamp: Option<&'a str>,
    ) -> Result<Vec<Cow<'a, [u8]>>, VerifyError> {
        let mut out: Vec<Cow<'a, [u8]>> = Vec::with_capacity(self.0.len());
        for part in &self.0 {
            out.push(match part {
                Part::Literal(text) => Cow::Borrowed(text.as_bytes()),
                Part::Body => Cow::Borrowed(req.body),
                Part::Timestamp => Cow::Borrowed(timestamp.unwrap_or("").as_bytes()),
                Part::Url => Cow::Borrowed(
                    creds
                        .url
                        .as_deref()
                        .ok_or_else(|| VerifyError::MalformedHeader("url (not configured)".to_owned()))?
                        .as_bytes(),
                ),
                Part::Method => Cow::Borrowed(req.method.as_str().as_bytes()),
                Part::PathAndQuery => Cow::Borrowed(
                    req.uri
                        .path_and_query()
                        .map(|p| p.as_str())
                        .unwrap_or("/")
                        .as_bytes(),
                ),
                Part::Header(name) => {
                    Cow::Borrowed(crate::headers::header_first(req.headers, name)?.as_bytes())
                }
                Part::Query(name) => Cow::Owned(req.query(name).unwrap_or_default().into_bytes()),
                Part::SortedParams => {
                    let mut fields = req.form_fields().unwrap_or_default();
                    fields.sort_by(|a, b| a.0.cmp(&b.0));
                    let mut joined = Vec::new();
                    for (k, v) in fields {
                        joined.extend_from_slice(k.as_bytes());
                        joined.extend_from_slice(v.as_bytes());
                    }
                    Cow::Owned(joined)
                }
            });
        }
        Ok(out)
    }

    /// Parses `{body}`, `{timestamp}`, `{url}`, `{method}`, `{path}`, `{params}`, `{header:NAME}`,
    /// `{query:NAME}` and literal text; `{id}` stands for `id_header` (the id's header, where the id is one).
    pub fn parse(text: &str, id_header: Option<&HeaderName>) -> Result<Self, ParseError> {
        let mut parts = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            let Some(open) = rest.find('{') else {
                parts.push(Part::Literal(rest.to_owned()));
                break;
            };
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_owned()));
            }
            let close = rest[open..]
                .find('}')
                .map(|i| open + i)
                .ok_or_else(|| ParseError(format!("{text:?}: an unclosed {{")))?;
            let name = &rest[open + 1..close];
            parts.push(match name {
                "body" => Part::Body,
                "timestamp" => Part::Timestamp,
                "url" => Part::Url,
                "method" => Part::Method,
                "path" => Part::PathAndQuery,
                "params" => Part::SortedParams,
                "id" => Part::Header(id_header.cloned().ok_or_else(|| {
                    ParseError(format!("{text:?}: {{id}} needs the id in a header (id = \"header:NAME\")"))
                })?),
                _ => {
                    if let Some(h) = name.strip_prefix("header:") {
                        Part::Header(
                            HeaderName::from_bytes(h.as_bytes())
                                .map_err(|_| ParseError(format!("{h:?} is not a valid header name")))?,
                        )
                    } else if let Some(q) = name.strip_prefix("query:") {
                        Part::Query(q.to_owned())
                    } else {
                        return Err(ParseError(format!(
                            "{text:?}: unknown part {{{name}}} (expected body, timestamp, id, url, method, path, params, header:NAME or query:NAME)"
                        )));
                    }
                }
            });
            rest = &rest[close + 1..];
        }
        if parts.is_empty() {
            return Err(ParseError("the signed template is empty".to_owned()));
        }
        Ok(Template(parts))
    }
}

/// A helper for families: `malformed` on a place that is not a header.
pub(crate) fn missing(at: &At) -> VerifyError {
    match at {
        At::Header(name) => malformed(name, "no usable signature"),
        other => VerifyError::MalformedHeader(format!("{other} (no usable signature)")),
    }
}
