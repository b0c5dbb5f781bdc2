//! The TLS flags of the commands that connect as clients (`shell`, `bench`).

use cellar_client::TlsClientConfig;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ClientTlsArgs {
    /// Connect over TLS, trusting servers whose certificates this CA (PEM) signed.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// The client certificate (PEM) for servers that require one; its CN is the user.
    #[arg(long, value_name = "FILE", requires = "tls_key", requires = "tls_ca")]
    pub tls_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

impl ClientTlsArgs {
    /// The client's TLS, or `None` for plaintext; errors name the file.
    pub fn config(&self) -> Result<Option<TlsClientConfig>, String> {
        let Some(ca) = &self.tls_ca else {
            return Ok(None);
        };
        TlsClientConfig::from_files(ca, self.tls_cert.as_deref(), self.tls_key.as_deref())
            .map(Some)
            .map_err(|e| e.to_string())
    }
}
