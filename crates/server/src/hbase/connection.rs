//! One HBase connection: the preamble, the connection header, then request frames in and
//! response frames out, many calls in flight, answered in completion order.
//!
//! Preambles other than `HBas` + version 0 + SIMPLE auth are answered as HBase's server does
//! and the connection closes: the 2.6 client's registry preamble gets the cluster id, the
//! security preamble `SecurityNotEnabledException`, anything else a fatal exception naming
//! what arrived. Bytes: `docs/hbase-protocol.md`.
//!
//! Slow, silent and greedy clients are bounded as on the native port, by the same stream
//! (`crate::rpc::stream`): in-flight bytes per connection (past them the reader stops reading
//! until answers drain) and per front end (past them calls are answered
//! `CallQueueTooBigException`, which the Java client backs off from and retries, as HBase
//! does past `hbase.ipc.server.max.callqueue.size`); the preamble and connection header
//! within `rpc.handshake_timeout_ms`, each frame within `rpc.frame_timeout_ms`, each write's
//! progress within `rpc.write_timeout_ms`; no read buffer while idle.

use super::exceptions::{self as ex, HbaseError};
use super::{CallCtx, HReply, HbaseService, Inline};
use crate::metrics::{Overload, RpcMetrics};
use crate::rpc::budget::{Charge, ServerBudget};
use crate::rpc::limits::{Limits, MAX_DEFERRED_WRITES, PEEK_BYTES, REFUSABLE_ANSWER_BYTES};
use crate::rpc::queue::{CallQueue, Refused};
use crate::rpc::respond::Outgoing;
use crate::rpc::stream::{self, End, Inbound, WRITE_BATCH_BYTES};
use bytes::{Bytes, BytesMut};
use cellar_proto::hbase;
use cellar_proto::hbase_wire::{self, Preamble};
use prost::Message;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::{watch, OwnedSemaphorePermit};

/// The largest connection header accepted.
const MAX_CONNECTION_HEADER: u32 = 64 * 1024;
/// The call id HBase uses for answers that belong to no call (preamble answers).
const NO_CALL: u32 = u32::MAX;

/// Cell block codecs whose layout Cellar reads and writes (KeyValue, no tags).
const KEYVALUE_CODEC: &str = "org.apache.hadoop.hbase.codec.KeyValueCodec";

/// What every connection shares.
pub(crate) struct Shared {
    pub service: Arc<HbaseService>,
    pub queue: Arc<CallQueue>,
    pub metrics: Arc<RpcMetrics>,
    pub budget: Arc<ServerBudget>,
    pub limits: Limits,
    /// Whether any call may be served on the reactor (`rpc.inline_gets` or `inline_puts`).
    pub inline: bool,
    /// TLS on this port, when configured.
    pub tls: Option<Arc<crate::security::TlsServer>>,
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
    pub fn answer(mut self, outcome: Result<HReply, HbaseError>) {
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

fn response_frame(call_id: u32, outcome: Result<HReply, HbaseError>) -> Bytes {
    let mut out = BytesMut::new();
    append_response(&mut out, call_id, outcome);
    out.freeze()
}

fn append_response(out: &mut BytesMut, call_id: u32, outcome: Result<HReply, HbaseError>) {
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

/// Serves one accepted connection to its end.
pub(crate) async fn serve(
    stream: TcpStream,
    conn_id: u64,
    peer: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
) {
    let port = stream::Port {
        tls: shared.tls.as_deref(),
        limits: &shared.limits,
        metrics: &shared.metrics,
        budget: &shared.budget,
    };
    let Some((io, writer)) = stream::start(stream, peer, port, "HBase", shutdown).await else {
        return;
    };
    let mut reader = Reader {
        ctx: CallCtx {
            conn_id,
            cell_blocks: false,
            caller: crate::security::Caller {
                user: io.origin.cert_user.clone(),
                real_user: None,
                certified: io.origin.cert_user.is_some(),
                peer: Some(peer.ip()),
                protocol: "hbase",
            },
        },
        service_name: Arc::from(""),
        shared: shared.clone(),
        answered: BytesMut::new(),
        answered_slots: None,
        answered_charge: io.charge(0),
        io,
        deferred: Vec::new(),
    };
    let end = reader.run().await;
    let _ = reader.flush_answered().await;
    stream::close(reader.io, writer, &end, "HBase connection", conn_id, peer).await;
    let service = shared.service.clone();
    let _ = tokio::task::spawn_blocking(move || service.connection_closed(conn_id)).await;
    shared.metrics.connection_closed();
}

struct Reader {
    ctx: CallCtx,
    /// The service the connection header named: every call on the connection is for it.
    service_name: Arc<str>,
    shared: Arc<Shared>,
    io: Inbound,
    /// Frames answered on the reactor since the last read, handed to the writer in one piece
    /// before the reader waits for more bytes: requests that arrived together are answered
    /// with one socket write.
    answered: BytesMut,
    answered_slots: Option<OwnedSemaphorePermit>,
    /// The bytes of `answered`, counted as in flight.
    answered_charge: Charge,
    /// Puts applied on the reactor since the last read whose WAL records are not yet in the
    /// OS, with their answers: finished (one WAL write for all) just before `answered` goes to
    /// the writer, so no put is acknowledged before its record is in the OS. A put whose
    /// finish would wait (another writer's WAL round is in progress) goes to the handler pool.
    ///
    /// Never held across a wait for the socket (the rule [`DeferredPut`] rests on): every such
    /// wait of the reader (`fill`, the slot wait) starts with `flush_answered`, which finishes
    /// them, awaiting nothing but the WAL, so they hold back other calls' writes for
    /// microseconds, never for a socket.
    ///
    /// [`DeferredPut`]: crate::region_server::DeferredPut
    deferred: Vec<Deferred>,
}

/// A put applied on the reactor, waiting for its WAL write.
struct Deferred {
    call_id: u32,
    received: Instant,
    write: crate::region_server::DeferredPut,
    reply: HReply,
    slot: OwnedSemaphorePermit,
}

/// The call id and method of a request frame from the first bytes of its body (a
/// varint-delimited `RequestHeader`), if they hold all of the header.
fn peek_request_header(prefix: &[u8]) -> Option<hbase::RequestHeader> {
    let mut b = prefix;
    let len = prost::decode_length_delimiter(&mut b).ok()?;
    hbase::RequestHeader::decode(b.get(..len)?).ok()
}

impl Reader {
    async fn run(&mut self) -> End {
        match tokio::time::timeout(self.shared.limits.handshake_timeout, self.hello()).await {
            Ok(Ok(())) => {}
            Ok(Err(end)) => return end,
            Err(_) => return End::TimedOut("the preamble and connection header"),
        }
        self.io.frame_done();
        loop {
            if let Err(end) = self.next_call().await {
                return end;
            }
        }
    }

    /// Hands what was answered to the writer, then reads more input into the buffer, first
    /// waiting for room if the connection is past its in-flight bound.
    async fn fill(&mut self) -> Result<(), End> {
        self.flush_answered().await?;
        self.io.wait_for_room().await?;
        if self.answered.is_empty() {
            // Waiting for input holds no answer buffer either.
            self.answered = BytesMut::new();
        }
        self.io.read().await
    }

    /// Waits while the connection is past its own in-flight bound (`Inbound::wait_for_room`),
    /// after handing what it answered to the writer (those bytes drain only from there).
    async fn wait_for_room(&mut self) -> Result<(), End> {
        if self.io.has_room() {
            return Ok(());
        }
        self.flush_answered().await?;
        self.io.wait_for_room().await
    }

    async fn need(&mut self, n: usize) -> Result<(), End> {
        while self.io.buf.len() < n {
            self.fill().await?;
        }
        Ok(())
    }

    /// Hands the frames answered on the reactor to the writer, after finishing the deferred
    /// puts (the first finish writes every buffered WAL record; the rest find theirs written).
    /// A put whose record another writer's round is writing is awaited: the task yields, the
    /// reactor thread never blocks.
    async fn flush_answered(&mut self) -> Result<(), End> {
        for d in std::mem::take(&mut self.deferred) {
            let done = match d.write.try_finish() {
                Ok(done) => done,
                Err(write) => write.finish_async().await,
            };
            let outcome = done.map(|()| d.reply).map_err(HbaseError::from);
            self.shared
                .metrics
                .record_other_call("Mutate", d.received.elapsed(), outcome.is_err());
            append_response(&mut self.answered, d.call_id, outcome);
            self.hold_answered_slot(d.slot);
        }
        self.hand_answered()
    }

    /// Hands the frames already answered to the writer, with their in-flight bytes.
    fn hand_answered(&mut self) -> Result<(), End> {
        if self.answered.is_empty() {
            return Ok(());
        }
        let frame = self.answered.split().freeze();
        let mut charge = std::mem::replace(&mut self.answered_charge, self.io.charge(0));
        charge.set(frame.len() as u64);
        self.io.send(Outgoing {
            head: frame,
            tail: Bytes::new(),
            _slot: self.answered_slots.take(),
            _charge: Some(charge),
        })
    }

    /// Appends an answer given on the reactor to `answered`, with its call's bytes. Never
    /// refused for its size, unlike a handler's ([`answer_overflows`]): the reader checks the
    /// connection's room before each frame, so an answer given here overshoots the bound by
    /// itself at most.
    fn append_answer(&mut self, call_id: u32, outcome: Result<HReply, HbaseError>, charge: Charge) {
        append_response(&mut self.answered, call_id, outcome);
        self.answered_charge.absorb(charge);
        self.answered_charge.set(self.answered.len() as u64);
    }

    /// Keeps an answered call's in-flight slot until `answered` is written.
    fn hold_answered_slot(&mut self, slot: OwnedSemaphorePermit) {
        match &mut self.answered_slots {
            Some(held) => held.merge(slot),
            None => self.answered_slots = Some(slot),
        }
    }

    /// Queues `frame` for the writer after every answer ready before it (puts still waiting
    /// for their WAL write are answered later).
    fn send(&mut self, frame: Bytes) -> Result<(), End> {
        self.hand_answered()?;
        self.io.send(Outgoing::unbounded(frame))
    }

    fn fatal(&mut self, class: &str, message: String) -> End {
        let _ = self.send(exception_frame(NO_CALL, class, &message));
        End::Protocol(message)
    }

    /// The 6-byte preamble and the connection header.
    async fn hello(&mut self) -> Result<(), End> {
        // A client probing for a Kerberos principal gets told there is none and may go on
        // with its real preamble, as on HBase; at most a few probes per connection.
        for _ in 0..4 {
            if self.preamble().await? {
                return self.connection_header().await;
            }
        }
        Err(self.fatal(ex::FATAL_CONNECTION, "too many security preambles".into()))
    }

    /// One preamble: true when it is `HBas` + SIMPLE (a connection header follows), false
    /// after a security probe was answered.
    async fn preamble(&mut self) -> Result<bool, End> {
        self.need(6).await?;
        let mut p = [0u8; 6];
        #[allow(
            clippy::indexing_slicing,
            reason = "need(6) returned: the buffer holds 6 bytes"
        )]
        p.copy_from_slice(&self.io.buf[..6]);
        self.io.consume(6);
        if self.io.origin.plaintext_on_tls_port {
            return Err(self.fatal(
                ex::FATAL_CONNECTION,
                "this port serves only TLS: set hbase.client.netty.tls.enabled=true and a trust store (hbase.rpc.tls.truststore.location)".into(),
            ));
        }
        match hbase_wire::classify_preamble(&p) {
            Preamble::Hbase { auth } if auth == hbase_wire::AUTH_SIMPLE => Ok(true),
            Preamble::Hbase { auth } => Err(self.fatal(
                ex::BAD_AUTH,
                format!(
                    "authentication code {auth} is not supported: Cellar accepts SIMPLE ({})",
                    hbase_wire::AUTH_SIMPLE
                ),
            )),
            Preamble::WrongVersion(v) => Err(self.fatal(
                ex::WRONG_VERSION,
                format!(
                    "RPC version {v} is not supported: Cellar speaks version {}",
                    hbase_wire::RPC_VERSION
                ),
            )),
            Preamble::Registry => {
                // The 2.6 client's cluster-id probe: answer and close.
                let answer = hbase::GetConnectionRegistryResponse {
                    cluster_id: self.shared.service.cluster_id.clone(),
                };
                let mut out = BytesMut::new();
                hbase_wire::encode_response(&mut out, NO_CALL, &answer.encode_to_vec(), &[]);
                self.send(out.freeze())?;
                Err(End::Done)
            }
            Preamble::Security => {
                self.send(exception_frame(
                    NO_CALL,
                    ex::SECURITY_NOT_ENABLED,
                    "security is not enabled on this Cellar server",
                ))?;
                Ok(false)
            }
            Preamble::Bad(got) => Err(self.fatal(
                ex::FATAL_CONNECTION,
                format!(
                    "Expected HEADER=HBas but received HEADER={}",
                    String::from_utf8_lossy(&got[..4])
                ),
            )),
        }
    }

    /// The connection header: `u32 BE length | ConnectionHeader`.
    async fn connection_header(&mut self) -> Result<(), End> {
        self.need(4).await?;
        let len = self.io.frame_len().unwrap_or(0);
        if len > MAX_CONNECTION_HEADER {
            return Err(self.fatal(
                ex::FATAL_CONNECTION,
                format!("connection header of {len} bytes is larger than {MAX_CONNECTION_HEADER}"),
            ));
        }
        self.need(4 + len as usize).await?;
        self.io.consume(4);
        let body = self.io.take(len as usize);
        let header = match hbase_wire::decode_connection_header(body) {
            Ok(h) => h,
            Err(e) => return Err(self.fatal(ex::FATAL_CONNECTION, e.to_string())),
        };
        if let Some(c) = header
            .cell_block_compressor_class
            .as_deref()
            .filter(|c| !c.is_empty())
        {
            return Err(self.fatal(
                ex::FATAL_CONNECTION,
                format!("cell block compressor {c} is not supported by Cellar; unset hbase.client.rpc.compressor"),
            ));
        }
        match header.cell_block_codec_class.as_deref() {
            None | Some("") => {}
            Some(KEYVALUE_CODEC) => self.ctx.cell_blocks = true,
            Some(other) => {
                return Err(self.fatal(
                    ex::FATAL_CONNECTION,
                    format!("cell block codec {other} is not supported by Cellar; use {KEYVALUE_CODEC} (hbase.client.default.rpc.codec)"),
                ))
            }
        }
        self.service_name = Arc::from(header.service_name.as_deref().unwrap_or(""));
        if !self.ctx.caller.certified {
            // HBase's SIMPLE authentication: the client says who it is.
            self.ctx.caller.user = header
                .user_info
                .as_ref()
                .map(|u| u.effective_user.as_str())
                .filter(|u| !u.is_empty())
                .map(Arc::from);
        }
        Ok(())
    }

    /// Consumes one request frame (or part of a refused one being skipped), reading as
    /// needed, and answers it inline or queues it.
    async fn next_call(&mut self) -> Result<(), End> {
        if self.io.skipping() {
            return self.fill().await;
        }
        let Some(len) = self.io.frame_len() else {
            return self.fill().await;
        };
        if len > self.shared.limits.max_request_bytes {
            // HBase answers RequestTooBigException and closes: the rest of the frame is
            // never read, so the stream cannot be resynchronised cheaply anyway.
            return Err(self.fatal(
                ex::REQUEST_TOO_BIG,
                format!(
                    "request of {len} bytes is larger than the limit of {} bytes (rpc.max_request_bytes)",
                    self.shared.limits.max_request_bytes
                ),
            ));
        }
        if self.io.buf.len() < 4 + len as usize {
            if self.io.budget.server_full() {
                // Others hold the server's in-flight bound: refuse this call now instead of
                // buffering the rest of it.
                return self.skip_frame(len).await;
            }
            return self.fill().await;
        }
        self.wait_for_room().await?;
        let (body, charge) = self.io.take_frame(len);
        self.call(body, charge).await
    }

    /// Answers the frame starting in the buffer `CallQueueTooBigException` by its call id
    /// (peeked from the first bytes of its body) and skips the whole frame as it arrives,
    /// never buffering it.
    async fn skip_frame(&mut self, len: u32) -> Result<(), End> {
        let want = (len as usize).min(PEEK_BYTES);
        if self.io.buf.len() < 4 + want {
            return self.fill().await;
        }
        let Some(header) = self.io.buf.get(4..4 + want).and_then(peek_request_header) else {
            return Err(self.fatal(
                ex::FATAL_CONNECTION,
                "request frame without a readable request header".into(),
            ));
        };
        self.io.skip_frame(len);
        self.shared.metrics.record_overload(Overload::InFlightBytes);
        let method = header.method_name.clone().unwrap_or_default();
        self.shared
            .metrics
            .record_other_call(&method, Duration::ZERO, true);
        let charge = self.io.charge(0);
        self.append_answer(header.call_id.unwrap_or(0), Err(busy_in_flight()), charge);
        Ok(())
    }

    /// Decodes one request frame and answers it inline or queues it.
    async fn call(&mut self, body: Bytes, charge: Charge) -> Result<(), End> {
        let received = Instant::now();
        let mut req = match hbase_wire::decode_request(body) {
            Ok(r) => r,
            Err(e) => return Err(self.fatal(ex::FATAL_CONNECTION, e.to_string())),
        };
        let call_id = req.header.call_id.unwrap_or(0);
        let method = req.header.method_name.take().unwrap_or_default();
        let slot = match self.io.try_slot() {
            Some(s) => s,
            None => {
                // Slots come back as answers are written, and some may be in `answered`.
                self.flush_answered().await?;
                self.io.wait_slot().await?
            }
        };
        if self.io.budget.server_full() {
            // The front end holds as much for its clients as it may: refuse (the Java client
            // backs off and retries) rather than stop reading, which would stall this client
            // behind others' answers without telling it why.
            self.shared.metrics.record_overload(Overload::InFlightBytes);
            self.shared
                .metrics
                .record_other_call(&method, received.elapsed(), true);
            self.append_answer(call_id, Err(busy_in_flight()), charge);
            self.hold_answered_slot(slot);
            if self.answered.len() >= WRITE_BATCH_BYTES {
                self.flush_answered().await?;
            }
            return Ok(());
        }
        if self.shared.inline {
            let mut inline = self.shared.service.call_inline(
                &self.ctx,
                &self.service_name,
                &method,
                &req.param,
                &req.cellblock,
            );
            if inline.is_none() && method == "Mutate" && !self.deferred.is_empty() {
                // A put of this batch may hold the row: finish the batch
                // and try once more, rather than send a row this connection is writing to the
                // handler pool.
                self.flush_answered().await?;
                inline = self.shared.service.call_inline(
                    &self.ctx,
                    &self.service_name,
                    &method,
                    &req.param,
                    &req.cellblock,
                );
            }
            if let Some(inline) = inline {
                match inline {
                    Inline::Ready(outcome) => {
                        self.shared.metrics.record_other_call(
                            &method,
                            received.elapsed(),
                            outcome.is_err(),
                        );
                        self.append_answer(call_id, outcome, charge);
                    }
                    Inline::AfterWal(write, reply) => {
                        // The put is in the memstore and its request frame freed; its small
                        // answer is counted once `flush_answered` makes it.
                        drop(charge);
                        self.deferred.push(Deferred {
                            call_id,
                            received,
                            write,
                            reply,
                            slot,
                        });
                        if self.deferred.len() >= MAX_DEFERRED_WRITES {
                            self.flush_answered().await?;
                        }
                        return Ok(());
                    }
                }
                self.hold_answered_slot(slot);
                if self.answered.len() >= WRITE_BATCH_BYTES {
                    self.flush_answered().await?;
                }
                return Ok(());
            }
        }
        let deadline = req
            .header
            .timeout
            .filter(|t| *t > 0)
            .map(|t| received + Duration::from_millis(u64::from(t)));
        let call = HCall {
            hbase: self.shared.service.clone(),
            ctx: self.ctx.clone(),
            call_id,
            service: self.service_name.clone(),
            method,
            param: req.param,
            cellblock: req.cellblock,
            received,
            deadline,
            metrics: self.shared.metrics.clone(),
            tx: self.io.tx.clone(),
            slot,
            charge,
        };
        match self.shared.queue.try_push(call) {
            Ok(()) => Ok(()),
            Err(Refused::Full(call)) => {
                self.shared.metrics.record_overload(Overload::CallQueue);
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
}
