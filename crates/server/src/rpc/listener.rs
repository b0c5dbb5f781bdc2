//! A bound port served on the node's runtime, as both front ends serve theirs ([`FrontEnd`]):
//! the listener handed to the runtime, the accept loop ([`super::accept_loop`]) with each protocol's own
//! connection loop, and at shutdown the drain (every queued call answered, up to
//! [`super::SHUTDOWN_GRACE`]) before the front end lets go of the shared [`RpcCore`].

use super::{accept_loop, drain_connections, run_off_runtime, RpcCore, SHUTDOWN_GRACE};
use crate::metrics::RpcMetrics;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running front end (the native protocol's, `super::start_in`, or HBase's,
/// `crate::hbase::start_in`): its port while it serves, and its counters. Dropping it stops
/// it as [`FrontEnd::shutdown`] does.
pub struct FrontEnd {
    local_addr: SocketAddr,
    metrics: Arc<RpcMetrics>,
    /// Names the front end in logs and its stopping thread (`native`, `HBase`).
    name: &'static str,
    running: Option<Running>,
}

struct Running {
    core: Arc<RpcCore>,
    stop: watch::Sender<bool>,
    acceptor: tokio::task::JoinHandle<()>,
    /// What the front end lets go of once its connections are drained (the UCX worker).
    after_drain: Option<Box<dyn FnOnce() + Send>>,
}

impl FrontEnd {
    /// Serves `listener` on `core`'s runtime: `serve(stream, n, peer, stop)` runs the n-th
    /// accepted connection (n from 1) to its end. `metrics` are the front end's counters.
    pub(crate) fn start<F, Fut>(
        listener: std::net::TcpListener,
        core: Arc<RpcCore>,
        name: &'static str,
        metrics: Arc<RpcMetrics>,
        serve: F,
        after_drain: Option<Box<dyn FnOnce() + Send>>,
    ) -> std::io::Result<FrontEnd>
    where
        F: FnMut(TcpStream, u64, SocketAddr, watch::Receiver<bool>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        listener.set_nonblocking(true)?;
        let local_addr = listener.local_addr()?;
        let listener = {
            let _entered = core.runtime().enter();
            TcpListener::from_std(listener)?
        };
        let (stop, stopped) = watch::channel(false);
        let acceptor = core.runtime().spawn(accept_loop(listener, stopped, serve));
        Ok(FrontEnd {
            local_addr,
            metrics,
            name,
            running: Some(Running {
                core,
                stop,
                acceptor,
                after_drain,
            }),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// This front end's counters (connections, bytes, calls, queue depth; shared with
    /// `/metrics`).
    pub fn metrics(&self) -> Arc<RpcMetrics> {
        self.metrics.clone()
    }

    /// Stops accepting and reading, lets in-flight calls finish and their responses be
    /// written (up to [`SHUTDOWN_GRACE`]), then closes every connection.
    pub fn shutdown(mut self) {
        self.stop();
    }

    /// [`FrontEnd::shutdown`], idempotent.
    fn stop(&mut self) {
        let Some(running) = self.running.take() else {
            return;
        };
        let thread = if self.name == "native" {
            "cellar-rpc-stop"
        } else {
            "cellar-hbase-stop"
        };
        run_off_runtime(thread, move || {
            let Running {
                core,
                stop,
                acceptor,
                after_drain,
            } = running;
            // Every call a connection queued is answered before the connection ends, so once
            // they have drained nothing of this front end is left on the shared handlers.
            drain_connections(
                core.runtime(),
                &stop,
                acceptor,
                Instant::now() + SHUTDOWN_GRACE,
            );
            if let Some(f) = after_drain {
                f();
            }
            // The last front end to let go of the core stops its handlers and runtime.
            drop(core);
        });
        tracing::info!(addr = %self.local_addr, "{} RPC stopped", self.name);
    }
}

impl Drop for FrontEnd {
    fn drop(&mut self) {
        self.stop();
    }
}
