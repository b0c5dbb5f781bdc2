//! The native protocol over UCX (shared memory, RDMA, or UCX's own TCP), beside the TCP
//! listener: seed 000's hybrid design (`docs/design/0005-transport.md` §4).
//!
//! A client asks on its TCP connection (`TRANSPORT_HELLO`, carrying its UCX worker address);
//! the server answers with its own, and from then on the client's calls arrive as UCX messages
//! (one frame each, length prefix included) at the server's one worker, progressed by its own
//! thread (`cellar_ucx::link`). That thread serves each frame as the TCP reactor does
//! ([`super::route`]: decoded once, PING and refusals answered, Gets from memory answered
//! right there with no hand-off to another thread), queues the rest for the same handler pool
//! and runs puts that wait for a WAL round on the front end's runtime. The TCP connection stays
//! open as the control channel: when it closes, the UCX peer is closed and the connection's
//! scanners freed, as for any connection. A peer silent past the heartbeat limit is dropped.
//!
//! The same bounds as TCP: at most [`MAX_IN_FLIGHT_PER_CONNECTION`] calls per connection and
//! its requests and answers counted against the connection's and the front end's in-flight
//! bytes until handed to the progress thread; past them a call is answered SERVER_BUSY (the
//! progress thread never waits). `rpc.max_request_bytes` bounds a frame.

use super::budget::ConnBudget;
use super::connection::{Shared, MAX_IN_FLIGHT_PER_CONNECTION};
use super::respond::{error_frame, one_buffer, rpc_error, Responder, Sink};
use super::route;
use crate::metrics::Overload;
use bytes::{Buf, Bytes};
use cellar_proto::frame::peek_request_header;
use cellar_proto::pb;
use cellar_ucx::link::{Events, Link, LinkOptions, PeerId, Replies, Sender};
use cellar_ucx::Ucx;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;
use tokio::sync::Semaphore;

/// One connection's UCX side, as the progress thread sees it.
#[derive(Clone)]
struct Peer {
    conn_id: u64,
    slots: Arc<Semaphore>,
    budget: Arc<ConnBudget>,
}

type Peers = Arc<Mutex<HashMap<PeerId, Peer>>>;

/// The server's UCX worker and the connections attached to it.
pub(crate) struct UcxFront {
    link: Mutex<Option<Link>>,
    sender: Sender,
    address: Vec<u8>,
    peers: Peers,
    next_peer: AtomicU32,
}

impl UcxFront {
    /// Loads UCX and starts the worker's progress thread. Calls that wait for a WAL round
    /// continue on `runtime`.
    pub fn start(
        shared: Weak<Shared>,
        runtime: tokio::runtime::Handle,
    ) -> Result<UcxFront, String> {
        let ucx = Ucx::load().map_err(|e| e.to_string())?;
        let peers: Peers = Arc::default();
        let sender_slot = Arc::new(std::sync::OnceLock::new());
        let events = Serve {
            shared,
            runtime,
            peers: peers.clone(),
            sender: sender_slot.clone(),
        };
        let link = Link::start(&ucx, LinkOptions::default(), events)
            .map_err(|e| format!("cannot start the server's UCX worker: {e}"))?;
        let sender = link.sender();
        // Set before any peer is attached, so before any frame can arrive.
        let _ = sender_slot.set(sender.clone());
        let (major, minor, patch) = ucx.version();
        tracing::info!(ucx = %format!("{major}.{minor}.{patch}"), "UCX transport started");
        Ok(UcxFront {
            address: link.address().to_vec(),
            link: Mutex::new(Some(link)),
            sender,
            peers,
            next_peer: AtomicU32::new(1),
        })
    }

    /// Attaches TCP connection `conn_id` to the client worker at `address`, which knows this
    /// connection as `client_peer_id`. The returned guard detaches it when dropped.
    pub fn attach(
        &self,
        conn_id: u64,
        budget: Arc<ConnBudget>,
        address: Vec<u8>,
        client_peer_id: u32,
    ) -> Result<(Attached, pb::TransportHelloResponse), String> {
        if address.is_empty() {
            return Err("TRANSPORT_HELLO carries no UCX worker address".into());
        }
        let peer = self.next_peer.fetch_add(1, Ordering::Relaxed);
        self.peers.lock().insert(
            peer,
            Peer {
                conn_id,
                slots: Arc::new(Semaphore::new(MAX_IN_FLIGHT_PER_CONNECTION)),
                budget,
            },
        );
        let attached = Attached {
            peer,
            sender: self.sender.clone(),
            peers: self.peers.clone(),
        };
        let connected = match self.link.lock().as_ref() {
            Some(link) => link.connect(peer, address, client_peer_id),
            None => return Err("the server is shutting down".into()),
        };
        connected.map_err(|e| format!("cannot reach the client's UCX worker: {e}"))?;
        Ok((
            attached,
            pb::TransportHelloResponse {
                worker_address: Bytes::copy_from_slice(&self.address),
                server_peer_id: peer,
            },
        ))
    }

    /// Stops the progress thread (server shutdown): frames still queued are dropped.
    pub fn stop(&self) {
        let link = self.link.lock().take();
        drop(link);
    }
}

/// A TCP connection's UCX peer; dropping it (the TCP connection ended) closes the peer.
pub(crate) struct Attached {
    peer: PeerId,
    sender: Sender,
    peers: Peers,
}

impl Drop for Attached {
    fn drop(&mut self) {
        self.peers.lock().remove(&self.peer);
        let _ = self.sender.close(self.peer);
    }
}

/// The progress thread's side: serves each frame where it arrives.
struct Serve {
    shared: Weak<Shared>,
    runtime: tokio::runtime::Handle,
    peers: Peers,
    sender: Arc<std::sync::OnceLock<Sender>>,
}

impl Serve {
    /// Answers from the progress thread, counted as written.
    fn reply(shared: &Shared, replies: &mut Replies, peer: PeerId, (head, tail): route::Frame) {
        let frame = one_buffer(head, tail);
        shared.metrics.add_bytes_out(frame.len());
        replies.send(peer, frame);
    }

    /// A frame that breaks the protocol: the client is told, the UCX peer closed (its TCP
    /// connection remains, and its next calls fail over to it or reconnect).
    fn malformed(
        &self,
        shared: &Shared,
        replies: &mut Replies,
        peer: PeerId,
        call_id: u64,
        why: String,
    ) {
        tracing::info!(peer, reason = %why, "closing a UCX peer after a protocol error");
        shared.metrics.record_error(pb::ErrorCode::MalformedRequest);
        Serve::reply(
            shared,
            replies,
            peer,
            error_frame(call_id, rpc_error(pb::ErrorCode::MalformedRequest, why)),
        );
        self.peers.lock().remove(&peer);
        if let Some(sender) = self.sender.get() {
            let _ = sender.close(peer);
        }
    }
}

impl Events for Serve {
    fn frame(&mut self, peer: PeerId, frame: Vec<u8>, replies: &mut Replies) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let Some(sender) = self.sender.get().cloned() else {
            return;
        };
        // A peer detached meanwhile (its TCP connection closed): its frames are dropped.
        let Some(p) = self.peers.lock().get(&peer).cloned() else {
            return;
        };
        let received = Instant::now();
        shared.metrics.add_bytes_in(frame.len());
        let mut body = Bytes::from(frame);
        if body.len() < 4 {
            return self.malformed(
                &shared,
                replies,
                peer,
                0,
                "a UCX message shorter than a frame's length prefix".into(),
            );
        }
        let len = body.get_u32() as usize;
        if len != body.len() {
            let why = format!(
                "a UCX message's frame announces {len} bytes but carries {}",
                body.len()
            );
            let call_id = peek_request_header(&body).map(|h| h.call_id).unwrap_or(0);
            return self.malformed(&shared, replies, peer, call_id, why);
        }
        let max = shared.limits.max_request_bytes as usize;
        if len > max {
            let Some(header) = peek_request_header(&body) else {
                return self.malformed(
                    &shared,
                    replies,
                    peer,
                    0,
                    "frame without a readable request header".into(),
                );
            };
            let what = pb::Method::try_from(header.method)
                .map(|m| m.as_str_name())
                .unwrap_or("request");
            let refusal = route::Refusal {
                call_id: header.call_id,
                method: None,
                error: rpc_error(
                    pb::ErrorCode::RequestTooLarge,
                    format!("{what} of {len} bytes exceeds the server's limit of {max} bytes (rpc.max_request_bytes)"),
                ),
                fatal: None,
            };
            let frame = route::refusal_frame(&shared, refusal, received);
            return Serve::reply(&shared, replies, peer, frame);
        }
        let charge = p.budget.charge(4 + len as u64);
        let req = match route::decode(body, received) {
            Ok(req) => req,
            Err(refusal) => {
                if let Some(why) = refusal.fatal {
                    return self.malformed(&shared, replies, peer, refusal.call_id, why);
                }
                let frame = route::refusal_frame(&shared, refusal, received);
                return Serve::reply(&shared, replies, peer, frame);
            }
        };
        if req.method == pb::Method::TransportHello {
            let refusal = route::Refusal {
                call_id: req.header.call_id,
                method: Some(req.method),
                error: rpc_error(
                    pb::ErrorCode::InvalidArgument,
                    "TRANSPORT_HELLO belongs on the TCP connection; this one already carries its calls over UCX",
                ),
                fatal: None,
            };
            let frame = route::refusal_frame(&shared, refusal, received);
            return Serve::reply(&shared, replies, peer, frame);
        }
        let Ok(permit) = p.slots.clone().try_acquire_owned() else {
            // The progress thread cannot wait for a slot as the TCP reader does.
            shared.metrics.record_overload(Overload::InFlightBytes);
            let refusal = route::Refusal {
                call_id: req.header.call_id,
                method: Some(req.method),
                error: rpc_error(
                    pb::ErrorCode::ServerBusy,
                    format!("{} refused: the connection has {MAX_IN_FLIGHT_PER_CONNECTION} calls in flight; retry after a backoff", req.method.as_str_name()),
                ),
                fatal: None,
            };
            let frame = route::refusal_frame(&shared, refusal, received);
            return Serve::reply(&shared, replies, peer, frame);
        };
        let respond = Responder {
            sink: Sink::Ucx {
                sender,
                peer,
                metrics: shared.metrics.clone(),
            },
            permit,
            charge,
        };
        match route::serve(&shared, p.conn_id, req, respond) {
            route::Served::Queued => {}
            route::Served::Answer(frame, respond) => {
                drop(respond);
                Serve::reply(&shared, replies, peer, frame);
            }
            route::Served::Await(rest, respond) => {
                self.runtime.spawn(async move {
                    respond.send(rest.await);
                });
            }
        }
    }

    fn lost(&mut self, peer: PeerId, why: String) {
        if let Some(p) = self.peers.lock().remove(&peer) {
            tracing::info!(peer, conn = p.conn_id, reason = %why, "UCX peer lost");
        }
    }
}
