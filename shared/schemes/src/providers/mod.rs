//! The named providers: each one small file that fills in a family (docs/DESIGN.md "Providers: who can send")
//! with what its documentation says (headers, signed string, encoding, tolerance, id and type, handshake and
//! answer; the page cited at the top of the file), and one line in the list below.

use http::HeaderName;
use serde_json::value::RawValue;

use crate::errors::{IdError, VerifyError};
use crate::families::Family;
use crate::identity::Identity;
use crate::locator::Locator;
use crate::request::{Answer, Credentials, Identified, Item, Request};

/// An unsigned handshake's hook: `None` if the request is not one, else its answer or why it is refused.
pub type Unsigned = fn(&Request, &Credentials) -> Option<Result<Answer, VerifyError>>;

/// A provider's (or a configured family's) whole way of sending: how to verify, where the id and type are, what
/// to answer.
#[derive(Clone, Debug)]
pub struct Preset {
    /// The scheme name as written in configuration.
    pub name: &'static str,
    pub family: Family,
    pub identify: Identify,
    /// The provider's documented tolerance for its signed timestamp, where it documents one (else 300 s).
    pub tolerance_secs: Option<u64>,
    /// Headers kept with a stored event beside content-type (the id, type and timestamp headers; never a
    /// signature).
    pub kept: Vec<HeaderName>,
    /// Handshakes the provider does not sign (a `GET` challenge, Microsoft Graph's `validationToken`): answered
    /// before any signature check, never stored. `None` from the hook: not a handshake.
    pub before: Option<Unsigned>,
    /// Handshakes the provider signs (Slack `url_verification`, Zoom, Twitch, Discord PING, SNS
    /// `SubscriptionConfirmation`): answered after verification, never stored.
    pub after: Option<fn(&Request, &Credentials) -> Option<Answer>>,
    /// The answer the provider requires to a stored event, instead of the receiver's JSON (Adyen `[accepted]`).
    pub answer: Option<fn(&Request) -> Answer>,
    /// Whether the provider sends `GET` requests to the endpoint (handshakes only): the route exists only then.
    pub get: bool,
    /// Whether a captured delivery could be resent under a fresh id with its signature still valid: the signature
    /// covers the body but not the id (an id header, or a part the receiver adds), with no timestamp or within
    /// its tolerance. See `Scheme::signs_body_but_not_id`.
    pub resendable: bool,
    /// The nonce a delivery's signature covers where it covers neither the body nor the id (Mailgun's `token`):
    /// one signed delivery, whatever body comes with it. See `Scheme::signed_nonce`.
    pub signed_nonce: Option<fn(&Request) -> Option<String>>,
    /// Whether the provider signs (or checks) the endpoint's public URL in a way the family's template does not
    /// show (a `Custom` family): the source must then configure `url`.
    pub needs_url: bool,
    /// Whether a `GET` handshake carries a token the source must configure (`verify_token`).
    pub needs_verify_token: bool,
    /// Whether a refused signature is answered 401 with no body (Xero's "intent to receive" wants exactly that).
    pub bare_refusals: bool,
    /// A delivery as the provider would send it, for `inbox send` and the tests, where the generic sample (the
    /// id and type where the locators say) is not one: a provider whose events are found its own way.
    pub example: Option<Example>,
}

/// A delivery's body (and headers) as the provider sends it, with `{id}`, `{type}`, `{now}` (unix seconds) and
/// `{now_ms}` where the sample's values go.
#[derive(Clone, Copy, Debug)]
pub struct Example {
    pub body: &'static str,
    pub content_type: &'static str,
    /// Headers the provider sends beside its signature (an id header the events are found by).
    pub headers: &'static [(&'static str, &'static str)],
}

impl Preset {
    /// A preset with no handshake, no answer and no GET: the common case, to fill in with `..`.
    pub fn new(name: &'static str, family: Family, identify: Identify) -> Self {
        Preset {
            name,
            family,
            identify,
            tolerance_secs: None,
            kept: Vec::new(),
            before: None,
            after: None,
            answer: None,
            get: false,
            resendable: false,
            signed_nonce: None,
            needs_url: false,
            needs_verify_token: false,
            bare_refusals: false,
            example: None,
        }
    }
}

/// The header names of a Standard Webhooks delivery: `webhook-*`, or Svix's `svix-*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StandardHeaders {
    Webhook,
    Svix,
}

impl Preset {
    /// A provider that signs as Standard Webhooks does (`{prefix}-signature` lists `v1,<base64 HMAC-SHA256 of
    /// "{prefix}-id.{prefix}-timestamp.body">`, 5 minutes both ways), with its own secret encoding and identity:
    /// OpenAI, Replicate, Polar, and Svix's users (Clerk, Resend).
    pub fn standard_webhooks(
        name: &'static str,
        headers: StandardHeaders,
        secret: crate::families::SecretEncoding,
        identify: Identify,
    ) -> Preset {
        use crate::families::{Hmac, Signature, Template, Timestamp};
        let (id, timestamp, signature, signed) = match headers {
            StandardHeaders::Webhook => (
                "webhook-id",
                "webhook-timestamp",
                "webhook-signature",
                "{header:webhook-id}.{timestamp}.{body}",
            ),
            StandardHeaders::Svix => (
                "svix-id",
                "svix-timestamp",
                "svix-signature",
                "{header:svix-id}.{timestamp}.{body}",
            ),
        };
        let family = Family::Hmac(Hmac {
            signature: Signature::list(signature, ' ', "v1,", crate::encoding::Encoding::Base64),
            signed: Template::of(signed),
            algorithm: crate::mac::Algorithm::Sha256,
            timestamp: Some(Timestamp::header(timestamp)),
            secret,
        });
        Preset {
            tolerance_secs: Some(300),
            kept: vec![HeaderName::from_static(id), HeaderName::from_static(timestamp)],
            ..Preset::new(name, family, identify)
        }
    }
}

/// Where a delivery's events are.
#[derive(Clone, Debug)]
pub enum Identify {
    /// One event: its id and type found where the locators say.
    At {
        id: Locator,
        event_type: Option<Locator>,
    },
    /// Several events in one request (SendGrid's array, GoCardless `events`, Microsoft Graph `value`).
    Batch(Batch),
    /// The provider's own rule (an id it implies, a type it spreads over two fields).
    Custom(fn(&Request) -> Result<Identified, IdError>),
}

impl Identify {
    pub fn at(id: &str, event_type: Option<&str>) -> Self {
        // Presets are written by hand and covered by their vectors: a bad locator is a programming error.
        #[allow(clippy::expect_used)]
        let parse = |s: &str| s.parse::<Locator>().expect("a preset's locator parses");
        Identify::At {
            id: parse(id),
            event_type: event_type.map(parse),
        }
    }
}

/// A batched delivery: a JSON array (in the body, or in one form field of it), one event per element.
#[derive(Clone, Debug)]
pub struct Batch {
    /// The form field that holds the JSON (Mandrill's `mandrill_events`); `None`: the body is the JSON.
    pub form: Option<&'static str>,
    /// A JSON pointer to the array; `""` for the body itself.
    pub items: &'static str,
    /// A pointer inside each element to the event object stored (Adyen `/NotificationRequestItem`); `""` for the
    /// element itself.
    pub item: &'static str,
    /// Pointers inside the event object to its id and type.
    pub id: &'static str,
    pub event_type: Option<&'static str>,
}

/// Items in one delivery at most: more is refused as malformed. Azure Event Grid batches up to 5,000 events; the
/// stores write a batch in one transaction (DynamoDB in transactions of 100 before the one answer).
pub const MAX_BATCH_ITEMS: usize = 5000;

impl Batch {
    pub fn split(&self, req: &Request) -> Result<Identified, IdError> {
        let field;
        let json: &[u8] = match self.form {
            Some(name) => {
                field = req
                    .form(name)
                    .ok_or_else(|| IdError::Missing(format!("form {name}")))?;
                field.as_bytes()
            }
            None => req.body,
        };
        let text = std::str::from_utf8(json).map_err(|_| IdError::MalformedBody)?;
        let root: &RawValue = serde_json::from_str(text).map_err(|_| IdError::MalformedBody)?;
        let array =
            raw_at(root, self.items).ok_or_else(|| IdError::Missing(format!("json {}", self.items)))?;
        let elements: Vec<&RawValue> = serde_json::from_str(array.get())
            .map_err(|_| IdError::Missing(format!("json {} (an array)", self.items)))?;
        if elements.is_empty() {
            return Err(IdError::Missing(format!("json {} holds no events", self.items)));
        }
        if elements.len() > MAX_BATCH_ITEMS {
            return Err(IdError::Invalid(format!(
                "more than {MAX_BATCH_ITEMS} events in one delivery"
            )));
        }
        let mut items = Vec::with_capacity(elements.len());
        for (i, element) in elements.into_iter().enumerate() {
            let event = raw_at(element, self.item)
                .ok_or_else(|| IdError::Missing(format!("item {i}: json {}", self.item)))?;
            let value: serde_json::Value =
                serde_json::from_str(event.get()).map_err(|_| IdError::MalformedBody)?;
            let text_at = |pointer: &str| match value.pointer(pointer) {
                Some(serde_json::Value::String(s)) => Some(s.clone()),
                Some(n @ serde_json::Value::Number(_)) => Some(n.to_string()),
                _ => None,
            };
            let place = format!("item {i}: json {}", self.id);
            // An item without its id is still a verified event: its id is the hash of its bytes (what the
            // provider signed of it), rather than the whole delivery refused, retried and in the end dropped.
            let event_id = match text_at(self.id) {
                Some(id) => crate::identity::valid_id(&place, id)?,
                None => {
                    use sha2::Digest as _;
                    hex::encode(sha2::Sha256::digest(event.get().as_bytes()))
                }
            };
            let event_type = self.event_type.and_then(text_at).filter(|t| !t.is_empty());
            items.push(Item {
                identity: Identity { event_id, event_type },
                payload: event.get().as_bytes().to_vec(),
            });
        }
        Ok(Identified::Batch(items))
    }
}

/// The elements of the JSON array at `pointer` in a body, their bytes as sent (none is not an error here: a
/// provider may send an empty delivery as a heartbeat).
pub fn elements<'a>(body: &'a [u8], pointer: &str) -> Result<Vec<&'a RawValue>, IdError> {
    let text = std::str::from_utf8(body).map_err(|_| IdError::MalformedBody)?;
    let root: &RawValue = serde_json::from_str(text).map_err(|_| IdError::MalformedBody)?;
    let array = raw_at(root, pointer).ok_or_else(|| IdError::Missing(format!("json {pointer}")))?;
    serde_json::from_str(array.get()).map_err(|_| IdError::Missing(format!("json {pointer} (an array)")))
}

/// One event per element, for providers whose events carry no id: each one's id is the hex SHA-256 of its bytes
/// as sent (a retry that batches them again still finds them), its type what `event_type` reads from it.
pub fn hashed_items(
    elements: Vec<&RawValue>,
    event_type: impl Fn(&serde_json::Value) -> Option<String>,
) -> Result<Identified, IdError> {
    use sha2::Digest as _;
    if elements.is_empty() {
        return Err(IdError::Missing("the delivery holds no events".to_owned()));
    }
    if elements.len() > MAX_BATCH_ITEMS {
        return Err(IdError::Invalid(format!(
            "more than {MAX_BATCH_ITEMS} events in one delivery"
        )));
    }
    elements
        .into_iter()
        .map(|raw| {
            let event: serde_json::Value =
                serde_json::from_str(raw.get()).map_err(|_| IdError::MalformedBody)?;
            Ok(Item {
                identity: Identity {
                    event_id: hex::encode(sha2::Sha256::digest(raw.get().as_bytes())),
                    event_type: event_type(&event),
                },
                payload: raw.get().as_bytes().to_vec(),
            })
        })
        .collect::<Result<_, _>>()
        .map(Identified::Batch)
}

/// The raw JSON value at an RFC 6901 pointer, its bytes as they were.
pub fn raw_at<'a>(root: &'a RawValue, pointer: &str) -> Option<&'a RawValue> {
    if pointer.is_empty() {
        return Some(root);
    }
    let mut at = root;
    for token in pointer.strip_prefix('/')?.split('/') {
        let token = token.replace("~1", "/").replace("~0", "~");
        let text = at.get().trim_start();
        at = if text.starts_with('[') {
            let list: Vec<&RawValue> = serde_json::from_str(at.get()).ok()?;
            *list.get(token.parse::<usize>().ok()?)?
        } else {
            let map: std::collections::HashMap<String, &RawValue> = serde_json::from_str(at.get()).ok()?;
            *map.get(&token)?
        };
    }
    Some(at)
}

/// The providers list: `"scheme-name" => module,` one line each, in the catalogue's groups.
macro_rules! providers {
    ($($name:literal => $module:ident,)*) => {
        $(mod $module;)*

        /// Every named provider's scheme name.
        pub const NAMES: &[&str] = &[$($name),*];

        /// The preset of a named provider.
        pub fn preset(name: &str) -> Option<Preset> {
            match name {
                $($name => Some($module::preset()),)*
                _ => None,
            }
        }
    };
}

providers! {
    // Batch a: asymmetric and cloud.
    "aws-sns" => aws_sns,
    "azure-event-grid" => azure_event_grid,
    "discord" => discord,
    "google-pubsub" => google_pubsub,
    "netlify" => netlify,
    "paypal" => paypal,
    "plaid" => plaid,
    "sendgrid" => sendgrid,
    "wise" => wise,
    // End of batch a.

    // Batch b: payments.
    "square" => square,
    "paddle" => paddle,
    "adyen" => adyen,
    "braintree" => braintree,
    "checkout" => checkout,
    "razorpay" => razorpay,
    "lemonsqueezy" => lemonsqueezy,
    "gocardless" => gocardless,
    "chargebee" => chargebee,
    "recurly" => recurly,
    // End of batch b.

    // Batch c: payments and commerce.
    "bigcommerce" => bigcommerce,
    "coinbase" => coinbase,
    "flutterwave" => flutterwave,
    "mercadopago" => mercadopago,
    "paystack" => paystack,
    "polar" => polar,
    "revolut" => revolut,
    "squarespace" => squarespace,
    "woocommerce" => woocommerce,
    "xendit" => xendit,

    // End of batch c.

    // Batch d: developer tools.
    "bitbucket" => bitbucket,
    "buildkite" => buildkite,
    "circleci" => circleci,
    "gitea" => gitea,
    "gitlab" => gitlab,
    "heroku" => heroku,
    "launchdarkly" => launchdarkly,
    "linear" => linear,
    "npm" => npm,
    "pagerduty" => pagerduty,
    "sentry" => sentry,
    "terraform-cloud" => terraform_cloud,
    "vercel" => vercel,

    // End of batch d.

    // Batch e: messaging and mail.
    "customerio" => customerio,
    "line" => line,
    "mailgun" => mailgun,
    "mandrill" => mandrill,
    "postmark" => postmark,
    "resend" => resend,
    "telegram" => telegram,
    "twilio" => twilio,
    "zoom" => zoom,

    // End of batch e.

    // Batch f: messaging and identity.
    "intercom" => intercom,
    "front" => front,
    "meta" => meta,
    "x" => x,
    "vonage" => vonage,
    "twitch" => twitch,
    "clerk" => clerk,
    "workos" => workos,
    "okta" => okta,
    // End of batch f.

    // Batch g: identity and SaaS.
    "auth0" => auth0,
    "microsoft-graph" => microsoft_graph,
    "hubspot" => hubspot,
    "calendly" => calendly,
    "typeform" => typeform,
    "docusign" => docusign,
    "zendesk" => zendesk,
    "dropbox" => dropbox,
    "dropbox-sign" => dropbox_sign,
    "box" => r#box,
    // End of batch g.

    // Batch h: SaaS.
    "airtable" => airtable,
    "asana" => asana,
    "cal" => cal,
    "intuit" => intuit,
    "mux" => mux,
    "openai" => openai,
    "persona" => persona,
    "replicate" => replicate,
    "segment" => segment,
    "trello" => trello,
    "xero" => xero,
    // End of batch h.
}
