//! Intercom: `X-Hub-Signature: sha1={hex HMAC-SHA1 of the raw body}`, keyed with the app's `client_secret`; no
//! timestamp. The id is the notification's `id` (`notif_...`), the type its `topic`. Saving the endpoint URL sends
//! an unsigned `HEAD` to check it: answered 200, empty, never stored (a `ping` topic is an ordinary notification).
//! <https://developers.intercom.com/docs/references/webhooks/webhook-models>,
//! <https://developers.intercom.com/docs/webhooks/setting-up-webhooks>

use http::Method;

use crate::families::{Family, Hmac, SecretEncoding, Signature, Template};
use crate::providers::{Identify, Preset};
use crate::request::{Answer, Credentials, Request};
use crate::encoding::Encoding;
use crate::errors::VerifyError;
use crate::mac::Algorithm;

/// The URL check: a `HEAD` with nothing to verify.
fn url_check(req: &Request, _creds: &Credentials) -> Option<Result<Answer, VerifyError>> {
    (*req.method == Method::HEAD).then(|| Ok(Answer::empty(200)))
}

pub(super) fn preset() -> Preset {
    let family = Family::Hmac(Hmac {
        signature: Signature::header("x-hub-signature", "sha1=", Encoding::Hex),
        signed: Template::body(),
        algorithm: Algorithm::Sha1,
        timestamp: None,
        secret: SecretEncoding::Raw,
    });
    Preset {
        before: Some(url_check),
        // The HEAD check: `GET` routes answer `HEAD` too.
        get: true,
        ..Preset::new("intercom", family, Identify::at("json:/id", Some("json:/topic")))
    }
}
