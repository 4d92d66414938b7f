//! Where the generic schemes find an event's id and type ([`Locator`]: a header, a JSON pointer, a form field, a
//! query parameter or the body's hash), as configuration spells it, and the lookup itself.

use std::str::FromStr;

use http::HeaderName;

use crate::errors::{IdError, ParseError};
use crate::identity::{id_from_header, type_from_header, valid_id, Body, Identity};
use crate::request::Request;

/// Where the generic scheme finds an event id or type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Locator {
    /// The first value of a request header.
    Header(HeaderName),
    /// An RFC 6901 JSON pointer into the body, e.g. `/id`; a string or a number.
    Json(String),
    /// The hex SHA-256 of the body: for senders without ids (identical bodies are then one event).
    BodySha256,
    /// A field of a form-encoded body (`form:MessageSid`).
    Form(String),
    /// A query parameter of the URL (`query:id`).
    Query(String),
}

impl FromStr for Locator {
    type Err = ParseError;
    /// `header:X-Acme-Delivery`, `json:/id` or `sha256`.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        if s == "sha256" {
            return Ok(Locator::BodySha256);
        }
        if let Some(name) = s.strip_prefix("header:") {
            return HeaderName::from_bytes(name.as_bytes())
                .map(Locator::Header)
                .map_err(|_| ParseError(format!("{name:?} is not a valid header name")));
        }
        if let Some(pointer) = s.strip_prefix("json:") {
            if !pointer.starts_with('/') {
                return Err(ParseError(format!(
                    "{pointer:?} is not a JSON pointer to a field (it must start with '/', e.g. \"json:/id\")"
                )));
            }
            return Ok(Locator::Json(pointer.to_owned()));
        }
        if let Some(name) = s.strip_prefix("form:").filter(|n| !n.is_empty()) {
            return Ok(Locator::Form(name.to_owned()));
        }
        if let Some(name) = s.strip_prefix("query:").filter(|n| !n.is_empty()) {
            return Ok(Locator::Query(name.to_owned()));
        }
        Err(ParseError(format!(
            "unknown locator {s:?} (expected \"header:NAME\", \"json:/POINTER\", \"form:NAME\", \"query:NAME\" or \"sha256\")"
        )))
    }
}

/// The id and type where the locators say.
pub(crate) fn locate(req: &Request, id: &Locator, event_type: Option<&Locator>) -> Result<Identity, IdError> {
    let pointers: Vec<&str> = [Some(id), event_type]
        .into_iter()
        .filter_map(|locator| match locator {
            Some(Locator::Json(pointer)) => Some(pointer.as_str()),
            _ => None,
        })
        .collect();
    let body = Body::new(req.body, &pointers);
    let event_id = match id {
        Locator::Header(name) => id_from_header(req.headers, name)?,
        Locator::Json(pointer) => body.id_at(pointer)?,
        Locator::BodySha256 => body.sha256_hex(),
        Locator::Form(name) => {
            let place = format!("form {name}");
            valid_id(
                &place,
                req.form(name).ok_or_else(|| IdError::Missing(place.clone()))?,
            )?
        }
        Locator::Query(name) => {
            let place = format!("query {name}");
            valid_id(
                &place,
                req.query(name).ok_or_else(|| IdError::Missing(place.clone()))?,
            )?
        }
    };
    let event_type = match event_type {
        None => None,
        Some(Locator::Header(name)) => type_from_header(req.headers, name)?,
        Some(Locator::Json(pointer)) => body.type_at(pointer)?,
        Some(Locator::BodySha256) => Some(body.sha256_hex()),
        Some(Locator::Form(name)) => req.form(name).filter(|t| !t.is_empty()),
        Some(Locator::Query(name)) => req.query(name).filter(|t| !t.is_empty()),
    };
    Ok(Identity { event_id, event_type })
}
