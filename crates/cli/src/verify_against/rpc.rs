//! One blocking HBase RPC connection, as HBase 2.x's Java client opens it: the `HBas`
//! preamble with SIMPLE authentication, a connection header naming the service and the
//! KeyValue cell block codec, then numbered calls answered in order (this client has one
//! call outstanding at a time). The framing is `cellar_proto::hbase_wire`'s; the protocol is
//! described in `docs/hbase-protocol.md`.

use bytes::{Bytes, BytesMut};
use cellar_proto::{hbase, hbase_wire};
use prost::Message;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// The largest response frame accepted: a scan answer is bounded by the rows asked for, and
/// one row of large cells stays far below this. A peer announcing more is refused before
/// anything is allocated.
pub const MAX_RESPONSE_FRAME: usize = 512 << 20;

/// How long connecting, and each read or write, may take.
const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a call failed.
#[derive(Debug)]
pub enum RpcError {
    /// The connection could not be made, or broke: the call may be retried on a new one.
    Io(String),
    /// The server answered with an exception (HBase's Java class name and its text).
    Remote { class: String, text: String },
    /// The answer could not be read: not an HBase server, or a broken one.
    Protocol(String),
}

impl RpcError {
    /// The exception's class name without its package.
    pub fn short_class(&self) -> &str {
        match self {
            RpcError::Remote { class, .. } => class.rsplit('.').next().unwrap_or(class),
            _ => "",
        }
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RpcError::Io(e) | RpcError::Protocol(e) => f.write_str(e),
            RpcError::Remote { class, text } => {
                // The text is a Java stack trace; its first line says what happened.
                let first = text.lines().next().unwrap_or_default();
                write!(f, "{class}: {first}")
            }
        }
    }
}

/// A connection to one service of one server.
pub struct RpcConn {
    stream: TcpStream,
    addr: String,
    next_call: u32,
}

impl RpcConn {
    /// Connects to `addr` (HOST:PORT) for `service` (`ClientService`, `ClientMetaService`)
    /// as `user`.
    pub fn open(addr: &str, service: &str, user: &str) -> Result<RpcConn, RpcError> {
        let io = |e: std::io::Error| RpcError::Io(format!("{addr}: {e}"));
        let target = addr
            .to_socket_addrs()
            .map_err(io)?
            .next()
            .ok_or_else(|| RpcError::Io(format!("{addr}: the name resolves to no address")))?;
        let mut stream = TcpStream::connect_timeout(&target, IO_TIMEOUT).map_err(io)?;
        stream.set_read_timeout(Some(IO_TIMEOUT)).map_err(io)?;
        stream.set_write_timeout(Some(IO_TIMEOUT)).map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        let mut out = BytesMut::new();
        out.extend_from_slice(&hbase_wire::HBAS_MAGIC);
        out.extend_from_slice(&[hbase_wire::RPC_VERSION, hbase_wire::AUTH_SIMPLE]);
        let header = hbase::ConnectionHeader {
            user_info: Some(hbase::UserInformation {
                effective_user: user.to_string(),
                real_user: None,
            }),
            service_name: Some(service.to_string()),
            cell_block_codec_class: Some(hbase_wire::KEY_VALUE_CODEC.to_string()),
            ..Default::default()
        };
        hbase_wire::encode_connection_header(&mut out, &header);
        stream.write_all(&out).map_err(io)?;
        Ok(RpcConn {
            stream,
            addr: addr.to_string(),
            next_call: 1,
        })
    }

    /// Calls `method` with `param`: the decoded answer and its cell block.
    pub fn call<R: Message + Default>(
        &mut self,
        method: &str,
        param: &impl Message,
    ) -> Result<(R, Bytes), RpcError> {
        let call_id = self.next_call;
        self.next_call = self.next_call.wrapping_add(1).max(1);
        let mut out = BytesMut::new();
        hbase_wire::encode_request(&mut out, call_id, method, param, &[]);
        let addr = &self.addr;
        self.stream
            .write_all(&out)
            .map_err(|e| RpcError::Io(format!("{addr}: sending {method}: {e}")))?;
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).map_err(|e| {
            RpcError::Io(format!("{addr}: waiting for the answer to {method}: {e}"))
        })?;
        let len = u32::from_be_bytes(len) as usize;
        if len > MAX_RESPONSE_FRAME {
            return Err(RpcError::Protocol(format!(
                "{addr}: an answer to {method} of {len} bytes, over the {MAX_RESPONSE_FRAME}-byte limit"
            )));
        }
        let mut body = vec![0u8; len];
        self.stream
            .read_exact(&mut body)
            .map_err(|e| RpcError::Io(format!("{addr}: reading the answer to {method}: {e}")))?;
        let (header, param, cells) = hbase_wire::decode_response(Bytes::from(body))
            .map_err(|e| RpcError::Protocol(format!("{addr}: the answer to {method}: {e}")))?;
        if header.call_id != Some(call_id) {
            return Err(RpcError::Protocol(format!(
                "{addr}: an answer to call {:?} where call {call_id} ({method}) was waited for",
                header.call_id
            )));
        }
        if let Some(e) = header.exception {
            return Err(RpcError::Remote {
                class: e.exception_class_name.unwrap_or_default(),
                text: e.stack_trace.unwrap_or_default(),
            });
        }
        let answer = R::decode(param)
            .map_err(|e| RpcError::Protocol(format!("{addr}: the answer to {method}: {e}")))?;
        Ok((answer, cells))
    }
}
