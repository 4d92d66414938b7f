//! Where secrets come from: a reference (`env:`, `file:`, and on AWS `secretsmanager:`, `ssm:`) resolved to its
//! value. The resolver is a port of its own: the receiver's sources and reconciliation's credentials take one,
//! the workers that verify nothing take none.

use async_trait::async_trait;

use crate::config::SecretRef;

/// Reads a secret's value from where its reference points.
#[async_trait]
pub trait SecretResolver: Send + Sync {
    /// The error text says what is wrong with the reference, never a value.
    async fn resolve(&self, reference: &SecretRef) -> Result<String, String>;
}

/// `env:` and `file:` references, as the embedded runtime reads them.
pub struct LocalSecrets;

#[async_trait]
impl SecretResolver for LocalSecrets {
    async fn resolve(&self, reference: &SecretRef) -> Result<String, String> {
        resolve_local(reference)
    }
}

/// Resolves `env:` and `file:`; the AWS resolver falls back to it for those.
pub fn resolve_local(reference: &SecretRef) -> Result<String, String> {
    let value = match reference {
        SecretRef::Env(name) => {
            std::env::var(name).map_err(|_| "the environment variable is not set".to_owned())?
        }
        SecretRef::File(path) => {
            std::fs::read_to_string(path).map_err(|e| format!("cannot read the file: {e}"))?
        }
        SecretRef::SecretsManager(_) | SecretRef::Ssm(_) => {
            return Err("secretsmanager: and ssm: references are read by the AWS runtime only".into())
        }
    };
    if value.trim().is_empty() {
        return Err("the secret is empty".into());
    }
    Ok(value)
}
