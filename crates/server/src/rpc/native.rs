//! The native protocol over a [`super::connection::Connection`]: the preamble, then request
//! frames decoded and routed ([`super::route`]), answers going back in whatever order calls
//! finish. A client may move its calls to UCX (TRANSPORT_HELLO); this TCP connection then
//! stays open as the control channel.
//!
//! PING and every refusal are answered on the reactor, without touching disk; other calls go
//! to the handler queue. The bounds on what a slow, silent or greedy client can make the
//! server hold are the connection's and the stream's (`connection.rs`, `stream.rs`,
//! `docs/native-protocol.md`, "Limits").

use super::budget::Charge;
use super::connection::{Connection, DeferredWrite, Frame, Protocol, Skip};
use super::respond::{error_frame, reply_frame, rpc_error, Responder};
use super::route::{self, busy_in_flight};
use super::stream::{End, Inbound};
use super::transport::Transport;
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

/// A native connection's protocol state.
pub(crate) struct Native {
    conn_id: u64,
    /// Who the connection's calls are from: its certificate's user, else the user its latest
    /// request header named (HBase's SIMPLE; the server decides whether to take it).
    caller: crate::security::Caller,
    shared: Arc<Shared>,
    /// Set once the client moved its calls to UCX (TRANSPORT_HELLO).
    ucx: Option<Attached>,
    /// Where its queued calls' answers go: the connection's writer.
    answers: Arc<dyn Transport>,
}

impl DeferredWrite for route::Deferred {
    fn try_finish(self) -> Result<Frame, Self> {
        match route::Deferred::try_finish(self) {
            route::Finish::Done(frame) => Ok(frame),
            route::Finish::Wait(d) => Err(d),
        }
    }

    fn finish(self) -> impl std::future::Future<Output = Frame> + Send {
        route::Deferred::finish(self)
    }
}

impl Protocol for Native {
    const NAME: &'static str = "native";
    const HANDSHAKE: &'static str = "the preamble";
    type Deferred = route::Deferred;
    type Shared = Shared;

    fn open(conn_id: u64, peer: SocketAddr, io: &Inbound, shared: &Arc<Shared>) -> Native {
        Native {
            conn_id,
            caller: io.origin.caller(peer, "native"),
            shared: shared.clone(),
            ucx: None,
            answers: Arc::new(io.tx.clone()),
        }
    }

    async fn handshake(conn: &mut Connection<Self>) -> Result<(), End> {
        let p: [u8; PREAMBLE.len()] = conn.take_array().await?;
        if conn.io.origin.plaintext_on_tls_port {
            let msg = "this port serves only TLS: connect with TLS (the client's --tls-ca) or to a plaintext port".to_string();
            return Err(malformed_preamble(conn, msg));
        }
        match check_preamble(&p) {
            Ok(()) => conn.send_unbounded(Bytes::from_static(&PREAMBLE)),
            Err(e) => Err(malformed_preamble(conn, e.to_string())),
        }
    }

    fn oversize(_conn: &mut Connection<Self>, _len: u32) -> Result<(), End> {
        // Skipped and refused by its call id; the connection goes on.
        Ok(())
    }

    async fn refuse_unread(
        conn: &mut Connection<Self>,
        prefix: Bytes,
        why: Skip,
    ) -> Result<(), End> {
        let received = Instant::now();
        let Some(header) = peek_request_header(&prefix) else {
            return malformed(conn, 0, "frame without a readable request header".into()).await;
        };
        let method = pb::Method::try_from(header.method).ok();
        let what = method.map(|m| m.as_str_name()).unwrap_or("request");
        let (code, message) = match why {
            Skip::TooLarge { len, max } => (
                pb::ErrorCode::RequestTooLarge,
                format!(
                    "of {len} bytes exceeds the server's limit of {max} bytes (rpc.max_request_bytes)"
                ),
            ),
            Skip::Busy => {
                conn.proto
                    .shared
                    .front
                    .metrics
                    .record_overload(Overload::InFlightBytes);
                busy_in_flight()
            }
        };
        refuse(
            conn,
            header.call_id,
            method,
            received,
            rpc_error(code, format!("{what} {message}")),
        )
        .await
    }

    async fn call(conn: &mut Connection<Self>, body: Bytes, charge: Charge) -> Result<(), End> {
        let received = Instant::now();
        let req = match route::decode(body, received) {
            Ok(req) => req,
            Err(refusal) => {
                let (call_id, fatal) = (refusal.call_id, refusal.fatal.clone());
                drop(charge);
                return match fatal {
                    Some(why) => malformed(conn, call_id, why).await,
                    None => refuse(conn, call_id, refusal.method, received, refusal.error).await,
                };
            }
        };
        let slot = conn.slot().await?;
        if req.method == pb::Method::TransportHello {
            let frame = hello(conn, &req);
            let shared = &conn.proto.shared;
            shared
                .front
                .metrics
                .record_call(req.method, received.elapsed());
            return conn.answer(frame, slot, charge);
        }
        let native = &mut conn.proto;
        native.caller.claim(&req.header.user);
        let ctx = CallContext {
            conn_id: native.conn_id,
            caller: native.caller.acting_for(&req.header.effective_user),
        };
        let respond = Responder {
            sink: native.answers.clone(),
            permit: slot,
            charge,
        };
        match route::serve(&native.shared, ctx, req, respond) {
            route::Served::Queued => Ok(()),
            route::Served::Answer(frame, r) => conn.answer(frame, r.permit, r.charge),
            route::Served::Await(rest, r) => {
                // What was answered goes on before the wait for another writer's WAL round.
                conn.hand_answered()?;
                let frame = rest.await;
                conn.answer(frame, r.permit, r.charge)
            }
            route::Served::AfterWal(d, r) => conn.defer(d, r.permit).await,
        }
    }

    fn end(self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let handler = self.shared.handler.clone();
        let conn_id = self.conn_id;
        // The UCX peer and the writer's sender go now: the UCX peer with its control
        // connection, the sender so that the stream can close.
        drop(self);
        async move {
            if tokio::task::spawn_blocking(move || handler.connection_closed(conn_id))
                .await
                .is_err()
            {
                tracing::error!(conn = conn_id, "connection_closed panicked");
            }
        }
    }
}

/// Tells the client its preamble is not one this server serves; the connection then closes.
fn malformed_preamble(conn: &mut Connection<Native>, msg: String) -> End {
    conn.proto
        .shared
        .front
        .metrics
        .record_error(pb::ErrorCode::MalformedRequest);
    let frame = error_frame(0, rpc_error(pb::ErrorCode::MalformedRequest, msg.clone()));
    match conn.send_unbounded(frame.0) {
        Ok(()) => End::Protocol(msg),
        Err(end) => end,
    }
}

/// Answers a call with an error from the reader itself.
async fn refuse(
    conn: &mut Connection<Native>,
    call_id: u64,
    method: Option<pb::Method>,
    received: Instant,
    error: pb::RpcError,
) -> Result<(), End> {
    let metrics = &conn.proto.shared.front.metrics;
    let code = pb::ErrorCode::try_from(error.code).unwrap_or(pb::ErrorCode::Internal);
    metrics.record_error(code);
    if let Some(m) = method {
        metrics.record_call(m, received.elapsed());
    }
    let slot = conn.slot().await?;
    let charge = conn.io.charge(0);
    conn.answer(error_frame(call_id, error), slot, charge)
}

/// Tells the client its frame was malformed; the connection then closes.
async fn malformed(conn: &mut Connection<Native>, call_id: u64, why: String) -> Result<(), End> {
    refuse(
        conn,
        call_id,
        None,
        Instant::now(),
        rpc_error(pb::ErrorCode::MalformedRequest, why.clone()),
    )
    .await?;
    Err(End::Protocol(why))
}

/// Answers TRANSPORT_HELLO: carries this connection's calls over UCX from now on, this
/// TCP connection staying open as the control channel.
fn hello(conn: &mut Connection<Native>, req: &route::Request) -> Frame {
    let tls = conn.io.origin.tls;
    let budget = conn.io.budget.clone();
    let native = &mut conn.proto;
    let call_id = req.header.call_id;
    let refuse = |code, message: String| {
        native.shared.front.metrics.record_error(code);
        error_frame(call_id, rpc_error(code, message))
    };
    let hello: pb::TransportHelloRequest =
        match decode_param(req.parts.param.clone(), "TransportHelloRequest") {
            Ok(h) => h,
            Err(e) => return refuse(pb::ErrorCode::MalformedRequest, e.to_string()),
        };
    if tls {
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
    if native.ucx.is_some() {
        return refuse(
            pb::ErrorCode::InvalidArgument,
            "this connection already carries its calls over UCX".into(),
        );
    }
    let front = match native.shared.ucx() {
        Ok(front) => front,
        Err(why) => return refuse(pb::ErrorCode::TransportUnavailable, why),
    };
    match front.attach(
        native.conn_id,
        native.caller.clone(),
        budget,
        hello.worker_address.to_vec(),
        hello.client_peer_id,
    ) {
        Ok((peer, response)) => {
            native.ucx = Some(peer);
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
