//! The HBase RPC listener: connections read on the node's runtime ([`super::connection`]),
//! calls that may touch disk run by the node's handler pool, both shared with the native front
//! end ([`RpcCore`]). A full call queue refuses calls at once (`CallQueueTooBigException`,
//! which the client retries after a pause), as does this front end past its bound on in-flight
//! bytes (`rpc.max_in_flight_bytes`, its own, apart from the native front end's), and Gets
//! that memory can answer are served on the reactor.

use super::protocol::{self, HCall, Shared};
use super::HbaseService;
use crate::config::RpcConfig;
use crate::metrics::RpcMetrics;
use crate::rpc::connection;
use crate::rpc::queue::Job;
use crate::rpc::RpcCore;
use crate::rpc::{Front, FrontEnd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

/// Serves HBase's protocol for `service` on an already bound listener with the node's
/// runtime and handler pool, over TLS when `tls` is given.
pub fn start_in(
    listener: std::net::TcpListener,
    config: &RpcConfig,
    service: Arc<HbaseService>,
    core: Arc<RpcCore>,
    tls: Option<Arc<crate::security::TlsServer>>,
) -> std::io::Result<FrontEnd> {
    let shared = Arc::new(Shared {
        service,
        front: Front::new(config, &core, tls),
        inline: config.inline_gets || config.inline_puts,
    });
    // Connection ids of this front end live in their own range, so scanners of the two
    // front ends never share an owner.
    connection::listen::<protocol::Hbase>(listener, core, shared, 1 << 62, None)
}

impl Job for HCall {
    fn run(self: Box<Self>) {
        run(*self)
    }

    fn metrics(&self) -> &RpcMetrics {
        &self.metrics
    }
}

/// Runs one queued call on a handler thread and sends its answer.
fn run(call: HCall) {
    let service = call.hbase.clone();
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
