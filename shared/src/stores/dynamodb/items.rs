//! Items to records and back: the attributes every read projects ([`META`]), typed reads of an item ([`Fields`],
//! [`record_of`]) and the encoding of values ([`s`], [`n`], [`secs`], [`digest`]).

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;

use crate::model::{EventId, Origin, Record, SourceName, Status};
use crate::ports::StoreError;

/// What `list` and `due` read: everything but the body.
pub(super) const META: [&str; 22] = [
    "pk",
    "source",
    "event_id",
    "event_type",
    "status",
    "payload_sha256",
    "headers",
    "received_at",
    "updated_at",
    "attempts",
    "replays",
    "lease_owner",
    "lease_until",
    "next_attempt_at",
    "last_error",
    "completed_at",
    "expires_at",
    "notified_at",
    "replayed_at",
    "origin",
    "resent_of",
    "gsi1sk",
];

pub(super) type Item = HashMap<String, AttributeValue>;

/// A payload hash as stored: its 32 bytes where it is lower-case hex SHA-256 (always, from the receiver), the
/// text otherwise. Records read either.
pub(super) fn digest(sha256_hex: &str) -> AttributeValue {
    match hex::decode(sha256_hex) {
        Ok(bytes) if bytes.len() == 32 && sha256_hex.bytes().all(|b| !b.is_ascii_uppercase()) => {
            AttributeValue::B(Blob::new(bytes))
        }
        _ => s(sha256_hex),
    }
}

pub(super) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(super) fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// Milliseconds to the epoch seconds of the TTL attribute, rounded down.
pub(super) fn secs(ms: i64) -> i64 {
    ms.div_euclid(1000)
}

pub(super) fn projection() -> String {
    META.map(|a| format!("#{a}")).join(", ")
}

pub(super) fn meta_names() -> HashMap<String, String> {
    META.iter().map(|a| (format!("#{a}"), (*a).to_owned())).collect()
}

/// Typed reads of an item's attributes; anything unexpected is [`StoreError::Corrupt`], naming the item.
pub(super) struct Fields<'a>(pub(super) &'a Item);

impl Fields<'_> {
    pub(super) fn pk(&self) -> &str {
        match self.0.get("pk") {
            Some(AttributeValue::S(pk)) => pk,
            _ => "(an item without pk)",
        }
    }

    pub(super) fn corrupt(&self, name: &str, what: &str) -> StoreError {
        StoreError::Corrupt(format!("item {}: {name} {what}", self.pk()))
    }

    pub(super) fn opt_s(&self, name: &str) -> Result<Option<&str>, StoreError> {
        match self.0.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::S(v)) => Ok(Some(v)),
            Some(_) => Err(self.corrupt(name, "is not a string")),
        }
    }

    pub(super) fn s(&self, name: &str) -> Result<&str, StoreError> {
        self.opt_s(name)?.ok_or_else(|| self.corrupt(name, "is missing"))
    }

    pub(super) fn opt_n(&self, name: &str) -> Result<Option<i64>, StoreError> {
        match self.0.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::N(v)) => v
                .parse()
                .map(Some)
                .map_err(|_| self.corrupt(name, "is not a whole number")),
            Some(_) => Err(self.corrupt(name, "is not a number")),
        }
    }

    pub(super) fn n(&self, name: &str) -> Result<i64, StoreError> {
        self.opt_n(name)?.ok_or_else(|| self.corrupt(name, "is missing"))
    }

    fn count(&self, name: &str) -> Result<u32, StoreError> {
        u32::try_from(self.opt_n(name)?.unwrap_or(0)).map_err(|_| self.corrupt(name, "is out of range"))
    }

    pub(super) fn status(&self) -> Result<Status, StoreError> {
        self.s("status")?
            .parse()
            .map_err(|_| self.corrupt("status", "is not a status"))
    }
}

/// The record of an item, without its body.
pub(super) fn record_of(item: &Item) -> Result<Record, StoreError> {
    let f = Fields(item);
    let headers = match f.opt_s("headers")? {
        Some(text) => {
            serde_json::from_str(text).map_err(|_| f.corrupt("headers", "is not a JSON list of pairs"))?
        }
        None => Vec::new(),
    };
    Ok(Record {
        source: SourceName::parse(f.s("source")?).map_err(|_| f.corrupt("source", "is not a source name"))?,
        event_id: EventId::parse(f.s("event_id")?)
            .map_err(|_| f.corrupt("event_id", "is not an event id"))?,
        event_type: f.opt_s("event_type")?.map(str::to_owned),
        status: f.status()?,
        payload_sha256: match item.get("payload_sha256") {
            // Written since the write units were counted: the 32 bytes (32 bytes less in every write of the item).
            Some(AttributeValue::B(b)) => hex::encode(b.as_ref()),
            _ => f.s("payload_sha256")?.to_owned(),
        },
        headers,
        received_at: f.n("received_at")?,
        updated_at: f.n("updated_at")?,
        attempts: f.count("attempts")?,
        replays: f.count("replays")?,
        lease_owner: f.opt_s("lease_owner")?.map(str::to_owned),
        lease_until: f.opt_n("lease_until")?,
        next_attempt_at: f.opt_n("next_attempt_at")?,
        last_error: f.opt_s("last_error")?.map(str::to_owned),
        completed_at: f.opt_n("completed_at")?,
        expires_at: f.opt_n("expires_at")?.map(|secs| secs.saturating_mul(1000)),
        notified_at: f.opt_n("notified_at")?,
        replayed_at: f.opt_n("replayed_at")?,
        origin: match f.opt_s("origin")? {
            None => Origin::Webhook,
            Some(o) => o.parse().map_err(|_| f.corrupt("origin", "is not an origin"))?,
        },
        resent_of: f
            .opt_s("resent_of")?
            .map(|id| EventId::parse(id).map_err(|_| f.corrupt("resent_of", "is not an event id")))
            .transpose()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_seconds_round_down() {
        assert_eq!(secs(1_999), 1);
        assert_eq!(secs(2_000), 2);
        assert_eq!(secs(-1), -1);
    }

    #[test]
    fn a_payload_hash_is_stored_as_its_bytes_and_read_back_as_hex_as_older_text_is() {
        let hex = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        let stored = digest(hex);
        assert!(matches!(&stored, AttributeValue::B(b) if b.as_ref().len() == 32));
        // Anything else is kept as it is: an upper-case or short value would not round-trip through bytes.
        assert_eq!(digest("h"), s("h"));
        assert_eq!(digest(&hex.to_uppercase()), s(hex.to_uppercase()));
        let item = |sha: AttributeValue| {
            Item::from([
                ("pk".to_owned(), s("stripe#evt_1")),
                ("source".to_owned(), s("stripe")),
                ("event_id".to_owned(), s("evt_1")),
                ("status".to_owned(), s("RECEIVED")),
                ("payload_sha256".to_owned(), sha),
                ("received_at".to_owned(), n(1)),
                ("updated_at".to_owned(), n(1)),
                ("attempts".to_owned(), n(0)),
                ("replays".to_owned(), n(0)),
            ])
        };
        assert_eq!(record_of(&item(stored)).unwrap().payload_sha256, hex);
        assert_eq!(record_of(&item(s(hex))).unwrap().payload_sha256, hex);
    }
}
