//! Which transport a connection's calls travel on, and the client's UCX worker.
//!
//! Every connection starts on TCP (the preamble exchange, and the control channel for as long
//! as the connection lives). With `ucx` or `auto` the client then sends its UCX worker address
//! in `TRANSPORT_HELLO`; once the server answers with its own, calls go as UCX messages
//! through one worker per client, progressed by its own thread (`cellar_ucx::link`), and
//! answers come back through it to the waiting callers. `docs/design/0005-transport.md` §4.

use crate::error::{Error, Result};
use bytes::{Buf, Bytes};
use cellar_ucx::link::{Events, Link, LinkOptions, PeerId, Replies, Sender};
use cellar_ucx::Ucx;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock, Weak};

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

type Peers = Arc<Mutex<HashMap<PeerId, Weak<dyn Peer>>>>;

/// One client's UCX worker.
pub(crate) struct ClientLink {
    link: Link,
    peers: Peers,
    next_peer: AtomicU32,
}

/// The client's UCX worker, started on first use (or why it cannot be).
#[derive(Default)]
pub(crate) struct LinkSlot(OnceLock<std::result::Result<Arc<ClientLink>, String>>);

impl LinkSlot {
    pub fn get(&self) -> Result<Arc<ClientLink>> {
        self.0
            .get_or_init(|| ClientLink::start().map(Arc::new))
            .clone()
            .map_err(Error::Transport)
    }
}

impl ClientLink {
    fn start() -> std::result::Result<ClientLink, String> {
        let ucx = Ucx::load().map_err(|e| e.to_string())?;
        let peers: Peers = Arc::default();
        let link = Link::start(
            &ucx,
            LinkOptions::default(),
            Deliver {
                peers: peers.clone(),
            },
        )
        .map_err(|e| format!("cannot start the client's UCX worker: {e}"))?;
        Ok(ClientLink {
            link,
            peers,
            next_peer: AtomicU32::new(1),
        })
    }

    /// This worker's address, for the server.
    pub fn address(&self) -> &[u8] {
        self.link.address()
    }

    /// Registers a connection; its frames reach `peer` once [`Route::connect`] is called.
    pub fn register(&self, peer: Weak<dyn Peer>) -> Route {
        let id = self.next_peer.fetch_add(1, Ordering::Relaxed);
        self.peers.lock().insert(id, peer);
        Route {
            id,
            sender: self.link.sender(),
            peers: self.peers.clone(),
        }
    }

    /// Connects `route` to the server worker at `address`, which knows it as `id_at_server`.
    pub fn connect(&self, route: &Route, address: Vec<u8>, id_at_server: u32) -> Result<()> {
        self.link
            .connect(route.id, address, id_at_server)
            .map_err(|e| Error::Transport(e.to_string()))
    }
}

/// A connection's way out over UCX; dropping it closes the UCX peer.
pub(crate) struct Route {
    id: PeerId,
    sender: Sender,
    peers: Peers,
}

impl Route {
    pub fn id(&self) -> PeerId {
        self.id
    }

    /// Sends one request frame (length prefix included).
    pub fn send(&self, frame: Bytes) -> Result<()> {
        self.sender
            .send(self.id, frame)
            .map_err(|e| Error::Transport(e.to_string()))
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        self.peers.lock().remove(&self.id);
        let _ = self.sender.close(self.id);
    }
}

/// The progress thread's side: hands answers to their connections.
struct Deliver {
    peers: Peers,
}

impl Deliver {
    fn peer(&self, id: PeerId) -> Option<Arc<dyn Peer>> {
        self.peers.lock().get(&id).and_then(Weak::upgrade)
    }
}

impl Events for Deliver {
    fn frame(&mut self, id: PeerId, frame: Vec<u8>, _replies: &mut Replies) {
        let Some(peer) = self.peer(id) else {
            return;
        };
        let mut body = Bytes::from(frame);
        if body.len() < 4 || body.get_u32() as usize != body.len() {
            peer.lost(Error::Protocol(
                "a UCX message from the server is not one whole frame".into(),
            ));
            return;
        }
        peer.frame(body);
    }

    fn lost(&mut self, id: PeerId, why: String) {
        if let Some(peer) = self.peer(id) {
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
