//! Bitbucket (Cloud and Data Center): `X-Hub-Signature: sha256=<hex HMAC-SHA256 of the raw body>` (SHA-256 despite
//! GitHub's header name), keyed with the webhook's secret as text. No timestamp is signed. The id is Cloud's
//! `X-Request-UUID` (the same on every `X-Attempt-Number`), else Data Center's `X-Request-Id`; the type is
//! `X-Event-Key` (`repo:push`). No handshake (Data Center's test connection is an ordinary `diagnostics:ping`).
//! <https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/#Secure-webhooks>
//! <https://confluence.atlassian.com/bitbucketserver/event-payload-938025882.html>

use http::HeaderName;

use crate::families::{Family, Hmac, Signature};
use crate::providers::{Example, Identify, Preset};
use crate::request::{Identified, Request};
use crate::encoding::Encoding;
use crate::errors::IdError;
use crate::identity::{id_from_header, type_from_header, Identity};
use crate::mac::Algorithm;

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
        // A Cloud push: the id and type are headers.
        example: Some(Example {
            body: r#"{"push":{"changes":[{"old":{"type":"branch","name":"main","target":{"type":"commit","hash":"1e65c05c1d5171631d92438a13901ca7dae9618c"}},"new":{"type":"branch","name":"main","target":{"type":"commit","hash":"c4b2b7914156a878aa7c9da452a09fb50c2091f2","message":"fix the build\n"}},"created":false,"forced":false,"closed":false,"truncated":false}]},"repository":{"type":"repository","full_name":"acme/widgets","name":"widgets","uuid":"{9c5e1f2a-3b4c-4d5e-8f90-a1b2c3d4e5f6}","is_private":true},"actor":{"type":"user","display_name":"Ada Lovelace","uuid":"{d301aafa-d676-4ee0-88be-962be7417567}"}}"#,
            content_type: "application/json",
            headers: &[
                ("x-request-uuid", "{id}"),
                ("x-event-key", "{type}"),
                ("x-hook-uuid", "2f0e4c8e-7d0a-4f55-9a4b-3f1c2d3e4f50"),
                ("x-attempt-number", "1"),
            ],
        }),
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
