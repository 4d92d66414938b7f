//! An event's identity as the sender gives it ([`Identity`]), and the checks every id and type passes wherever it
//! is found: a header, or a JSON body read once for all the pointers asked ([`Body`]).

use std::cell::OnceCell;

use http::{HeaderMap, HeaderName};
use sha2::Digest as _;

use crate::errors::IdError;
use crate::json;

/// The sender's own id for a delivery, and its type where the scheme carries one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub event_id: String,
    pub event_type: Option<String>,
}

/// Event ids (and types) are at most this long, in bytes.
const MAX_ID_LEN: usize = 256;

/// Checks an id or type found at `place` ("header x-github-delivery", "json /id").
pub(crate) fn valid_id(place: &str, value: String) -> Result<String, IdError> {
    if value.is_empty() {
        return Err(IdError::Missing(format!("{place} is empty")));
    }
    if value.len() > MAX_ID_LEN {
        return Err(IdError::Invalid(format!(
            "{place} is longer than {MAX_ID_LEN} bytes"
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(IdError::Invalid(format!("{place} holds control characters")));
    }
    Ok(value)
}

/// The first value of a header, for ids: `None` if absent.
fn header_text(headers: &HeaderMap, name: &HeaderName) -> Result<Option<String>, IdError> {
    match headers.get(name) {
        None => Ok(None),
        Some(value) => std::str::from_utf8(value.as_bytes())
            .map(|s| Some(s.to_owned()))
            .map_err(|_| IdError::Invalid(format!("header {name} is not UTF-8"))),
    }
}

/// An optional type as found: empty is `None`. It is checked once, by [`checked_type`]: a bad type never turns
/// a verified delivery away.
fn valid_type(_place: &str, value: String) -> Result<Option<String>, IdError> {
    Ok((!value.is_empty()).then_some(value))
}

/// The event type to store, and why it was left out where it was: an optional type that is too long, holds
/// control characters or was not UTF-8 is dropped, never a reason to refuse a verified event (a 400 would be
/// answered to every retry of it, forever).
pub fn checked_type(found: Option<String>) -> (Option<String>, Option<String>) {
    let Some(value) = found else {
        return (None, None);
    };
    if value.contains(char::REPLACEMENT_CHARACTER) {
        return (None, Some("the event type is not UTF-8".to_owned()));
    }
    match valid_id("the event type", value) {
        Ok(t) => (Some(t), None),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// A required id from a header.
pub(crate) fn id_from_header(headers: &HeaderMap, name: &HeaderName) -> Result<String, IdError> {
    let place = format!("header {name}");
    match header_text(headers, name)? {
        Some(value) => valid_id(&place, value),
        None => Err(IdError::Missing(place)),
    }
}

/// An optional type from a header: absent is `None`; bytes that are not UTF-8 are kept as replacement
/// characters, for [`checked_type`] to drop.
pub(crate) fn type_from_header(headers: &HeaderMap, name: &HeaderName) -> Result<Option<String>, IdError> {
    match headers.get(name) {
        Some(value) => valid_type(
            &format!("header {name}"),
            String::from_utf8_lossy(value.as_bytes()).into_owned(),
        ),
        None => Ok(None),
    }
}

/// The body, read as JSON at most once and only if asked, for the pointers named up front.
pub(crate) struct Body<'a> {
    raw: &'a [u8],
    pointers: &'a [&'a str],
    found: OnceCell<Option<Vec<Option<json::Leaf>>>>,
}

impl<'a> Body<'a> {
    /// `pointers`: every JSON pointer the caller may ask for, so that one pass over the body finds them all.
    pub(crate) fn new(raw: &'a [u8], pointers: &'a [&'a str]) -> Self {
        Body {
            raw,
            pointers,
            found: OnceCell::new(),
        }
    }

    /// What `pointer` finds; `Err` if the body is not JSON.
    fn leaf(&self, pointer: &str) -> Result<Option<json::Leaf>, IdError> {
        let Some(i) = self.pointers.iter().position(|p| *p == pointer) else {
            // Not named up front: a pass of its own.
            let mut found = json::at_pointers(self.raw, &[pointer]).map_err(|_| IdError::MalformedBody)?;
            return Ok(found.pop().flatten());
        };
        let found = self
            .found
            .get_or_init(|| json::at_pointers(self.raw, self.pointers).ok())
            .as_ref()
            .ok_or(IdError::MalformedBody)?;
        Ok(found.get(i).cloned().flatten())
    }

    /// The text at a JSON pointer: a string, or a number as its decimal text; `None` if absent or another type.
    fn text_at(&self, pointer: &str) -> Result<Option<String>, IdError> {
        Ok(match self.leaf(pointer)? {
            Some(json::Leaf::String(s) | json::Leaf::Number(s)) => Some(s),
            _ => None,
        })
    }

    /// A required id at a JSON pointer.
    pub(crate) fn id_at(&self, pointer: &str) -> Result<String, IdError> {
        let place = format!("json {pointer}");
        match self.text_at(pointer)? {
            Some(value) => valid_id(&place, value),
            None => Err(IdError::Missing(place)),
        }
    }

    /// An optional type at a JSON pointer: absent, or a body that is not JSON, is `None`.
    pub(crate) fn type_at(&self, pointer: &str) -> Result<Option<String>, IdError> {
        match self.text_at(pointer) {
            Ok(Some(value)) => valid_type(&format!("json {pointer}"), value),
            Ok(None) | Err(_) => Ok(None),
        }
    }

    /// Like `type_at`, but only a JSON string counts.
    pub(crate) fn string_type_at(&self, pointer: &str) -> Result<Option<String>, IdError> {
        match self.leaf(pointer) {
            Ok(Some(json::Leaf::String(value))) => valid_type(&format!("json {pointer}"), value),
            _ => Ok(None),
        }
    }

    /// The hex SHA-256 of the raw body.
    pub(crate) fn sha256_hex(&self) -> String {
        hex::encode(sha2::Sha256::digest(self.raw))
    }
}
