//! The adapters behind the ports: SQLite for the embedded runtime (DynamoDB and SQS for AWS live beside it).

#[cfg(feature = "aws")]
pub mod dynamodb;
#[cfg(feature = "aws")]
pub mod s3;
#[cfg(feature = "embedded")]
pub mod sqlite;
#[cfg(feature = "aws")]
pub mod sqs;
