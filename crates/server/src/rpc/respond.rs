//! Response frames and the handle a call answers through.
//!
//! A response is a head (length prefix, header, parameter) and, when the cell block is large,
//! a separate tail that is the handler's own `Bytes`: the writer sends it as is instead of
//! copying it into the frame.

use super::budget::Charge;
use super::limits::REFUSABLE_ANSWER_BYTES;
use super::transport::{Outgoing, Transport};
use super::Reply;
use crate::metrics::{Overload, RpcMetrics};
use bytes::{Bytes, BytesMut};
use cellar_proto::frame::encode_frame_raw;
use cellar_proto::pb;
use std::time::{Duration, Instant};
use tokio::sync::OwnedSemaphorePermit;

/// Cell blocks from this size on travel as their own buffer instead of being copied.
pub(crate) const ZERO_COPY_FROM: usize = 16 * 1024;

/// A call's way back to its connection: the connection's sink, the call's in-flight slot and
/// its in-flight bytes (its request's until answered, then its answer's until written, or,
/// over UCX, until handed to the progress thread).
pub(crate) struct Responder {
    pub sink: std::sync::Arc<dyn Transport>,
    pub permit: OwnedSemaphorePermit,
    pub charge: Charge,
}

impl Responder {
    /// Queues the frame for the writer; false if the connection is already gone. Never waits:
    /// handler threads answer through it.
    pub fn send(mut self, (head, tail): (Bytes, Bytes)) -> bool {
        self.charge.set((head.len() + tail.len()) as u64);
        self.sink.send(Outgoing {
            head,
            tail,
            _slot: Some(self.permit),
            _charge: Some(self.charge),
        })
    }

    /// [`Responder::send`] for a handler's answer to a call that only reads (GET): an answer
    /// that would take its connection or the server past the in-flight bound, while others of
    /// the connection's bytes are in flight, is dropped and the call answered SERVER_BUSY
    /// instead. Handlers answer every queued call whether or not the reader has stopped, so
    /// without this a client that pipelines big Gets and does not read would grow the server
    /// by every answer still queued; a read is safe to run again. Writes are never refused
    /// once applied (their answers are small).
    pub fn send_read(self, call_id: u64, frame: (Bytes, Bytes), metrics: &RpcMetrics) -> bool {
        let len = frame.0.len() + frame.1.len();
        if len >= REFUSABLE_ANSWER_BYTES
            && self
                .charge
                .budget()
                .answer_overflows(self.charge.bytes(), len as u64)
        {
            metrics.record_overload(Overload::InFlightBytes);
            metrics.record_error(pb::ErrorCode::ServerBusy);
            let busy = rpc_error(
                pb::ErrorCode::ServerBusy,
                format!(
                    "the answer of {len} bytes was dropped: the connection or the server holds as many unwritten answers as it may (rpc.max_connection_in_flight_bytes, rpc.max_in_flight_bytes); read the answers, retry after a backoff"
                ),
            );
            return self.send(error_frame(call_id, busy));
        }
        self.send(frame)
    }
}

pub(crate) fn rpc_error(code: pb::ErrorCode, message: impl Into<String>) -> pb::RpcError {
    pb::RpcError {
        code: code as i32,
        message: message.into(),
    }
}

/// The frame answering `call_id` with an error.
pub(crate) fn error_frame(call_id: u64, error: pb::RpcError) -> (Bytes, Bytes) {
    let header = pb::ResponseHeader {
        call_id,
        error: Some(error),
        timing: None,
    };
    let mut out = BytesMut::new();
    encode_frame_raw(&mut out, &header, &[], &[]);
    (out.freeze(), Bytes::new())
}

/// The frame answering `call_id` with a handler's reply; an INTERNAL error if the reply does
/// not fit a frame's 32-bit length.
pub(crate) fn reply_frame(call_id: u64, reply: Reply) -> (Bytes, Bytes) {
    reply_frame_with(call_id, reply, None)
}

/// The reply frame of a call that asked for the server's stage times (`want_timing`). The
/// frame is assembled twice, once to time the assembly and once more carrying that time, so
/// only timed calls pay for it.
pub(crate) fn timed_reply_frame(
    call_id: u64,
    reply: Reply,
    queue_wait: Duration,
    processing: Duration,
) -> (Bytes, Bytes) {
    let started = Instant::now();
    drop(reply_frame(call_id, reply.clone()));
    let serialization = started.elapsed();
    let nanos = |d: Duration| d.as_nanos().min(u128::from(u64::MAX)) as u64;
    let timing = pb::ServerTiming {
        queue_wait_ns: nanos(queue_wait),
        processing_ns: nanos(processing),
        serialization_ns: nanos(serialization),
    };
    reply_frame_with(call_id, reply, Some(timing))
}

fn reply_frame_with(
    call_id: u64,
    reply: Reply,
    timing: Option<pb::ServerTiming>,
) -> (Bytes, Bytes) {
    let header = pb::ResponseHeader {
        call_id,
        error: None,
        timing,
    };
    let size = reply.param.len() as u64 + reply.cellblock.len() as u64 + 64;
    if size > u64::from(u32::MAX) {
        return error_frame(
            call_id,
            rpc_error(
                pb::ErrorCode::Internal,
                format!(
                    "reply of {size} bytes does not fit a frame (limit {} bytes)",
                    u32::MAX
                ),
            ),
        );
    }
    let mut out = BytesMut::new();
    if reply.cellblock.len() < ZERO_COPY_FROM {
        encode_frame_raw(&mut out, &header, &reply.param, &reply.cellblock);
        return (out.freeze(), Bytes::new());
    }
    encode_frame_raw(&mut out, &header, &reply.param, &[]);
    // The prefix counted the body without the cell block that follows as the tail.
    let body =
        u32::from_be_bytes([out[0], out[1], out[2], out[3]]) as usize + reply.cellblock.len();
    out[..4].copy_from_slice(&(body as u32).to_be_bytes());
    (out.freeze(), reply.cellblock)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Buf;
    use cellar_proto::frame::decode_response;

    fn whole((head, tail): (Bytes, Bytes)) -> Bytes {
        let mut b = BytesMut::from(&head[..]);
        b.extend_from_slice(&tail);
        let mut b = b.freeze();
        let len = b.get_u32() as usize;
        assert_eq!(len, b.len());
        b
    }

    #[test]
    fn split_and_whole_replies_decode_the_same() {
        for size in [10, ZERO_COPY_FROM + 5] {
            let cells = Bytes::from(vec![7u8; size]);
            let reply = Reply {
                param: Bytes::from_static(b"\x08\x01"),
                cellblock: cells.clone(),
            };
            let (h, parts) = decode_response(whole(reply_frame(9, reply))).expect("decodes");
            assert_eq!(h.call_id, 9);
            assert!(h.error.is_none());
            assert_eq!(&parts.param[..], b"\x08\x01");
            assert_eq!(parts.cellblock, cells);
        }
        let (h, parts) = decode_response(whole(error_frame(
            3,
            rpc_error(pb::ErrorCode::ServerBusy, "busy"),
        )))
        .expect("decodes");
        assert_eq!(h.call_id, 3);
        assert_eq!(
            h.error.map(|e| e.code),
            Some(pb::ErrorCode::ServerBusy as i32)
        );
        assert!(parts.param.is_empty());
    }
}
