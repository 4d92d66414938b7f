//! The SDK settings a function starts with, built without work a Lambda cold start never needs.
//!
//! `aws_config::defaults(..).load()` resolves the region and the credentials through whole provider chains; on the
//! way it builds an STS client (for web identity) and an IMDS client, each parsing its own endpoint rules, even when
//! Lambda has put both in the environment. And the SDK's HTTPS client reads every file of the platform's certificate
//! store (about 150 here) the first time a client is built. Together that was most of the receiver's cold start. So,
//! when the environment answers, the environment alone is asked (the full chains ask it first too, so the answer is
//! the same), and a function trusts only the roots AWS's endpoints chain to, compiled in.

use aws_config::environment::EnvironmentVariableCredentialsProvider;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode, TlsContext, TrustStore};
use aws_smithy_runtime_api::client::http::SharedHttpClient;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use crate::ports::StoreError;

/// Amazon Root CA 1–4 and Starfield Services Root CA G2, as Amazon Trust Services publishes them.
const AWS_ROOTS_PEM: &[u8] = include_bytes!("aws-roots.pem");

/// Where the HTTPS client's trusted roots come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roots {
    /// [`AWS_ROOTS_PEM`]: every AWS endpoint of the commercial and GovCloud partitions chains to one of these five,
    /// and trusting no other CA is the least a function needs. Nothing is read from disk.
    Aws,
    /// The platform's store, as the SDK reads it by default.
    Platform,
}

impl Roots {
    /// [`Roots::Platform`] when the AWS roots might not be enough: `SSL_CERT_FILE` or `SSL_CERT_DIR` names a store
    /// (a private CA), an `AWS_ENDPOINT_URL*` is HTTPS (an endpoint other than AWS's own; over plain HTTP, as to an
    /// emulator, roots are never used), or `AWS_REGION` names a China region. [`Roots::Aws`] otherwise.
    pub fn from_env() -> Self {
        Self::choose(
            std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
        )
    }

    fn choose(mut vars: impl Iterator<Item = (String, String)>) -> Self {
        let platform = |(k, v): &(String, String)| match k.as_str() {
            "SSL_CERT_FILE" | "SSL_CERT_DIR" => !v.is_empty(),
            "AWS_REGION" => v.starts_with("cn-"),
            k if k.starts_with("AWS_ENDPOINT_URL") => {
                v.trim_start().to_ascii_lowercase().starts_with("https:")
            }
            _ => false,
        };
        if vars.any(|kv| platform(&kv)) {
            Roots::Platform
        } else {
            Roots::Aws
        }
    }
}

/// The functions' SDK settings: region and credentials from the environment when it holds them (Lambda sets
/// `AWS_REGION` and the role's keys), the full chains otherwise; the HTTPS client trusting [`Roots::from_env`].
pub async fn load() -> SdkConfig {
    let mut loader =
        aws_config::defaults(BehaviorVersion::latest()).http_client(https_client(Roots::from_env()));
    if let Some(region) = env_nonempty("AWS_REGION") {
        loader = loader.region(Region::new(region));
    }
    if env_nonempty("AWS_ACCESS_KEY_ID").is_some() && env_nonempty("AWS_SECRET_ACCESS_KEY").is_some() {
        loader = loader.credentials_provider(EnvironmentVariableCredentialsProvider::new());
    }
    loader.load().await
}

fn env_nonempty(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// The SDK's own rustls client (aws-lc, as `default-https-client` builds it) with the given roots.
pub fn https_client(roots: Roots) -> SharedHttpClient {
    let trust = match roots {
        Roots::Platform => TrustStore::default(),
        Roots::Aws => TrustStore::empty().with_pem_certificate(AWS_ROOTS_PEM),
    };
    let context = TlsContext::builder()
        .with_trust_store(trust)
        .build()
        .expect("a TLS context with a trust store always builds");
    aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(CryptoMode::AwsLc))
        .tls_context(context)
        .build_https()
}

/// A store error from any AWS SDK call: throttling is [`StoreError::Busy`] (answer 503 and let the sender retry),
/// anything else [`StoreError::Unavailable`] with the error's cause chain (requests never carry a body back).
pub(crate) fn sdk_error<E, R>(e: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match e.code() {
        Some(
            "ProvisionedThroughputExceededException"
            | "ThrottlingException"
            | "RequestLimitExceeded"
            | "SlowDown",
        ) => StoreError::Busy,
        _ => StoreError::Unavailable(DisplayErrorContext(&e).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    /// The DER of each certificate in a PEM document.
    fn ders(pem: &[u8]) -> Vec<Vec<u8>> {
        let text = std::str::from_utf8(pem).expect("PEM is ASCII");
        text.split("-----BEGIN CERTIFICATE-----")
            .skip(1)
            .map(|block| {
                let body = block
                    .split("-----END CERTIFICATE-----")
                    .next()
                    .unwrap_or_default();
                let b64: String = body.chars().filter(|c| !c.is_whitespace()).collect();
                base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .expect("base64")
            })
            .collect()
    }

    fn contains(haystack: &[u8], needle: &[u8]) -> bool {
        haystack.windows(needle.len()).any(|w| w == needle)
    }

    /// The five roots, each one byte for byte a root of Mozilla's program, and each named: a wrong or missing
    /// certificate here would make every call from a function fail its TLS handshake.
    #[test]
    fn the_aws_roots_are_amazon_trust_services_five_as_mozilla_ships_them() {
        let ours = ders(AWS_ROOTS_PEM);
        assert_eq!(ours.len(), 5);
        for der in &ours {
            assert!(
                webpki_root_certs::TLS_SERVER_ROOT_CERTS
                    .iter()
                    .any(|m| m.as_ref() == der.as_slice()),
                "a certificate in aws-roots.pem is not one of Mozilla's roots"
            );
        }
        for name in [
            "Amazon Root CA 1",
            "Amazon Root CA 2",
            "Amazon Root CA 3",
            "Amazon Root CA 4",
            "Starfield Services Root Certificate Authority - G2",
        ] {
            assert!(
                ours.iter().any(|der| contains(der, name.as_bytes())),
                "{name} is missing from aws-roots.pem"
            );
        }
    }

    /// The SDK reads the file with rustls' PEM reader, which must see the same five past the comments.
    #[test]
    fn the_sdk_s_pem_reader_finds_the_same_five() {
        use rustls_pki_types::pem::PemObject;
        let read: Vec<Vec<u8>> = rustls_pki_types::CertificateDer::pem_slice_iter(AWS_ROOTS_PEM)
            .map(|c| c.expect("valid PEM").as_ref().to_vec())
            .collect();
        assert_eq!(read, ders(AWS_ROOTS_PEM));
    }

    fn choose(vars: &[(&str, &str)]) -> Roots {
        Roots::choose(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn roots_are_the_platform_s_only_where_the_aws_roots_might_not_do() {
        // Lambda's own environment: the AWS roots.
        let lambda = [
            ("AWS_REGION", "eu-west-1"),
            ("AWS_LAMBDA_FUNCTION_NAME", "receiver"),
        ];
        assert_eq!(choose(&lambda), Roots::Aws);
        assert_eq!(choose(&[("AWS_REGION", "us-gov-west-1")]), Roots::Aws);
        assert_eq!(choose(&[]), Roots::Aws);
        // An emulator over plain HTTP uses no roots at all.
        assert_eq!(
            choose(&[("AWS_ENDPOINT_URL", "http://127.0.0.1:5000")]),
            Roots::Aws
        );
        assert_eq!(
            choose(&[("SSL_CERT_DIR", "")]),
            Roots::Aws,
            "an empty value names nothing"
        );

        assert_eq!(
            choose(&[("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")]),
            Roots::Platform
        );
        assert_eq!(choose(&[("SSL_CERT_DIR", "/etc/ssl/certs")]), Roots::Platform);
        assert_eq!(
            choose(&[("AWS_ENDPOINT_URL", "https://localhost.localstack.cloud:4566")]),
            Roots::Platform
        );
        assert_eq!(
            choose(&[("AWS_ENDPOINT_URL_DYNAMODB", "HTTPS://ddb.internal")]),
            Roots::Platform
        );
        assert_eq!(choose(&[("AWS_REGION", "cn-north-1")]), Roots::Platform);
    }
}
