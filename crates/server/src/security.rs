//! Security: TLS on every listener ([`tls`]), who a connection's user is ([`identity`]), and a
//! development CA for `cellar cert` and tests ([`certs`]).
//! The model, its settings and how it compares with HBase's: `docs/security.md`.

pub mod certs;
pub mod identity;
pub mod tls;

pub use tls::TlsServer;
