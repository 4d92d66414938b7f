//! Sentry integration platform: `Sentry-Hook-Signature` = hex HMAC-SHA256 of the raw body, keyed with the
//! integration's client secret. `Sentry-Hook-Timestamp` is sent but not signed, so it is not checked. The id is
//! the body's SHA-256 (`Request-ID` is new on every attempt); the type is `Sentry-Hook-Resource` and the body's
//! `action` as `issue.created`. The installation webhook is an ordinary event; nothing needs a particular answer.
//! <https://docs.sentry.io/organization/integrations/integration-platform/webhooks/>

use http::HeaderName;

use crate::families::{Family, Hmac, Signature};
use crate::json::{at_pointers, Leaf};
use crate::providers::{Example, Identify, Preset};
use crate::request::{Identified, Request};
use sha2::Digest as _;

use crate::encoding::Encoding;
use crate::errors::IdError;
use crate::identity::{type_from_header, Identity};
use crate::mac::Algorithm;

const REQUEST_ID: HeaderName = HeaderName::from_static("request-id");
const RESOURCE: HeaderName = HeaderName::from_static("sentry-hook-resource");

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("sentry-hook-signature", "", Encoding::Hex),
        Algorithm::Sha256,
    ));
    Preset {
        kept: vec![
            REQUEST_ID,
            RESOURCE,
            HeaderName::from_static("sentry-hook-timestamp"),
        ],
        // The id is the hash of what Sentry signs: a resend under a fresh id cannot be.
        resendable: false,
        // An issue created: the type is `Sentry-Hook-Resource` and `action` (`Request-ID` is kept, not the id).
        example: Some(Example {
            body: r#"{"action":"created","installation":{"uuid":"7a485448-a9e2-4c85-8a3c-4f44175783c9"},"data":{"issue":{"id":"1170820242","shortId":"PYTHON-Z","title":"ZeroDivisionError: division by zero","culprit":"app.views in index","level":"error","status":"unresolved","platform":"python","project":{"id":"1","name":"python","slug":"python"},"web_url":"https://sentry.io/organizations/acme/issues/1170820242/"}},"actor":{"type":"application","id":"sentry","name":"Sentry"}}"#,
            content_type: "application/json",
            headers: &[
                ("request-id", "{id}"),
                ("sentry-hook-resource", "issue"),
                ("sentry-hook-timestamp", "{now}"),
            ],
        }),
        ..Preset::new("sentry", family, Identify::Custom(identify))
    }
}

/// The id is the hex SHA-256 of the body, what Sentry signs: Sentry makes a new `Request-ID` for every attempt of one
/// event (its task retries `send_webhooks`, which builds the headers anew), so that id would run a retried event
/// twice. `Request-ID` is kept with the event.
fn identify(req: &Request) -> Result<Identified, IdError> {
    let event_id = hex::encode(sha2::Sha256::digest(req.body));
    let resource = type_from_header(req.headers, &RESOURCE)?;
    let action = match at_pointers(req.body, &["/action"]) {
        Ok(mut found) => match found.pop().flatten() {
            Some(Leaf::String(s)) if !s.is_empty() => Some(s),
            _ => None,
        },
        Err(_) => None,
    };
    let event_type = match (resource, action) {
        (Some(resource), Some(action)) => Some(format!("{resource}.{action}")),
        (resource, _) => resource,
    };
    Ok(Identified::One(Identity { event_id, event_type }))
}
