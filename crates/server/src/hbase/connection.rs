//! One HBase connection: the preamble, the connection header, then request frames in and
//! response frames out, many calls in flight, answered in completion order.
//!
//! Preambles other than `HBas` + version 0 + SIMPLE auth are answered as HBase's server does
//! and the connection closes: the 2.6 client's registry preamble gets the cluster id, the
//! security preamble `SecurityNotEnabledException`, anything else a fatal exception naming
//! what arrived. Bytes: `docs/hbase-protocol.md`.

use super::exceptions::{self as ex, HbaseError};
use super::{CallCtx, HReply, HbaseService, Inline};
use crate::metrics::RpcMetrics;
use crate::rpc::connection::{read_more, Read, READ_CHUNK};
use crate::rpc::queue::{CallQueue, Refused};
use bytes::{Buf, Bytes, BytesMut};
use cellar_proto::hbase;
use cellar_proto::hbase_wire::{self, Preamble};
use prost::Message;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

/// Calls of one connection queued, running or waiting to be written at once; past it the
/// reader stops reading until answers drain.
const MAX_IN_FLIGHT_PER_CONNECTION: usize = 1024;
/// A connection that has not sent its preamble and header by then is closed.
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest connection header accepted.
const MAX_CONNECTION_HEADER: u32 = 64 * 1024;
const WRITE_BATCH_BYTES: usize = 64 * 1024;
/// Puts applied on the reactor that may wait for their WAL write before they are finished.
const MAX_DEFERRED_WRITES: usize = 64;
/// The call id HBase uses for answers that belong to no call (preamble answers).
const NO_CALL: u32 = u32::MAX;

/// Cell block codecs whose layout Cellar reads and writes (KeyValue, no tags).
const KEYVALUE_CODEC: &str = "org.apache.hadoop.hbase.codec.KeyValueCodec";

/// What every connection shares.
pub(crate) struct Shared {
    pub service: Arc<HbaseService>,
    pub queue: Arc<CallQueue<HCall>>,
    pub metrics: Arc<RpcMetrics>,
    pub max_request_bytes: u32,
    /// Whether any call may be served on the reactor (`rpc.inline_gets` or `inline_puts`).
    pub inline: bool,
}

/// A frame for the writer, holding its call's in-flight slot until written.
struct Outgoing {
    frame: Bytes,
    _slot: Option<OwnedSemaphorePermit>,
}

/// A call waiting for a handler thread.
pub(crate) struct HCall {
    pub ctx: CallCtx,
    pub call_id: u32,
    pub service: Arc<str>,
    pub method: String,
    pub param: Bytes,
    pub cellblock: Bytes,
    pub received: Instant,
    pub deadline: Option<Instant>,
    pub metrics: Arc<RpcMetrics>,
    tx: mpsc::UnboundedSender<Outgoing>,
    slot: OwnedSemaphorePermit,
}

impl HCall {
    /// Encodes the outcome and queues it for the connection's writer.
    pub fn answer(self, outcome: Result<HReply, HbaseError>) {
        self.metrics
            .record_other_call(self.received.elapsed(), outcome.is_err());
        let frame = response_frame(self.call_id, outcome);
        let _ = self.tx.send(Outgoing {
            frame,
            _slot: Some(self.slot),
        });
    }
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

/// Why a connection's reader stopped.
#[derive(Debug)]
enum End {
    Eof,
    Shutdown,
    Io(std::io::Error),
    /// A fatal answer was sent; the connection closes after a linger.
    Fatal(String),
    /// The exchange is complete (the registry preamble) and the connection closes.
    Done,
    WriterGone,
}

/// Serves one accepted connection to its end.
pub(crate) async fn serve(
    stream: TcpStream,
    conn_id: u64,
    peer: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
) {
    shared.metrics.connection_opened();
    let (rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_loop(wr, rx, shared.metrics.clone()));
    let mut reader = Reader {
        ctx: CallCtx {
            conn_id,
            cell_blocks: false,
        },
        service_name: Arc::from(""),
        shared: shared.clone(),
        rd,
        buf: BytesMut::with_capacity(READ_CHUNK),
        tx,
        slots: Arc::new(Semaphore::new(MAX_IN_FLIGHT_PER_CONNECTION)),
        shutdown,
        answered: BytesMut::new(),
        answered_slots: None,
        deferred: Vec::new(),
    };
    let end = reader.run().await;
    let _ = reader.flush_answered().await;
    let Reader { rd, tx, .. } = reader;
    drop(tx);
    let _ = writer.await;
    match &end {
        End::Fatal(why) => {
            tracing::info!(conn = conn_id, %peer, reason = %why, "closing HBase connection");
            crate::rpc::connection::linger(rd).await;
        }
        End::Io(e) => tracing::debug!(conn = conn_id, %peer, error = %e, "HBase connection failed"),
        _ => tracing::debug!(conn = conn_id, %peer, end = ?end, "HBase connection closed"),
    }
    let service = shared.service.clone();
    let _ = tokio::task::spawn_blocking(move || service.connection_closed(conn_id)).await;
    shared.metrics.connection_closed();
}

struct Reader {
    ctx: CallCtx,
    /// The service the connection header named: every call on the connection is for it.
    service_name: Arc<str>,
    shared: Arc<Shared>,
    rd: OwnedReadHalf,
    buf: BytesMut,
    tx: mpsc::UnboundedSender<Outgoing>,
    slots: Arc<Semaphore>,
    shutdown: watch::Receiver<bool>,
    /// Frames answered on the reactor since the last read, handed to the writer in one piece
    /// before the reader waits for more bytes: requests that arrived together are answered
    /// with one socket write.
    answered: BytesMut,
    answered_slots: Option<OwnedSemaphorePermit>,
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

impl Reader {
    async fn run(&mut self) -> End {
        match tokio::time::timeout(HELLO_TIMEOUT, self.hello()).await {
            Ok(Ok(())) => {}
            Ok(Err(end)) => return end,
            Err(_) => return End::Fatal("no preamble and connection header in time".into()),
        }
        loop {
            if let Err(end) = self.next_call().await {
                return end;
            }
        }
    }

    async fn fill(&mut self) -> Result<(), End> {
        self.flush_answered().await?;
        match read_more(
            &mut self.rd,
            &mut self.buf,
            &mut self.shutdown,
            &self.shared.metrics,
        )
        .await
        {
            Read::Data => Ok(()),
            Read::Eof => Err(End::Eof),
            Read::Shutdown => Err(End::Shutdown),
            Read::Io(e) => Err(End::Io(e)),
        }
    }

    async fn need(&mut self, n: usize) -> Result<(), End> {
        while self.buf.len() < n {
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
                .record_other_call(d.received.elapsed(), outcome.is_err());
            append_response(&mut self.answered, d.call_id, outcome);
            self.hold_answered_slot(d.slot);
        }
        self.hand_answered()
    }

    /// Hands the frames already answered to the writer.
    fn hand_answered(&mut self) -> Result<(), End> {
        if self.answered.is_empty() {
            return Ok(());
        }
        let frame = self.answered.split().freeze();
        self.tx
            .send(Outgoing {
                frame,
                _slot: self.answered_slots.take(),
            })
            .map_err(|_| End::WriterGone)
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
        self.tx
            .send(Outgoing { frame, _slot: None })
            .map_err(|_| End::WriterGone)
    }

    fn fatal(&mut self, class: &str, message: String) -> End {
        let _ = self.send(exception_frame(NO_CALL, class, &message));
        End::Fatal(message)
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
        p.copy_from_slice(&self.buf[..6]);
        self.buf.advance(6);
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
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        if len > MAX_CONNECTION_HEADER {
            return Err(self.fatal(
                ex::FATAL_CONNECTION,
                format!("connection header of {len} bytes is larger than {MAX_CONNECTION_HEADER}"),
            ));
        }
        self.need(4 + len as usize).await?;
        self.buf.advance(4);
        let body = self.buf.split_to(len as usize).freeze();
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
        Ok(())
    }

    /// Reads one request frame and answers it inline or queues it.
    async fn next_call(&mut self) -> Result<(), End> {
        self.need(4).await?;
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        if len > self.shared.max_request_bytes {
            // HBase answers RequestTooBigException and closes: the rest of the frame is
            // never read, so the stream cannot be resynchronised cheaply anyway.
            return Err(self.fatal(
                ex::REQUEST_TOO_BIG,
                format!(
                    "request of {len} bytes is larger than the limit of {} bytes (rpc.max_request_bytes)",
                    self.shared.max_request_bytes
                ),
            ));
        }
        self.need(4 + len as usize).await?;
        self.buf.advance(4);
        let body = self.buf.split_to(len as usize).freeze();
        let received = Instant::now();
        let mut req = match hbase_wire::decode_request(body) {
            Ok(r) => r,
            Err(e) => return Err(self.fatal(ex::FATAL_CONNECTION, e.to_string())),
        };
        let call_id = req.header.call_id.unwrap_or(0);
        let method = req.header.method_name.take().unwrap_or_default();
        let slot = match self.slots.clone().try_acquire_owned() {
            Ok(s) => s,
            Err(_) => {
                // Slots come back as answers are written, and some may be in `answered`.
                self.flush_answered().await?;
                tokio::select! {
                    biased;
                    _ = crate::rpc::stopped(&mut self.shutdown) => return Err(End::Shutdown),
                    s = self.slots.clone().acquire_owned() => s.map_err(|_| End::Shutdown)?,
                }
            }
        };
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
                        self.shared
                            .metrics
                            .record_other_call(received.elapsed(), outcome.is_err());
                        append_response(&mut self.answered, call_id, outcome);
                    }
                    Inline::AfterWal(write, reply) => {
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
            ctx: self.ctx,
            call_id,
            service: self.service_name.clone(),
            method,
            param: req.param,
            cellblock: req.cellblock,
            received,
            deadline,
            metrics: self.shared.metrics.clone(),
            tx: self.tx.clone(),
            slot,
        };
        match self.shared.queue.try_push(call) {
            Ok(()) => Ok(()),
            Err(Refused::Full(call)) => {
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

/// Writes frames as they come, batching those already queued into one write.
async fn write_loop(
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
    metrics: Arc<RpcMetrics>,
) -> std::io::Result<()> {
    let mut batch = BytesMut::with_capacity(WRITE_BATCH_BYTES);
    while let Some(first) = rx.recv().await {
        let Ok(second) = rx.try_recv() else {
            // A lone frame (the reactor's answers to one read come as one): write it as is.
            wr.write_all(&first.frame).await?;
            metrics.add_bytes_out(first.frame.len());
            continue;
        };
        batch.extend_from_slice(&first.frame);
        batch.extend_from_slice(&second.frame);
        drop((first, second));
        while batch.len() < WRITE_BATCH_BYTES {
            match rx.try_recv() {
                Ok(next) => batch.extend_from_slice(&next.frame),
                Err(_) => break,
            }
        }
        wr.write_all(&batch).await?;
        metrics.add_bytes_out(batch.len());
        batch.clear();
    }
    wr.shutdown().await
}
