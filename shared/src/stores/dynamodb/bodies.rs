//! Bodies in S3: a claim's body (with what the claim owes it), a full item's body, the countdown a completion
//! starts ([`Ledger::completed`](crate::ports::Ledger::completed)) and what the sweeper finishes after a crash.

use bytes::Bytes;

use aws_sdk_dynamodb::types::AttributeValue;

use super::expressions::{Values, BODY_CLAIMED, BODY_COUNTING, CLAIMED_WITH_BODY, COMPLETED_WITH_BODY};
use super::index::{partition, IndexQuery};
use super::items::{record_of, Fields, Item};
use super::DynamoLedger;
use crate::aws::s3::S3Payloads;
use crate::aws::sdk::sdk_error;
use crate::model::{EventKey, Status};
use crate::ports::StoreError;
#[allow(unused_imports)] // named in the docs
use crate::ports::{Ledger, Upkeep};

impl DynamoLedger {
    /// The body of a claimed item; for a body in S3, with what the claim owes it before any handler runs: the
    /// object is confirmed (kept: its event is open), and the record enters the sparse index's `body#` partition,
    /// due when the lease ends. It stays there through the COMPLETED settle ([`COMPLETE`] leaves the index keys)
    /// until its body's countdown has started: by [`Ledger::completed`], or by the sweeper after a crash
    /// ([`Upkeep::finish_bodies`]). The object's name is remembered for this claim's completion. Both writes are this lease's and come before its settle, so no countdown
    /// of this object can come before them; a failure of either fails the claim, which its message retries.
    pub(super) async fn payload(&self, item: &Item) -> Result<Bytes, StoreError> {
        let body = self.stored_body(item).await?;
        let f = Fields(item);
        let (Some(s3), Some(key)) = (&self.payloads, f.opt_s("payload_s3_key")?) else {
            return Ok(body);
        };
        let (Status::Processing, Some(owner)) = (f.status()?, f.opt_s("lease_owner")?) else {
            return Ok(body);
        };
        s3.keep(key).await?;
        let event = record_of(item)?.key();
        let values = Values::default()
            .status(":processing", Status::Processing)
            .s(":owner", owner)
            .s(":key", key)
            .s(":body", partition("body", &event.pk()))
            .n(":until", f.n("lease_until")?);
        // Refused: the lease is gone already, and this worker's settle will find so.
        self.update(&event, BODY_CLAIMED, CLAIMED_WITH_BODY, values, false)
            .await?;
        crate::sync::lock(&self.claimed).insert(owner.to_owned(), key.to_owned());
        Ok(body)
    }

    /// The body of a full item: inline, or from S3; decompressed. Reads only.
    pub(super) async fn stored_body(&self, item: &Item) -> Result<Bytes, StoreError> {
        let f = Fields(item);
        let offloaded;
        // `payload_zstd`: inline and compressed. Older items: `payload`, compressed where `payload_encoding` says.
        let (stored, encoding): (&[u8], _) = match (item.get("payload_zstd"), item.get("payload")) {
            (Some(AttributeValue::B(blob)), _) => (blob.as_ref(), Some("zstd")),
            (Some(_), _) => return Err(f.corrupt("payload_zstd", "is not binary")),
            (None, Some(AttributeValue::B(blob))) => (blob.as_ref(), f.opt_s("payload_encoding")?),
            (None, Some(_)) => return Err(f.corrupt("payload", "is not binary")),
            (None, None) => {
                let Some(key) = f.opt_s("payload_s3_key")? else {
                    return Err(f.corrupt("payload", "is missing"));
                };
                let Some(s3) = &self.payloads else {
                    return Err(StoreError::Unavailable(format!(
                        "the payload of {} is in S3 but no bucket is configured",
                        f.pk()
                    )));
                };
                offloaded = s3.get(key).await?;
                (&offloaded[..], f.opt_s("payload_encoding")?)
            }
        };
        match encoding {
            None => Ok(Bytes::copy_from_slice(stored)),
            Some("zstd") => crate::compression::decompress(stored)
                .map(Bytes::from)
                .map_err(|_| f.corrupt("payload", "does not decompress")),
            Some(_) => Err(f.corrupt("payload_encoding", "is unknown")),
        }
    }
}

/// Bodies in S3: what the sweeper finishes.
impl DynamoLedger {
    /// The sweeper's part for bodies in S3: each COMPLETED record still in the `body#` partition once its claim's
    /// lease has ended (its worker died, or failed, between the settle and its body's countdown) has its body
    /// counted down, and leaves the partition. At most `limit`; returns how many were finished. One that fails
    /// stays for the next sweep (and is logged).
    pub(super) async fn finish_bodies_in_s3(&self, limit: usize) -> Result<usize, StoreError> {
        let Some(s3) = &self.payloads else {
            return Ok(0);
        };
        if limit == 0 {
            return Ok(0);
        }
        let query = IndexQuery {
            due_before: Some(self.now()),
            filter: Some("#status = :completed".to_owned()),
            values: Values::default().status(":completed", Status::Completed),
            stop_after: Some(limit),
        };
        let mut finished = 0;
        for entry in self.query_index(&["body"], query).await?.iter().take(limit) {
            let key = record_of(entry)?.key();
            match self.finish_body(s3, &key).await {
                Ok(true) => finished += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(source = %key.source, event_id = %key.event_id, error = %e,
                        "the completed event's body did not start its retention; the next sweep tries again");
                }
            }
        }
        Ok(finished)
    }

    async fn finish_body(&self, s3: &S3Payloads, key: &EventKey) -> Result<bool, StoreError> {
        // The object's name is not in the index: the record says it (a small item: one read unit).
        let out = self
            .get_item(key)
            .consistent_read(true)
            .projection_expression("#status, payload_s3_key, gsi1pk")
            .expression_attribute_names("#status", "status")
            .send()
            .await
            .map_err(sdk_error)?;
        let Some(item) = out.item else {
            return Ok(false);
        };
        let f = Fields(&item);
        let owed = f.status()? == Status::Completed
            && f.opt_s("gsi1pk")? == Some(partition("body", &key.pk()).as_str());
        let Some(body) = f.opt_s("payload_s3_key")?.filter(|_| owed) else {
            return Ok(false);
        };
        s3.count_down(body).await?;
        self.body_counting(key, body).await?;
        Ok(true)
    }

    /// The record of `key` leaves `body#`, once the countdown of its body `body` has started.
    pub(super) async fn body_counting(&self, key: &EventKey, body: &str) -> Result<(), StoreError> {
        let values = Values::default()
            .status(":completed", Status::Completed)
            .s(":key", body)
            .s(":body", partition("body", &key.pk()));
        // Refused: out of `body#` already (done, or claimed before this layout), or moved on (replayed).
        self.update(key, BODY_COUNTING, COMPLETED_WITH_BODY, values, false)
            .await?;
        Ok(())
    }
}
