//! The pages that read: the overview, the events list, one event, and its stored body as a download.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

use inbox_core::model::{SourceName, Status};
use inbox_core::ports::{Cursor, ListFilter};

use crate::error::ConsoleError;
use crate::filters::{cursor_text, Filters, KeyQuery};
use crate::guard::Session;
use crate::router::Console;
use crate::{pages, PAGE_SIZE};

pub(crate) async fn overview(State(console): State<Arc<Console>>) -> Result<Response, ConsoleError> {
    let counts = console
        .counts
        .get(&console.ledger, &console.timeline, &console.queue)
        .await?;
    let summary = counts.summary.as_ref();
    let dead = console
        .ledger
        .list(&ListFilter {
            status: Some(Status::Dead),
            limit: 20,
            ..Default::default()
        })
        .await?;
    // Every source the config says reconciles, run yet or not; without the config, those counted here that have
    // a checkpoint (on DynamoDB only the sources with failed or dead events are counted).
    let sources: Vec<SourceName> = match &console.reconciled {
        Some(reconciled) => reconciled.clone(),
        None => {
            let mut counted: Vec<SourceName> = summary.by_source.iter().map(|(s, _, _)| s.clone()).collect();
            counted.dedup();
            counted
        }
    };
    let mut runs = Vec::new();
    for source in sources {
        let checkpoint = console.ledger.checkpoint(&source).await?;
        if checkpoint.is_some() || console.reconciled.is_some() {
            runs.push((source, checkpoint));
        }
    }
    let page = pages::overview(&pages::Overview {
        store: &console.store_name,
        summary,
        queue: counts.queue,
        timeline_note: counts.timeline_note,
        counted_at: counts.when,
        dead: &dead,
        runs: &runs,
        configured: console.reconciled.is_some(),
        now: inbox_core::time::now_ms(),
    });
    Ok(page.into_response())
}

pub(crate) async fn events(
    State(console): State<Arc<Console>>,
    Query(filters): Query<Filters>,
) -> Result<Response, ConsoleError> {
    let filter = filters.parse(PAGE_SIZE + 1)?;
    let mut events = console.ledger.list(&filter).await?;
    let next = (events.len() > PAGE_SIZE).then(|| {
        events.truncate(PAGE_SIZE);
        events.last().map(Cursor::after)
    });
    let next = next.flatten().map(|c| {
        let mut f = filters.clone();
        f.before = cursor_text(&c);
        f.query(true)
    });
    let scans = console.ledger.lists_by_scan(&filter);
    Ok(pages::events(&pages::EventsPage {
        filters: &filters,
        events: &events,
        next: next.as_deref(),
        scans,
    })
    .into_response())
}

pub(crate) async fn event(
    State(console): State<Arc<Console>>,
    axum::Extension(session): axum::Extension<Session>,
    Query(q): Query<KeyQuery>,
) -> Result<Response, ConsoleError> {
    let key = q.key()?;
    let Some(event) = console.ledger.get(&key).await? else {
        return Err(ConsoleError::NotFound);
    };
    Ok(pages::event(
        &event,
        &console.csrf(&session),
        inbox_core::time::now_ms(),
        q.flash.as_deref(),
    )
    .into_response())
}

/// The stored body as a download: an attachment of a type no browser runs, whatever the sender put in it.
pub(crate) async fn raw(
    State(console): State<Arc<Console>>,
    Query(q): Query<KeyQuery>,
) -> Result<Response, ConsoleError> {
    let key = q.key()?;
    let Some(event) = console.ledger.get(&key).await? else {
        return Err(ConsoleError::NotFound);
    };
    let name: String = format!("{}-{}", key.source, key.event_id)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(120)
        .collect();
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{name}.bin\""))
        .unwrap_or_else(|_| HeaderValue::from_static("attachment"));
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            ),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        event.payload,
    )
        .into_response())
}
