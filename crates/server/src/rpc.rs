//! The native RPC front end: a TCP listener, one task per connection, frames in and out
//! (`cellar_proto::frame`), calls handed to a [`Handler`].
//!
//! (The transport itself is being written; the contract below is what the region server
//! implements.)

use bytes::Bytes;
use cellar_proto::pb;

/// Who is calling: lets the handler tie state (open scanners) to a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallContext {
    pub conn_id: u64,
}

/// A successful call's answer: the encoded response message and its cell block.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    pub param: Bytes,
    pub cellblock: Bytes,
}

/// What the RPC front end calls. `call` may block on disk: the front end runs it on its
/// handler pool, never on the network reactor.
pub trait Handler: Send + Sync + 'static {
    fn call(
        &self,
        ctx: &CallContext,
        method: pb::Method,
        param: Bytes,
        cellblock: Bytes,
    ) -> Result<Reply, pb::RpcError>;

    /// The connection is gone: free what it held (its scanners).
    fn connection_closed(&self, conn_id: u64);

    /// Server-wide gauges for `/metrics`.
    fn gauges(&self) -> crate::metrics::Gauges;
}
