//! `cellar thrift`: the Thrift gateway (`cellar_server::thrift`) as its own process, a client
//! of a running server or cluster, as HBase's Thrift server is. Prints where it listens, runs
//! until SIGINT or SIGTERM.

use crate::tls_args::ClientTlsArgs;
use cellar_server::config::ThriftConfig;
use std::io::Write;
use tokio::signal::unix::{signal, SignalKind};

#[derive(clap::Args)]
pub struct Args {
    /// The Cellar server to call: a standalone server's or a cluster's masters' native
    /// address(es), HOST:PORT[,HOST:PORT...].
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:16200")]
    connect: String,
    /// Where to serve Thrift; port 0 picks a free one.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9090")]
    listen: String,
    /// The user calls run as on the server (its grants apply when authorization is on)
    /// [default: the user running this process].
    #[arg(long)]
    user: Option<String>,
    /// Threads serving Thrift connections.
    #[arg(long, default_value_t = ThriftConfig::default().threads)]
    threads: usize,
    /// Open connections beyond this are refused.
    #[arg(long, default_value_t = ThriftConfig::default().max_connections)]
    max_connections: u32,
    /// A scanner unused this long (milliseconds) is closed.
    #[arg(long, default_value_t = ThriftConfig::default().scanner_lease_ms)]
    scanner_lease_ms: u64,
    #[command(flatten)]
    tls: ClientTlsArgs,
}

pub fn run(args: Args) -> Result<(), String> {
    let config = ThriftConfig {
        listen: args.listen.clone(),
        user: args.user.clone().unwrap_or_default(),
        threads: args.threads.max(1),
        max_connections: args.max_connections,
        scanner_lease_ms: args.scanner_lease_ms.max(1),
        ..ThriftConfig::default()
    };
    let client = cellar_client::ClientConfig {
        tls: args.tls.config()?,
        user: args
            .user
            .or_else(cellar_server::security::authz::process_user),
        ..cellar_client::ClientConfig::default()
    };
    let listener = std::net::TcpListener::bind(&args.listen)
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let gateway = cellar_server::thrift::ThriftGateway::start(
        listener,
        &args.connect,
        client,
        &config,
        None,
    )?;
    let signals = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the signal runtime: {e}"))?;
    let which = signals.block_on(async {
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "listening thrift={}", gateway.local_addr());
            let _ = writeln!(out, "upstream={}", args.connect);
            let _ = out.flush();
        }
        Ok::<_, std::io::Error>(tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        })
    });
    let which = which.map_err(|e| format!("cannot install signal handlers: {e}"))?;
    tracing::info!(signal = which, "shutting down");
    gateway.shutdown();
    Ok(())
}
