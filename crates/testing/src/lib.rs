//! Real processes for Cellar's tests, benchmarks and local clusters, started on 127.0.0.1 and
//! stopped by PID when dropped: any command as a [`Process`] (its output in a log file, every
//! wait bounded), `cellar` servers and the Thrift gateway on top of it ([`Cellar`],
//! [`ThriftGateway`]), and services from their own installations: [`ZooKeeper`] (Debian's
//! package) and [`MiniDfs`] (Hadoop's MiniDFSCluster, `java/minidfs`, built with Maven on
//! first use).

mod cellar;
mod minidfs;
mod process;
mod zookeeper;

pub use cellar::{Cellar, CellarServer, ThriftGateway, START_TIMEOUT};
pub use minidfs::MiniDfs;
pub use process::{strip_ansi, Log, Process, DEFAULT_GRACE};
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

/// `N` ports on 127.0.0.1 that were free a moment ago, for a server that must keep its
/// address across restarts. They are taken below Linux's ephemeral range (32768 and up), so
/// that no client socket or port-0 listener of another process grabs one while the server
/// is down.
pub fn free_ports<const N: usize>() -> Result<[u16; N], String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    // xorshift, seeded per process and instant, enough to spread the ports of parallel tests.
    let mut state = (u64::from(std::process::id()) << 32 | u64::from(nanos)) | 1;
    let mut ports = [0u16; N];
    let mut filled = 0;
    for _ in 0..10_000 {
        if filled == N {
            break;
        }
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let port = 20_000 + (state % 12_000) as u16;
        if ports[..filled].contains(&port) {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            ports[filled] = port;
            filled += 1;
        }
    }
    if filled < N {
        return Err(format!("no {N} free ports in 20000..32000"));
    }
    Ok(ports)
}
