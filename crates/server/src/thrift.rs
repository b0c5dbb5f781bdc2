//! The Thrift gateway: HBase's Thrift version 1 interface (`Hbase.thrift`), so happybase and
//! other Thrift1 clients work unmodified. The interface, what each call does and where Cellar
//! answers differently: `docs/thrift.md`.
//!
//! Like HBase's Thrift server, the gateway is a client of the database: every call becomes
//! calls of Cellar's Rust client on the native protocol, to the node it runs in (`--thrift-listen`
//! on `cellar standalone` or `cellar master`) or to a cluster (`cellar thrift --connect`). One
//! code path serves both; the gateway holds only scanners between calls.
//!
//! - [`protocol`]: the binary and compact protocols, to and from one value tree;
//! - [`connection`]: a client's connection: framed or unframed (found from its first bytes),
//!   one call at a time, answers in the caller's protocol and framing;
//! - [`values`]: reading arguments and building HBase's structs (`TCell`, `TRowResult`, ...);
//! - [`handler`]: the calls.

pub mod connection;
pub mod handler;
pub mod protocol;
pub mod values;

use crate::config::ThriftConfig;
use cellar_client::{Client, ClientConfig};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// A running gateway. Dropping it stops it.
pub struct ThriftGateway {
    local_addr: SocketAddr,
    state: Arc<Gateway>,
    stop: Option<watch::Sender<bool>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl ThriftGateway {
    /// Serves Thrift1 on `listener`, turning calls into calls on the Cellar server (or
    /// cluster) at `connect`.
    pub fn start(
        listener: std::net::TcpListener,
        connect: &str,
        client: ClientConfig,
        config: &ThriftConfig,
        cluster_id: Option<String>,
    ) -> Result<ThriftGateway, String> {
        let local_addr = listener
            .local_addr()
            .map_err(|e| format!("thrift listener: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("thrift listener: {e}"))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.threads.max(1))
            .thread_name("cellar-thrift")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the thrift runtime: {e}"))?;
        let client = runtime
            .block_on(Client::connect_with(connect, client))
            .map_err(|e| format!("thrift gateway cannot reach {connect}: {e}"))?;
        let listener = {
            let _entered = runtime.enter();
            tokio::net::TcpListener::from_std(listener)
                .map_err(|e| format!("thrift listener: {e}"))?
        };
        let state = Arc::new(Gateway {
            client,
            cluster_id,
            config: config.clone(),
            scanners: Mutex::new(HashMap::new()),
            next_scanner: AtomicI32::new(0),
            metrics: ThriftMetrics::default(),
        });
        let (stop, stopped) = watch::channel(false);
        runtime.spawn(accept_loop(listener, state.clone(), stopped));
        runtime.spawn(expire_scanners(state.clone(), stop.subscribe()));
        tracing::info!(addr = %local_addr, upstream = connect, "Thrift gateway listening");
        Ok(ThriftGateway {
            local_addr,
            state,
            stop: Some(stop),
            runtime: Some(runtime),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The gateway's counters.
    pub fn metrics(&self) -> &ThriftMetrics {
        &self.state.metrics
    }

    /// A handle that reads the counters after the gateway is gone too.
    pub fn metrics_source(&self) -> MetricsSource {
        let state = Arc::downgrade(&self.state);
        Arc::new(move || {
            state
                .upgrade()
                .map(|s| s.metrics.snapshot(s.scanners.lock().len()))
                .unwrap_or_default()
        })
    }

    /// Stops accepting, closes every connection and scanner.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        if let Some(runtime) = self.runtime.take() {
            self.state.scanners.lock().clear();
            // The runtime may be dropped from inside another runtime (a node's shutdown).
            crate::rpc::run_off_runtime("cellar-thrift-stop", move || {
                runtime.shutdown_timeout(Duration::from_secs(2))
            });
            tracing::info!(addr = %self.local_addr, "Thrift gateway stopped");
        }
    }
}

impl Drop for ThriftGateway {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads the gateway's counters.
pub type MetricsSource = Arc<dyn Fn() -> ThriftSnapshot + Send + Sync>;

/// What every connection shares: the client, the scanners and the counters.
pub struct Gateway {
    pub(crate) client: Client,
    /// What `getClusterId` answers, when the gateway runs in a server.
    pub(crate) cluster_id: Option<String>,
    pub(crate) config: ThriftConfig,
    pub(crate) scanners: Mutex<HashMap<i32, Arc<tokio::sync::Mutex<OpenScanner>>>>,
    next_scanner: AtomicI32,
    pub(crate) metrics: ThriftMetrics,
}

/// A scanner a client opened: HBase's Thrift1 scanners belong to the server, not to the
/// connection, so any connection may read or close one by its id.
pub struct OpenScanner {
    pub(crate) scanner: cellar_client::Scanner,
    /// A row read ahead (the first, read when the scanner opened).
    pub(crate) ahead: Option<cellar_client::Row>,
    /// The scanner has returned its last row.
    pub(crate) done: bool,
    pub(crate) sort_columns: bool,
    pub(crate) last_used: Instant,
}

impl Gateway {
    pub(crate) fn add_scanner(&self, s: OpenScanner) -> Result<i32, String> {
        let mut map = self.scanners.lock();
        if map.len() >= self.config.max_scanners {
            return Err(format!(
                "too many open scanners ({}, thrift.max_scanners): close scanners when done",
                map.len()
            ));
        }
        // Ids count up and skip ids in use after wrapping.
        let id = loop {
            let id = self
                .next_scanner
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                    Some(if v == i32::MAX { 0 } else { v + 1 })
                })
                .unwrap_or(0);
            if !map.contains_key(&id) {
                break id;
            }
        };
        map.insert(id, Arc::new(tokio::sync::Mutex::new(s)));
        self.metrics.scanners_opened.fetch_add(1, Ordering::Relaxed);
        Ok(id)
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    state: Arc<Gateway>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let open = state.metrics.connections_open.load(Ordering::Relaxed);
                    if open >= state.config.max_connections as u64 {
                        tracing::warn!(%peer, open, "thrift connection refused: thrift.max_connections reached");
                        state.metrics.connections_refused.fetch_add(1, Ordering::Relaxed);
                        drop(stream);
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let state = state.clone();
                    let stop = stop.clone();
                    tokio::spawn(async move {
                        state.metrics.connections_open.fetch_add(1, Ordering::Relaxed);
                        state.metrics.connections_total.fetch_add(1, Ordering::Relaxed);
                        connection::serve(stream, peer, state.clone(), stop).await;
                        state.metrics.connections_open.fetch_sub(1, Ordering::Relaxed);
                    });
                }
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!(error = %e, "thrift accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
}

/// Closes scanners idle past `thrift.scanner_lease_ms` (a client that died holding one).
async fn expire_scanners(state: Arc<Gateway>, mut stop: watch::Receiver<bool>) {
    let lease = Duration::from_millis(state.config.scanner_lease_ms);
    let tick = (lease / 4).clamp(Duration::from_millis(10), Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(tick) => {}
        }
        let now = Instant::now();
        let mut map = state.scanners.lock();
        let before = map.len();
        // A scanner in use (its lock held) is not idle.
        map.retain(|_, s| {
            s.try_lock()
                .map(|s| now.saturating_duration_since(s.last_used) < lease)
                .unwrap_or(true)
        });
        let expired = (before - map.len()) as u64;
        if expired > 0 {
            state
                .metrics
                .scanners_expired
                .fetch_add(expired, Ordering::Relaxed);
            tracing::info!(expired, "thrift scanners idle past their lease closed");
        }
    }
}

/// The gateway's counters (`cellar_thrift_*` on `/metrics`).
#[derive(Default)]
pub struct ThriftMetrics {
    pub connections_open: AtomicU64,
    pub connections_total: AtomicU64,
    pub connections_refused: AtomicU64,
    pub calls: AtomicU64,
    pub errors: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub call_micros: AtomicU64,
    pub scanners_opened: AtomicU64,
    pub scanners_expired: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ThriftSnapshot {
    pub connections_open: u64,
    pub connections_total: u64,
    pub connections_refused: u64,
    pub calls: u64,
    pub errors: u64,
    pub protocol_errors: u64,
    pub call_seconds: f64,
    pub scanners_open: u64,
    pub scanners_opened: u64,
    pub scanners_expired: u64,
}

impl ThriftMetrics {
    fn snapshot(&self, scanners_open: usize) -> ThriftSnapshot {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ThriftSnapshot {
            connections_open: get(&self.connections_open),
            connections_total: get(&self.connections_total),
            connections_refused: get(&self.connections_refused),
            calls: get(&self.calls),
            errors: get(&self.errors),
            protocol_errors: get(&self.protocol_errors),
            call_seconds: get(&self.call_micros) as f64 / 1e6,
            scanners_open: scanners_open as u64,
            scanners_opened: get(&self.scanners_opened),
            scanners_expired: get(&self.scanners_expired),
        }
    }
}

impl ThriftSnapshot {
    /// Prometheus text lines.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write;
        let counters = [
            (
                "connections_total",
                "Thrift connections accepted",
                self.connections_total as f64,
            ),
            (
                "connections_refused_total",
                "Thrift connections refused at thrift.max_connections",
                self.connections_refused as f64,
            ),
            ("calls_total", "Thrift calls served", self.calls as f64),
            (
                "errors_total",
                "Thrift calls answered with an exception",
                self.errors as f64,
            ),
            (
                "protocol_errors_total",
                "Thrift connections closed for bytes that are not a Thrift call",
                self.protocol_errors as f64,
            ),
            (
                "call_seconds_total",
                "Time spent serving Thrift calls",
                self.call_seconds,
            ),
            (
                "scanners_opened_total",
                "Thrift scanners opened",
                self.scanners_opened as f64,
            ),
            (
                "scanners_expired_total",
                "Thrift scanners closed after their lease",
                self.scanners_expired as f64,
            ),
        ];
        for (name, help, v) in counters {
            let _ = writeln!(out, "# HELP cellar_thrift_{name} {help}");
            let _ = writeln!(out, "# TYPE cellar_thrift_{name} counter");
            let _ = writeln!(out, "cellar_thrift_{name} {v}");
        }
        let gauges = [
            (
                "connections_open",
                "Open Thrift connections",
                self.connections_open,
            ),
            ("scanners_open", "Open Thrift scanners", self.scanners_open),
        ];
        for (name, help, v) in gauges {
            let _ = writeln!(out, "# HELP cellar_thrift_{name} {help}");
            let _ = writeln!(out, "# TYPE cellar_thrift_{name} gauge");
            let _ = writeln!(out, "cellar_thrift_{name} {v}");
        }
    }
}
