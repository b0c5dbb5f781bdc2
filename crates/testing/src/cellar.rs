//! `cellar` processes: a standalone server, a master, a region server ([`Cellar`], started
//! as a [`CellarServer`]) and the Thrift gateway ([`ThriftGateway`]). The binary is a
//! parameter: inside the cli crate's tests it is `env!("CARGO_BIN_EXE_cellar")`, the benchmarks
//! take it on their command line.
//!
//! A server listens where it is told (by default port 0 on loopback for each of its native,
//! HTTP and HBase ports) and prints where it does, one line each, on standard output, then its
//! location (`data_dir=...`): those lines are how it is known to be ready and on which ports.

use crate::process::{Log, Process};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How long a server or gateway may take to start on a loaded machine.
pub const START_TIMEOUT: Duration = Duration::from_secs(120);

/// The command line of a `cellar` server: `cellar ROLE --listen ADDR --http-listen ADDR
/// --hbase-listen ADDR [--data-dir DIR] [--config FILE] ARGS...`.
#[derive(Debug, Clone)]
pub struct Cellar {
    bin: PathBuf,
    role: String,
    native: String,
    http: String,
    hbase: String,
    data_dir: Option<PathBuf>,
    config: Option<PathBuf>,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    log: Log,
    start_timeout: Duration,
}

impl Cellar {
    /// `cellar standalone`: one process serving everything from a data directory.
    pub fn standalone(bin: impl AsRef<Path>) -> Cellar {
        Cellar::role(bin, "standalone")
    }

    /// `cellar master`: give it `--zk ADDR --root URL` with [`Cellar::args`].
    pub fn master(bin: impl AsRef<Path>) -> Cellar {
        Cellar::role(bin, "master")
    }

    /// `cellar regionserver`: give it `--zk ADDR --root URL` with [`Cellar::args`].
    pub fn region_server(bin: impl AsRef<Path>) -> Cellar {
        Cellar::role(bin, "regionserver")
    }

    /// `cellar ROLE` (`standalone`, `master`, `regionserver`).
    pub fn role(bin: impl AsRef<Path>, role: &str) -> Cellar {
        Cellar {
            bin: bin.as_ref().to_path_buf(),
            role: role.to_string(),
            native: "127.0.0.1:0".into(),
            http: "127.0.0.1:0".into(),
            hbase: "127.0.0.1:0".into(),
            data_dir: None,
            config: None,
            args: Vec::new(),
            env: Vec::new(),
            log: Log::Temp,
            start_timeout: START_TIMEOUT,
        }
    }

    /// The native, HTTP and HBase addresses to listen on (`off` turns the HBase port off).
    /// Fixed ports let a restarted server keep its addresses ([`crate::free_ports`]).
    pub fn listen(mut self, native: &str, http: &str, hbase: &str) -> Cellar {
        self.native = native.into();
        self.http = http.into();
        self.hbase = hbase.into();
        self
    }

    /// `--data-dir DIR` (leave it out when the arguments give a `--root` URL).
    pub fn data_dir(mut self, dir: impl AsRef<Path>) -> Cellar {
        self.data_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// `--config FILE`.
    pub fn config(mut self, file: impl AsRef<Path>) -> Cellar {
        self.config = Some(file.as_ref().to_path_buf());
        self
    }

    /// More arguments, after the others (`--zk ADDR`, `--root URL`, `--thrift-listen ADDR`).
    pub fn args<I, S>(mut self, args: I) -> Cellar
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// An environment variable of the process (`RUST_LOG`, `CELLAR_FAULTS`); a later one of
    /// the same name wins.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Cellar {
        self.env.push((key.into(), value.into()));
        self
    }

    /// [`Cellar::env`] for each pair.
    pub fn envs<I, K, V>(mut self, vars: I) -> Cellar
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<OsString>,
        V: Into<OsString>,
    {
        self.env
            .extend(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// Where its output goes (by default [`Log::Temp`]).
    pub fn log(mut self, log: Log) -> Cellar {
        self.log = log;
        self
    }

    /// How long [`Cellar::start`] and [`CellarServer::wait_listening`] wait (by default
    /// [`START_TIMEOUT`]).
    pub fn start_timeout(mut self, timeout: Duration) -> Cellar {
        self.start_timeout = timeout;
        self
    }

    /// The command line.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.arg(&self.role)
            .arg("--listen")
            .arg(&self.native)
            .arg("--http-listen")
            .arg(&self.http)
            .arg("--hbase-listen")
            .arg(&self.hbase);
        if let Some(dir) = &self.data_dir {
            cmd.arg("--data-dir").arg(dir);
        }
        if let Some(config) = &self.config {
            cmd.arg("--config").arg(config);
        }
        cmd.args(&self.args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Starts the process without waiting for it to listen (a backup master waits to take
    /// over before it does): [`CellarServer::wait_listening`] waits.
    pub fn spawn(self) -> Result<CellarServer, String> {
        let process = Process::spawn(self.command(), self.log.clone())?;
        Ok(CellarServer {
            process,
            native: String::new(),
            http: String::new(),
            hbase: None,
            thrift: None,
            data_dir: String::new(),
            start_timeout: self.start_timeout,
        })
    }

    /// Starts the process and waits until it has printed where it listens.
    pub fn start(self) -> Result<CellarServer, String> {
        let mut server = self.spawn()?;
        server.wait_listening()?;
        Ok(server)
    }
}

/// A running `cellar` server: its process and the addresses it printed (empty until
/// [`CellarServer::wait_listening`] returns).
pub struct CellarServer {
    pub process: Process,
    /// `listening native=ADDR`.
    pub native: String,
    /// `listening http=ADDR`.
    pub http: String,
    /// `listening hbase=ADDR`, unless the HBase port is off.
    pub hbase: Option<String>,
    /// `listening thrift=ADDR`, if it serves Thrift (`--thrift-listen`).
    pub thrift: Option<String>,
    /// `data_dir=LOCATION`: the data directory, absolute, or the cluster's root URL.
    pub data_dir: String,
    start_timeout: Duration,
}

impl CellarServer {
    /// Waits (at most its start timeout) until the server has printed its addresses, ending
    /// with its location line.
    pub fn wait_listening(&mut self) -> Result<(), String> {
        let mut seen = Announced::default();
        let location = self.process.wait_for_line(
            self.start_timeout,
            "its addresses (`listening native=`, `listening http=`, `data_dir=`)",
            |line| seen.read(line),
        )?;
        let (Some(native), Some(http)) = (seen.native, seen.http) else {
            return Err(format!(
                "{} printed its location before its native and HTTP addresses:\n{}",
                self.process.name(),
                self.process.output()
            ));
        };
        self.native = native;
        self.http = http;
        self.hbase = seen.hbase;
        self.thrift = seen.thrift;
        self.data_dir = location;
        Ok(())
    }

    /// The Thrift gateway's address (`listening thrift=`) of a server started with
    /// `--thrift-listen`, waiting for the line (at most its start timeout) if need be.
    pub fn wait_thrift(&mut self) -> Result<String, String> {
        if let Some(addr) = &self.thrift {
            return Ok(addr.clone());
        }
        let addr =
            self.process
                .wait_for_line(self.start_timeout, "`listening thrift=`", |line| {
                    field(line, "listening thrift=")
                })?;
        self.thrift = Some(addr.clone());
        Ok(addr)
    }
}

/// The addresses a server printed so far.
#[derive(Default)]
struct Announced {
    native: Option<String>,
    http: Option<String>,
    hbase: Option<String>,
    thrift: Option<String>,
}

impl Announced {
    /// Takes in one line; the location once it comes (the last of the lines that matter).
    fn read(&mut self, line: &str) -> Option<String> {
        for (key, slot) in [
            ("listening native=", &mut self.native),
            ("listening http=", &mut self.http),
            ("listening hbase=", &mut self.hbase),
            ("listening thrift=", &mut self.thrift),
        ] {
            if let Some(addr) = field(line, key) {
                *slot = Some(addr);
            }
        }
        line.trim()
            .strip_prefix("data_dir=")
            .filter(|d| !d.is_empty())
            .map(str::to_string)
    }
}

/// The value after `key` in a line of `key=value` words.
fn field(line: &str, key: &str) -> Option<String> {
    let at = line.find(key)?;
    let value: String = line[at + key.len()..]
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != ',' && *c != '"')
        .collect();
    (!value.is_empty()).then_some(value)
}

/// `cellar thrift`, the Thrift gateway as a process of its own, in front of a running server
/// or cluster.
pub struct ThriftGateway {
    pub process: Process,
    /// `listening thrift=ADDR`.
    pub addr: String,
}

impl ThriftGateway {
    /// `cellar thrift --connect SERVER --listen 127.0.0.1:0 ARGS...` (`--user NAME`, TLS
    /// options), once it has printed its address (at most [`START_TIMEOUT`]).
    pub fn start(bin: impl AsRef<Path>, connect: &str, args: &[&str]) -> Result<Self, String> {
        let mut cmd = Command::new(bin.as_ref());
        cmd.args(["thrift", "--connect", connect, "--listen", "127.0.0.1:0"])
            .args(args);
        let mut process = Process::spawn(cmd, Log::Temp)?;
        let addr = process.wait_for_line(START_TIMEOUT, "`listening thrift=`", |line| {
            line.trim()
                .strip_prefix("listening thrift=")
                .map(str::to_string)
        })?;
        Ok(ThriftGateway { process, addr })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_has_the_flags_in_order() {
        let cmd = Cellar::master("/bin/cellar")
            .data_dir("/d")
            .config("/c.toml")
            .args(["--zk", "127.0.0.1:2181"])
            .env("RUST_LOG", "info")
            .command();
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "master",
                "--listen",
                "127.0.0.1:0",
                "--http-listen",
                "127.0.0.1:0",
                "--hbase-listen",
                "127.0.0.1:0",
                "--data-dir",
                "/d",
                "--config",
                "/c.toml",
                "--zk",
                "127.0.0.1:2181"
            ]
        );
    }

    #[test]
    fn reads_the_announcement_up_to_the_location() {
        let mut seen = Announced::default();
        let lines = [
            "2025-01-01T00:00:00Z INFO starting",
            "listening native=127.0.0.1:1",
            "listening http=127.0.0.1:2",
            "listening thrift=127.0.0.1:4",
        ];
        for l in lines {
            assert_eq!(seen.read(l), None);
        }
        assert_eq!(seen.read("data_dir=/tmp/x").as_deref(), Some("/tmp/x"));
        assert_eq!(seen.native.as_deref(), Some("127.0.0.1:1"));
        assert_eq!(seen.http.as_deref(), Some("127.0.0.1:2"));
        assert_eq!(seen.hbase, None);
        assert_eq!(seen.thrift.as_deref(), Some("127.0.0.1:4"));
    }

    /// A stand-in for `cellar`: `sh SCRIPT --listen ...`, a script that prints what a server
    /// prints (run by `sh`, not executed, so no fork elsewhere can make it busy).
    #[test]
    fn starts_a_server_and_reads_its_addresses() {
        let dir = std::env::temp_dir().join(format!("cellar-testing-fake-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let serves = dir.join("serves.sh");
        std::fs::write(
            &serves,
            "echo 'INFO starting' >&2\nsleep 0.2\n\
             echo listening native=127.0.0.1:11\necho listening http=127.0.0.1:12\n\
             echo listening hbase=127.0.0.1:13\necho data_dir=/srv/data\nexec sleep 30\n",
        )
        .expect("script");
        let script = serves.to_str().expect("utf-8 path");
        let server = Cellar::role("/bin/sh", script).start().expect("started");
        assert_eq!(server.native, "127.0.0.1:11");
        assert_eq!(server.http, "127.0.0.1:12");
        assert_eq!(server.hbase.as_deref(), Some("127.0.0.1:13"));
        assert_eq!(server.data_dir, "/srv/data");
        assert!(server.process.output().contains("INFO starting"));
        drop(server);

        let fails = dir.join("fails.sh");
        std::fs::write(&fails, "echo 'error: no' >&2\nexit 2\n").expect("script");
        let script = fails.to_str().expect("utf-8 path");
        let e = Cellar::role("/bin/sh", script)
            .start()
            .err()
            .expect("a server that exits");
        assert!(e.contains("exited") && e.contains("error: no"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
