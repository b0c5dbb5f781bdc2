//! The server's error: each variant names what the caller needs to act on, and maps to one
//! wire error code.

use cellar_model::Error as StorageError;
use cellar_proto::pb;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("table '{0}' not found")]
    TableNotFound(String),
    #[error("table '{0}' already exists")]
    TableExists(String),
    #[error("table '{0}' is disabled")]
    TableDisabled(String),
    #[error("table '{0}' is not disabled (disable it first)")]
    TableNotDisabled(String),
    #[error("column family '{family}' does not exist in table '{table}'")]
    NoSuchFamily { table: String, family: String },
    #[error("namespace '{0}' already exists")]
    NamespaceExists(String),
    #[error("namespace '{0}' does not exist")]
    NamespaceNotFound(String),
    /// A namespace change its state forbids (removing a reserved or non-empty namespace).
    #[error("{0}")]
    NamespaceConstraint(String),
    #[error("region {region} of table '{table}' is not served here: {reason}")]
    NotServingRegion {
        table: String,
        region: u64,
        reason: String,
    },
    #[error("scanner {0} is unknown: its lease expired or it was closed")]
    UnknownScanner(u64),
    /// A scanner call whose `next_call_seq` is not the one the scanner expects (HBase's
    /// per-scanner call sequence): a retry of a call already answered, or one skipped.
    #[error("Expected nextCallSeq: {expected} But the nextCallSeq got from client: {got}; scanner {scanner}")]
    OutOfOrderScannerNext {
        scanner: u64,
        expected: u64,
        got: u64,
    },
    #[error("prepared scan {0} is unknown on this connection: its lease expired, it was closed, or another connection prepared it; prepare it again")]
    UnknownPreparedScan(u64),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("malformed request: {0}")]
    Malformed(String),
    #[error("unknown method {0}")]
    UnknownMethod(i32),
    #[error("the server is stopping")]
    Stopping,
    /// A master that stepped down (its ZooKeeper session expired, or another is active):
    /// retriable; clients go to the active master.
    #[error("this master is no longer the active master: {0}; it refuses master calls and exits. Ask the active master (ZooKeeper's /hbase/master, or the next listed master)")]
    NotActiveMaster(String),
    #[error("internal error: {0}")]
    Internal(String),
    /// The caller may not do this; the message names the user, the action and the object
    /// (HBase's `AccessDeniedException` wording).
    #[error("{0}")]
    PermissionDenied(String),
    /// The caller is not known (no certificate, and no user the server may take its word for).
    #[error("{0}")]
    Unauthenticated(String),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl ServerError {
    /// A catalog call on a cluster's region server, which has no meta: the master has.
    pub fn not_the_master() -> ServerError {
        ServerError::invalid(
            "this is a region server of a cluster: tables and namespaces are administered \
             by the active master (see `/hbase/master` in ZooKeeper or the master's address)",
        )
    }

    pub fn not_serving(table: &str, region: u64, reason: &str) -> ServerError {
        ServerError::NotServingRegion {
            table: table.to_string(),
            region,
            reason: reason.to_string(),
        }
    }

    pub fn invalid(msg: impl Into<String>) -> ServerError {
        ServerError::InvalidArgument(msg.into())
    }

    /// The wire code of this error.
    pub fn code(&self) -> pb::ErrorCode {
        use pb::ErrorCode as C;
        match self {
            ServerError::TableNotFound(_) => C::TableNotFound,
            ServerError::TableExists(_) => C::TableExists,
            ServerError::TableDisabled(_) => C::TableDisabled,
            ServerError::TableNotDisabled(_) => C::TableNotDisabled,
            ServerError::NoSuchFamily { .. } => C::NoSuchFamily,
            ServerError::NotServingRegion { .. } => C::NotServingRegion,
            ServerError::UnknownScanner(_) => C::UnknownScanner,
            // Only the HBase front end checks call sequences.
            ServerError::OutOfOrderScannerNext { .. } => C::InvalidArgument,
            ServerError::UnknownPreparedScan(_) => C::UnknownPreparedScan,
            // The native protocol has no namespace codes; the message names the problem.
            ServerError::InvalidArgument(_)
            | ServerError::NamespaceExists(_)
            | ServerError::NamespaceNotFound(_)
            | ServerError::NamespaceConstraint(_) => C::InvalidArgument,
            ServerError::Malformed(_) => C::MalformedRequest,
            ServerError::UnknownMethod(_) => C::UnknownMethod,
            ServerError::Stopping | ServerError::NotActiveMaster(_) => C::ServerStopping,
            ServerError::Internal(_) => C::Internal,
            ServerError::PermissionDenied(_) => C::PermissionDenied,
            ServerError::Unauthenticated(_) => C::Unauthenticated,
            ServerError::Storage(e) => match e {
                StorageError::Io { .. }
                | StorageError::WalFailed(_)
                | StorageError::OutcomeUnknown(_) => C::Io,
                StorageError::Checksum { .. }
                | StorageError::Corruption { .. }
                | StorageError::BadMagic { .. }
                | StorageError::UnsupportedVersion { .. } => C::Corruption,
                StorageError::InvalidSchema(_) | StorageError::InvalidArgument(_) => {
                    C::InvalidArgument
                }
                StorageError::NoSuchFamily(_) => C::NoSuchFamily,
                StorageError::WrongRegion(_) | StorageError::Closed(_) => C::NotServingRegion,
                // Only cache-only reads see it, and they fall back to the pool instead.
                StorageError::NotCached => C::Internal,
            },
        }
    }

    /// The error as it travels in a response header.
    pub fn to_rpc(&self) -> pb::RpcError {
        pb::RpcError {
            code: self.code() as i32,
            message: self.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_errors_map_to_their_codes_and_keep_their_message() {
        let e = ServerError::from(StorageError::NoSuchFamily("'x' in table 't'".into()));
        let rpc = e.to_rpc();
        assert_eq!(rpc.code, pb::ErrorCode::NoSuchFamily as i32);
        assert!(rpc.message.contains("'x' in table 't'"), "{}", rpc.message);
        let closed = ServerError::from(StorageError::Closed("region 5".into()));
        assert_eq!(closed.code(), pb::ErrorCode::NotServingRegion);
        let corrupt = ServerError::from(StorageError::checksum("f.sf", 10, "block"));
        assert_eq!(corrupt.code(), pb::ErrorCode::Corruption);
        assert_eq!(
            ServerError::TableNotFound("t".into()).to_rpc().message,
            "table 't' not found"
        );
    }
}
