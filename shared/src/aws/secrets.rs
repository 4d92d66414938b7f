//! Secrets on AWS: `secretsmanager:NAME` and `ssm:NAME` (SecureString), read once at cold start; `env:` and
//! `file:` as embedded.

use std::sync::OnceLock;

use async_trait::async_trait;
use aws_config::SdkConfig;

use crate::config::SecretRef;
use crate::secrets::{resolve_local, SecretError, SecretResolver};

/// Each client is built the first time a reference needs it: a config of `env:` secrets builds neither, and
/// building one (its endpoint rules) is a measurable part of a cold start.
pub struct AwsSecrets {
    sdk: SdkConfig,
    ssm: OnceLock<aws_sdk_ssm::Client>,
    secrets: OnceLock<aws_sdk_secretsmanager::Client>,
}

impl AwsSecrets {
    pub fn new(sdk: &SdkConfig) -> Self {
        Self {
            sdk: sdk.clone(),
            ssm: OnceLock::new(),
            secrets: OnceLock::new(),
        }
    }

    /// Over clients built elsewhere (a test's, with its own interceptors).
    pub fn with_clients(
        sdk: &SdkConfig,
        ssm: aws_sdk_ssm::Client,
        secrets: aws_sdk_secretsmanager::Client,
    ) -> Self {
        Self {
            sdk: sdk.clone(),
            ssm: OnceLock::from(ssm),
            secrets: OnceLock::from(secrets),
        }
    }

    fn ssm(&self) -> &aws_sdk_ssm::Client {
        self.ssm.get_or_init(|| aws_sdk_ssm::Client::new(&self.sdk))
    }

    fn secrets(&self) -> &aws_sdk_secretsmanager::Client {
        self.secrets
            .get_or_init(|| aws_sdk_secretsmanager::Client::new(&self.sdk))
    }

    /// An SSM parameter's value, decrypted if it is a SecureString: an `ssm:` secret, or the functions' config
    /// ([`super::load_config`]), so one client serves both.
    pub async fn parameter(&self, name: &str) -> Result<String, SecretError> {
        self.ssm()
            .get_parameter()
            .name(name)
            .with_decryption(true)
            .send()
            .await
            .map_err(|e| {
                SecretError::Store(format!(
                    "cannot read it: {}",
                    aws_sdk_ssm::error::DisplayErrorContext(e)
                ))
            })?
            .parameter()
            .and_then(|p| p.value())
            .map(str::to_owned)
            .ok_or_else(|| SecretError::Store("the parameter has no value".to_owned()))
    }
}

#[async_trait]
impl SecretResolver for AwsSecrets {
    async fn resolve(&self, reference: &SecretRef) -> Result<String, SecretError> {
        let value = match reference {
            SecretRef::SecretsManager(name) => self
                .secrets()
                .get_secret_value()
                .secret_id(name)
                .send()
                .await
                .map_err(|e| {
                    SecretError::Store(format!(
                        "cannot read it: {}",
                        aws_sdk_secretsmanager::error::DisplayErrorContext(e)
                    ))
                })?
                .secret_string()
                .map(str::to_owned)
                .ok_or_else(|| SecretError::Store("the secret has no string value".to_owned()))?,
            SecretRef::Ssm(name) => self.parameter(name).await?,
            local => return resolve_local(local),
        };
        if value.trim().is_empty() {
            return Err(SecretError::Empty);
        }
        Ok(value)
    }
}
