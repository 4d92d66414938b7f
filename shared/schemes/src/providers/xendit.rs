//! Xendit: nothing is signed; `x-callback-token` carries the account's callback verification token, compared in
//! constant time. The id is the `webhook-id` header where Xendit sends one, else the body's SHA-256 (legacy
//! callbacks such as invoices carry neither an event id nor a type); the type is the body's `event`
//! (`payment.capture`) where present. No handshake.
//! <https://docs.xendit.co/api-integration/callback/setup>

use http::HeaderName;

use crate::families::{Family, Token};
use crate::json::Leaf;
use crate::providers::{Identify, Preset};
use crate::request::{Identified, Request};
use crate::errors::IdError;
use crate::identity::Identity;

const WEBHOOK_ID: HeaderName = HeaderName::from_static("webhook-id");

pub(super) fn preset() -> Preset {
    Preset {
        kept: vec![WEBHOOK_ID],
        // A token scheme whose id can be a header of its own.
        resendable: true,
        ..Preset::new(
            "xendit",
            Family::Token(Token::header("x-callback-token")),
            Identify::Custom(identify),
        )
    }
}

fn identify(req: &Request) -> Result<Identified, IdError> {
    let event_id = match req.headers.get(&WEBHOOK_ID) {
        Some(value) => crate::identity::valid_id(
            "header webhook-id",
            std::str::from_utf8(value.as_bytes())
                .map_err(|_| IdError::Invalid("header webhook-id is not UTF-8".to_owned()))?
                .to_owned(),
        )?,
        None => hex::encode(<sha2::Sha256 as sha2::Digest>::digest(req.body)),
    };
    // The type is optional: a body that is not JSON, or has no `event`, has none.
    let event_type = crate::json::at_pointers(req.body, &["/event"])
        .ok()
        .and_then(|found| found.into_iter().next().flatten())
        .and_then(|leaf| match leaf {
            Leaf::String(s) if !s.is_empty() => Some(s),
            _ => None,
        });
    Ok(Identified::One(Identity {
        event_id,
        event_type,
    }))
}
