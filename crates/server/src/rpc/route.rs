//! What becomes of a request frame once a transport has cut it out, whatever the transport
//! (TCP in `connection.rs`, UCX in `ucx.rs`): decoded once; PING and every refusal answered at
//! once; the handler's fast path ([`Handler::call_inline`]) tried where the frame arrived;
//! else the decoded call queued for the handler pool, never decoded again.

use super::pool::{outcome_frame, Call};
use super::queue::Refused;
use super::respond::{error_frame, reply_frame, rpc_error, timed_reply_frame, Responder};
use super::{CallContext, Inline, PendingWrite, Reply, Shared};
use crate::metrics::Overload;
use bytes::Bytes;
use cellar_proto::frame::{decode_request, peek_request_header, Parts};
use cellar_proto::pb;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::time::{Duration, Instant};

/// A response frame: a head and, for large cell blocks, the handler's own buffer as the tail.
pub(crate) type Frame = (Bytes, Bytes);

/// A decoded request.
pub(crate) struct Request {
    pub header: pb::RequestHeader,
    pub method: pb::Method,
    pub parts: Parts,
    /// When its frame was complete; latency is measured from here.
    pub received: Instant,
}

/// A frame that is not a call to serve.
pub(crate) struct Refusal {
    pub call_id: u64,
    pub method: Option<pb::Method>,
    pub error: pb::RpcError,
    /// Set when the frame broke the protocol: after the answer the connection closes.
    pub fatal: Option<String>,
}

/// Decodes one frame body (the bytes after its length prefix).
pub(crate) fn decode(body: Bytes, received: Instant) -> Result<Request, Refusal> {
    let (header, parts) = match decode_request(body.clone()) {
        Ok(d) => d,
        Err(e) => {
            let call_id = peek_request_header(&body).map(|h| h.call_id).unwrap_or(0);
            let why = e.to_string();
            return Err(Refusal {
                call_id,
                method: None,
                error: rpc_error(pb::ErrorCode::MalformedRequest, why.clone()),
                fatal: Some(why),
            });
        }
    };
    match pb::Method::try_from(header.method) {
        Ok(pb::Method::Unspecified) | Err(_) => Err(Refusal {
            call_id: header.call_id,
            method: None,
            error: rpc_error(
                pb::ErrorCode::UnknownMethod,
                format!("unknown method number {}", header.method),
            ),
            fatal: None,
        }),
        Ok(method) => Ok(Request {
            header,
            method,
            parts,
            received,
        }),
    }
}

/// The answer to a refused frame, counted in the metrics.
pub(crate) fn refusal_frame(shared: &Shared, refusal: Refusal, received: Instant) -> Frame {
    let code = pb::ErrorCode::try_from(refusal.error.code).unwrap_or(pb::ErrorCode::Internal);
    shared.front.metrics.record_error(code);
    if let Some(m) = refusal.method {
        shared.front.metrics.record_call(m, received.elapsed());
    }
    error_frame(refusal.call_id, refusal.error)
}

/// The rest of a call begun where it arrived: resolves to its answer.
pub(crate) type Rest = Pin<Box<dyn Future<Output = Frame> + Send>>;

/// What [`serve`] did with a call.
pub(crate) enum Served {
    /// Answered at once: the frame goes back through the responder (or, where the transport
    /// can, straight from the thread that read the request; the responder is then dropped).
    Answer(Frame, Responder),
    /// Handed to the handler pool (or refused by the queue, already answered).
    Queued,
    /// Begun: await the rest, then send its frame through the responder.
    Await(Rest, Responder),
    /// Applied, its WAL record not yet in the OS: the transport finishes it with the others
    /// of the same read (one WAL write) before sending its answer, and waits meanwhile for
    /// nothing but the WAL ([`Deferred`]).
    AfterWal(Deferred, Responder),
}

/// A put applied where it arrived, waiting for its WAL write.
pub(crate) struct Deferred {
    write: Box<dyn PendingWrite>,
    reply: Reply,
    ctx: CallContext,
    call_id: u64,
    method: pb::Method,
    received: Instant,
    timed: Option<Instant>,
    metrics: std::sync::Arc<crate::metrics::RpcMetrics>,
}

impl Deferred {
    /// The answer once the write finished (or failed: then it is not acknowledged).
    fn answer(self, done: Result<(), pb::RpcError>) -> Frame {
        let frame = match (done, self.timed) {
            (Ok(()), Some(started)) => timed_reply_frame(
                self.call_id,
                self.reply,
                started.saturating_duration_since(self.received),
                started.elapsed(),
            ),
            (done, _) => outcome_frame(
                &self.metrics,
                &self.ctx,
                self.call_id,
                self.method,
                Ok(done.map(|()| self.reply)),
            ),
        };
        self.metrics
            .record_call(self.method, self.received.elapsed());
        frame
    }

    /// Finishes the write without waiting: its answer, or the write handed back when
    /// finishing would wait for another writer's WAL round.
    pub fn try_finish(mut self) -> Finish {
        let write = std::mem::replace(&mut self.write, Box::new(Finished));
        match write.try_finish() {
            Ok(done) => Finish::Done(self.answer(done)),
            Err(write) => {
                self.write = write;
                Finish::Wait(self)
            }
        }
    }

    /// Finishes the write, awaiting the WAL round in progress if need be.
    pub async fn finish(mut self) -> Frame {
        let write = std::mem::replace(&mut self.write, Box::new(Finished));
        let done = write.finish().await;
        self.answer(done)
    }
}

/// What [`Deferred::try_finish`] did.
pub(crate) enum Finish {
    /// Finished: the answer to send.
    Done(Frame),
    /// Finishing would wait for the WAL round in progress: await [`Deferred::finish`].
    Wait(Deferred),
}

/// The placeholder of a write taken out of its [`Deferred`].
struct Finished;

impl PendingWrite for Finished {
    fn try_finish(self: Box<Self>) -> Result<Result<(), pb::RpcError>, Box<dyn PendingWrite>> {
        Ok(Ok(()))
    }

    fn finish(self: Box<Self>) -> Pin<Box<dyn Future<Output = Result<(), pb::RpcError>> + Send>> {
        Box::pin(async { Ok(()) })
    }
}

/// Serves one decoded call of the connection and caller `ctx` names: PING and refusals at once, the handler's
/// fast path where the request was read, the rest on the handler pool.
pub(crate) fn serve(shared: &Shared, ctx: CallContext, req: Request, respond: Responder) -> Served {
    let Request {
        header,
        method,
        parts,
        received,
    } = req;
    let metrics = &shared.front.metrics;
    if method == pb::Method::Ping {
        // No disk, no queue hop: it is the floor of a call's cost.
        metrics.record_call(method, received.elapsed());
        return Served::Answer(reply_frame(header.call_id, Reply::default()), respond);
    }
    if respond.charge.budget().server_full() {
        // The front end holds as much for its clients as it may: refuse (the client backs off
        // and retries) rather than stop reading, which would stall this client behind others'
        // answers without telling it why.
        let (code, message) = busy_in_flight();
        metrics.record_overload(Overload::InFlightBytes);
        metrics.record_error(code);
        metrics.record_call(method, received.elapsed());
        let error = rpc_error(code, format!("{} {message}", method.as_str_name()));
        return Served::Answer(error_frame(header.call_id, error), respond);
    }
    // Read from the clock only for calls that asked for their stage times.
    let inline_started = header.want_timing.then(Instant::now);
    let inline = catch_unwind(AssertUnwindSafe(|| {
        shared
            .handler
            .call_inline(&ctx, method, &parts.param, &parts.cellblock)
    }));
    let answered = |outcome: std::thread::Result<Result<Reply, pb::RpcError>>| {
        let frame = match (outcome, inline_started) {
            // Answered where it arrived: the queue wait is the request's decoding alone.
            (Ok(Ok(reply)), Some(started)) => timed_reply_frame(
                header.call_id,
                reply,
                started.saturating_duration_since(received),
                started.elapsed(),
            ),
            (outcome, _) => outcome_frame(metrics, &ctx, header.call_id, method, outcome),
        };
        metrics.record_call(method, received.elapsed());
        frame
    };
    match inline {
        Ok(None) => {}
        Ok(Some(Inline::Done(result))) => return Served::Answer(answered(Ok(result)), respond),
        Ok(Some(Inline::AfterWal(write, reply))) => {
            let deferred = Deferred {
                write,
                reply,
                ctx,
                call_id: header.call_id,
                method,
                received,
                timed: inline_started,
                metrics: shared.front.metrics.clone(),
            };
            return Served::AfterWal(deferred, respond);
        }
        Err(panic) => return Served::Answer(answered(Err(panic)), respond),
        Ok(Some(Inline::Await(rest))) => {
            let metrics = shared.front.metrics.clone();
            let call_id = header.call_id;
            let rest = async move {
                let outcome = futures_catch_unwind(AssertUnwindSafe(rest)).await;
                let frame = match (outcome, inline_started) {
                    (Ok(Ok(reply)), Some(started)) => timed_reply_frame(
                        call_id,
                        reply,
                        started.saturating_duration_since(received),
                        started.elapsed(),
                    ),
                    (outcome, _) => outcome_frame(&metrics, &ctx, call_id, method, outcome),
                };
                metrics.record_call(method, received.elapsed());
                frame
            };
            return Served::Await(Box::pin(rest), respond);
        }
    }
    let call = Call {
        ctx,
        call_id: header.call_id,
        method,
        param: parts.param,
        cellblock: parts.cellblock,
        received,
        deadline: (header.timeout_ms > 0)
            .then(|| received + Duration::from_millis(u64::from(header.timeout_ms))),
        want_timing: header.want_timing,
        respond,
        handler: shared.handler.clone(),
        metrics: shared.front.metrics.clone(),
    };
    let (call, error) = match shared.front.queue.try_push(call) {
        Ok(()) => return Served::Queued,
        Err(Refused::Full(call)) => {
            metrics.record_overload(Overload::CallQueue);
            (
                call,
                rpc_error(
                    pb::ErrorCode::ServerBusy,
                    "the server's call queue is full (rpc.max_queued_calls); retry after a backoff",
                ),
            )
        }
        Err(Refused::Closed(call)) => (
            call,
            rpc_error(pb::ErrorCode::ServerStopping, "the server is shutting down"),
        ),
    };
    let code = pb::ErrorCode::try_from(error.code).unwrap_or(pb::ErrorCode::Internal);
    metrics.record_error(code);
    metrics.record_call(method, received.elapsed());
    Served::Answer(error_frame(call.call_id, error), call.respond)
}

/// The refusal of a call while the front end's in-flight bytes are past their bound.
pub(crate) fn busy_in_flight() -> (pb::ErrorCode, String) {
    (
        pb::ErrorCode::ServerBusy,
        "refused: the server holds as many request and response bytes as it may (rpc.max_in_flight_bytes); retry after a backoff".into(),
    )
}

/// Awaits `f`, turning a panic into an error as `catch_unwind` does for a synchronous call.
async fn futures_catch_unwind<F: Future>(f: AssertUnwindSafe<F>) -> std::thread::Result<F::Output> {
    let mut f = std::pin::pin!(f.0);
    std::future::poll_fn(
        |cx| match catch_unwind(AssertUnwindSafe(|| f.as_mut().poll(cx))) {
            Ok(std::task::Poll::Ready(v)) => std::task::Poll::Ready(Ok(v)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(panic) => std::task::Poll::Ready(Err(panic)),
        },
    )
    .await
}
