//! `cellar standalone` as a real process: it announces its addresses, serves native calls,
//! `/metrics` and `/status`, shuts down cleanly on SIGTERM and SIGINT keeping what was written,
//! refuses a bad configuration file by naming the key, and refuses a data directory another
//! server holds.

use cellar_client::blocking::Client;
use cellar_client::{FamilySchema, Get, RowMutation, TableSchema, LATEST_TIMESTAMP};
use cellar_server::ServerConfig;
use cellar_testing::{Cellar, CellarServer};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(60);

/// `cellar standalone` on ephemeral ports with `data` as its data directory, once it has
/// announced each address once; stopped by PID if a test fails before stopping it.
struct Server {
    cellar: CellarServer,
    native: String,
    http: String,
    data_dir: String,
}

impl Server {
    fn start(data: &Path, extra: &[&str]) -> Server {
        let cellar = Cellar::standalone(env!("CARGO_BIN_EXE_cellar"))
            .data_dir(data)
            .args(extra)
            .start_timeout(TIMEOUT)
            .start()
            .unwrap_or_else(|e| panic!("no address lines: {e}"));
        let stdout = cellar.process.stdout();
        for key in ["listening native=", "listening http="] {
            let times = stdout.lines().filter(|l| l.starts_with(key)).count();
            assert_eq!(times, 1, "{key} announced {times} times:\n{stdout}");
        }
        Server {
            native: cellar.native.clone(),
            http: cellar.http.clone(),
            data_dir: cellar.data_dir.clone(),
            cellar,
        }
    }

    fn signal(&mut self, signal: i32) {
        self.cellar
            .process
            .signal(signal)
            .unwrap_or_else(|e| panic!("kill failed: {e}"));
    }

    /// Waits for the process to exit by itself.
    fn wait_exit(&mut self) -> ExitStatus {
        self.cellar
            .process
            .wait_exit(TIMEOUT)
            .unwrap_or_else(|e| panic!("server did not exit: {e}"))
    }
}

fn http_get(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).expect("http connects");
    s.set_read_timeout(Some(TIMEOUT)).expect("timeout");
    write!(s, "GET {path} HTTP/1.1\r\nHost: cellar\r\n\r\n").expect("request");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("response");
    let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
    (head.to_string(), body.to_string())
}

fn schema(table: &str) -> TableSchema {
    TableSchema::new(table, vec![FamilySchema::new("f")])
}

#[test]
fn serves_rpc_metrics_and_status_then_stops_cleanly_on_sigterm_keeping_data() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let mut server = Server::start(&data, &[]);
    assert_eq!(
        Path::new(&server.data_dir),
        std::path::absolute(&data).expect("absolute")
    );

    let client = Client::connect(&server.native).expect("client connects");
    client.ping().expect("ping");
    client
        .admin()
        .create_table(schema("people"), Vec::new())
        .expect("create table");
    let people = client.table("people");
    people
        .put(RowMutation::new("ada").put(b"f", b"name", LATEST_TIMESTAMP, "Ada Lovelace"))
        .expect("put");
    let row = people.get(Get::new("ada")).expect("get");
    assert_eq!(
        row.value(b"f", b"name").map(|v| v.to_vec()),
        Some(b"Ada Lovelace".to_vec())
    );

    let (head, body) = http_get(&server.http, "/metrics");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    assert!(
        body.lines()
            .any(|l| l.starts_with("cellar_rpc_call_duration_seconds_count{method=\"GET\"}")),
        "{body}"
    );
    assert!(
        body.lines()
            .any(|l| l == "cellar_regions{table=\"people\"} 1"),
        "{body}"
    );
    let (head, body) = http_get(&server.http, "/status");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let status: serde_json::Value = serde_json::from_str(&body).expect("status is JSON");
    assert_eq!(status["listen"]["native"], server.native.as_str());
    assert_eq!(status["listen"]["http"], server.http.as_str());
    assert_eq!(status["data_dir"], server.data_dir.as_str());
    assert_eq!(status["gauges"]["regions_per_table"]["people"], 1);
    drop(client);

    server.signal(libc::SIGTERM);
    let status = server.wait_exit();
    assert_eq!(status.code(), Some(0), "exit after SIGTERM: {status:?}");

    // The same data dir again: the row is still there; SIGINT stops it just as cleanly.
    let mut again = Server::start(&data, &[]);
    let client = Client::connect(&again.native).expect("client connects");
    let row = client
        .table("people")
        .get(Get::new("ada"))
        .expect("get after restart");
    assert_eq!(
        row.value(b"f", b"name").map(|v| v.to_vec()),
        Some(b"Ada Lovelace".to_vec())
    );
    drop(client);
    again.signal(libc::SIGINT);
    assert_eq!(again.wait_exit().code(), Some(0));
}

#[test]
fn a_config_file_is_read_and_flags_override_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("cellar.toml");
    // The listen keys point at a port that is surely taken: the flags must win.
    std::fs::write(
        &file,
        "listen = \"127.0.0.1:1\"\nhttp_listen = \"127.0.0.1:1\"\n[rpc]\nhandler_count = 3\n",
    )
    .expect("config written");
    let data = tmp.path().join("data");
    let mut server = Server::start(&data, &["--config", file.to_str().expect("utf-8 path")]);
    assert!(!server.native.ends_with(":1"), "{}", server.native);
    let (head, _) = http_get(&server.http, "/status");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    server.signal(libc::SIGTERM);
    assert_eq!(server.wait_exit().code(), Some(0));
}

#[test]
fn a_bad_config_file_names_the_key_and_exits_non_zero() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (text, key) in [
        ("[rpc]\nhandler_cuont = 4\n", "handler_cuont"),
        ("[rpc]\nio_threads = 0\n", "rpc.io_threads"),
        ("[scanner]\nlease_ms = \"soon\"\n", "lease_ms"),
    ] {
        let file = tmp.path().join("bad.toml");
        std::fs::write(&file, text).expect("config written");
        let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
            .arg("standalone")
            .arg("--config")
            .arg(&file)
            .arg("--data-dir")
            .arg(tmp.path().join("never"))
            .output()
            .expect("cellar runs");
        assert!(!out.status.success(), "{text:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(key), "{key} not named in: {err}");
        assert!(err.contains("bad.toml"), "file not named in: {err}");
        assert!(
            out.stdout.is_empty(),
            "printed {:?}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args(["standalone", "--config"])
        .arg(tmp.path().join("missing.toml"))
        .output()
        .expect("cellar runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.toml"));
}

#[test]
fn a_second_server_on_the_same_data_directory_is_refused_naming_the_lock() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let first = Server::start(&data, &[]);
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .arg("standalone")
        .args(["--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"])
        .args(["--hbase-listen", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(&data)
        .output()
        .expect("cellar runs");
    assert!(!out.status.success(), "two servers on one data directory");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("in use by another Cellar server") && err.contains("LOCK"),
        "{err}"
    );
    // The first server is unharmed.
    let client = Client::connect(&first.native).expect("connect");
    client
        .admin()
        .create_table(schema("still"), vec![])
        .expect("the first server still serves");
    drop(first);
}

#[test]
fn the_documented_example_config_is_every_default() {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md"),
    )
    .expect("docs/configuration.md");
    let start = doc
        .find("Every key, at its default:\n\n```toml\n")
        .expect("example block")
        + "Every key, at its default:\n\n```toml\n".len();
    let end = start + doc[start..].find("```").expect("end of block");
    let mut parsed = ServerConfig::from_toml(&doc[start..end]).expect("example parses");
    let defaults = ServerConfig::default();
    // `[storage]` keys override the engine's defaults: given at their defaults, the engine gets
    // what it gets with none of them.
    let s = (&parsed.storage, &defaults.storage);
    assert_eq!(
        format!("{:?}", s.0.engine_config()),
        format!("{:?}", s.1.engine_config())
    );
    assert_eq!(
        (
            s.0.chunk_pool_limit(),
            s.0.chunks_ready(),
            s.0.hdfs_write_buffer()
        ),
        (
            s.1.chunk_pool_limit(),
            s.1.chunks_ready(),
            s.1.hdfs_write_buffer()
        )
    );
    assert_eq!(
        s.0.compaction_check_interval(),
        s.1.compaction_check_interval()
    );
    parsed.storage = defaults.storage.clone();
    assert_eq!(parsed, defaults);
}

#[test]
fn a_port_in_use_names_the_flag_that_moves_it() {
    // What a user with Apache HBase running meets first: its region server holds 16020.
    let held = std::net::TcpListener::bind("127.0.0.1:0").expect("a port to hold");
    let taken = held.local_addr().expect("bound").to_string();
    let tmp = tempfile::tempdir().expect("tempdir");
    for (flag, turn_off) in [("--hbase-listen", true), ("--listen", false)] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cellar"));
        cmd.arg("standalone")
            .arg("--data-dir")
            .arg(tmp.path().join(flag.trim_start_matches('-')));
        for f in ["--listen", "--http-listen", "--hbase-listen"] {
            cmd.args([f, if f == flag { &taken } else { "127.0.0.1:0" }]);
        }
        let out = cmd.output().expect("cellar runs");
        assert!(!out.status.success(), "started on a port in use ({flag})");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&taken),
            "{flag}: the address is not named: {err}"
        );
        assert!(
            err.contains(&format!("move this one with {flag} HOST:PORT")),
            "{flag}: the flag is not named: {err}"
        );
        assert_eq!(
            err.contains("turn it off with --hbase-listen off"),
            turn_off,
            "{flag}: {err}"
        );
    }
    drop(held);
}
