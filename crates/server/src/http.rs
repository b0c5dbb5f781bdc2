//! The metrics and status endpoint: a deliberately tiny HTTP/1.1 server on a one-thread tokio
//! runtime of its own, so scraping never competes with the RPC reactor.
//!
//! `GET /metrics` is Prometheus' text format, `GET /status` a JSON summary, and the web UI's
//! pages and JSON (`crate::web`) the rest; anything else is 404. One request per connection (`Connection: close`), request head at most 8 KiB, read
//! within 10 s, at most 64 connections at once.

use crate::metrics::{render, Overload, RpcMetrics};
use crate::status::Gauges;
use crate::status::StatusSource;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

const MAX_HEAD_BYTES: usize = 8 * 1024;
const READ_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_CONNECTIONS: usize = 64;
const LINGER: Duration = Duration::from_millis(500);
/// Prometheus' text exposition format.
pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What `/status` reports besides the gauges.
#[derive(Debug, Clone)]
pub struct StatusInfo {
    pub version: String,
    /// The native RPC address clients use.
    pub native_addr: String,
    pub data_dir: PathBuf,
    /// The root with its scheme (`hdfs://…` or `file://…`).
    pub root: String,
    pub started: Instant,
    /// The coordination in use: `/status` shows where it is and the session's state.
    pub coordination: Option<crate::coord::CoordRef>,
    /// This server's name (`host,port,startcode`), as a cluster lists it.
    pub server_name: String,
    /// The handler pool and reactor settings the server page shows.
    pub rpc: crate::config::RpcConfig,
}

/// Where the endpoint's answers come from.
pub struct Sources {
    pub metrics: Arc<RpcMetrics>,
    /// The HBase-compatible front end's counters, when it runs.
    pub hbase_metrics: Option<Arc<RpcMetrics>>,
    /// The gauges and the tables' view, from the region server.
    pub status: Arc<dyn StatusSource>,
    pub info: StatusInfo,
    /// HTTPS, when the node has TLS (its certificate, and client certificates when the
    /// node's client CA is set).
    pub tls: Option<Arc<crate::security::TlsServer>>,
    /// A token every request must bring (`Authorization: Bearer TOKEN`), unless it came with
    /// a client certificate the TLS handshake checked (`security.http_token_file`).
    pub token: Option<String>,
    /// The Thrift gateway's counters, once it runs (it starts after this endpoint).
    pub thrift: Arc<std::sync::OnceLock<crate::thrift::MetricsSource>>,
}

/// A running HTTP endpoint. Dropping it shuts it down.
pub struct HttpServer {
    local_addr: SocketAddr,
    running: Option<(tokio::runtime::Runtime, watch::Sender<bool>)>,
}

impl HttpServer {
    /// Binds `listen` (port 0 picks a free one) and starts serving.
    pub fn start(listen: &str, sources: Sources) -> std::io::Result<HttpServer> {
        let listener = std::net::TcpListener::bind(listen).map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot listen on {listen}: {e}"))
        })?;
        HttpServer::start_on(listener, sources)
    }

    /// [`HttpServer::start`] on a bound listener (bound early, so that its address can be
    /// published before the server serves).
    pub fn start_on(
        listener: std::net::TcpListener,
        sources: Sources,
    ) -> std::io::Result<HttpServer> {
        listener.set_nonblocking(true)?;
        let local_addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(4)
            .thread_name("cellar-http")
            .enable_all()
            .build()?;
        let listener = {
            let _entered = runtime.enter();
            TcpListener::from_std(listener)?
        };
        let (stop, stopped) = watch::channel(false);
        let sources = Arc::new(Served {
            sources,
            http_addr: local_addr,
            tls_metrics: RpcMetrics::default(),
        });
        runtime.spawn(accept_loop(listener, sources, stopped));
        tracing::info!(addr = %local_addr, "HTTP metrics and status listening");
        Ok(HttpServer {
            local_addr,
            running: Some((runtime, stop)),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting and drops open connections.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some((runtime, stop)) = self.running.take() {
            let _ = stop.send(true);
            runtime.shutdown_background();
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop();
    }
}

struct Served {
    sources: Sources,
    http_addr: SocketAddr,
    /// Failed handshakes and plaintext clients of the HTTPS port.
    tls_metrics: RpcMetrics,
}

async fn accept_loop(listener: TcpListener, served: Arc<Served>, mut stop: watch::Receiver<bool>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let accepted = tokio::select! {
            biased;
            _ = crate::rpc::stopped(&mut stop) => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, peer)) => {
                let served = served.clone();
                tokio::spawn(async move {
                    let served = &served;
                    let result = match served.sources.tls.as_deref() {
                        None => serve(stream, served, false).await,
                        Some(tls) => serve_tls(tls, stream, peer, served).await,
                    };
                    if let Err(e) = result {
                        tracing::debug!(%peer, error = %e, "HTTP connection failed");
                    }
                    drop(slot);
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "HTTP accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// A response about to be written.
struct Response {
    status: &'static str,
    content_type: &'static str,
    body: String,
    /// JSON any origin may read (another server's web UI page, in a cluster).
    any_origin: bool,
}

impl Response {
    fn text(status: &'static str, body: impl Into<String>) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
            any_origin: false,
        }
    }

    fn json(body: String) -> Response {
        Response {
            status: "200 OK",
            content_type: "application/json",
            body,
            any_origin: true,
        }
    }
}

/// One HTTPS connection: the handshake, then the request as over plain HTTP; a plaintext
/// request gets a 400 saying the port needs HTTPS.
async fn serve_tls(
    tls: &crate::security::TlsServer,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    served: &Served,
) -> std::io::Result<()> {
    use crate::security::tls::Accepted;
    match tls
        .accept(stream, READ_TIMEOUT, peer, &served.tls_metrics, "HTTP")
        .await
    {
        Accepted::Tls { stream, user } => serve(*stream, served, user.is_some()).await,
        Accepted::Plaintext(stream) => {
            let response = Response::text(
                "400 Bad Request",
                "this port serves only HTTPS: use https:// (and the CA that signed the server's certificate)\n",
            );
            write_response(stream, &response, false).await
        }
        Accepted::Failed => Ok(()),
    }
}

/// One request. `certified`: the client presented a certificate the handshake checked, which
/// lets it in without the token.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    served: &Served,
    certified: bool,
) -> std::io::Result<()> {
    let (response, head_only) =
        match tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream)).await {
            Err(_) => (
                Response::text("408 Request Timeout", "request head not received in time\n"),
                false,
            ),
            Ok(Err(e)) => return Err(e),
            Ok(Ok(Head::TooLarge)) => (
                Response::text(
                    "431 Request Header Fields Too Large",
                    format!("request head exceeds {MAX_HEAD_BYTES} bytes\n"),
                ),
                false,
            ),
            Ok(Ok(Head::Closed)) => return Ok(()),
            Ok(Ok(Head::Rpc(which))) => (
                Response::text(
                    "400 Bad Request",
                    format!("this is Cellar's HTTP port (web UI, metrics); {which} clients connect to its {which} port\n"),
                ),
                false,
            ),
            Ok(Ok(Head::Line(line, authorization))) => match parse_request_line(&line) {
                Err(why) => (Response::text("400 Bad Request", format!("{why}\n")), false),
                Ok((method, _, _)) if !certified && !token_ok(served, authorization.as_deref()) => (
                    Response::text(
                        "401 Unauthorized",
                        "this endpoint needs a token (Authorization: Bearer TOKEN) or a client certificate\n",
                    ),
                    method == "HEAD",
                ),
                Ok((method, path, query)) => {
                    (route(method, path, query, served).await, method == "HEAD")
                }
            },
        };
    write_response(stream, &response, head_only).await
}

/// Writes `response` and closes the connection.
async fn write_response<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    response: &Response,
    head_only: bool,
) -> std::io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        response.status,
        response.content_type,
        response.body.len()
    );
    if response.status.starts_with("405") {
        out.push_str("Allow: GET, HEAD\r\n");
    }
    if response.status.starts_with("401") {
        out.push_str("WWW-Authenticate: Bearer\r\n");
    }
    if response.any_origin {
        out.push_str("Access-Control-Allow-Origin: *\r\n");
    }
    // Every page and number is live: never from a cache.
    out.push_str("Cache-Control: no-store\r\n");
    out.push_str("\r\n");
    if !head_only {
        out.push_str(&response.body);
    }
    stream.write_all(out.as_bytes()).await?;
    stream.shutdown().await?;
    // Input the request left unread (an oversized head) would turn the close into a reset
    // that can destroy the response before the client reads it: drain it for a moment.
    let _ = tokio::time::timeout(LINGER, async {
        let mut scratch = [0u8; 4096];
        let mut total = 0usize;
        while total < 1 << 20 {
            match stream.read(&mut scratch).await {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    })
    .await;
    Ok(())
}

enum Head {
    /// The request line, and the `Authorization` header's value if there is one.
    Line(String, Option<String>),
    TooLarge,
    /// The client closed before sending a whole head.
    Closed,
    /// The first bytes are an RPC preamble (`native` or `HBase`): a client pointed at the
    /// wrong port, answered at once instead of after the head's timeout (it sends no more).
    Rpc(&'static str),
}

/// Reads the request head (up to the blank line) and returns its first line.
async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> std::io::Result<Head> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(Head::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.starts_with(b"CELR") {
            return Ok(Head::Rpc("native"));
        }
        if buf.starts_with(b"HBas") {
            return Ok(Head::Rpc("HBase"));
        }
        let end = find(&buf, b"\r\n\r\n").or_else(|| find(&buf, b"\n\n"));
        if let Some(end) = end {
            let head = &buf[..end];
            let mut lines = head.split(|&b| b == b'\n');
            let first = lines.next().unwrap_or_default();
            let authorization = lines.find_map(|l| {
                let l = String::from_utf8_lossy(l);
                let (name, value) = l.split_once(':')?;
                name.trim()
                    .eq_ignore_ascii_case("authorization")
                    .then(|| value.trim().to_string())
            });
            return Ok(Head::Line(
                String::from_utf8_lossy(first).trim_end().to_string(),
                authorization,
            ));
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Ok(Head::TooLarge);
        }
    }
}

/// Whether a request may in without a certificate: no token is configured, or it brings it.
fn token_ok(served: &Served, authorization: Option<&str>) -> bool {
    let Some(token) = &served.sources.token else {
        return true;
    };
    let given = authorization
        .and_then(|a| {
            a.strip_prefix("Bearer ")
                .or_else(|| a.strip_prefix("bearer "))
        })
        .map(str::trim);
    // Compared in constant time: a mismatch position must not show in the timing.
    given.is_some_and(|g| {
        g.len() == token.len()
            && g.bytes()
                .zip(token.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Splits `METHOD TARGET HTTP/1.x` into method, path and query (empty when none).
fn parse_request_line(line: &str) -> Result<(&str, &str, &str), String> {
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("malformed request line {line:?}"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(format!("unsupported protocol {version:?}"));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    Ok((method, path, query))
}

async fn route(method: &str, path: &str, query: &str, served: &Served) -> Response {
    if method != "GET" && method != "HEAD" {
        return Response::text(
            "405 Method Not Allowed",
            format!("{method} is not supported; use GET\n"),
        );
    }
    match path {
        "/metrics" => {
            let gauges = gauges(served).await;
            let mut body = render(
                &served.sources.metrics,
                served.sources.hbase_metrics.as_deref(),
                &gauges,
            );
            if let Some(thrift) = served.sources.thrift.get() {
                thrift().render(&mut body);
            }
            Response {
                status: "200 OK",
                content_type: METRICS_CONTENT_TYPE,
                body,
                any_origin: false,
            }
        }
        "/status" => {
            let gauges = gauges(served).await;
            Response::json(status_json(served, &gauges))
        }
        "/api/regions" => {
            let table = match query_table(query) {
                Ok(t) => t,
                Err(e) => return e,
            };
            let status = served.sources.status.clone();
            let tables = tokio::task::spawn_blocking(move || status.tables_view(table.as_deref()))
                .await
                .unwrap_or_default();
            let info = &served.sources.info;
            Response::json(crate::web::regions_json(
                &info.server_name,
                &served.http_addr.to_string(),
                &tables,
            ))
        }
        "/api/server" => {
            let gauges = gauges(served).await;
            let info = &served.sources.info;
            Response::json(crate::web::server_json(&crate::web::ServerPage {
                name: &info.server_name,
                role: &gauges.role,
                rpc: &info.rpc,
                native: &served.sources.metrics,
                hbase: served.sources.hbase_metrics.as_deref(),
                gauges: &gauges,
            }))
        }
        _ => match crate::web::asset(path) {
            Some((content_type, body)) => Response {
                status: "200 OK",
                content_type,
                body: body.to_string(),
                any_origin: false,
            },
            None => Response::text(
                "404 Not Found",
                format!("no such page: {path} (try /, /server, /metrics or /status)\n"),
            ),
        },
    }
}

/// The `table` parameter of `/api/regions`, if any; a 400 when it cannot be decoded.
fn query_table(query: &str) -> Result<Option<String>, Response> {
    let raw = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "table");
    match raw {
        None => Ok(None),
        Some((_, v)) => crate::web::percent_decode(v).map(Some).ok_or_else(|| {
            Response::text(
                "400 Bad Request",
                format!("the table parameter {v:?} is not a percent-encoded UTF-8 name\n"),
            )
        }),
    }
}

/// The status source's gauges, read on a blocking thread: the region server may take locks.
async fn gauges(served: &Served) -> Gauges {
    let status = served.sources.status.clone();
    tokio::task::spawn_blocking(move || status.gauges())
        .await
        .unwrap_or_else(|_| {
            tracing::error!("reading the region server's gauges panicked");
            Gauges::default()
        })
}

/// One front end's counters for `/status`.
fn front_end_json(rpc: &RpcMetrics) -> serde_json::Value {
    serde_json::json!({
        "calls": rpc.total_calls(),
        "open_connections": rpc.open_connections(),
        "call_queue_length": rpc.queue_depth(),
        "received_bytes": rpc.bytes_in(),
        "sent_bytes": rpc.bytes_out(),
        "in_flight_bytes": rpc.in_flight_bytes(),
        "in_flight_bytes_peak": rpc.in_flight_peak(),
        "in_flight_bytes_limit": rpc.in_flight_limit(),
        "overload_refusals": {
            "call_queue": rpc.overload_refusals(Overload::CallQueue),
            "in_flight_bytes": rpc.overload_refusals(Overload::InFlightBytes),
        },
        "stalled_connections": rpc.stalled_connections(),
        "connection_timeouts": rpc.connection_timeouts(),
    })
}

fn status_json(served: &Served, g: &Gauges) -> String {
    let info = &served.sources.info;
    let rpc = &served.sources.metrics;
    let regions: serde_json::Map<String, serde_json::Value> = g
        .regions_per_table
        .iter()
        .map(|(t, n)| (t.clone(), serde_json::Value::from(*n)))
        .collect();
    let v = serde_json::json!({
        "version": info.version,
        "server": info.server_name,
        "uptime_ms": u64::try_from(info.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "listen": {
            "native": info.native_addr,
            "http": served.http_addr.to_string(),
        },
        "data_dir": info.data_dir.display().to_string(),
        "root": info.root,
        "role": g.role,
        "servers": g.servers.iter().map(|s| serde_json::json!({
            "name": s.name,
            "native": s.native_addr,
            "http": s.http_addr,
            "regions": s.regions,
        })).collect::<Vec<_>>(),
        "dead_servers": g.dead_servers.iter().map(|s| serde_json::json!({
            "name": s.name,
            "native": s.native_addr,
            "http": s.http_addr,
        })).collect::<Vec<_>>(),
        "coordination": info.coordination.as_ref().map(|c| serde_json::json!({
            "service": c.describe(),
            "session": c.session().as_str(),
        })),
        "rpc": front_end_json(rpc),
        "hbase": served.sources.hbase_metrics.as_deref().map(front_end_json),
        "gauges": {
            "regions_per_table": regions,
            "memstore_bytes": g.memstore_bytes,
            "store_file_bytes": g.store_file_bytes,
            "store_files": g.store_files,
            "block_cache_hits": g.block_cache_hits,
            "block_cache_misses": g.block_cache_misses,
            "block_cache_hit_ratio": g.block_cache_hit_ratio(),
            "query_cache": {
                "hits": g.query_cache.hits,
                "misses": g.query_cache.misses,
                "bypasses": g.query_cache.bypasses,
                "fills": g.query_cache.fills,
                "fills_refused": g.query_cache.fills_refused,
                "evictions": g.query_cache.evictions,
                "invalidations": g.query_cache.invalidations,
                "bytes": g.query_cache.bytes,
                "entries": g.query_cache.entries,
                "capacity_bytes": g.query_cache.capacity,
            },
            "flush_queue": g.flush_queue,
            "compaction_queue": g.compaction_queue,
            "open_scanners": g.open_scanners,
            "prepared_scans_open": g.prepared_scans_open,
            "prepared_scans_total": g.prepared_scans_total,
            "prepared_scan_executions": g.prepared_scan_executions,
            "splits": g.splits,
            "read_requests": g.read_requests,
            "write_requests": g.write_requests,
        },
        "wal": crate::status::wal_json(g),
    });
    let mut s = v.to_string();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines_parse_or_name_the_problem() {
        assert_eq!(
            parse_request_line("GET /metrics?x=1 HTTP/1.1"),
            Ok(("GET", "/metrics", "x=1"))
        );
        assert!(parse_request_line("GET /metrics").is_err());
        assert!(parse_request_line("GET / SPDY/3")
            .expect_err("protocol")
            .contains("SPDY/3"));
        assert!(parse_request_line("GET  / HTTP/1.1").is_err());
    }
}
