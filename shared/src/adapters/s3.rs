//! Bodies too large for a DynamoDB item (400 KB) live in S3, written once before the item that points at them.

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{BucketLocationConstraint, CreateBucketConfiguration};
use aws_sdk_s3::{Client, Config};
use bytes::Bytes;
use std::sync::OnceLock;

use super::dynamodb::sdk_error;
use crate::ports::StoreError;

/// The payload bucket. Objects are content-addressed by the caller's key, so a retried write rewrites the same
/// bytes under the same name.
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
