//! Heroku app webhooks: `Heroku-Webhook-Hmac-SHA256` = base64 HMAC-SHA256 of the raw body, keyed with the
//! webhook's secret as text (an optional `Authorization` header carries a value of the user's choosing and is not
//! checked). No timestamp is signed. The id is the body's `id` (the event's, the same on every delivery attempt),
//! the type its `resource` and `action` as `release.create`. Any 2xx is success; no handshake.
//! <https://devcenter.heroku.com/articles/app-webhooks>

use crate::families::{Family, Hmac, Signature};
use crate::json::{at_pointers, Leaf};
use crate::providers::{Identify, Preset};
use crate::request::{Identified, Request};
use crate::encoding::Encoding;
use crate::errors::IdError;
use crate::identity::{valid_id, Identity};
use crate::mac::Algorithm;

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("heroku-webhook-hmac-sha256", "", Encoding::Base64),
        Algorithm::Sha256,
    ));
    Preset::new("heroku", family, Identify::Custom(identify))
}

fn identify(req: &Request) -> Result<Identified, IdError> {
    let mut found = at_pointers(req.body, &["/id", "/resource", "/action"])
        .map_err(|_| IdError::MalformedBody)?
        .into_iter()
        .map(|leaf| match leaf {
            Some(Leaf::String(s)) if !s.is_empty() => Some(s),
            _ => None,
        });
    let place = "json /id";
    let event_id = valid_id(
        place,
        found.next().flatten().ok_or_else(|| IdError::Missing(place.to_owned()))?,
    )?;
    let event_type = match (found.next().flatten(), found.next().flatten()) {
        (Some(resource), Some(action)) => Some(format!("{resource}.{action}")),
        (resource, _) => resource,
    };
    Ok(Identified::One(Identity { event_id, event_type }))
}
