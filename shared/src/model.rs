//! The ledger record and the names it is keyed by, parsed once at the boundary.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest event id accepted from a sender, in bytes. Provider ids are far shorter (Stripe 28, GitHub 36).
pub const MAX_EVENT_ID_BYTES: usize = 256;

/// A configured name: 1–64 of `[a-z0-9_-]`, so it is safe in a URL, a file name, a log line and a store key (`#` is
/// never part of it). One type per kind of thing named, so that a route's name is never taken for a source's.
macro_rules! config_name {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn parse(name: &str) -> Result<Self, InvalidName> {
                let ok = !name.is_empty()
                    && name.len() <= 64
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
                if ok {
                    Ok(Self(name.to_owned()))
                } else {
                    Err(InvalidName(concat!(
                        $what,
                        " names are 1-64 characters of a-z, 0-9, '-' and '_'"
                    )))
                }
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::str::FromStr for $name {
            type Err = InvalidName;
            fn from_str(s: &str) -> Result<Self, InvalidName> {
                Self::parse(s)
            }
        }

        impl TryFrom<String> for $name {
            type Error = InvalidName;
            fn try_from(s: String) -> Result<Self, InvalidName> {
                Self::parse(&s)
            }
        }

        impl From<$name> for String {
            fn from(s: $name) -> String {
                s.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(&self.0)
            }
        }
    };
}

config_name!(
    /// A configured source's name, as it appears in `/webhooks/{source}`.
    SourceName,
    "source"
);
config_name!(
    /// A route's name (`[routes.NAME]`): it keys the route's deliveries, so it is kept for as long as they are.
    RouteName,
    "route"
);
config_name!(
    /// A destination's name (`[destinations.NAME]`).
    DestinationName,
    "destination"
);

/// The sender's own event id: 1–256 bytes with no control characters.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct EventId(String);

impl EventId {
    pub fn parse(id: &str) -> Result<Self, InvalidName> {
        if id.is_empty() {
            return Err(InvalidName("event id is empty"));
        }
        if id.len() > MAX_EVENT_ID_BYTES {
            return Err(InvalidName("event id is longer than 256 bytes"));
        }
        if id.chars().any(char::is_control) {
            return Err(InvalidName("event id holds control characters"));
        }
        Ok(Self(id.to_owned()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for EventId {
    type Error = InvalidName;
    fn try_from(s: String) -> Result<Self, InvalidName> {
        Self::parse(&s)
    }
}

impl From<EventId> for String {
    fn from(s: EventId) -> String {
        s.0
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidName(pub &'static str);

/// What identifies an event everywhere: the ledger key and the queue message.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EventKey {
    pub source: SourceName,
    pub event_id: EventId,
}

impl EventKey {
    pub fn new(source: SourceName, event_id: EventId) -> Self {
        Self { source, event_id }
    }
    /// The DynamoDB partition key and the `Idempotency-Key` sent downstream: `{source}:{event_id}` would be
    /// ambiguous for ids holding ':', so the ledger uses `#`, which source names never contain.
    pub fn pk(&self) -> String {
        format!("{}#{}", self.source, self.event_id)
    }
    pub fn idempotency_key(&self) -> String {
        format!("{}:{}", self.source, self.event_id)
    }
}

impl fmt::Display for EventKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.source, self.event_id)
    }
}

/// The states of docs/DESIGN.md. Every transition is one conditional write on the state it leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    Received,
    Processing,
    Completed,
    Failed,
    Dead,
}

impl Status {
    pub const ALL: [Status; 5] = [
        Status::Received,
        Status::Processing,
        Status::Completed,
        Status::Failed,
        Status::Dead,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Received => "RECEIVED",
            Status::Processing => "PROCESSING",
            Status::Completed => "COMPLETED",
            Status::Failed => "FAILED",
            Status::Dead => "DEAD",
        }
    }
    /// Open events are the ones the sweeper may still have to move: they carry the sparse-index keys.
    pub fn is_open(self) -> bool {
        matches!(self, Status::Received | Status::Processing | Status::Failed)
    }
}

impl std::str::FromStr for Status {
    type Err = InvalidName;
    fn from_str(s: &str) -> Result<Self, InvalidName> {
        Status::ALL
            .into_iter()
            .find(|st| st.as_str().eq_ignore_ascii_case(s))
            .ok_or(InvalidName(
                "status is one of RECEIVED, PROCESSING, COMPLETED, FAILED, DEAD",
            ))
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// How an event reached the ledger: a webhook delivery, or reconciliation with the provider's API (docs/DESIGN.md
/// "Reconciliation"). A webhook arriving for a reconciled id is a duplicate like any other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    #[default]
    Webhook,
    Reconciled,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Webhook => "webhook",
            Origin::Reconciled => "reconciled",
        }
    }
}

impl std::str::FromStr for Origin {
    type Err = InvalidName;
    fn from_str(s: &str) -> Result<Self, InvalidName> {
        match s {
            "webhook" => Ok(Origin::Webhook),
            "reconciled" => Ok(Origin::Reconciled),
            _ => Err(InvalidName("origin is webhook or reconciled")),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A header kept with the event so that a replay forwards what was received.
pub type KeptHeaders = Vec<(String, String)>;

/// How a source's creates treat a body already stored under another id of the same source and type, within
/// `within` (the retention): where the scheme signs the body but not the id, a captured delivery can come back under
/// fresh ids, and distinct events also carry identical bytes (docs/DESIGN.md "Receiving").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ResentBodies {
    /// Not looked for: the scheme signs the id (or a timestamp) with the body.
    #[default]
    Ignored,
    /// Stored and run as its own event, marked `resent_of` the stored one.
    Marked { within: std::time::Duration },
    /// Answered as a duplicate of the stored event (`refuse_resent_bodies = true`).
    Refused { within: std::time::Duration },
    /// The scheme signs a nonce of its own per delivery, but neither the body nor the id (Mailgun's `token`): the
    /// nonce (its SHA-256 here) is remembered in the body's place, and a create under another id that brings a nonce
    /// a live event holds is answered as a duplicate of that event, whatever the source says of resent bodies: one
    /// signed delivery is one event, and a second body under its signature is a captured one sent again.
    SignedNonce {
        sha256: [u8; 32],
        within: std::time::Duration,
    },
}

impl ResentBodies {
    /// How long a stored body (or signed nonce) is remembered, when it is looked for at all.
    pub fn within(self) -> Option<std::time::Duration> {
        match self {
            ResentBodies::Ignored => None,
            ResentBodies::Marked { within }
            | ResentBodies::Refused { within }
            | ResentBodies::SignedNonce { within, .. } => Some(within),
        }
    }

    /// Whether a live holder under another id makes the create a duplicate of it (else it is marked `resent_of` it).
    pub fn refuses(self) -> bool {
        matches!(
            self,
            ResentBodies::Refused { .. } | ResentBodies::SignedNonce { .. }
        )
    }

    /// The guard for a delivery whose signature covers `nonce`, remembered `within`.
    pub fn signed_nonce(nonce: &[u8], within: std::time::Duration) -> ResentBodies {
        use sha2::Digest;
        ResentBodies::SignedNonce {
            sha256: sha2::Sha256::digest(nonce).into(),
            within,
        }
    }
}

/// What a create looks for among the remembered ones (the resent-body guard, docs/DESIGN.md "Receiving"): the key
/// its holder is remembered under, and what a live holder under another id means.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Guard {
    /// The event's type (`""` for none), or [`Guard::SIGNED_NONCE`].
    pub kind: String,
    /// Lower-case hex SHA-256 of the body, or of the signed nonce.
    pub sha256: String,
    /// Whether the key is a signed nonce's: its holder's record carries another body by design, so the record
    /// cannot say whether it holds the key; the key itself must (stores that keep a hash of it keep it whole).
    pub nonce: bool,
    pub within: std::time::Duration,
    /// A live holder under another id makes the create its duplicate (else the create is marked `resent_of` it).
    pub refuses: bool,
}

impl Guard {
    /// The kind a signed nonce is remembered under. Keys are per source, and a source's deliveries all carry the
    /// scheme's nonce or none: a body of a type so named is never looked for beside nonces.
    pub const SIGNED_NONCE: &'static str = "#signed-nonce";

    /// Whether `holder`, a live record the remembered key names, holds this key: for a body, the same type and
    /// SHA-256 (a store may keep only a hash of the key); for a nonce, the store's key says so, not the record.
    pub fn held_by(&self, holder: &Record) -> bool {
        self.nonce
            || (holder.event_type.as_deref().unwrap_or("") == self.kind
                && holder.payload_sha256 == self.sha256)
    }
}

/// What the receiver writes: the first payload of an event, verified.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NewEvent {
    pub key: EventKey,
    pub event_type: Option<String>,
    pub payload: bytes::Bytes,
    /// Lower-case hex SHA-256 of `payload`.
    pub payload_sha256: String,
    pub headers: KeptHeaders,
    pub origin: Origin,
    /// What the create does with a body already stored under another id of the source and type (docs/DESIGN.md
    /// "Receiving"): nothing, mark it (`resent_of`), or refuse it as a duplicate of that event; or, for a delivery
    /// whose signature covers a nonce of its own, the same with the nonce in the body's place.
    pub resent_bodies: ResentBodies,
}

impl NewEvent {
    /// What this create looks for among the remembered ones, if anything ([`Guard`]).
    pub fn guard(&self) -> Option<Guard> {
        let within = self.resent_bodies.within()?;
        let refuses = self.resent_bodies.refuses();
        Some(match self.resent_bodies {
            ResentBodies::SignedNonce { sha256, .. } => Guard {
                kind: Guard::SIGNED_NONCE.to_owned(),
                sha256: hex::encode(sha256),
                nonce: true,
                within,
                refuses,
            },
            _ => Guard {
                kind: self.event_type.clone().unwrap_or_default(),
                sha256: self.payload_sha256.clone(),
                nonce: false,
                within,
                refuses,
            },
        })
    }
}

/// One ledger record without its body: what listings, the sweeper and alarms read. Times are UTC milliseconds since
/// the epoch, on the store's clock. Its `Debug` leaves the kept headers out (their count only).
#[derive(Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Record {
    pub source: SourceName,
    pub event_id: EventId,
    pub event_type: Option<String>,
    pub status: Status,
    pub payload_sha256: String,
    pub headers: KeptHeaders,
    pub received_at: i64,
    pub updated_at: i64,
    /// Attempts counted against the retry budget (reset by a replay).
    pub attempts: u32,
    pub replays: u32,
    pub lease_owner: Option<String>,
    pub lease_until: Option<i64>,
    pub next_attempt_at: Option<i64>,
    pub last_error: Option<String>,
    pub completed_at: Option<i64>,
    pub expires_at: Option<i64>,
    /// When the alarm for a dead event went out.
    pub notified_at: Option<i64>,
    /// When an operator last replayed it: the age budget counts from here, not from `received_at`.
    pub replayed_at: Option<i64>,
    pub origin: Origin,
    /// Its body was already stored under this other id of the source and type when it was created: stored and
    /// run as its own event all the same (docs/DESIGN.md "Receiving"), and marked so an operator can tell.
    pub resent_of: Option<EventId>,
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("source", &self.source)
            .field("event_id", &self.event_id)
            .field("event_type", &self.event_type)
            .field("status", &self.status)
            .field("payload_sha256", &self.payload_sha256)
            .field("kept_headers", &self.headers.len())
            .field("received_at", &self.received_at)
            .field("updated_at", &self.updated_at)
            .field("attempts", &self.attempts)
            .field("replays", &self.replays)
            .field("lease_owner", &self.lease_owner)
            .field("lease_until", &self.lease_until)
            .field("next_attempt_at", &self.next_attempt_at)
            .field("last_error", &self.last_error)
            .field("completed_at", &self.completed_at)
            .field("expires_at", &self.expires_at)
            .field("notified_at", &self.notified_at)
            .field("replayed_at", &self.replayed_at)
            .field("origin", &self.origin)
            .field("resent_of", &self.resent_of)
            .finish()
    }
}

impl Record {
    pub fn key(&self) -> EventKey {
        EventKey::new(self.source.clone(), self.event_id.clone())
    }
    /// Where the retry budget's age counts from: the last replay, or the receipt.
    pub fn budget_start(&self) -> i64 {
        self.replayed_at.unwrap_or(self.received_at)
    }
    /// A completed event past its retention no longer counts for dedup, whether or not it was deleted yet.
    pub fn is_expired(&self, now_ms: i64) -> bool {
        self.status == Status::Completed && self.expires_at.is_some_and(|t| t <= now_ms)
    }
    /// This record with its body.
    pub fn with_payload(self, payload: bytes::Bytes) -> Event {
        Event {
            record: self,
            payload,
        }
    }
}

/// A record with its body: what a claim hands the handler, and what `get` reads. Its fields are the record's
/// ([`Record`], through `Deref`) and the payload. Its `Debug` leaves the payload out (its size only): payloads
/// are personal data that no log carries.
#[derive(Clone, PartialEq, Eq)]
pub struct Event {
    pub record: Record,
    pub payload: bytes::Bytes,
}

impl std::ops::Deref for Event {
    type Target = Record;
    fn deref(&self) -> &Record {
        &self.record
    }
}

impl std::ops::DerefMut for Event {
    fn deref_mut(&mut self) -> &mut Record {
        &mut self.record
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("record", &self.record)
            .field("payload_bytes", &self.payload.len())
            .finish()
    }
}

impl From<Event> for Record {
    fn from(event: Event) -> Record {
        event.record
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_s_debug_holds_neither_its_payload_nor_its_headers() {
        let record = Record {
            source: SourceName::parse("src").unwrap(),
            event_id: EventId::parse("e1").unwrap(),
            event_type: None,
            status: Status::Received,
            payload_sha256: "0".repeat(64),
            headers: vec![("x-customer".into(), "jane@example.com".into())],
            received_at: 1,
            updated_at: 1,
            attempts: 0,
            replays: 0,
            lease_owner: None,
            lease_until: None,
            next_attempt_at: None,
            last_error: None,
            completed_at: None,
            expires_at: None,
            notified_at: None,
            replayed_at: None,
            origin: Origin::Webhook,
            resent_of: None,
        };
        let event = record.with_payload(bytes::Bytes::from_static(b"{\"card\":\"4242-secret\"}"));
        let shown = format!("{event:?}");
        assert!(!shown.contains("4242") && !shown.contains("jane"), "{shown}");
        assert!(shown.contains("payload_bytes: 22"), "{shown}");
    }

    #[test]
    fn source_names_are_url_and_key_safe() {
        assert!(SourceName::parse("stripe-live_2").is_ok());
        for bad in ["", "Stripe", "a/b", "..", "a#b", "a b", &"x".repeat(65)] {
            assert!(SourceName::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn event_ids_are_bounded_and_printable() {
        assert!(EventId::parse("evt_1:ä").is_ok());
        assert!(EventId::parse(&"x".repeat(256)).is_ok());
        assert!(EventId::parse(&"x".repeat(257)).is_err());
        assert!(EventId::parse("").is_err());
        assert!(EventId::parse("a\nb").is_err());
    }

    #[test]
    fn status_round_trips_through_text() {
        for st in Status::ALL {
            assert_eq!(st.as_str().parse::<Status>(), Ok(st));
        }
        assert_eq!("dead".parse::<Status>(), Ok(Status::Dead));
        assert!("DONE".parse::<Status>().is_err());
    }
}
