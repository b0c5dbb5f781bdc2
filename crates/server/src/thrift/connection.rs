//! One Thrift client connection. HBase's Thrift server is started for one transport and one
//! protocol; the gateway takes each connection's from its first bytes, so one port serves
//! them all:
//!
//! - `0x80 0x01`: a strict binary message, unframed ("buffered");
//! - `0x82`: a compact message, unframed;
//! - anything else: a 4-byte big-endian frame length, then a binary or compact message.
//!
//! Calls on a connection are answered in order, one at a time (Thrift clients wait for each
//! answer). Bytes that are not a Thrift call close the connection after a log line naming
//! the peer and the problem; the gateway goes on serving everyone else.

use super::protocol::{self, Limits, Protocol, Scanner};
use super::Gateway;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

/// How a connection's messages are delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Framed,
    Buffered,
}

/// A connection's transport and protocol, from its first bytes; `None` until enough arrived.
pub fn detect(first: &[u8]) -> Option<Result<(Framing, Protocol), String>> {
    match first {
        [] => None,
        [0x80, ..] => Some(Ok((Framing::Buffered, Protocol::Binary))),
        [0x82, ..] => Some(Ok((Framing::Buffered, Protocol::Compact))),
        [_, _, _, _, b, ..] => Some(match *b {
            0x80 => Ok((Framing::Framed, Protocol::Binary)),
            0x82 => Ok((Framing::Framed, Protocol::Compact)),
            _ if first.starts_with(b"GET ") || first.starts_with(b"POST") => {
                Err("an HTTP request: the gateway speaks Thrift over TCP (framed or buffered), not Thrift over HTTP".into())
            }
            _ => Err(format!(
                "not a Thrift message (first bytes {:02x?})",
                first.get(..8).unwrap_or(first)
            )),
        }),
        _ => None,
    }
}

/// Serves one connection's calls for `user` (its certificate's, else `thrift.user`; `None`:
/// every call is refused, naming what is missing).
pub async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    peer: SocketAddr,
    user: Option<Arc<str>>,
    gateway: Arc<Gateway>,
    mut stop: watch::Receiver<bool>,
) {
    let max = gateway.config.max_message_bytes as usize;
    // A call's values may take twice its size limit in memory (a string is its bytes; a
    // number, bool or empty struct 32 bytes): beyond that, a list of one-byte values could
    // take 32 times the call's size once decoded.
    let limits = Limits {
        max_string: max,
        max_decoded: max.saturating_mul(2),
        ..Limits::default()
    };
    let mut buf: Vec<u8> = Vec::with_capacity(8 << 10);
    let mut out: Vec<u8> = Vec::with_capacity(8 << 10);
    let mut mode = None;
    let mut unframed: Option<Unframed> = None;
    loop {
        // What the buffer holds so far: a whole call, or a need for more bytes.
        let next = match mode {
            None => match detect(&buf) {
                None => Ok(None),
                Some(Ok(m)) => {
                    tracing::debug!(%peer, framing = ?m.0, protocol = %m.1, "thrift connection");
                    mode = Some(m);
                    continue;
                }
                Some(Err(e)) => Err(e),
            },
            Some((Framing::Framed, p)) => take_frame(&buf, p, max, limits),
            Some((Framing::Buffered, p)) => {
                let u = unframed.get_or_insert_with(|| Unframed::new(p, max, limits));
                u.next(&buf)
            }
        };
        match next {
            Ok(Some((msg, used))) => {
                buf.drain(..used);
                let Some((framing, protocol)) = mode else {
                    return;
                };
                let started = Instant::now();
                let reply = super::handler::call(&gateway, user.as_ref(), msg).await;
                let m = &gateway.metrics;
                m.calls.fetch_add(1, Ordering::Relaxed);
                m.call_micros
                    .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
                let Some(reply) = reply else {
                    continue; // oneway
                };
                if reply.failed {
                    m.errors.fetch_add(1, Ordering::Relaxed);
                }
                out.clear();
                if framing == Framing::Framed {
                    out.extend_from_slice(&[0; 4]);
                }
                protocol::write_message(
                    &mut out,
                    protocol,
                    &reply.name,
                    reply.kind,
                    reply.seq,
                    &reply.body,
                );
                if framing == Framing::Framed {
                    let n = (out.len() - 4) as u32;
                    if let Some(len) = out.first_chunk_mut::<4>() {
                        *len = n.to_be_bytes();
                    }
                }
                if let Err(e) = stream.write_all(&out).await {
                    tracing::debug!(%peer, error = %e, "thrift connection closed while answering");
                    return;
                }
                if out.capacity() > 4 << 20 {
                    out = Vec::with_capacity(8 << 10);
                }
            }
            Ok(None) => {
                if buf.capacity() - buf.len() < 4096 {
                    buf.reserve(buf.len().max(8 << 10));
                }
                let read = tokio::select! {
                    _ = stop.changed() => return,
                    r = stream.read_buf(&mut buf) => r,
                };
                match read {
                    Ok(0) => {
                        if !buf.is_empty() {
                            tracing::debug!(%peer, bytes = buf.len(), "thrift client closed mid-call");
                        }
                        return;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "thrift connection failed");
                        return;
                    }
                }
            }
            Err(e) => {
                gateway
                    .metrics
                    .protocol_errors
                    .fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%peer, error = %e, "thrift connection closed");
                return;
            }
        }
    }
}

/// A whole frame's message, if the frame has arrived.
fn take_frame(
    buf: &[u8],
    p: Protocol,
    max: usize,
    limits: Limits,
) -> Result<Option<(protocol::Message, usize)>, String> {
    let Some(&head) = buf.first_chunk::<4>() else {
        return Ok(None);
    };
    let n = u32::from_be_bytes(head) as usize;
    if n > max {
        return Err(format!(
            "a frame of {n} bytes is larger than thrift.max_message_bytes ({max} bytes)"
        ));
    }
    let Some(frame) = buf.get(4..4 + n) else {
        return Ok(None);
    };
    match protocol::read_message(frame, p, limits) {
        Ok((m, used)) if used == n => Ok(Some((m, 4 + n))),
        Ok((_, used)) => Err(format!(
            "a frame of {n} bytes holds a message of {used} bytes"
        )),
        Err(protocol::Error::Incomplete) => Err(format!(
            "the message ends before its frame of {n} bytes does"
        )),
        Err(protocol::Error::Invalid(e)) => Err(e),
    }
}

/// The calls of an unframed connection, found in its bytes as they arrive: a [`Scanner`]
/// finds where each ends, going on from where the previous read left it, and the call is
/// decoded once whole. (Decoding the buffer from its start on every read was quadratic in a
/// call's size.)
pub struct Unframed {
    protocol: Protocol,
    max: usize,
    limits: Limits,
    scanner: Scanner,
    /// Bytes the scanner and the decoder examined, over every call (a measure of the work).
    pub examined: u64,
}

impl Unframed {
    pub fn new(protocol: Protocol, max: usize, limits: Limits) -> Unframed {
        Unframed {
            protocol,
            max,
            limits,
            scanner: Scanner::new(protocol, limits),
            examined: 0,
        }
    }

    /// The call at the start of `buf` and the bytes it takes, once it has all arrived. `buf`
    /// holds what the previous call's `buf` held, less a call returned, plus what arrived.
    pub fn next(&mut self, buf: &[u8]) -> Result<Option<(protocol::Message, usize)>, String> {
        let before = self.scanner.examined;
        let found = self.scanner.advance(buf);
        self.examined += self.scanner.examined - before;
        let n = match found {
            Ok(Some(n)) => n,
            Ok(None) if buf.len() > self.max => {
                return Err(format!(
                    "a call larger than thrift.max_message_bytes ({} bytes)",
                    self.max
                ))
            }
            Ok(None) => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        self.scanner.reset();
        if n > self.max {
            return Err(format!(
                "a call of {n} bytes is larger than thrift.max_message_bytes ({} bytes)",
                self.max
            ));
        }
        self.examined += n as u64;
        let Some(call) = buf.get(..n) else {
            return Err(format!(
                "a call of {n} bytes is longer than the {} bytes buffered (a defect of the gateway)",
                buf.len()
            ));
        };
        match protocol::read_message(call, self.protocol, self.limits) {
            Ok((m, used)) if used == n => Ok(Some((m, n))),
            Ok((_, used)) => Err(format!(
                "a call of {n} bytes was read as {used} (a defect of the gateway)"
            )),
            Err(e) => Err(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::protocol::{MessageType, Value};
    use super::*;

    #[test]
    fn transports_and_protocols_are_told_apart() {
        assert_eq!(detect(&[]), None);
        assert_eq!(
            detect(&[0x80, 1]),
            Some(Ok((Framing::Buffered, Protocol::Binary)))
        );
        assert_eq!(
            detect(&[0x82]),
            Some(Ok((Framing::Buffered, Protocol::Compact)))
        );
        assert_eq!(detect(&[0, 0, 0]), None);
        assert_eq!(
            detect(&[0, 0, 0, 20, 0x80]),
            Some(Ok((Framing::Framed, Protocol::Binary)))
        );
        assert_eq!(
            detect(&[0, 0, 0, 20, 0x82]),
            Some(Ok((Framing::Framed, Protocol::Compact)))
        );
        let e = detect(b"GET / HTTP/1.1")
            .expect("a value")
            .expect_err("an error");
        assert!(e.contains("HTTP"), "{e}");
        let e = detect(b"hello world")
            .expect("a value")
            .expect_err("an error");
        assert!(e.contains("not a Thrift message"), "{e}");
    }

    #[test]
    fn frames_are_checked_against_their_message() {
        let mut msg = Vec::new();
        protocol::write_message(&mut msg, Protocol::Binary, "x", MessageType::Call, 1, &[]);
        let mut framed = (msg.len() as u32).to_be_bytes().to_vec();
        framed.extend_from_slice(&msg);
        let l = Limits::default();
        assert!(
            take_frame(&framed[..framed.len() - 1], Protocol::Binary, 1 << 20, l)
                .expect("a value")
                .is_none()
        );
        let (m, used) = take_frame(&framed, Protocol::Binary, 1 << 20, l)
            .expect("a value")
            .expect("a value");
        assert_eq!((m.name.as_str(), used), ("x", framed.len()));
        let e = take_frame(&framed, Protocol::Binary, 4, l).expect_err("an error");
        assert!(e.contains("max_message_bytes"), "{e}");
        // A frame longer than its message.
        let mut long = ((msg.len() + 2) as u32).to_be_bytes().to_vec();
        long.extend_from_slice(&msg);
        long.extend_from_slice(&[0, 0]);
        let e = take_frame(&long, Protocol::Binary, 1 << 20, l).expect_err("an error");
        assert!(e.contains("holds a message"), "{e}");
    }

    /// A mutateRows call of `n` mutations, as happybase sends it.
    fn mutate_rows(protocol: Protocol, n: usize) -> (Vec<u8>, Vec<(i16, Value)>) {
        use super::protocol::TType;
        let mutation = |i: usize| {
            Value::Struct(vec![
                (1, Value::Bool(false)),
                (2, Value::text(format!("cf:q{i}"))),
                (3, Value::text("value")),
                (4, Value::Bool(true)),
            ])
        };
        let batch = Value::Struct(vec![
            (1, Value::text("row")),
            (
                2,
                Value::List(TType::Struct, (0..n).map(mutation).collect()),
            ),
        ]);
        let body = vec![
            (1, Value::text("t")),
            (2, Value::List(TType::Struct, vec![batch])),
            (3, Value::Map(TType::Binary, TType::Binary, vec![])),
        ];
        let mut out = Vec::new();
        protocol::write_message(
            &mut out,
            protocol,
            "mutateRows",
            MessageType::Call,
            5,
            &body,
        );
        (out, body)
    }

    /// Two unframed calls arriving a few bytes at a time: each is found once whole, and the
    /// parser's work over all the reads is linear in the bytes (it used to parse the buffer
    /// again from its start on every read: quadratic).
    #[test]
    fn unframed_calls_arriving_in_pieces_are_parsed_in_linear_work() {
        for protocol in [Protocol::Binary, Protocol::Compact] {
            let (one, body) = mutate_rows(protocol, 400);
            let mut two = one.clone();
            two.extend_from_slice(&one);
            assert!(one.len() > 7000, "{}", one.len());
            for chunk in [1, 3, 100, 4096] {
                let mut u = Unframed::new(protocol, 1 << 20, Limits::default());
                let mut buf = Vec::new();
                let mut calls = 0;
                for piece in two.chunks(chunk) {
                    buf.extend_from_slice(piece);
                    while let Some((m, used)) = u.next(&buf).expect("a valid call") {
                        assert_eq!((used, &m.body), (one.len(), &body), "{protocol}");
                        buf.drain(..used);
                        calls += 1;
                    }
                }
                assert_eq!(
                    (calls, buf.len()),
                    (2, 0),
                    "{protocol} in pieces of {chunk}"
                );
                // Each byte is scanned once and decoded once; each read may also go over
                // the start of an item left unfinished by the previous one again (a field
                // header and its value's header or number: under 16 bytes here).
                let reads = two.len().div_ceil(chunk) as u64;
                let bound = 2 * two.len() as u64 + 16 * reads;
                assert!(
                    u.examined <= bound,
                    "{protocol} in pieces of {chunk}: {} bytes examined for {}, over {bound}",
                    u.examined,
                    two.len()
                );
            }
        }
    }
}
