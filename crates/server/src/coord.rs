//! Coordination: who is alive, who is the active master, where `hbase:meta` is served and
//! what the cluster is called (docs/design/0004-cluster.md §2).
//!
//! One trait, two implementations: [`zk::ZkCoordination`] on a real ZooKeeper for clusters
//! (and for a standalone server given `--zk`), [`local::LocalCoordination`] in process for
//! the embedded default. Server code calls the trait only. The calls block (with a deadline);
//! they are made at startup, by admin operations and by background threads, never on a
//! network reactor.

pub mod local;
pub mod tenure;
pub mod zk;
pub mod znodes;

pub use tenure::Tenure;

use std::fmt;
use std::sync::Arc;

/// A server as HBase names it: the host and port HBase clients reach it on, and when it
/// started (ms since the epoch), which tells a restarted server from its earlier life.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServerName {
    pub host: String,
    pub port: u16,
    pub start_code: u64,
}

impl ServerName {
    /// Parses HBase's `host,port,startcode` (the name of a `/hbase/rs` child).
    pub fn parse(text: &str) -> Option<ServerName> {
        let mut parts = text.rsplitn(3, ',');
        let start_code = parts.next()?.parse().ok()?;
        let port = parts.next()?.parse().ok()?;
        let host = parts.next()?;
        if host.is_empty() {
            return None;
        }
        Some(ServerName {
            host: host.to_string(),
            port,
            start_code,
        })
    }
}

impl fmt::Display for ServerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{},{}", self.host, self.port, self.start_code)
    }
}

/// A server as the cluster records it: its HBase name and Cellar's own addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerRecord {
    pub name: ServerName,
    /// The native RPC address, `host:port`.
    pub native_addr: String,
    /// The metrics and status HTTP address, `host:port` (empty if unknown).
    pub http_addr: String,
}

/// The state of this process's coordination session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    Connected,
    /// Connection lost; the session may still be recovered within its timeout.
    Disconnected,
    /// The session is gone: its ephemeral nodes are deleted and others may have taken over
    /// what this process held. Final.
    Expired,
    /// Closed by this process. Final.
    Closed,
}

impl SessionState {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Connected => "connected",
            SessionState::Disconnected => "disconnected",
            SessionState::Expired => "expired",
            SessionState::Closed => "closed",
        }
    }
}

/// The outcome of standing for master.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Election {
    /// This server is the active master.
    Active,
    /// Another server is; this one is registered as a backup.
    Backup { active: Option<ServerRecord> },
}

/// Why a coordination call failed. Messages name the service and the node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoordError {
    #[error("{0}")]
    Unreachable(String),
    #[error("ZooKeeper did not answer {what} within {millis} ms")]
    Timeout { what: String, millis: u64 },
    #[error("the ZooKeeper session has expired ({what})")]
    SessionExpired { what: String },
    #[error("ZooKeeper {what}: {reason}")]
    Failed { what: String, reason: String },
    #[error("ZooKeeper node {path} is not what Cellar expects: {reason}")]
    Corrupt { path: String, reason: String },
    #[error("{0}")]
    Conflict(String),
}

/// Shared handle to the coordination in use.
pub type CoordRef = Arc<dyn Coordination>;

/// What servers ask of the coordination service.
pub trait Coordination: Send + Sync {
    /// Where coordination lives, for logs and `/status` (`in-process`, `zookeeper HOST:PORT`).
    fn describe(&self) -> String;

    /// The cluster id as published, if any.
    fn cluster_id(&self) -> Result<Option<String>, CoordError>;

    /// Publishes the cluster id (the active master does, from its root's `cluster_id` file;
    /// an earlier value is replaced, as HBase's master does).
    fn publish_cluster_id(&self, id: &str) -> Result<(), CoordError>;

    /// Announces this region server as alive for as long as the session lasts.
    fn register_server(&self, me: &ServerRecord) -> Result<(), CoordError>;

    /// The region servers alive now.
    fn live_servers(&self) -> Result<Vec<ServerRecord>, CoordError>;

    /// Stands for master: active if no live master exists, else a backup.
    fn try_become_master(&self, me: &ServerRecord) -> Result<Election, CoordError>;

    /// The active master, if one is alive.
    fn active_master(&self) -> Result<Option<ServerRecord>, CoordError>;

    /// The backup masters alive now.
    fn backup_masters(&self) -> Result<Vec<ServerRecord>, CoordError>;

    /// Publishes the server that serves `hbase:meta`.
    fn publish_meta_location(&self, server: &ServerRecord) -> Result<(), CoordError>;

    /// The server that serves `hbase:meta`, as published.
    fn meta_location(&self) -> Result<Option<ServerRecord>, CoordError>;

    /// Records whether the balancer is on, for whichever master is active later.
    fn publish_balancer(&self, on: bool) -> Result<(), CoordError>;

    /// Whether the balancer is on as recorded; `None` if never set (on, by default).
    fn balancer(&self) -> Result<Option<bool>, CoordError>;

    /// The session's state now.
    fn session(&self) -> SessionState;

    /// The session timeout the service granted, if it has sessions.
    fn session_timeout(&self) -> Option<std::time::Duration> {
        None
    }

    /// Withdraws what this process announced (its server, its mastership) and ends the
    /// session. Later calls fail.
    fn close(&self);
}

impl fmt::Debug for dyn Coordination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Coordination({})", self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_read_back_as_hbase_writes_them() {
        let name = ServerName {
            host: "host-1.example".into(),
            port: 16020,
            start_code: 1_764_000_000_123,
        };
        assert_eq!(name.to_string(), "host-1.example,16020,1764000000123");
        assert_eq!(ServerName::parse(&name.to_string()), Some(name));
        for bad in ["", "h,1", ",1,2", "h,port,2", "h,1,code", "h,70000,1"] {
            assert_eq!(ServerName::parse(bad), None, "{bad:?}");
        }
    }
}
