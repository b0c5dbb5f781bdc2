//! A real `cellar standalone` (or master, or region server) process for end-to-end tests,
//! started with `cellar_testing::Cellar` on ephemeral ports with a temporary (or given) data
//! directory, its addresses read from its `listening` lines, stopped by PID when dropped.

#![allow(dead_code)]

pub mod browser;
pub mod cluster;
pub mod hbase;

use cellar_testing::Cellar;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The client configuration of the end-to-end suites: `CELLAR_TEST_TRANSPORT=tcp|ucx|auto`
/// runs them over that transport (`scripts/test.sh` runs some over UCX too).
pub fn client_config() -> cellar_client::ClientConfig {
    let transport = std::env::var("CELLAR_TEST_TRANSPORT")
        .ok()
        .map(|t| {
            t.parse()
                .expect("CELLAR_TEST_TRANSPORT is tcp, ucx or auto")
        })
        .unwrap_or_default();
    cellar_client::ClientConfig {
        transport,
        ..cellar_client::ClientConfig::default()
    }
}

/// A client of `addr` with [`client_config`]; under `ucx`, checked to be on UCX.
pub async fn connect_client(addr: &str) -> cellar_client::Client {
    let config = client_config();
    let ucx = config.transport == cellar_client::Transport::Ucx;
    let client = cellar_client::Client::connect_with(addr, config)
        .await
        .expect("connect");
    if ucx {
        assert!(client.uses_ucx().await.expect("uses_ucx"), "asked for UCX");
    }
    client
}

/// [`connect_client`] for the blocking client.
pub fn connect_blocking(addr: &str) -> cellar_client::blocking::Client {
    let config = client_config();
    let ucx = config.transport == cellar_client::Transport::Ucx;
    let client = cellar_client::blocking::Client::connect_with(addr, config).expect("connect");
    if ucx {
        assert!(client.uses_ucx().expect("uses_ucx"), "asked for UCX");
    }
    client
}

pub struct Server {
    /// The process; dropped (SIGTERM, then SIGKILL) before the temporary directory.
    cellar: cellar_testing::CellarServer,
    pub native: String,
    pub http: Option<String>,
    /// The HBase-compatible front end's address (`listening hbase=`).
    pub hbase: String,
    pub data_dir: PathBuf,
    /// Keeps a temporary data directory alive as long as the server.
    _tmp: Option<tempfile::TempDir>,
}

impl Server {
    /// A server on a fresh temporary data directory.
    pub fn start() -> Server {
        let tmp = tempfile::tempdir().expect("temp dir");
        let mut s = Server::start_in(tmp.path(), None);
        s._tmp = Some(tmp);
        s
    }

    /// A server with a config file holding `config_toml`, on a fresh temporary directory.
    pub fn start_with_config(config_toml: &str) -> Server {
        let tmp = tempfile::tempdir().expect("temp dir");
        let config = tmp.path().join("cellar.toml");
        std::fs::write(&config, config_toml).expect("write config");
        let data = tmp.path().join("data");
        let mut s = Server::start_in(&data, Some(&config));
        s._tmp = Some(tmp);
        s
    }

    /// A server on `data_dir` (kept by the caller), optionally with a config file.
    pub fn start_in(data_dir: &Path, config: Option<&Path>) -> Server {
        Server::start_at(data_dir, config, ["127.0.0.1:0"; 3])
    }

    /// A server on `data_dir` listening on the given native, HTTP and HBase addresses (fixed
    /// ports let a restarted server keep its address; see [`free_ports`]).
    pub fn start_at(data_dir: &Path, config: Option<&Path>, addrs: [&str; 3]) -> Server {
        Server::start_with(data_dir, config, addrs, &[])
    }

    /// [`Server::start_at`] with more command-line arguments (`--zk ADDR`).
    pub fn start_with(
        data_dir: &Path,
        config: Option<&Path>,
        addrs: [&str; 3],
        extra: &[&str],
    ) -> Server {
        let mut s = Server::spawn_role("standalone", data_dir, config, addrs, extra);
        s.wait_listening();
        s
    }

    /// `cellar ROLE` (standalone, master, regionserver) with [`Server::start_with`]'s
    /// arguments, once it prints its addresses.
    pub fn start_role(
        role: &str,
        data_dir: &Path,
        config: Option<&Path>,
        extra: &[&str],
    ) -> Server {
        let mut s = Server::spawn_role(role, data_dir, config, ["127.0.0.1:0"; 3], extra);
        s.wait_listening();
        s
    }

    /// [`Server::start_role`] with more environment variables (`CELLAR_FAULTS`).
    pub fn start_role_env(
        role: &str,
        data_dir: &Path,
        config: Option<&Path>,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let mut s = Server::spawn_role_env(role, data_dir, config, ["127.0.0.1:0"; 3], extra, env);
        s.wait_listening();
        s
    }

    /// Starts `cellar ROLE` without waiting for it to listen (a backup master waits).
    pub fn spawn_role(
        role: &str,
        data_dir: &Path,
        config: Option<&Path>,
        addrs: [&str; 3],
        extra: &[&str],
    ) -> Server {
        Server::spawn_role_env(role, data_dir, config, addrs, extra, &[])
    }

    /// [`Server::spawn_role`] with more environment variables.
    pub fn spawn_role_env(
        role: &str,
        data_dir: &Path,
        config: Option<&Path>,
        addrs: [&str; 3],
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let [native, http, hbase] = addrs;
        let mut cellar =
            Cellar::role(env!("CARGO_BIN_EXE_cellar"), role).listen(native, http, hbase);
        // A root given as a URL (`--root hdfs://...`) replaces the data directory.
        if !extra.contains(&"--root") {
            cellar = cellar.data_dir(data_dir);
        }
        if let Some(c) = config {
            cellar = cellar.config(c);
        }
        let cellar = cellar
            .args(extra)
            .envs(env.iter().copied())
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .spawn()
            .unwrap_or_else(|e| panic!("spawn cellar {role}: {e}"));
        Server {
            cellar,
            native: String::new(),
            http: None,
            hbase: String::new(),
            data_dir: data_dir.to_path_buf(),
            _tmp: None,
        }
    }

    /// Waits until the server has printed its three addresses.
    pub fn wait_listening(&mut self) {
        if let Err(e) = self.cellar.wait_listening() {
            panic!("cellar did not announce its three addresses: {e}");
        }
        let hbase = self.cellar.hbase.clone();
        self.native = self.cellar.native.clone();
        self.http = Some(self.cellar.http.clone());
        self.hbase = hbase.unwrap_or_else(|| panic!("no `listening hbase=`:\n{}", self.output()));
    }

    /// The Thrift gateway's address (`listening thrift=`, printed after the other three) of a
    /// server started with `--thrift-listen`.
    pub fn wait_thrift(&mut self) -> String {
        self.cellar
            .wait_thrift()
            .unwrap_or_else(|e| panic!("no `listening thrift=` line: {e}"))
    }

    /// The exit status, if the process has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.cellar.process.exited()
    }

    pub fn pid(&self) -> u32 {
        self.cellar.process.pid()
    }

    /// `kill -9`: no shutdown, no flush.
    pub fn kill9(&mut self) {
        self.cellar.process.kill9();
    }

    /// SIGTERM, then waits (at most a minute) for a clean exit; its exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        self.cellar
            .process
            .terminate(Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The server's output so far.
    pub fn output(&self) -> String {
        self.cellar.process.output()
    }

    /// GET `path` from the HTTP endpoint; the body.
    /// The value of the Prometheus sample `name` (a line `name value`) in `/metrics`.
    pub fn metric(&self, name: &str) -> u64 {
        let text = self.http_get("/metrics");
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
    }

    /// Runs `cellar shell -e script` against this server, expects it to succeed, and returns
    /// its standard output without the `Took ...` timing lines.
    pub fn shell(&self, script: &str) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
            .args(["shell", "--connect", &self.native, "-e", script])
            .stdin(Stdio::null())
            .output()
            .expect("run cellar shell");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "`{script}` failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
            .lines()
            .filter(|l| !l.starts_with("Took "))
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn http_get(&self, path: &str) -> String {
        use std::io::Write;
        let addr = self
            .http
            .as_deref()
            .expect("server printed its http address");
        let mut s = std::net::TcpStream::connect(addr).expect("connect http");
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .expect("send");
        let mut body = String::new();
        s.read_to_string(&mut body).expect("read http");
        match body.split_once("\r\n\r\n") {
            Some((_, b)) => b.to_string(),
            None => body,
        }
    }
}

/// Polls `check` until it returns `Some`, at most `timeout`.
pub fn wait_for<T>(timeout: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `N` ports on 127.0.0.1 that were free a moment ago, below the ephemeral range, for a
/// server that must keep its address across restarts.
pub fn free_ports<const N: usize>() -> [u16; N] {
    cellar_testing::free_ports::<N>().unwrap_or_else(|e| panic!("{e}"))
}
