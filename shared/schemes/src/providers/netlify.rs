//! Netlify outgoing webhooks with a JWS secret token: `X-Webhook-Signature` is a JWT, HS256 with that secret,
//! whose claims are `iss: "netlify"` and `sha256`, the hex SHA-256 of the raw body; no timestamp. The body is the
//! deploy (or form submission) object, and one deploy's events share its `id`: the id is the body's SHA-256
//! (the hash Netlify signs). The type is `X-Netlify-Event` (`deploy_building`, `deploy_created`, ...), where
//! sent. No handshake.
//! <https://docs.netlify.com/site-deploys/notifications/#payload-signature>

use http::HeaderName;
use jsonwebtoken::Algorithm;

use crate::families::jwt::{BodyHash, Jwt, JwtKey};
use crate::families::Family;
use crate::providers::{Identify, Preset};

pub(super) fn preset() -> Preset {
    let family = Family::Jwt(Jwt {
        header: HeaderName::from_static("x-webhook-signature"),
        prefix: "",
        algorithms: vec![Algorithm::HS256],
        key: JwtKey::Secret,
        issuer: Some("netlify"),
        audience_is_url: false,
        body_hash: Some(BodyHash {
            claim: "sha256",
            hex: true,
        }),
        max_age_secs: None,
    });
    Preset {
        kept: vec![HeaderName::from_static("x-netlify-event")],
        ..Preset::new(
            "netlify",
            family,
            Identify::at("sha256", Some("header:x-netlify-event")),
        )
    }
}
