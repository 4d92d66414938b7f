//! The answers that are not pages: a bad request, a missing page or event, a refusal, a store that failed.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use inbox_core::ports::StoreError;

use crate::pages;

/// Answers that are not pages.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConsoleError {
    #[error("{0}")]
    BadRequest(String),
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    Forbidden(&'static str),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let (status, text) = match &self {
            ConsoleError::BadRequest(why) => (StatusCode::BAD_REQUEST, why.clone()),
            ConsoleError::NotFound => (StatusCode::NOT_FOUND, "No such page or event.".to_owned()),
            ConsoleError::Forbidden(why) => (StatusCode::FORBIDDEN, (*why).to_owned()),
            ConsoleError::Store(StoreError::Busy) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "The store is busy; try again.".to_owned(),
            ),
            ConsoleError::Store(e) => {
                // The cause goes to the log, never to the page.
                tracing::error!(error = %e, "console: the store failed");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "The store failed; see the log.".to_owned(),
                )
            }
        };
        (status, pages::message(status.as_str(), &text)).into_response()
    }
}
