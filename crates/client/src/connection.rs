//! One connection to a server: the preamble exchange over TCP, then many calls in flight at
//! once, over TCP or (asked for with `TRANSPORT_HELLO`) over UCX (`transport.rs`).
//!
//! A writer task sends queued request frames (coalescing those that queue up while it writes);
//! a reader task matches response frames to their callers by call id. When either side fails,
//! every call still waiting gets the same error ([`Error::Closed`] or the I/O error), which the
//! retry logic treats as "look the region up again", and the pool opens a new connection on
//! the next call.

use crate::config::ClientConfig;
use crate::error::{Error, Result};
use crate::transport::{ucx_context, Peer, Route, Transport};
use bytes::{Buf, Bytes, BytesMut};
use cellar_proto::frame::{self, PREAMBLE};
use cellar_proto::pb::{self, Method, RequestHeader};
use parking_lot::Mutex;
use prost::Message;
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

/// Request frames queued for the writer before callers wait for room.
const OUTGOING_QUEUE: usize = 1024;

/// A connection's read side: a TCP socket's, or a TLS session's.
type ReadSide = Box<dyn AsyncRead + Send + Unpin>;
/// A connection's write side.
type WriteSide = Box<dyn AsyncWrite + Send + Unpin>;

/// A successful call's answer: the method's encoded response message and its cell block.
#[derive(Debug, Clone, Default)]
pub(crate) struct Response {
    pub param: Bytes,
    pub cellblock: Bytes,
    /// For a call that asked for timing: when its frame was read, and the server's stages.
    pub timing: Option<(Instant, pb::ServerTiming)>,
}

/// When a timed call's request was encoded, and when it was registered and about to be
/// handed to the writer task.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SendStamps {
    pub encoded: Option<Instant>,
    pub queued: Option<Instant>,
}

impl Response {
    /// Decodes the response message, naming it when the bytes are not one.
    pub fn decode<M: Message + Default>(&self, what: &str) -> Result<M> {
        frame::decode_param(self.param.clone(), what).map_err(|e| Error::Protocol(e.to_string()))
    }
}

type Waiter = oneshot::Sender<Result<Response>>;

/// Calls waiting for their answers, and why the connection ended once it has.
#[derive(Default)]
struct Pending {
    calls: HashMap<u64, Waiter>,
    closed: Option<Error>,
    tasks: Vec<AbortHandle>,
}

struct Shared {
    pending: Mutex<Pending>,
}

impl Peer for Shared {
    fn frame(&self, body: Bytes) {
        if let Err(e) = deliver(self, body) {
            self.fail(e);
        }
    }

    fn lost(&self, err: Error) {
        tracing::debug!(error = %err, "UCX side of a connection lost");
        self.fail(err);
    }
}

impl Shared {
    /// Ends the connection: every waiting call gets `err`, both tasks stop.
    fn fail(&self, err: Error) {
        let (calls, tasks) = {
            let mut p = self.pending.lock();
            if p.closed.is_none() {
                p.closed = Some(err.clone());
            }
            (std::mem::take(&mut p.calls), std::mem::take(&mut p.tasks))
        };
        for (_, waiter) in calls {
            let _ = waiter.send(Err(err.clone()));
        }
        for t in tasks {
            t.abort();
        }
    }
}

/// An open connection; cheap to share (`Arc`) between tables and tasks.
pub(crate) struct Connection {
    outgoing: mpsc::Sender<Bytes>,
    shared: Arc<Shared>,
    next_call_id: AtomicU64,
    timeout: Duration,
    /// Set when calls travel over UCX; the TCP connection stays the control channel.
    ucx: Option<Route>,
    /// How long a caller drives the UCX worker while it waits (`ClientConfig::ucx_drive`).
    ucx_drive: Duration,
    /// The user every request says it is from (`ClientConfig::user`); empty: none.
    user: String,
    /// The user every request acts for (`ClientConfig::effective_user`); empty: none.
    effective_user: String,
}

impl Connection {
    /// Connects, exchanges preambles, starts the reader and writer tasks and, for `ucx` or
    /// `auto`, moves the calls to UCX.
    pub async fn open(addr: &str, config: &ClientConfig) -> Result<Connection> {
        let timeout = config.rpc_timeout;
        let max_frame_bytes = config.max_frame_bytes;
        let transport = config.transport;
        let ucx_drive = config.ucx_drive;
        let tls = config.tls.as_ref();
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| Error::Timeout(timeout))?
            .map_err(|e| Error::Io(io::Error::new(e.kind(), format!("connect to {addr}: {e}"))))?;
        stream.set_nodelay(true)?;
        let (mut rd, mut wr): (ReadSide, WriteSide) = match tls {
            None => {
                let (rd, wr) = stream.into_split();
                (Box::new(rd), Box::new(wr))
            }
            Some(tls) => {
                let stream = tokio::time::timeout(timeout, tls.connect(addr, stream))
                    .await
                    .map_err(|_| Error::Timeout(timeout))??;
                let (rd, wr) = tokio::io::split(stream);
                (Box::new(rd), Box::new(wr))
            }
        };
        tokio::time::timeout(timeout, handshake(&mut rd, &mut wr, addr, max_frame_bytes))
            .await
            .map_err(|_| Error::Timeout(timeout))??;
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending::default()),
        });
        let (tx, rx) = mpsc::channel(OUTGOING_QUEUE);
        let writer = tokio::spawn(write_frames(wr, rx, shared.clone()));
        let reader = tokio::spawn(read_frames(rd, max_frame_bytes, shared.clone()));
        shared.pending.lock().tasks = vec![writer.abort_handle(), reader.abort_handle()];
        let mut conn = Connection {
            outgoing: tx,
            shared,
            next_call_id: AtomicU64::new(1),
            timeout,
            ucx: None,
            ucx_drive,
            user: config.user.clone().unwrap_or_default(),
            effective_user: config.effective_user.clone().unwrap_or_default(),
        };
        match transport {
            Transport::Tcp => {}
            // UCX carries no encryption: a TLS connection keeps its calls on TCP.
            Transport::Auto if tls.is_some() => {}
            Transport::Ucx if tls.is_some() => {
                return Err(Error::Transport(format!(
                    "{addr}: UCX carries no encryption, so TLS connections keep their calls on TCP (use transport tcp or auto with TLS)"
                )))
            }
            _ => conn.hello(addr, transport).await?,
        }
        tracing::debug!(addr, ucx = conn.ucx.is_some(), "connected");
        Ok(conn)
    }

    /// Asks the server to carry this connection's calls over UCX. Under `auto`, a machine or a
    /// server without UCX leaves the connection on TCP; under `ucx` it is an error saying why.
    async fn hello(&mut self, addr: &str, transport: Transport) -> Result<()> {
        let auto = transport == Transport::Auto;
        let ctx = match ucx_context() {
            Ok(ctx) => ctx,
            Err(e) if auto => {
                tracing::debug!(addr, error = %e, "staying on TCP");
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let peer: std::sync::Weak<dyn Peer> = Arc::downgrade(&self.shared) as _;
        let route = Route::start(&ctx, peer)?;
        let (address, id) = route.address();
        let req = pb::TransportHelloRequest {
            transport: "ucx".into(),
            worker_address: Bytes::copy_from_slice(address),
            client_peer_id: id,
        };
        let answer = match self.call(Method::TransportHello, &req, &[]).await {
            Ok(answer) => answer,
            Err(e)
                if auto
                    && matches!(
                        e.code(),
                        Some(pb::ErrorCode::TransportUnavailable | pb::ErrorCode::UnknownMethod)
                    ) =>
            {
                tracing::debug!(addr, error = %e, "the server does not offer UCX; staying on TCP");
                return Ok(());
            }
            Err(Error::Rpc { code, message }) => {
                return Err(Error::Transport(format!(
                    "{addr} does not carry calls over UCX: {message} ({})",
                    code.as_str_name()
                )))
            }
            Err(e) => return Err(e),
        };
        let hello: pb::TransportHelloResponse = answer.decode("TransportHelloResponse")?;
        route.connect(hello.worker_address.to_vec(), hello.server_peer_id)?;
        self.ucx = Some(route);
        Ok(())
    }

    /// Whether calls travel over UCX.
    pub fn on_ucx(&self) -> bool {
        self.ucx.is_some()
    }

    /// Whether the connection has ended; the pool replaces it.
    pub fn is_closed(&self) -> bool {
        self.shared.pending.lock().closed.is_some() || self.outgoing.is_closed()
    }

    /// One call: sends the request, waits for the answer at most the call timeout.
    pub async fn call(
        &self,
        method: Method,
        param: &impl Message,
        cellblock: &[u8],
    ) -> Result<Response> {
        self.exchange(method, param, cellblock, None).await
    }

    /// A call that asks the server for its stage times and stamps the client's own; the
    /// answer's `timing` is set when the server filled it in.
    pub async fn call_timed(
        &self,
        method: Method,
        param: &impl Message,
        cellblock: &[u8],
        stamps: &mut SendStamps,
    ) -> Result<Response> {
        self.exchange(method, param, cellblock, Some(stamps)).await
    }

    /// Sends one request and waits for its answer; `stamps` (timed calls only) gets the
    /// instants the request was encoded and queued, so untimed calls never read the clock.
    async fn exchange(
        &self,
        method: Method,
        param: &impl Message,
        cellblock: &[u8],
        mut stamps: Option<&mut SendStamps>,
    ) -> Result<Response> {
        let call_id = self.next_call_id.fetch_add(1, Ordering::Relaxed);
        let header = RequestHeader {
            call_id,
            method: method as i32,
            timeout_ms: self.timeout.as_millis().min(u32::MAX as u128) as u32,
            want_timing: stamps.is_some(),
            user: self.user.clone(),
            effective_user: self.effective_user.clone(),
        };
        let mut buf = BytesMut::new();
        frame::encode_request(&mut buf, &header, param, cellblock);
        if let Some(s) = stamps.as_deref_mut() {
            s.encoded = Some(Instant::now());
        }
        let (tx, rx) = oneshot::channel();
        let alone = {
            let mut p = self.shared.pending.lock();
            if let Some(e) = &p.closed {
                return Err(e.clone());
            }
            p.calls.insert(call_id, tx);
            p.calls.len() == 1
        };
        // Whatever happens from here (answer, timeout, the caller giving up), the call leaves
        // the pending map.
        let _forget = ForgetOnDrop {
            shared: &self.shared,
            call_id,
        };
        // Stamped before the hand-off to the writer task: the send may yield to the scheduler
        // and resume only after the answer is back, so the hand-off counts as wire time.
        if let Some(s) = stamps {
            s.queued = Some(Instant::now());
        }
        match &self.ucx {
            Some(route) if alone && !self.ucx_drive.is_zero() => {
                // The connection's only call: take the answer off the wire on this thread
                // rather than be woken for it. With others in flight the progress thread
                // serves them all (a spinning caller would take a core from the server and
                // pay for waking every other caller).
                route.send_then_drive(
                    buf.freeze(),
                    self.ucx_drive,
                    || !self.shared.pending.lock().calls.contains_key(&call_id),
                    // Asked once this call's answer is in (and its entry gone).
                    || !self.shared.pending.lock().calls.is_empty(),
                )?
            }
            Some(route) => route.send(buf.freeze())?,
            None => {
                if self.outgoing.send(buf.freeze()).await.is_err() {
                    return Err(self.closed_error());
                }
            }
        }
        match tokio::time::timeout(self.timeout, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(self.closed_error()),
            Err(_) => Err(Error::Timeout(self.timeout)),
        }
    }

    fn closed_error(&self) -> Error {
        self.shared
            .pending
            .lock()
            .closed
            .clone()
            .unwrap_or(Error::Closed)
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.shared.fail(Error::Closed);
    }
}

struct ForgetOnDrop<'a> {
    shared: &'a Shared,
    call_id: u64,
}

impl Drop for ForgetOnDrop<'_> {
    fn drop(&mut self) {
        self.shared.pending.lock().calls.remove(&self.call_id);
    }
}

/// Sends our preamble and checks the server's: the same eight bytes, or an error frame
/// (call id 0) saying why the server will not talk.
async fn handshake(
    rd: &mut ReadSide,
    wr: &mut WriteSide,
    addr: &str,
    max_frame_bytes: u32,
) -> Result<()> {
    wr.write_all(&PREAMBLE).await?;
    wr.flush().await?;
    let mut reply = [0u8; 8];
    rd.read_exact(&mut reply).await.map_err(|e| {
        // A TLS 1.3 server refuses a client certificate (or its absence) after the client's
        // side of the handshake: the refusal arrives as an alert on the first read.
        if let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
            return Error::Tls(format!(
                "{addr} refused the TLS session: {tls} (does it require a client certificate, --tls-cert and --tls-key, signed by a CA it trusts?)"
            ));
        }
        Error::Io(io::Error::new(
            e.kind(),
            format!("{addr} closed the connection during the preamble exchange: {e}"),
        ))
    })?;
    let Err(bad) = frame::check_preamble(&reply) else {
        return Ok(());
    };
    if reply.starts_with(b"HTTP/") {
        return Err(Error::Protocol(wrong_port(
            addr,
            "an HTTP port (Cellar's web UI and metrics, or another web server)",
        )));
    }
    // Not a preamble: perhaps an error frame. Its first 4 bytes are the body length.
    let len = u32::from_be_bytes([reply[0], reply[1], reply[2], reply[3]]);
    if len >= 4 && len <= max_frame_bytes.min(1 << 20) {
        let mut body = BytesMut::zeroed(len as usize);
        body[..4].copy_from_slice(&reply[4..]);
        if rd.read_exact(&mut body[4..]).await.is_ok() {
            if find(&body, b"org.apache.hadoop.hbase").is_some() {
                // HBase's answer to a preamble it does not know: an exception for no call.
                return Err(Error::Protocol(wrong_port(
                    addr,
                    "an HBase RPC port (Cellar's HBase port, or Apache HBase's): HBase clients use it",
                )));
            }
            if let Ok((header, _)) = frame::decode_response(body.freeze()) {
                if let Some(e) = header.error {
                    return Err(Error::from_pb(e));
                }
            }
        }
    }
    Err(Error::Protocol(format!("{addr}: {bad}")))
}

/// The error for a connection that reached another protocol's port.
fn wrong_port(addr: &str, what: &str) -> String {
    format!(
        "{addr} is {what}; Cellar's client and `cellar shell` speak to its native port (16200 by default, `listening native=` in the server's output)"
    )
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

async fn write_frames(wr: WriteSide, mut rx: mpsc::Receiver<Bytes>, shared: Arc<Shared>) {
    let mut out = BufWriter::new(wr);
    while let Some(first) = rx.recv().await {
        let mut result = out.write_all(&first).await;
        while result.is_ok() {
            match rx.try_recv() {
                Ok(more) => result = out.write_all(&more).await,
                Err(_) => break,
            }
        }
        if result.is_ok() {
            result = out.flush().await;
        }
        if let Err(e) = result {
            tracing::debug!(error = %e, "connection write failed");
            shared.fail(Error::Io(e));
            return;
        }
    }
}

async fn read_frames(mut rd: ReadSide, max_frame_bytes: u32, shared: Arc<Shared>) {
    let err = loop {
        match read_frame(&mut rd, max_frame_bytes).await {
            Ok(None) => break Error::Closed,
            Ok(Some(body)) => {
                if let Err(e) = deliver(&shared, body) {
                    break e;
                }
            }
            Err(e) => break e,
        }
    };
    tracing::debug!(error = %err, "connection ended");
    shared.fail(err);
}

/// One frame body; `None` when the server closed the connection between frames.
async fn read_frame(rd: &mut ReadSide, max_frame_bytes: u32) -> Result<Option<Bytes>> {
    let mut len = [0u8; 4];
    match rd.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(Error::Io(e)),
    }
    let len = (&len[..]).get_u32();
    if len > max_frame_bytes {
        return Err(Error::Protocol(format!(
            "response frame of {len} bytes exceeds the client's limit of {max_frame_bytes} bytes"
        )));
    }
    let mut body = BytesMut::zeroed(len as usize);
    rd.read_exact(&mut body).await?;
    Ok(Some(body.freeze()))
}

/// Hands one response to its caller. A frame that cannot be parsed, or an error with call
/// id 0 (about the connection itself), ends the connection.
fn deliver(shared: &Shared, body: Bytes) -> Result<()> {
    let (header, parts) =
        frame::decode_response(body).map_err(|e| Error::Protocol(e.to_string()))?;
    if header.call_id == 0 {
        return Err(header
            .error
            .map(Error::from_pb)
            .unwrap_or_else(|| Error::Protocol("server sent a response with call id 0".into())));
    }
    let waiter = shared.pending.lock().calls.remove(&header.call_id);
    // No waiter: the call timed out or its caller gave up; the late answer is dropped.
    if let Some(w) = waiter {
        let answer = match header.error {
            Some(e) => Err(Error::from_pb(e)),
            None => Ok(Response {
                param: parts.param,
                cellblock: parts.cellblock,
                timing: header.timing.map(|t| (Instant::now(), t)),
            }),
        };
        let _ = w.send(answer);
    }
    Ok(())
}

/// One server's connection, if open; locked while connecting so callers wait for one attempt.
type Slot = tokio::sync::Mutex<Option<Arc<Connection>>>;

/// The connections of one client, one per server address, opened on first use and replaced
/// when they end.
#[derive(Default)]
pub(crate) struct Pool {
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

impl Pool {
    /// The live connection to `addr`, connecting (once, however many callers ask) if needed.
    pub async fn get(&self, addr: &str, config: &ClientConfig) -> Result<Arc<Connection>> {
        let slot = self
            .slots
            .lock()
            .entry(addr.to_string())
            .or_default()
            .clone();
        let mut conn = slot.lock().await;
        if let Some(c) = conn.as_ref() {
            if !c.is_closed() {
                return Ok(c.clone());
            }
        }
        let c = Connection::open(addr, config).await?;
        let c = Arc::new(c);
        *conn = Some(c.clone());
        Ok(c)
    }
}
