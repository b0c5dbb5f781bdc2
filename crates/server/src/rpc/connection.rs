//! One native connection: the preamble, then request frames cut out of the stream
//! ([`super::stream`], shared with the HBase front end) and routed ([`super::route`]), answers
//! going back in whatever order calls finish, several already waiting in one write.
//!
//! The reader answers PING and every refusal itself (on the reactor, without touching disk)
//! and hands other calls to the handler queue. The bounds on what a slow, silent or greedy
//! client can make the server hold are the stream's (`stream.rs`, `docs/native-protocol.md`,
//! "Limits").

use super::budget::Charge;
use super::limits::{MAX_DEFERRED_WRITES, PEEK_BYTES};
use super::respond::{error_frame, reply_frame, rpc_error, Outgoing, Responder, Sink};
use super::route::{self, busy_in_flight};
use super::stream::{self, End, Inbound};
use super::ucx::Attached;
use super::{CallContext, Reply, Shared};
use crate::metrics::Overload;
use bytes::Bytes;
use cellar_proto::frame::{check_preamble, decode_param, peek_request_header, PREAMBLE};
use cellar_proto::pb;
use prost::Message;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::net::TcpStream;
use tokio::sync::watch;

/// Serves one accepted connection to its end, then tells the handler it is gone.
pub(crate) async fn serve(
    stream: TcpStream,
    conn_id: u64,
    peer: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
) {
    tracing::debug!(conn = conn_id, %peer, "connection opened");
    let port = stream::Port {
        tls: shared.tls.as_deref(),
        limits: &shared.limits,
        metrics: &shared.metrics,
        budget: &shared.budget,
    };
    let Some((io, writer)) = stream::start(stream, peer, port, "native", shutdown).await else {
        return;
    };
    let caller = crate::security::Caller {
        user: io.origin.cert_user.clone(),
        real_user: None,
        certified: io.origin.cert_user.is_some(),
        peer: Some(peer.ip()),
        protocol: "native",
    };
    let mut reader = Reader {
        conn_id,
        caller,
        shared: shared.clone(),
        io,
        ucx: None,
        deferred: Vec::new(),
    };
    let end = reader.run().await;
    let Reader { io, ucx, .. } = reader;
    // The UCX peer goes with its control connection.
    drop(ucx);
    // The writer ends once the reader and every in-flight call have let go of their senders,
    // so after this no call of this connection is still running.
    stream::close(io, writer, &end, "connection", conn_id, peer).await;
    let handler = shared.handler.clone();
    if tokio::task::spawn_blocking(move || handler.connection_closed(conn_id))
        .await
        .is_err()
    {
        tracing::error!(conn = conn_id, "connection_closed panicked");
    }
    shared.metrics.connection_closed();
}

struct Reader {
    conn_id: u64,
    /// Who the connection's calls are from: its certificate's user, else the user its latest
    /// request header named (HBase's SIMPLE; the server decides whether to take it).
    caller: crate::security::Caller,
    shared: Arc<Shared>,
    io: Inbound,
    /// Set once the client moved its calls to UCX (TRANSPORT_HELLO).
    ucx: Option<Attached>,
    /// Puts applied on the reactor since the last read whose WAL records are not yet in the
    /// OS, with their responders: finished (one WAL write for all) before the reader waits
    /// for anything (`fill`, a slot, room), so they hold their rows for microseconds and are
    /// never held across a wait for the socket (the rule `DeferredPut` rests on).
    deferred: Vec<(route::Deferred, Responder)>,
}

impl Reader {
    async fn run(&mut self) -> End {
        match tokio::time::timeout(self.shared.limits.handshake_timeout, self.preamble()).await {
            Ok(Ok(())) => {}
            Ok(Err(end)) => return end,
            Err(_) => return End::TimedOut("the preamble"),
        }
        let end = loop {
            if let Err(end) = self.next_frame().await {
                break end;
            }
        };
        // Puts applied and not yet finished are finished (their answers may not be sent).
        let _ = self.flush_deferred().await;
        end
    }

    /// Finishes the puts applied on the reactor and sends their answers: the first finish
    /// writes every buffered WAL record, the rest find theirs written. One whose record another
    /// writer's round is writing is awaited: the task yields, the thread never blocks.
    async fn flush_deferred(&mut self) -> Result<(), End> {
        let mut gone = false;
        for (d, respond) in std::mem::take(&mut self.deferred) {
            let frame = match d.try_finish() {
                route::Finish::Done(frame) => frame,
                route::Finish::Wait(d) => d.finish().await,
            };
            gone |= !respond.send(frame);
        }
        if gone {
            Err(End::WriterGone)
        } else {
            Ok(())
        }
    }

    /// Reads more input into the buffer, first waiting for room if the connection is past its
    /// in-flight bound.
    async fn fill(&mut self) -> Result<(), End> {
        self.flush_deferred().await?;
        self.io.wait_for_room().await?;
        self.io.read().await
    }

    /// Waits while the connection is past its own in-flight bound (`Inbound::wait_for_room`),
    /// after finishing its deferred puts.
    async fn wait_for_room(&mut self) -> Result<(), End> {
        if self.io.has_room() {
            return Ok(());
        }
        self.flush_deferred().await?;
        self.io.wait_for_room().await
    }

    async fn preamble(&mut self) -> Result<(), End> {
        while self.io.buf.len() < PREAMBLE.len() {
            self.fill().await?;
        }
        let mut p = [0u8; 8];
        p.copy_from_slice(&self.io.buf[..8]);
        self.io.consume(8);
        self.io.frame_done();
        if self.io.origin.plaintext_on_tls_port {
            let msg = "this port serves only TLS: connect with TLS (the client's --tls-ca) or to a plaintext port".to_string();
            self.shared
                .metrics
                .record_error(pb::ErrorCode::MalformedRequest);
            self.send_raw(
                error_frame(0, rpc_error(pb::ErrorCode::MalformedRequest, msg.clone())).0,
            )?;
            return Err(End::Protocol(msg));
        }
        match check_preamble(&p) {
            Ok(()) => self.send_raw(Bytes::from_static(&PREAMBLE)),
            Err(e) => {
                let msg = e.to_string();
                self.shared
                    .metrics
                    .record_error(pb::ErrorCode::MalformedRequest);
                self.send_raw(
                    error_frame(0, rpc_error(pb::ErrorCode::MalformedRequest, msg.clone())).0,
                )?;
                Err(End::Protocol(msg))
            }
        }
    }

    fn send_raw(&self, head: Bytes) -> Result<(), End> {
        self.io.send(Outgoing::unbounded(head))
    }

    /// Takes one in-flight slot for the call about to be answered; `charge` (its request's
    /// bytes) becomes its answer's.
    async fn responder(&mut self, charge: Charge) -> Result<Responder, End> {
        let permit = match self.io.try_slot() {
            Some(p) => p,
            None => {
                self.flush_deferred().await?;
                self.io.wait_slot().await?
            }
        };
        Ok(Responder {
            sink: Sink::Tcp(self.io.tx.clone()),
            permit,
            charge,
        })
    }

    /// Answers a call with an error from the reader itself.
    async fn refuse(
        &mut self,
        call_id: u64,
        method: Option<pb::Method>,
        received: Instant,
        error: pb::RpcError,
    ) -> Result<(), End> {
        let code = pb::ErrorCode::try_from(error.code).unwrap_or(pb::ErrorCode::Internal);
        self.shared.metrics.record_error(code);
        if let Some(m) = method {
            self.shared.metrics.record_call(m, received.elapsed());
        }
        let responder = self.responder(self.io.charge(0)).await?;
        if responder.send(error_frame(call_id, error)) {
            Ok(())
        } else {
            Err(End::WriterGone)
        }
    }

    /// Consumes one frame (or part of a refused one being skipped), reading as needed.
    async fn next_frame(&mut self) -> Result<(), End> {
        if self.io.skipping() {
            return self.fill().await;
        }
        let Some(len) = self.io.frame_len() else {
            return self.fill().await;
        };
        let max = self.shared.limits.max_request_bytes;
        if len > max {
            return self.skip_frame(len, || {
                (
                    pb::ErrorCode::RequestTooLarge,
                    format!(
                        "of {len} bytes exceeds the server's limit of {max} bytes (rpc.max_request_bytes)"
                    ),
                )
            })
            .await;
        }
        if self.io.buf.len() < 4 + len as usize {
            if self.io.budget.server_full() {
                // Others hold the server's in-flight bound: refuse this call now instead of
                // buffering the rest of it.
                return self.skip_frame(len, busy_in_flight).await;
            }
            return self.fill().await;
        }
        self.wait_for_room().await?;
        let (body, charge) = self.io.take_frame(len);
        self.dispatch(body, charge).await
    }

    /// Refuses the frame starting in the buffer by its call id (peeked from the first
    /// [`PEEK_BYTES`] of its body) and skips the whole frame as it arrives, never buffering
    /// it. `why` gives the error code and the message after "METHOD ".
    async fn skip_frame(
        &mut self,
        len: u32,
        why: impl FnOnce() -> (pb::ErrorCode, String),
    ) -> Result<(), End> {
        let want = (len as usize).min(PEEK_BYTES);
        if self.io.buf.len() < 4 + want {
            return self.fill().await;
        }
        let received = Instant::now();
        let Some(header) = peek_request_header(&self.io.buf[4..4 + want]) else {
            return self
                .malformed(0, "frame without a readable request header".into())
                .await;
        };
        self.io.skip_frame(len);
        let method = pb::Method::try_from(header.method).ok();
        let what = method.map(|m| m.as_str_name()).unwrap_or("request");
        let (code, message) = why();
        if code == pb::ErrorCode::ServerBusy {
            self.shared.metrics.record_overload(Overload::InFlightBytes);
        }
        self.refuse(
            header.call_id,
            method,
            received,
            rpc_error(code, format!("{what} {message}")),
        )
        .await
    }

    /// Tells the client its frame was malformed; the connection then closes.
    async fn malformed(&mut self, call_id: u64, why: String) -> Result<(), End> {
        self.refuse(
            call_id,
            None,
            Instant::now(),
            rpc_error(pb::ErrorCode::MalformedRequest, why.clone()),
        )
        .await?;
        Err(End::Protocol(why))
    }

    async fn dispatch(&mut self, body: Bytes, charge: Charge) -> Result<(), End> {
        let received = Instant::now();
        let req = match route::decode(body, received) {
            Ok(req) => req,
            Err(refusal) => {
                let (call_id, fatal) = (refusal.call_id, refusal.fatal.clone());
                drop(charge);
                return match fatal {
                    Some(why) => self.malformed(call_id, why).await,
                    None => {
                        self.refuse(call_id, refusal.method, received, refusal.error)
                            .await
                    }
                };
            }
        };
        let respond = self.responder(charge).await?;
        if req.method == pb::Method::TransportHello {
            let frame = self.hello(&req);
            self.shared
                .metrics
                .record_call(req.method, received.elapsed());
            return send(respond, frame);
        }
        self.caller.claim(&req.header.user);
        let ctx = CallContext {
            conn_id: self.conn_id,
            caller: self.caller.acting_for(&req.header.effective_user),
        };
        match route::serve(&self.shared, ctx, req, respond) {
            route::Served::Queued => Ok(()),
            route::Served::Answer(frame, respond) => send(respond, frame),
            // Not refused for its size, unlike a handler's answer (`Responder::send_read`):
            // the reader checks the connection's room before each frame, so an answer given
            // here overshoots the bound by itself at most.
            route::Served::Await(rest, respond) => send(respond, rest.await),
            route::Served::AfterWal(d, respond) => {
                self.deferred.push((d, respond));
                if self.deferred.len() >= MAX_DEFERRED_WRITES {
                    self.flush_deferred().await?;
                }
                Ok(())
            }
        }
    }

    /// Answers TRANSPORT_HELLO: carries this connection's calls over UCX from now on, this
    /// TCP connection staying open as the control channel.
    fn hello(&mut self, req: &route::Request) -> route::Frame {
        let call_id = req.header.call_id;
        let refuse = |code, message: String| {
            self.shared.metrics.record_error(code);
            error_frame(call_id, rpc_error(code, message))
        };
        let hello: pb::TransportHelloRequest =
            match decode_param(req.parts.param.clone(), "TransportHelloRequest") {
                Ok(h) => h,
                Err(e) => return refuse(pb::ErrorCode::MalformedRequest, e.to_string()),
            };
        if self.io.origin.tls {
            return refuse(
                pb::ErrorCode::TransportUnavailable,
                "UCX carries no encryption: calls of a TLS connection stay on it".into(),
            );
        }
        if hello.transport != "ucx" {
            return refuse(
                pb::ErrorCode::TransportUnavailable,
                format!(
                    "transport {:?} is not one this server offers (it offers \"ucx\")",
                    hello.transport
                ),
            );
        }
        if self.ucx.is_some() {
            return refuse(
                pb::ErrorCode::InvalidArgument,
                "this connection already carries its calls over UCX".into(),
            );
        }
        let front = match self.shared.ucx() {
            Ok(front) => front,
            Err(why) => return refuse(pb::ErrorCode::TransportUnavailable, why),
        };
        match front.attach(
            self.conn_id,
            self.caller.clone(),
            self.io.budget.clone(),
            hello.worker_address.to_vec(),
            hello.client_peer_id,
        ) {
            Ok((peer, response)) => {
                self.ucx = Some(peer);
                let mut param = bytes::BytesMut::new();
                if let Err(e) = response.encode(&mut param) {
                    return refuse(pb::ErrorCode::Internal, e.to_string());
                }
                reply_frame(
                    call_id,
                    Reply {
                        param: param.freeze(),
                        cellblock: Bytes::new(),
                    },
                )
            }
            Err(why) => refuse(pb::ErrorCode::TransportUnavailable, why),
        }
    }
}

/// Queues `frame` through `respond`; the reader ends if the writer is gone.
fn send(respond: Responder, frame: route::Frame) -> Result<(), End> {
    if respond.send(frame) {
        Ok(())
    } else {
        Err(End::WriterGone)
    }
}
