//! The ledger table itself: [`create_table`], as the template creates it.

use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, IndexStatus, KeySchemaElement, KeyType,
    Projection, ProjectionType, ScalarAttributeType, TableStatus, TimeToLiveSpecification, TimeToLiveStatus,
};
use aws_sdk_dynamodb::Client;

use super::index::INDEX;
use super::items::META;
use crate::aws::sdk::sdk_error;
use crate::ports::StoreError;

/// Creates the ledger table as the template does: on demand, `pk` (S) hash key, the sparse index `open_index`
/// (`gsi1pk` S, `gsi1sk` N, all attributes projected) and TTL on `expires_at`; waits until it and its index are
/// ACTIVE. A table that exists already is left as it is (its TTL is still switched on).
pub async fn create_table(client: &Client, table: &str) -> Result<(), StoreError> {
    let built = |e: aws_sdk_dynamodb::error::BuildError| StoreError::Unavailable(e.to_string());
    let attribute = |name: &str, kind: ScalarAttributeType| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(kind)
            .build()
            .map_err(built)
    };
    let key = |name: &str, kind: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .map_err(built)
    };
    let index = GlobalSecondaryIndex::builder()
        .index_name(INDEX)
        .key_schema(key("gsi1pk", KeyType::Hash)?)
        .key_schema(key("gsi1sk", KeyType::Range)?)
        // Everything but the body: every transition rewrites the index entry, so a body there would be paid for
        // again on each one, and nothing that reads the index needs it.
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::Include)
                .set_non_key_attributes(Some(
                    META.iter()
                        .filter(|a| !matches!(**a, "pk" | "gsi1sk"))
                        .map(|a| (*a).to_owned())
                        .collect(),
                ))
                .build(),
        )
        .build()
        .map_err(built)?;
    let created = client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute("pk", ScalarAttributeType::S)?)
        .attribute_definitions(attribute("gsi1pk", ScalarAttributeType::S)?)
        .attribute_definitions(attribute("gsi1sk", ScalarAttributeType::N)?)
        .key_schema(key("pk", KeyType::Hash)?)
        .global_secondary_indexes(index)
        .send()
        .await;
    match created {
        Ok(_) => {}
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_resource_in_use_exception()) => {}
        Err(e) => return Err(sdk_error(e)),
    }

    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    let mut pause = Duration::from_millis(100);
    loop {
        let out = client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(sdk_error)?;
        let ready = out.table.as_ref().is_some_and(|t| {
            t.table_status() == Some(&TableStatus::Active)
                && t.global_secondary_indexes()
                    .iter()
                    .all(|i| i.index_status() == Some(&IndexStatus::Active))
        });
        if ready {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            return Err(StoreError::Unavailable(format!(
                "table {table} is not ACTIVE after 10 minutes"
            )));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }

    let ttl = client
        .describe_time_to_live()
        .table_name(table)
        .send()
        .await
        .map_err(sdk_error)?;
    let on = ttl
        .time_to_live_description()
        .and_then(|d| d.time_to_live_status())
        .is_some_and(|st| matches!(st, TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling));
    if !on {
        client
            .update_time_to_live()
            .table_name(table)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name("expires_at")
                    .enabled(true)
                    .build()
                    .map_err(built)?,
            )
            .send()
            .await
            .map_err(sdk_error)?;
    }
    Ok(())
}
