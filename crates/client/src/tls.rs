//! TLS for native connections (rustls; TLS 1.2 and 1.3 only): the CA bundle the client trusts
//! for servers' certificates, and its own certificate for servers that require one. A
//! connection is TLS from its first byte (the preamble travels inside it). The server's
//! certificate must name the host the client dialled: a DNS name, or an IP address in its
//! subject alternative names (`docs/security.md`).

use crate::error::{Error, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::TcpStream;

/// A client's TLS settings, loaded and checked once; cheap to clone.
#[derive(Clone)]
pub struct TlsClientConfig {
    config: Arc<rustls::ClientConfig>,
    /// The files it came from: what `Debug` and equality show.
    ca: PathBuf,
    cert: Option<PathBuf>,
}

impl std::fmt::Debug for TlsClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClientConfig")
            .field("ca", &self.ca)
            .field("cert", &self.cert)
            .finish()
    }
}

impl PartialEq for TlsClientConfig {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.config, &other.config)
    }
}

impl Eq for TlsClientConfig {}

impl TlsClientConfig {
    /// Trusts the CA certificates in `ca` (PEM) and, given `cert` and `key` (PEM), presents
    /// that certificate to servers that ask for one. Errors name the file and the problem.
    pub fn from_files(ca: &Path, cert: Option<&Path>, key: Option<&Path>) -> Result<Self> {
        let mut roots = rustls::RootCertStore::empty();
        for c in read_certs(ca, "--tls-ca")? {
            roots.add(c).map_err(|e| {
                tls_error(format!(
                    "{}: not a usable CA certificate: {e}",
                    ca.display()
                ))
            })?;
        }
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(rustls::ALL_VERSIONS)
            .map_err(|e| tls_error(e.to_string()))?
            .with_root_certificates(roots);
        let config = match (cert, key) {
            (Some(cert), Some(key)) => builder
                .with_client_auth_cert(read_certs(cert, "--tls-cert")?, read_key(key, "--tls-key")?)
                .map_err(|e| {
                    tls_error(format!(
                        "{} and {}: the certificate and key do not go together: {e}",
                        cert.display(),
                        key.display()
                    ))
                })?,
            (None, None) => builder.with_no_client_auth(),
            _ => {
                return Err(tls_error(
                    "a client certificate needs its key, and a key its certificate (--tls-cert with --tls-key)".into(),
                ))
            }
        };
        Ok(TlsClientConfig {
            config: Arc::new(config),
            ca: ca.to_path_buf(),
            cert: cert.map(Path::to_path_buf),
        })
    }

    /// Completes the TLS handshake over `stream`, checking the server's certificate against
    /// the host of `addr` (`host:port`, `[v6]:port`).
    pub(crate) async fn connect(
        &self,
        addr: &str,
        stream: TcpStream,
    ) -> Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let name = server_name(addr)?;
        tokio_rustls::TlsConnector::from(self.config.clone())
            .connect(name, stream)
            .await
            .map_err(|e| {
                tls_error(format!(
                    "TLS handshake with {addr} failed: {e} (does the server serve TLS, with a certificate for this host signed by the CA given?)"
                ))
            })
    }
}

/// The crypto the client uses: ring, TLS 1.2 and 1.3.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_error(message: String) -> Error {
    Error::Tls(message)
}

/// The name a server's certificate must carry to be the one at `addr`.
fn server_name(addr: &str) -> Result<ServerName<'static>> {
    let host = match addr.rsplit_once(':') {
        Some((host, _port)) => host,
        None => addr,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).map_err(|e| {
        tls_error(format!(
            "{addr}: {host:?} is not a host name TLS can check: {e}"
        ))
    })
}

/// Every certificate of a PEM file; at least one.
pub(crate) fn read_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| tls_error(format!("{what} {}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(tls_error(format!(
            "{what} {}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
            path.display()
        )));
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub(crate) fn read_key(path: &Path, what: &str) -> Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| {
        tls_error(format!(
            "{what} {}: no usable private key: {e}",
            path.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_come_from_the_address() {
        assert!(matches!(
            server_name("127.0.0.1:16200"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name("[::1]:16200"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name("db.example.com:16200"),
            Ok(ServerName::DnsName(_))
        ));
        assert!(server_name("bad host:1").is_err());
    }

    #[test]
    fn missing_and_empty_files_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("nope.pem");
        let e = TlsClientConfig::from_files(&missing, None, None)
            .expect_err("a missing CA file")
            .to_string();
        assert!(e.contains("nope.pem"), "{e}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not pem\n").expect("write");
        let e = TlsClientConfig::from_files(&empty, None, None)
            .expect_err("no certificate")
            .to_string();
        assert!(e.contains("no PEM certificate"), "{e}");
    }
}
