use async_trait::async_trait;

use super::{Handler, HandlerError};
use crate::model::Event;

/// Logs that the event arrived (source, id, type, size; never the payload) and succeeds.
pub struct Log;

#[async_trait]
impl Handler for Log {
    async fn handle(&self, event: &Event) -> Result<(), HandlerError> {
        tracing::info!(
            source = %event.source,
            event_id = %event.event_id,
            event_type = event.event_type.as_deref().unwrap_or(""),
            bytes = event.payload.len(),
            attempt = event.attempts,
            "event handled by the log handler"
        );
        Ok(())
    }
}
