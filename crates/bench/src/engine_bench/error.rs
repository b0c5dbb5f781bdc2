//! The benchmark's error: a message naming what failed, for a human to read.

use std::fmt;

/// An error of the benchmark harness or of an engine under test, as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchError(pub String);

/// Results of the benchmark harness.
pub type Result<T> = std::result::Result<T, BenchError>;

impl BenchError {
    /// An error with `msg`.
    pub fn new(msg: impl Into<String>) -> BenchError {
        BenchError(msg.into())
    }

    /// Prefixes the message with what was being done.
    pub fn context(self, what: impl fmt::Display) -> BenchError {
        BenchError(format!("{what}: {}", self.0))
    }
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BenchError {}

impl From<std::io::Error> for BenchError {
    fn from(e: std::io::Error) -> BenchError {
        BenchError(e.to_string())
    }
}

impl From<cellar_model::Error> for BenchError {
    fn from(e: cellar_model::Error) -> BenchError {
        BenchError(format!("cellar: {e}"))
    }
}

impl From<serde_json::Error> for BenchError {
    fn from(e: serde_json::Error) -> BenchError {
        BenchError(format!("json: {e}"))
    }
}

/// Adds context to any displayable error.
pub trait Context<T> {
    /// Wraps the error with a description of the failed step.
    fn context(self, what: impl fmt::Display) -> Result<T>;
}

impl<T, E: fmt::Display> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| BenchError(format!("{what}: {e}")))
    }
}
