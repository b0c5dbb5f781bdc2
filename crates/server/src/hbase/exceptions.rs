//! Errors as HBase's Java client understands them: an exception class name (the client
//! decides by class whether to relocate a region, retry or give up), a message, and the
//! do-not-retry flag.

use crate::error::ServerError;
use cellar_model::Error as StorageError;

pub const DO_NOT_RETRY: &str = "org.apache.hadoop.hbase.DoNotRetryIOException";
pub const IO: &str = "java.io.IOException";
pub const HBASE_IO: &str = "org.apache.hadoop.hbase.HBaseIOException";
pub const TABLE_NOT_FOUND: &str = "org.apache.hadoop.hbase.TableNotFoundException";
pub const TABLE_EXISTS: &str = "org.apache.hadoop.hbase.TableExistsException";
pub const TABLE_NOT_ENABLED: &str = "org.apache.hadoop.hbase.TableNotEnabledException";
pub const TABLE_NOT_DISABLED: &str = "org.apache.hadoop.hbase.TableNotDisabledException";
pub const NO_SUCH_FAMILY: &str = "org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException";
pub const NOT_SERVING_REGION: &str = "org.apache.hadoop.hbase.NotServingRegionException";
pub const UNKNOWN_SCANNER: &str = "org.apache.hadoop.hbase.UnknownScannerException";
pub const OUT_OF_ORDER_SCANNER_NEXT: &str =
    "org.apache.hadoop.hbase.exceptions.OutOfOrderScannerNextException";
pub const SERVER_STOPPED: &str =
    "org.apache.hadoop.hbase.regionserver.RegionServerStoppedException";
pub const CALL_QUEUE_TOO_BIG: &str = "org.apache.hadoop.hbase.CallQueueTooBigException";
pub const UNKNOWN_PROTOCOL: &str = "org.apache.hadoop.hbase.exceptions.UnknownProtocolException";
pub const FAILED_SANITY_CHECK: &str = "org.apache.hadoop.hbase.DoNotRetryIOException";
pub const NAMESPACE_NOT_FOUND: &str = "org.apache.hadoop.hbase.NamespaceNotFoundException";
pub const NAMESPACE_EXISTS: &str = "org.apache.hadoop.hbase.NamespaceExistException";
pub const CONSTRAINT: &str = "org.apache.hadoop.hbase.constraint.ConstraintException";
pub const CALL_TIMEOUT: &str = "org.apache.hadoop.hbase.ipc.CallTimeoutException";
pub const FATAL_CONNECTION: &str = "org.apache.hadoop.hbase.ipc.FatalConnectionException";
pub const WRONG_VERSION: &str = "org.apache.hadoop.hbase.ipc.WrongVersionException";
pub const BAD_AUTH: &str = "org.apache.hadoop.hbase.ipc.BadAuthException";
pub const SECURITY_NOT_ENABLED: &str = "org.apache.hadoop.hbase.ipc.SecurityNotEnabledException";
pub const REQUEST_TOO_BIG: &str = "org.apache.hadoop.hbase.exceptions.RequestTooBigException";
pub const ACCESS_DENIED: &str = "org.apache.hadoop.hbase.security.AccessDeniedException";
pub const UNKNOWN_REGION: &str = "org.apache.hadoop.hbase.UnknownRegionException";
pub const MERGE_REGION: &str = "org.apache.hadoop.hbase.exceptions.MergeRegionException";

/// An error on its way to an HBase client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{class}: {message}")]
pub struct HbaseError {
    /// The Java class the client instantiates.
    pub class: &'static str,
    pub message: String,
    pub do_not_retry: bool,
}

impl HbaseError {
    pub fn new(class: &'static str, message: impl Into<String>, do_not_retry: bool) -> HbaseError {
        HbaseError {
            class,
            message: message.into(),
            do_not_retry,
        }
    }

    /// A request the server will never accept as sent (bad argument, malformed message).
    pub fn do_not_retry(message: impl Into<String>) -> HbaseError {
        HbaseError::new(DO_NOT_RETRY, message, true)
    }

    pub fn unknown_service(service: &str) -> HbaseError {
        HbaseError::new(
            UNKNOWN_PROTOCOL,
            format!("service '{service}' is not served by Cellar"),
            true,
        )
    }

    /// A method of a known service that Cellar does not implement.
    pub fn unknown_method(service: &str, method: &str) -> HbaseError {
        HbaseError::unsupported(&format!("{service}.{method}"))
    }

    /// Something Cellar does not implement, logged so it shows in the server log. HBase's
    /// server answers `java.lang.UnsupportedOperationException` here, but the Java client only
    /// rebuilds `IOException`s: its caller would get "Unable to instantiate exception received
    /// from server" with this message lost. A `DoNotRetryIOException` arrives with it.
    pub fn unsupported(what: &str) -> HbaseError {
        tracing::info!(call = what, "HBase call not supported");
        HbaseError::new(
            DO_NOT_RETRY,
            format!("{what} is not supported by Cellar"),
            true,
        )
    }

    /// A message that does not decode.
    pub fn malformed(what: &str, e: impl std::fmt::Display) -> HbaseError {
        HbaseError::do_not_retry(format!("malformed {what}: {e}"))
    }
}

impl From<ServerError> for HbaseError {
    fn from(e: ServerError) -> HbaseError {
        let message = e.to_string();
        let (class, do_not_retry) = match &e {
            ServerError::TableNotFound(_) => (TABLE_NOT_FOUND, true),
            ServerError::TableExists(_) => (TABLE_EXISTS, true),
            ServerError::NamespaceExists(_) => (NAMESPACE_EXISTS, true),
            ServerError::NamespaceNotFound(_) => (NAMESPACE_NOT_FOUND, true),
            ServerError::NamespaceConstraint(_) => (CONSTRAINT, true),
            ServerError::TableDisabled(_) => (TABLE_NOT_ENABLED, true),
            ServerError::TableNotDisabled(_) => (TABLE_NOT_DISABLED, true),
            ServerError::NoSuchFamily { .. } => (NO_SUCH_FAMILY, true),
            ServerError::NotServingRegion { .. } => (NOT_SERVING_REGION, false),
            ServerError::UnknownScanner(_) => (UNKNOWN_SCANNER, true),
            ServerError::OutOfOrderScannerNext { .. } => (OUT_OF_ORDER_SCANNER_NEXT, true),
            ServerError::InvalidArgument(_)
            | ServerError::UnknownPreparedScan(_)
            | ServerError::Malformed(_)
            | ServerError::UnknownMethod(_) => (DO_NOT_RETRY, true),
            ServerError::Stopping => (SERVER_STOPPED, false),
            // Retriable, as a stopped server: the client drops what it cached about this
            // server and finds the active master (and meta's server) again.
            ServerError::NotActiveMaster(_) => (SERVER_STOPPED, false),
            ServerError::Internal(_) => (IO, false),
            ServerError::PermissionDenied(_) | ServerError::Unauthenticated(_) => {
                (ACCESS_DENIED, true)
            }
            ServerError::Storage(s) => match s {
                StorageError::NoSuchFamily(_) => (NO_SUCH_FAMILY, true),
                StorageError::WrongRegion(_) | StorageError::Closed(_) => {
                    (NOT_SERVING_REGION, false)
                }
                StorageError::InvalidSchema(_) | StorageError::InvalidArgument(_) => {
                    (DO_NOT_RETRY, true)
                }
                // Corrupt data is not fixed by asking again.
                StorageError::Checksum { .. }
                | StorageError::Corruption { .. }
                | StorageError::BadMagic { .. }
                | StorageError::UnsupportedVersion { .. } => (DO_NOT_RETRY, true),
                _ => (IO, false),
            },
        };
        HbaseError::new(class, message, do_not_retry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_become_the_classes_the_client_acts_on() {
        let e = HbaseError::from(ServerError::TableNotFound("t1".into()));
        assert_eq!(e.class, TABLE_NOT_FOUND);
        assert!(e.do_not_retry);
        assert!(e.message.contains("'t1'"), "{}", e.message);
        let family = HbaseError::from(ServerError::NoSuchFamily {
            table: "t".into(),
            family: "zz".into(),
        });
        assert_eq!(family.class, NO_SUCH_FAMILY);
        assert!(family.message.contains("'zz'"), "{}", family.message);
        let moved = HbaseError::from(ServerError::not_serving("t", 7, "split"));
        assert_eq!(moved.class, NOT_SERVING_REGION);
        assert!(!moved.do_not_retry, "the client must relocate and retry");
        let closed = HbaseError::from(ServerError::from(StorageError::Closed("r".into())));
        assert_eq!(closed.class, NOT_SERVING_REGION);
    }
}
