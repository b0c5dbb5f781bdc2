//! The native protocol over UCX (shared memory, RDMA, or UCX's own TCP), beside the TCP
//! listener: seed 000's hybrid design (`docs/design/0005-transport.md` §4).
//!
//! A client asks on its TCP connection (`TRANSPORT_HELLO`, carrying its UCX worker address);
//! the server answers with the address of a worker of the connection's own, and from then on
//! the client's calls arrive as UCX messages (one frame each, length prefix included) at that
//! worker, progressed by its own thread (`cellar_ucx::link`; one worker per connection, so a
//! client killed in the middle of a shared-memory write can stall only its own). That thread serves each frame as the TCP reactor does
//! ([`super::route`]: decoded once, PING and refusals answered, Gets from memory answered
//! right there with no hand-off to another thread), queues the rest for the same handler pool
//! and runs puts that wait for a WAL round on the front end's runtime. The TCP connection stays
//! open as the control channel: when it closes, the UCX peer is closed and the connection's
//! scanners freed, as for any connection. A peer silent past the heartbeat limit is dropped.
//!
//! The same bounds as TCP, applied before a frame takes any memory: UCX announces each
//! message's length before it is received ([`Events::admit`]), and
//! - a frame longer than `rpc.max_request_bytes` is dropped unread (UCX discards it; nothing
//!   of its announced size is allocated). Its call id is unknown, so the client is told on
//!   call id 0 (REQUEST_TOO_LARGE, which ends its connection) and the UCX peer is closed; the
//!   TCP connection and every other client go on;
//! - a frame is counted against the connection's and the front end's in-flight bytes from the
//!   moment it is taken, before its buffer is allocated, and until its answer is handed to
//!   the progress thread; a connection past its own bound takes no more frames until its
//!   answers drain (they wait in UCX, as a TCP reader stops reading), and a front end past
//!   its bound answers new calls SERVER_BUSY ([`route::serve`]);
//! - at most [`MAX_IN_FLIGHT_PER_CONNECTION`] calls per connection; past them a call is
//!   answered SERVER_BUSY (the progress thread never waits).

use super::budget::{Charge, ConnBudget};
use super::limits::{MAX_DEFERRED_WRITES, MAX_IN_FLIGHT_PER_CONNECTION};
use super::respond::{error_frame, rpc_error, Responder};
use super::route;
use super::transport::Outgoing;
use super::transport::Transport;
use super::Shared;
use crate::metrics::Overload;
use bytes::{Buf, Bytes};
use cellar_proto::frame::peek_request_header;
use cellar_proto::pb;
use cellar_ucx::link::{Admit, Events, Hold, Link, LinkOptions, PeerId, Replies, Sender};
use cellar_ucx::{Context, Ucx};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;
use tokio::sync::Semaphore;

/// One connection's UCX side, as its progress thread sees it.
struct Peer {
    conn_id: u64,
    /// Who its calls are from (the TCP connection's caller; UCX connections are never TLS, so
    /// the user is the one request headers name).
    caller: crate::security::Caller,
    slots: Arc<Semaphore>,
    budget: Arc<ConnBudget>,
}

/// The id both sides give each other on a connection's own link (one peer per link).
const PEER: PeerId = 1;

/// The server's UCX context; each connection that asks gets its own worker and progress
/// thread in it ([`Link::start_in`] says why).
pub(crate) struct UcxFront {
    ctx: Context,
    shared: Weak<Shared>,
    runtime: tokio::runtime::Handle,
    stopping: AtomicBool,
}

impl UcxFront {
    /// Loads UCX and creates the context. Calls that wait for a WAL round continue on
    /// `runtime`.
    pub fn start(
        shared: Weak<Shared>,
        runtime: tokio::runtime::Handle,
    ) -> Result<UcxFront, String> {
        let ucx = Ucx::load().map_err(|e| e.to_string())?;
        let ctx = Context::new(&ucx).map_err(|e| format!("cannot start UCX: {e}"))?;
        let (major, minor, patch) = ucx.version();
        tracing::info!(ucx = %format!("{major}.{minor}.{patch}"), "UCX transport started");
        Ok(UcxFront {
            ctx,
            shared,
            runtime,
            stopping: AtomicBool::new(false),
        })
    }

    /// Attaches TCP connection `conn_id` to the client worker at `address`, which knows this
    /// connection as `client_peer_id`: a worker and progress thread of its own. The returned
    /// guard detaches it when dropped.
    pub fn attach(
        &self,
        conn_id: u64,
        caller: crate::security::Caller,
        budget: Arc<ConnBudget>,
        address: Vec<u8>,
        client_peer_id: u32,
    ) -> Result<(Attached, pb::TransportHelloResponse), String> {
        if address.is_empty() {
            return Err("TRANSPORT_HELLO carries no UCX worker address".into());
        }
        if self.stopping.load(Ordering::Relaxed) {
            return Err("the server is shutting down".into());
        }
        let sender_slot = Arc::new(OnceLock::new());
        let events = Serve {
            shared: self.shared.clone(),
            runtime: self.runtime.clone(),
            peer: Peer {
                conn_id,
                caller,
                slots: Arc::new(Semaphore::new(MAX_IN_FLIGHT_PER_CONNECTION)),
                budget,
            },
            open: true,
            sender: sender_slot.clone(),
            answers: None,
            deferred: Vec::new(),
        };
        let link = Link::start_in(&self.ctx, LinkOptions::default(), events)
            .map_err(|e| format!("cannot start a UCX worker for the connection: {e}"))?;
        // Set before the peer is connected, so before any frame can arrive.
        let _ = sender_slot.set(link.sender());
        let response = pb::TransportHelloResponse {
            worker_address: Bytes::copy_from_slice(link.address()),
            server_peer_id: PEER,
        };
        let attached = Attached { link: Some(link) };
        if let Some(link) = &attached.link {
            link.connect(PEER, address, client_peer_id)
                .map_err(|e| format!("cannot reach the client's UCX worker: {e}"))?;
        }
        Ok((attached, response))
    }

    /// Refuses new UCX connections (server shutdown); those attached close with their TCP
    /// connections.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }
}

/// A TCP connection's UCX side; dropping it (the TCP connection ended) stops its worker.
pub(crate) struct Attached {
    link: Option<Link>,
}

impl Drop for Attached {
    fn drop(&mut self) {
        if let Some(link) = self.link.take() {
            link.stop_in_background();
        }
    }
}

/// The progress thread's side: serves each frame where it arrives.
struct Serve {
    shared: Weak<Shared>,
    runtime: tokio::runtime::Handle,
    peer: Peer,
    /// Cleared once the peer is lost or broke the protocol: its frames are dropped.
    open: bool,
    sender: Arc<OnceLock<Sender>>,
    /// Where handler threads send the peer's answers (made with the first call).
    answers: Option<Arc<dyn Transport>>,
    /// Puts applied since the progress thread last ran out of arrived frames, waiting for
    /// their WAL write: finished together (one write) in [`Events::frames_done`].
    deferred: Vec<(PeerId, route::Deferred, Responder)>,
}

impl Serve {
    /// Answers from the progress thread, counted as written.
    fn reply(shared: &Shared, replies: &mut Replies, peer: PeerId, (head, tail): route::Frame) {
        shared.front.metrics.add_bytes_out(head.len() + tail.len());
        replies.send_gathered(peer, head, tail);
    }

    /// A frame that breaks the protocol: the client is told, the UCX peer closed (its TCP
    /// connection remains, and its next calls fail over to it or reconnect).
    fn malformed(
        &mut self,
        shared: &Shared,
        replies: &mut Replies,
        peer: PeerId,
        call_id: u64,
        why: String,
    ) {
        tracing::info!(peer, reason = %why, "closing a UCX peer after a protocol error");
        shared
            .front
            .metrics
            .record_error(pb::ErrorCode::MalformedRequest);
        Serve::reply(
            shared,
            replies,
            peer,
            error_frame(call_id, rpc_error(pb::ErrorCode::MalformedRequest, why)),
        );
        self.open = false;
        if let Some(sender) = self.sender.get() {
            let _ = sender.close(peer);
        }
    }
}

impl Events for Serve {
    /// Decides on a frame by the length UCX announces, before any buffer is taken for it.
    fn admit(&mut self, _peer: PeerId, len: usize) -> Admit {
        let Some(shared) = self.shared.upgrade().filter(|_| self.open) else {
            // Closed (or the server is gone): its frames are dropped unread.
            return Admit::Refuse;
        };
        // One frame per message: its 4-byte length prefix, then the request.
        let max = (shared.front.limits.max_request_bytes as usize).saturating_add(4);
        if len > max {
            return Admit::Refuse;
        }
        if !self.peer.budget.room(0) {
            // Past the connection's own bound: the frame waits in UCX until answers drain.
            return Admit::Wait;
        }
        let charge: Hold = Box::new(self.peer.budget.charge(len as u64));
        Admit::Take(Some(charge))
    }

    /// A frame over `rpc.max_request_bytes`, dropped unread: the client is told on call id 0
    /// (which ends its connection: the call it belonged to cannot be named) and the UCX peer
    /// is closed. Nothing of it was allocated or counted.
    fn refused(&mut self, peer: PeerId, len: usize, replies: &mut Replies) {
        let Some(shared) = self.shared.upgrade().filter(|_| self.open) else {
            return;
        };
        let max = shared.front.limits.max_request_bytes;
        let why = format!(
            "a request of {} bytes exceeds the server's limit of {max} bytes (rpc.max_request_bytes); it was dropped unread and the connection's UCX side closed",
            len.saturating_sub(4)
        );
        tracing::info!(conn = self.peer.conn_id, reason = %why, "refusing a UCX frame");
        shared
            .front
            .metrics
            .record_error(pb::ErrorCode::RequestTooLarge);
        Serve::reply(
            &shared,
            replies,
            peer,
            error_frame(0, rpc_error(pb::ErrorCode::RequestTooLarge, why)),
        );
        self.open = false;
        if let Some(sender) = self.sender.get() {
            let _ = sender.close(peer);
        }
    }

    fn held_frame(
        &mut self,
        peer: PeerId,
        frame: Bytes,
        hold: Option<Hold>,
        replies: &mut Replies,
    ) {
        let charge = hold.and_then(|h| h.downcast::<Charge>().ok()).map(|c| *c);
        self.serve_frame(peer, frame, charge, replies);
    }

    fn frame(&mut self, peer: PeerId, frame: Bytes, replies: &mut Replies) {
        self.serve_frame(peer, frame, None, replies);
    }

    /// Finishes the puts applied since the last call: the first finish writes every buffered
    /// WAL record and the rest find theirs written; their answers go from here. One whose
    /// record another writer's round is writing is finished on the runtime instead (the
    /// progress thread never waits).
    fn frames_done(&mut self, replies: &mut Replies) {
        let Some(shared) = self.shared.upgrade() else {
            self.deferred.clear();
            return;
        };
        for (peer, d, respond) in std::mem::take(&mut self.deferred) {
            match d.try_finish() {
                route::Finish::Done(frame) => {
                    drop(respond);
                    Serve::reply(&shared, replies, peer, frame);
                }
                route::Finish::Wait(d) => {
                    self.runtime.spawn(async move {
                        respond.send(d.finish().await);
                    });
                }
            }
        }
    }

    fn lost(&mut self, _peer: PeerId, why: String) {
        if self.open {
            self.open = false;
            tracing::info!(conn = self.peer.conn_id, reason = %why, "UCX peer lost");
        }
    }
}

impl Serve {
    /// Serves one frame that arrived whole; `charge` counts its bytes since it was admitted
    /// (taken here if it came without one).
    fn serve_frame(
        &mut self,
        peer: PeerId,
        frame: Bytes,
        charge: Option<Charge>,
        replies: &mut Replies,
    ) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let Some(sender) = self.sender.get().cloned() else {
            return;
        };
        if !self.open {
            return;
        }
        let received = Instant::now();
        shared.front.metrics.add_bytes_in(frame.len());
        let mut body = frame;
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
        let max = shared.front.limits.max_request_bytes as usize;
        // Admitted frames are within the limit ([`Events::admit`]); a frame that came another
        // way is checked here (it is already received: refused by its call id).
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
        let charge = charge.unwrap_or_else(|| self.peer.budget.charge(4 + len as u64));
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
        let Ok(permit) = self.peer.slots.clone().try_acquire_owned() else {
            // The progress thread cannot wait for a slot as the TCP reader does.
            shared
                .front
                .metrics
                .record_overload(Overload::InFlightBytes);
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
        let sink = self
            .answers
            .get_or_insert_with(|| {
                Arc::new(UcxAnswers {
                    sender,
                    peer,
                    metrics: shared.front.metrics.clone(),
                })
            })
            .clone();
        let respond = Responder {
            sink,
            permit,
            charge,
        };
        self.peer.caller.claim(&req.header.user);
        let ctx = crate::rpc::CallContext {
            conn_id: self.peer.conn_id,
            caller: self.peer.caller.acting_for(&req.header.effective_user),
        };
        match route::serve(&shared, ctx, req, respond) {
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
            route::Served::AfterWal(d, respond) => {
                self.deferred.push((peer, d, respond));
                if self.deferred.len() >= MAX_DEFERRED_WRITES {
                    self.frames_done(replies);
                }
            }
        }
    }
}

/// A UCX peer's answers from handler threads: through the progress thread of its
/// connection's worker, the head and a large cell block gathered into one message, no copy.
/// The frame's slot and bytes are let go once it is handed over.
struct UcxAnswers {
    sender: Sender,
    peer: PeerId,
    metrics: Arc<crate::metrics::RpcMetrics>,
}

impl Transport for UcxAnswers {
    fn send(&self, out: Outgoing) -> bool {
        self.metrics.add_bytes_out(out.len());
        self.sender
            .send_gathered(self.peer, out.head, out.tail)
            .is_ok()
    }
}
