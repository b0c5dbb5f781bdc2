//! What every front end of a node shares: one tokio runtime that all their connections run on
//! (`rpc.io_threads` workers), and one handler pool with its one bounded call queue
//! (`rpc.handler_count` threads, `rpc.max_queued_calls` calls). A front end brings its
//! listener, its protocol and its counters; the threads are the node's.
//!
//! The core stops when the last front end holding it has drained its connections (and with
//! them every call they queued): the queue closes, the handlers finish, the runtime goes.

use super::pool::HandlerPool;
use super::queue::CallQueue;
use crate::config::RpcConfig;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct RpcCore {
    runtime: Option<tokio::runtime::Runtime>,
    queue: Arc<CallQueue>,
    pool: Option<HandlerPool>,
}

impl RpcCore {
    /// Starts the runtime and the handler threads of `config`.
    pub fn start(config: &RpcConfig) -> std::io::Result<Arc<RpcCore>> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.io_threads.max(1))
            .thread_name("cellar-rpc-io")
            .enable_all()
            .build()?;
        let queue = Arc::new(CallQueue::new(config.max_queued_calls.max(1)));
        let pool = HandlerPool::start(config.handler_count.max(1), queue.clone())?;
        Ok(Arc::new(RpcCore {
            runtime: Some(runtime),
            queue,
            pool: Some(pool),
        }))
    }

    pub(crate) fn runtime(&self) -> &tokio::runtime::Runtime {
        match &self.runtime {
            Some(r) => r,
            // Taken only in `drop`, when nobody holds the core any more.
            None => unreachable!("the RPC runtime is taken only when the core is dropped"),
        }
    }

    pub(crate) fn queue(&self) -> &Arc<CallQueue> {
        &self.queue
    }
}

impl Drop for RpcCore {
    fn drop(&mut self) {
        let runtime = self.runtime.take();
        let pool = self.pool.take();
        // Blocking on (or dropping) a runtime is not allowed from inside one: the last front
        // end may be dropped anywhere.
        super::run_off_runtime("cellar-rpc-core-stop", move || {
            if let Some(mut pool) = pool {
                pool.stop(Instant::now() + super::SHUTDOWN_GRACE);
            }
            if let Some(runtime) = runtime {
                runtime.shutdown_timeout(Duration::from_secs(1));
            }
        });
    }
}
