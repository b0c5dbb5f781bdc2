//! One process serving everything: the region server (with the master role and local disk),
//! its native RPC front end and the metrics/status endpoint — what `cellar standalone` runs.

use crate::http::{HttpServer, Sources, StatusInfo};
use crate::region_server::RegionServer;
use crate::rpc::{Handler, RpcServer};
use crate::ServerConfig;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// A running standalone server.
pub struct Standalone {
    region_server: Arc<RegionServer>,
    rpc: RpcServer,
    http: HttpServer,
    data_dir: PathBuf,
}

impl Standalone {
    /// Binds the native address, opens the region server (advertising the bound address),
    /// then starts serving RPC and HTTP. Errors name what failed (address, data dir).
    pub fn start(config: ServerConfig) -> Result<Standalone, String> {
        config.validate()?;
        // Bound before the region server opens so that port 0 can be advertised as the port
        // actually bound.
        let listener = TcpListener::bind(&config.listen)
            .map_err(|e| format!("cannot listen on {} (listen): {e}", config.listen))?;
        let native = listener
            .local_addr()
            .map_err(|e| format!("cannot read the bound address of {}: {e}", config.listen))?;
        let advertised = advertised_address(native);
        let started = Instant::now();
        let region_server = RegionServer::open(&config, advertised.clone()).map_err(|e| {
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
        let data_dir = std::path::absolute(&config.data_dir).unwrap_or(config.data_dir.clone());
        let sources = Sources {
            metrics: rpc.metrics(),
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
                close_region_server(&region_server);
                return Err(format!("{e} (http_listen)"));
            }
        };
        Ok(Standalone {
            region_server,
            rpc,
            http,
            data_dir,
        })
    }

    /// The native RPC address actually bound.
    pub fn native_addr(&self) -> SocketAddr {
        self.rpc.local_addr()
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
            http,
            ..
        } = self;
        rpc.shutdown();
        let closed = region_server
            .shutdown()
            .map_err(|e| format!("region server shutdown: {e}"));
        http.shutdown();
        closed
    }
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
