//! One native connection: a reader task that checks the preamble and cuts frames out of the
//! socket, and a writer task that sends responses in whatever order calls finish, batching
//! the ones already queued into one write.
//!
//! The reader answers PING and every refusal itself (on the reactor, without touching disk)
//! and hands other calls to the handler queue. Each call holds one of the connection's
//! in-flight slots until its response is written, so a client that stops reading stops the
//! reader instead of growing the server's memory.

use super::pool::{outcome_frame, Call};
use super::queue::{CallQueue, Refused};
use super::respond::{error_frame, reply_frame, rpc_error, timed_reply_frame, Outgoing, Responder};
use super::{CallContext, Handler, Inline, Reply};
use crate::metrics::RpcMetrics;
use bytes::{Buf, Bytes, BytesMut};
use cellar_proto::frame::{check_preamble, decode_request, peek_request_header, PREAMBLE};
use cellar_proto::pb;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Semaphore};

/// Calls of one connection that may be queued, running or waiting to be written at once.
pub const MAX_IN_FLIGHT_PER_CONNECTION: usize = 1024;
/// A connection that has not sent its preamble by then is closed.
const PREAMBLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes of an oversized frame read to find its call id; the rest is skipped unread.
const PEEK_BYTES: usize = 1024;
/// Read buffer growth step.
pub(crate) const READ_CHUNK: usize = 64 * 1024;
/// The writer flushes once a batch reaches this size.
const WRITE_BATCH_BYTES: usize = 64 * 1024;
/// After a protocol error, input still arriving is read and dropped for this long so the
/// error frame reaches the client before the close (closing on unread input resets the
/// connection, and the reset can discard the frame).
const LINGER: Duration = Duration::from_millis(500);

/// What every connection of a server shares.
pub(crate) struct Shared {
    pub handler: Arc<dyn Handler>,
    pub queue: Arc<CallQueue<Call>>,
    pub metrics: Arc<RpcMetrics>,
    pub max_request_bytes: u32,
}

/// Why a connection's reader stopped.
#[derive(Debug)]
enum End {
    /// The client closed (possibly mid-frame).
    Eof,
    /// The server is shutting down.
    Shutdown,
    Io(std::io::Error),
    /// The client broke the protocol; it was told why, then the connection closes.
    Protocol(String),
    /// The writer stopped (the socket failed).
    WriterGone,
}

/// Serves one accepted connection to its end, then tells the handler it is gone.
pub(crate) async fn serve(
    stream: TcpStream,
    conn_id: u64,
    peer: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
) {
    shared.metrics.connection_opened();
    tracing::debug!(conn = conn_id, %peer, "connection opened");
    let (rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_loop(wr, rx, shared.metrics.clone()));
    let mut reader = Reader {
        conn_id,
        shared: shared.clone(),
        rd,
        buf: BytesMut::with_capacity(READ_CHUNK),
        tx,
        slots: Arc::new(Semaphore::new(MAX_IN_FLIGHT_PER_CONNECTION)),
        shutdown,
        discard: 0,
    };
    let end = reader.run().await;
    let Reader { rd, tx, .. } = reader;
    // The writer ends once the reader and every in-flight call have let go of their senders,
    // so after this no call of this connection is still running.
    drop(tx);
    let written = writer.await;
    match &end {
        End::Protocol(why) => {
            tracing::info!(conn = conn_id, %peer, reason = %why, "closing connection after a protocol error");
            linger(rd).await;
        }
        End::Io(e) => tracing::debug!(conn = conn_id, %peer, error = %e, "connection failed"),
        _ => tracing::debug!(conn = conn_id, %peer, end = ?end, "connection closed"),
    }
    if let Ok(Err(e)) = written {
        tracing::debug!(conn = conn_id, %peer, error = %e, "write failed");
    }
    let handler = shared.handler.clone();
    if tokio::task::spawn_blocking(move || handler.connection_closed(conn_id))
        .await
        .is_err()
    {
        tracing::error!(conn = conn_id, "connection_closed panicked");
    }
    shared.metrics.connection_closed();
}

/// Reads and drops input for a moment after an error frame (see [`LINGER`]); the HBase
/// front end uses it too.
pub(crate) async fn linger(mut rd: OwnedReadHalf) {
    let mut scratch = vec![0u8; 8192];
    let _ = tokio::time::timeout(LINGER, async {
        let mut total = 0usize;
        while total < 1 << 20 {
            match rd.read(&mut scratch).await {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    })
    .await;
}

/// What one read from a connection brought.
pub(crate) enum Read {
    Data,
    Eof,
    Shutdown,
    Io(std::io::Error),
}

/// Reads what the socket has into `buf` (growing it by [`READ_CHUNK`] when nearly full),
/// unless the server is told to stop first; counts the bytes. Both front ends read so.
pub(crate) async fn read_more(
    rd: &mut OwnedReadHalf,
    buf: &mut BytesMut,
    shutdown: &mut watch::Receiver<bool>,
    metrics: &RpcMetrics,
) -> Read {
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(READ_CHUNK);
    }
    let read = tokio::select! {
        biased;
        _ = super::stopped(shutdown) => return Read::Shutdown,
        r = rd.read_buf(buf) => r,
    };
    match read {
        Ok(0) => Read::Eof,
        Ok(n) => {
            metrics.add_bytes_in(n);
            Read::Data
        }
        Err(e) => Read::Io(e),
    }
}

struct Reader {
    conn_id: u64,
    shared: Arc<Shared>,
    rd: OwnedReadHalf,
    buf: BytesMut,
    tx: mpsc::UnboundedSender<Outgoing>,
    slots: Arc<Semaphore>,
    shutdown: watch::Receiver<bool>,
    /// Bytes of an oversized frame still to be skipped.
    discard: u64,
}

impl Reader {
    async fn run(&mut self) -> End {
        match tokio::time::timeout(PREAMBLE_TIMEOUT, self.preamble()).await {
            Ok(Ok(())) => {}
            Ok(Err(end)) => return end,
            Err(_) => return End::Protocol("no preamble within the timeout".into()),
        }
        loop {
            if let Err(end) = self.next_frame().await {
                return end;
            }
        }
    }

    /// Reads more input into the buffer.
    async fn fill(&mut self) -> Result<(), End> {
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

    async fn preamble(&mut self) -> Result<(), End> {
        while self.buf.len() < PREAMBLE.len() {
            self.fill().await?;
        }
        let mut p = [0u8; 8];
        p.copy_from_slice(&self.buf[..8]);
        self.buf.advance(8);
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
        self.tx
            .send(Outgoing {
                head,
                tail: Bytes::new(),
                _slot: None,
            })
            .map_err(|_| End::WriterGone)
    }

    /// Takes one in-flight slot for the call about to be answered.
    async fn responder(&self) -> Result<Responder, End> {
        let permit = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| End::Shutdown)?;
        Ok(Responder {
            tx: self.tx.clone(),
            permit,
        })
    }

    /// Answers a call with an error from the reader itself.
    async fn refuse(
        &self,
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
        let responder = self.responder().await?;
        if responder.send(error_frame(call_id, error)) {
            Ok(())
        } else {
            Err(End::WriterGone)
        }
    }

    /// Consumes one frame (or part of an oversized one being skipped), reading as needed.
    async fn next_frame(&mut self) -> Result<(), End> {
        if self.discard > 0 {
            let n = self.discard.min(self.buf.len() as u64);
            self.buf.advance(n as usize);
            self.discard -= n;
            if self.discard > 0 {
                // The buffer is empty now: skipped input is read and dropped, never kept.
                return self.fill().await;
            }
        }
        if self.buf.len() < 4 {
            return self.fill().await;
        }
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        let max = self.shared.max_request_bytes;
        let len_us = len as usize;
        if len > max {
            let want = len_us.min(PEEK_BYTES);
            if self.buf.len() < 4 + want {
                return self.fill().await;
            }
            let received = Instant::now();
            let Some(header) = peek_request_header(&self.buf[4..4 + want]) else {
                return self
                    .malformed(
                        0,
                        "oversized frame without a readable request header".into(),
                    )
                    .await;
            };
            self.buf.advance(4);
            self.discard = u64::from(len);
            let method = pb::Method::try_from(header.method).ok();
            let what = method.map(|m| m.as_str_name()).unwrap_or("request");
            return self
                .refuse(
                    header.call_id,
                    method,
                    received,
                    rpc_error(
                        pb::ErrorCode::RequestTooLarge,
                        format!(
                            "{what} of {len} bytes exceeds the server's limit of {max} bytes (rpc.max_request_bytes)"
                        ),
                    ),
                )
                .await;
        }
        if self.buf.len() < 4 + len_us {
            self.buf.reserve(4 + len_us - self.buf.len());
            return self.fill().await;
        }
        self.buf.advance(4);
        let body = self.buf.split_to(len_us).freeze();
        self.dispatch(body).await
    }

    /// Tells the client its frame was malformed; the connection then closes.
    async fn malformed(&self, call_id: u64, why: String) -> Result<(), End> {
        self.refuse(
            call_id,
            None,
            Instant::now(),
            rpc_error(pb::ErrorCode::MalformedRequest, why.clone()),
        )
        .await?;
        Err(End::Protocol(why))
    }

    async fn dispatch(&self, body: Bytes) -> Result<(), End> {
        let received = Instant::now();
        let (header, parts) = match decode_request(body.clone()) {
            Ok(d) => d,
            Err(e) => {
                let call_id = peek_request_header(&body).map(|h| h.call_id).unwrap_or(0);
                return self.malformed(call_id, e.to_string()).await;
            }
        };
        let method = match pb::Method::try_from(header.method) {
            Ok(pb::Method::Unspecified) | Err(_) => {
                return self
                    .refuse(
                        header.call_id,
                        None,
                        received,
                        rpc_error(
                            pb::ErrorCode::UnknownMethod,
                            format!("unknown method number {}", header.method),
                        ),
                    )
                    .await;
            }
            Ok(m) => m,
        };
        let respond = self.responder().await?;
        if method == pb::Method::Ping {
            // Answered here: no disk, no queue hop. It is the floor of a call's cost.
            self.shared.metrics.record_call(method, received.elapsed());
            return if respond.send(reply_frame(header.call_id, Reply::default())) {
                Ok(())
            } else {
                Err(End::WriterGone)
            };
        }
        let ctx = CallContext {
            conn_id: self.conn_id,
        };
        // Read from the clock only for calls that asked for their stage times.
        let inline_started = header.want_timing.then(Instant::now);
        let inline = catch_unwind(AssertUnwindSafe(|| {
            self.shared
                .handler
                .call_inline(&ctx, method, &parts.param, &parts.cellblock)
        }));
        let inline = match inline {
            Ok(None) => None,
            Ok(Some(Inline::Done(result))) => Some(Ok(result)),
            Ok(Some(Inline::Await(rest))) => {
                let rest = std::panic::AssertUnwindSafe(rest);
                Some(futures_catch_unwind(rest).await)
            }
            Err(panic) => Some(Err(panic)),
        };
        if let Some(outcome) = inline {
            let frame = match (outcome, inline_started) {
                // Answered on the reactor: the queue wait is the request's decoding alone.
                (Ok(Ok(reply)), Some(started)) => timed_reply_frame(
                    header.call_id,
                    reply,
                    started.saturating_duration_since(received),
                    started.elapsed(),
                ),
                (outcome, _) => {
                    outcome_frame(&self.shared.metrics, &ctx, header.call_id, method, outcome)
                }
            };
            self.shared.metrics.record_call(method, received.elapsed());
            return if respond.send(frame) {
                Ok(())
            } else {
                Err(End::WriterGone)
            };
        }
        let call = Call {
            ctx,
            call_id: header.call_id,
            method,
            param: parts.param,
            cellblock: parts.cellblock,
            received,
            deadline: (header.timeout_ms > 0)
                .then(|| received + Duration::from_millis(u64::from(header.timeout_ms))),
            want_timing: header.want_timing,
            respond,
        };
        let (call, error) = match self.shared.queue.try_push(call) {
            Ok(()) => return Ok(()),
            Err(Refused::Full(call)) => (
                call,
                rpc_error(
                    pb::ErrorCode::ServerBusy,
                    "the server's call queue is full (rpc.max_queued_calls); retry after a backoff",
                ),
            ),
            Err(Refused::Closed(call)) => (
                call,
                rpc_error(pb::ErrorCode::ServerStopping, "the server is shutting down"),
            ),
        };
        let code = pb::ErrorCode::try_from(error.code).unwrap_or(pb::ErrorCode::Internal);
        self.shared.metrics.record_error(code);
        self.shared.metrics.record_call(method, received.elapsed());
        if call.respond.send(error_frame(call.call_id, error)) {
            Ok(())
        } else {
            Err(End::WriterGone)
        }
    }
}

/// Awaits `f`, turning a panic into an error as `catch_unwind` does for a synchronous call.
async fn futures_catch_unwind<F: std::future::Future>(
    f: std::panic::AssertUnwindSafe<F>,
) -> std::thread::Result<F::Output> {
    let mut f = std::pin::pin!(f.0);
    std::future::poll_fn(
        |cx| match catch_unwind(AssertUnwindSafe(|| f.as_mut().poll(cx))) {
            Ok(std::task::Poll::Ready(v)) => std::task::Poll::Ready(Ok(v)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(panic) => std::task::Poll::Ready(Err(panic)),
        },
    )
    .await
}

/// Writes responses as they come, several per write when several are waiting.
async fn write_loop(
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
    metrics: Arc<RpcMetrics>,
) -> std::io::Result<()> {
    let mut batch = BytesMut::with_capacity(WRITE_BATCH_BYTES);
    // Frames of the current batch: their in-flight slots are freed once it is written.
    let mut written: Vec<Outgoing> = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(out) = next {
            metrics.add_bytes_out(out.len());
            batch.extend_from_slice(&out.head);
            if out.tail.len() >= super::respond::ZERO_COPY_FROM {
                flush(&mut wr, &mut batch).await?;
                wr.write_all(&out.tail).await?;
            } else {
                batch.extend_from_slice(&out.tail);
            }
            written.push(out);
            if batch.len() >= WRITE_BATCH_BYTES {
                break;
            }
            next = rx.try_recv().ok();
        }
        flush(&mut wr, &mut batch).await?;
        written.clear();
    }
    wr.shutdown().await
}

async fn flush(wr: &mut OwnedWriteHalf, batch: &mut BytesMut) -> std::io::Result<()> {
    if !batch.is_empty() {
        wr.write_all(batch).await?;
        batch.clear();
    }
    Ok(())
}
