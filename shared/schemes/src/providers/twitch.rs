//! Twitch EventSub webhooks: `Twitch-Eventsub-Message-Signature: sha256={hex HMAC-SHA256 of message id +
//! timestamp + raw body}`, keyed with the subscription's secret, where the timestamp is
//! `Twitch-Eventsub-Message-Timestamp`, RFC 3339 with nanoseconds: older than 10 minutes is refused, as Twitch
//! says. By `Twitch-Eventsub-Message-Type`: a `notification` is stored under its message id with the
//! subscription type (a batched one, `events[]`, as one event per item under its `id`); a `revocation` is stored
//! under its message id with type `revocation`; a `webhook_callback_verification` is answered with its
//! `challenge` as text and never stored.
//! <https://dev.twitch.tv/docs/eventsub/handling-webhook-events/>

use http::HeaderName;
use serde_json::value::RawValue;

use crate::families::{Custom, Family, Signer};
use crate::time::unix_of_rfc3339;
use crate::providers::{raw_at, Identify, Preset, MAX_BATCH_ITEMS};
use crate::request::{Answer, Credentials, Identified, Item, Request, Signed};
use crate::clock::Clock;
use crate::encoding::{decode, Encoding};
use crate::errors::{IdError, VerifyError};
use crate::headers::{header_first, header_values};
use crate::identity::{valid_id, Identity};
use crate::mac::{mac, verify_mac, Algorithm};

const ID: &str = "twitch-eventsub-message-id";
const TIMESTAMP: &str = "twitch-eventsub-message-timestamp";
const SIGNATURE: &str = "twitch-eventsub-message-signature";
const TYPE: &str = "twitch-eventsub-message-type";
const SUBSCRIPTION_TYPE: &str = "twitch-eventsub-subscription-type";
const SUBSCRIPTION_VERSION: &str = "twitch-eventsub-subscription-version";
const PREFIX: &str = "sha256=";

/// `now_unix` as Twitch writes it: RFC 3339, UTC, nanoseconds.
fn rfc3339_of_unix(now_unix: i64) -> String {
    crate::time::rfc3339_utc_with(now_unix, ".000000000")
}

fn verify(creds: &Credentials, req: &Request, clock: Clock) -> Result<(), VerifyError> {
    let signature = HeaderName::from_static(SIGNATURE);
    let timestamp_header = HeaderName::from_static(TIMESTAMP);
    let candidates: Vec<Vec<u8>> = header_values(req.headers, &signature)?
        .into_iter()
        .filter_map(|v| v.trim().strip_prefix(PREFIX).and_then(|hex| decode(Encoding::Hex, hex)))
        .collect();
    let id = header_first(req.headers, &HeaderName::from_static(ID))?;
    let timestamp = header_first(req.headers, &timestamp_header)?;
    // Stale first: a replayed message is refused as stale, whatever its signature.
    let unix = unix_of_rfc3339(timestamp.trim())
        .ok_or_else(|| crate::headers::malformed(&timestamp_header, "not an RFC 3339 time"))?;
    clock.check_unix(unix)?;
    verify_mac(
        Algorithm::Sha256,
        &creds.secrets,
        &[id.as_bytes(), timestamp.as_bytes(), req.body],
        &candidates,
        &signature,
    )
}

/// Signs like Twitch: a notification of `identity.event_type` under the message id `identity.event_id`.
fn sign(signer: &Signer, _: &Credentials, req: &Request, identity: &Identity, now_unix: i64) -> Signed {
    let Signer::Secret(key) = signer else {
        return Signed::default();
    };
    let timestamp = rfc3339_of_unix(now_unix);
    let tag = mac(
        Algorithm::Sha256,
        key,
        &[identity.event_id.as_bytes(), timestamp.as_bytes(), req.body],
    );
    let mut headers = vec![
        (HeaderName::from_static(ID), identity.event_id.clone()),
        (HeaderName::from_static(TYPE), "notification".to_owned()),
        (HeaderName::from_static(TIMESTAMP), timestamp),
        (HeaderName::from_static(SIGNATURE), format!("{PREFIX}{}", hex::encode(tag))),
    ];
    if let Some(t) = &identity.event_type {
        headers.push((HeaderName::from_static(SUBSCRIPTION_TYPE), t.clone()));
    }
    Signed { headers, body: None }
}

/// The callback verification: its `challenge`, as text (after the signature has been checked).
fn challenge(req: &Request, _creds: &Credentials) -> Option<Answer> {
    if req.header(TYPE)? != "webhook_callback_verification" {
        return None;
    }
    let value: serde_json::Value = serde_json::from_slice(req.body).ok()?;
    Some(match value.get("challenge") {
        Some(serde_json::Value::String(c)) => Answer::text(c.as_bytes()),
        _ => Answer::empty(400),
    })
}

fn identify(req: &Request) -> Result<Identified, IdError> {
    let header = |name: &str| req.header(name).map(str::to_owned);
    let message_id = || {
        valid_id(
            &format!("header {ID}"),
            header(ID).ok_or_else(|| IdError::Missing(format!("header {ID}")))?,
        )
    };
    if req.header(TYPE) == Some("revocation") {
        return Ok(Identified::One(Identity {
            event_id: message_id()?,
            event_type: Some("revocation".to_owned()),
        }));
    }
    let text = std::str::from_utf8(req.body).map_err(|_| IdError::MalformedBody)?;
    let root: &RawValue = serde_json::from_str(text).map_err(|_| IdError::MalformedBody)?;
    let subscription_type = header(SUBSCRIPTION_TYPE).filter(|t| !t.is_empty()).or_else(|| {
        let value: serde_json::Value = serde_json::from_str(raw_at(root, "/subscription/type")?.get()).ok()?;
        value.as_str().map(str::to_owned)
    });
    let Some(events) = raw_at(root, "/events") else {
        return Ok(Identified::One(Identity {
            event_id: message_id()?,
            event_type: subscription_type,
        }));
    };
    // A batched subscription: one event per element, each under its own id.
    let events: Vec<&RawValue> = serde_json::from_str(events.get())
        .map_err(|_| IdError::Missing("json /events (an array)".to_owned()))?;
    if events.is_empty() {
        return Err(IdError::Missing("json /events holds no events".to_owned()));
    }
    if events.len() > MAX_BATCH_ITEMS {
        return Err(IdError::Invalid(format!(
            "more than {MAX_BATCH_ITEMS} events in one delivery"
        )));
    }
    let mut items = Vec::with_capacity(events.len());
    for (i, event) in events.into_iter().enumerate() {
        let value: serde_json::Value = serde_json::from_str(event.get()).map_err(|_| IdError::MalformedBody)?;
        let place = format!("item {i}: json /id");
        let id = match value.get("id") {
            Some(serde_json::Value::String(s)) => s.clone(),
            _ => return Err(IdError::Missing(place)),
        };
        items.push(Item {
            identity: Identity {
                event_id: valid_id(&place, id)?,
                event_type: subscription_type.clone(),
            },
            payload: event.get().as_bytes().to_vec(),
        });
    }
    Ok(Identified::Batch(items))
}

pub(super) fn preset() -> Preset {
    let family = Family::Custom(Custom {
        verify,
        has_timestamp: true,
        sign: Some(sign),
    });
    Preset {
        tolerance_secs: Some(600),
        kept: [ID, TYPE, TIMESTAMP, SUBSCRIPTION_TYPE, SUBSCRIPTION_VERSION]
            .into_iter()
            .map(HeaderName::from_static)
            .collect(),
        after: Some(challenge),
        ..Preset::new("twitch", family, Identify::Custom(identify))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_both_ways() {
        assert_eq!(unix_of_rfc3339("2023-11-14T22:13:20.123456789Z"), Some(1_700_000_000));
        assert_eq!(unix_of_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(unix_of_rfc3339("2023-11-15T00:13:20+02:00"), Some(1_700_000_000));
        assert_eq!(unix_of_rfc3339("2000-02-29T12:00:00-01:30"), Some(951_831_000));
        for bad in ["", "2023-11-14", "2023-11-14T22:13:20", "2023-11-14T22:13:20.Z", "2023-13-14T22:13:20Z",
            "2023-11-14T22:13:20Zx", "+023-11-14T22:13:20Z", "1700000000"] {
            assert_eq!(unix_of_rfc3339(bad), None, "{bad}");
        }
        for t in [0, 951_782_400, 1_700_000_000, 4_102_444_800] {
            assert_eq!(unix_of_rfc3339(&rfc3339_of_unix(t)), Some(t));
        }
    }

    #[test]
    fn what_it_signs_verifies() {
        let key = crate::Key::new(b"s3cRe7".to_vec());
        let uri = http::Uri::from_static("/");
        let empty = http::HeaderMap::new();
        let body = br#"{"subscription":{"type":"channel.follow"},"event":{}}"#;
        let identity = Identity {
            event_id: "befa7b53".to_owned(),
            event_type: Some("channel.follow".to_owned()),
        };
        let signed = sign(
            &Signer::Secret(key.clone()),
            &Credentials::default(),
            &Request::post(&uri, &empty, body),
            &identity,
            1_700_000_000,
        );
        let mut headers = http::HeaderMap::new();
        for (name, value) in signed.headers {
            headers.insert(name, value.parse().unwrap());
        }
        let req = Request::post(&uri, &headers, body);
        let creds = Credentials::secrets(vec![key]);
        let clock = |now_unix| Clock {
            now_unix,
            tolerance_secs: 600,
        };
        verify(&creds, &req, clock(1_700_000_100)).unwrap();
        assert!(matches!(
            verify(&creds, &req, clock(1_700_000_601)),
            Err(VerifyError::Timestamp { .. })
        ));
        assert_eq!(
            identify(&req).unwrap(),
            Identified::One(identity),
            "a signed notification identifies as what was signed"
        );
    }
}
