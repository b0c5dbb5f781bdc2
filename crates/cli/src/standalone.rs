//! `cellar standalone`, `cellar master` and `cellar regionserver`: one server process in its
//! role (see `cellar_server::node`). Prints where it listens, runs until SIGINT or SIGTERM,
//! then shuts down cleanly. A fenced region server (its ZooKeeper session expired) exits
//! with an error instead.

use cellar_server::node::{Node, NodeRole};
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
    /// Serve HBase's Thrift (version 1) interface here, for happybase and other Thrift
    /// clients: framed or buffered, binary or compact, told apart per connection. Port 0 picks
    /// a free one [default: off; HBase's Thrift server uses 9090].
    #[arg(long, value_name = "HOST:PORT")]
    thrift_listen: Option<String>,
    /// A directory this server may read HBase store files from for a bulk load (`cellar
    /// import-hbase`, HBase's completebulkload, bulk loads replicated by HBase): a local
    /// one, or on HDFS as hdfs://HOST:PORT/DIR; repeat for several. Added to
    /// bulk_load.dirs [default: none, bulk load off].
    #[arg(long, value_name = "DIR|URL")]
    bulk_load_dir: Vec<PathBuf>,
    /// ZooKeeper ensemble: where the cluster's servers find each other (required for master
    /// and regionserver). A standalone server publishes itself there, HBase's way, so HBase
    /// clients configured with only `hbase.zookeeper.quorum` find it [default for standalone:
    /// coordination in process].
    #[arg(long, value_name = "HOST:PORT[,HOST:PORT...]")]
    zk: Option<String>,
    /// Serve TLS on every port (native, HBase, HTTP) with this certificate chain (PEM, leaf
    /// first); needs --tls-key. `cellar cert` makes a development CA and certificates.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM); a certificate's CN (else its first
    /// SAN) is the user. `tls.client_auth = "optional"` in the config lets clients in without.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// The CA (PEM) this server trusts when it calls the other servers of its cluster
    /// [default: --tls-client-ca].
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_ca: Option<PathBuf>,
    /// A cellar.toml; the flags above override it (keys: docs/configuration.md).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

impl Args {
    /// The file's configuration (or the defaults) with the flags applied.
    fn config(self, role: NodeRole) -> Result<ServerConfig, String> {
        let mut config = match &self.config {
            Some(path) => ServerConfig::from_file(path).map_err(|e| e.to_string())?,
            None => ServerConfig::default(),
        };
        if role == NodeRole::Master {
            // HBase's master ports, so a master and a region server fit on one host.
            let defaults = ServerConfig::default();
            if config.listen == defaults.listen {
                config.listen = MASTER_LISTEN.into();
            }
            if config.http_listen == defaults.http_listen {
                config.http_listen = MASTER_HTTP_LISTEN.into();
            }
            if config.hbase_listen == defaults.hbase_listen {
                config.hbase_listen = MASTER_HBASE_LISTEN.into();
            }
        }
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
        config.bulk_load.dirs.extend(self.bulk_load_dir);
        if let Some(thrift) = self.thrift_listen {
            config.thrift.listen = if thrift == "off" {
                String::new()
            } else {
                thrift
            };
        }
        if let Some(cert) = self.tls_cert {
            config.tls.cert = Some(cert);
        }
        if let Some(key) = self.tls_key {
            config.tls.key = Some(key);
        }
        if let Some(ca) = self.tls_client_ca {
            config.tls.client_ca = Some(ca);
        }
        if let Some(ca) = self.tls_ca {
            config.tls.ca = Some(ca);
        }
        config.validate()?;
        Ok(config)
    }
}

/// A master's default addresses (native, HTTP, HBase): HBase's master uses 16000.
const MASTER_LISTEN: &str = "127.0.0.1:16100";
const MASTER_HTTP_LISTEN: &str = "127.0.0.1:16110";
const MASTER_HBASE_LISTEN: &str = "127.0.0.1:16000";

pub fn run(args: Args, role: NodeRole) -> Result<(), String> {
    let config = args.config(role)?;
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
    // Starting may wait (a backup master waits for the active one to go): a signal meanwhile
    // ends the process, as nothing is open yet that needs closing.
    let starting = std::thread::Builder::new()
        .name("cellar-start".into())
        .spawn(move || Node::start_as(config, role))
        .map_err(|e| format!("cannot start: {e}"))?;
    let server = loop {
        if starting.is_finished() {
            break starting
                .join()
                .map_err(|_| "the server panicked while starting".to_string())??;
        }
        let signalled = signals.block_on(async {
            tokio::select! {
                which = next_signal(&mut term, &mut int) => Some(which),
                _ = tokio::time::sleep(std::time::Duration::from_millis(50)) => None,
            }
        });
        if let Some(which) = signalled {
            tracing::info!(signal = which, "stopping before the server started");
            std::process::exit(0);
        }
    };
    announce(&server);
    let which = loop {
        let signalled = signals.block_on(async {
            tokio::select! {
                which = next_signal(&mut term, &mut int) => Some(which),
                _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => None,
            }
        });
        if let Some(which) = signalled {
            break which;
        }
        if let Some(why) = server.stepped_down() {
            // As HBase's HMaster aborts: a backup master takes over; a supervisor restarts
            // this one, which comes back as a backup.
            eprintln!(
                "error: this master stepped down ({why}): it no longer serves as master and exits; restart it to run it as a backup master"
            );
            std::process::exit(75);
        }
        if server.fenced() {
            // The master has given this server's regions to others: nothing here may be
            // flushed or written again, so the process ends as a crash would.
            eprintln!(
                "error: this region server was fenced (its ZooKeeper session expired, or a split failed after closing a region) and exits"
            );
            std::process::exit(75);
        }
    };
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
fn announce(server: &Node) {
    let mut out = std::io::stdout().lock();
    // A closed stdout must not stop the server; the same lines are in the log.
    let _ = writeln!(out, "listening native={}", server.native_addr());
    let _ = writeln!(out, "listening http={}", server.http_addr());
    if let Some(hbase) = server.hbase_addr() {
        let _ = writeln!(out, "listening hbase={hbase}");
    }
    if let Some(thrift) = server.thrift_addr() {
        let _ = writeln!(out, "listening thrift={thrift}");
    }
    if let Some(auth) = server.tls_client_auth() {
        let _ = writeln!(out, "tls=on client_certificates={auth}");
    }
    let _ = writeln!(out, "data_dir={}", server.location());
    let _ = writeln!(out, "coordination={}", server.coordination().describe());
    let _ = out.flush();
    tracing::info!(
        native = %server.native_addr(),
        http = %server.http_addr(),
        hbase = %server
            .hbase_addr()
            .map_or_else(|| "off".to_string(), |a| a.to_string()),
        data_dir = %server.location(),
        coordination = %server.coordination().describe(),
        role = server.role().command(),
        "serving"
    );
}
