//! The server side of a transport: how frames arrive and where a connection's answers go.
//!
//! Frames arrive two ways. A byte stream (TCP, or TLS over it: [`super::stream::Socket`]) is
//! cut into frames by the connection loop ([`super::connection`]), for either protocol. A
//! message transport (UCX: [`super::ucx`]) delivers whole frames. Both hand each frame to
//! the same routing ([`super::route`]) with a [`super::respond::Responder`] whose
//! [`Transport`] takes the answer back: the connection's writer task for a stream (which
//! writes to TCP or TLS), the connection's UCX worker for UCX. A new transport plugs in as a
//! source of frames and one implementation of [`Transport`].

use super::budget::Charge;
use bytes::Bytes;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::OwnedSemaphorePermit;

/// One frame (or the preamble) on its way out through a [`Transport`].
pub(crate) struct Outgoing {
    pub head: Bytes,
    pub tail: Bytes,
    /// The connection's in-flight slot, freed once the frame is written.
    pub _slot: Option<OwnedSemaphorePermit>,
    /// The frame's bytes, counted as in flight until it is written.
    pub _charge: Option<Charge>,
}

impl Outgoing {
    /// A frame that holds no call's slot or bytes (a preamble's answer, a fatal error).
    pub fn unbounded(head: Bytes) -> Outgoing {
        Outgoing {
            head,
            tail: Bytes::new(),
            _slot: None,
            _charge: None,
        }
    }

    pub fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }
}

/// Where a connection's answers go. Called from handler threads and reactors: it never
/// waits. The frame's in-flight slot and bytes (in [`Outgoing`]) are held until the
/// transport has written it or handed it to the thread that will.
pub(crate) trait Transport: Send + Sync {
    /// Hands one answer on; false when the connection is gone.
    fn send(&self, out: Outgoing) -> bool;
}

/// A byte stream's answers go to its connection's writer task (`super::stream`), which
/// writes them in batches to TCP or TLS.
impl Transport for UnboundedSender<Outgoing> {
    fn send(&self, out: Outgoing) -> bool {
        UnboundedSender::send(self, out).is_ok()
    }
}
