//! A MiniDFS (NameNode and DataNodes in one JVM, `java/minidfs`) on loopback. The first use
//! builds the launcher with Maven (its only dependency is `hadoop-minicluster`); the build is
//! serialized between processes by a lock file, so parallel tests build it once.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long the JVM may take to format and start the cluster on a loaded 2-core machine.
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// A running MiniDFS.
pub struct MiniDfs {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    /// `hdfs://127.0.0.1:PORT`.
    pub url: String,
    dir: PathBuf,
}

/// `java/minidfs` in this repository.
fn project() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../java/minidfs")
}

/// The launcher's class path, building it first if needed.
pub fn classpath() -> Result<String, String> {
    let project = project();
    let target = project.join("target");
    let jar = target.join("minidfs-0.1.0.jar");
    let deps = target.join("classpath.txt");
    std::fs::create_dir_all(&target)
        .map_err(|e| format!("cannot create {}: {e}", target.display()))?;
    let lock = File::create(target.join("build.lock"))
        .map_err(|e| format!("cannot create the build lock: {e}"))?;
    lock.lock()
        .map_err(|e| format!("cannot take the build lock: {e}"))?;
    if !deps.exists() || older_than_sources(&jar, &project) {
        let out = Command::new("mvn")
            .args(["-B", "-q", "-f"])
            .arg(project.join("pom.xml"))
            .args(["package", "dependency:build-classpath"])
            .arg(format!("-Dmdep.outputFile={}", deps.display()))
            .output()
            .map_err(|e| {
                format!(
                    "cannot run Maven to build the MiniDFS launcher (apt-get install maven): {e}"
                )
            })?;
        if !out.status.success() {
            return Err(format!(
                "building the MiniDFS launcher failed (mvn package in {}):\n{}{}",
                project.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    let deps = std::fs::read_to_string(&deps)
        .map_err(|e| format!("cannot read {}: {e}", deps.display()))?;
    Ok(format!("{}:{}", jar.display(), deps.trim()))
}

/// True if `jar` is missing or older than the launcher's sources or pom.
fn older_than_sources(jar: &Path, project: &Path) -> bool {
    let built = match std::fs::metadata(jar).and_then(|m| m.modified()) {
        Ok(t) => t,
        Err(_) => return true,
    };
    let sources = [
        project.join("pom.xml"),
        project.join("src/main/java/org/cellar/minidfs/Main.java"),
        project.join("src/main/resources/log4j.properties"),
    ];
    sources.iter().any(|s| {
        std::fs::metadata(s)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t > built)
    })
}

impl MiniDfs {
    /// Starts a MiniDFS with `datanodes` DataNodes and waits until it serves. A dead
    /// writer's lease lapses after 5 s here (60 s in HDFS), so restarts after `kill -9` are
    /// quick in tests.
    pub fn start(datanodes: u32) -> Result<MiniDfs, String> {
        let cp = classpath()?;
        let dir = std::env::temp_dir().join(format!(
            "cellar-minidfs-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let log = File::create(dir.join("minidfs.log"))
            .map_err(|e| format!("cannot create the MiniDFS log: {e}"))?;
        let mut child = Command::new("java")
            .args(["-Xmx768m", "-XX:+UseSerialGC", "-cp", &cp, "org.cellar.minidfs.Main"])
            .arg(dir.join("dfs"))
            .args(["0", &datanodes.to_string(), "5000"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start java for the MiniDFS (apt-get install openjdk-17-jdk-headless): {e}"))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut dfs = MiniDfs {
            child,
            stdin,
            lines,
            url: String::new(),
            dir,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "MiniDFS did not start within {START_TIMEOUT:?}:\n{}",
                    dfs.log()
                ));
            }
            match dfs.lines.recv_timeout(left.min(Duration::from_millis(500))) {
                Ok(line) => {
                    if let Some(url) = line.strip_prefix("hdfs=") {
                        dfs.url = url.trim().to_string();
                    }
                    if line.trim() == "Ready!" && !dfs.url.is_empty() {
                        return Ok(dfs);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Ok(Some(status)) = dfs.child.try_wait() {
                        return Err(format!(
                            "MiniDFS exited ({status}) at startup:\n{}",
                            dfs.log()
                        ));
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(format!(
                        "MiniDFS closed its output at startup:\n{}",
                        dfs.log()
                    ));
                }
            }
        }
    }

    /// Stops DataNode `n` (0-based, numbered as at start) as a crash would; waits for the
    /// acknowledgement.
    pub fn stop_datanode(&mut self, n: u32) -> Result<(), String> {
        self.command(
            &format!("stop-datanode {n}"),
            &format!("stopped datanode {n}"),
        )
    }

    /// Starts DataNode `n`, stopped by [`MiniDfs::stop_datanode`], again on its old port and
    /// storage; waits until the cluster has it.
    pub fn restart_datanode(&mut self, n: u32) -> Result<(), String> {
        self.command(
            &format!("restart-datanode {n}"),
            &format!("restarted datanode {n}"),
        )
    }

    /// Sends one command and waits (a minute at most) for the line `want`.
    fn command(&mut self, command: &str, want: &str) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("MiniDFS input closed")?;
        writeln!(stdin, "{command}").map_err(|e| format!("MiniDFS input: {e}"))?;
        stdin.flush().map_err(|e| format!("MiniDFS input: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(500)) {
                if line.trim() == want {
                    return Ok(());
                }
            }
        }
        Err(format!(
            "MiniDFS did not answer '{command}' with '{want}' within a minute"
        ))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The tail of what the JVM logged.
    pub fn log(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("minidfs.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for MiniDfs {
    fn drop(&mut self) {
        // Closing its input asks for a clean shutdown; the kill is the bound.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
