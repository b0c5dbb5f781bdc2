//! Per-stage times of one call, for `cellar bench breakdown` (stage names after seed 000's
//! Figure 7). Only the `*_with_timing` calls of [`crate::Table`] produce them: they ask the
//! server for its share (`RequestHeader.want_timing`) and read the clock at each client
//! stage; ordinary calls do neither.

use crate::connection::{Response, SendStamps};
use crate::error::{missing, Result};
use std::time::{Duration, Instant};

/// Where one call's time went. The stages follow each other, so they add up to `total`
/// (measured separately, from the call's start to its result being ready).
///
/// The wire time is the client's round trip (request handed to the writer task to response
/// frame read and its header decoded) minus the server's three stages; it cannot be split by direction without
/// synchronized clocks, so half of it is counted as `wire_out` and half as `wire_back`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallTiming {
    /// Building the request message from the model type and encoding the frame.
    pub client_serialize: Duration,
    /// Registering the call for its answer, up to handing the frame to the writer task.
    pub send_prepare: Duration,
    /// Half the wire time: the hand-off to the writer task and its socket write, the kernel
    /// and the loopback or network, and the server's read.
    pub wire_out: Duration,
    /// Server: request read to a handler starting it (decoding and the call queue).
    pub server_queue: Duration,
    /// Server: the handler's work, including encoding its response message and cells.
    pub server_processing: Duration,
    /// Server: assembling the response frame.
    pub server_serialize: Duration,
    /// The other half of the wire time.
    pub wire_back: Duration,
    /// Client: waking the caller and decoding the response into its result.
    pub client_process: Duration,
    /// The whole call as the caller saw it.
    pub total: Duration,
}

impl CallTiming {
    /// The stages in call order, with the names `cellar bench breakdown` prints.
    pub fn stages(&self) -> [(&'static str, Duration); 8] {
        [
            ("client_serialize", self.client_serialize),
            ("send_prepare", self.send_prepare),
            ("wire_out", self.wire_out),
            ("server_queue", self.server_queue),
            ("server_processing", self.server_processing),
            ("server_serialize", self.server_serialize),
            ("wire_back", self.wire_back),
            ("client_process", self.client_process),
        ]
    }

    /// The sum of the stages; equals `total` unless the server reported more time than the
    /// round trip took (then the wire stages are zero).
    pub fn stage_sum(&self) -> Duration {
        self.stages().iter().map(|(_, d)| *d).sum()
    }

    /// Builds the stages of a call that started at `started`, sent with `stamps`, answered
    /// with `resp` and whose result was ready at `done`.
    pub(crate) fn from_call(
        started: Instant,
        stamps: &SendStamps,
        resp: &Response,
        done: Instant,
    ) -> Result<CallTiming> {
        let (encoded, queued) = match (stamps.encoded, stamps.queued) {
            (Some(e), Some(q)) => (e, q),
            _ => return Err(missing("the client's send stamps of a timed call")),
        };
        let (arrived, server) = resp
            .timing
            .ok_or_else(|| missing("the server timing asked for (want_timing)"))?;
        let server_queue = Duration::from_nanos(server.queue_wait_ns);
        let server_processing = Duration::from_nanos(server.processing_ns);
        let server_serialize = Duration::from_nanos(server.serialization_ns);
        let round_trip = arrived.saturating_duration_since(queued);
        let wire = round_trip.saturating_sub(server_queue + server_processing + server_serialize);
        let wire_out = wire / 2;
        Ok(CallTiming {
            client_serialize: encoded.saturating_duration_since(started),
            send_prepare: queued.saturating_duration_since(encoded),
            wire_out,
            server_queue,
            server_processing,
            server_serialize,
            wire_back: wire - wire_out,
            client_process: done.saturating_duration_since(arrived),
            total: done.saturating_duration_since(started),
        })
    }
}
