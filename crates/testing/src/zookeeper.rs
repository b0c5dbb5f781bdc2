//! A ZooKeeper server on loopback, started from the system's installation (Debian's
//! `zookeeper` package) as a [`Process`], stopped by PID when dropped.

use crate::free_port;
use crate::process::{Log, Process};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// Where Debian installs ZooKeeper's launcher; `CELLAR_ZOOKEEPER_SERVER` overrides it.
const ZK_SERVER_SH: &str = "/usr/share/zookeeper/bin/zkServer.sh";
/// How long a JVM may take to start ZooKeeper on a loaded 2-core machine.
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// A standalone ZooKeeper server on 127.0.0.1 with its own data directory.
pub struct ZooKeeper {
    process: Process,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    dir: PathBuf,
}

impl ZooKeeper {
    /// Starts a ZooKeeper on a free loopback port and waits until it answers `ruok`.
    /// `tick_ms` sets ZooKeeper's tick (session timeouts are clamped to 2..60 000 ms here, so
    /// tests can ask for short sessions).
    pub fn start(tick_ms: u32) -> Result<ZooKeeper, String> {
        let launcher = std::env::var("CELLAR_ZOOKEEPER_SERVER").unwrap_or(ZK_SERVER_SH.into());
        if !std::path::Path::new(&launcher).exists() {
            return Err(format!(
                "ZooKeeper is not installed: {launcher} is missing (apt-get install zookeeper)"
            ));
        }
        let port = free_port()?;
        let dir = std::env::temp_dir().join(format!(
            "cellar-zk-{}-{port}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(dir.join("data"))
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let config = dir.join("zoo.cfg");
        let text = format!(
            "tickTime={tick_ms}\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
             admin.enableServer=false\nminSessionTimeout={}\nmaxSessionTimeout=60000\n\
             4lw.commands.whitelist=ruok,srvr\n",
            dir.join("data").display(),
            2 * tick_ms,
        );
        std::fs::write(&config, text)
            .map_err(|e| format!("cannot write {}: {e}", config.display()))?;
        // start-foreground execs the JVM: the child's PID is ZooKeeper's.
        let mut cmd = Command::new(&launcher);
        cmd.arg("start-foreground")
            .arg(&config)
            .env("ZOO_LOG_DIR", &dir)
            .env("JVMFLAGS", "-Xmx256m -XX:+UseSerialGC");
        let mut process = Process::spawn(cmd, Log::File(dir.join("zookeeper.out")))?;
        let addr = format!("127.0.0.1:{port}");
        let answers = process.wait_until(START_TIMEOUT, &format!("`imok` on {addr}"), |_| {
            (four_letter(&addr, "ruok").as_deref() == Some("imok")).then_some(())
        });
        if let Err(e) = answers {
            drop(process);
            let _ = std::fs::remove_dir_all(&dir);
            return Err(format!("ZooKeeper did not serve: {e}"));
        }
        Ok(ZooKeeper { process, addr, dir })
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// What ZooKeeper printed.
    pub fn log(&self) -> String {
        self.process.output()
    }
}

impl Drop for ZooKeeper {
    fn drop(&mut self) {
        self.process.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Sends a four-letter command; the answer, if any came within a second.
fn four_letter(addr: &str, word: &str) -> Option<String> {
    let addr: SocketAddr = addr.parse().ok()?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    s.write_all(word.as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out.trim().to_string())
}
