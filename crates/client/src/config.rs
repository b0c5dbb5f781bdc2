//! Client options. A module of its own so the connection layer can read them without
//! depending on the client handle built from them.

use crate::tls::TlsClientConfig;
use crate::transport::Transport;
use std::time::Duration;

/// Client options; the defaults follow HBase's client where it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// How long one call may wait for its answer (HBase's `hbase.rpc.timeout`: 60 s).
    pub rpc_timeout: Duration,
    /// Retries after a failed attempt before giving up (HBase's `hbase.client.retries.number`
    /// is 15; 10 keeps the worst case near half a minute with the default pause).
    pub retries: u32,
    /// The base pause between retries, multiplied by HBase's backoff table
    /// (`hbase.client.pause`: 100 ms).
    pub retry_backoff: Duration,
    /// Rows fetched per scanner call when the scan does not say (`hbase.client.scanner.caching`).
    /// Unbounded by default, as in HBase 2: each call is bounded by the server's
    /// `scanner.max_result_bytes` instead, which suits narrow and wide rows alike (rows of 10
    /// bytes scanned 1,000 at a time: 1.67× the scans/s of 100 rows per call;
    /// `docs/benchmarks.md`, "Scanner caching").
    pub scanner_caching: u32,
    /// The largest response frame accepted.
    pub max_frame_bytes: u32,
    /// How calls travel: TCP, UCX (shared memory, RDMA) or UCX where both sides have it.
    pub transport: Transport,
    /// Over UCX, how long a caller progresses its connection's worker itself while it waits
    /// for its answer, taking it off the wire with no thread hand-off (the difference between
    /// a few microseconds and twenty for a Get from memory over shared memory). The waiting
    /// task holds its thread meanwhile. Only a call alone on its connection drives; with
    /// others in flight the progress thread serves them all. Zero leaves every answer to the
    /// connection's progress thread.
    pub ucx_drive: Duration,
    /// TLS for every connection (`--tls-ca`, and `--tls-cert`/`--tls-key` for servers that
    /// require a client certificate); `None`: plaintext.
    pub tls: Option<TlsClientConfig>,
    /// The user this client says it is (HBase's SIMPLE authentication), sent with every
    /// request; servers take it only where they allow (`docs/security.md`), and a client
    /// certificate's user wins over it. `None`: no user.
    pub user: Option<String>,
    /// The user every call acts for (HBase's `doAs`), sent with every request while the
    /// connection authenticates as its certificate's user or `user`: what a gateway does for
    /// its callers. Servers run the calls as this user only where their
    /// `security.proxy_users` lets the connection's user act for it (`docs/security.md`).
    /// `None`: the connection's own user.
    pub effective_user: Option<String>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            rpc_timeout: Duration::from_secs(60),
            retries: 10,
            retry_backoff: Duration::from_millis(100),
            scanner_caching: u32::MAX,
            max_frame_bytes: cellar_proto::frame::DEFAULT_MAX_FRAME_BYTES,
            transport: Transport::Tcp,
            ucx_drive: Duration::from_micros(200),
            tls: None,
            user: None,
            effective_user: None,
        }
    }
}
