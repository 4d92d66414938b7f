//! A provider's HTTPS key host, stood in for by a local server: it serves fixed bodies by path over TLS with a
//! certificate for the provider's host names (from a test-only root), and records every path asked for, so a test
//! can tell that a request naming another host fetched nothing.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub struct HttpsServer {
    addr: SocketAddr,
    hits: Arc<Mutex<Vec<String>>>,
    bodies: Arc<Mutex<Vec<String>>>,
}

impl HttpsServer {
    /// Serves `routes` (path -> body) on 127.0.0.1 with the certificate chain and PKCS#8 key given as PEM.
    pub async fn start(cert_pem: &[u8], key_pem: &[u8], routes: HashMap<String, Vec<u8>>) -> HttpsServer {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<_, _>>()
            .unwrap_or_default();
        let key =
            PrivateKeyDer::from_pem_slice(key_pem).unwrap_or_else(|e| panic!("the test host's key: {e}"));
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap_or_else(|e| panic!("TLS versions: {e}"))
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap_or_else(|e| panic!("the test host's certificate: {e}"));
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("local addr: {e}"));
        let hits = Arc::new(Mutex::new(Vec::new()));
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let routes = Arc::new(routes);
        let (seen, sent) = (hits.clone(), bodies.clone());
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, routes, seen, bodies) =
                    (acceptor.clone(), routes.clone(), seen.clone(), sent.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                        match tls.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&head).into_owned();
                    let path = text.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    // The body, as long as its declared length (a POST for a key).
                    let end = text.find("\r\n\r\n").map_or(text.len(), |i| i + 4);
                    let declared = text
                        .lines()
                        .find_map(|l| {
                            let (name, value) = l.split_once(':')?;
                            name.trim()
                                .eq_ignore_ascii_case("content-length")
                                .then(|| value.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    let mut body = head[end.min(head.len())..].to_vec();
                    while body.len() < declared.min(64 * 1024) {
                        match tls.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => body.extend_from_slice(&buf[..n]),
                        }
                    }
                    if let Ok(mut seen) = seen.lock() {
                        seen.push(path.clone());
                    }
                    if let Ok(mut bodies) = bodies.lock() {
                        bodies.push(String::from_utf8_lossy(&body).into_owned());
                    }
                    let (status, body) = match routes.get(&path) {
                        Some(body) => ("200 OK", body.clone()),
                        None => ("404 Not Found", b"not found".to_vec()),
                    };
                    let head = format!(
                        "HTTP/1.1 {status}\r\ncontent-length: {}\r\ncontent-type: application/x-pem-file\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = tls.write_all(head.as_bytes()).await;
                    let _ = tls.write_all(&body).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        HttpsServer { addr, hits, bodies }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The body of every request, in order (empty for a GET).
    pub fn bodies(&self) -> Vec<String> {
        self.bodies.lock().map(|b| b.clone()).unwrap_or_default()
    }

    /// Every path asked for, in order.
    pub fn hits(&self) -> Vec<String> {
        self.hits.lock().map(|h| h.clone()).unwrap_or_default()
    }
}
