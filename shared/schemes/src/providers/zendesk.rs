//! Zendesk: `X-Zendesk-Webhook-Signature: base64(HMAC-SHA256(signing secret, timestamp + body))`, the timestamp
//! being `X-Zendesk-Webhook-Signature-Timestamp` as sent, an ISO 8601 UTC time (`2023-11-14T22:13:20Z`); no
//! tolerance is documented (300 s). The id is `X-Zendesk-Webhook-Invocation-Id` (one invocation keeps it over its
//! retry attempts, for event and trigger webhooks alike), which the signature does not cover: within the tolerance
//! a captured delivery can be sent again under a fresh invocation id, so the preset is `resendable` and the
//! resent-body guard marks the same body under another id. The type is the body's `type` (`zen:event-type:...`),
//! absent from trigger and automation webhooks, whose body the admin writes. No handshake, no required answer.
//! <https://developer.zendesk.com/documentation/webhooks/verifying/>

use http::HeaderName;

use crate::time::{rfc3339_utc, unix_of_rfc3339};
use crate::families::{Custom, Family, Signer};
use crate::providers::{Identify, Preset};
use crate::request::{Credentials, Request, Signed};
use crate::clock::Clock;
use crate::encoding::{decode, encode, Encoding};
use crate::headers::{header_first, malformed};
use crate::identity::Identity;
use crate::mac::{mac, verify_mac, Algorithm};
use crate::errors::VerifyError;

static SIGNATURE: HeaderName = HeaderName::from_static("x-zendesk-webhook-signature");
static TIMESTAMP: HeaderName = HeaderName::from_static("x-zendesk-webhook-signature-timestamp");

pub(super) fn preset() -> Preset {
    let family = Family::Custom(Custom {
        verify,
        has_timestamp: true,
        sign: Some(sign),
    });
    Preset {
        kept: vec![
            HeaderName::from_static("x-zendesk-webhook-invocation-id"),
            HeaderName::from_static("x-zendesk-webhook-id"),
            HeaderName::from_static("x-zendesk-account-id"),
            TIMESTAMP.clone(),
        ],
        // The id is an unsigned header.
        resendable: true,
        ..Preset::new(
            "zendesk",
            family,
            Identify::at("header:x-zendesk-webhook-invocation-id", Some("json:/type")),
        )
    }
}

fn verify(creds: &Credentials, req: &Request, clock: Clock) -> Result<(), VerifyError> {
    let timestamp = header_first(req.headers, &TIMESTAMP)?;
    let unix = unix_of_rfc3339(timestamp).ok_or_else(|| malformed(&TIMESTAMP, "not an ISO 8601 time"))?;
    clock.check_unix(unix)?;
    let candidates: Vec<Vec<u8>> = decode(Encoding::Base64, header_first(req.headers, &SIGNATURE)?)
        .into_iter()
        .collect();
    verify_mac(
        Algorithm::Sha256,
        &creds.secrets,
        &[timestamp.as_bytes(), req.body],
        &candidates,
        &SIGNATURE,
    )
}

/// Signs like Zendesk: the timestamp and the signature headers (the invocation id is the caller's).
fn sign(signer: &Signer, _: &Credentials, req: &Request, _: &Identity, now_unix: i64) -> Signed {
    let Signer::Secret(key) = signer else {
        return Signed::default();
    };
    let timestamp = rfc3339_utc(now_unix);
    let tag = mac(Algorithm::Sha256, key, &[timestamp.as_bytes(), req.body]);
    Signed {
        headers: vec![
            (TIMESTAMP.clone(), timestamp),
            (SIGNATURE.clone(), encode(Encoding::Base64, &tag)),
        ],
        body: None,
    }
}
