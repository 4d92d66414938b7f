//! Postmark signs nothing: the user writes Basic credentials into the webhook URL
//! (`https://user:pass@host/path`) and Postmark sends them as `Authorization: Basic`; the secret is
//! `user:password`. No event id is sent (`MessageID` is shared by a message's events), so the id is the hex
//! SHA-256 of the body; the type is `RecordType` (none on inbound messages). No handshake.
//! <https://postmarkapp.com/developer/webhooks/webhooks-overview>

use crate::families::{Family, Token};
use crate::providers::{Identify, Preset};

pub(super) fn preset() -> Preset {
    Preset::new(
        "postmark",
        Family::Token(Token::basic()),
        Identify::at("sha256", Some("json:/RecordType")),
    )
}
