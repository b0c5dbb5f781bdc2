//! `cellar thrift`: the Thrift gateway (`cellar_server::thrift`) as its own process, a client
//! of a running server or cluster, as HBase's Thrift server is. Prints where it listens, runs
//! until SIGINT or SIGTERM.
//!
//! Its connections authenticate as the gateway (`--tls-cert`'s user, else `--user`, else the
//! user running it) and every call acts for its caller: the user of the caller's client
//! certificate on a TLS Thrift port (`--listen-tls-*`), else `--user`. The servers must let
//! the gateway act for them (`security.proxy_users`) unless the gateway claims `--user`
//! itself.

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
    /// The user Thrift callers without a client certificate act as on the servers (its
    /// grants apply when authorization is on). Required unless the Thrift port serves TLS
    /// (--listen-tls-cert): the gateway never falls back to the user running it.
    #[arg(long)]
    user: Option<String>,
    /// Serve TLS on the Thrift port with this certificate (PEM); callers' client
    /// certificates (--listen-client-ca) name them.
    #[arg(long, value_name = "FILE", requires = "listen_tls_key")]
    listen_tls_cert: Option<std::path::PathBuf>,
    /// The Thrift port's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "listen_tls_cert")]
    listen_tls_key: Option<std::path::PathBuf>,
    /// Ask Thrift callers for client certificates signed by this CA (PEM); a caller's
    /// certificate names the user its calls act for.
    #[arg(long, value_name = "FILE", requires = "listen_tls_cert")]
    listen_client_ca: Option<std::path::PathBuf>,
    /// With --listen-client-ca: `required` (refuse callers without a certificate) or
    /// `optional` (they act as --user).
    #[arg(long, value_name = "required|optional", default_value = "required", value_parser = ["required", "optional"])]
    listen_client_auth: String,
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
    let user = args
        .user
        .clone()
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty());
    let tls = match &args.listen_tls_cert {
        None => None,
        Some(cert) => {
            cellar_server::security::TlsServer::from_config(&cellar_server::config::TlsConfig {
                cert: Some(cert.clone()),
                key: args.listen_tls_key.clone(),
                client_ca: args.listen_client_ca.clone(),
                client_auth: if args.listen_client_auth == "optional" {
                    cellar_server::config::ClientAuth::Optional
                } else {
                    cellar_server::config::ClientAuth::Required
                },
                ..cellar_server::config::TlsConfig::default()
            })?
        }
    };
    if user.is_none() && tls.is_none() {
        return Err("name the user Thrift callers act as on the servers: --user NAME (with only the grants Thrift clients should have), or serve TLS with client certificates (--listen-tls-cert, --listen-tls-key, --listen-client-ca)".into());
    }
    let config = ThriftConfig {
        listen: args.listen.clone(),
        user: user.clone().unwrap_or_default(),
        tls: tls.is_some(),
        threads: args.threads.max(1),
        max_connections: args.max_connections,
        scanner_lease_ms: args.scanner_lease_ms.max(1),
        ..ThriftConfig::default()
    };
    let client_tls = args.tls.config()?;
    // With a certificate the gateway is its user; else it claims --user (acting for --user
    // then needs no proxy rule), or, serving only certificate holders, the user running it.
    let claimed = if args.tls.tls_cert.is_some() {
        None
    } else {
        user.clone()
            .or_else(cellar_server::security::authz::process_user)
    };
    let identity = cellar_server::thrift::Identity {
        client: cellar_client::ClientConfig {
            tls: client_tls,
            user: claimed,
            ..cellar_client::ClientConfig::default()
        },
        default_user: user,
        tls,
    };
    let listener = std::net::TcpListener::bind(&args.listen)
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let gateway = cellar_server::thrift::ThriftGateway::start(
        listener,
        cellar_server::thrift::Upstream::Fixed(args.connect.clone()),
        identity,
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
