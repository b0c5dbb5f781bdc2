//! A real `cellar standalone` process for end-to-end tests: started on ephemeral ports with a
//! temporary (or given) data directory, its addresses read from its `listening` line, killed
//! by PID when dropped.

#![allow(dead_code)]

pub mod browser;
pub mod cluster;
pub mod hbase;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
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

/// How long a server may take to start on a loaded machine.
const START_TIMEOUT: Duration = Duration::from_secs(120);

pub struct Server {
    child: Child,
    pub native: String,
    pub http: Option<String>,
    /// The HBase-compatible front end's address (`listening hbase=`).
    pub hbase: String,
    pub data_dir: PathBuf,
    /// Keeps a temporary data directory alive as long as the server.
    _tmp: Option<tempfile::TempDir>,
    /// Everything the server printed, for failure messages.
    output: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Lines as they come (the start waits on them).
    lines: mpsc::Receiver<String>,
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
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cellar"));
        cmd.arg(role)
            .arg("--listen")
            .arg(native)
            .arg("--http-listen")
            .arg(http)
            .arg("--hbase-listen")
            .arg(hbase);
        // A root given as a URL (`--root hdfs://...`) replaces the data directory.
        if !extra.contains(&"--root") {
            cmd.arg("--data-dir").arg(data_dir);
        }
        if let Some(c) = config {
            cmd.arg("--config").arg(c);
        }
        cmd.args(extra);
        cmd.envs(env.iter().copied());
        cmd.env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn cellar standalone");
        let output = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel::<String>();
        for stream in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let tx = tx.clone();
            let output = output.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { return };
                    let line = cellar_server::logs::strip_ansi(&line);
                    if let Ok(mut o) = output.lock() {
                        o.push(line.clone());
                    }
                    let _ = tx.send(line);
                }
            });
        }
        Server {
            child,
            native: String::new(),
            http: None,
            hbase: String::new(),
            data_dir: data_dir.to_path_buf(),
            _tmp: None,
            output,
            lines: rx,
        }
    }

    /// Waits until the server has printed its three addresses.
    pub fn wait_listening(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        let server = self;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                panic!(
                    "cellar did not announce its three addresses within {START_TIMEOUT:?}:\n{}",
                    server.output()
                );
            }
            match server
                .lines
                .recv_timeout(left.min(Duration::from_millis(200)))
            {
                Ok(line) => {
                    // `listening native=ADDR` and `listening http=ADDR`, on stdout.
                    if let Some(native) = field(&line, "listening native=") {
                        server.native = native;
                    }
                    if let Some(http) = field(&line, "listening http=") {
                        server.http = Some(http);
                    }
                    if let Some(hbase) = field(&line, "listening hbase=") {
                        server.hbase = hbase;
                    }
                    if !server.native.is_empty()
                        && server.http.is_some()
                        && !server.hbase.is_empty()
                    {
                        return;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Ok(Some(status)) = server.child.try_wait() {
                        panic!(
                            "cellar exited ({status}) before listening:\n{}",
                            server.output()
                        );
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = server.child.wait().ok();
                    panic!(
                        "cellar closed its output ({status:?}) before listening:\n{}",
                        server.output()
                    );
                }
            }
        }
    }

    /// The Thrift gateway's address (`listening thrift=`, printed after the other three) of a
    /// server started with `--thrift-listen`.
    pub fn wait_thrift(&mut self) -> String {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(addr) = self
                .output()
                .lines()
                .find_map(|l| field(l, "listening thrift="))
            {
                return addr;
            }
            assert!(
                Instant::now() < deadline,
                "no `listening thrift=` line:\n{}",
                self.output()
            );
            let _ = self.lines.recv_timeout(Duration::from_millis(100));
        }
    }

    /// The exit status, if the process has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `kill -9`: no shutdown, no flush.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits (at most a minute) for a clean exit; its exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(ok.success(), "kill -TERM failed");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "no exit within a minute of SIGTERM:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server's output so far.
    pub fn output(&self) -> String {
        self.output.lock().map(|o| o.join("\n")).unwrap_or_default()
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

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value after `key` in a line of `key=value` words.
fn field(line: &str, key: &str) -> Option<String> {
    let at = line.find(key)?;
    let rest = &line[at + key.len()..];
    let value: String = rest
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != ',' && *c != '"')
        .collect();
    (!value.is_empty()).then_some(value)
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

/// `N` ports on 127.0.0.1 that were free a moment ago, for a server that must keep its
/// address across restarts. They are taken below Linux's ephemeral range (32768 and up), so
/// that no client socket or port-0 listener of another process grabs one while the server
/// is down.
pub fn free_ports<const N: usize>() -> [u16; N] {
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
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            ports[filled] = port;
            filled += 1;
        }
    }
    assert_eq!(filled, N, "no {N} free ports in 20000..32000");
    ports
}
