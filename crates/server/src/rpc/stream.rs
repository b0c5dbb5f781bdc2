//! One TCP connection of either front end as its protocol sees it: bytes in, frames out. The
//! native protocol (`connection.rs`) and HBase's (`crate::hbase::connection`) differ in their
//! preambles and their calls; how a connection reads, writes, waits and ends is this one
//! module, so what a connection's transport learns (TLS, say) it learns once for both.
//!
//! What a slow, silent or greedy client can make the server hold is bounded here
//! (`docs/native-protocol.md`, "Limits"):
//!
//! - in-flight bytes ([`super::budget`]): bytes read and not yet consumed, requests not yet
//!   answered and answers not yet written. Past the connection's own bound the reader stops
//!   reading until answers drain ([`Inbound::wait_for_room`]); past the front end's bound the
//!   protocols refuse new calls as busy. A frame's body is buffered as it arrives, never
//!   reserved ahead from its length prefix;
//! - calls: each holds one of [`MAX_IN_FLIGHT_PER_CONNECTION`] slots until its answer is
//!   written;
//! - time: the handshake within `rpc.handshake_timeout_ms` (the protocol's), each frame's body
//!   within `rpc.frame_timeout_ms` of its first byte, and each write making progress within
//!   `rpc.write_timeout_ms`; else the connection closes;
//! - idle memory: a connection waiting for input holds no read buffer, and its writer keeps
//!   no batch buffer (frames are written as they are, several per `writev`).
//!
//! Handler threads never wait on a connection: they queue answers to the writer and move on.

use super::budget::{Charge, ConnBudget, ServerBudget};
use super::limits::{Limits, MAX_IN_FLIGHT_PER_CONNECTION};
use super::transport::Outgoing;
use crate::metrics::RpcMetrics;
use bytes::{Buf, Bytes, BytesMut};
use std::future::Future;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

/// Read buffer growth step once a frame is known to need more than one small read.
const READ_CHUNK: usize = 64 * 1024;
/// The buffer a connection takes when input arrives after it was idle: most requests fit
/// (a Get or a small Put is well under 1 KiB); a frame that needs more grows it by
/// [`READ_CHUNK`].
const FIRST_READ: usize = 4 * 1024;
/// A read is attempted only with at least this much room.
const MIN_READ: usize = 1024;
/// A batch written with one `writev` holds at most this many frames...
const WRITE_BATCH_FRAMES: usize = 64;
/// ...and at most about this many bytes.
pub(crate) const WRITE_BATCH_BYTES: usize = 64 * 1024;
/// Buffers handed to one `writev`.
const MAX_IOV: usize = 2 * WRITE_BATCH_FRAMES;
/// After a protocol error, input still arriving is read and dropped for this long so the
/// error frame reaches the client before the close (closing on unread input resets the
/// connection, and the reset can discard the frame).
const LINGER: Duration = Duration::from_millis(500);

/// An accepted connection's socket: TCP, or a TLS session over it (`crate::security::tls`).
pub(crate) enum Socket {
    Tcp(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

/// What a connection's transport told about it before its protocol began.
#[derive(Debug, Clone, Default)]
pub(crate) struct Origin {
    /// The connection is TLS.
    pub tls: bool,
    /// The user its client certificate names, if it presented one.
    pub cert_user: Option<Arc<str>>,
    /// A plaintext client on a TLS port: its protocol answers its first bytes with an error
    /// saying the port needs TLS, then closes.
    pub plaintext_on_tls_port: bool,
}

impl Origin {
    /// Who a connection from `peer` speaking `protocol` calls as before its protocol says
    /// more: its certificate's user, if it presented one.
    pub fn caller(&self, peer: SocketAddr, protocol: &'static str) -> crate::security::Caller {
        crate::security::Caller {
            user: self.cert_user.clone(),
            real_user: None,
            certified: self.cert_user.is_some(),
            peer: Some(peer.ip()),
            protocol,
        }
    }
}

/// What a front end's connections share for their transport: TLS on its port, its limits,
/// counters and in-flight budget.
pub(crate) struct Port<'a> {
    pub tls: Option<&'a crate::security::TlsServer>,
    pub limits: &'a Limits,
    pub metrics: &'a Arc<RpcMetrics>,
    pub budget: &'a Arc<ServerBudget>,
}

/// A connection accepted on `port`: its TLS handshake when the port has TLS ([`begin`]), then
/// its reader and writer ([`open`]). `None` when the handshake failed (counted and logged).
pub(crate) async fn start(
    stream: TcpStream,
    peer: SocketAddr,
    port: Port<'_>,
    what: &str,
    shutdown: watch::Receiver<bool>,
) -> Option<(Inbound, Writer)> {
    let (socket, origin) = begin(stream, port.tls, port.limits, port.metrics, peer, what).await?;
    Some(open(
        socket,
        origin,
        port.metrics,
        port.budget,
        port.limits,
        shutdown,
    ))
}

/// Begins a connection of a front end: over TLS when the port has it (`tls`), else as it is.
/// `None`: the TLS handshake failed (logged and counted) and the connection is dropped.
pub(crate) async fn begin(
    stream: TcpStream,
    tls: Option<&crate::security::TlsServer>,
    limits: &Limits,
    metrics: &RpcMetrics,
    peer: SocketAddr,
    what: &str,
) -> Option<(Socket, Origin)> {
    let Some(tls) = tls else {
        return Some((Socket::Tcp(stream), Origin::default()));
    };
    use crate::security::tls::Accepted;
    match tls
        .accept(stream, limits.handshake_timeout, peer, metrics, what)
        .await
    {
        Accepted::Tls { stream, user } => Some((
            Socket::Tls(stream),
            Origin {
                tls: true,
                cert_user: user.map(Arc::from),
                plaintext_on_tls_port: false,
            },
        )),
        Accepted::Plaintext(stream) => Some((
            Socket::Tcp(stream),
            Origin {
                plaintext_on_tls_port: true,
                ..Origin::default()
            },
        )),
        Accepted::Failed => None,
    }
}

/// A connection's read side.
enum ReadSide {
    Tcp(OwnedReadHalf),
    Tls(tokio::io::ReadHalf<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl AsyncRead for ReadSide {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ReadSide::Tcp(r) => Pin::new(r).poll_read(cx, buf),
            ReadSide::Tls(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

/// A connection's write side.
enum WriteSide {
    Tcp(OwnedWriteHalf),
    Tls(tokio::io::WriteHalf<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl AsyncWrite for WriteSide {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            WriteSide::Tcp(w) => Pin::new(w).poll_write(cx, buf),
            WriteSide::Tls(w) => Pin::new(w).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            WriteSide::Tcp(w) => Pin::new(w).poll_write_vectored(cx, bufs),
            WriteSide::Tls(w) => Pin::new(w).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            WriteSide::Tcp(w) => w.is_write_vectored(),
            WriteSide::Tls(w) => w.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            WriteSide::Tcp(w) => Pin::new(w).poll_flush(cx),
            WriteSide::Tls(w) => Pin::new(w).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            WriteSide::Tcp(w) => Pin::new(w).poll_shutdown(cx),
            WriteSide::Tls(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}

/// Why a connection's reader stopped.
#[derive(Debug)]
pub(crate) enum End {
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
    /// The exchange is complete (HBase's registry preamble) and the connection closes.
    Done,
}

/// The read side of a connection, with what bounds it.
pub(crate) struct Inbound {
    rd: ReadSide,
    /// What the transport told about the connection (TLS, the certificate's user).
    pub origin: Origin,
    /// Input read and not yet consumed.
    pub buf: BytesMut,
    /// The bytes in `buf`, counted as in flight.
    buffered: Charge,
    pub budget: Arc<ConnBudget>,
    /// The writer's queue.
    pub tx: mpsc::UnboundedSender<Outgoing>,
    slots: Arc<Semaphore>,
    pub shutdown: watch::Receiver<bool>,
    /// Bytes of a refused frame still to be skipped.
    discard: u64,
    /// When the frame being read must be complete; set by its first byte.
    frame_deadline: Option<Instant>,
    metrics: Arc<RpcMetrics>,
    frame_timeout: Duration,
}

/// A connection's writer task; resolves once every sender of its queue is gone and what they
/// queued is written.
pub(crate) type Writer = JoinHandle<std::io::Result<()>>;

/// Starts serving `stream`: counts it open and starts its writer.
pub(crate) fn open(
    socket: Socket,
    origin: Origin,
    metrics: &Arc<RpcMetrics>,
    budget: &Arc<ServerBudget>,
    limits: &Limits,
    shutdown: watch::Receiver<bool>,
) -> (Inbound, Writer) {
    metrics.connection_opened();
    if let Some(user) = &origin.cert_user {
        tracing::debug!(user = %user, "connection of a client certificate's user");
    }
    let (rd, wr) = match socket {
        Socket::Tcp(stream) => {
            let (rd, wr) = stream.into_split();
            (ReadSide::Tcp(rd), WriteSide::Tcp(wr))
        }
        Socket::Tls(stream) => {
            let (rd, wr) = tokio::io::split(*stream);
            (ReadSide::Tls(rd), WriteSide::Tls(wr))
        }
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_loop(wr, rx, metrics.clone(), limits.write_timeout));
    let budget = budget.connection(limits.connection_bytes);
    let inbound = Inbound {
        rd,
        origin,
        buf: BytesMut::new(),
        buffered: budget.charge(0),
        budget,
        tx,
        slots: Arc::new(Semaphore::new(MAX_IN_FLIGHT_PER_CONNECTION)),
        shutdown,
        discard: 0,
        frame_deadline: None,
        metrics: metrics.clone(),
        frame_timeout: limits.frame_timeout,
    };
    (inbound, writer)
}

/// Ends a connection whose reader stopped for `end`: waits for its writer (which ends once
/// every call of the connection has answered and the answers are written), lingers after a
/// protocol error, and logs how it ended. `what` names the connection in the log.
pub(crate) async fn close(
    inbound: Inbound,
    writer: Writer,
    end: &End,
    what: &str,
    conn_id: u64,
    peer: SocketAddr,
) {
    let Inbound {
        rd, tx, metrics, ..
    } = inbound;
    drop(tx);
    let written = writer.await;
    match end {
        End::Protocol(why) => {
            tracing::info!(conn = conn_id, %peer, reason = %why, "closing {what} after a protocol error");
            linger(rd).await;
        }
        End::TimedOut(late) => {
            metrics.connection_timed_out();
            tracing::info!(conn = conn_id, %peer, "closing {what}: {late} did not arrive in time");
        }
        End::Io(e) => tracing::debug!(conn = conn_id, %peer, error = %e, "{what} failed"),
        _ => tracing::debug!(conn = conn_id, %peer, end = ?end, "{what} closed"),
    }
    match written {
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::TimedOut => {
            metrics.connection_timed_out();
            tracing::info!(conn = conn_id, %peer, "closing {what}: the client did not read its answers in time");
        }
        Ok(Err(e)) => tracing::debug!(conn = conn_id, %peer, error = %e, "{what}: write failed"),
        _ => {}
    }
}

impl Inbound {
    /// Whether the connection's own in-flight bytes leave room to read or serve more.
    pub fn has_room(&self) -> bool {
        self.budget.room(self.buffered.bytes())
    }

    /// Waits while the connection's own requests and answers are past its bound: a client
    /// that sends faster than it reads stalls itself (TCP pushes back on it) and nobody else.
    /// Not a refusal: the calls are fine, only early; refusing them would have the client
    /// retry into the same full pipe. The protocol first hands the writer what it answered
    /// (those bytes drain only from there). Time spent here does not count against the
    /// frame's deadline.
    pub async fn wait_for_room(&mut self) -> Result<(), End> {
        let own = self.buffered.bytes();
        if self.budget.room(own) {
            return Ok(());
        }
        self.metrics.connection_stalled();
        let started = Instant::now();
        let waited = tokio::select! {
            biased;
            _ = super::stopped(&mut self.shutdown) => Err(End::Shutdown),
            _ = self.tx.closed() => Err(End::WriterGone),
            _ = self.budget.wait_for_room(own) => Ok(()),
        };
        self.metrics.connection_resumed();
        if let Some(d) = &mut self.frame_deadline {
            *d += started.elapsed();
        }
        waited
    }

    /// Reads more input into the buffer (the protocol has made room first). A frame begun
    /// must arrive whole by its deadline.
    pub async fn read(&mut self) -> Result<(), End> {
        let deadline = if self.buf.is_empty() && self.discard == 0 {
            None
        } else {
            let timeout = self.frame_timeout;
            Some(
                *self
                    .frame_deadline
                    .get_or_insert_with(|| Instant::now() + timeout),
            )
        };
        let wait = ReadWait {
            shutdown: &mut self.shutdown,
            writer_gone: self.tx.closed(),
            deadline,
        };
        let read = read_more(&mut self.rd, &mut self.buf, wait, &self.metrics).await;
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

    /// Drops `n` bytes from the front of the buffer.
    pub fn consume(&mut self, n: usize) {
        self.buf.advance(n);
        self.buffered.set(self.buf.len() as u64);
    }

    /// Splits `n` bytes off the front of the buffer.
    pub fn take(&mut self, n: usize) -> Bytes {
        let taken = self.buf.split_to(n).freeze();
        self.buffered.set(self.buf.len() as u64);
        taken
    }

    /// A handshake or frame is complete: the next one's deadline starts with its first byte.
    pub fn frame_done(&mut self) {
        self.frame_deadline = None;
    }

    /// The length prefix (`u32`, big-endian) of the frame at the front of the buffer.
    pub fn frame_len(&self) -> Option<u32> {
        let b = self.buf.get(..4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Takes the whole frame of `len` body bytes at the front of the buffer: its body, and
    /// its bytes' charge, which becomes its call's.
    pub fn take_frame(&mut self, len: u32) -> (Bytes, Charge) {
        self.buf.advance(4);
        let body = self.buf.split_to(len as usize).freeze();
        let charge = self.buffered.split(4 + u64::from(len));
        self.frame_deadline = None;
        (body, charge)
    }

    /// The frame of `len` body bytes at the front of the buffer was refused: it is skipped as
    /// it arrives, never buffered.
    pub fn skip_frame(&mut self, len: u32) {
        self.consume(4);
        self.discard = u64::from(len);
    }

    /// Drops what arrived of a skipped frame; true while more of it is still to come (the
    /// buffer is then empty: skipped input is read and dropped, never kept).
    pub fn skipping(&mut self) -> bool {
        if self.discard == 0 {
            return false;
        }
        let n = self.discard.min(self.buf.len() as u64);
        self.consume(n as usize);
        self.discard -= n;
        if self.discard > 0 {
            return true;
        }
        self.frame_deadline = None;
        false
    }

    /// A charge of `n` bytes against this connection's and its front end's bounds.
    pub fn charge(&self, n: u64) -> Charge {
        self.budget.charge(n)
    }

    /// One of the connection's in-flight call slots, if one is free.
    pub fn try_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.slots.clone().try_acquire_owned().ok()
    }

    /// Waits for a call slot (the protocol has handed the writer what it answered first:
    /// slots come back as answers are written).
    pub async fn wait_slot(&mut self) -> Result<OwnedSemaphorePermit, End> {
        self.metrics.connection_stalled();
        let acquired = tokio::select! {
            biased;
            _ = super::stopped(&mut self.shutdown) => Err(End::Shutdown),
            p = self.slots.clone().acquire_owned() => p.map_err(|_| End::Shutdown),
        };
        self.metrics.connection_resumed();
        acquired
    }

    /// Queues a frame for the writer.
    pub fn send(&self, out: Outgoing) -> Result<(), End> {
        self.tx.send(out).map_err(|_| End::WriterGone)
    }
}

/// Reads and drops input for a moment after an error frame (see [`LINGER`]).
async fn linger(mut rd: ReadSide) {
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
enum Read {
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
struct ReadWait<'a, G> {
    shutdown: &'a mut watch::Receiver<bool>,
    /// Resolves when the connection's writer has stopped.
    writer_gone: G,
    /// Give up at this instant (a frame or handshake not complete in time).
    deadline: Option<Instant>,
}

/// Reads what the socket has into `buf`; counts the bytes.
///
/// A connection with nothing buffered waits for input without a buffer (an idle connection
/// costs no read buffer) and takes a small one when input arrives; a buffer holding part of
/// a frame grows by [`READ_CHUNK`] (doubling as the frame keeps coming), so memory follows
/// what arrived, never what a length prefix announced.
async fn read_more<G: Future<Output = ()>>(
    rd: &mut ReadSide,
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
    let rd = match rd {
        ReadSide::Tcp(rd) => rd,
        ReadSide::Tls(rd) => {
            return read_tls(rd, buf, shutdown, writer_gone, deadline, metrics).await;
        }
    };
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

/// [`read_more`] over TLS: a TLS session has no readiness of its own to wait on without a
/// buffer (a record may hold no application data), so a TLS connection reads into a buffer
/// even while idle (the [`FIRST_READ`] bytes, beside rustls' own).
async fn read_tls<G: Future<Output = ()>>(
    rd: &mut tokio::io::ReadHalf<tokio_rustls::server::TlsStream<TcpStream>>,
    buf: &mut BytesMut,
    shutdown: &mut watch::Receiver<bool>,
    mut writer_gone: Pin<&mut G>,
    deadline: Option<Instant>,
    metrics: &RpcMetrics,
) -> Read {
    if buf.capacity() - buf.len() < MIN_READ {
        if buf.is_empty() {
            *buf = BytesMut::with_capacity(FIRST_READ);
        } else {
            buf.reserve(READ_CHUNK);
        }
    }
    let deadline = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d.into()).await,
            None => std::future::pending().await,
        }
    };
    // `read_buf` is cancel safe: a branch that wins first leaves no bytes half-read.
    tokio::select! {
        biased;
        _ = super::stopped(shutdown) => Read::Shutdown,
        _ = &mut writer_gone => Read::WriterGone,
        _ = deadline => Read::TimedOut,
        read = rd.read_buf(buf) => match read {
            Ok(0) => Read::Eof,
            Ok(n) => {
                metrics.add_bytes_in(n);
                Read::Data
            }
            Err(e) => Read::Io(e),
        },
    }
}

/// Writes frames as they come, several per write when several are waiting. A frame's
/// in-flight slot and bytes are let go once it is written.
async fn write_loop(
    mut wr: WriteSide,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
    metrics: Arc<RpcMetrics>,
    timeout: Duration,
) -> std::io::Result<()> {
    // Frames of the current batch. Emptied (capacity and all) before the writer waits, so
    // an idle writer holds nothing.
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
async fn write_all_timed(
    wr: &mut WriteSide,
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
