//! TLS to PostgreSQL: `sslmode=require` in the URL connects over TLS and checks the server's certificate and name
//! as a browser would (libpq's `verify-full`), against the web's roots and the operator's own (`[store] ca_file`,
//! for a private CA such as a cloud provider's database root). Any other `sslmode` (`disable`, and `prefer`, which
//! is the default and which libpq would satisfy with an unchecked certificate) connects without TLS: this store
//! never sends a password over a connection it half-trusts.

use std::path::Path;
use std::sync::Arc;

use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::keys::{read_roots, RootsFileError};
use crate::ports::StoreError;

/// The connector `config` asks for: `None` without TLS.
pub(super) fn connector(
    config: &tokio_postgres::Config,
    ca_file: Option<&Path>,
) -> Result<Option<MakeRustlsConnect>, StoreError> {
    if config.get_ssl_mode() != SslMode::Require {
        return Ok(None);
    }
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter().cloned());
    if let Some(path) = ca_file {
        let unreadable = |e: &dyn std::fmt::Display| {
            StoreError::Unavailable(format!("store.ca_file {}: {e}", path.display()))
        };
        let certs = read_roots(path).map_err(|e| match e {
            RootsFileError::Read(e) => unreadable(&e),
            RootsFileError::NotPem(e) => unreadable(&e),
        })?;
        if certs.is_empty() {
            return Err(unreadable(&"holds no PEM certificate"));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| unreadable(&e))?;
        }
    }
    let tls =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| StoreError::Unavailable(format!("TLS to PostgreSQL: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
    Ok(Some(MakeRustlsConnect::new(tls)))
}
