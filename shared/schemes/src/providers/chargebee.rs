//! Chargebee: no signature; the webhook's HTTP Basic credentials (`user:password`, set under "Protect webhook URLs
//! with basic authentication") are the token, compared in constant time. Nothing is signed and no timestamp is
//! sent. The id is the body's `id` (Chargebee's documented duplicate key), the type `event_type`.
//! <https://apidocs.chargebee.com/docs/api/events>

use crate::families::{Family, Token};
use crate::providers::{Identify, Preset};

pub(super) fn preset() -> Preset {
    Preset::new(
        "chargebee",
        Family::Token(Token::basic()),
        Identify::at("json:/id", Some("json:/event_type")),
    )
}
