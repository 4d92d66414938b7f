//! What reconciliation reads and keeps: which ids have a record (`BatchGetItem`), and each source's checkpoint,
//! an item of its own that no listing, replay or sweep sees.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};

use super::items::Fields;
use super::DynamoLedger;
use crate::aws::sdk::sdk_error;
use crate::model::{EventId, EventKey, SourceName};
use crate::ports::{Checkpoint, Checkpoints, StoreError};

/// `BatchGetItem` takes at most this many keys a call.
const BATCH_GET: usize = 100;

#[async_trait]
#[async_trait]
impl Checkpoints for DynamoLedger {
    /// `BatchGetItem` of the keys, [`BATCH_GET`] a call, reading only what decides presence.
    async fn present(&self, source: &SourceName, ids: &[EventId]) -> Result<HashSet<EventId>, StoreError> {
        let mut found = HashSet::new();
        for chunk in ids.chunks(BATCH_GET) {
            let keys = chunk
                .iter()
                .map(|id| {
                    let pk = EventKey::new(source.clone(), id.clone()).pk();
                    HashMap::from([("pk".to_owned(), AttributeValue::S(pk))])
                })
                .collect::<Vec<_>>();
            let mut request = Some(
                KeysAndAttributes::builder()
                    .set_keys(Some(keys))
                    .consistent_read(true)
                    .projection_expression("event_id")
                    .build()
                    .map_err(|e| StoreError::Unavailable(format!("cannot build a batch read: {e}")))?,
            );
            let mut pause = Duration::from_millis(50);
            while let Some(keys) = request.take() {
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table, keys)
                    .send()
                    .await
                    .map_err(sdk_error)?;
                for item in out
                    .responses
                    .and_then(|mut r| r.remove(&self.table))
                    .unwrap_or_default()
                {
                    // Any record, expired or not: past retention "done and forgotten" looks like "never received".
                    let f = Fields(&item);
                    found.insert(
                        EventId::parse(f.s("event_id")?)
                            .map_err(|_| f.corrupt("event_id", "is not an event id"))?,
                    );
                }
                // Keys DynamoDB did not get to (throttling, size): asked again after a pause.
                request = out
                    .unprocessed_keys
                    .and_then(|mut u| u.remove(&self.table))
                    .filter(|k| !k.keys().is_empty());
                if request.is_some() {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
            }
        }
        Ok(found)
    }
    async fn checkpoint(&self, source: &SourceName) -> Result<Option<Checkpoint>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(checkpoint_pk(source)))
            .consistent_read(true)
            .send()
            .await
            .map_err(sdk_error)?;
        let Some(item) = out.item else {
            return Ok(None);
        };
        let f = Fields(&item);
        serde_json::from_str(f.s("checkpoint")?)
            .map(Some)
            .map_err(|_| f.corrupt("checkpoint", "is not a checkpoint"))
    }
    async fn save_checkpoint(&self, source: &SourceName, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        let body = serde_json::to_string(checkpoint)
            .map_err(|e| StoreError::Unavailable(format!("cannot encode the checkpoint of {source}: {e}")))?;
        // No index key and no event attributes: no listing, replay or sweep ever sees it.
        self.client
            .put_item()
            .table_name(&self.table)
            .item("pk", AttributeValue::S(checkpoint_pk(source)))
            .item("checkpoint", AttributeValue::S(body))
            .send()
            .await
            .map_err(sdk_error)?;
        Ok(())
    }
}

/// The item of a source's reconciliation checkpoint: `#` starts no event's `pk`, since source names never hold it.
fn checkpoint_pk(source: &SourceName) -> String {
    format!("#checkpoint#{source}")
}
