//! Security: TLS on every listener ([`tls`]), who a connection's user is ([`identity`]), what
//! users may do ([`acl`], [`authz`]), the audit log ([`audit`]), and a development CA for
//! `cellar cert` and tests ([`certs`]).
//! The model, its settings and how it compares with HBase's: `docs/security.md`.

pub mod acl;
pub mod audit;
pub mod authz;
pub mod certs;
pub mod data_access;
pub mod identity;
pub mod tls;

pub use authz::{Authz, Caller};
pub use tls::TlsServer;
