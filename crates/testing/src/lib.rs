//! Real services for Cellar's tests and local clusters, started on 127.0.0.1 from their own
//! installations and stopped by PID when dropped: [`ZooKeeper`] (Debian's package) and
//! [`MiniDfs`] (Hadoop's MiniDFSCluster, `java/minidfs`, built with Maven on first use).

mod minidfs;
mod zookeeper;

pub use minidfs::MiniDfs;
pub use zookeeper::ZooKeeper;

use std::net::TcpListener;

/// A port free on 127.0.0.1 a moment ago.
pub fn free_port() -> Result<u16, String> {
    let l =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot find a free port: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free port: {e}"))
}
