//! Linear: `Linear-Signature` = hex HMAC-SHA256 of the raw body, keyed with the webhook's signing secret as
//! text. The timestamp is the body's `webhookTimestamp` (unix milliseconds, inside the signed bytes), refused more
//! than 60 s from now as Linear's SDK does; the `Linear-Timestamp` header is not trusted. The id is
//! `Linear-Delivery`, which the signature does not cover: within the 60 s a captured delivery can be sent again
//! under a fresh `Linear-Delivery`, so the preset is `resendable` (the resent-body guard marks the same body under
//! another id; the body's `webhookTimestamp`, in ms, sets distinct events apart). The type is the body's `type` and
//! `action` as `Issue.create`. No handshake.
//! <https://linear.app/developers/webhooks>

use http::HeaderName;

use crate::families::{At, Family, Hmac, SecretEncoding, Signature, Template, Timestamp, Unit};
use crate::json::{at_pointers, Leaf};
use crate::providers::{Example, Identify, Preset};
use crate::request::{Identified, Request};
use crate::encoding::Encoding;
use crate::errors::IdError;
use crate::identity::{id_from_header, Identity};
use crate::mac::Algorithm;

const DELIVERY: HeaderName = HeaderName::from_static("linear-delivery");

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac {
        signature: Signature::header("linear-signature", "", Encoding::Hex),
        signed: Template::body(),
        algorithm: Algorithm::Sha256,
        timestamp: Some(Timestamp {
            at: Some(At::Json("/webhookTimestamp".to_owned())),
            unit: Unit::Millis,
        }),
        secret: SecretEncoding::Raw,
    });
    Preset {
        tolerance_secs: Some(60),
        // The id is an unsigned header.
        resendable: true,
        kept: vec![
            DELIVERY,
            HeaderName::from_static("linear-event"),
            HeaderName::from_static("linear-timestamp"),
        ],
        // An issue created: the id is the `Linear-Delivery` header, the signed time `webhookTimestamp`.
        example: Some(Example {
            body: r#"{"action":"create","actor":{"id":"2e6eea91-1111-0000-9486-acea0603064d","type":"user","name":"Ada Lovelace"},"createdAt":"2023-11-14T22:13:19.812Z","data":{"id":"9cfb482a-81e3-4154-b5b9-2c805e70a02d","number":42,"title":"Webhook inbox drops events","identifier":"ENG-42","teamId":"72b2a2dc-6f4f-4423-9d34-24b5bd10634a"},"url":"https://linear.app/acme/issue/ENG-42/webhook-inbox-drops-events","type":"Issue","organizationId":"e6b4c6a1-7d0e-4b0f-8f3a-2a1b3c4d5e6f","webhookTimestamp":{now_ms},"webhookId":"000042e3-d123-4980-b49f-8e140eef9329"}"#,
            content_type: "application/json; charset=utf-8",
            headers: &[
                ("linear-delivery", "{id}"),
                ("linear-event", "Issue"),
                ("linear-timestamp", "{now_ms}"),
            ],
        }),
        ..Preset::new("linear", family, Identify::Custom(identify))
    }
}

fn identify(req: &Request) -> Result<Identified, IdError> {
    let event_id = id_from_header(req.headers, &DELIVERY)?;
    let mut found = at_pointers(req.body, &["/type", "/action"])
        .map_err(|_| IdError::MalformedBody)?
        .into_iter()
        .map(|leaf| match leaf {
            Some(Leaf::String(s)) if !s.is_empty() => Some(s),
            _ => None,
        });
    let event_type = match (found.next().flatten(), found.next().flatten()) {
        (Some(kind), Some(action)) => Some(format!("{kind}.{action}")),
        (kind, _) => kind,
    };
    Ok(Identified::One(Identity { event_id, event_type }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use http::{HeaderMap, HeaderValue, Uri};

    use crate::request::{Credentials, Request};
    use crate::{Key, Scheme, VerifyError};

    #[test]
    fn the_timestamp_must_be_a_number_in_the_body() {
        let scheme = Scheme::named("linear").unwrap();
        let uri = Uri::from_static("/webhooks/linear");
        let creds = Credentials::secrets(vec![Key::new(b"lin_wh_secret".to_vec())]);
        for body in [
            &br#"{"type":"Issue","action":"create"}"#[..],
            br#"{"type":"Issue","action":"create","webhookTimestamp":1.7e12}"#,
        ] {
            let mut headers = HeaderMap::new();
            // The header is not trusted: a fresh one does not stand in for the body's.
            headers.insert("linear-timestamp", HeaderValue::from_static("1700000000000"));
            headers.insert("linear-signature", HeaderValue::from_static("00"));
            let req = Request::post(&uri, &headers, body);
            let refused = scheme.verify_request(&creds, &req, 1_700_000_000, 60, None);
            assert!(
                matches!(refused, Err(VerifyError::MissingHeader(_) | VerifyError::MalformedHeader(_))),
                "{refused:?}"
            );
        }
    }
}
