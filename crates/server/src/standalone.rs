//! One process serving everything: the region server (with the master role and local disk),
//! its native RPC front end and the metrics/status endpoint — what `cellar standalone` runs.

use crate::hbase::{HbaseServer, HbaseService};
use crate::http::{HttpServer, Sources, StatusInfo};
use crate::region_server::RegionServer;
use crate::rpc::{Handler, RpcServer};
use crate::ServerConfig;
use cellar_storage::fs::FsRef;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// A running standalone server.
pub struct Standalone {
    region_server: Arc<RegionServer>,
    rpc: RpcServer,
    hbase: Option<HbaseServer>,
    http: HttpServer,
    data_dir: PathBuf,
}

impl Standalone {
    /// Binds the native address, opens the region server (advertising the bound address),
    /// then starts serving RPC and HTTP. Errors name what failed (address, data dir).
    pub fn start(config: ServerConfig) -> Result<Standalone, String> {
        Standalone::start_on(config, cellar_storage::fs::LocalFs::shared())
    }

    /// [`Standalone::start`] on a given file system (the fault-injecting one in tests).
    pub fn start_on(config: ServerConfig, fs: FsRef) -> Result<Standalone, String> {
        config.validate()?;
        // Bound before the region server opens so that port 0 can be advertised as the port
        // actually bound.
        let listener = TcpListener::bind(&config.listen)
            .map_err(|e| format!("cannot listen on {} (listen): {e}", config.listen))?;
        let native = listener
            .local_addr()
            .map_err(|e| format!("cannot read the bound address of {}: {e}", config.listen))?;
        let advertised = advertised_address(native);
        let hbase_listener = if config.hbase_listen.is_empty() {
            None
        } else {
            Some(TcpListener::bind(&config.hbase_listen).map_err(|e| {
                format!(
                    "cannot listen on {} (hbase_listen): {e}",
                    config.hbase_listen
                )
            })?)
        };
        let started = Instant::now();
        let region_server =
            RegionServer::open_on(&config, advertised.clone(), fs).map_err(|e| {
                format!(
                    "cannot open the region server in {}: {e}",
                    config.data_dir.display()
                )
            })?;
        let handler: Arc<dyn Handler> = region_server.clone();
        let rpc = match RpcServer::start_on(listener, &config.rpc, handler.clone()) {
            Ok(rpc) => rpc,
            Err(e) => {
                close_region_server(&region_server);
                return Err(format!(
                    "cannot start the native RPC server on {native}: {e}"
                ));
            }
        };
        let hbase = match hbase_listener {
            None => None,
            Some(listener) => match start_hbase(listener, &config, &region_server) {
                Ok(h) => Some(h),
                Err(e) => {
                    rpc.shutdown();
                    close_region_server(&region_server);
                    return Err(e);
                }
            },
        };
        let data_dir = std::path::absolute(&config.data_dir).unwrap_or(config.data_dir.clone());
        let sources = Sources {
            metrics: rpc.metrics(),
            hbase_metrics: hbase.as_ref().map(HbaseServer::metrics),
            handler,
            info: StatusInfo {
                version: env!("CARGO_PKG_VERSION").to_string(),
                native_addr: advertised,
                data_dir: data_dir.clone(),
                started,
            },
        };
        let http = match HttpServer::start(&config.http_listen, sources) {
            Ok(http) => http,
            Err(e) => {
                rpc.shutdown();
                if let Some(h) = hbase {
                    h.shutdown();
                }
                close_region_server(&region_server);
                return Err(format!("{e} (http_listen)"));
            }
        };
        Ok(Standalone {
            region_server,
            rpc,
            hbase,
            http,
            data_dir,
        })
    }

    /// The native RPC address actually bound.
    pub fn native_addr(&self) -> SocketAddr {
        self.rpc.local_addr()
    }

    /// The HBase-compatible address actually bound, unless that front end is off.
    pub fn hbase_addr(&self) -> Option<SocketAddr> {
        self.hbase.as_ref().map(HbaseServer::local_addr)
    }

    /// The metrics and status address actually bound.
    pub fn http_addr(&self) -> SocketAddr {
        self.http.local_addr()
    }

    /// The data directory, absolute.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Stops taking calls (in-flight ones finish), then closes the regions; HTTP goes last so
    /// the server can be watched while it stops.
    pub fn shutdown(self) -> Result<(), String> {
        let Standalone {
            region_server,
            rpc,
            hbase,
            http,
            ..
        } = self;
        rpc.shutdown();
        if let Some(h) = hbase {
            h.shutdown();
        }
        let closed = region_server
            .shutdown()
            .map_err(|e| format!("region server shutdown: {e}"));
        http.shutdown();
        closed
    }
}

/// Starts the HBase front end on its bound listener, advertising that address in meta.
fn start_hbase(
    listener: TcpListener,
    config: &ServerConfig,
    rs: &Arc<RegionServer>,
) -> Result<HbaseServer, String> {
    let bound = listener.local_addr().map_err(|e| {
        format!(
            "cannot read the bound address of {}: {e}",
            config.hbase_listen
        )
    })?;
    let advertised = advertised_address(bound);
    let host = advertised
        .rsplit_once(':')
        .map(|(h, _)| h.to_string())
        .unwrap_or(advertised.clone());
    let cluster_id = cluster_id(&config.data_dir)?;
    let service = HbaseService::new(rs.clone(), host, bound.port(), cluster_id);
    HbaseServer::start_on(listener, &config.rpc, Arc::new(service))
        .map_err(|e| format!("cannot start the HBase RPC server on {bound}: {e}"))
}

/// The cluster id HBase clients see: made once per data directory (`<data_dir>/cluster_id`,
/// written atomically) so it stays the same across restarts.
fn cluster_id(data_dir: &Path) -> Result<String, String> {
    let path = data_dir.join("cluster_id");
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => return Ok(id.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    }
    let id = new_cluster_id();
    let tmp = data_dir.join("cluster_id.tmp");
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(id.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(data_dir)?.sync_all()
    };
    write().map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(id)
}

/// A random UUID-shaped id (version 4 layout) from the standard library's hash keys.
fn new_cluster_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let word = || {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        h.finish()
    };
    let (a, b) = (word(), word());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | (b >> 48) & 0x3fff,
        b & 0xffff_ffff_ffff
    )
}

fn close_region_server(rs: &RegionServer) {
    if let Err(e) = rs.shutdown() {
        tracing::error!(error = %e, "region server shutdown after a failed start");
    }
}

/// The address clients are told to use: the bound one, with an unspecified IP (listening on
/// all interfaces) replaced by this host's name so that other hosts can reach it.
fn advertised_address(bound: SocketAddr) -> String {
    if !bound.ip().is_unspecified() {
        return bound.to_string();
    }
    match std::fs::read_to_string("/proc/sys/kernel/hostname") {
        Ok(h) if !h.trim().is_empty() => format!("{}:{}", h.trim(), bound.port()),
        _ => format!("127.0.0.1:{}", bound.port()),
    }
}
