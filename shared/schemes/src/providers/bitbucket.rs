//! Bitbucket (Cloud and Data Center): `X-Hub-Signature: sha256=<hex HMAC-SHA256 of the raw body>` (SHA-256 despite
//! GitHub's header name), keyed with the webhook's secret as text. No timestamp is signed. The id is Cloud's
//! `X-Request-UUID` (the same on every `X-Attempt-Number`), else Data Center's `X-Request-Id`; the type is
//! `X-Event-Key` (`repo:push`). No handshake (Data Center's test connection is an ordinary `diagnostics:ping`).
//! <https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/#Secure-webhooks>
//! <https://confluence.atlassian.com/bitbucketserver/event-payload-938025882.html>

use http::HeaderName;

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Identify, Preset};
use crate::request::{Identified, Request};
use crate::{id_from_header, type_from_header, Algorithm, Encoding, IdError, Identity};

const CLOUD_ID: HeaderName = HeaderName::from_static("x-request-uuid");
const DATA_CENTER_ID: HeaderName = HeaderName::from_static("x-request-id");
const EVENT_KEY: HeaderName = HeaderName::from_static("x-event-key");

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("x-hub-signature", "sha256=", Encoding::Hex),
        Algorithm::Sha256,
    ));
    Preset {
        kept: vec![CLOUD_ID, DATA_CENTER_ID, EVENT_KEY, HeaderName::from_static("x-hook-uuid")],
        // The id is an unsigned header.
        resendable: true,
        ..Preset::new("bitbucket", family, Identify::Custom(identify))
    }
}

fn identify(req: &Request) -> Result<Identified, IdError> {
    let id = if req.headers.contains_key(CLOUD_ID) {
        CLOUD_ID
    } else {
        DATA_CENTER_ID
    };
    let event_id = id_from_header(req.headers, &id)?;
    let event_type = type_from_header(req.headers, &EVENT_KEY)?;
    Ok(Identified::One(Identity { event_id, event_type }))
}
