//! What the console's URLs carry: the events list's filters and its page cursor, one event's key, and the
//! percent-encoding of the links that carry them back.

use serde::Deserialize;

use inbox_core::model::{EventId, EventKey, SourceName, Status};
use inbox_core::ports::{Cursor, ListFilter};

use crate::error::ConsoleError;

/// The filters of the events list, as they appear in its URL (every one optional, empty meaning unset).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Filters {
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub status: String,
    #[serde(default, rename = "type")]
    pub event_type: String,
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub to: String,
    #[serde(default)]
    pub before: String,
}

impl Filters {
    /// The port's filter, parsed once here; a bad value is the operator's 400, naming the field.
    pub(crate) fn parse(&self, limit: usize) -> Result<ListFilter, ConsoleError> {
        let bad =
            |field: &str, why: &dyn std::fmt::Display| ConsoleError::BadRequest(format!("{field}: {why}"));
        let opt = |s: &str| Some(s.trim()).filter(|s| !s.is_empty()).map(str::to_owned);
        Ok(ListFilter {
            status: opt(&self.status)
                .map(|s| s.parse::<Status>())
                .transpose()
                .map_err(|e| bad("status", &e))?,
            source: opt(&self.source)
                .map(|s| SourceName::parse(&s))
                .transpose()
                .map_err(|e| bad("source", &e))?,
            limit,
            event_type: opt(&self.event_type),
            event_id: opt(&self.id)
                .map(|s| EventId::parse(&s))
                .transpose()
                .map_err(|e| bad("id", &e))?,
            received_from: opt(&self.from)
                .map(|s| parse_time(&s).ok_or_else(|| bad("from", &TIME_FORMAT)))
                .transpose()?,
            received_to: opt(&self.to)
                .map(|s| parse_time(&s).ok_or_else(|| bad("to", &TIME_FORMAT)))
                .transpose()?,
            before: opt(&self.before)
                .map(|s| parse_cursor(&s).ok_or_else(|| bad("before", &"not a page cursor")))
                .transpose()?,
        })
    }

    /// The query string of these filters (the cursor left out unless `with_cursor`).
    pub(crate) fn query(&self, with_cursor: bool) -> String {
        let mut pairs = vec![
            ("source", &self.source),
            ("status", &self.status),
            ("type", &self.event_type),
            ("id", &self.id),
            ("from", &self.from),
            ("to", &self.to),
        ];
        if with_cursor {
            pairs.push(("before", &self.before));
        }
        pairs
            .into_iter()
            .filter(|(_, v)| !v.trim().is_empty())
            .map(|(k, v)| format!("{k}={}", encode(v.trim())))
            .collect::<Vec<_>>()
            .join("&")
    }
}

const TIME_FORMAT: &str = "a time is RFC 3339 in UTC (2026-12-01T09:30:00Z) or YYYY-MM-DDTHH:MM (UTC)";

/// RFC 3339 in UTC, or what an `<input type="datetime-local">` sends (`2026-12-01T09:30`, read as UTC).
fn parse_time(text: &str) -> Option<i64> {
    inbox_core::time::parse_rfc3339(text)
        .or_else(|| inbox_core::time::parse_rfc3339(&format!("{text}Z")))
        .or_else(|| inbox_core::time::parse_rfc3339(&format!("{text}:00Z")))
}

/// A cursor as it travels in a URL: `received_at:source:event_id` (source names hold no ':').
pub(crate) fn cursor_text(c: &Cursor) -> String {
    format!("{}:{}:{}", c.received_at, c.source, c.event_id)
}

fn parse_cursor(text: &str) -> Option<Cursor> {
    let (at, rest) = text.split_once(':')?;
    let (source, id) = rest.split_once(':')?;
    Some(Cursor {
        received_at: at.parse().ok()?,
        source: SourceName::parse(source).ok()?,
        event_id: EventId::parse(id).ok()?,
    })
}

/// Everything but RFC 3986's unreserved characters is percent-encoded in a query string's values.
const QUERY_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Percent-encodes everything but the unreserved characters, for query strings.
pub(crate) fn encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, QUERY_VALUE).to_string()
}

/// The link to one event's page.
pub(crate) fn event_link(key: &EventKey) -> String {
    format!(
        "/event?source={}&id={}",
        encode(key.source.as_str()),
        encode(key.event_id.as_str())
    )
}

/// One event, as its page's URL names it.
#[derive(Debug, Deserialize)]
pub(crate) struct KeyQuery {
    #[serde(default)]
    pub(crate) source: String,
    #[serde(default)]
    pub(crate) id: String,
    /// What the last action did, said once on the page it redirected to.
    pub(crate) flash: Option<String>,
}

impl KeyQuery {
    pub(crate) fn key(&self) -> Result<EventKey, ConsoleError> {
        let source =
            SourceName::parse(&self.source).map_err(|e| ConsoleError::BadRequest(format!("source: {e}")))?;
        let id = EventId::parse(&self.id).map_err(|e| ConsoleError::BadRequest(format!("id: {e}")))?;
        Ok(EventKey::new(source, id))
    }
}
