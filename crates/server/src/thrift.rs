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
//!
//! Who calls (`docs/thrift.md`, "Security"): on a TLS Thrift port (`thrift.tls`) the user of
//! the caller's client certificate, else `thrift.user`. The gateway's connections to the
//! servers authenticate as the gateway (its certificate, or the user it claims) and every
//! call names its caller as the request's `effective_user` (HBase's `doAs`); the servers run
//! it as that user where `security.proxy_users` lets the gateway act for it. One client per
//! caller (HBase's Thrift server keeps a connection per user too), dropped when idle.

// Policy: nothing a Thrift client sends may panic the gateway, so no slice indexing outside
// tests; where an index is in bounds by construction, an `allow` on the smallest item says why.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

pub mod connection;
pub mod handler;
pub mod protocol;
pub mod values;

use crate::config::ThriftConfig;
use crate::security::TlsServer;
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

/// Where the gateway's calls go: fixed addresses, or addresses looked up again every
/// [`UPSTREAM_CHECK`] (a region server's gateway follows the active master).
pub enum Upstream {
    /// `host:port[,host:port...]`: a server, or a cluster's masters.
    Fixed(String),
    /// Answers the addresses now (a blocking call: it may ask the coordination service).
    Resolve(Arc<dyn Fn() -> Result<String, String> + Send + Sync>),
}

/// How often a resolved upstream is looked up again.
pub const UPSTREAM_CHECK: Duration = Duration::from_secs(2);
/// A caller's client unused this long is closed (HBase's `hbase.thrift.connection.max-idletime`
/// is 10 minutes).
const CLIENT_IDLE: Duration = Duration::from_secs(600);
/// The most callers with a client at once; the least recently used goes first.
const MAX_CLIENTS: usize = 1024;
/// A TLS caller's handshake must finish within this.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Who the gateway is and whom it serves.
pub struct Identity {
    /// The gateway's own connections: its certificate (`tls`) or the user it claims (`user`).
    /// `effective_user` is set per caller.
    pub client: ClientConfig,
    /// The user of callers without a certificate (`thrift.user`); `None`: such callers are
    /// refused.
    pub default_user: Option<String>,
    /// TLS on the Thrift port: a caller's client certificate names it.
    pub tls: Option<Arc<TlsServer>>,
}

impl ThriftGateway {
    /// Serves Thrift1 on `listener`, turning calls into calls on the Cellar server (or
    /// cluster) at `upstream`, each for its caller.
    pub fn start(
        listener: std::net::TcpListener,
        upstream: Upstream,
        identity: Identity,
        config: &ThriftConfig,
        cluster_id: Option<String>,
    ) -> Result<ThriftGateway, String> {
        let local_addr = listener
            .local_addr()
            .map_err(|e| format!("thrift listener: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("thrift listener: {e}"))?;
        let (connect, resolve) = match upstream {
            Upstream::Fixed(a) => (a, None),
            Upstream::Resolve(f) => (f()?, Some(f)),
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.threads.max(1))
            .thread_name("cellar-thrift")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the thrift runtime: {e}"))?;
        let Identity {
            client,
            default_user,
            tls,
        } = identity;
        // The servers must be reachable now (a mistyped address is an error at start).
        let probe = ClientConfig {
            effective_user: default_user.clone(),
            ..client.clone()
        };
        let first = runtime
            .block_on(Client::connect_with(&connect, probe))
            .map_err(|e| format!("thrift gateway cannot reach {connect}: {e}"))?;
        let listener = {
            let _entered = runtime.enter();
            tokio::net::TcpListener::from_std(listener)
                .map_err(|e| format!("thrift listener: {e}"))?
        };
        let default_user: Option<Arc<str>> = default_user.map(Arc::from);
        let mut clients = HashMap::new();
        if let Some(u) = &default_user {
            clients.insert(u.clone(), (first, Instant::now()));
        }
        let state = Arc::new(Gateway {
            base: client,
            upstream: Mutex::new(connect.clone()),
            clients: Mutex::new(clients),
            default_user,
            tls,
            tls_metrics: crate::metrics::RpcMetrics::default(),
            cluster_id,
            config: config.clone(),
            scanners: Mutex::new(HashMap::new()),
            next_scanner: AtomicI32::new(0),
            metrics: ThriftMetrics::default(),
        });
        let (stop, stopped) = watch::channel(false);
        runtime.spawn(accept_loop(listener, state.clone(), stopped));
        runtime.spawn(expire_scanners(state.clone(), stop.subscribe()));
        if let Some(resolve) = resolve {
            runtime.spawn(follow_upstream(state.clone(), resolve, stop.subscribe()));
        }
        tracing::info!(addr = %local_addr, upstream = connect, tls = state.tls.is_some(), "Thrift gateway listening");
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

/// What every connection shares: the callers' clients, the scanners and the counters.
pub struct Gateway {
    /// The gateway's own client configuration (no effective user).
    base: ClientConfig,
    /// The addresses its clients are made for.
    upstream: Mutex<String>,
    /// One client per caller, with when it was last used.
    clients: Mutex<HashMap<Arc<str>, (Client, Instant)>>,
    /// Who a caller without a certificate is (`thrift.user`).
    pub(crate) default_user: Option<Arc<str>>,
    tls: Option<Arc<TlsServer>>,
    /// Counts the Thrift port's refused handshakes and plaintext clients.
    tls_metrics: crate::metrics::RpcMetrics,
    /// What `getClusterId` answers, when the gateway runs in a server.
    pub(crate) cluster_id: Option<String>,
    pub(crate) config: ThriftConfig,
    /// Each open scanner, with the caller that opened it (only it may use or close it).
    pub(crate) scanners: Mutex<HashMap<i32, (Arc<str>, SharedScanner)>>,
    next_scanner: AtomicI32,
    pub(crate) metrics: ThriftMetrics,
}

/// An open scanner, shared by the calls that use it.
pub(crate) type SharedScanner = Arc<tokio::sync::Mutex<OpenScanner>>;

/// A scanner a client opened: HBase's Thrift1 scanners belong to the server, not to the
/// connection, so any connection of the same caller may read or close one by its id.
pub struct OpenScanner {
    pub(crate) scanner: cellar_client::Scanner,
    /// The scanner has returned its last row.
    pub(crate) done: bool,
    pub(crate) sort_columns: bool,
    pub(crate) last_used: Instant,
}

impl Gateway {
    /// The client that calls for `user`: made on first use (its connections authenticate as
    /// the gateway and name `user` as every call's effective user).
    pub(crate) async fn client_for(&self, user: &Arc<str>) -> Result<Client, String> {
        if let Some((client, used)) = self.clients.lock().get_mut(user) {
            *used = Instant::now();
            return Ok(client.clone());
        }
        let connect = self.upstream.lock().clone();
        let config = ClientConfig {
            effective_user: Some(user.to_string()),
            ..self.base.clone()
        };
        let client = Client::connect_with(&connect, config)
            .await
            .map_err(|e| format!("java.io.IOException: the gateway cannot reach {connect}: {e}"))?;
        let mut map = self.clients.lock();
        if map.len() >= MAX_CLIENTS && !map.contains_key(user) {
            let oldest = map
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                map.remove(&k);
            }
        }
        let entry = map.entry(user.clone()).or_insert((client, Instant::now()));
        Ok(entry.0.clone())
    }

    pub(crate) fn add_scanner(&self, owner: Arc<str>, s: OpenScanner) -> Result<i32, String> {
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
        map.insert(id, (owner, Arc::new(tokio::sync::Mutex::new(s))));
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
                        serve_one(stream, peer, &state, stop).await;
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

/// One connection: its TLS handshake first on a TLS port, then its calls, as the caller its
/// certificate names (else `thrift.user`).
async fn serve_one(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    state: &Arc<Gateway>,
    stop: watch::Receiver<bool>,
) {
    let Some(tls) = &state.tls else {
        let user = state.default_user.clone();
        connection::serve(stream, peer, user, state.clone(), stop).await;
        return;
    };
    use crate::security::tls::Accepted;
    match tls
        .accept(
            stream,
            HANDSHAKE_TIMEOUT,
            peer,
            &state.tls_metrics,
            "thrift",
        )
        .await
    {
        Accepted::Tls { stream, user } => {
            let user = user.map(Arc::from).or_else(|| state.default_user.clone());
            tracing::debug!(%peer, user = ?user, "thrift TLS connection");
            connection::serve(*stream, peer, user, state.clone(), stop).await;
        }
        Accepted::Plaintext(_) => {
            // Thrift has no way to say "use TLS" before a session: the log says it.
            state
                .metrics
                .protocol_errors
                .fetch_add(1, Ordering::Relaxed);
        }
        Accepted::Failed => {}
    }
}

/// Looks the upstream up again every [`UPSTREAM_CHECK`]; when it changed (another master is
/// active), callers get new clients for it. Scanners open keep theirs.
async fn follow_upstream(
    state: Arc<Gateway>,
    resolve: Arc<dyn Fn() -> Result<String, String> + Send + Sync>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(UPSTREAM_CHECK) => {}
        }
        let resolve = resolve.clone();
        let now = match tokio::task::spawn_blocking(move || resolve()).await {
            Ok(Ok(now)) => now,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "thrift gateway: cannot look up the masters");
                continue;
            }
            Err(_) => continue,
        };
        let mut upstream = state.upstream.lock();
        if *upstream != now {
            tracing::info!(from = %*upstream, to = %now, "thrift gateway follows the masters");
            *upstream = now;
            drop(upstream);
            state.clients.lock().clear();
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
        map.retain(|_, (_, s)| {
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
        drop(map);
        state
            .clients
            .lock()
            .retain(|_, (_, used)| now.saturating_duration_since(*used) < CLIENT_IDLE);
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
