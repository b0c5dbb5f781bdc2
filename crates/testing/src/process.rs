//! [`Process`]: a child process for tests and benchmarks, its output in a log file, waited on
//! with a bound and stopped by its PID when dropped.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long a dropped [`Process`] has to exit after SIGTERM before it gets SIGKILL.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// How often a wait looks at the log and the process.
const POLL: Duration = Duration::from_millis(20);

/// Where a [`Process`]'s output goes.
#[derive(Debug, Clone)]
pub enum Log {
    /// Standard output and standard error in one new file in the temporary directory,
    /// removed when the process is dropped.
    Temp,
    /// Standard output and standard error in one file (emptied first), kept.
    File(PathBuf),
    /// Standard output and standard error each in a file of its own (emptied first), both
    /// kept. Waits for a line look at standard output.
    Split { stdout: PathBuf, stderr: PathBuf },
}

/// A child process whose standard output and error go to a log file ([`Log`]) and whose
/// standard input is empty. Waits on it are bounded; dropping it stops it by its PID: SIGTERM,
/// then SIGKILL if it has not exited within its grace ([`DEFAULT_GRACE`]).
pub struct Process {
    child: Child,
    name: String,
    /// Standard output, and standard error too unless `stderr` is set.
    stdout: PathBuf,
    stderr: Option<PathBuf>,
    /// Whether the log files are this process's own, to remove on drop.
    temp: bool,
    grace: Duration,
}

impl Process {
    /// Spawns `cmd` (standard input from /dev/null, output to `log`).
    pub fn spawn(mut cmd: Command, log: Log) -> Result<Process, String> {
        let name = name_of(&cmd);
        let (stdout, stderr, temp) = match log {
            Log::Temp => (temp_log(&name), None, true),
            Log::File(path) => (path, None, false),
            Log::Split { stdout, stderr } => (stdout, Some(stderr), false),
        };
        let create = |path: &Path| {
            File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))
        };
        let out = create(&stdout)?;
        let err = match &stderr {
            Some(path) => create(path)?,
            None => out
                .try_clone()
                .map_err(|e| format!("cannot share {}: {e}", stdout.display()))?,
        };
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        let child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => {
                if temp {
                    let _ = std::fs::remove_file(&stdout);
                }
                return Err(format!("cannot start {name} ({cmd:?}): {e}"));
            }
        };
        Ok(Process {
            child,
            name,
            stdout,
            stderr,
            temp,
            grace: DEFAULT_GRACE,
        })
    }

    /// How long a drop waits after SIGTERM before SIGKILL.
    pub fn set_grace(&mut self, grace: Duration) {
        self.grace = grace;
    }

    /// The program and its first argument, for messages (`cellar standalone`).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The file standard output goes to.
    pub fn log_path(&self) -> &Path {
        &self.stdout
    }

    /// What the process wrote to standard output (and standard error, unless split), without
    /// terminal escape sequences.
    pub fn stdout(&self) -> String {
        read_clean(&self.stdout)
    }

    /// What it wrote to a standard error of its own ([`Log::Split`]); empty otherwise.
    pub fn stderr(&self) -> String {
        self.stderr.as_deref().map(read_clean).unwrap_or_default()
    }

    /// Everything the process wrote, standard output first if the two are split.
    pub fn output(&self) -> String {
        match &self.stderr {
            None => self.stdout(),
            Some(_) => format!("{}\n{}", self.stdout(), self.stderr()),
        }
    }

    /// Waits (at most `timeout`) for a line of standard output for which `found` returns
    /// `Some`, looking at every line from the first; that value. Fails if the process exits
    /// first, naming `what` was awaited and with its output.
    pub fn wait_for_line<T>(
        &mut self,
        timeout: Duration,
        what: &str,
        mut found: impl FnMut(&str) -> Option<T>,
    ) -> Result<T, String> {
        let deadline = Instant::now() + timeout;
        let mut lines = Lines::open(&self.stdout)?;
        loop {
            // The status first: lines written before an exit are read after it.
            let exited = self.exited();
            for line in lines.next_lines(exited.is_some()) {
                if let Some(value) = found(&line) {
                    return Ok(value);
                }
            }
            if let Some(status) = exited {
                return Err(format!(
                    "{} exited ({status}) before {what}:\n{}",
                    self.name,
                    self.output()
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{}: no {what} within {timeout:?}:\n{}",
                    self.name,
                    self.output()
                ));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits (at most `timeout`) until `ready` returns `Some` (asked every 20 ms or so, while
    /// the process lives); that value.
    pub fn wait_until<T>(
        &mut self,
        timeout: Duration,
        what: &str,
        mut ready: impl FnMut(&mut Process) -> Option<T>,
    ) -> Result<T, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                return Err(format!(
                    "{} exited ({status}) before {what}:\n{}",
                    self.name,
                    self.output()
                ));
            }
            if let Some(value) = ready(self) {
                return Ok(value);
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{}: no {what} within {timeout:?}:\n{}",
                    self.name,
                    self.output()
                ));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits (at most `timeout`) until `addr` accepts a TCP connection.
    pub fn wait_for_port(&mut self, addr: &str, timeout: Duration) -> Result<(), String> {
        let target: std::net::SocketAddr = addr
            .parse()
            .map_err(|e| format!("not a socket address: {addr}: {e}"))?;
        self.wait_until(timeout, &format!("a listener on {addr}"), |_| {
            std::net::TcpStream::connect_timeout(&target, Duration::from_secs(1))
                .ok()
                .map(|_| ())
        })
    }

    /// The exit status, if the process has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits (at most `timeout`) for the process to exit by itself.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{} did not exit within {timeout:?}:\n{}",
                    self.name,
                    self.output()
                ));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Sends `signal` (`libc::SIGTERM`, `SIGINT`, `SIGSTOP`, ...) to the process, if it has
    /// not exited (so never to another process that took its PID).
    pub fn signal(&mut self, signal: i32) -> Result<(), String> {
        if self.exited().is_some() {
            return Err(format!("{} has exited", self.name));
        }
        let pid = libc::pid_t::try_from(self.child.id())
            .map_err(|_| format!("{}: PID {} out of range", self.name, self.child.id()))?;
        // SAFETY: kill(2) has no memory preconditions; the PID is our unreaped child's.
        if unsafe { libc::kill(pid, signal) } != 0 {
            return Err(format!(
                "cannot signal {} (pid {pid}): {}",
                self.name,
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    }

    /// SIGTERM, then waits (at most `timeout`) for the exit; its status. The process is left
    /// running if it does not exit in time (a drop kills it).
    pub fn terminate(&mut self, timeout: Duration) -> Result<ExitStatus, String> {
        if let Some(status) = self.exited() {
            return Ok(status);
        }
        self.signal(libc::SIGTERM)?;
        self.wait_exit(timeout)
            .map_err(|e| format!("no exit within {timeout:?} of SIGTERM: {e}"))
    }

    /// `kill -9`: no shutdown, no flush. Waits for the process to be gone.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM (and SIGCONT, should it be stopped), SIGKILL if it has not exited within its
    /// grace; its exit status if it could be read.
    pub fn stop(&mut self) -> Option<ExitStatus> {
        if self.exited().is_none()
            && self.signal(libc::SIGTERM).is_ok()
            && self.signal(libc::SIGCONT).is_ok()
        {
            let _ = self.wait_exit(self.grace);
        }
        self.kill9();
        self.exited()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
        if self.temp {
            let _ = std::fs::remove_file(&self.stdout);
        }
    }
}

/// The program's file name and its first argument unless that is an option.
fn name_of(cmd: &Command) -> String {
    let program = Path::new(cmd.get_program())
        .file_name()
        .unwrap_or(cmd.get_program())
        .to_string_lossy()
        .into_owned();
    match cmd.get_args().next().map(|a| a.to_string_lossy()) {
        Some(first) if !first.starts_with('-') => format!("{program} {first}"),
        _ => program,
    }
}

/// A new file name in the temporary directory for `name`'s output.
fn temp_log(name: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let slug: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    std::env::temp_dir().join(format!(
        "cellar-testing-{slug}-{}-{}-{nanos}.log",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// A file's text, each line without terminal escape sequences.
fn read_clean(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    String::from_utf8_lossy(&bytes)
        .lines()
        .map(strip_ansi)
        .collect::<Vec<_>>()
        .join("\n")
}

/// `line` without ANSI escape sequences (a log written for a terminal).
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The lines of a growing file, read as they are completed.
struct Lines {
    file: File,
    partial: Vec<u8>,
}

impl Lines {
    fn open(path: &Path) -> Result<Lines, String> {
        let file = File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Ok(Lines {
            file,
            partial: Vec::new(),
        })
    }

    /// The lines completed since the last call (with `to_end`, an unfinished last one too),
    /// without terminal escape sequences.
    fn next_lines(&mut self, to_end: bool) -> Vec<String> {
        let _ = self.file.read_to_end(&mut self.partial);
        let mut lines = Vec::new();
        while let Some(at) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=at).collect();
            lines.push(strip_ansi(String::from_utf8_lossy(&line).trim_end()));
        }
        if to_end && !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            lines.push(strip_ansi(String::from_utf8_lossy(&line).trim_end()));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        cmd
    }

    #[test]
    fn waits_for_a_line_and_keeps_the_output() {
        let mut p = Process::spawn(
            sh("echo starting; echo 'listening on=127.0.0.1:7' >&2; sleep 30"),
            Log::Temp,
        )
        .expect("spawn");
        let addr = p
            .wait_for_line(Duration::from_secs(10), "the address", |l| {
                l.strip_prefix("listening on=").map(str::to_string)
            })
            .expect("the line");
        assert_eq!(addr, "127.0.0.1:7");
        assert!(p.output().contains("starting"), "{}", p.output());
        let log = p.log_path().to_path_buf();
        assert!(log.exists());
        drop(p);
        assert!(!log.exists(), "a temporary log is removed");
    }

    #[test]
    fn a_line_never_printed_fails_within_the_bound_and_an_exit_fails_at_once() {
        let mut p = Process::spawn(sh("echo hello; sleep 30"), Log::Temp).expect("spawn");
        let started = Instant::now();
        let e = p
            .wait_for_line(Duration::from_millis(300), "a greeting", |l| {
                (l == "ready").then_some(())
            })
            .expect_err("never ready");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(e.contains("no a greeting") && e.contains("hello"), "{e}");

        let mut p = Process::spawn(sh("echo bye; exit 3"), Log::Temp).expect("spawn");
        let e = p
            .wait_for_line(Duration::from_secs(30), "ready", |l| {
                (l == "ready").then_some(())
            })
            .expect_err("exited");
        assert!(e.contains("exited") && e.contains("bye"), "{e}");
        // The last line is read even without its newline once the process is gone.
        let mut p = Process::spawn(sh("printf ready"), Log::Temp).expect("spawn");
        p.wait_for_line(Duration::from_secs(30), "ready", |l| {
            (l == "ready").then_some(())
        })
        .expect("an unfinished last line");
    }

    #[test]
    fn split_logs_keep_stdout_and_stderr_apart() {
        let dir = std::env::temp_dir().join(format!("cellar-testing-split-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let (out, err) = (dir.join("p.out"), dir.join("p.err"));
        let mut p = Process::spawn(
            sh("echo out; echo err >&2"),
            Log::Split {
                stdout: out.clone(),
                stderr: err.clone(),
            },
        )
        .expect("spawn");
        assert!(p
            .wait_exit(Duration::from_secs(30))
            .expect("exit")
            .success());
        assert_eq!(p.stdout(), "out");
        assert_eq!(p.stderr(), "err");
        drop(p);
        assert!(out.exists() && err.exists(), "given logs are kept");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn terminate_stops_a_process_that_handles_sigterm() {
        let mut p = Process::spawn(
            sh("trap 'echo bye; exit 0' TERM; echo up; while :; do sleep 0.05; done"),
            Log::Temp,
        )
        .expect("spawn");
        p.wait_for_line(Duration::from_secs(10), "up", |l| (l == "up").then_some(()))
            .expect("up");
        let status = p.terminate(Duration::from_secs(10)).expect("exits");
        assert!(status.success(), "{status}");
        assert!(p.output().contains("bye"));
    }

    #[test]
    fn a_drop_kills_what_ignores_sigterm_after_the_grace_and_kill9_at_once() {
        let mut p = Process::spawn(
            sh("trap '' TERM; echo up; while :; do sleep 0.05; done"),
            Log::Temp,
        )
        .expect("spawn");
        p.wait_for_line(Duration::from_secs(10), "up", |l| (l == "up").then_some(()))
            .expect("up");
        p.set_grace(Duration::from_millis(300));
        let pid = p.pid();
        let started = Instant::now();
        drop(p);
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "pid {pid} gone"
        );

        let mut p = Process::spawn(sh("sleep 30"), Log::Temp).expect("spawn");
        let started = Instant::now();
        p.kill9();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(p.exited().is_some());
    }

    #[test]
    fn a_stopped_process_is_still_stopped_by_a_drop() {
        let mut p = Process::spawn(sh("sleep 30"), Log::Temp).expect("spawn");
        p.signal(libc::SIGSTOP).expect("stop");
        let started = Instant::now();
        drop(p);
        assert!(started.elapsed() < DEFAULT_GRACE);
    }

    #[test]
    fn waits_for_a_port() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        let mut p = Process::spawn(sh("sleep 30"), Log::Temp).expect("spawn");
        p.wait_for_port(&addr, Duration::from_secs(10))
            .expect("a listener");
        drop(l);
    }

    #[test]
    fn names_the_program_and_its_subcommand() {
        let mut cmd = Command::new("/usr/bin/cellar");
        cmd.args(["standalone", "--listen", "x"]);
        assert_eq!(name_of(&cmd), "cellar standalone");
        let mut cmd = Command::new("java");
        cmd.arg("-Xmx1m");
        assert_eq!(name_of(&cmd), "java");
        assert_eq!(strip_ansi("\u{1b}[2mINFO\u{1b}[0m x"), "INFO x");
    }
}
