//! The client's errors and how each is handled: retried after relocating the region, retried
//! after a pause, or handed to the caller at once.

use cellar_proto::pb::{self, ErrorCode};
use std::io;
use std::time::Duration;

/// Everything a client call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server refused the call; `message` is the server's (it names tables and families).
    #[error("{message} ({})", code.as_str_name())]
    Rpc { code: ErrorCode, message: String },
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    /// The peer sent something that does not follow the native protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// No answer within the call timeout.
    #[error("call timed out after {0:?}")]
    Timeout(Duration),
    #[error("gave up after {attempts} attempts; last error: {last}")]
    RetriesExhausted { attempts: u32, last: Box<Error> },
    /// The connection went away before the call was answered.
    #[error("connection closed")]
    Closed,
    /// The transport asked for cannot be used (no UCX library, or the server does not offer
    /// it); retrying cannot help.
    #[error("transport unavailable: {0}")]
    Transport(String),
    /// TLS could not be set up: a certificate or key file, or the handshake (an untrusted or
    /// expired certificate, one for another host, a server without TLS). Retrying cannot help.
    #[error("tls: {0}")]
    Tls(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error as the caller would get it from the server; also used for arguments the client
    /// can reject by itself, so callers see one code for one problem.
    pub(crate) fn rpc(code: ErrorCode, message: impl Into<String>) -> Error {
        Error::Rpc {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn from_pb(e: pb::RpcError) -> Error {
        let code = ErrorCode::try_from(e.code).unwrap_or(ErrorCode::Unspecified);
        Error::Rpc {
            code,
            message: e.message,
        }
    }

    /// The server's error code, if the server refused the call (looking through
    /// [`Error::RetriesExhausted`]).
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Rpc { code, .. } => Some(*code),
            Error::RetriesExhausted { last, .. } => last.code(),
            _ => None,
        }
    }

    /// How the client reacts to this error.
    pub(crate) fn handling(&self) -> Handling {
        match self {
            Error::Io(_) | Error::Closed => Handling::Relocate,
            Error::Rpc { code, .. } => match code {
                // A prepared scan's handle the server forgot: prepared again on the retry.
                ErrorCode::NotServingRegion
                | ErrorCode::ServerStopping
                | ErrorCode::UnknownPreparedScan => Handling::Relocate,
                ErrorCode::ServerBusy => Handling::Pause,
                _ => Handling::Fail,
            },
            Error::Protocol(_)
            | Error::Timeout(_)
            | Error::RetriesExhausted { .. }
            | Error::Transport(_)
            | Error::Tls(_) => Handling::Fail,
        }
    }

    /// Whether the client retries calls that fail with this error.
    pub fn is_retryable(&self) -> bool {
        self.handling() != Handling::Fail
    }
}

/// What a failed attempt calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handling {
    /// The region may be elsewhere (split, moved, server gone): drop its cached location,
    /// look it up again and retry.
    Relocate,
    /// The server is overloaded: retry the same place after a pause.
    Pause,
    /// Retrying cannot help: the caller gets the error.
    Fail,
}

/// One error reported to many waiters (the calls of a dropped connection, a batch's actions):
/// `io::Error` is not `Clone`, so its kind and text are copied.
impl Clone for Error {
    fn clone(&self) -> Error {
        match self {
            Error::Rpc { code, message } => Error::Rpc {
                code: *code,
                message: message.clone(),
            },
            Error::Io(e) => Error::Io(io::Error::new(e.kind(), e.to_string())),
            Error::Protocol(m) => Error::Protocol(m.clone()),
            Error::Timeout(d) => Error::Timeout(*d),
            Error::RetriesExhausted { attempts, last } => Error::RetriesExhausted {
                attempts: *attempts,
                last: last.clone(),
            },
            Error::Closed => Error::Closed,
            Error::Transport(m) => Error::Transport(m.clone()),
            Error::Tls(m) => Error::Tls(m.clone()),
        }
    }
}

/// Builds the error of a response message that lacks a required field.
pub(crate) fn missing(what: &str) -> Error {
    Error::Protocol(format!("server response lacks {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_classified_as_hbase_clients_do() {
        let rpc = |code| Error::rpc(code, "x");
        assert_eq!(
            rpc(ErrorCode::NotServingRegion).handling(),
            Handling::Relocate
        );
        assert_eq!(
            rpc(ErrorCode::ServerStopping).handling(),
            Handling::Relocate
        );
        assert_eq!(rpc(ErrorCode::ServerBusy).handling(), Handling::Pause);
        for code in [
            ErrorCode::TableNotFound,
            ErrorCode::NoSuchFamily,
            ErrorCode::InvalidArgument,
            ErrorCode::TableDisabled,
            ErrorCode::UnknownScanner,
            ErrorCode::Internal,
        ] {
            assert_eq!(rpc(code).handling(), Handling::Fail, "{code:?}");
        }
        assert_eq!(Error::Closed.handling(), Handling::Relocate);
        let refused = Error::Io(io::Error::new(io::ErrorKind::ConnectionRefused, "no"));
        assert!(refused.is_retryable());
        assert!(!Error::Timeout(Duration::from_secs(1)).is_retryable());
        assert!(!Error::Protocol("bad".into()).is_retryable());
    }

    #[test]
    fn display_keeps_the_server_message_and_names_the_code() {
        let e = Error::from_pb(pb::RpcError {
            code: ErrorCode::NoSuchFamily as i32,
            message: "table 'users' has no family 'zz'".into(),
        });
        assert_eq!(
            e.to_string(),
            "table 'users' has no family 'zz' (NO_SUCH_FAMILY)"
        );
        let wrapped = Error::RetriesExhausted {
            attempts: 3,
            last: Box::new(e.clone()),
        };
        assert_eq!(wrapped.code(), Some(ErrorCode::NoSuchFamily));
        assert!(wrapped.to_string().contains("after 3 attempts"));
        let io = Error::Io(io::Error::new(io::ErrorKind::BrokenPipe, "pipe"));
        assert!(matches!(io.clone(), Error::Io(e) if e.kind() == io::ErrorKind::BrokenPipe));
    }
}
