//! `rpc_bench ucx-memory`: what one connection costs a server over TCP and over UCX shared
//! memory: the server's resident memory and thread count with no client, then with N
//! connections open (each has made one Get), per connection; first N over TCP, then N over
//! UCX, each against a fresh server so neither inherits the other's memory.
//!
//! Each connection is a client of its own (a client keeps one connection per server), so the
//! client side also pays one UCX context per connection here; the server side, what this
//! reports, pays what any UCX connection costs it: a worker, a progress thread and its
//! receive-buffer pool.

use crate::rpc_bench::standalone;
use crate::transport_bench::{in_way_env, Way};
use cellar_client::{Client, ClientConfig};
use cellar_model::{FamilySchema, Get, RowMutation, TableSchema, LATEST_TIMESTAMP};
use serde::Serialize;
use std::path::Path;
use std::time::Duration;

pub type Result<T> = std::result::Result<T, String>;

/// One transport's cost per connection.
#[derive(Debug, Clone, Serialize)]
pub struct ConnCost {
    pub transport: &'static str,
    pub connections: usize,
    pub idle_rss_kib: u64,
    pub idle_threads: u64,
    pub rss_kib: u64,
    pub threads: u64,
    pub rss_kib_per_connection: f64,
    pub threads_per_connection: f64,
}

/// `VmRSS` (KiB) and `Threads` of a process, from `/proc/PID/status`.
fn rss_and_threads(pid: u32) -> Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("reading /proc/{pid}/status: {e}"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| format!("/proc/{pid}/status has no {name}"))
    };
    Ok((field("VmRSS:")?, field("Threads:")?))
}

/// Measures `way` with `n` connections against a fresh server of `cellar_bin`.
pub fn measure(cellar_bin: &Path, way: Way, n: usize) -> Result<ConnCost> {
    let data = tempfile::tempdir().map_err(|e| e.to_string())?;
    let env = way.env();
    let server = standalone(cellar_bin, data.path())
        .envs(env.iter().copied())
        .start()?;
    let (addr, pid) = (server.native.clone(), server.process.pid());
    in_way_env(way, async {
        let config = ClientConfig {
            transport: way.client(),
            ..ClientConfig::default()
        };
        let admin = Client::connect_with(&addr, ClientConfig::default())
            .await
            .map_err(|e| format!("connect: {e}"))?;
        admin
            .admin()
            .create_table(
                TableSchema::new("mem", vec![FamilySchema::new("cf")]),
                vec![],
            )
            .await
            .map_err(|e| e.to_string())?;
        let m = RowMutation::new("row").put(b"cf", b"q", LATEST_TIMESTAMP, vec![7u8; 1024]);
        admin.table("mem").put(m).await.map_err(|e| e.to_string())?;
        settle().await;
        let (idle_rss, idle_threads) = rss_and_threads(pid)?;
        let mut clients = Vec::with_capacity(n);
        for i in 0..n {
            let c = Client::connect_with(&addr, config.clone())
                .await
                .map_err(|e| format!("connection {i} over {}: {e}", way.name()))?;
            c.table("mem")
                .get(Get::new("row"))
                .await
                .map_err(|e| format!("Get on connection {i}: {e}"))?;
            if way != Way::Tcp && !c.uses_ucx().await.map_err(|e| e.to_string())? {
                return Err(format!("connection {i} is not on UCX"));
            }
            clients.push(c);
        }
        settle().await;
        let (rss, threads) = rss_and_threads(pid)?;
        drop(clients);
        let per = |a: u64, b: u64| (a as f64 - b as f64) / n as f64;
        Ok(ConnCost {
            transport: way.name(),
            connections: n,
            idle_rss_kib: idle_rss,
            idle_threads,
            rss_kib: rss,
            threads,
            rss_kib_per_connection: per(rss, idle_rss),
            threads_per_connection: per(threads, idle_threads),
        })
    })
}

/// Lets the server finish what the last calls started (flushes of counters, threads that
/// start lazily) before reading its memory.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(500)).await;
}

pub fn print(rows: &[ConnCost]) {
    println!(
        "{:<9} {:>5} {:>12} {:>8} {:>12} {:>8} {:>14} {:>13}",
        "transport",
        "conns",
        "idle RSS KiB",
        "threads",
        "RSS KiB",
        "threads",
        "KiB per conn",
        "threads/conn"
    );
    for r in rows {
        println!(
            "{:<9} {:>5} {:>12} {:>8} {:>12} {:>8} {:>14.0} {:>13.1}",
            r.transport,
            r.connections,
            r.idle_rss_kib,
            r.idle_threads,
            r.rss_kib,
            r.threads,
            r.rss_kib_per_connection,
            r.threads_per_connection
        );
    }
}
