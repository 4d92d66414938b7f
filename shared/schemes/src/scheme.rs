//! [`Scheme`]: a source's way of signing and identifying its webhooks, and the dispatch of every operation (key,
//! verify, identify, handshakes, answers, kept headers, sign) to the built-in scheme or the family and preset that
//! implement it. [`HmacParams`] is the shortest way to build a generic HMAC scheme.

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::clock::Clock;
use crate::encoding::Encoding;
use crate::errors::{IdError, KeyError, VerifyError};
use crate::families::{self, Family, Signer};
use crate::identity::Identity;
use crate::key::Key;
use crate::locator::{locate, Locator};
use crate::mac::Algorithm;
use crate::providers::{self, Identify, Preset};
use crate::request::{self, Answer, Credentials, Identified, KeyRequest, PublicKey, Request, Signed};
use crate::{github, shopify, slack, standard, stripe};

/// A provider's way of signing and identifying its webhooks.
#[derive(Clone, Debug)]
pub enum Scheme {
    Github,
    Stripe,
    StandardWebhooks,
    Svix,
    Shopify,
    Slack,
    /// A named provider, or a family configured field by field (`hmac`, `token`, `ed25519`, ...).
    Preset(Box<Preset>),
}

impl Scheme {
    /// The scheme named in configuration: one of the built-in schemes or a named provider. Families configured
    /// field by field (`hmac`, `token`, ...) are built by the configuration, not here.
    pub fn named(name: &str) -> Option<Scheme> {
        Some(match name {
            "github" => Scheme::Github,
            "stripe" => Scheme::Stripe,
            "standard-webhooks" => Scheme::StandardWebhooks,
            "svix" => Scheme::Svix,
            "shopify" => Scheme::Shopify,
            "slack" => Scheme::Slack,
            _ => Scheme::Preset(Box::new(providers::preset(name)?)),
        })
    }

    /// Every scheme name `named` knows.
    pub fn names() -> Vec<&'static str> {
        let mut names = vec![
            "github",
            "stripe",
            "standard-webhooks",
            "svix",
            "shopify",
            "slack",
        ];
        names.extend(providers::NAMES);
        names
    }

    /// The scheme's name as written in configuration.
    pub fn name(&self) -> &'static str {
        match self {
            Scheme::Github => "github",
            Scheme::Stripe => "stripe",
            Scheme::StandardWebhooks => "standard-webhooks",
            Scheme::Svix => "svix",
            Scheme::Shopify => "shopify",
            Scheme::Slack => "slack",
            Scheme::Preset(p) => p.name,
        }
    }

    /// The preset, where the scheme is one.
    pub fn preset(&self) -> Option<&Preset> {
        match self {
            Scheme::Preset(p) => Some(p),
            _ => None,
        }
    }

    /// The family it belongs to (`hmac` for the built-in HMAC schemes).
    pub fn family(&self) -> &'static str {
        self.preset().map_or("hmac", |p| p.family.name())
    }

    /// Whether the signature covers a timestamp that `verify` checks against its tolerance.
    pub fn has_timestamp(&self) -> bool {
        match self {
            Scheme::Stripe | Scheme::StandardWebhooks | Scheme::Svix | Scheme::Slack => true,
            Scheme::Github | Scheme::Shopify => false,
            Scheme::Preset(p) => p.family.has_timestamp(),
        }
    }

    /// The provider's documented tolerance for its timestamp, where it differs from the default.
    pub fn default_tolerance_secs(&self) -> Option<u64> {
        self.preset().and_then(|p| p.tolerance_secs)
    }

    /// The configured secret string -> key. Standard Webhooks/Svix: base64 after an optional `whsec_`;
    /// Stripe: the whole `whsec_...` string's bytes (as Stripe does); a family: its secret encoding; others: the
    /// string's bytes.
    pub fn key_from_secret(&self, secret: &str) -> Result<Key, KeyError> {
        let bytes = match self {
            Scheme::StandardWebhooks | Scheme::Svix => standard::key_bytes(self.name(), secret)?,
            Scheme::Preset(p) => match &p.family {
                Family::Hmac(h) => return h.secret.key(secret),
                _ => secret.as_bytes().to_vec(),
            },
            _ => secret.as_bytes().to_vec(),
        };
        if bytes.is_empty() {
            return Err(KeyError::Empty);
        }
        Ok(Key::new(bytes))
    }

    /// Parses a `public_key` as the provider prints it, for the asymmetric families.
    pub fn public_key(&self, text: &str) -> Result<PublicKey, KeyError> {
        let curve = match self.preset().map(|p| &p.family) {
            Some(Family::Ed25519(_)) => Some(request::Curve::Ed25519),
            Some(Family::Ecdsa(_)) => Some(request::Curve::P256),
            _ => None,
        };
        request::parse_public_key(curve, text)
    }

    /// A key the request points at, to fetch before `verify` (PayPal's and SNS's certificates, a JWK set).
    /// `Err`: it points somewhere other than the provider's own hosts (a 401; nothing is fetched).
    pub fn key_request(&self, creds: &Credentials, req: &Request) -> Result<Option<KeyRequest>, VerifyError> {
        match self {
            Scheme::Preset(p) => p.family.key_request(req, creds),
            _ => Ok(None),
        }
    }

    /// Verifies a request against any of the source's keys and any signature the request carries, in constant
    /// time. Timestamped schemes first reject a timestamp more than `tolerance_secs` away from `now_unix`.
    /// `fetched`: the key `key_request` asked for.
    pub fn verify_request(
        &self,
        creds: &Credentials,
        req: &Request,
        now_unix: i64,
        tolerance_secs: u64,
        fetched: Option<&PublicKey>,
    ) -> Result<(), VerifyError> {
        let clock = Clock {
            now_unix,
            tolerance_secs,
        };
        let keys = &creds.secrets;
        let (headers, body) = (req.headers, req.body);
        match self {
            Scheme::Github => github::verify(keys, headers, body),
            Scheme::Stripe => stripe::verify(keys, headers, body, clock),
            Scheme::StandardWebhooks => standard::verify(&standard::WEBHOOK, keys, headers, body, clock),
            Scheme::Svix => standard::verify(&standard::SVIX, keys, headers, body, clock),
            Scheme::Shopify => shopify::verify(keys, headers, body),
            Scheme::Slack => slack::verify(keys, headers, body, clock),
            Scheme::Preset(p) => p.family.verify(creds, req, clock, fetched),
        }
    }

    /// `verify_request` for a `POST` with headers and a body only, and shared secrets only.
    pub fn verify(
        &self,
        keys: &[Key],
        headers: &HeaderMap,
        body: &[u8],
        now_unix: i64,
        tolerance_secs: u64,
    ) -> Result<(), VerifyError> {
        let uri = http::Uri::from_static("/");
        let creds = Credentials::secrets(keys.to_vec());
        self.verify_request(
            &creds,
            &Request::post(&uri, headers, body),
            now_unix,
            tolerance_secs,
            None,
        )
    }

    /// The delivery's events: one, or several for a batched delivery. Call after verification succeeded.
    pub fn identify_request(&self, req: &Request) -> Result<Identified, IdError> {
        let (headers, body) = (req.headers, req.body);
        let one = match self {
            Scheme::Github => github::identify(headers),
            Scheme::Stripe => stripe::identify(body),
            Scheme::StandardWebhooks => standard::identify(&standard::WEBHOOK, headers, body),
            Scheme::Svix => standard::identify(&standard::SVIX, headers, body),
            Scheme::Shopify => shopify::identify(headers),
            Scheme::Slack => slack::identify(body),
            Scheme::Preset(p) => {
                return match &p.identify {
                    Identify::At { id, event_type } => {
                        locate(req, id, event_type.as_ref()).map(Identified::One)
                    }
                    Identify::Batch(batch) => batch.split(req),
                    Identify::Custom(identify) => identify(req),
                }
            }
        };
        one.map(Identified::One)
    }

    /// The sender's event id and type, for a scheme that carries one event per delivery.
    pub fn identify(&self, headers: &HeaderMap, body: &[u8]) -> Result<Identity, IdError> {
        let uri = http::Uri::from_static("/");
        match self.identify_request(&Request::post(&uri, headers, body))? {
            Identified::One(identity) => Ok(identity),
            Identified::Batch(items) => items
                .into_iter()
                .next()
                .map(|item| item.identity)
                .ok_or_else(|| IdError::Missing("the batch is empty".to_owned())),
        }
    }

    /// Whether a captured delivery could be resent under a fresh id with its signature still valid: the
    /// signature covers the body but not the id (GitHub, Shopify, `hmac` with an id header, the providers whose
    /// preset says `resendable`); a signed timestamp only bounds that to its tolerance. Such sources look for
    /// resent bodies by default, and store each as its own event marked `resent_of`.
    pub fn signs_body_but_not_id(&self) -> bool {
        match self {
            Scheme::Github | Scheme::Shopify => true,
            Scheme::Preset(p) => p.resendable,
            Scheme::Stripe | Scheme::StandardWebhooks | Scheme::Svix | Scheme::Slack => false,
        }
    }

    /// The nonce a verified delivery's signature covers, where the scheme signs one of its own per delivery but
    /// neither the body nor the id (Mailgun's `token`): a captured signature verifies beside any body, under any id,
    /// within its tolerance, so the receiver remembers the nonce and answers a second event under it as a
    /// duplicate of the first (docs/DESIGN.md "Receiving"). Call after verification succeeded.
    pub fn signed_nonce(&self, req: &Request) -> Option<String> {
        self.preset()?.signed_nonce?(req)
    }

    /// Whether a refused signature is answered with no body (the provider checks the answer is empty).
    pub fn bare_refusals(&self) -> bool {
        self.preset().is_some_and(|p| p.bare_refusals)
    }

    /// Whether the provider sends `GET` requests (handshakes only): the route exists for such sources only.
    pub fn accepts_get(&self) -> bool {
        self.preset().is_some_and(|p| p.get)
    }

    /// A handshake the provider does not sign, answered before verification and never stored (a `GET`
    /// challenge, Microsoft Graph's `validationToken`). `None`: not a handshake; `Some(Err)`: one that fails.
    pub fn unsigned_handshake(
        &self,
        creds: &Credentials,
        req: &Request,
    ) -> Option<Result<Answer, VerifyError>> {
        self.preset()
            .and_then(|p| p.before)
            .and_then(|before| before(req, creds))
    }

    /// The answer to a signed handshake, which is answered without storing (call after verification).
    pub fn signed_handshake(&self, creds: &Credentials, req: &Request) -> Option<Answer> {
        match self {
            Scheme::Slack => slack::handshake(req.body).map(|v| Answer::json(&v)),
            Scheme::Preset(p) => p.after.and_then(|after| after(req, creds)),
            _ => None,
        }
    }

    /// The answer to a signed handshake in a JSON body (Slack's `url_verification`).
    pub fn handshake(&self, body: &[u8]) -> Option<serde_json::Value> {
        match self {
            Scheme::Slack => slack::handshake(body),
            _ => None,
        }
    }

    /// The answer the provider requires to an accepted delivery, instead of the receiver's JSON.
    pub fn required_answer(&self, req: &Request) -> Option<Answer> {
        self.preset().and_then(|p| p.answer).map(|answer| answer(req))
    }

    /// Headers kept with a stored event so a replay forwards what was received: content-type and the
    /// scheme's id, type and timestamp headers, never signature headers.
    pub fn kept_headers(&self) -> Vec<HeaderName> {
        let mut kept = vec![http::header::CONTENT_TYPE];
        match self {
            Scheme::Github => kept.extend(github::kept_headers()),
            Scheme::Stripe => {}
            Scheme::StandardWebhooks => kept.extend(standard::WEBHOOK.kept_headers()),
            Scheme::Svix => kept.extend(standard::SVIX.kept_headers()),
            Scheme::Shopify => kept.extend(shopify::kept_headers()),
            Scheme::Slack => kept.extend(slack::kept_headers()),
            Scheme::Preset(p) => kept.extend(p.kept.iter().cloned()),
        }
        kept
    }

    /// Signs a request like the provider does: the headers to add (signature, timestamp, and the id and type
    /// where they are headers), and the body where the signature lives in it. `None` where `signer` cannot sign
    /// for this scheme (a shared secret for an asymmetric one).
    pub fn sign_request(
        &self,
        signer: &Signer,
        creds: &Credentials,
        req: &Request,
        identity: &Identity,
        now_unix: i64,
    ) -> Option<Signed> {
        let Scheme::Preset(p) = self else {
            let Signer::Secret(key) = signer else { return None };
            let headers = self.sign(key, req.body, identity, now_unix);
            return Some(Signed {
                headers: headers
                    .into_iter()
                    .filter_map(|(n, v)| Some((n, v.to_str().ok()?.to_owned())))
                    .collect(),
                body: None,
            });
        };
        // The id and type headers first: a template may sign them (`{header:svix-id}`).
        let mut carried = Vec::new();
        if let Identify::At { id, event_type } = &p.identify {
            if let Locator::Header(name) = id {
                carried.push((name.clone(), identity.event_id.clone()));
            }
            if let (Some(Locator::Header(name)), Some(t)) = (event_type, &identity.event_type) {
                carried.push((name.clone(), t.clone()));
            }
        }
        let mut headers = req.headers.clone();
        for (name, value) in &carried {
            if let Ok(v) = HeaderValue::from_str(value) {
                headers.insert(name.clone(), v);
            }
        }
        let with_ids = Request {
            headers: &headers,
            ..*req
        };
        let mut signed = p.family.sign(signer, &with_ids, creds, identity, now_unix)?;
        signed.headers.extend(carried);
        Some(signed)
    }

    /// Signs `body` like the provider does and returns the headers to send with it (the signature, the
    /// timestamp = `now_unix`, and the id/type headers where the scheme carries them in headers). Content-type
    /// is left to the caller. An id or type that cannot be a header value is left out.
    pub fn sign(
        &self,
        key: &Key,
        body: &[u8],
        identity: &Identity,
        now_unix: i64,
    ) -> Vec<(HeaderName, HeaderValue)> {
        let pairs = match self {
            Scheme::Github => github::sign(key, body, identity),
            Scheme::Stripe => stripe::sign(key, body, now_unix),
            Scheme::StandardWebhooks => standard::WEBHOOK.sign(key, body, identity, now_unix),
            Scheme::Svix => standard::SVIX.sign(key, body, identity, now_unix),
            Scheme::Shopify => shopify::sign(key, body, identity),
            Scheme::Slack => slack::sign(key, body, now_unix),
            Scheme::Preset(_) => {
                let uri = http::Uri::from_static("/");
                let headers = HeaderMap::new();
                let req = Request::post(&uri, &headers, body);
                self.sign_request(
                    &Signer::Secret(key.clone()),
                    &Credentials::default(),
                    &req,
                    identity,
                    now_unix,
                )
                .map(|s| s.headers)
                .unwrap_or_default()
            }
        };
        pairs
            .into_iter()
            .filter_map(|(name, value)| Some((name, HeaderValue::from_bytes(value.as_bytes()).ok()?)))
            .collect()
    }
}

/// The simplest spelling of the general `hmac` family: `header` carries `prefix` + encode(HMAC(key, body)); the
/// id and type where the locators say. `Scheme::from` makes it a scheme.
#[derive(Clone, Debug)]
pub struct HmacParams {
    pub header: HeaderName,
    pub algorithm: Algorithm,
    pub encoding: Encoding,
    pub prefix: String,
    pub id: Locator,
    pub event_type: Option<Locator>,
}

impl From<HmacParams> for Scheme {
    fn from(p: HmacParams) -> Scheme {
        let family = Family::Hmac(families::Hmac::of_body(
            families::Signature {
                at: families::At::Header(p.header),
                format: families::Format::Plain,
                prefix: p.prefix,
                encoding: p.encoding,
            },
            p.algorithm,
        ));
        // The MAC covers the body alone: an id in a header or the query string is not signed.
        let resendable = matches!(p.id, Locator::Header(_) | Locator::Query(_));
        let kept = [Some(&p.id), p.event_type.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(|locator| match locator {
                Locator::Header(name) => Some(name.clone()),
                _ => None,
            })
            .collect();
        Scheme::Preset(Box::new(Preset {
            kept,
            resendable,
            ..Preset::new(
                "hmac",
                family,
                Identify::At {
                    id: p.id,
                    event_type: p.event_type,
                },
            )
        }))
    }
}
