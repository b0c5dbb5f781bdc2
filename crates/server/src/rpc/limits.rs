//! The bounds a connection keeps, native or HBase, TCP or UCX: what the [`super::stream`]
//! reading a connection, the protocols on top of it and the UCX transport all check. A leaf,
//! so that each of them can depend on it without depending on one another.

use std::time::Duration;

/// Calls of one connection that may be queued, running or waiting to be written at once.
pub const MAX_IN_FLIGHT_PER_CONNECTION: usize = 1024;
/// Bytes of a frame read to find its call id when it is refused unread; the rest is skipped.
pub(crate) const PEEK_BYTES: usize = 1024;
/// Answers from this size on may be refused as busy when the connection or the server is past
/// its in-flight bound (smaller ones cost no more than the refusal).
pub(crate) const REFUSABLE_ANSWER_BYTES: usize = 1024;
/// Puts applied on the reactor that may wait for their WAL write before they are finished.
pub(crate) const MAX_DEFERRED_WRITES: usize = 64;

/// The bounds every connection of a front end keeps (from `[rpc]`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_request_bytes: u32,
    pub connection_bytes: u64,
    pub handshake_timeout: Duration,
    pub frame_timeout: Duration,
    pub write_timeout: Duration,
    /// Offer UCX to clients that ask (`rpc.ucx`).
    pub offer_ucx: bool,
}

impl Limits {
    pub fn from_config(c: &crate::config::RpcConfig) -> Limits {
        Limits {
            max_request_bytes: c.max_request_bytes,
            connection_bytes: c.max_connection_in_flight_bytes,
            handshake_timeout: Duration::from_millis(c.handshake_timeout_ms),
            frame_timeout: Duration::from_millis(c.frame_timeout_ms),
            write_timeout: Duration::from_millis(c.write_timeout_ms),
            offer_ucx: c.ucx,
        }
    }
}
