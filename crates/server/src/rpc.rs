//! The front-end machinery both protocols share, and the native protocol on it: a listener
//! ([`FrontEnd`]), one connection loop with a reader and a writer task per connection
//! ([`connection`], over a [`stream`] of TCP or TLS), the node's runtime and handler pool
//! ([`RpcCore`]), and where answers go ([`transport`]). The native protocol (frames of
//! `cellar_proto::frame`, `docs/native-protocol.md`) is [`native`] with [`route`] and calls
//! handed to a [`Handler`]; HBase's is `crate::hbase::protocol` over the same loop.
//!
//! Shape (HBase's listener / readers / handlers / responder, without its per-stage thread
//! hops): the node's tokio runtime of `rpc.io_threads` workers ([`RpcCore`], shared with the
//! HBase front end) accepts connections and reads frames;
//! PING and every refusal (oversized, malformed, unknown method, queue full, in-flight bytes
//! past their bound) are answered on the reactor; other calls go through a bounded queue to
//! the node's `rpc.handler_count` threads, which may block on disk; responses go back through the
//! connection's writer in completion order. What slow or greedy clients can make the server
//! hold is bounded per connection and per front end (`connection.rs`, `budget.rs`).

pub(crate) mod budget;
pub(crate) mod connection;
mod core;
pub(crate) mod limits;
pub(crate) mod listener;
mod native;
pub(crate) mod pool;
pub(crate) mod queue;
pub(crate) mod respond;
mod route;
pub(crate) mod stream;
pub(crate) mod transport;
mod ucx;

use crate::config::RpcConfig;
use crate::metrics::RpcMetrics;
use budget::ServerBudget;
use bytes::Bytes;
use cellar_proto::pb;
use limits::Limits;
use queue::CallQueue;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use ucx::UcxFront;

pub use self::core::RpcCore;
pub use limits::MAX_IN_FLIGHT_PER_CONNECTION;
pub use listener::FrontEnd;

/// Who is calling: lets the handler tie state (open scanners) to a connection, and check what
/// its caller may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallContext {
    pub conn_id: u64,
    pub caller: crate::security::Caller,
}

impl CallContext {
    /// A call from inside the server (tests, the server's own work): a superuser's.
    pub fn internal(conn_id: u64) -> CallContext {
        CallContext {
            conn_id,
            caller: crate::security::Caller::internal(),
        }
    }
}

/// A successful call's answer, in either protocol: the encoded response message and its
/// cell block.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    pub param: Bytes,
    pub cellblock: Bytes,
}

impl Reply {
    /// A response message alone.
    pub fn message(m: &impl prost::Message) -> Reply {
        Reply {
            param: m.encode_to_vec().into(),
            cellblock: Bytes::new(),
        }
    }

    /// A response message and its cells.
    pub fn with_cells(m: &impl prost::Message, cells: bytes::BytesMut) -> Reply {
        Reply {
            param: m.encode_to_vec().into(),
            cellblock: cells.freeze(),
        }
    }
}

/// What [`Handler::call_inline`] did on the network reactor.
pub enum Inline {
    /// Answered.
    Done(Result<Reply, pb::RpcError>),
    /// Begun, and the rest waits for another writer (a put whose WAL record the round in
    /// progress must bring to the OS first): the connection's task awaits it, so the reactor
    /// thread serves other connections meanwhile and never blocks.
    Await(std::pin::Pin<Box<dyn std::future::Future<Output = Result<Reply, pb::RpcError>> + Send>>),
    /// Applied, its WAL record not yet in the OS (a put in the memstore, its row held): the
    /// front end finishes it, with the others of the same read (one WAL write for them all),
    /// before the reply is sent, and never waits for anything but the WAL meanwhile.
    AfterWal(Box<dyn PendingWrite>, Reply),
}

/// A write applied on the reactor whose WAL record is not yet in the OS ([`Inline::AfterWal`]).
pub trait PendingWrite: Send {
    /// Finishes without waiting (one WAL write covers every record buffered before it), or
    /// hands the write back when finishing would wait for another writer's WAL round.
    fn try_finish(self: Box<Self>) -> Result<Result<(), pb::RpcError>, Box<dyn PendingWrite>>;
    /// Finishes, awaiting another writer's WAL round if need be; never blocks a thread.
    fn finish(
        self: Box<Self>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), pb::RpcError>> + Send>>;
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

    /// Optional fast path, run on the network reactor before a call is queued: answer now if
    /// the call can be served without disk IO and without waiting on a lock that IO may hold
    /// (a Get served from memstore and block cache), or begin it and return what is left to
    /// await ([`Inline::Await`]); else return `None` and the call goes to the handler pool as
    /// usual. It must never block, directly or by waiting for another thread. The default
    /// queues every call.
    fn call_inline(
        &self,
        _ctx: &CallContext,
        _method: pb::Method,
        _param: &Bytes,
        _cellblock: &Bytes,
    ) -> Option<Inline> {
        None
    }

    /// The connection is gone: free what it held (its scanners).
    fn connection_closed(&self, conn_id: u64);
}

/// What every connection of a front end shares, whatever its protocol: the node's call queue,
/// the front end's counters, in-flight budget and limits, and TLS on its port.
pub(crate) struct Front {
    pub queue: Arc<CallQueue>,
    pub metrics: Arc<RpcMetrics>,
    pub budget: Arc<ServerBudget>,
    pub limits: Limits,
    /// TLS on this port, when configured.
    pub tls: Option<Arc<crate::security::TlsServer>>,
}

impl Front {
    /// A new front end's shared parts on the node's `core`, with counters of its own.
    pub fn new(
        config: &RpcConfig,
        core: &RpcCore,
        tls: Option<Arc<crate::security::TlsServer>>,
    ) -> Front {
        let metrics = Arc::new(RpcMetrics::default());
        Front {
            queue: core.queue().clone(),
            budget: ServerBudget::new(config.max_in_flight_bytes, metrics.clone()),
            metrics,
            limits: Limits::from_config(config),
            tls,
        }
    }

    /// What a connection's stream needs of it.
    pub fn port(&self) -> stream::Port<'_> {
        stream::Port {
            tls: self.tls.as_deref(),
            limits: &self.limits,
            metrics: &self.metrics,
            budget: &self.budget,
        }
    }
}

/// What every connection of the native front end shares. In the front end's root, not in
/// `native`: [`route`] and [`ucx`] serve calls through it too, and it holds the UCX worker, so
/// in any submodule it would close a loop with [`ucx`].
pub(crate) struct Shared {
    pub handler: Arc<dyn Handler>,
    pub front: Front,
    /// The UCX worker, started by the first client that asks for it (or why it cannot be).
    pub ucx: OnceLock<Result<Arc<UcxFront>, String>>,
}

impl AsRef<Front> for Shared {
    fn as_ref(&self) -> &Front {
        &self.front
    }
}

impl Shared {
    /// The server's UCX worker, started on first use.
    pub fn ucx(self: &Arc<Self>) -> Result<Arc<UcxFront>, String> {
        if !self.front.limits.offer_ucx {
            return Err("this server does not offer UCX (rpc.ucx = false)".into());
        }
        self.ucx
            .get_or_init(|| {
                UcxFront::start(Arc::downgrade(self), tokio::runtime::Handle::current())
                    .map(Arc::new)
                    .inspect_err(|why| tracing::warn!(reason = %why, "cannot offer UCX"))
            })
            .clone()
    }

    /// Stops the UCX worker, if one was started (server shutdown).
    pub fn stop_ucx(&self) {
        if let Some(Ok(front)) = self.ucx.get() {
            front.stop();
        }
    }
}

/// How long [`FrontEnd::shutdown`] waits for in-flight calls and unwritten responses before
/// closing connections regardless.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Binds `listen` (`host:port`; port 0 picks a free one) and serves the native protocol
/// there, with a runtime and handler pool of its own.
pub fn start(
    listen: &str,
    config: &RpcConfig,
    handler: Arc<dyn Handler>,
) -> std::io::Result<FrontEnd> {
    let listener = std::net::TcpListener::bind(listen)
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {listen}: {e}")))?;
    start_on(listener, config, handler)
}

/// Serves the native protocol on an already bound listener (lets a caller learn the port
/// before the handler exists, e.g. to advertise it), with a runtime and handler pool of its
/// own.
pub fn start_on(
    listener: std::net::TcpListener,
    config: &RpcConfig,
    handler: Arc<dyn Handler>,
) -> std::io::Result<FrontEnd> {
    start_in(listener, config, handler, RpcCore::start(config)?, None)
}

/// Serves the native protocol on an already bound listener with the node's runtime and
/// handler pool (`core`, shared with its other front ends), over TLS when `tls` is given.
pub fn start_in(
    listener: std::net::TcpListener,
    config: &RpcConfig,
    handler: Arc<dyn Handler>,
    core: Arc<RpcCore>,
    tls: Option<Arc<crate::security::TlsServer>>,
) -> std::io::Result<FrontEnd> {
    let shared = Arc::new(Shared {
        handler,
        front: Front::new(config, &core, tls),
        ucx: OnceLock::new(),
    });
    let stopping = shared.clone();
    connection::listen::<native::Native>(
        listener,
        core,
        shared,
        0,
        Some(Box::new(move || stopping.stop_ucx())),
    )
}

/// Runs `f` on a thread of its own and waits for it: blocking on a runtime is not allowed
/// from inside an async context, so shutdowns go through here to be callable from anywhere.
pub(crate) fn run_off_runtime(name: &str, f: impl FnOnce() + Send + 'static) {
    match std::thread::Builder::new().name(name.into()).spawn(f) {
        Ok(t) => {
            let _ = t.join();
        }
        Err(e) => tracing::error!(error = %e, thread = name, "cannot start a shutdown thread"),
    }
}

/// Tells the acceptor to stop and waits until every connection has finished or `deadline`.
pub(crate) fn drain_connections(
    runtime: &tokio::runtime::Runtime,
    stop: &watch::Sender<bool>,
    acceptor: tokio::task::JoinHandle<()>,
    deadline: Instant,
) {
    let _ = stop.send(true);
    let drained = runtime.block_on(async {
        tokio::time::timeout_at(deadline.into(), acceptor)
            .await
            .is_ok()
    });
    if !drained {
        tracing::warn!("connections still busy after the shutdown grace period; closing them");
    }
}

/// Accepts connections until told to stop, then waits for every connection to finish.
/// `serve(stream, n, peer, stop)` serves the n-th accepted connection (n from 1).
pub(crate) async fn accept_loop<F, Fut>(
    listener: TcpListener,
    stop: watch::Receiver<bool>,
    mut serve: F,
) where
    F: FnMut(tokio::net::TcpStream, u64, SocketAddr, watch::Receiver<bool>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut conns = JoinSet::new();
    let mut next_id: u64 = 0;
    let mut stop_wait = stop.clone();
    loop {
        tokio::select! {
            biased;
            _ = stopped(&mut stop_wait) => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    if let Err(e) = stream.set_nodelay(true) {
                        tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY");
                    }
                    next_id += 1;
                    conns.spawn(serve(stream, next_id, peer, stop.clone()));
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
    drop(listener);
    while conns.join_next().await.is_some() {}
}

/// Resolves once the server is told to stop (or the stop sender is gone).
pub(crate) async fn stopped(stop: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is dropped at once: it must not live across an await.
    let _ = stop.wait_for(|s| *s).await.map(|_| ());
}
