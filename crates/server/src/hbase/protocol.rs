//! HBase's protocol over a [`crate::rpc::connection::Connection`]: the preamble, the
//! connection header, then request frames in and response frames out, many calls in flight,
//! answered in completion order.
//!
//! Preambles other than `HBas` + version 0 + SIMPLE auth are answered as HBase's server does
//! and the connection closes: the 2.6 client's registry preamble gets the cluster id, the
//! security preamble `SecurityNotEnabledException`, anything else a fatal exception naming
//! what arrived. Bytes: `docs/hbase-protocol.md`.
//!
//! Slow, silent and greedy clients are bounded as on the native port, by the same connection
//! loop and stream (`crate::rpc::connection`, `crate::rpc::stream`): in-flight bytes per connection (past them the reader stops reading
//! until answers drain) and per front end (past them calls are answered
//! `CallQueueTooBigException`, which the Java client backs off from and retries, as HBase
//! does past `hbase.ipc.server.max.callqueue.size`); the preamble and connection header
//! within `rpc.handshake_timeout_ms`, each frame within `rpc.frame_timeout_ms`, each write's
//! progress within `rpc.write_timeout_ms`; no read buffer while idle.

use super::exceptions::{self as ex, HbaseError};
use super::{CallCtx, HbaseService, Inline, Reply};
use crate::metrics::{Overload, RpcMetrics};
use crate::rpc::budget::Charge;
use crate::rpc::connection::{Connection, DeferredWrite, Frame, Protocol, Skip};
use crate::rpc::limits::REFUSABLE_ANSWER_BYTES;
use crate::rpc::queue::Refused;
use crate::rpc::stream::{End, Inbound};
use crate::rpc::transport::Outgoing;
use crate::rpc::Front;
use bytes::{Bytes, BytesMut};
use cellar_proto::cellblock;
use cellar_proto::hbase;
use cellar_proto::hbase_wire::{self, Preamble};
use prost::Message;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::OwnedSemaphorePermit;

/// The largest connection header accepted.
const MAX_CONNECTION_HEADER: u32 = 64 * 1024;
/// The call id HBase uses for answers that belong to no call (preamble answers).
const NO_CALL: u32 = u32::MAX;

/// Cell block codecs whose layout Cellar reads and writes (KeyValue, no tags).
const KEYVALUE_CODEC: &str = "org.apache.hadoop.hbase.codec.KeyValueCodec";
/// The same with tags after a cell's value where it has any (what HBase's replication
/// sources send, `hbase.replication.rpc.codec`). Cells without tags are the same bytes in
/// both, so answers need no change; tags in requests are dropped (Cellar keeps none).
const KEYVALUE_CODEC_WITH_TAGS: &str = "org.apache.hadoop.hbase.codec.KeyValueCodecWithTags";

impl AsRef<Front> for Shared {
    fn as_ref(&self) -> &Front {
        &self.front
    }
}

/// What every connection of the HBase front end shares.
pub(crate) struct Shared {
    pub service: Arc<HbaseService>,
    pub front: Front,
    /// Whether any call may be served on the reactor (`rpc.inline_gets` or `inline_puts`).
    pub inline: bool,
}

/// A call waiting for a handler thread.
pub(crate) struct HCall {
    pub hbase: Arc<HbaseService>,
    pub ctx: CallCtx,
    pub call_id: u32,
    pub service: Arc<str>,
    pub method: String,
    pub param: Bytes,
    pub cellblock: Bytes,
    pub received: Instant,
    pub deadline: Option<Instant>,
    pub metrics: Arc<RpcMetrics>,
    tx: tokio::sync::mpsc::UnboundedSender<Outgoing>,
    slot: OwnedSemaphorePermit,
    /// The request's bytes until answered, then the answer's until written.
    charge: Charge,
}

impl HCall {
    /// Encodes the outcome and queues it for the connection's writer. Never waits: handler
    /// threads answer through it.
    pub fn answer(mut self, outcome: Result<Reply, HbaseError>) {
        self.metrics
            .record_other_call(&self.method, self.received.elapsed(), outcome.is_err());
        let mut frame = response_frame(self.call_id, outcome);
        if self.method == "Get" && answer_overflows(&self.charge, frame.len()) {
            self.metrics.record_overload(Overload::InFlightBytes);
            frame = response_frame(self.call_id, Err(busy_answer(frame.len())));
        }
        self.charge.set(frame.len() as u64);
        let _ = self.tx.send(Outgoing {
            head: frame,
            tail: Bytes::new(),
            _slot: Some(self.slot),
            _charge: Some(self.charge),
        });
    }
}

/// Whether a handler's answer of `len` bytes to a Get is to be dropped for a
/// `CallQueueTooBigException`: its connection or the server would be past the in-flight bound
/// with other bytes of the connection in flight. Handlers answer every queued call whether or
/// not the reader has stopped, so without this a client pipelining big Gets without reading
/// would grow the server by every answer still queued; a Get is safe to retry. Writes are
/// never refused once applied.
fn answer_overflows(charge: &Charge, len: usize) -> bool {
    len >= REFUSABLE_ANSWER_BYTES && charge.budget().answer_overflows(charge.bytes(), len as u64)
}

fn busy_answer(len: usize) -> HbaseError {
    HbaseError::new(
        ex::CALL_QUEUE_TOO_BIG,
        format!("the answer of {len} bytes was dropped: this connection or the server holds as many unwritten answers as it may (rpc.max_connection_in_flight_bytes, rpc.max_in_flight_bytes); retry later"),
        false,
    )
}

/// The refusal of a call while the front end's in-flight bytes are past their bound.
fn busy_in_flight() -> HbaseError {
    HbaseError::new(
        ex::CALL_QUEUE_TOO_BIG,
        "the server holds as many request and response bytes as it may (rpc.max_in_flight_bytes); retry later",
        false,
    )
}

fn response_frame(call_id: u32, outcome: Result<Reply, HbaseError>) -> Bytes {
    let mut out = BytesMut::new();
    append_response(&mut out, call_id, outcome);
    out.freeze()
}

fn append_response(out: &mut BytesMut, call_id: u32, outcome: Result<Reply, HbaseError>) {
    match outcome {
        Ok(reply) => hbase_wire::encode_response(out, call_id, &reply.param, &reply.cellblock),
        Err(e) => hbase_wire::encode_exception(out, call_id, e.class, &e.message, e.do_not_retry),
    }
}

fn exception_frame(call_id: u32, class: &str, message: &str) -> Bytes {
    let mut out = BytesMut::new();
    hbase_wire::encode_exception(&mut out, call_id, class, message, true);
    out.freeze()
}

/// An HBase connection's protocol state.
pub(crate) struct Hbase {
    ctx: CallCtx,
    /// The connection's codec is [`KEYVALUE_CODEC_WITH_TAGS`]: request cell blocks may
    /// carry tags, dropped before a call reads them.
    tagged_cells: bool,
    /// The service the connection header named: every call on the connection is for it.
    service_name: Arc<str>,
    shared: Arc<Shared>,
}

/// A put applied on the reactor, waiting for its WAL write.
pub(crate) struct Deferred {
    write: crate::region_server::DeferredPut,
    answer: PutAnswer,
}

/// The answer of a deferred put, once its write is done.
struct PutAnswer {
    call_id: u32,
    received: Instant,
    reply: Reply,
    metrics: Arc<RpcMetrics>,
}

impl PutAnswer {
    fn frame(self, done: Result<(), crate::error::ServerError>) -> Frame {
        let outcome = done.map(|()| self.reply).map_err(HbaseError::from);
        self.metrics
            .record_other_call("Mutate", self.received.elapsed(), outcome.is_err());
        (response_frame(self.call_id, outcome), Bytes::new())
    }
}

impl DeferredWrite for Deferred {
    fn try_finish(self) -> Result<Frame, Self> {
        let Deferred { write, answer } = self;
        match write.try_finish() {
            Ok(done) => Ok(answer.frame(done)),
            Err(write) => Err(Deferred { write, answer }),
        }
    }

    async fn finish(self) -> Frame {
        let done = self.write.finish_async().await;
        self.answer.frame(done)
    }
}

/// The `(head, tail)` of an HBase answer (the HBase front end never splits one).
fn frame(head: Bytes) -> Frame {
    (head, Bytes::new())
}

impl Protocol for Hbase {
    const NAME: &'static str = "HBase";
    const HANDSHAKE: &'static str = "the preamble and connection header";
    type Deferred = Deferred;
    type Shared = Shared;

    fn open(conn_id: u64, peer: SocketAddr, io: &Inbound, shared: &Arc<Shared>) -> Hbase {
        Hbase {
            ctx: CallCtx {
                conn_id,
                cell_blocks: false,
                caller: io.origin.caller(peer, "hbase"),
            },
            tagged_cells: false,
            service_name: Arc::from(""),
            shared: shared.clone(),
        }
    }

    /// The 6-byte preamble and the connection header.
    async fn handshake(conn: &mut Connection<Self>) -> Result<(), End> {
        // A client probing for a Kerberos principal gets told there is none and may go on
        // with its real preamble, as on HBase; at most a few probes per connection.
        for _ in 0..4 {
            if preamble(conn).await? {
                return connection_header(conn).await;
            }
        }
        Err(fatal(
            conn,
            ex::FATAL_CONNECTION,
            "too many security preambles".into(),
        ))
    }

    fn oversize(conn: &mut Connection<Self>, len: u32) -> Result<(), End> {
        // HBase answers RequestTooBigException and closes: the rest of the frame is never
        // read, so the stream cannot be resynchronised cheaply anyway.
        let max = conn.proto.shared.front.limits.max_request_bytes;
        Err(fatal(
            conn,
            ex::REQUEST_TOO_BIG,
            format!(
                "request of {len} bytes is larger than the limit of {max} bytes (rpc.max_request_bytes)"
            ),
        ))
    }

    /// Answers `CallQueueTooBigException` (the only frames this protocol skips are those that
    /// arrive while the front end is full).
    async fn refuse_unread(
        conn: &mut Connection<Self>,
        prefix: Bytes,
        _why: Skip,
    ) -> Result<(), End> {
        let Some(header) = peek_request_header(&prefix) else {
            return Err(fatal(
                conn,
                ex::FATAL_CONNECTION,
                "request frame without a readable request header".into(),
            ));
        };
        let metrics = &conn.proto.shared.front.metrics;
        metrics.record_overload(Overload::InFlightBytes);
        let method = header.method_name.clone().unwrap_or_default();
        metrics.record_other_call(&method, Duration::ZERO, true);
        let slot = conn.slot().await?;
        let charge = conn.io.charge(0);
        let answer = response_frame(header.call_id.unwrap_or(0), Err(busy_in_flight()));
        conn.answer(frame(answer), slot, charge)
    }

    /// Decodes one request frame and answers it inline or queues it.
    async fn call(conn: &mut Connection<Self>, body: Bytes, charge: Charge) -> Result<(), End> {
        let received = Instant::now();
        let mut req = match hbase_wire::decode_request(body) {
            Ok(r) => r,
            Err(e) => return Err(fatal(conn, ex::FATAL_CONNECTION, e.to_string())),
        };
        let call_id = req.header.call_id.unwrap_or(0);
        let method = req.header.method_name.take().unwrap_or_default();
        let slot = conn.slot().await?;
        if conn.proto.tagged_cells && !req.cellblock.is_empty() {
            match cellblock::without_tags(std::mem::take(&mut req.cellblock)) {
                Ok(block) => req.cellblock = block,
                Err(e) => {
                    let refused = HbaseError::do_not_retry(format!("{method}: {e}"));
                    return conn.answer(frame(response_frame(call_id, Err(refused))), slot, charge);
                }
            }
        }
        let shared = conn.proto.shared.clone();
        if conn.io.budget.server_full() {
            // The front end holds as much for its clients as it may: refuse (the Java client
            // backs off and retries) rather than stop reading, which would stall this client
            // behind others' answers without telling it why.
            shared
                .front
                .metrics
                .record_overload(Overload::InFlightBytes);
            shared
                .front
                .metrics
                .record_other_call(&method, received.elapsed(), true);
            let answer = response_frame(call_id, Err(busy_in_flight()));
            return conn.answer(frame(answer), slot, charge);
        }
        if shared.inline {
            let hb = &conn.proto;
            let mut inline = shared.service.call_inline(
                &hb.ctx,
                &hb.service_name,
                &method,
                &req.param,
                &req.cellblock,
            );
            if inline.is_none() && method == "Mutate" && conn.has_deferred() {
                // A put of this batch may hold the row: finish the batch and try once more,
                // rather than send a row this connection is writing to the handler pool.
                conn.flush().await?;
                let hb = &conn.proto;
                inline = shared.service.call_inline(
                    &hb.ctx,
                    &hb.service_name,
                    &method,
                    &req.param,
                    &req.cellblock,
                );
            }
            match inline {
                Some(Inline::Ready(outcome)) => {
                    shared.front.metrics.record_other_call(
                        &method,
                        received.elapsed(),
                        outcome.is_err(),
                    );
                    return conn.answer(frame(response_frame(call_id, outcome)), slot, charge);
                }
                Some(Inline::AfterWal(write, reply)) => {
                    // The put is in the memstore and its request frame freed; its small
                    // answer is counted once it is made.
                    drop(charge);
                    let deferred = Deferred {
                        write,
                        answer: PutAnswer {
                            call_id,
                            received,
                            reply,
                            metrics: shared.front.metrics.clone(),
                        },
                    };
                    return conn.defer(deferred, slot).await;
                }
                None => {}
            }
        }
        let deadline = req
            .header
            .timeout
            .filter(|t| *t > 0)
            .map(|t| received + Duration::from_millis(u64::from(t)));
        let call = HCall {
            hbase: shared.service.clone(),
            ctx: conn.proto.ctx.clone(),
            call_id,
            service: conn.proto.service_name.clone(),
            method,
            param: req.param,
            cellblock: req.cellblock,
            received,
            deadline,
            metrics: shared.front.metrics.clone(),
            tx: conn.io.tx.clone(),
            slot,
            charge,
        };
        match shared.front.queue.try_push(call) {
            Ok(()) => Ok(()),
            Err(Refused::Full(call)) => {
                shared.front.metrics.record_overload(Overload::CallQueue);
                let e = HbaseError::new(
                    ex::CALL_QUEUE_TOO_BIG,
                    "the call queue is full (rpc.max_queued_calls); retry later",
                    false,
                );
                call.answer(Err(e));
                Ok(())
            }
            Err(Refused::Closed(call)) => {
                let e = HbaseError::new(ex::SERVER_STOPPED, "the server is stopping", false);
                call.answer(Err(e));
                Err(End::Shutdown)
            }
        }
    }

    fn end(self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let service = self.shared.service.clone();
        let conn_id = self.ctx.conn_id;
        async move {
            let _ = tokio::task::spawn_blocking(move || service.connection_closed(conn_id)).await;
        }
    }
}

/// The call id and method of a request frame from the first bytes of its body (a
/// varint-delimited `RequestHeader`), if they hold all of the header.
fn peek_request_header(prefix: &[u8]) -> Option<hbase::RequestHeader> {
    let mut b = prefix;
    let len = prost::decode_length_delimiter(&mut b).ok()?;
    hbase::RequestHeader::decode(b.get(..len)?).ok()
}

/// Tells the client why the connection closes (an exception for no call), and ends it.
fn fatal(conn: &mut Connection<Hbase>, class: &str, message: String) -> End {
    let _ = conn.send_unbounded(exception_frame(NO_CALL, class, &message));
    End::Protocol(message)
}

/// One preamble: true when it is `HBas` + SIMPLE (a connection header follows), false after
/// a security probe was answered.
async fn preamble(conn: &mut Connection<Hbase>) -> Result<bool, End> {
    let p: [u8; 6] = conn.take_array().await?;
    if conn.io.origin.plaintext_on_tls_port {
        return Err(fatal(
            conn,
            ex::FATAL_CONNECTION,
            "this port serves only TLS: set hbase.client.netty.tls.enabled=true and a trust store (hbase.rpc.tls.truststore.location)".into(),
        ));
    }
    match hbase_wire::classify_preamble(&p) {
        Preamble::Hbase { auth } if auth == hbase_wire::AUTH_SIMPLE => Ok(true),
        Preamble::Hbase { auth } => Err(fatal(
            conn,
            ex::BAD_AUTH,
            format!(
                "authentication code {auth} is not supported: Cellar accepts SIMPLE ({})",
                hbase_wire::AUTH_SIMPLE
            ),
        )),
        Preamble::WrongVersion(v) => Err(fatal(
            conn,
            ex::WRONG_VERSION,
            format!(
                "RPC version {v} is not supported: Cellar speaks version {}",
                hbase_wire::RPC_VERSION
            ),
        )),
        Preamble::Registry => {
            // The 2.6 client's cluster-id probe: answer and close.
            let answer = hbase::GetConnectionRegistryResponse {
                cluster_id: conn.proto.shared.service.cluster_id.clone(),
            };
            let mut out = BytesMut::new();
            hbase_wire::encode_response(&mut out, NO_CALL, &answer.encode_to_vec(), &[]);
            conn.send_unbounded(out.freeze())?;
            Err(End::Done)
        }
        Preamble::Security => {
            conn.send_unbounded(exception_frame(
                NO_CALL,
                ex::SECURITY_NOT_ENABLED,
                "security is not enabled on this Cellar server",
            ))?;
            Ok(false)
        }
        Preamble::Bad(got) => Err(fatal(
            conn,
            ex::FATAL_CONNECTION,
            format!(
                "Expected HEADER=HBas but received HEADER={}",
                String::from_utf8_lossy(&got[..4])
            ),
        )),
    }
}

/// The connection header: `u32 BE length | ConnectionHeader`.
async fn connection_header(conn: &mut Connection<Hbase>) -> Result<(), End> {
    conn.need(4).await?;
    let len = conn.io.frame_len().unwrap_or(0);
    if len > MAX_CONNECTION_HEADER {
        return Err(fatal(
            conn,
            ex::FATAL_CONNECTION,
            format!("connection header of {len} bytes is larger than {MAX_CONNECTION_HEADER}"),
        ));
    }
    conn.need(4 + len as usize).await?;
    conn.io.consume(4);
    let body = conn.io.take(len as usize);
    let header = match hbase_wire::decode_connection_header(body) {
        Ok(h) => h,
        Err(e) => return Err(fatal(conn, ex::FATAL_CONNECTION, e.to_string())),
    };
    if let Some(c) = header
        .cell_block_compressor_class
        .as_deref()
        .filter(|c| !c.is_empty())
    {
        return Err(fatal(
            conn,
            ex::FATAL_CONNECTION,
            format!("cell block compressor {c} is not supported by Cellar; unset hbase.client.rpc.compressor"),
        ));
    }
    let hb = &mut conn.proto;
    match header.cell_block_codec_class.as_deref() {
        None | Some("") => {}
        Some(KEYVALUE_CODEC) => hb.ctx.cell_blocks = true,
        Some(KEYVALUE_CODEC_WITH_TAGS) => {
            hb.ctx.cell_blocks = true;
            hb.tagged_cells = true;
        }
        Some(other) => {
            return Err(fatal(
                conn,
                ex::FATAL_CONNECTION,
                format!("cell block codec {other} is not supported by Cellar; use {KEYVALUE_CODEC} (hbase.client.default.rpc.codec)"),
            ))
        }
    }
    let hb = &mut conn.proto;
    hb.service_name = Arc::from(header.service_name.as_deref().unwrap_or(""));
    if !hb.ctx.caller.certified {
        // HBase's SIMPLE authentication: the client says who it is.
        hb.ctx.caller.user = header
            .user_info
            .as_ref()
            .map(|u| u.effective_user.as_str())
            .filter(|u| !u.is_empty())
            .map(Arc::from);
    }
    Ok(())
}
