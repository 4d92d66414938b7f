//! Bodies too large for a DynamoDB item (400 KB) live in S3, written once before the item that points at them.
//!
//! Layout (DESIGN.md "Retention": a body kept apart goes within a day of its event's expiry; dead events' bodies
//! stay): one object per event, `payloads/{source}/{event_id}/{sha256 of the body}`, so no object serves two
//! events. An object is written untagged, and an untagged object never expires. When its event completes, the
//! object is copied onto itself tagged [`TAG`] = [`COMPLETED`]: the copy's creation time is the completion (or a
//! moment after), and the bucket's lifecycle rule expires tagged objects `RetentionDays` after creation, rounded up
//! to the next midnight UTC; that is, on or after the event's own expiry and within a day of it. A forced replay
//! of a completed event copies the object back untagged before the event reopens.

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    BucketLocationConstraint, CreateBucketConfiguration, MetadataDirective, TaggingDirective,
};
use aws_sdk_s3::{Client, Config};
use bytes::Bytes;
use std::sync::OnceLock;

use super::dynamodb::sdk_error;
use crate::ports::StoreError;

/// The tag that the lifecycle rule of `infra/template.yaml` (`completed-bodies`) expires by.
pub const TAG: &str = "inbox-body";
/// [`TAG`]'s value on the body of a completed event.
pub const COMPLETED: &str = "completed";

/// The object of an event's body: named by the event and the body's hash, so a retried write rewrites the same
/// bytes under the same name, and a duplicate with another body (refused) never overwrites the first.
pub fn body_key(source: &str, event_id: &str, sha256_hex: &str) -> String {
    format!("payloads/{source}/{event_id}/{sha256_hex}")
}

/// `CopySource` names the object as `bucket/key` with the key URL-encoded (its `/` kept), as the S3 API reference
/// for CopyObject requires: https://docs.aws.amazon.com/AmazonS3/latest/API/API_CopyObject.html
fn copy_source(bucket: &str, key: &str) -> String {
    let mut out = format!("{bucket}/");
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The payload bucket.
#[derive(Clone, Debug)]
pub struct S3Payloads {
    config: Config,
    /// Built on first use: only bodies past the item limit come here, and most containers never see one, while
    /// building an SDK client is a measurable part of a cold start.
    client: OnceLock<Client>,
    bucket: String,
}

impl S3Payloads {
    pub fn new(config: Config, bucket: impl Into<String>) -> Self {
        Self {
            config,
            client: OnceLock::new(),
            bucket: bucket.into(),
        }
    }

    /// The client settings for `sdk`: path-style addressing when `AWS_ENDPOINT_URL` names an emulator (moto,
    /// LocalStack), which has no per-bucket host names.
    pub fn config(sdk: &aws_config::SdkConfig) -> Config {
        aws_sdk_s3::config::Builder::from(sdk)
            .force_path_style(std::env::var_os("AWS_ENDPOINT_URL").is_some())
            .build()
    }

    fn client(&self) -> &Client {
        self.client.get_or_init(|| Client::from_conf(self.config.clone()))
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Stores `bytes` under `key`; returns once S3 acknowledged the write.
    pub async fn put(&self, key: &str, bytes: Bytes) -> Result<(), StoreError> {
        self.client()
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type("application/zstd")
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(sdk_error)?;
        Ok(())
    }

    /// Starts (`completed`) or stops (`!completed`) the expiry of the object under `key` by copying it onto itself
    /// with [`TAG`] set or cleared: the copy's creation time is what the lifecycle rule counts from. `Ok(false)`
    /// where there is no such object (the body is in the item).
    pub async fn mark(&self, key: &str, completed: bool) -> Result<bool, StoreError> {
        let copied = self
            .client()
            .copy_object()
            .bucket(&self.bucket)
            .key(key)
            .copy_source(copy_source(&self.bucket, key))
            // S3 refuses a copy onto itself that changes nothing of its metadata: the state is said there too.
            .metadata_directive(MetadataDirective::Replace)
            .metadata(TAG, if completed { COMPLETED } else { "kept" })
            .content_type("application/zstd")
            .tagging_directive(TaggingDirective::Replace)
            .tagging(if completed {
                format!("{TAG}={COMPLETED}")
            } else {
                String::new()
            })
            .send()
            .await;
        match copied {
            Ok(_) => Ok(true),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.meta().code() == Some("NoSuchKey"))
                    || e.raw_response().is_some_and(|r| r.status().as_u16() == 404) =>
            {
                Ok(false)
            }
            Err(e) => Err(sdk_error(e)),
        }
    }

    /// The bytes under `key`. A missing object is [`StoreError::Corrupt`]: only a ledger item points here.
    pub async fn get(&self, key: &str) -> Result<Bytes, StoreError> {
        let out = match self
            .client()
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => {
                return Err(StoreError::Corrupt(format!(
                    "payload object s3://{}/{key} is missing",
                    self.bucket
                )))
            }
            Err(e) => return Err(sdk_error(e)),
        };
        let body = out.body.collect().await.map_err(|e| {
            StoreError::Unavailable(format!("reading s3://{}/{key} failed: {e}", self.bucket))
        })?;
        Ok(body.into_bytes())
    }

    /// Creates the bucket (in the client's region) if it is not there yet, as the template does.
    pub async fn create_bucket(&self) -> Result<(), StoreError> {
        let mut req = self.client().create_bucket().bucket(&self.bucket);
        // us-east-1 is the one region that refuses a location constraint naming itself.
        if let Some(region) = self.config.region().map(|r| r.as_ref().to_owned()) {
            if region != "us-east-1" {
                req = req.create_bucket_configuration(
                    CreateBucketConfiguration::builder()
                        .location_constraint(BucketLocationConstraint::from(region.as_str()))
                        .build(),
                );
            }
        }
        match req.send().await {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_bucket_already_owned_by_you()) =>
            {
                Ok(())
            }
            Err(e) => Err(sdk_error(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_source_encodes_the_key_but_its_slashes() {
        assert_eq!(
            copy_source("b", &body_key("stripe", "evt 1+é", "ab")),
            "b/payloads/stripe/evt%201%2B%C3%A9/ab"
        );
    }
}
