//! The metrics and status endpoint over a real socket, fed by a real RPC server's counters
//! and a test handler's gauges.

mod rpc_support;

use cellar_proto::pb::Method;
use cellar_server::http::{HttpServer, Sources, StatusInfo, METRICS_CONTENT_TYPE};
use cellar_server::rpc::{self, FrontEnd};
use cellar_server::status::Gauges;
use rpc_support::{config, Client, TestHandler, IO_TIMEOUT};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Instant;

fn get(addr: SocketAddr, request: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).expect("connects");
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    s.write_all(request.as_bytes()).expect("request written");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("whole response");
    let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
    (head.to_string(), body.to_string())
}

fn servers() -> (FrontEnd, HttpServer, Arc<TestHandler>) {
    let handler = Arc::new(TestHandler::with_gauges(Gauges {
        regions_per_table: vec![("hbase:meta".into(), 1), ("users".into(), 4)],
        memstore_bytes: 12345,
        block_cache_hits: 9,
        block_cache_misses: 1,
        open_scanners: 2,
        ..Gauges::default()
    }));
    let rpc =
        rpc::start("127.0.0.1:0", &config(2, 10, 1 << 20), handler.clone()).expect("rpc starts");
    let http = HttpServer::start(
        "127.0.0.1:0",
        Sources {
            tls: None,
            token: None,
            thrift: Default::default(),
            metrics: rpc.metrics(),
            hbase_metrics: None,
            status: handler.clone(),
            info: StatusInfo {
                version: "9.9.9-test".into(),
                native_addr: rpc.local_addr().to_string(),
                data_dir: "/tmp/cellar-test-data".into(),
                root: "file:///tmp/cellar-test-data".into(),
                started: Instant::now(),
                coordination: None,
                server_name: "test-host,1,1".into(),
                rpc: Default::default(),
            },
        },
    )
    .expect("http starts");
    (rpc, http, handler)
}

#[test]
fn metrics_show_calls_errors_and_gauges_in_prometheus_text() {
    let (rpc, http, _handler) = servers();
    let mut c = Client::connect(rpc.local_addr());
    c.call(1, Method::Get, b"x", b"");
    c.call(2, Method::Status, b"", b"");
    let (head, body) = get(
        http.local_addr(),
        "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(
        head.contains(&format!("Content-Type: {METRICS_CONTENT_TYPE}")),
        "{head}"
    );
    for line in [
        "cellar_rpc_call_duration_seconds_count{method=\"GET\"} 1",
        "cellar_rpc_call_duration_seconds_count{method=\"STATUS\"} 1",
        "cellar_rpc_errors_total{code=\"INVALID_ARGUMENT\"} 1",
        "cellar_rpc_open_connections 1",
        "cellar_regions{table=\"users\"} 4",
        "cellar_memstore_bytes 12345",
        "cellar_block_cache_hit_ratio 0.9",
        "cellar_open_scanners 2",
    ] {
        assert!(
            body.lines().any(|l| l == line),
            "missing {line:?} in\n{body}"
        );
    }
    assert!(body.contains("# TYPE cellar_rpc_call_duration_seconds histogram"));
}

#[test]
fn status_is_json_with_addresses_and_gauges() {
    let (rpc, http, _handler) = servers();
    let (head, body) = get(http.local_addr(), "GET /status HTTP/1.0\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(head.contains("Content-Type: application/json"), "{head}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(v["version"], "9.9.9-test");
    assert_eq!(v["listen"]["native"], rpc.local_addr().to_string());
    assert_eq!(v["listen"]["http"], http.local_addr().to_string());
    assert_eq!(v["data_dir"], "/tmp/cellar-test-data");
    assert_eq!(v["gauges"]["regions_per_table"]["users"], 4);
    assert_eq!(v["gauges"]["memstore_bytes"], 12345);
    assert!(v["uptime_ms"].is_u64());
    assert_eq!(
        v["rpc"]["in_flight_bytes_limit"],
        cellar_server::config::RpcConfig::default().max_in_flight_bytes
    );
    assert_eq!(v["rpc"]["overload_refusals"]["in_flight_bytes"], 0);
    assert!(v["hbase"].is_null(), "no HBase front end here: {v}");
}

#[test]
fn other_paths_methods_and_bad_requests_are_refused() {
    let (_rpc, http, _handler) = servers();
    let (head, body) = get(http.local_addr(), "GET /nope HTTP/1.1\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    assert!(body.contains("/nope"), "{body}");
    let (head, body) = get(
        http.local_addr(),
        "GET /api/regions?table=%zz HTTP/1.1\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    assert!(body.contains("%zz"), "{body}");
    // The web UI's JSON may be read by another server's page; its script is served here.
    let (head, _) = get(http.local_addr(), "GET /api/server HTTP/1.1\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("Access-Control-Allow-Origin: *"), "{head}");
    let (head, body) = get(http.local_addr(), "GET /ui/cellar.js HTTP/1.1\r\n\r\n");
    assert!(head.contains("text/javascript"), "{head}");
    assert!(body.contains("/api/regions"), "{body}");
    let (head, _) = get(
        http.local_addr(),
        "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 405"), "{head}");
    assert!(head.contains("Allow: GET, HEAD"), "{head}");
    let (head, _) = get(http.local_addr(), "BREW\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    let huge = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000));
    let (head, _) = get(http.local_addr(), &huge);
    assert!(head.starts_with("HTTP/1.1 431"), "{head}");
    let (head, body) = get(http.local_addr(), "HEAD /metrics HTTP/1.1\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(body.is_empty());
}
