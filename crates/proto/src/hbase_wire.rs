//! HBase 2.x RPC framing: pure functions (no IO) for Cellar's HBase-compatible front end.
//!
//! Facts checked against HBase 2.6.4 (`RpcClient`, `RpcConnection` in hbase-client;
//! `ServerRpcConnection`, `ServerCall` in hbase-server; `RPC.proto`):
//!
//! - A connection opens with a 6-byte preamble: `"HBas"`, version `0`, auth byte (`0x50` =
//!   SIMPLE). Two other 6-byte preambles exist: [`REGISTRY_PREAMBLE`] (`"Regist"`, a 2.6
//!   client asking for the cluster id before anything else) and [`SECURITY_PREAMBLE`]
//!   (`"Securi"`, asking for the server's Kerberos principal). The server checks them in that
//!   order: registry, security, then the `HBas` magic, the version, the auth byte.
//! - Preamble answers are ordinary response frames with `call_id = -1`. `call_id` is a
//!   `uint32` on the wire, so Java's `-1` is the 5-byte varint `ff ff ff ff 0f`, i.e.
//!   [`PREAMBLE_CALL_ID`] (`u32::MAX`). The registry preamble is answered with a
//!   `GetConnectionRegistryResponse{cluster_id}` and the connection is closed; the security
//!   preamble, with security off, with `SecurityNotEnabledException` (the connection stays
//!   open for the real `HBas` preamble). A bad magic gets `FatalConnectionException`, a wrong
//!   version `WrongVersionException`, an unknown auth byte `BadAuthException`; then close.
//! - After `HBas…` the client sends a u32 big-endian length and the `ConnectionHeader`
//!   (written whole, not varint-delimited). With SIMPLE auth the server answers nothing.
//! - Each call is `u32 BE length | delimited RequestHeader | delimited param | cell block`;
//!   the cell block is exactly `cell_block_meta.length` bytes. HBase refuses a header without
//!   `request_param = true` (DoNotRetryIOException), so a param always follows in practice.
//! - Each response is `u32 BE length | delimited ResponseHeader | delimited param | cell
//!   block`; with `exception` set there is no param. `ExceptionResponse` carries the Java
//!   class name and, in `stack_trace`, the text; the Java client rebuilds a
//!   `RemoteWithExtrasException(class, stack_trace, …)` and shows that text. HBase always
//!   sets `do_not_retry` (true for `DoNotRetryIOException` subclasses).
//!
//! The cell block layout (KeyValueCodec) is [`crate::cellblock`]'s.

use crate::frame::{encode_frame, encode_frame_raw, take_delimited, FrameError};
use crate::hbase::{
    CellBlockMeta, ConnectionHeader, ExceptionResponse, RequestHeader, ResponseHeader,
};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::Message;

/// The first four bytes of an HBase RPC connection.
pub const HBAS_MAGIC: [u8; 4] = *b"HBas";
/// The only RPC version HBase 2.x speaks.
pub const RPC_VERSION: u8 = 0;
/// Auth byte of SIMPLE authentication (80).
pub const AUTH_SIMPLE: u8 = 0x50;
/// `RpcClient.REGISTRY_PREAMBLE_HEADER`: the bytes `R e g i s t`.
pub const REGISTRY_PREAMBLE: [u8; 6] = *b"Regist";
/// `RpcClient.SECURITY_PREAMBLE_HEADER`: the bytes `S e c u r i`.
pub const SECURITY_PREAMBLE: [u8; 6] = *b"Securi";
/// The call id of preamble answers: Java's `-1` in a `uint32` field.
pub const PREAMBLE_CALL_ID: u32 = u32::MAX;
/// The cell block codec the Java client uses by default (what [`crate::cellblock`] speaks).
pub const KEY_VALUE_CODEC: &str = "org.apache.hadoop.hbase.codec.KeyValueCodec";

/// What a connection's first six bytes ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preamble {
    /// `HBas`, version 0, this auth byte (SIMPLE is [`AUTH_SIMPLE`]; others need SASL).
    Hbase { auth: u8 },
    /// The connection registry preamble: answer the cluster id, then close.
    Registry,
    /// The security preamble: with security off, answer `SecurityNotEnabledException`.
    Security,
    /// `HBas` with an RPC version other than 0.
    WrongVersion(u8),
    /// Anything else (not HBase, or garbage).
    Bad([u8; 6]),
}

/// Classifies a connection preamble in the order HBase's server does.
pub fn classify_preamble(p: &[u8; 6]) -> Preamble {
    if *p == REGISTRY_PREAMBLE {
        Preamble::Registry
    } else if *p == SECURITY_PREAMBLE {
        Preamble::Security
    } else if p[..4] != HBAS_MAGIC {
        Preamble::Bad(*p)
    } else if p[4] != RPC_VERSION {
        Preamble::WrongVersion(p[4])
    } else {
        Preamble::Hbase { auth: p[5] }
    }
}

/// Decodes the connection header that follows the preamble. `body` is the bytes after its
/// u32 BE length prefix.
pub fn decode_connection_header(body: Bytes) -> Result<ConnectionHeader, FrameError> {
    ConnectionHeader::decode(body)
        .map_err(|e| FrameError::Malformed(format!("connection header: {e}")))
}

/// Appends a connection header (u32 BE length, then the message), as a client sends it.
pub fn encode_connection_header(out: &mut BytesMut, header: &ConnectionHeader) {
    let len = header.encoded_len();
    out.reserve(4 + len);
    out.put_u32(len as u32);
    // Encoding into a BytesMut with reserved room cannot fail.
    let _ = header.encode(out);
}

/// One decoded call: its header, the param message's bytes (empty when the header says no
/// param follows) and its cell block (empty when it has none). Both share the frame's buffer.
#[derive(Debug, Clone)]
pub struct HbaseRequest {
    pub header: RequestHeader,
    pub param: Bytes,
    pub cellblock: Bytes,
}

/// Takes the cell block `meta` announces off `body`, which must then be empty.
fn take_cell_block(body: &mut Bytes, meta: Option<&CellBlockMeta>) -> Result<Bytes, FrameError> {
    let len = meta.and_then(|m| m.length).unwrap_or(0) as usize;
    if len > body.remaining() {
        return Err(FrameError::Malformed(format!(
            "cell block of {len} bytes overruns the frame ({} left)",
            body.remaining()
        )));
    }
    let cellblock = body.split_to(len);
    if body.has_remaining() {
        return Err(FrameError::Malformed(format!(
            "{} unexpected bytes after the cell block of {len} bytes",
            body.remaining()
        )));
    }
    Ok(cellblock)
}

/// Decodes one request frame's body (after its u32 BE length): varint-delimited
/// `RequestHeader`, varint-delimited param (present when `header.request_param`), then
/// exactly `cell_block_meta.length` bytes of cell block. Errors name what is wrong.
pub fn decode_request(mut body: Bytes) -> Result<HbaseRequest, FrameError> {
    let header_bytes = take_delimited(&mut body, "request header")?;
    let header = RequestHeader::decode(header_bytes)
        .map_err(|e| FrameError::Malformed(format!("request header: {e}")))?;
    let param = if header.request_param() {
        take_delimited(&mut body, "request param")?
    } else {
        Bytes::new()
    };
    let cellblock = take_cell_block(&mut body, header.cell_block_meta.as_ref())?;
    Ok(HbaseRequest {
        header,
        param,
        cellblock,
    })
}

fn cell_block_meta(cellblock: &[u8]) -> Option<CellBlockMeta> {
    (!cellblock.is_empty()).then_some(CellBlockMeta {
        length: Some(cellblock.len() as u32),
    })
}

/// Appends a whole response frame: u32 BE length, delimited `ResponseHeader{call_id,
/// cell_block_meta when the cell block is non-empty}`, the delimited param (already encoded),
/// the cell block.
pub fn encode_response(out: &mut BytesMut, call_id: u32, param: &[u8], cellblock: &[u8]) {
    let header = ResponseHeader {
        call_id: Some(call_id),
        exception: None,
        cell_block_meta: cell_block_meta(cellblock),
    };
    encode_frame_raw(out, &header, param, cellblock)
}

/// Appends an exception response frame: `ResponseHeader{call_id, exception{class name,
/// stack_trace, do_not_retry}}` and no param. HBase's stack trace begins `class: message`;
/// the Java client makes the whole text the exception's message, so the shell's `ERROR:`
/// lines name the class. Cellar sends that first line. `class` must be the Java class name
/// the client acts on, e.g. `org.apache.hadoop.hbase.NotServingRegionException`.
pub fn encode_exception(
    out: &mut BytesMut,
    call_id: u32,
    class: &str,
    message: &str,
    do_not_retry: bool,
) {
    let header = ResponseHeader {
        call_id: Some(call_id),
        exception: Some(ExceptionResponse {
            exception_class_name: Some(class.to_owned()),
            stack_trace: Some(format!("{class}: {message}")),
            do_not_retry: Some(do_not_retry),
            ..Default::default()
        }),
        cell_block_meta: None,
    };
    let len = header.encoded_len();
    let body = prost::length_delimiter_len(len) + len;
    out.reserve(4 + body);
    out.put_u32(body as u32);
    // Encoding into a BytesMut with reserved room cannot fail.
    let _ = header.encode_length_delimited(out);
}

/// Appends a request frame as the Java client writes it (`request_param = true`; a cell
/// block meta when `cellblock` is non-empty). For tests and Rust-side test clients.
pub fn encode_request(
    out: &mut BytesMut,
    call_id: u32,
    method: &str,
    param: &impl Message,
    cellblock: &[u8],
) {
    let header = RequestHeader {
        call_id: Some(call_id),
        method_name: Some(method.to_owned()),
        request_param: Some(true),
        cell_block_meta: cell_block_meta(cellblock),
        ..Default::default()
    };
    encode_frame(out, &header, param, cellblock)
}

/// Decodes a response frame's body (after its u32 BE length) into its header, param bytes
/// and cell block. A response carrying an exception has neither param nor cell block.
pub fn decode_response(mut body: Bytes) -> Result<(ResponseHeader, Bytes, Bytes), FrameError> {
    let header_bytes = take_delimited(&mut body, "response header")?;
    let header = ResponseHeader::decode(header_bytes)
        .map_err(|e| FrameError::Malformed(format!("response header: {e}")))?;
    if header.exception.is_some() {
        if body.has_remaining() {
            return Err(FrameError::Malformed(format!(
                "{} unexpected bytes after an exception response header",
                body.remaining()
            )));
        }
        return Ok((header, Bytes::new(), Bytes::new()));
    }
    let param = take_delimited(&mut body, "response param")?;
    let cellblock = take_cell_block(&mut body, header.cell_block_meta.as_ref())?;
    Ok((header, param, cellblock))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hbase::{
        region_specifier::RegionSpecifierType, Get, GetConnectionRegistryResponse, GetRequest,
        RegionSpecifier, UserInformation,
    };

    /// Splits a frame into its body, checking the u32 length prefix.
    fn body_of(frame: BytesMut) -> Bytes {
        let mut frame = frame.freeze();
        let len = frame.get_u32() as usize;
        assert_eq!(len, frame.len(), "length prefix covers the rest");
        frame
    }

    fn malformed(r: Result<HbaseRequest, FrameError>) -> String {
        match r {
            Err(FrameError::Malformed(m)) => m,
            other => panic!("expected Malformed, got {other:?}"),
        }
    }

    // Field numbers of the golden bytes: RPC.proto (RequestHeader call_id=1, method_name=3,
    // request_param=4; ResponseHeader call_id=1, exception=2; ExceptionResponse
    // exception_class_name=1, stack_trace=2, do_not_retry=5), HBase.proto (RegionSpecifier
    // type=1, value=2; REGION_NAME=1), Client.proto (GetRequest region=1, get=2; Get row=1),
    // Registry.proto (GetConnectionRegistryResponse cluster_id=1), all HBase 2.6.
    #[test]
    fn request_header_and_get_request_golden_bytes() {
        let get = GetRequest {
            region: RegionSpecifier {
                r#type: RegionSpecifierType::RegionName as i32,
                value: Bytes::from_static(b"r1"),
            },
            get: Get {
                row: Bytes::from_static(b"k"),
                ..Default::default()
            },
        };
        let mut out = BytesMut::new();
        encode_request(&mut out, 1, "Get", &get, &[]);
        let expected: &[u8] = &[
            0, 0, 0, 24, // frame length
            9,  // header length
            0x08, 1, // call_id = 1
            0x1a, 3, b'G', b'e', b't', // method_name = "Get"
            0x20, 1,  // request_param = true
            13, // param length
            0x0a, 6, 0x08, 1, 0x12, 2, b'r', b'1', // region {REGION_NAME, "r1"}
            0x12, 3, 0x0a, 1, b'k', // get {row "k"}
        ];
        assert_eq!(&out[..], expected);
        let req = decode_request(body_of(out)).expect("decodes");
        assert_eq!(req.header.method_name(), "Get");
        assert_eq!(req.header.call_id(), 1);
        assert_eq!(GetRequest::decode(req.param).expect("param"), get);
        assert!(req.cellblock.is_empty());
    }

    #[test]
    fn exception_golden_bytes() {
        let mut out = BytesMut::new();
        encode_exception(&mut out, 5, "X", "m", true);
        let expected: &[u8] = &[
            0, 0, 0, 16, // frame length
            15, // header length
            0x08, 5, // call_id = 5
            0x12, 11, // exception
            0x0a, 1, b'X', // exception_class_name
            0x12, 4, b'X', b':', b' ', b'm', // stack_trace: "class: message"
            0x28, 1, // do_not_retry
        ];
        assert_eq!(&out[..], expected);
        let (h, param, cells) = decode_response(body_of(out)).expect("decodes");
        let e = h.exception.expect("exception");
        assert_eq!(
            (e.exception_class_name(), e.stack_trace(), e.do_not_retry()),
            ("X", "X: m", true)
        );
        assert!(param.is_empty() && cells.is_empty());
    }

    #[test]
    fn preamble_answer_uses_call_id_minus_one_as_uint32() {
        let resp = GetConnectionRegistryResponse {
            cluster_id: "c".into(),
        };
        let mut out = BytesMut::new();
        encode_response(&mut out, PREAMBLE_CALL_ID, &resp.encode_to_vec(), &[]);
        let expected: &[u8] = &[
            0, 0, 0, 11, // frame length
            6, 0x08, 0xff, 0xff, 0xff, 0xff, 0x0f, // header: call_id = -1 (5-byte varint)
            3, 0x0a, 1, b'c', // cluster_id = "c"
        ];
        assert_eq!(&out[..], expected);
        let (h, param, _) = decode_response(body_of(out)).expect("decodes");
        assert_eq!(h.call_id() as i32, -1);
        assert_eq!(
            GetConnectionRegistryResponse::decode(param).expect("param"),
            resp
        );
    }

    #[test]
    fn request_with_cell_block_round_trips() {
        let mut cells = BytesMut::new();
        crate::cellblock::put_cell(
            &mut cells,
            b"row",
            b"f",
            b"q",
            7,
            cellar_model::CellType::Put,
            b"value",
        );
        let param = GetRequest::default();
        let mut out = BytesMut::new();
        encode_request(&mut out, 42, "Multi", &param, &cells);
        let req = decode_request(body_of(out)).expect("decodes");
        assert_eq!(req.header.call_id(), 42);
        assert_eq!(
            req.header.cell_block_meta.and_then(|m| m.length),
            Some(cells.len() as u32)
        );
        assert_eq!(&req.cellblock[..], &cells[..]);

        let mut out = BytesMut::new();
        encode_response(&mut out, 42, b"\x08\x01", &cells);
        let (h, p, c) = decode_response(body_of(out)).expect("decodes");
        assert_eq!(h.call_id(), 42);
        assert_eq!(&p[..], b"\x08\x01");
        assert_eq!(&c[..], &cells[..]);
    }

    #[test]
    fn bad_request_frames_are_malformed_and_named() {
        let mut out = BytesMut::new();
        encode_request(&mut out, 3, "Scan", &GetRequest::default(), b"cellbytes");
        let body = body_of(out);
        // Every truncation is an error, never a panic.
        for cut in 0..body.len() {
            let m = malformed(decode_request(body.slice(..cut)));
            assert!(!m.is_empty());
        }
        // Header claims a longer cell block than is present.
        let m = malformed(decode_request(body.slice(..body.len() - 2)));
        assert!(m.contains("cell block of 9 bytes overruns"), "{m}");
        // Trailing bytes after the announced cell block.
        let mut longer = BytesMut::from(&body[..]);
        longer.put_slice(b"xx");
        let m = malformed(decode_request(longer.freeze()));
        assert!(m.contains("2 unexpected bytes"), "{m}");
        // Garbage varints: eleven continuation bytes.
        let m = malformed(decode_request(Bytes::from_static(&[0xff; 11])));
        assert!(m.contains("request header"), "{m}");
        // A header length past the end.
        let m = malformed(decode_request(Bytes::from_static(&[5, 0x08])));
        assert!(m.contains("request header of 5 bytes overruns"), "{m}");
        // Header bytes that are not a RequestHeader.
        let m = malformed(decode_request(Bytes::from_static(&[2, 0x0f, 0xff])));
        assert!(m.starts_with("request header:"), "{m}");
        // Param length past the end.
        let m = malformed(decode_request(Bytes::from_static(&[2, 0x20, 1, 9, 0])));
        assert!(m.contains("request param of 9 bytes overruns"), "{m}");
        assert!(matches!(
            decode_response(Bytes::from_static(&[0xff; 3])),
            Err(FrameError::Malformed(_))
        ));
    }

    #[test]
    fn request_without_param_has_empty_param() {
        let header = RequestHeader {
            call_id: Some(9),
            method_name: Some("Get".into()),
            ..Default::default()
        };
        let body = Bytes::from(header.encode_length_delimited_to_vec());
        let req = decode_request(body).expect("decodes");
        assert!(!req.header.request_param());
        assert!(req.param.is_empty() && req.cellblock.is_empty());
    }

    #[test]
    fn connection_header_round_trips() {
        let header = ConnectionHeader {
            user_info: Some(UserInformation {
                effective_user: "alice".into(),
                real_user: None,
            }),
            service_name: Some("ClientService".into()),
            cell_block_codec_class: Some(KEY_VALUE_CODEC.into()),
            ..Default::default()
        };
        let mut out = BytesMut::new();
        encode_connection_header(&mut out, &header);
        let decoded = decode_connection_header(body_of(out)).expect("decodes");
        assert_eq!(decoded, header);
        assert!(matches!(
            decode_connection_header(Bytes::from_static(&[0x12, 40, b'C'])),
            Err(FrameError::Malformed(m)) if m.starts_with("connection header")
        ));
    }

    #[test]
    fn preambles_are_classified() {
        assert_eq!(
            classify_preamble(b"HBas\x00\x50"),
            Preamble::Hbase { auth: AUTH_SIMPLE }
        );
        assert_eq!(
            classify_preamble(b"HBas\x00\x51"),
            Preamble::Hbase { auth: 0x51 }
        );
        assert_eq!(
            classify_preamble(b"HBas\x01\x50"),
            Preamble::WrongVersion(1)
        );
        assert_eq!(classify_preamble(b"Regist"), Preamble::Registry);
        assert_eq!(classify_preamble(b"Securi"), Preamble::Security);
        assert_eq!(classify_preamble(b"GET / "), Preamble::Bad(*b"GET / "));
        assert_eq!(classify_preamble(b"Regisx"), Preamble::Bad(*b"Regisx"));
        assert_eq!(classify_preamble(&[0xff; 6]), Preamble::Bad([0xff; 6]));
    }
}
