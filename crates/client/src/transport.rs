//! Which transport a connection's calls travel on, and the client's UCX worker.
//!
//! Every connection starts on TCP (the preamble exchange, and the control channel for as long
//! as the connection lives). With `ucx` or `auto` the client then sends its UCX worker address
//! in `TRANSPORT_HELLO`; once the server answers with its own, calls go as UCX messages
//! through a worker of the connection's own, progressed by its own thread
//! (`cellar_ucx::link`), and answers come back through it to the waiting callers. `docs/design/0005-transport.md` §4.

use crate::error::{Error, Result};
use bytes::{Buf, Bytes};
use cellar_ucx::link::{Events, Link, LinkOptions, PeerId, Replies};
use cellar_ucx::{Context, Ucx};
use std::sync::{OnceLock, Weak};

/// How a client reaches servers (`transport = tcp | ucx | auto`; `cellar+ucx://` asks for UCX).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// TCP only.
    #[default]
    Tcp,
    /// UCX (shared memory, RDMA, or UCX's TCP, as `UCX_TLS` allows) or fail: a server or a
    /// machine without it is an error naming why.
    Ucx,
    /// UCX where both sides have it, else TCP.
    Auto,
}

impl std::str::FromStr for Transport {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Transport, String> {
        match s {
            "tcp" => Ok(Transport::Tcp),
            "ucx" => Ok(Transport::Ucx),
            "auto" => Ok(Transport::Auto),
            other => Err(format!("unknown transport {other:?}; use tcp, ucx or auto")),
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Transport::Tcp => "tcp",
            Transport::Ucx => "ucx",
            Transport::Auto => "auto",
        })
    }
}

/// A server URL as the command-line tools take it: `cellar://HOST:PORT` (TCP) or
/// `cellar+ucx://HOST:PORT` (UCX); `None` for anything else. The address may list a
/// cluster's masters, `HOST:PORT,HOST:PORT`.
pub fn parse_url(url: &str) -> Option<(String, Transport)> {
    let (addr, transport) = if let Some(a) = url.strip_prefix("cellar://") {
        (a, Transport::Tcp)
    } else if let Some(a) = url.strip_prefix("cellar+ucx://") {
        (a, Transport::Ucx)
    } else {
        return None;
    };
    let addr = addr.trim_end_matches('/');
    (!addr.is_empty()).then(|| (addr.to_string(), transport))
}

/// What the UCX progress thread delivers to: a connection's answers and its loss.
pub(crate) trait Peer: Send + Sync {
    /// A response frame (length prefix removed) arrived.
    fn frame(&self, body: Bytes);
    /// The UCX side of the connection is gone; its calls fail with `err`.
    fn lost(&self, err: Error);
}

/// The id both sides give each other on a connection's own link (one peer per link).
const PEER: PeerId = 1;

/// The process's UCX context for client connections, created on first use (or why it cannot
/// be), and kept for the life of the process, as the server keeps its own: every client of
/// the process shares it, so connecting and dropping clients never creates and cleans up
/// UCP contexts beside other threads' live workers. Each connection that moves to UCX gets
/// a worker and progress thread of its own in it: a server killed in the middle of a
/// shared-memory write can then stall only that connection's worker
/// (`cellar_ucx::link::Link::start_in`).
pub(crate) fn ucx_context() -> Result<Context> {
    static CONTEXT: OnceLock<std::result::Result<Context, String>> = OnceLock::new();
    CONTEXT
        .get_or_init(|| {
            let ucx = Ucx::load().map_err(|e| e.to_string())?;
            Context::new(&ucx).map_err(|e| format!("cannot start UCX: {e}"))
        })
        .clone()
        .map_err(Error::Transport)
}

/// A connection's way out over UCX: its own worker and progress thread, stopped when dropped.
pub(crate) struct Route {
    link: Option<Link>,
}

impl Route {
    /// Starts a worker for a connection whose answers go to `peer`.
    pub fn start(ctx: &Context, peer: Weak<dyn Peer>) -> Result<Route> {
        let link = Link::start_in(ctx, LinkOptions::default(), Deliver { peer })
            .map_err(|e| Error::Transport(format!("cannot start a UCX worker: {e}")))?;
        Ok(Route { link: Some(link) })
    }

    /// This connection's worker address and id, for the server.
    pub fn address(&self) -> (&[u8], PeerId) {
        (self.link.as_ref().map_or(&[][..], Link::address), PEER)
    }

    /// Connects to the server's worker at `address`, which knows this side as `id_at_server`.
    pub fn connect(&self, address: Vec<u8>, id_at_server: u32) -> Result<()> {
        match &self.link {
            Some(link) => link
                .connect(PEER, address, id_at_server)
                .map_err(|e| Error::Transport(e.to_string())),
            None => Err(Error::Closed),
        }
    }

    /// Sends one request frame (length prefix included), then progresses the worker on this
    /// thread until `answered()` or `limit` passes (`Link::drive`); the answer, if it came,
    /// is delivered to its waiter meanwhile. `others_wait()`: other calls of the connection
    /// still wait for answers (the progress thread then takes over at once).
    pub fn send_then_drive(
        &self,
        frame: Bytes,
        limit: std::time::Duration,
        answered: impl FnMut() -> bool,
        others_wait: impl FnOnce() -> bool,
    ) -> Result<()> {
        match &self.link {
            Some(link) => {
                link.send_then_drive(PEER, frame)
                    .map_err(|e| Error::Transport(e.to_string()))?;
                link.drive(limit, answered, others_wait);
                Ok(())
            }
            None => Err(Error::Closed),
        }
    }

    /// Sends one request frame (length prefix included).
    pub fn send(&self, frame: Bytes) -> Result<()> {
        match &self.link {
            Some(link) => link
                .send(PEER, frame)
                .map_err(|e| Error::Transport(e.to_string())),
            None => Err(Error::Closed),
        }
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        if let Some(link) = self.link.take() {
            link.stop_in_background();
        }
    }
}

/// The progress thread's side: hands answers to the connection.
struct Deliver {
    peer: Weak<dyn Peer>,
}

impl Events for Deliver {
    fn frame(&mut self, _id: PeerId, frame: Bytes, _replies: &mut Replies) {
        let Some(peer) = self.peer.upgrade() else {
            return;
        };
        let mut body = frame;
        if body.len() < 4 || body.get_u32() as usize != body.len() {
            peer.lost(Error::Protocol(
                "a UCX message from the server is not one whole frame".into(),
            ));
            return;
        }
        peer.frame(body);
    }

    fn lost(&mut self, _id: PeerId, why: String) {
        if let Some(peer) = self.peer.upgrade() {
            peer.lost(Error::Io(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                format!("the server's UCX endpoint is gone: {why}"),
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_the_transport() {
        assert_eq!(
            parse_url("cellar://h:1"),
            Some(("h:1".to_string(), Transport::Tcp))
        );
        assert_eq!(
            parse_url("cellar+ucx://h:1,h:2/"),
            Some(("h:1,h:2".to_string(), Transport::Ucx))
        );
        assert_eq!(parse_url("cellar+ucx://"), None);
        assert_eq!(parse_url("embedded:/x"), None);
        assert_eq!("auto".parse::<Transport>(), Ok(Transport::Auto));
        assert!("rdma"
            .parse::<Transport>()
            .is_err_and(|e| e.contains("tcp, ucx or auto")));
    }
}
