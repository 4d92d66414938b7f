//! Docusign Connect (HMAC): `X-DocuSign-Signature-1` ... `-100`, one header per active Connect HMAC key, each the
//! base64 HMAC-SHA256 of the raw body under that key as written; any header may match any configured key (a
//! rotation in any order passes). No timestamp is signed. The JSON SIM body has no event id and its `retryCount`
//! changes per retry, so the id is `data.envelopeId:event:generatedDateTime`; the type is `event`
//! (`envelope-completed`). No handshake, no required answer.
//! <https://developers.docusign.com/platform/webhooks/connect/validate>

use http::HeaderName;
use serde_json::Value;

use crate::families::{Custom, Family, Signer};
use crate::providers::{Example, Identify, Preset};
use crate::request::{Credentials, Identified, Request, Signed};
use crate::clock::Clock;
use crate::encoding::{decode, encode, Encoding};
use crate::errors::{IdError, VerifyError};
use crate::identity::{valid_id, Identity};
use crate::mac::{mac, verify_mac, Algorithm};

/// The signature headers' common prefix; the suffix is the key's number.
const PREFIX: &str = "x-docusign-signature-";

pub(super) fn preset() -> Preset {
    let family = Family::Custom(Custom {
        verify,
        has_timestamp: false,
        sign: Some(sign),
    });
    Preset {
        // A JSON SIM envelope message: the id is the envelope, event and generation time.
        example: Some(Example {
            body: r#"{"event":"{type}","apiVersion":"v2.1","uri":"/restapi/v2.1/accounts/9a4b1c2d-0000-4e5f-8a9b-0c1d2e3f4a5b/envelopes/{id}","retryCount":0,"configurationId":10418365,"generatedDateTime":"2023-11-14T22:13:19.4510000Z","data":{"accountId":"9a4b1c2d-0000-4e5f-8a9b-0c1d2e3f4a5b","userId":"5d1e2f3a-1111-4b2c-9d3e-4f5a6b7c8d9e","envelopeId":"{id}"}}"#,
            content_type: "application/json",
            headers: &[],
        }),
        ..Preset::new("docusign", family, Identify::Custom(identify))
    }
}

fn verify(creds: &Credentials, req: &Request, _: Clock) -> Result<(), VerifyError> {
    let mut present = false;
    let mut candidates = Vec::new();
    for (name, value) in req.headers {
        let Some(n) = name.as_str().strip_prefix(PREFIX) else {
            continue;
        };
        if n.is_empty() || n.len() > 3 || !n.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        present = true;
        if let Some(tag) = std::str::from_utf8(value.as_bytes())
            .ok()
            .and_then(|v| decode(Encoding::Base64, v))
        {
            candidates.push(tag);
        }
    }
    let header = HeaderName::from_static("x-docusign-signature-1");
    if !present {
        return Err(VerifyError::MissingHeader(header.to_string()));
    }
    verify_mac(Algorithm::Sha256, &creds.secrets, &[req.body], &candidates, &header)
}

/// Signs like Connect with one key: `X-DocuSign-Signature-1`.
fn sign(signer: &Signer, _: &Credentials, req: &Request, _: &Identity, _: i64) -> Signed {
    let Signer::Secret(key) = signer else {
        return Signed::default();
    };
    let tag = mac(Algorithm::Sha256, key, &[req.body]);
    Signed {
        headers: vec![
            (HeaderName::from_static("x-docusign-signature-1"), encode(Encoding::Base64, &tag)),
            (HeaderName::from_static("x-authorization-digest"), "HMACSHA256".to_owned()),
        ],
        body: None,
    }
}

/// The envelope, event and generation time: what stays the same when Connect retries a message.
fn identify(req: &Request) -> Result<Identified, IdError> {
    let body: Value = serde_json::from_slice(req.body).map_err(|_| IdError::MalformedBody)?;
    let text = |pointer: &str| body.pointer(pointer).and_then(Value::as_str).filter(|s| !s.is_empty());
    let event = text("/event").ok_or_else(|| IdError::Missing("json /event".to_owned()))?;
    let generated =
        text("/generatedDateTime").ok_or_else(|| IdError::Missing("json /generatedDateTime".to_owned()))?;
    let envelope = text("/data/envelopeId").unwrap_or_default();
    // Recipient events of parallel recipients can be generated at one instant: their recipient tells them apart
    // (and stays the same across retries).
    let recipient = text("/data/recipientId").map(|r| format!(":{r}")).unwrap_or_default();
    let event_id = valid_id(
        "json /data/envelopeId:/event:/generatedDateTime",
        format!("{envelope}:{event}:{generated}{recipient}"),
    )?;
    Ok(Identified::One(Identity {
        event_id,
        event_type: Some(event.to_owned()),
    }))
}
