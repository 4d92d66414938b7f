//! The contract over DynamoDB + S3, a fresh table and bucket per test at `AWS_ENDPOINT_URL`.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use inbox_core::aws::s3::S3Payloads;
use inbox_core::clock::{Clock, ManualClock};
use inbox_core::contract::Harness;
use inbox_core::model::{EventKey, SourceName};
use inbox_core::ports::Store;
use inbox_core::stores::dynamodb::{create_table, DynamoLedger};

/// A fresh table and bucket named `inbox-test-{random}` at `AWS_ENDPOINT_URL`, and the clock its ledgers run on.
pub struct DynamoHarness {
    pub dynamo: aws_sdk_dynamodb::Client,
    pub s3: aws_sdk_s3::Client,
    pub payloads: S3Payloads,
    pub name: String,
    clock: Arc<ManualClock>,
}

impl DynamoHarness {
    /// `None` (after a loud SKIPPED line) when no endpoint is configured and none is required.
    pub async fn start() -> Option<Self> {
        if std::env::var_os("AWS_ENDPOINT_URL").is_none() {
            assert_ne!(
                std::env::var("INBOX_REQUIRE_AWS").as_deref(),
                Ok("1"),
                "INBOX_REQUIRE_AWS=1 but AWS_ENDPOINT_URL is unset"
            );
            // Straight to stderr, not `eprintln!`, which the test harness captures for a passing test.
            static LOUD: std::sync::Once = std::sync::Once::new();
            LOUD.call_once(|| {
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED: the DynamoDB store's tests: AWS_ENDPOINT_URL is unset (see shared/tests/core/ledger/mod.rs)"
                );
            });
            return None;
        }
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .load()
            .await;
        let dynamo = aws_sdk_dynamodb::Client::new(&config);
        // Path-style addressing: an emulator at an IP or `localhost` has no per-bucket host names.
        let s3 = aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::config::Builder::from(&config)
                .force_path_style(true)
                .build(),
        );
        let name = format!("inbox-test-{:016x}", rand::random::<u64>());
        create_table(&dynamo, &name).await.unwrap();
        let payloads = S3Payloads::new(s3.config().clone(), &name);
        payloads.create_bucket().await.unwrap();
        Some(Self {
            dynamo,
            s3,
            payloads,
            name,
            clock: super::clock_now(),
        })
    }

    /// A ledger over the table and the bucket, on the harness's clock.
    pub fn ledger(&self, grace: Duration) -> DynamoLedger {
        DynamoLedger::new(
            self.dynamo.clone(),
            &self.name,
            Some(self.payloads.clone()),
            grace,
        )
        .with_clock(self.clock.clone())
    }

    /// The raw item of an event.
    pub async fn item(&self, key: &EventKey) -> HashMap<String, AttributeValue> {
        self.dynamo
            .get_item()
            .table_name(&self.name)
            .key("pk", AttributeValue::S(key.pk()))
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .item
            .unwrap()
    }
}

#[async_trait]
impl Harness for DynamoHarness {
    fn name(&self) -> &'static str {
        "DynamoDB"
    }

    fn clock(&self) -> Arc<ManualClock> {
        self.clock.clone()
    }

    async fn open_on(&self, grace: Duration, clock: Arc<dyn Clock>) -> Arc<dyn Store> {
        Arc::new(self.ledger(grace).with_clock(clock))
    }

    async fn lose_body(&self, key: &EventKey) {
        self.dynamo
            .update_item()
            .table_name(&self.name)
            .key("pk", AttributeValue::S(key.pk()))
            .update_expression("REMOVE payload_zstd, payload")
            .condition_expression("attribute_exists(pk)")
            .send()
            .await
            .unwrap();
    }

    async fn store_checkpoint_json(&self, source: &SourceName, json: &str) {
        self.dynamo
            .put_item()
            .table_name(&self.name)
            .item("pk", AttributeValue::S(format!("#checkpoint#{source}")))
            .item("checkpoint", AttributeValue::S(json.to_owned()))
            .send()
            .await
            .unwrap();
    }

    /// Deletes the table and the bucket (a failed test leaves them, named `inbox-test-…`).
    async fn finish(&self) {
        let _ = self.dynamo.delete_table().table_name(&self.name).send().await;
        let s3 = &self.s3;
        if let Ok(listed) = s3.list_objects_v2().bucket(&self.name).send().await {
            for object in listed.contents() {
                if let Some(k) = object.key() {
                    let _ = s3.delete_object().bucket(&self.name).key(k).send().await;
                }
            }
        }
        let _ = s3.delete_bucket().bucket(&self.name).send().await;
    }
}

inbox_core::contract_tests!(DynamoHarness::start());
