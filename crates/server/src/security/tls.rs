//! TLS on a listener (rustls with ring; TLS 1.2 and 1.3 only). One [`TlsServer`] per node
//! serves its native, HBase and HTTP ports: the certificate and key from files, and, when a
//! client CA is set, client certificates signed by it (required or optional). The files are
//! checked for changes at most every `tls.reload_check_ms` as connections arrive; a change
//! serves the next connections with the new files, a file that does not load keeps the old
//! ones (logged once per change).
//!
//! A TLS port sniffs a connection's first byte: a TLS handshake record starts with 22. Anything
//! else is a plaintext client, which its protocol answers with an error saying the port needs
//! TLS before it closes (the native protocol's error frame, HBase's fatal connection
//! exception, HTTP's 400), and which is logged and counted.

use crate::config::{ClientAuth, TlsConfig};
use parking_lot::Mutex;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::net::TcpStream;

/// The first byte of a TLS handshake record (ContentType handshake).
const TLS_HANDSHAKE: u8 = 22;

/// A node's TLS settings, reloaded when their files change.
pub struct TlsServer {
    files: Files,
    interval: Duration,
    state: Mutex<State>,
    /// Where refused handshakes are audited, once the server's authorization is up.
    audit: std::sync::OnceLock<Arc<super::audit::AuditLog>>,
}

#[derive(Debug, Clone)]
struct Files {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
    client_auth: ClientAuth,
}

struct State {
    config: Arc<rustls::ServerConfig>,
    /// The files' modification times and sizes when `config` was loaded.
    loaded: Stamp,
    /// A stamp whose files did not load (reported once).
    failed: Option<Stamp>,
    next_check: Instant,
    reloads: u64,
}

type Stamp = Vec<Option<(SystemTime, u64)>>;

/// How a connection on a TLS port began.
pub(crate) enum Accepted {
    /// The handshake completed; `user` is the client certificate's, if one was presented.
    Tls {
        stream: Box<tokio_rustls::server::TlsStream<TcpStream>>,
        user: Option<String>,
    },
    /// The client sent plaintext: its protocol answers it with an error, then closes.
    Plaintext(TcpStream),
    /// The handshake failed or the client left; logged and counted.
    Failed,
}

impl TlsServer {
    /// The node's TLS, or `None` when `tls.cert` is not set. Errors name the file.
    pub fn from_config(config: &TlsConfig) -> Result<Option<Arc<TlsServer>>, String> {
        let (Some(cert), Some(key)) = (&config.cert, &config.key) else {
            return Ok(None);
        };
        let files = Files {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: config.client_ca.clone(),
            client_auth: config.client_auth,
        };
        let loaded = files.stamp();
        let server = files.load()?;
        Ok(Some(Arc::new(TlsServer {
            files,
            interval: config.reload_interval(),
            state: Mutex::new(State {
                config: Arc::new(server),
                loaded,
                failed: None,
                next_check: Instant::now() + config.reload_interval(),
                reloads: 0,
            }),
            audit: std::sync::OnceLock::new(),
        })))
    }

    /// The configuration for a new connection: the current one, reloaded first when its files
    /// changed (checked at most once per interval).
    pub fn current(&self) -> Arc<rustls::ServerConfig> {
        let mut state = self.state.lock();
        let now = Instant::now();
        if now < state.next_check {
            return state.config.clone();
        }
        state.next_check = now + self.interval;
        let stamp = self.files.stamp();
        if stamp == state.loaded || state.failed.as_ref() == Some(&stamp) {
            return state.config.clone();
        }
        match self.files.load() {
            Ok(config) => {
                state.config = Arc::new(config);
                state.loaded = stamp;
                state.failed = None;
                state.reloads += 1;
                tracing::info!(cert = %self.files.cert.display(), "TLS certificate, key and CA reloaded");
            }
            Err(e) => {
                // Half-written files (a renewal in progress) load on a later check.
                state.failed = Some(stamp);
                tracing::error!(error = %e, "TLS files changed but do not load; serving with the previous ones");
            }
        }
        state.config.clone()
    }

    /// Audits refused handshakes in `log` from now on.
    pub fn set_audit(&self, log: Arc<super::audit::AuditLog>) {
        let _ = self.audit.set(log);
    }

    fn audit_failure(&self, peer: std::net::SocketAddr, what: &str, reason: &str) {
        if let Some(log) = self.audit.get() {
            log.record(&super::audit::Record {
                event: super::audit::Event::AuthenticationFailed,
                user: None,
                real_user: None,
                address: Some(peer.ip()),
                protocol: what,
                action: "TLS handshake",
                object: "",
                reason,
            });
        }
    }

    /// How many times the files were reloaded since start.
    pub fn reloads(&self) -> u64 {
        self.state.lock().reloads
    }

    /// Whether clients are asked for certificates.
    pub fn asks_for_client_certificates(&self) -> bool {
        self.files.client_ca.is_some()
    }

    /// Begins a connection on a TLS port: sniffs its first byte, then completes the handshake
    /// within `timeout`. A failure is logged (with the peer and why) and counted in `metrics`.
    pub(crate) async fn accept(
        &self,
        stream: TcpStream,
        timeout: Duration,
        peer: std::net::SocketAddr,
        metrics: &crate::metrics::RpcMetrics,
        what: &str,
    ) -> Accepted {
        let started = tokio::time::Instant::now();
        let mut first = [0u8; 1];
        match tokio::time::timeout(timeout, stream.peek(&mut first)).await {
            Ok(Ok(1)) => {}
            Ok(Ok(_)) | Ok(Err(_)) => return Accepted::Failed,
            Err(_) => {
                metrics.connection_timed_out();
                return Accepted::Failed;
            }
        }
        if first[0] != TLS_HANDSHAKE {
            metrics.tls_plaintext_refused();
            tracing::warn!(%peer, "plaintext client on the {what} TLS port; answering that TLS is required and closing");
            return Accepted::Plaintext(stream);
        }
        let acceptor = tokio_rustls::TlsAcceptor::from(self.current());
        let left = timeout.saturating_sub(started.elapsed());
        let stream = match tokio::time::timeout(left, acceptor.accept(stream)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                metrics.tls_handshake_failed();
                tracing::warn!(%peer, error = %e, "TLS handshake on the {what} port failed");
                self.audit_failure(peer, what, &format!("TLS handshake failed: {e}"));
                return Accepted::Failed;
            }
            Err(_) => {
                metrics.tls_handshake_failed();
                metrics.connection_timed_out();
                tracing::info!(%peer, "TLS handshake on the {what} port did not finish in time");
                return Accepted::Failed;
            }
        };
        let user = match stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
        {
            None => None,
            Some(cert) => match super::identity::user_from_certificate(cert) {
                Ok(user) => Some(user),
                Err(e) => {
                    metrics.tls_handshake_failed();
                    tracing::warn!(%peer, error = %e, "client certificate on the {what} port names no user; closing");
                    self.audit_failure(peer, what, &e);
                    return Accepted::Failed;
                }
            },
        };
        Accepted::Tls {
            stream: Box::new(stream),
            user,
        }
    }
}

impl Files {
    fn stamp(&self) -> Stamp {
        let mut paths: Vec<&Path> = vec![&self.cert, &self.key];
        paths.extend(self.client_ca.as_deref());
        paths
            .into_iter()
            .map(|p| {
                let m = std::fs::metadata(p).ok()?;
                Some((m.modified().ok()?, m.len()))
            })
            .collect()
    }

    fn load(&self) -> Result<rustls::ServerConfig, String> {
        let provider = provider();
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(rustls::ALL_VERSIONS)
            .map_err(|e| format!("TLS: {e}"))?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                for c in read_certs(ca, "tls.client_ca")? {
                    roots.add(c).map_err(|e| {
                        format!(
                            "tls.client_ca {}: not a usable CA certificate: {e}",
                            ca.display()
                        )
                    })?;
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                );
                let verifier = match self.client_auth {
                    ClientAuth::Required => verifier,
                    ClientAuth::Optional => verifier.allow_unauthenticated(),
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| format!("tls.client_ca {}: {e}", ca.display()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let certs = read_certs(&self.cert, "tls.cert")?;
        let key = PrivateKeyDer::from_pem_file(&self.key)
            .map_err(|e| format!("tls.key {}: no usable private key: {e}", self.key.display()))?;
        builder.with_single_cert(certs, key).map_err(|e| {
            format!(
                "tls.cert {} and tls.key {} do not go together: {e}",
                self.cert.display(),
                self.key.display()
            )
        })
    }
}

/// The crypto TLS uses: ring.
pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Every certificate of a PEM file; at least one. `key` names the setting in errors.
pub(crate) fn read_certs(path: &Path, key: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{key} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{key} {}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
            path.display()
        ));
    }
    Ok(certs)
}
