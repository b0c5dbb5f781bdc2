//! The HBase RPC listener: a tokio reactor accepting connections and reading frames
//! ([`super::connection`]), and a pool of handler threads running the calls that may touch
//! disk. Same shape as the native front end (`crate::rpc`): a bounded queue between the two
//! refuses calls at once when full (`CallQueueTooBigException`, which the client retries
//! after a pause), as does a front end past its bound on in-flight bytes
//! (`rpc.max_in_flight_bytes`, its own, apart from the native front end's), and Gets that
//! memory can answer are served on the reactor.

use super::connection::{self, HCall, Shared};
use super::HbaseService;
use crate::config::RpcConfig;
use crate::metrics::RpcMetrics;
use crate::rpc::queue::CallQueue;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// A running HBase front end. Dropping it shuts it down.
pub struct HbaseServer {
    local_addr: SocketAddr,
    metrics: Arc<RpcMetrics>,
    running: Option<Running>,
}

struct Running {
    runtime: tokio::runtime::Runtime,
    stop: watch::Sender<bool>,
    acceptor: tokio::task::JoinHandle<()>,
    queue: Arc<CallQueue<HCall>>,
    handlers: Vec<JoinHandle<()>>,
}

impl HbaseServer {
    /// Serves `service` on an already bound listener.
    pub fn start_on(
        listener: std::net::TcpListener,
        config: &RpcConfig,
        service: Arc<HbaseService>,
    ) -> std::io::Result<HbaseServer> {
        listener.set_nonblocking(true)?;
        let local_addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.io_threads.max(1))
            .thread_name("cellar-hbase-io")
            .enable_all()
            .build()?;
        let listener = {
            let _entered = runtime.enter();
            TcpListener::from_std(listener)?
        };
        let metrics = Arc::new(RpcMetrics::default());
        let queue: Arc<CallQueue<HCall>> = Arc::new(CallQueue::new(
            config.max_queued_calls.max(1),
            metrics.clone(),
        ));
        let mut handlers = Vec::new();
        for i in 0..config.handler_count.max(1) {
            let worker_queue = queue.clone();
            let service = service.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("cellar-hbase-handler-{i}"))
                .spawn(move || {
                    while let Some(call) = worker_queue.pop() {
                        run(&service, call);
                    }
                });
            match spawned {
                Ok(t) => handlers.push(t),
                Err(e) => {
                    queue.close();
                    return Err(e);
                }
            }
        }
        let shared = Arc::new(Shared {
            service,
            queue: queue.clone(),
            metrics: metrics.clone(),
            budget: crate::rpc::budget::ServerBudget::new(
                config.max_in_flight_bytes,
                metrics.clone(),
            ),
            limits: crate::rpc::connection::Limits::from_config(config),
            inline: config.inline_gets || config.inline_puts,
        });
        let (stop, stopped) = watch::channel(false);
        // Connection ids of this front end live in their own range, so scanners of the two
        // front ends never share an owner.
        let acceptor = runtime.spawn(crate::rpc::accept_loop(
            listener,
            stopped,
            move |stream, id, peer, stop| {
                connection::serve(stream, (1 << 62) | id, peer, shared.clone(), stop)
            },
        ));
        tracing::info!(addr = %local_addr, "HBase RPC listening");
        Ok(HbaseServer {
            local_addr,
            metrics,
            running: Some(Running {
                runtime,
                stop,
                acceptor,
                queue,
                handlers,
            }),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// This front end's counters (connections, bytes, queue depth).
    pub fn metrics(&self) -> Arc<RpcMetrics> {
        self.metrics.clone()
    }

    /// Stops accepting and reading, lets in-flight calls finish (up to a grace period), then
    /// closes every connection.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(running) = self.running.take() {
            crate::rpc::run_off_runtime("cellar-hbase-stop", move || stop_running(running));
            tracing::info!(addr = %self.local_addr, "HBase RPC stopped");
        }
    }
}

impl Drop for HbaseServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn stop_running(running: Running) {
    let Running {
        runtime,
        stop,
        acceptor,
        queue,
        handlers,
    } = running;
    let deadline = Instant::now() + crate::rpc::SHUTDOWN_GRACE;
    crate::rpc::drain_connections(&runtime, &stop, acceptor, deadline);
    queue.close();
    for t in handlers {
        while !t.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        if t.is_finished() {
            let _ = t.join();
        }
    }
    runtime.shutdown_timeout(Duration::from_secs(1));
}

/// Runs one queued call on a handler thread and sends its answer.
fn run(service: &HbaseService, call: HCall) {
    let started = Instant::now();
    call.metrics
        .record_queue_wait(started.saturating_duration_since(call.received));
    if let Some(deadline) = call.deadline {
        if started >= deadline {
            let waited = started.saturating_duration_since(call.received).as_millis();
            let e = super::HbaseError::new(
                super::exceptions::CALL_TIMEOUT,
                format!(
                    "{} waited {waited} ms for a handler, past the client's timeout",
                    call.method
                ),
                false,
            );
            call.answer(Err(e));
            return;
        }
    }
    call.metrics.handler_started();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        service.call(
            &call.ctx,
            &call.service,
            &call.method,
            call.param.clone(),
            call.cellblock.clone(),
        )
    }));
    call.metrics.handler_finished();
    let outcome = outcome.unwrap_or_else(|_| {
        tracing::error!(method = %call.method, "HBase call panicked");
        Err(super::HbaseError::new(
            super::exceptions::IO,
            format!("internal error while serving {}", call.method),
            false,
        ))
    });
    call.answer(outcome);
}
