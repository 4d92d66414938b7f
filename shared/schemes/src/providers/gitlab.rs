//! GitLab: no signature; `X-Gitlab-Token` carries the webhook's secret token as configured, compared in constant
//! time. The id is `Idempotency-Key` (GitLab 17.4+, the same on every retry); an older GitLab sends none, and the
//! id is then the hex SHA-256 of the body. The type is `X-Gitlab-Event` (`Push Hook`). No timestamp, no handshake.
//! (GitLab's newer, optional signing token follows Standard Webhooks: such a source uses `standard-webhooks`.)
//! <https://docs.gitlab.com/user/project/integrations/webhooks/#delivery-headers>

use http::HeaderName;
use sha2::{Digest, Sha256};

use crate::families::{Family, Token};
use crate::providers::{Identify, Preset};
use crate::request::{Identified, Request};
use crate::errors::IdError;
use crate::identity::{id_from_header, type_from_header, Identity};

const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
const EVENT: HeaderName = HeaderName::from_static("x-gitlab-event");

pub(super) fn preset() -> Preset {
    Preset {
        kept: vec![
            IDEMPOTENCY_KEY,
            EVENT,
            HeaderName::from_static("x-gitlab-event-uuid"),
            HeaderName::from_static("x-gitlab-webhook-uuid"),
        ],
        // A token signs nothing: whoever holds it could send any body under any id.
        resendable: true,
        ..Preset::new(
            "gitlab",
            Family::Token(Token::header("x-gitlab-token")),
            Identify::Custom(identify),
        )
    }
}

fn identify(req: &Request) -> Result<Identified, IdError> {
    let event_id = if req.headers.contains_key(IDEMPOTENCY_KEY) {
        id_from_header(req.headers, &IDEMPOTENCY_KEY)?
    } else {
        hex::encode(Sha256::digest(req.body))
    };
    let event_type = type_from_header(req.headers, &EVENT)?;
    Ok(Identified::One(Identity { event_id, event_type }))
}
