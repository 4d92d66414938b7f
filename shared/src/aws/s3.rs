//! Bodies too large for a DynamoDB item (400 KB) live in S3, written before the item that points at them.
//!
//! docs/DESIGN.md "Retention and expiry": a body kept apart goes within a day of its event's expiry, and a dead event's body stays.
//! Both hold by construction, from three tag states that the bucket's lifecycle rules expire by (the rules of
//! `infra/template.yaml`, and [`lifecycle_rules`] for `inbox aws init`):
//! - **pending** ([`TAG`] = [`PENDING`]): every object is written so, by its one `PutObject` or copy. No record may
//!   point at it yet, and S3 expires it [`PENDING_DAYS`] after its creation: a body whose create was refused (a
//!   duplicate, a lost race, a resend refused) or failed after the put (a 503) goes without anyone deleting it.
//! - **kept** ([`TAG`] = [`KEPT`], which no rule names; objects of older releases, untagged, are kept too): confirmed
//!   by the claim that runs its event (before the handler) and by the dead-letter path (before the alarm is
//!   recorded). Never expires: an open or dead event keeps its body.
//! - **completed** ([`TAG`] = [`COMPLETED`]): the object copied onto itself once its event completed, so that the
//!   copy's creation time is the completion; S3 expires it `RetentionDays` after that, rounded up to the next
//!   midnight UTC: on or after the event's own expiry and within a day of it.
//!
//! Every create attempt, and every forced replay, writes its own object ([`fresh_key`]), so no write ever lands on
//! an object another record (or another life of the same record) points at: a retried delivery cannot rewrite a
//! live event's body, and a countdown that lands late hits an object that nothing points at any more.

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, BucketLocationConstraint,
    CreateBucketConfiguration, ExpirationStatus, LifecycleExpiration, LifecycleRule, LifecycleRuleFilter,
    MetadataDirective, NoncurrentVersionExpiration, Tag, Tagging, TaggingDirective,
};
use aws_sdk_s3::{Client, Config};
use bytes::Bytes;
use std::sync::OnceLock;

use super::sdk::sdk_error;
use crate::ports::StoreError;

/// The tag that the bucket's lifecycle rules expire by.
pub const TAG: &str = "inbox-body";
/// [`TAG`]'s value on an object that no record may point at yet: what every write leaves.
pub const PENDING: &str = "pending";
/// [`TAG`]'s value on the body of an open or dead event: no lifecycle rule names it. A value rather than no tag,
/// so that the confirmation is one `PutObjectTagging`, the action that every write here needs already.
pub const KEPT: &str = "kept";
/// [`TAG`]'s value on the body of a completed event.
pub const COMPLETED: &str = "completed";
/// Days after its creation that S3 expires a pending object (the template's `unconfirmed-bodies` rule). Longer
/// than any event can wait for the claim or the burial that confirms its body: SQS keeps a message at most 14 days
/// from its first send, the dead-letter queue's retention (a redrive keeps the first send's time), and an event
/// without a message is in the sweeper's index, sent again every few minutes.
pub const PENDING_DAYS: i32 = 15;

/// A fresh object name for one body of the event: `payloads/{source}/{event_id}/{t}{r}`, `t` counting down with
/// time and `r` random (both 16 hex digits), so that no two writes share a name and an event's newest body lists
/// first under its prefix.
pub fn fresh_key(source: &str, event_id: &str, world: &crate::clock::World) -> String {
    let now = u64::try_from(world.now_ms()).unwrap_or(0);
    format!(
        "payloads/{source}/{event_id}/{:016x}{:016x}",
        u64::MAX - now,
        world.random.next_u64()
    )
}

/// `CopySource` names the object as `bucket/key` with the key URL-encoded (its `/` kept), as the S3 API reference
/// for CopyObject requires: https://docs.aws.amazon.com/AmazonS3/latest/API/API_CopyObject.html
fn copy_source(bucket: &str, key: &str) -> String {
    const KEY: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'/')
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    format!("{bucket}/{}", percent_encoding::utf8_percent_encode(key, KEY))
}

/// A call on one object: `Ok(true)` done, `Ok(false)` where S3 says there is no such object (its code, or a bare 404
/// where it answers without a body), any other failure a store error.
fn found<T, E>(
    result: Result<T, aws_sdk_s3::error::SdkError<E, aws_sdk_s3::config::http::HttpResponse>>,
) -> Result<bool, StoreError>
where
    E: aws_sdk_s3::error::ProvideErrorMetadata + std::error::Error + 'static,
{
    match result {
        Ok(_) => Ok(true),
        Err(e) => {
            let missing = e
                .as_service_error()
                .is_some_and(|s| s.code() == Some("NoSuchKey"))
                || e.raw_response().is_some_and(|r| r.status().as_u16() == 404);
            if missing {
                Ok(false)
            } else {
                Err(sdk_error(e))
            }
        }
    }
}

/// The payload bucket's lifecycle rules, as `infra/template.yaml` declares them (`retention_days` is its
/// `RetentionDays`); `tests/aws/bodies.rs` holds the two equal.
pub fn lifecycle_rules(retention_days: i32) -> Result<BucketLifecycleConfiguration, StoreError> {
    let built = |e: aws_sdk_s3::error::BuildError| StoreError::Unavailable(e.to_string());
    let tagged = |value: &str| -> Result<LifecycleRuleFilter, StoreError> {
        Ok(LifecycleRuleFilter::builder()
            .tag(Tag::builder().key(TAG).value(value).build().map_err(built)?)
            .build())
    };
    let whole_bucket = || LifecycleRuleFilter::builder().prefix("").build();
    let rules = [
        LifecycleRule::builder()
            .id("completed-bodies")
            .status(ExpirationStatus::Enabled)
            .filter(tagged(COMPLETED)?)
            .expiration(LifecycleExpiration::builder().days(retention_days).build()),
        LifecycleRule::builder()
            .id("unconfirmed-bodies")
            .status(ExpirationStatus::Enabled)
            .filter(tagged(PENDING)?)
            .expiration(LifecycleExpiration::builder().days(PENDING_DAYS).build()),
        LifecycleRule::builder()
            .id("versions-made-before-versioning-was-suspended")
            .status(ExpirationStatus::Enabled)
            .filter(whole_bucket())
            .noncurrent_version_expiration(NoncurrentVersionExpiration::builder().noncurrent_days(1).build())
            .expiration(
                LifecycleExpiration::builder()
                    .expired_object_delete_marker(true)
                    .build(),
            ),
        LifecycleRule::builder()
            .id("incomplete-uploads")
            .status(ExpirationStatus::Enabled)
            .filter(whole_bucket())
            .abort_incomplete_multipart_upload(
                AbortIncompleteMultipartUpload::builder()
                    .days_after_initiation(1)
                    .build(),
            ),
    ];
    let mut config = BucketLifecycleConfiguration::builder();
    for rule in rules {
        config = config.rules(rule.build().map_err(built)?);
    }
    config.build().map_err(built)
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

    /// Stores `bytes` under `key` (a [`fresh_key`]), tagged [`PENDING`] in the same request, so that no crash
    /// leaves an object that nothing expires; returns once S3 acknowledged the write.
    pub async fn put(&self, key: &str, bytes: Bytes) -> Result<(), StoreError> {
        self.client()
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type("application/zstd")
            .tagging(format!("{TAG}={PENDING}"))
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(sdk_error)?;
        Ok(())
    }

    /// Confirms the object under `key`: tagged [`KEPT`], it never expires. For the body of an open or dead event
    /// only, and only by a step the ledger orders before any countdown of the same object (the claim, under its
    /// lease; the alarm's record, on a DEAD record). `Ok(false)` where there is no such object.
    pub async fn keep(&self, key: &str) -> Result<bool, StoreError> {
        let built = |e: aws_sdk_s3::error::BuildError| StoreError::Unavailable(e.to_string());
        let kept = Tagging::builder()
            .tag_set(Tag::builder().key(TAG).value(KEPT).build().map_err(built)?)
            .build()
            .map_err(built)?;
        let kept = self
            .client()
            .put_object_tagging()
            .bucket(&self.bucket)
            .key(key)
            .tagging(kept)
            .send()
            .await;
        found(kept)
    }

    /// Starts the expiry of the object under `key`: copied onto itself tagged [`COMPLETED`], since the copy's
    /// creation time is what the lifecycle rule counts from. `Ok(false)` where there is no such object.
    pub async fn count_down(&self, key: &str) -> Result<bool, StoreError> {
        self.copy(key, key, COMPLETED).await
    }

    /// Copies the object under `from` to `to` (a [`fresh_key`]), tagged [`PENDING`]. `Ok(false)` where there is no
    /// object under `from`.
    pub async fn copy_pending(&self, from: &str, to: &str) -> Result<bool, StoreError> {
        self.copy(from, to, PENDING).await
    }

    async fn copy(&self, from: &str, to: &str, state: &str) -> Result<bool, StoreError> {
        let copied = self
            .client()
            .copy_object()
            .bucket(&self.bucket)
            .key(to)
            .copy_source(copy_source(&self.bucket, from))
            // S3 refuses a copy onto itself that changes nothing of its metadata: the state is said there too.
            .metadata_directive(MetadataDirective::Replace)
            .metadata(TAG, state)
            .content_type("application/zstd")
            .tagging_directive(TaggingDirective::Replace)
            .tagging(format!("{TAG}={state}"))
            .send()
            .await;
        found(copied)
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

    /// Sets the bucket's lifecycle rules to [`lifecycle_rules`] (replacing any), as the template declares them.
    pub async fn put_lifecycle(&self, retention_days: i32) -> Result<(), StoreError> {
        self.client()
            .put_bucket_lifecycle_configuration()
            .bucket(&self.bucket)
            .lifecycle_configuration(lifecycle_rules(retention_days)?)
            .send()
            .await
            .map_err(sdk_error)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_source_encodes_the_key_but_its_slashes() {
        assert_eq!(
            copy_source("b", "payloads/stripe/evt 1+é/ab"),
            "b/payloads/stripe/evt%201%2B%C3%A9/ab"
        );
    }

    #[test]
    fn fresh_keys_differ_and_the_newest_lists_first() {
        let world = crate::clock::World::system();
        let first = fresh_key("stripe", "evt_1", &world);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let second = fresh_key("stripe", "evt_1", &world);
        assert!(first.starts_with("payloads/stripe/evt_1/"), "{first}");
        assert_eq!(first.len(), "payloads/stripe/evt_1/".len() + 32);
        assert!(second < first, "{second} lists after {first}");
    }
}
