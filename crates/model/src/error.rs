//! The error type shared by every layer. Each variant names what a user needs to act on:
//! the file and offset of a corruption, the option that is invalid, the family that is unknown.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("io error on {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("checksum mismatch in {file} at offset {offset}: {detail}")]
    Checksum {
        file: String,
        offset: u64,
        detail: String,
    },
    #[error("corruption in {file} at offset {offset}: {detail}")]
    Corruption {
        file: String,
        offset: u64,
        detail: String,
    },
    #[error("{file}: bad magic {found:#x}, not a Cellar {kind}")]
    BadMagic {
        file: String,
        kind: &'static str,
        found: u64,
    },
    #[error(
        "{file}: format version {found} is newer than this build supports (up to {supported})"
    )]
    UnsupportedVersion {
        file: String,
        found: u32,
        supported: u32,
    },
    #[error("invalid schema: {0}")]
    InvalidSchema(String),
    #[error("no such column family: {0}")]
    NoSuchFamily(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A cache-only read ([`crate`] users: `Region::get_cached`) needed a block from disk.
    #[error("the read needs a block that is not in the block cache")]
    NotCached,
    #[error("row is outside this region: {0}")]
    WrongRegion(String),
    #[error("{0} is closed")]
    Closed(String),
    #[error("write-ahead log failed earlier; region must be reopened: {0}")]
    WalFailed(String),
    /// A write that reached the write-ahead log, or may have, but cannot be acknowledged: it
    /// is not applied here, and whoever replays that log may yet apply it. Neither "done" nor
    /// "not done" would be true; a client retries it (nonces keep increments and appends
    /// from applying twice).
    #[error("the outcome of the write is unknown: {0}")]
    OutcomeUnknown(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The kind of an I/O error, None for other errors.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            Error::Io { source, .. } => Some(source.kind()),
            _ => None,
        }
    }

    /// Wraps an IO error with the path it happened on.
    pub fn io(path: impl std::fmt::Display, source: io::Error) -> Error {
        Error::Io {
            path: path.to_string(),
            source,
        }
    }

    pub fn corruption(
        file: impl std::fmt::Display,
        offset: u64,
        detail: impl Into<String>,
    ) -> Error {
        Error::Corruption {
            file: file.to_string(),
            offset,
            detail: detail.into(),
        }
    }

    pub fn checksum(file: impl std::fmt::Display, offset: u64, detail: impl Into<String>) -> Error {
        Error::Checksum {
            file: file.to_string(),
            offset,
            detail: detail.into(),
        }
    }
}
