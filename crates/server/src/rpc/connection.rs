//! One native connection: a reader task that checks the preamble and cuts frames out of the
//! socket, and a writer task that sends responses in whatever order calls finish, several
//! already waiting in one write.
//!
//! The reader answers PING and every refusal itself (on the reactor, without touching disk)
//! and hands other calls to the handler queue. What a slow, silent or greedy client can make
//! the server hold is bounded (`docs/native-protocol.md`, "Limits"):
//!
//! - in-flight bytes ([`super::budget`]): bytes read and not yet consumed, requests not yet
//!   answered and answers not yet written. Past the connection's own bound the reader stops
//!   reading until answers drain; past the front end's bound new calls are refused as
//!   SERVER_BUSY. A frame's body is buffered as it arrives, never reserved ahead from its
//!   length prefix;
//! - calls: each holds one of [`MAX_IN_FLIGHT_PER_CONNECTION`] slots until its answer is
//!   written;
//! - time: the preamble within `rpc.handshake_timeout_ms`, each frame's body within
//!   `rpc.frame_timeout_ms` of its first byte, and each write making progress within
//!   `rpc.write_timeout_ms`; else the connection closes;
//! - idle memory: a connection waiting for input holds no read buffer, and its writer keeps
//!   no batch buffer (frames are written as they are, several per `writev`).
//!
//! Handler threads never wait on a connection: they queue answers to the writer and move on.

use super::budget::{Charge, ConnBudget, ServerBudget};
use super::queue::CallQueue;
use super::respond::{error_frame, reply_frame, rpc_error, Outgoing, Responder, Sink};
use super::route::{self, busy_in_flight};
use super::ucx::{Attached, UcxFront};
use super::{Handler, Reply};
use crate::metrics::{Overload, RpcMetrics};
use bytes::{Buf, Bytes, BytesMut};
use cellar_proto::frame::{check_preamble, decode_param, peek_request_header, PREAMBLE};
use cellar_proto::pb;
use prost::Message;
use std::future::Future;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Semaphore};

/// Calls of one connection that may be queued, running or waiting to be written at once.
pub const MAX_IN_FLIGHT_PER_CONNECTION: usize = 1024;
/// Bytes of a frame read to find its call id when it is refused unread; the rest is skipped.
pub(crate) const PEEK_BYTES: usize = 1024;
/// Read buffer growth step once a frame is known to need more than one small read.
pub(crate) const READ_CHUNK: usize = 64 * 1024;
/// The buffer a connection takes when input arrives after it was idle: most requests fit
/// (a Get or a small Put is well under 1 KiB); a frame that needs more grows it by
/// [`READ_CHUNK`].
const FIRST_READ: usize = 4 * 1024;
/// A read is attempted only with at least this much room.
const MIN_READ: usize = 1024;
/// A batch written with one `writev` holds at most this many frames...
const WRITE_BATCH_FRAMES: usize = 64;
/// ...and at most about this many bytes.
const WRITE_BATCH_BYTES: usize = 64 * 1024;
/// Buffers handed to one `writev`.
const MAX_IOV: usize = 2 * WRITE_BATCH_FRAMES;
/// Answers from this size on may be refused as busy when the connection or the server is past
/// its in-flight bound (smaller ones cost no more than the refusal).
pub(crate) const REFUSABLE_ANSWER_BYTES: usize = 1024;
/// Puts applied on the reactor that may wait for their WAL write before they are finished.
const MAX_DEFERRED_WRITES: usize = 64;
/// After a protocol error, input still arriving is read and dropped for this long so the
/// error frame reaches the client before the close (closing on unread input resets the
/// connection, and the reset can discard the frame).
const LINGER: Duration = Duration::from_millis(500);

/// The bounds every connection of a front end keeps (from `[rpc]`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_request_bytes: u32,
    pub connection_bytes: u64,
    pub handshake_timeout: Duration,
    pub frame_timeout: Duration,
    pub write_timeout: Duration,
    /// Offer UCX to clients that ask (`rpc.ucx`).
    pub offer_ucx: bool,
}

impl Limits {
    pub fn from_config(c: &crate::config::RpcConfig) -> Limits {
        Limits {
            max_request_bytes: c.max_request_bytes,
            connection_bytes: c.max_connection_in_flight_bytes,
            handshake_timeout: Duration::from_millis(c.handshake_timeout_ms),
            frame_timeout: Duration::from_millis(c.frame_timeout_ms),
            write_timeout: Duration::from_millis(c.write_timeout_ms),
            offer_ucx: c.ucx,
        }
    }
}

/// What every connection of a server shares.
pub(crate) struct Shared {
    pub handler: Arc<dyn Handler>,
    pub queue: Arc<CallQueue>,
    pub metrics: Arc<RpcMetrics>,
    pub budget: Arc<ServerBudget>,
    pub limits: Limits,
    /// The UCX worker, started by the first client that asks for it (or why it cannot be).
    pub ucx: OnceLock<Result<Arc<UcxFront>, String>>,
}

impl Shared {
    /// The server's UCX worker, started on first use.
    pub fn ucx(self: &Arc<Self>) -> Result<Arc<UcxFront>, String> {
        if !self.limits.offer_ucx {
            return Err("this server does not offer UCX (rpc.ucx = false)".into());
        }
        self.ucx
            .get_or_init(|| {
                UcxFront::start(Arc::downgrade(self), tokio::runtime::Handle::current())
                    .map(Arc::new)
                    .inspect_err(|why| tracing::warn!(reason = %why, "cannot offer UCX"))
            })
            .clone()
    }

    /// Stops the UCX worker, if one was started (server shutdown).
    pub fn stop_ucx(&self) {
        if let Some(Ok(front)) = self.ucx.get() {
            front.stop();
        }
    }
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
    /// The client was too slow: a handshake or a frame did not arrive in time.
    TimedOut(&'static str),
    /// The writer stopped (the socket failed or a write timed out).
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
    let writer = tokio::spawn(write_loop(
        wr,
        rx,
        shared.metrics.clone(),
        shared.limits.write_timeout,
    ));
    let budget = shared.budget.connection(shared.limits.connection_bytes);
    let mut reader = Reader {
        conn_id,
        shared: shared.clone(),
        rd,
        buf: BytesMut::new(),
        buffered: budget.charge(0),
        budget,
        tx,
        slots: Arc::new(Semaphore::new(MAX_IN_FLIGHT_PER_CONNECTION)),
        shutdown,
        discard: 0,
        frame_deadline: None,
        ucx: None,
        deferred: Vec::new(),
    };
    let end = reader.run().await;
    let Reader { rd, tx, ucx, .. } = reader;
    // The UCX peer goes with its control connection.
    drop(ucx);
    // The writer ends once the reader and every in-flight call have let go of their senders,
    // so after this no call of this connection is still running.
    drop(tx);
    let written = writer.await;
    match &end {
        End::Protocol(why) => {
            tracing::info!(conn = conn_id, %peer, reason = %why, "closing connection after a protocol error");
            linger(rd).await;
        }
        End::TimedOut(what) => {
            shared.metrics.connection_timed_out();
            tracing::info!(conn = conn_id, %peer, "closing connection: {what} did not arrive in time");
        }
        End::Io(e) => tracing::debug!(conn = conn_id, %peer, error = %e, "connection failed"),
        _ => tracing::debug!(conn = conn_id, %peer, end = ?end, "connection closed"),
    }
    match written {
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::TimedOut => {
            shared.metrics.connection_timed_out();
            tracing::info!(conn = conn_id, %peer, "closing connection: the client did not read its answers in time");
        }
        Ok(Err(e)) => tracing::debug!(conn = conn_id, %peer, error = %e, "write failed"),
        _ => {}
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
    /// The deadline passed first.
    TimedOut,
    /// The connection's writer is gone.
    WriterGone,
    Io(std::io::Error),
}

/// How a [`read_more`] may end besides bringing data.
pub(crate) struct ReadWait<'a, G> {
    pub shutdown: &'a mut watch::Receiver<bool>,
    /// Resolves when the connection's writer has stopped.
    pub writer_gone: G,
    /// Give up at this instant (a frame or handshake not complete in time).
    pub deadline: Option<Instant>,
}

/// Reads what the socket has into `buf`; counts the bytes. Both front ends read so.
///
/// A connection with nothing buffered waits for input without a buffer (an idle connection
/// costs no read buffer) and takes a small one when input arrives; a buffer holding part of
/// a frame grows by [`READ_CHUNK`] (doubling as the frame keeps coming), so memory follows
/// what arrived, never what a length prefix announced.
pub(crate) async fn read_more<G: Future<Output = ()>>(
    rd: &mut OwnedReadHalf,
    buf: &mut BytesMut,
    wait: ReadWait<'_, G>,
    metrics: &RpcMetrics,
) -> Read {
    let ReadWait {
        shutdown,
        writer_gone,
        deadline,
    } = wait;
    let mut writer_gone = std::pin::pin!(writer_gone);
    // A stopping server reads no more, even from a client that never pauses.
    if *shutdown.borrow() {
        return Read::Shutdown;
    }
    loop {
        // With a buffer in hand, try first: the input may be there already.
        if buf.capacity() > 0 {
            if buf.capacity() - buf.len() < MIN_READ {
                if buf.is_empty() {
                    // The end of a buffer shared with frames still being served: start afresh.
                    *buf = BytesMut::with_capacity(FIRST_READ);
                } else {
                    buf.reserve(READ_CHUNK);
                }
            }
            // One poll of a read (not `try_read`): a short read clears the socket's
            // readiness, so the next wait costs no failed `recv`.
            let polled = {
                let mut read = std::pin::pin!(rd.read_buf(buf));
                std::future::poll_fn(|cx| {
                    std::task::Poll::Ready(match read.as_mut().poll(cx) {
                        std::task::Poll::Ready(r) => Some(r),
                        std::task::Poll::Pending => None,
                    })
                })
                .await
            };
            match polled {
                Some(Ok(0)) => return Read::Eof,
                Some(Ok(n)) => {
                    metrics.add_bytes_in(n);
                    return Read::Data;
                }
                Some(Err(e)) => return Read::Io(e),
                None => {}
            }
            if buf.is_empty() {
                // Idle: let the buffer go while waiting.
                *buf = BytesMut::new();
            }
        }
        let deadline = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = super::stopped(shutdown) => return Read::Shutdown,
            _ = &mut writer_gone => return Read::WriterGone,
            _ = deadline => return Read::TimedOut,
            ready = rd.readable() => {
                if let Err(e) = ready {
                    return Read::Io(e);
                }
            }
        }
        if buf.capacity() == 0 {
            *buf = BytesMut::with_capacity(FIRST_READ);
        }
    }
}

struct Reader {
    conn_id: u64,
    shared: Arc<Shared>,
    rd: OwnedReadHalf,
    buf: BytesMut,
    /// The bytes in `buf`, counted as in flight.
    buffered: Charge,
    budget: Arc<ConnBudget>,
    tx: mpsc::UnboundedSender<Outgoing>,
    slots: Arc<Semaphore>,
    shutdown: watch::Receiver<bool>,
    /// Bytes of a refused frame still to be skipped.
    discard: u64,
    /// When the frame being read must be complete; set by its first byte.
    frame_deadline: Option<Instant>,
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
        self.wait_for_room().await?;
        let deadline = if self.buf.is_empty() && self.discard == 0 {
            None
        } else {
            Some(
                *self
                    .frame_deadline
                    .get_or_insert_with(|| Instant::now() + self.shared.limits.frame_timeout),
            )
        };
        let wait = ReadWait {
            shutdown: &mut self.shutdown,
            writer_gone: self.tx.closed(),
            deadline,
        };
        let read = read_more(&mut self.rd, &mut self.buf, wait, &self.shared.metrics).await;
        self.buffered.set(self.buf.len() as u64);
        match read {
            Read::Data => Ok(()),
            Read::Eof => Err(End::Eof),
            Read::Shutdown => Err(End::Shutdown),
            Read::TimedOut => Err(End::TimedOut("a frame")),
            Read::WriterGone => Err(End::WriterGone),
            Read::Io(e) => Err(End::Io(e)),
        }
    }

    /// Waits while the connection's own requests and answers are past its bound: a client
    /// that sends faster than it reads stalls itself (TCP pushes back on it) and nobody else.
    /// Not a refusal: the calls are fine, only early; refusing them would have the client
    /// retry into the same full pipe. Time spent here does not count against the frame's
    /// deadline.
    async fn wait_for_room(&mut self) -> Result<(), End> {
        let own = self.buffered.bytes();
        if self.budget.room(own) {
            return Ok(());
        }
        self.flush_deferred().await?;
        let metrics = &self.shared.metrics;
        metrics.connection_stalled();
        let started = Instant::now();
        let waited = tokio::select! {
            biased;
            _ = super::stopped(&mut self.shutdown) => Err(End::Shutdown),
            _ = self.tx.closed() => Err(End::WriterGone),
            _ = self.budget.wait_for_room(own) => Ok(()),
        };
        metrics.connection_resumed();
        if let Some(d) = &mut self.frame_deadline {
            *d += started.elapsed();
        }
        waited
    }

    async fn preamble(&mut self) -> Result<(), End> {
        while self.buf.len() < PREAMBLE.len() {
            self.fill().await?;
        }
        let mut p = [0u8; 8];
        p.copy_from_slice(&self.buf[..8]);
        self.consume(8);
        self.frame_deadline = None;
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

    /// Drops `n` bytes from the front of the buffer.
    fn consume(&mut self, n: usize) {
        self.buf.advance(n);
        self.buffered.set(self.buf.len() as u64);
    }

    fn send_raw(&self, head: Bytes) -> Result<(), End> {
        self.tx
            .send(Outgoing {
                head,
                tail: Bytes::new(),
                _slot: None,
                _charge: None,
            })
            .map_err(|_| End::WriterGone)
    }

    /// Takes one in-flight slot for the call about to be answered; `charge` (its request's
    /// bytes) becomes its answer's.
    async fn responder(&mut self, charge: Charge) -> Result<Responder, End> {
        let permit = match self.slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                self.flush_deferred().await?;
                let metrics = &self.shared.metrics;
                metrics.connection_stalled();
                let acquired = tokio::select! {
                    biased;
                    _ = super::stopped(&mut self.shutdown) => Err(End::Shutdown),
                    p = self.slots.clone().acquire_owned() => p.map_err(|_| End::Shutdown),
                };
                metrics.connection_resumed();
                acquired?
            }
        };
        Ok(Responder {
            sink: Sink::Tcp(self.tx.clone()),
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
        let responder = self.responder(self.budget.charge(0)).await?;
        if responder.send(error_frame(call_id, error)) {
            Ok(())
        } else {
            Err(End::WriterGone)
        }
    }

    /// Consumes one frame (or part of a refused one being skipped), reading as needed.
    async fn next_frame(&mut self) -> Result<(), End> {
        if self.discard > 0 {
            let n = self.discard.min(self.buf.len() as u64);
            self.consume(n as usize);
            self.discard -= n;
            if self.discard > 0 {
                // The buffer is empty now: skipped input is read and dropped, never kept.
                return self.fill().await;
            }
            self.frame_deadline = None;
        }
        if self.buf.len() < 4 {
            return self.fill().await;
        }
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        let max = self.shared.limits.max_request_bytes;
        let len_us = len as usize;
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
        if self.buf.len() < 4 + len_us {
            if self.budget.server_full() {
                // Others hold the server's in-flight bound: refuse this call now instead of
                // buffering the rest of it.
                return self.skip_frame(len, busy_in_flight).await;
            }
            return self.fill().await;
        }
        self.wait_for_room().await?;
        self.buf.advance(4);
        let body = self.buf.split_to(len_us).freeze();
        let charge = self.buffered.split(4 + len as u64);
        self.frame_deadline = None;
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
        if self.buf.len() < 4 + want {
            return self.fill().await;
        }
        let received = Instant::now();
        let Some(header) = peek_request_header(&self.buf[4..4 + want]) else {
            return self
                .malformed(0, "frame without a readable request header".into())
                .await;
        };
        self.consume(4);
        self.discard = u64::from(len);
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
        match route::serve(&self.shared, self.conn_id, req, respond) {
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
            self.budget.clone(),
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

/// Writes responses as they come, several per write when several are waiting.
async fn write_loop(
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
    metrics: Arc<RpcMetrics>,
    timeout: Duration,
) -> std::io::Result<()> {
    // Frames of the current batch: their in-flight slots and bytes are let go once written.
    // Emptied (capacity and all) before the writer waits, so an idle writer holds nothing.
    let mut batch: Vec<Outgoing> = Vec::new();
    let mut bufs: Vec<Bytes> = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut bytes = first.len();
        batch.push(first);
        while batch.len() < WRITE_BATCH_FRAMES && bytes < WRITE_BATCH_BYTES {
            match rx.try_recv() {
                Ok(next) => {
                    bytes += next.len();
                    batch.push(next);
                }
                Err(_) => break,
            }
        }
        for out in &mut batch {
            bufs.push(std::mem::take(&mut out.head));
            bufs.push(std::mem::take(&mut out.tail));
        }
        write_all_timed(&mut wr, &mut bufs, timeout).await?;
        metrics.add_bytes_out(bytes);
        batch.clear();
        if rx.is_empty() {
            // Going idle: keep no more than a few answers need.
            batch.shrink_to(4);
            bufs.shrink_to(8);
        }
    }
    wr.shutdown().await
}

/// Writes every buffer of `bufs` in order (`writev`, many at once), emptying `bufs`. A write
/// that makes no progress for `timeout` fails with `TimedOut`: the client stopped reading.
/// The HBase front end writes through it too.
pub(crate) async fn write_all_timed(
    wr: &mut OwnedWriteHalf,
    bufs: &mut Vec<Bytes>,
    timeout: Duration,
) -> std::io::Result<()> {
    bufs.retain(|b| !b.is_empty());
    let mut first = 0;
    while first < bufs.len() {
        // The buffers' slices are gathered inside the poll, so they never live in this
        // future (which every connection's writer holds while idle).
        let write = std::future::poll_fn(|cx| {
            let mut slices = [IoSlice::new(&[]); MAX_IOV];
            let mut n = 0;
            for (slice, b) in slices.iter_mut().zip(&bufs[first..]) {
                *slice = IoSlice::new(b);
                n += 1;
            }
            tokio::io::AsyncWrite::poll_write_vectored(
                std::pin::Pin::new(&mut *wr),
                cx,
                &slices[..n],
            )
        });
        let written = match tokio::time::timeout(timeout, write).await {
            Ok(Ok(0)) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(Ok(n)) => n,
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no answer could be written for the write timeout",
                ))
            }
        };
        let mut left = written;
        while left > 0 {
            let Some(b) = bufs.get_mut(first) else { break };
            let n = left.min(b.len());
            b.advance(n);
            left -= n;
            if b.is_empty() {
                first += 1;
            }
        }
    }
    bufs.clear();
    Ok(())
}
