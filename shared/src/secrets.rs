//! Where secrets come from: a reference (`env:`, `file:`, and on AWS `secretsmanager:`, `ssm:`) resolved to its
//! value. The resolver is a port of its own: the receiver's sources and reconciliation's credentials take one,
//! the workers that verify nothing take none.

use async_trait::async_trait;

use crate::config::SecretRef;

/// Why a secret could not be read: what is wrong with the reference or its store, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("the environment variable is not set")]
    EnvNotSet,
    #[error("cannot read the file: {0}")]
    File(String),
    #[error("the secret is empty")]
    Empty,
    #[error("secretsmanager: and ssm: references are read by the AWS runtime only")]
    AwsOnly,
    /// The secret store's answer (Secrets Manager, SSM): cannot be read, or holds no value.
    #[error("{0}")]
    Store(String),
}

/// Reads a secret's value from where its reference points.
#[async_trait]
pub trait SecretResolver: Send + Sync {
    async fn resolve(&self, reference: &SecretRef) -> Result<String, SecretError>;
}

/// `env:` and `file:` references, as the embedded runtime reads them.
pub struct LocalSecrets;

#[async_trait]
impl SecretResolver for LocalSecrets {
    async fn resolve(&self, reference: &SecretRef) -> Result<String, SecretError> {
        resolve_local(reference)
    }
}

/// Resolves `env:` and `file:`; the AWS resolver falls back to it for those.
pub fn resolve_local(reference: &SecretRef) -> Result<String, SecretError> {
    let value = match reference {
        SecretRef::Env(name) => std::env::var(name).map_err(|_| SecretError::EnvNotSet)?,
        SecretRef::File(path) => {
            std::fs::read_to_string(path).map_err(|e| SecretError::File(e.to_string()))?
        }
        SecretRef::SecretsManager(_) | SecretRef::Ssm(_) => return Err(SecretError::AwsOnly),
    };
    if value.trim().is_empty() {
        return Err(SecretError::Empty);
    }
    Ok(value)
}
