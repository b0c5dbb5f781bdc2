//! `cellar standalone`: the region server, its native RPC front end and the metrics/status
//! endpoint in one process, on local disk. Prints where it listens, runs until SIGINT or
//! SIGTERM, then shuts down cleanly.

use cellar_server::standalone::Standalone;
use cellar_server::ServerConfig;
use std::io::Write;
use std::path::PathBuf;
use tokio::signal::unix::{signal, Signal, SignalKind};

#[derive(clap::Args)]
pub struct Args {
    /// Where tables, the meta table and the WAL live [default: ./cellar-data].
    #[arg(long, value_name = "DIR", conflicts_with = "root")]
    data_dir: Option<PathBuf>,
    /// The same as a URL, choosing the file system: file:///PATH (local disk) or
    /// hdfs://HOST:PORT/PATH (HDFS: store files, meta and the WAL there; every WAL durability
    /// point is an hsync).
    #[arg(long, value_name = "URL")]
    root: Option<String>,
    /// Native RPC address; port 0 picks a free one [default: 127.0.0.1:16200].
    #[arg(long, value_name = "HOST:PORT")]
    listen: Option<String>,
    /// Metrics and status HTTP address [default: 127.0.0.1:16210].
    #[arg(long, value_name = "HOST:PORT")]
    http_listen: Option<String>,
    /// HBase-compatible RPC address, for HBase clients; port 0 picks a free one, "off"
    /// disables it [default: 127.0.0.1:16020].
    #[arg(long, value_name = "HOST:PORT")]
    hbase_listen: Option<String>,
    /// ZooKeeper ensemble to publish this server in, HBase's way, so HBase clients configured
    /// with only `hbase.zookeeper.quorum` find it [default: coordination in process].
    #[arg(long, value_name = "HOST:PORT[,HOST:PORT...]")]
    zk: Option<String>,
    /// A cellar.toml; the flags above override it (keys: docs/configuration.md).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

impl Args {
    /// The file's configuration (or the defaults) with the flags applied.
    fn config(self) -> Result<ServerConfig, String> {
        let mut config = match &self.config {
            Some(path) => ServerConfig::from_file(path).map_err(|e| e.to_string())?,
            None => ServerConfig::default(),
        };
        if let Some(dir) = self.data_dir {
            config.data_dir = dir;
            config.root.clear();
        }
        if let Some(root) = self.root {
            config.root = root;
        }
        if let Some(listen) = self.listen {
            config.listen = listen;
        }
        if let Some(http) = self.http_listen {
            config.http_listen = http;
        }
        if let Some(zk) = self.zk {
            config.cluster.zookeeper = zk;
        }
        if let Some(hbase) = self.hbase_listen {
            config.hbase_listen = if hbase == "off" { String::new() } else { hbase };
        }
        Ok(config)
    }
}

pub fn run(args: Args) -> Result<(), String> {
    let config = args.config()?;
    // Signal handlers go in before anything is printed: a supervisor may signal as soon as
    // it has read the address lines.
    let signals = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the signal runtime: {e}"))?;
    let (mut term, mut int) = signals
        .block_on(async {
            Ok::<_, std::io::Error>((
                signal(SignalKind::terminate())?,
                signal(SignalKind::interrupt())?,
            ))
        })
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    let server = Standalone::start(config)?;
    announce(&server);
    let which = signals.block_on(next_signal(&mut term, &mut int));
    tracing::info!(signal = which, "shutting down");
    drop(signals);
    server.shutdown()?;
    tracing::info!("stopped");
    Ok(())
}

async fn next_signal(term: &mut Signal, int: &mut Signal) -> &'static str {
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}

/// The lines scripts and tests wait for, one each, flushed at once.
fn announce(server: &Standalone) {
    let mut out = std::io::stdout().lock();
    // A closed stdout must not stop the server; the same lines are in the log.
    let _ = writeln!(out, "listening native={}", server.native_addr());
    let _ = writeln!(out, "listening http={}", server.http_addr());
    if let Some(hbase) = server.hbase_addr() {
        let _ = writeln!(out, "listening hbase={hbase}");
    }
    let _ = writeln!(out, "data_dir={}", server.location());
    let _ = writeln!(out, "coordination={}", server.coordination().describe());
    let _ = out.flush();
    tracing::info!(
        native = %server.native_addr(),
        http = %server.http_addr(),
        hbase = ?server.hbase_addr(),
        data_dir = %server.location(),
        coordination = %server.coordination().describe(),
        "cellar standalone serving"
    );
}
