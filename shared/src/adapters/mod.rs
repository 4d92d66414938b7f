//! The adapters behind the ports: SQLite for the embedded runtime (DynamoDB and SQS for AWS live beside it).

#[cfg(feature = "embedded")]
pub mod sqlite;
