//! Connection preamble and frames.
//!
//! A connection opens with the client sending [`PREAMBLE`] (`"CELR"`, the protocol version,
//! three zero bytes); the server answers with the same eight bytes or, if it cannot speak that
//! version, with an error frame (call id 0) and closes. Then each call is one frame each way:
//!
//! ```text
//! frame = u32 BE body_len | body
//! body  = varint header_len | header | varint param_len | param | cell block (the rest)
//! ```
//!
//! `header` is a `RequestHeader` / `ResponseHeader`, `param` the method's message (empty in a
//! response that carries an error), the cell block is [`crate::cellblock`]'s encoding.

use crate::pb::{RequestHeader, ResponseHeader};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::Message;

pub const PROTOCOL_VERSION: u8 = 1;
pub const PREAMBLE: [u8; 8] = [b'C', b'E', b'L', b'R', PROTOCOL_VERSION, 0, 0, 0];
/// Default bound of one frame's body, both ways (configurable on the server).
pub const DEFAULT_MAX_FRAME_BYTES: u32 = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("bad connection preamble {0:02x?}: expected \"CELR\" and version {PROTOCOL_VERSION}")]
    BadPreamble(Vec<u8>),
    #[error("unsupported protocol version {0} (this build speaks {PROTOCOL_VERSION})")]
    UnsupportedVersion(u8),
    #[error("malformed frame: {0}")]
    Malformed(String),
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge { len: u64, max: u64 },
}

/// Checks a peer's preamble.
pub fn check_preamble(p: &[u8; 8]) -> Result<(), FrameError> {
    if p[..4] != PREAMBLE[..4] || p[5..] != [0, 0, 0] {
        return Err(FrameError::BadPreamble(p.to_vec()));
    }
    if p[4] != PROTOCOL_VERSION {
        return Err(FrameError::UnsupportedVersion(p[4]));
    }
    Ok(())
}

/// Appends a frame: length prefix, delimited header, the parameter (`param_len` bytes, written
/// by `put_param` after its length), the cell block.
fn put_frame(
    out: &mut BytesMut,
    header: &impl Message,
    param_len: usize,
    put_param: impl FnOnce(&mut BytesMut),
    cellblock: &[u8],
) {
    let h = header.encoded_len();
    let body = prost::length_delimiter_len(h)
        + h
        + prost::length_delimiter_len(param_len)
        + param_len
        + cellblock.len();
    out.reserve(4 + body);
    out.put_u32(body as u32);
    // Encoding into a BytesMut with reserved room cannot fail.
    let _ = header.encode_length_delimited(out);
    let _ = prost::encode_length_delimiter(param_len, out);
    put_param(out);
    out.put_slice(cellblock);
}

/// Appends one whole frame (length prefix included).
pub fn encode_frame(
    out: &mut BytesMut,
    header: &impl Message,
    param: &impl Message,
    cellblock: &[u8],
) {
    put_frame(
        out,
        header,
        param.encoded_len(),
        |out| {
            let _ = param.encode(out);
        },
        cellblock,
    )
}

/// Appends a whole frame whose parameter is already encoded (a handler's reply).
pub fn encode_frame_raw(out: &mut BytesMut, header: &impl Message, param: &[u8], cellblock: &[u8]) {
    put_frame(
        out,
        header,
        param.len(),
        |out| out.put_slice(param),
        cellblock,
    )
}

/// Appends a request frame.
pub fn encode_request(
    out: &mut BytesMut,
    header: &RequestHeader,
    param: &impl Message,
    cellblock: &[u8],
) {
    encode_frame(out, header, param, cellblock)
}

/// Appends a response frame; an error response has an empty param.
pub fn encode_response(
    out: &mut BytesMut,
    header: &ResponseHeader,
    param: &impl Message,
    cellblock: &[u8],
) {
    encode_frame(out, header, param, cellblock)
}

/// A frame's body split into its parts; `param` and `cellblock` share the body's buffer.
#[derive(Debug, Clone)]
pub struct Parts {
    pub header: Bytes,
    pub param: Bytes,
    pub cellblock: Bytes,
}

pub(crate) fn take_delimited(body: &mut Bytes, what: &str) -> Result<Bytes, FrameError> {
    let len = prost::decode_length_delimiter(&mut *body)
        .map_err(|_| FrameError::Malformed(format!("bad {what} length")))?;
    if len > body.remaining() {
        return Err(FrameError::Malformed(format!(
            "{what} of {len} bytes overruns the frame ({} left)",
            body.remaining()
        )));
    }
    Ok(body.split_to(len))
}

/// Splits a frame body (without its length prefix).
pub fn split_body(mut body: Bytes) -> Result<Parts, FrameError> {
    let header = take_delimited(&mut body, "header")?;
    let param = take_delimited(&mut body, "parameter")?;
    Ok(Parts {
        header,
        param,
        cellblock: body,
    })
}

/// Decodes a request body: header, parameter bytes, cell block.
pub fn decode_request(body: Bytes) -> Result<(RequestHeader, Parts), FrameError> {
    let parts = split_body(body)?;
    let header = RequestHeader::decode(parts.header.clone())
        .map_err(|e| FrameError::Malformed(format!("request header: {e}")))?;
    Ok((header, parts))
}

/// Decodes a response body.
pub fn decode_response(body: Bytes) -> Result<(ResponseHeader, Parts), FrameError> {
    let parts = split_body(body)?;
    let header = ResponseHeader::decode(parts.header.clone())
        .map_err(|e| FrameError::Malformed(format!("response header: {e}")))?;
    Ok((header, parts))
}

/// The request header at the start of a body prefix, if the prefix holds all of it. Lets a
/// server answer an oversized request by call id while discarding the rest unread.
pub fn peek_request_header(prefix: &[u8]) -> Option<RequestHeader> {
    let mut b = prefix;
    let len = prost::decode_length_delimiter(&mut b).ok()?;
    RequestHeader::decode(b.get(..len)?).ok()
}

/// Decodes a method's message from its parameter bytes, naming the message on failure.
pub fn decode_param<M: Message + Default>(param: Bytes, what: &str) -> Result<M, FrameError> {
    M::decode(param).map_err(|e| FrameError::Malformed(format!("{what}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::{GetRequest, Method, RegionRef};

    #[test]
    fn request_round_trips_and_truncation_is_malformed() {
        let header = RequestHeader {
            call_id: 7,
            method: Method::Get as i32,
            timeout_ms: 0,
            ..Default::default()
        };
        let param = GetRequest {
            region: Some(RegionRef {
                table: "t".into(),
                region_id: 3,
            }),
            get: None,
        };
        let mut out = BytesMut::new();
        encode_request(&mut out, &header, &param, b"cells");
        let mut frame = out.freeze();
        let len = frame.get_u32() as usize;
        assert_eq!(len, frame.len());
        let (h, parts) = decode_request(frame.clone()).expect("decodes");
        assert_eq!(h, header);
        assert_eq!(
            decode_param::<GetRequest>(parts.param, "get").expect("param"),
            param
        );
        assert_eq!(&parts.cellblock[..], b"cells");
        assert_eq!(
            peek_request_header(&frame[..12]).map(|h| h.call_id),
            Some(7)
        );
        let cut = frame.split_to(5);
        assert!(matches!(split_body(cut), Err(FrameError::Malformed(_))));
    }

    #[test]
    fn preamble_checks() {
        check_preamble(&PREAMBLE).expect("ours");
        assert!(matches!(
            check_preamble(b"GET / HT"),
            Err(FrameError::BadPreamble(_))
        ));
        let mut v2 = PREAMBLE;
        v2[4] = 2;
        assert_eq!(check_preamble(&v2), Err(FrameError::UnsupportedVersion(2)));
    }
}
