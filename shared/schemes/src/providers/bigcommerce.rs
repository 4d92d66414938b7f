//! BigCommerce: nothing is signed; a hook's custom `headers` are sent on every callback "so destination URIs can
//! be secured with basic authentication": `Authorization: Basic` checked against `user:password` secrets (any
//! other custom header is the `token` family). The id is the body's `hash` (SHA-1 of the event metadata, the same
//! when a hook fires twice for one event), the type its `scope` (`store/order/created`). No handshake.
//! <https://developer.bigcommerce.com/docs/integrations/webhooks>

use crate::families::{Family, Token};
use crate::providers::{Identify, Preset};

pub(super) fn preset() -> Preset {
    Preset::new(
        "bigcommerce",
        Family::Token(Token::basic()),
        Identify::at("json:/hash", Some("json:/scope")),
    )
}
