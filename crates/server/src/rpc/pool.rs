//! The handler pool: `handler_count` OS threads that run calls which may block on disk, fed by
//! the bounded [`CallQueue`]. One pool per node, shared by the native and the HBase front end
//! (HBase's region server has one set of handlers for every client too): a call of either is
//! a [`Job`]. Dedicated threads rather than tokio's blocking pool: the number is fixed by
//! configuration (HBase's handler count, seed 004), the queue bound gives an immediate
//! SERVER_BUSY instead of an ever-growing backlog, and a slow disk cannot grow the thread
//! count. `docs/native-protocol.md` has the measurement behind the choice.

use super::queue::{CallQueue, Job};
use super::respond::{error_frame, reply_frame, rpc_error, timed_reply_frame, Responder};
use super::{CallContext, Handler, Reply};
use crate::metrics::RpcMetrics;
use bytes::Bytes;
use cellar_proto::pb;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A decoded native request waiting for a handler.
pub(crate) struct Call {
    pub ctx: CallContext,
    pub call_id: u64,
    pub method: pb::Method,
    pub param: Bytes,
    pub cellblock: Bytes,
    /// When its frame was read; latency is measured from here.
    pub received: Instant,
    /// The client's own deadline (`timeout_ms`), if it gave one.
    pub deadline: Option<Instant>,
    /// The client asked for the server's stage times (`RequestHeader.want_timing`).
    pub want_timing: bool,
    pub respond: Responder,
    pub handler: Arc<dyn Handler>,
    pub metrics: Arc<RpcMetrics>,
}

impl Job for Call {
    fn run(self: Box<Self>) {
        run(*self)
    }

    fn metrics(&self) -> &RpcMetrics {
        &self.metrics
    }
}

pub(crate) struct HandlerPool {
    queue: Arc<CallQueue>,
    threads: Vec<JoinHandle<()>>,
}

impl HandlerPool {
    pub fn start(threads: usize, queue: Arc<CallQueue>) -> std::io::Result<HandlerPool> {
        let mut pool = HandlerPool {
            queue,
            threads: Vec::with_capacity(threads),
        };
        for i in 0..threads {
            let queue = pool.queue.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("cellar-handler-{i}"))
                .spawn(move || {
                    while let Some(job) = queue.pop() {
                        // Each job answers its own panics; this keeps the thread whatever
                        // slips through.
                        if catch_unwind(AssertUnwindSafe(|| job.run())).is_err() {
                            tracing::error!("a queued call panicked outside its handler");
                        }
                    }
                });
            match spawned {
                Ok(t) => pool.threads.push(t),
                Err(e) => {
                    pool.stop(Instant::now() + Duration::from_secs(5));
                    return Err(e);
                }
            }
        }
        Ok(pool)
    }

    /// Refuses new calls, lets the handlers finish the queued ones, and waits for them until
    /// `deadline`; a handler still stuck then is left to finish on its own.
    pub fn stop(&mut self, deadline: Instant) {
        self.queue.close();
        for t in self.threads.drain(..) {
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if t.is_finished() {
                let _ = t.join();
            } else {
                tracing::warn!(
                    thread = t.thread().name().unwrap_or("handler"),
                    "handler still running at shutdown; left behind"
                );
            }
        }
    }
}

/// Runs one call and queues its response.
fn run(call: Call) {
    let (handler, metrics) = (&*call.handler, &*call.metrics);
    let started = Instant::now();
    metrics.record_queue_wait(started.saturating_duration_since(call.received));
    let frame = match call.deadline {
        Some(d) if started >= d => {
            metrics.record_error(pb::ErrorCode::Timeout);
            error_frame(
                call.call_id,
                rpc_error(
                    pb::ErrorCode::Timeout,
                    format!(
                        "{} waited {} ms for a handler, past the client's deadline",
                        call.method.as_str_name(),
                        started.saturating_duration_since(call.received).as_millis()
                    ),
                ),
            )
        }
        _ => {
            metrics.handler_started();
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                handler.call(&call.ctx, call.method, call.param, call.cellblock)
            }));
            metrics.handler_finished();
            match outcome {
                Ok(Ok(reply)) if call.want_timing => timed_reply_frame(
                    call.call_id,
                    reply,
                    started.saturating_duration_since(call.received),
                    started.elapsed(),
                ),
                outcome => outcome_frame(metrics, &call.ctx, call.call_id, call.method, outcome),
            }
        }
    };
    metrics.record_call(call.method, call.received.elapsed());
    // A closed connection drops the answer; nothing else to do.
    if call.method == pb::Method::Get {
        let _ = call.respond.send_read(call.call_id, frame, metrics);
    } else {
        let _ = call.respond.send(frame);
    }
}

/// The response frame for a handler's outcome; a panic becomes INTERNAL (and is logged).
pub(crate) fn outcome_frame(
    metrics: &RpcMetrics,
    ctx: &CallContext,
    call_id: u64,
    method: pb::Method,
    outcome: std::thread::Result<Result<Reply, pb::RpcError>>,
) -> (Bytes, Bytes) {
    match outcome {
        Ok(Ok(reply)) => reply_frame(call_id, reply),
        Ok(Err(e)) => {
            let code = pb::ErrorCode::try_from(e.code).unwrap_or(pb::ErrorCode::Internal);
            metrics.record_error(code);
            error_frame(call_id, e)
        }
        Err(_) => {
            tracing::error!(
                method = method.as_str_name(),
                conn = ctx.conn_id,
                "handler panicked"
            );
            metrics.record_error(pb::ErrorCode::Internal);
            error_frame(
                call_id,
                rpc_error(
                    pb::ErrorCode::Internal,
                    format!("the server failed on {}", method.as_str_name()),
                ),
            )
        }
    }
}
