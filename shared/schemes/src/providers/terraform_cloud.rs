//! HCP Terraform (Terraform Cloud) generic notifications: `X-TFE-Notification-Signature` = hex HMAC-SHA512 of the
//! raw body, keyed with the notification configuration's token. No timestamp is signed. No event id is sent: the
//! id is the hex SHA-256 of the body; the type is `notifications[0].trigger` (`run:completed`). The notification
//! with trigger `verification`, sent when a configuration is created or enabled, only needs a 2xx: it is answered
//! (200, empty) and not stored.
//! <https://developer.hashicorp.com/terraform/cloud-docs/api-docs/notification-configurations#notification-authenticity>

use crate::families::{Family, Hmac, Signature};
use crate::json::{at_pointers, Leaf};
use crate::providers::{Identify, Preset};
use crate::request::{Answer, Credentials, Request};
use crate::encoding::Encoding;
use crate::mac::Algorithm;

const TRIGGER: &str = "/notifications/0/trigger";

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac::of_body(
        Signature::header("x-tfe-notification-signature", "", Encoding::Hex),
        Algorithm::Sha512,
    ));
    Preset {
        after: Some(verification),
        ..Preset::new("terraform-cloud", family, Identify::at("sha256", Some("json:/notifications/0/trigger")))
    }
}

/// The signed `verification` notification: 200 with nothing to store.
fn verification(req: &Request, _: &Credentials) -> Option<Answer> {
    let trigger = at_pointers(req.body, &[TRIGGER]).ok()?.pop().flatten();
    matches!(trigger, Some(Leaf::String(t)) if t == "verification").then(|| Answer::empty(200))
}
