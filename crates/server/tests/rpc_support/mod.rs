//! Shared by the `rpc_*` tests: a transport-level test handler and a raw blocking client that
//! speaks the native framing by hand.
#![allow(dead_code)]

use bytes::{Buf, Bytes, BytesMut};
use cellar_proto::frame::{decode_response, encode_frame_raw, PREAMBLE};
use cellar_proto::pb;
use cellar_server::config::RpcConfig;
use cellar_server::rpc::{self, CallContext, FrontEnd, Handler, Inline, Reply};
use cellar_server::status::Gauges;
use cellar_server::status::StatusSource;
use parking_lot::{Condvar, Mutex};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// Behaviour by method, so tests steer the handler through the wire:
/// GET echoes; MUTATE sleeps the milliseconds in its 8-byte parameter, then echoes;
/// SCAN_OPEN waits at the gate, then echoes; LOCATE_REGION answers the connection id;
/// STATUS fails with INVALID_ARGUMENT; SCAN_CLOSE panics; LIST_REGIONS is served inline.
#[derive(Default)]
pub struct TestHandler {
    gate_open: Mutex<bool>,
    gate: Condvar,
    /// Calls that have reached the gate.
    pub at_gate: AtomicUsize,
    /// Calls that ran in the handler.
    pub calls: AtomicUsize,
    pub closed: Mutex<Vec<u64>>,
    pub gauges: Gauges,
}

impl TestHandler {
    pub fn with_gauges(gauges: Gauges) -> TestHandler {
        TestHandler {
            gauges,
            ..TestHandler::default()
        }
    }

    pub fn open_gate(&self) {
        *self.gate_open.lock() = true;
        self.gate.notify_all();
    }

    /// Waits until `n` calls wait at the gate.
    pub fn wait_at_gate(&self, n: usize) {
        wait_until("calls to reach the gate", || {
            self.at_gate.load(Ordering::SeqCst) >= n
        });
    }

    pub fn closed(&self) -> Vec<u64> {
        self.closed.lock().clone()
    }
}

impl Handler for TestHandler {
    fn call(
        &self,
        ctx: &CallContext,
        method: pb::Method,
        param: Bytes,
        cellblock: Bytes,
    ) -> Result<Reply, pb::RpcError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match method {
            pb::Method::Get => Ok(Reply { param, cellblock }),
            pb::Method::Mutate => {
                let ms = u64::from_be_bytes(param[..8].try_into().expect("8-byte sleep"));
                std::thread::sleep(Duration::from_millis(ms));
                Ok(Reply { param, cellblock })
            }
            pb::Method::ScanOpen => {
                self.at_gate.fetch_add(1, Ordering::SeqCst);
                let deadline = Instant::now() + IO_TIMEOUT;
                let mut open = self.gate_open.lock();
                while !*open && Instant::now() < deadline {
                    self.gate.wait_for(&mut open, Duration::from_millis(100));
                }
                Ok(Reply { param, cellblock })
            }
            pb::Method::LocateRegion => Ok(Reply {
                param: Bytes::copy_from_slice(&ctx.conn_id.to_be_bytes()),
                cellblock: Bytes::new(),
            }),
            pb::Method::Status => Err(pb::RpcError {
                code: pb::ErrorCode::InvalidArgument as i32,
                message: "status refused by the test handler".into(),
            }),
            pb::Method::ScanClose => panic!("the test handler panics on SCAN_CLOSE"),
            m => Err(pb::RpcError {
                code: pb::ErrorCode::UnknownMethod as i32,
                message: format!("test handler has no {}", m.as_str_name()),
            }),
        }
    }

    /// LIST_REGIONS is answered on the reactor: `inline` plus its parameter. LIST_TABLES is
    /// begun on the reactor and awaited by the connection's task (it yields a few times
    /// first): its answer names the thread that finished it.
    fn call_inline(
        &self,
        _ctx: &CallContext,
        method: pb::Method,
        param: &Bytes,
        _cellblock: &Bytes,
    ) -> Option<Inline> {
        match method {
            pb::Method::ListRegions => {
                let mut p = b"inline ".to_vec();
                p.extend_from_slice(param);
                Some(Inline::Done(Ok(Reply {
                    param: p.into(),
                    cellblock: Bytes::new(),
                })))
            }
            pb::Method::ListTables => Some(Inline::Await(Box::pin(async {
                for _ in 0..3 {
                    tokio::task::yield_now().await;
                }
                let thread = std::thread::current();
                Ok(Reply {
                    param: Bytes::from(thread.name().unwrap_or("unnamed").to_string()),
                    cellblock: Bytes::new(),
                })
            }))),
            _ => None,
        }
    }

    fn connection_closed(&self, conn_id: u64) {
        self.closed.lock().push(conn_id);
    }
}

impl StatusSource for TestHandler {
    fn gauges(&self) -> Gauges {
        self.gauges.clone()
    }
}

/// Polls `cond` every 10 ms for up to 30 s.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + IO_TIMEOUT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn config(handler_count: usize, max_queued_calls: usize, max_request_bytes: u32) -> RpcConfig {
    RpcConfig {
        handler_count,
        max_queued_calls,
        max_request_bytes,
        io_threads: 2,
        inline_gets: true,
        inline_puts: true,
        ..RpcConfig::default()
    }
}

pub fn start(config: &RpcConfig) -> (FrontEnd, Arc<TestHandler>) {
    let handler = Arc::new(TestHandler::default());
    let server = rpc::start("127.0.0.1:0", config, handler.clone()).expect("server starts");
    (server, handler)
}

/// A decoded response.
#[derive(Debug)]
pub struct Response {
    pub call_id: u64,
    pub error: Option<pb::RpcError>,
    pub param: Bytes,
    pub cellblock: Bytes,
}

impl Response {
    pub fn code(&self) -> Option<pb::ErrorCode> {
        self.error
            .as_ref()
            .map(|e| pb::ErrorCode::try_from(e.code).expect("known code"))
    }

    pub fn message(&self) -> &str {
        self.error
            .as_ref()
            .map(|e| e.message.as_str())
            .unwrap_or("")
    }
}

/// A blocking client speaking raw frames.
pub struct Client {
    pub stream: TcpStream,
}

impl Client {
    /// Connects without sending anything.
    pub fn raw(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connects");
        stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        stream.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        Client { stream }
    }

    /// Connects and exchanges preambles.
    pub fn connect(addr: SocketAddr) -> Client {
        let mut c = Client::raw(addr);
        c.stream.write_all(&PREAMBLE).expect("preamble");
        let mut echo = [0u8; 8];
        c.stream.read_exact(&mut echo).expect("server preamble");
        assert_eq!(echo, PREAMBLE);
        c
    }

    pub fn request_frame(call_id: u64, method: i32, param: &[u8], cellblock: &[u8]) -> Bytes {
        Client::request_frame_with_timeout(call_id, method, 0, param, cellblock)
    }

    pub fn request_frame_with_timeout(
        call_id: u64,
        method: i32,
        timeout_ms: u32,
        param: &[u8],
        cellblock: &[u8],
    ) -> Bytes {
        let header = pb::RequestHeader {
            call_id,
            method,
            timeout_ms,
            ..Default::default()
        };
        let mut out = BytesMut::new();
        encode_frame_raw(&mut out, &header, param, cellblock);
        out.freeze()
    }

    pub fn send(&mut self, call_id: u64, method: pb::Method, param: &[u8], cellblock: &[u8]) {
        let frame = Client::request_frame(call_id, method as i32, param, cellblock);
        self.stream.write_all(&frame).expect("request written");
    }

    pub fn recv(&mut self) -> Response {
        self.try_recv().expect("a response frame")
    }

    /// The next response, or `None` if the server closed the connection.
    pub fn try_recv(&mut self) -> Option<Response> {
        let mut len = [0u8; 4];
        match self.stream.read_exact(&mut len) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset
                ) =>
            {
                return None
            }
            Err(e) => panic!("reading a response: {e}"),
        }
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut body).expect("response body");
        let (header, parts) = decode_response(Bytes::from(body)).expect("response decodes");
        Some(Response {
            call_id: header.call_id,
            error: header.error,
            param: parts.param,
            cellblock: parts.cellblock,
        })
    }

    pub fn call(
        &mut self,
        call_id: u64,
        method: pb::Method,
        param: &[u8],
        cellblock: &[u8],
    ) -> Response {
        self.send(call_id, method, param, cellblock);
        let r = self.recv();
        assert_eq!(r.call_id, call_id);
        r
    }

    /// Asserts the server closes the connection (after any frames already sent).
    pub fn expect_closed(&mut self) {
        let mut rest = Vec::new();
        match self.stream.read_to_end(&mut rest) {
            Ok(_) => assert!(rest.is_empty(), "unexpected bytes before close: {rest:?}"),
            Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}"),
        }
    }
}

/// The 8-byte MUTATE parameter: how long the test handler sleeps.
pub fn sleep_param(ms: u64) -> [u8; 8] {
    ms.to_be_bytes()
}

pub fn take_u64(mut b: Bytes) -> u64 {
    b.get_u64()
}
