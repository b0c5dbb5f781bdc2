//! One connection of either front end, written once: read frames, wait for room and for call
//! slots, answer on the reactor in batches, finish the puts applied there before any wait.
//! What differs between the native protocol ([`super::native`]) and HBase's
//! (`crate::hbase::protocol`) is a [`Protocol`]: its handshake, how it refuses a frame it will
//! not read, and what it does with a whole one. The bytes under both are [`super::stream`]'s
//! (TCP or TLS); UCX carries the native protocol's frames by messages instead
//! (`super::ucx`), through the same routing ([`super::route`]).
//!
//! The rules every protocol gets from here:
//! - a frame's body is buffered as it arrives and never past the connection's in-flight
//!   bound: the reader stops reading until answers drain ([`Connection::wait_for_room`]);
//! - a frame past `rpc.max_request_bytes`, or one arriving while the front end is past its
//!   own bound, is skipped as it arrives and refused by the call id in its first bytes;
//! - answers given on the reactor wait in one buffer and go to the writer together when the
//!   reader is about to wait for anything (requests that arrived together are answered with
//!   one socket write);
//! - puts applied on the reactor whose WAL records are not yet in the OS are finished (one
//!   WAL write for all) before their answers go out and before the reader waits for anything
//!   but the WAL: they hold their rows for microseconds, never across a wait for the socket
//!   (the rule `crate::region_server::DeferredPut` rests on).

use super::budget::Charge;
use super::limits::{Limits, MAX_DEFERRED_WRITES, PEEK_BYTES};
use super::stream::{self, End, Inbound, WRITE_BATCH_BYTES};
use super::transport::Outgoing;
use super::Front;
use crate::metrics::RpcMetrics;
use bytes::{Bytes, BytesMut};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio::sync::{watch, OwnedSemaphorePermit};

/// A response frame: a head and, for a large cell block, the handler's own buffer as the
/// tail (written as it is, not copied).
pub(crate) type Frame = (Bytes, Bytes);

/// Why a frame is skipped unread.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Skip {
    /// Its length prefix is past `rpc.max_request_bytes` (`max`).
    TooLarge { len: u32, max: u32 },
    /// The front end holds as many in-flight bytes as it may (`rpc.max_in_flight_bytes`).
    Busy,
}

/// A protocol served over a [`Connection`]. Its value is the connection's protocol state
/// (who the caller is, what the handshake settled).
pub(crate) trait Protocol: Sized + Send + 'static {
    /// Names the connection in logs.
    const NAME: &'static str;
    /// What must arrive before the first call, for the handshake's timeout message.
    const HANDSHAKE: &'static str;
    /// A put applied on the reactor, waiting for its WAL write.
    type Deferred: DeferredWrite;
    /// What every connection of the front end shares.
    type Shared: AsRef<Front> + Send + Sync + 'static;

    /// The protocol state of connection `conn_id` from `peer`, once its stream is open (its
    /// origin says what TLS told; its writer takes answers).
    fn open(conn_id: u64, peer: SocketAddr, io: &Inbound, shared: &Arc<Self::Shared>) -> Self;

    /// Reads and answers whatever precedes the first call (within `rpc.handshake_timeout_ms`).
    fn handshake(conn: &mut Connection<Self>) -> impl Future<Output = Result<(), End>> + Send;

    /// A frame whose length is past `rpc.max_request_bytes`: `Ok` to have it skipped and
    /// refused ([`Protocol::refuse_unread`]), or the connection's end (after telling the
    /// client why).
    fn oversize(conn: &mut Connection<Self>, len: u32) -> Result<(), End>;

    /// Answers a frame skipped unread, from the first bytes of its body (up to
    /// [`PEEK_BYTES`]); the connection ends if they hold no readable request header.
    fn refuse_unread(
        conn: &mut Connection<Self>,
        prefix: Bytes,
        why: Skip,
    ) -> impl Future<Output = Result<(), End>> + Send;

    /// Serves one whole frame: answers it on the reactor ([`Connection::answer`]), defers it
    /// ([`Connection::defer`]) or queues it for the handler pool with a sender of the
    /// connection's writer (`conn.io.tx`).
    fn call(
        conn: &mut Connection<Self>,
        body: Bytes,
        charge: Charge,
    ) -> impl Future<Output = Result<(), End>> + Send;

    /// The connection's reader stopped. Lets go at once of what ties it to its stream (its
    /// writer's senders, a UCX peer: the stream closes once every sender is gone), and returns
    /// what frees its state on the server (its scanners), run once the stream is closed.
    fn end(self) -> impl Future<Output = ()> + Send + 'static;
}

/// A put applied on the reactor whose WAL record is not yet in the OS.
pub(crate) trait DeferredWrite: Send + Sized {
    /// Finishes without waiting (one WAL write covers every record buffered before it): the
    /// answer; or the write handed back when finishing would wait for another writer's round.
    fn try_finish(self) -> Result<Frame, Self>;
    /// Finishes, awaiting another writer's WAL round if need be: the answer.
    fn finish(self) -> impl Future<Output = Frame> + Send;
}

/// One connection's reading side with its protocol: what [`Protocol`]s work through.
pub(crate) struct Connection<P: Protocol> {
    pub io: Inbound,
    pub proto: P,
    limits: Limits,
    /// Frames answered on the reactor since the last wait, handed to the writer in one piece.
    answered: BytesMut,
    /// The in-flight slots of the calls in `answered`, freed once it is written.
    answered_slots: Option<OwnedSemaphorePermit>,
    /// The bytes of `answered`, counted as in flight.
    answered_charge: Charge,
    /// Puts applied on the reactor, waiting for their WAL write, with their calls' slots.
    deferred: Vec<(P::Deferred, OwnedSemaphorePermit)>,
}

/// Serves protocol `P` on `listener` with the node's runtime and handler pool (`core`): a
/// front end whose connections share `shared`, numbered from `id_base` (each front end's ids
/// in a range of their own, so that scanners of two front ends never share an owner).
/// `after_drain` is what the front end lets go of once its connections are drained.
pub(crate) fn listen<P: Protocol>(
    listener: std::net::TcpListener,
    core: Arc<super::RpcCore>,
    shared: Arc<P::Shared>,
    id_base: u64,
    after_drain: Option<Box<dyn FnOnce() + Send>>,
) -> std::io::Result<super::FrontEnd> {
    let front: &Front = (*shared).as_ref();
    let (metrics, tls) = (front.metrics.clone(), front.tls.is_some());
    let serving = super::FrontEnd::start(
        listener,
        core,
        P::NAME,
        metrics,
        move |stream, id, peer, stop| serve::<P>(stream, id_base | id, peer, shared.clone(), stop),
        after_drain,
    )?;
    tracing::info!(addr = %serving.local_addr(), tls, "{} RPC listening", P::NAME);
    Ok(serving)
}

/// Serves one accepted connection of a front end to its end: its transport's start (TLS),
/// its protocol ([`Protocol::open`]), its calls, then its close.
async fn serve<P: Protocol>(
    stream: TcpStream,
    conn_id: u64,
    peer: SocketAddr,
    shared: Arc<P::Shared>,
    shutdown: watch::Receiver<bool>,
) {
    tracing::debug!(conn = conn_id, %peer, protocol = P::NAME, "connection opened");
    let front: &Front = (*shared).as_ref();
    let metrics: Arc<RpcMetrics> = front.metrics.clone();
    let limits = front.limits;
    let Some((io, writer)) = stream::start(stream, peer, front.port(), P::NAME, shutdown).await
    else {
        return;
    };
    let proto = P::open(conn_id, peer, &io, &shared);
    let mut conn = Connection {
        answered: BytesMut::new(),
        answered_slots: None,
        answered_charge: io.charge(0),
        io,
        proto,
        limits,
        deferred: Vec::new(),
    };
    let end = conn.run().await;
    // Puts applied and not yet finished are finished, answers given are handed on (they may
    // not be written).
    let _ = conn.flush().await;
    let Connection { io, proto, .. } = conn;
    let release = proto.end();
    // The writer ends once the reader and every in-flight call have let go of their senders,
    // so after this no call of this connection is still running.
    let what = format!("{} connection", P::NAME);
    stream::close(io, writer, &end, &what, conn_id, peer).await;
    release.await;
    metrics.connection_closed();
}

impl<P: Protocol> Connection<P> {
    async fn run(&mut self) -> End {
        match tokio::time::timeout(self.limits.handshake_timeout, P::handshake(self)).await {
            Ok(Ok(())) => {}
            Ok(Err(end)) => return end,
            Err(_) => return End::TimedOut(P::HANDSHAKE),
        }
        self.io.frame_done();
        loop {
            if let Err(end) = self.next_frame().await {
                return end;
            }
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
        let max = self.limits.max_request_bytes;
        if len > max {
            P::oversize(self, len)?;
            return self.skip_frame(len, Skip::TooLarge { len, max }).await;
        }
        if self.io.buf.len() < 4 + len as usize {
            if self.io.budget.server_full() {
                // Others hold the front end's in-flight bound: refuse this call now instead
                // of buffering the rest of it.
                return self.skip_frame(len, Skip::Busy).await;
            }
            return self.fill().await;
        }
        self.wait_for_room().await?;
        let (body, charge) = self.io.take_frame(len);
        P::call(self, body, charge).await
    }

    /// Refuses the frame starting in the buffer by the call id in its first bytes and skips
    /// the whole frame as it arrives, never buffering it.
    async fn skip_frame(&mut self, len: u32, why: Skip) -> Result<(), End> {
        let want = (len as usize).min(PEEK_BYTES);
        let Some(prefix) = self.io.buf.get(4..4 + want) else {
            return self.fill().await;
        };
        let prefix = Bytes::copy_from_slice(prefix);
        self.io.skip_frame(len);
        P::refuse_unread(self, prefix, why).await
    }

    /// Reads more input into the buffer, after handing on what was answered and finishing
    /// the deferred puts, first waiting for room if the connection is past its in-flight bound.
    pub async fn fill(&mut self) -> Result<(), End> {
        self.flush().await?;
        self.io.wait_for_room().await?;
        if self.answered.is_empty() {
            // Waiting for input holds no answer buffer either.
            self.answered = BytesMut::new();
        }
        self.io.read().await
    }

    /// Reads until the buffer holds at least `n` bytes.
    pub async fn need(&mut self, n: usize) -> Result<(), End> {
        while self.io.buf.len() < n {
            self.fill().await?;
        }
        Ok(())
    }

    /// Reads the next `N` bytes of the stream (a preamble) and consumes them.
    pub async fn take_array<const N: usize>(&mut self) -> Result<[u8; N], End> {
        self.need(N).await?;
        let mut out = [0u8; N];
        if let Some(head) = self.io.buf.get(..N) {
            out.copy_from_slice(head);
        }
        self.io.consume(N);
        Ok(out)
    }

    /// Waits while the connection is past its own in-flight bound (`Inbound::wait_for_room`),
    /// after handing on what it answered (those bytes drain only from the writer).
    async fn wait_for_room(&mut self) -> Result<(), End> {
        if self.io.has_room() {
            return Ok(());
        }
        self.flush().await?;
        self.io.wait_for_room().await
    }

    /// One in-flight slot for a call about to be served; past the connection's bound, waits
    /// for one after handing on what was answered (slots come back as answers are written).
    pub async fn slot(&mut self) -> Result<OwnedSemaphorePermit, End> {
        if let Some(slot) = self.io.try_slot() {
            return Ok(slot);
        }
        self.flush().await?;
        self.io.wait_slot().await
    }

    /// Answers a call on the reactor: its frame joins the others answered since the last
    /// wait (a large cell block goes as its own buffer, after them). Never refused for its
    /// size, unlike a handler's answer: the reader checks the connection's room before each
    /// frame, so an answer given here overshoots the bound by itself at most.
    pub fn answer(
        &mut self,
        (head, tail): Frame,
        slot: OwnedSemaphorePermit,
        charge: Charge,
    ) -> Result<(), End> {
        if !tail.is_empty() {
            self.hand_answered()?;
            let mut charge = charge;
            charge.set((head.len() + tail.len()) as u64);
            return self.io.send(Outgoing {
                head,
                tail,
                _slot: Some(slot),
                _charge: Some(charge),
            });
        }
        self.answered.extend_from_slice(&head);
        self.answered_charge.absorb(charge);
        self.answered_charge.set(self.answered.len() as u64);
        match &mut self.answered_slots {
            Some(held) => held.merge(slot),
            None => self.answered_slots = Some(slot),
        }
        if self.answered.len() >= WRITE_BATCH_BYTES {
            self.hand_answered()?;
        }
        Ok(())
    }

    /// Holds a put applied on the reactor until its WAL write, with its call's slot (its
    /// request's bytes are freed: the put is in the memstore). Past [`MAX_DEFERRED_WRITES`]
    /// they are finished at once.
    pub async fn defer(
        &mut self,
        write: P::Deferred,
        slot: OwnedSemaphorePermit,
    ) -> Result<(), End> {
        self.deferred.push((write, slot));
        if self.deferred.len() >= MAX_DEFERRED_WRITES {
            self.flush().await?;
        }
        Ok(())
    }

    /// Whether puts applied on the reactor wait for their WAL write (one of them may hold a
    /// row a new put wants).
    pub fn has_deferred(&self) -> bool {
        !self.deferred.is_empty()
    }

    /// Finishes the deferred puts (the first finish writes every buffered WAL record, the
    /// rest find theirs written) and hands every answer to the writer. A put whose record
    /// another writer's round is writing is awaited: the task yields, the thread never blocks.
    pub async fn flush(&mut self) -> Result<(), End> {
        for (write, slot) in std::mem::take(&mut self.deferred) {
            let frame = match write.try_finish() {
                Ok(frame) => frame,
                Err(write) => write.finish().await,
            };
            let charge = self.io.charge(0);
            self.answer(frame, slot, charge)?;
        }
        self.hand_answered()
    }

    /// Hands the frames answered so far to the writer, with their slots and bytes.
    pub fn hand_answered(&mut self) -> Result<(), End> {
        if self.answered.is_empty() {
            return Ok(());
        }
        let head = self.answered.split().freeze();
        let mut charge = std::mem::replace(&mut self.answered_charge, self.io.charge(0));
        charge.set(head.len() as u64);
        self.io.send(Outgoing {
            head,
            tail: Bytes::new(),
            _slot: self.answered_slots.take(),
            _charge: Some(charge),
        })
    }

    /// Sends a frame that belongs to no call's slot (a preamble's answer, a fatal error),
    /// after every answer ready before it.
    pub fn send_unbounded(&mut self, head: Bytes) -> Result<(), End> {
        self.hand_answered()?;
        self.io.send(Outgoing::unbounded(head))
    }
}
