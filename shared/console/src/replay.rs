//! Replay: one event from its page, or every event a filter matches after a dry run and a confirmation; each
//! through the store's conditional transition, as `inbox replay` does.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use serde::Deserialize;

use inbox_core::model::{EventKey, Status};
use inbox_core::ports::{ListFilter, Queue, Replay, Store, StoreError};

use crate::error::ConsoleError;
use crate::filters::{event_link, Filters, KeyQuery};
use crate::guard::{check_csrf, Session};
use crate::pages;
use crate::router::Console;

/// What one replay did, for the page that reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replayed {
    /// Moved to RECEIVED and sent to the queue (or left to a running `inbox serve` to notice).
    Replayed,
    /// Moved to RECEIVED, but the enqueue failed: the sweeper sends it.
    NotEnqueued,
    /// Not replayable now (another operator replayed it first, or it is not dead).
    Skipped(Option<Status>),
}

/// Replays one event as `inbox replay` does: the conditional transition, then (AWS) the enqueue; two replays at
/// once enqueue once, since only the transition's winner enqueues.
pub async fn replay_event(
    ledger: &dyn Store,
    queue: Option<&dyn Queue>,
    key: &EventKey,
    force: bool,
) -> Result<Replayed, StoreError> {
    match ledger.replay(key, force).await? {
        Replay::Replayed => {
            if let Some(queue) = queue {
                if let Err(e) = queue.enqueue(key, Duration::ZERO).await {
                    tracing::warn!(source = %key.source, event_id = %key.event_id, error = %e,
                        "console: replayed, not enqueued; the sweeper will send it");
                    return Ok(Replayed::NotEnqueued);
                }
            }
            tracing::info!(source = %key.source, event_id = %key.event_id, "console: replayed");
            Ok(Replayed::Replayed)
        }
        Replay::NotEligible(st) => Ok(Replayed::Skipped(Some(st))),
        Replay::Missing => Ok(Replayed::Skipped(None)),
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct ReplayOneForm {
    #[serde(default)]
    source: String,
    #[serde(default)]
    id: String,
    csrf: Option<String>,
    #[serde(default)]
    force: Option<String>,
}

pub(crate) async fn replay_one(
    State(console): State<Arc<Console>>,
    axum::Extension(session): axum::Extension<Session>,
    Form(form): Form<ReplayOneForm>,
) -> Result<Response, ConsoleError> {
    check_csrf(&console, &session, form.csrf.as_deref())?;
    let key = KeyQuery {
        source: form.source,
        id: form.id,
        flash: None,
    }
    .key()?;
    let outcome = replay_event(
        console.ledger.as_ref(),
        console.queue.as_deref(),
        &key,
        form.force.is_some(),
    )
    .await?;
    console.counts.forget().await;
    let flash = match outcome {
        Replayed::Replayed => "replayed",
        Replayed::NotEnqueued => "not-enqueued",
        Replayed::Skipped(_) => "skipped",
    };
    Ok(Redirect::to(&format!("{}&flash={flash}", event_link(&key))).into_response())
}

/// Which statuses a bulk replay may take, and whether it needs `force`.
fn replayable(filter: &ListFilter) -> Result<bool, ConsoleError> {
    match filter.status {
        Some(Status::Dead) => Ok(false),
        Some(Status::Completed) => Ok(true),
        _ => Err(ConsoleError::BadRequest(
            "a bulk replay takes the dead events of a filter (or the completed ones, which run their handler again): \
             filter on status DEAD or COMPLETED first"
                .into(),
        )),
    }
}

/// The dry run: how many events a bulk replay would take, and a confirmation form.
pub(crate) async fn confirm_replay(
    State(console): State<Arc<Console>>,
    axum::Extension(session): axum::Extension<Session>,
    Query(mut filters): Query<Filters>,
) -> Result<Response, ConsoleError> {
    filters.before.clear();
    let filter = filters.parse(usize::MAX)?;
    let force = replayable(&filter)?;
    let matching = console.ledger.list(&filter).await?;
    Ok(pages::confirm(&filters, matching.len(), force, &console.csrf(&session)).into_response())
}

#[derive(Debug, Deserialize)]
pub(crate) struct ReplayManyForm {
    #[serde(flatten)]
    filters: Filters,
    csrf: Option<String>,
    /// The count the operator confirmed: a store that changed since gets a new confirmation.
    expected: Option<usize>,
}

pub(crate) async fn replay_many(
    State(console): State<Arc<Console>>,
    axum::Extension(session): axum::Extension<Session>,
    Form(mut form): Form<ReplayManyForm>,
) -> Result<Response, ConsoleError> {
    check_csrf(&console, &session, form.csrf.as_deref())?;
    form.filters.before.clear();
    let filter = form.filters.parse(usize::MAX)?;
    let force = replayable(&filter)?;
    let matching = console.ledger.list(&filter).await?;
    if form.expected != Some(matching.len()) {
        return Ok(
            pages::confirm(&form.filters, matching.len(), force, &console.csrf(&session)).into_response(),
        );
    }
    let (mut replayed, mut not_enqueued, mut skipped) = (0usize, 0usize, 0usize);
    for e in &matching {
        match replay_event(console.ledger.as_ref(), console.queue.as_deref(), &e.key(), force).await? {
            Replayed::Replayed => replayed += 1,
            Replayed::NotEnqueued => not_enqueued += 1,
            Replayed::Skipped(_) => skipped += 1,
        }
    }
    console.counts.forget().await;
    Ok(pages::replayed(&form.filters, replayed, not_enqueued, skipped).into_response())
}
