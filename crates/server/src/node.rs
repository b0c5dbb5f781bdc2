//! One server process: the region server in its role, its native and HBase RPC front ends
//! and the metrics/status endpoint — what `cellar standalone`, `cellar master` and
//! `cellar regionserver` run. The roles share this one path (`docs/design/0004-cluster.md`):
//!
//! - standalone: master and region server in one process; coordination in process unless
//!   `cluster.zookeeper` names an ensemble, where it publishes itself in HBase's layout;
//! - master: waits to win the election, splits dead servers' logs, opens meta and assigns
//!   regions to region servers; publishes itself as master and meta's server;
//! - region server: registers in ZooKeeper, then opens its own WAL directory and serves the
//!   regions the master opens on it. If its session expires it is fenced: it stops serving
//!   and its process exits (the master has given its regions to others).

use crate::config::Root;
use crate::coord::local::LocalCoordination;
use crate::coord::zk::{ZkCoordination, ZkOptions};
use crate::coord::{CoordRef, Election, ServerName, ServerRecord};
use crate::error::ServerError;
use crate::hbase::HbaseService;
use crate::http::{HttpServer, Sources, StatusInfo};
use crate::master::Assignment;
use crate::master::Master;
use crate::native_service::NativeService;
use crate::region_server::{Opening, RegionServer, Role};
use crate::rpc::{FrontEnd, Handler, RpcCore};
use crate::ServerConfig;
use cellar_storage::fs::{FileSystem, FsRef, HdfsFs};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a process is; [`Role`] is the same with the master's assignment state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeRole {
    Standalone,
    Master,
    RegionServer,
}

impl NodeRole {
    pub fn command(self) -> &'static str {
        match self {
            NodeRole::Standalone => "cellar standalone",
            NodeRole::Master => "cellar master",
            NodeRole::RegionServer => "cellar regionserver",
        }
    }
}

/// A running standalone server.
pub type Standalone = Node;

/// A running server process.
pub struct Node {
    role: NodeRole,
    region_server: Arc<RegionServer>,
    /// Standalone and a cluster's master: the catalog's keeper over `region_server`.
    master: Option<Arc<Master>>,
    /// The native protocol's front end.
    rpc: FrontEnd,
    /// HBase's protocol's front end (`hbase_listen`).
    hbase: Option<FrontEnd>,
    http: HttpServer,
    /// The Thrift gateway (`thrift.listen`), a client of this node.
    thrift: Option<crate::thrift::ThriftGateway>,
    data_dir: PathBuf,
    /// The data directory as users name it: a path, or the `hdfs://` root.
    location: String,
    coordination: CoordRef,
    /// Set when a region server's session expired: it no longer serves.
    fenced: Arc<AtomicBool>,
    /// Watches a region server's session.
    watcher: Option<std::thread::JoinHandle<()>>,
    watcher_stop: Arc<AtomicBool>,
    /// A cluster region server's copy of the grants, kept from the master's (stopped with the
    /// watcher).
    acl_sync: Option<std::thread::JoinHandle<()>>,
    /// With TLS: whether client certificates are required, optional or not asked for.
    tls_client_auth: Option<&'static str>,
}

impl Node {
    /// Binds the native address, opens the region server (advertising the bound address),
    /// then starts serving RPC and HTTP. Errors name what failed (address, data dir).
    /// The file system is the root's (`root`, else `data_dir` on local disk).
    pub fn start(config: ServerConfig) -> Result<Node, String> {
        Node::start_as(config, NodeRole::Standalone)
    }

    /// [`Node::start`] in any role.
    pub fn start_as(mut config: ServerConfig, role: NodeRole) -> Result<Node, String> {
        config.validate()?;
        crate::faults::init();
        let fs = match (!config.root.is_empty())
            .then(|| Root::parse(&config.root))
            .transpose()?
        {
            None => cellar_storage::fs::LocalFs::shared(),
            Some(Root::Local(path)) => {
                config.data_dir = path;
                cellar_storage::fs::LocalFs::shared()
            }
            Some(Root::Hdfs { namenode, path }) => {
                config.data_dir = path;
                // Every WAL write is an hsync on HDFS (milliseconds): never on the reactor.
                config.rpc.inline_puts = false;
                let buffer = config.storage.hdfs_write_buffer();
                HdfsFs::connect(&namenode)
                    .map(|fs| -> FsRef { Arc::new(fs.with_write_buffer(buffer)) })
                    .map_err(|e| format!("cannot use HDFS at {namenode} (root): {e}"))?
            }
        };
        Node::start_on_as(config, fs, role)
    }

    /// [`Node::start`] on a given file system (the fault-injecting one in tests).
    pub fn start_on(config: ServerConfig, fs: FsRef) -> Result<Node, String> {
        Node::start_on_as(config, fs, NodeRole::Standalone)
    }

    /// [`Node::start_as`] on a given file system.
    pub fn start_on_as(config: ServerConfig, fs: FsRef, role: NodeRole) -> Result<Node, String> {
        config.validate()?;
        if role != NodeRole::Standalone && config.cluster.zookeeper.is_empty() {
            return Err(format!(
                "{} is part of a cluster and needs its ZooKeeper ensemble: --zk HOST:PORT \
                 (cluster.zookeeper)",
                role.command()
            ));
        }
        // First: a coordination service that cannot be reached is an error before anything
        // is opened.
        // TLS files that do not load stop the start, naming the file.
        let tls = crate::security::TlsServer::from_config(&config.tls)?;
        let peer_tls = peer_tls(&config, role)?;
        let http_token = match &config.security.http_token_file {
            None => None,
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    format!(
                        "cannot read security.http_token_file {}: {e}",
                        path.display()
                    )
                })?;
                let token = text.trim().to_string();
                if token.len() < 16 {
                    return Err(format!(
                        "security.http_token_file {}: the token is {} characters; use at least 16",
                        path.display(),
                        token.len()
                    ));
                }
                Some(token)
            }
        };
        let tls_client_auth = tls.as_ref().map(|t| {
            match (t.asks_for_client_certificates(), config.tls.client_auth) {
                (false, _) => "none",
                (true, crate::config::ClientAuth::Required) => "required",
                (true, crate::config::ClientAuth::Optional) => "optional",
            }
        });
        let coordination = connect_coordination(&config)?;
        // A start that fails from here withdraws what it announced (an active master's node
        // would otherwise keep the next master waiting for a whole session timeout).
        let mut withdraw = Withdraw(Some(coordination.clone()));
        // Bound before the region server opens so that port 0 can be advertised as the port
        // actually bound.
        let listener = bind(&config.listen, Port::Native)?;
        let native = listener
            .local_addr()
            .map_err(|e| format!("cannot read the bound address of {}: {e}", config.listen))?;
        let advertised = advertised_address(native);
        let hbase_listener = if config.hbase_listen.is_empty() {
            None
        } else {
            Some(bind(&config.hbase_listen, Port::Hbase)?)
        };
        let thrift_listener = if config.thrift.listen.is_empty() {
            None
        } else {
            Some(bind(&config.thrift.listen, Port::Thrift)?)
        };
        let http_listener = bind(&config.http_listen, Port::Http)?;
        let http_bound = http_listener.local_addr().map_err(|e| {
            format!(
                "cannot read the bound address of {}: {e}",
                config.http_listen
            )
        })?;
        let started = Instant::now();
        let startcode = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(1);
        let (host, port) = match &hbase_listener {
            Some(l) => split_host_port(&advertised_address(
                l.local_addr()
                    .map_err(|e| format!("cannot read the bound HBase address: {e}"))?,
            )),
            None => split_host_port(&advertised),
        };
        let me = ServerRecord {
            name: ServerName {
                host,
                port,
                start_code: startcode,
            },
            native_addr: advertised.clone(),
            http_addr: advertised_address(http_bound),
        };
        let opening = match role {
            NodeRole::Standalone => Opening {
                startcode,
                ..Opening::standalone()
            },
            NodeRole::Master => prepare_master(&coordination, &fs, &config, &me, &peer_tls)?,
            NodeRole::RegionServer => prepare_region_server(&coordination, &fs, &config, &me)?,
        };
        let region_server = RegionServer::open_as(&config, advertised.clone(), fs.clone(), opening)
            .map_err(|e| {
                format!(
                    "cannot open the region server in {}: {e}",
                    config.data_dir.display()
                )
            })?;
        if let (Some(tls), Some(log)) = (&tls, region_server.authz.audit_log()) {
            tls.set_audit(log);
        }
        let _ = region_server.coordination.set(coordination.clone());
        let master = match region_server.role {
            Role::Standalone | Role::Master(_) => Some(Master::start(region_server.clone())),
            Role::RegionServer => None,
        };
        let native_service = NativeService::new(region_server.clone(), master.clone());
        let handler: Arc<dyn Handler> = native_service.clone();
        // One runtime and one handler pool for both front ends.
        let core = match RpcCore::start(&config.rpc) {
            Ok(core) => core,
            Err(e) => {
                close_region_server(&region_server);
                return Err(format!("cannot start the RPC threads: {e}"));
            }
        };
        let rpc = match crate::rpc::start_in(
            listener,
            &config.rpc,
            handler.clone(),
            core.clone(),
            tls.clone(),
        ) {
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
            Some(listener) => {
                match start_hbase(listener, &config, &native_service, &fs, core, tls.clone()) {
                    Ok(h) => Some(h),
                    Err(e) => {
                        rpc.shutdown();
                        close_region_server(&region_server);
                        return Err(e);
                    }
                }
            }
        };
        let data_dir = if config.root.starts_with("hdfs://") {
            config.data_dir.clone()
        } else {
            std::path::absolute(&config.data_dir).unwrap_or(config.data_dir.clone())
        };
        let location = if config.root.starts_with("hdfs://") {
            config.root.trim_end_matches('/').to_string()
        } else {
            data_dir.display().to_string()
        };
        let slow = (config.rpc.slow_call_ms > 0)
            .then(|| std::time::Duration::from_millis(config.rpc.slow_call_ms));
        rpc.metrics().slow_calls().set_threshold(slow);
        if let Some(h) = &hbase {
            h.metrics().slow_calls().set_threshold(slow);
        }
        let thrift_tls = tls.clone();
        let sources = Sources {
            metrics: rpc.metrics(),
            hbase_metrics: hbase.as_ref().map(FrontEnd::metrics),
            status: native_service.clone(),
            info: StatusInfo {
                version: env!("CARGO_PKG_VERSION").to_string(),
                native_addr: advertised,
                data_dir: data_dir.clone(),
                root: config.root_url(),
                started,
                coordination: Some(coordination.clone()),
                server_name: me.name.to_string(),
                rpc: config.rpc.clone(),
            },
            tls,
            token: http_token,
            thrift: Arc::new(std::sync::OnceLock::new()),
        };
        let thrift_metrics = sources.thrift.clone();
        let http = match HttpServer::start_on(http_listener, sources) {
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
        let mut server = Node {
            role,
            region_server,
            master,
            rpc,
            hbase,
            http,
            thrift: None,
            data_dir,
            location,
            coordination,
            fenced: Arc::new(AtomicBool::new(false)),
            tls_client_auth,
            watcher: None,
            watcher_stop: Arc::new(AtomicBool::new(false)),
            acl_sync: None,
        };
        // Last: announced only once everything serves.
        let announced = match role {
            NodeRole::Standalone => server.announce(&fs, &config),
            NodeRole::Master => {
                server.watch_mastership();
                server.announce_master(&me)
            }
            NodeRole::RegionServer => {
                server.watch_session();
                server.sync_permissions(peer_tls.clone());
                server.region_server.set_split_requester(split_requester(
                    server.coordination.clone(),
                    peer_tls.clone(),
                ));
                server.region_server.set_row_forwarder(row_forwarder(
                    server.coordination.clone(),
                    peer_tls.clone(),
                ));
                Ok(())
            }
        };
        let announced = announced.and_then(|()| match thrift_listener {
            None => Ok(()),
            Some(l) => {
                let gateway = start_thrift(l, &config, role, &server, &fs, &peer_tls, thrift_tls)?;
                let _ = thrift_metrics.set(gateway.metrics_source());
                server.thrift = Some(gateway);
                Ok(())
            }
        });
        if let Err(e) = announced {
            let _ = server.shutdown();
            return Err(e);
        }
        withdraw.0 = None;
        Ok(server)
    }

    /// A cluster's master, once everything serves: meta's server is this one.
    fn announce_master(&self, me: &ServerRecord) -> Result<(), String> {
        let c = &self.coordination;
        c.publish_meta_location(me)
            .map_err(|e| format!("{}: {e}", c.describe()))?;
        tracing::info!(coordination = %c.describe(), server = %me.name, "active master serving hbase:meta");
        Ok(())
    }

    /// A region server whose session expires is fenced: the master treats it as dead,
    /// splits its log and gives its regions to others, so it must not serve again.
    fn watch_session(&mut self) {
        let c = self.coordination.clone();
        self.watch_until_fenced("cellar-session", move || {
            (c.session() == crate::coord::SessionState::Expired).then(|| {
                format!(
                    "ZooKeeper session expired ({}): this region server is fenced and stops serving",
                    c.describe()
                )
            })
        });
    }

    /// A cluster master steps down as HBase's aborts: when its session expires, or
    /// `/hbase/master` names another master or none (`coord::Tenure`), it refuses every call
    /// (a retriable error naming why), its assignment and balancer stop, and the process
    /// exits ([`Node::fenced`]); a backup takes over. The tenure's confirmation is renewed at
    /// half its life.
    fn watch_mastership(&mut self) {
        let Some(a) = self.master.as_ref().and_then(|m| m.assignment()).cloned() else {
            return;
        };
        let c = self.coordination.clone();
        self.watch_until_fenced("cellar-mastership", move || {
            a.tenure().watch();
            a.tenure().lost().map(|why| {
                format!(
                    "this master stepped down ({why}; {}): it stops serving and exits; a backup master takes over",
                    c.describe()
                )
            })
        });
    }

    /// Runs `lost` every 100 ms on a thread of its own until it names why this server must
    /// stop serving; then fences the server ([`Node::fenced`]).
    fn watch_until_fenced(
        &mut self,
        name: &str,
        lost: impl Fn() -> Option<String> + Send + 'static,
    ) {
        let rs = Arc::clone(&self.region_server);
        let fenced = Arc::clone(&self.fenced);
        let stop = Arc::clone(&self.watcher_stop);
        let spawned = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    if let Some(why) = lost() {
                        tracing::error!("{why}");
                        rs.fence();
                        fenced.store(true, Ordering::SeqCst);
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
        match spawned {
            Ok(h) => self.watcher = Some(h),
            Err(e) => tracing::error!(error = %e, thread = name, "cannot start a watcher"),
        }
    }

    /// A cluster region server checks calls against the master's grants (meta lives there):
    /// with authorization on, it asks the active master for every grant each second, as this
    /// server (its certificate's user, else the user running it: a superuser there), and
    /// checks against the last answer. Until the first answer only superusers pass. A grant
    /// or revoke reaches region servers within about a second (HBase's reach them through
    /// ZooKeeper, also asynchronously).
    fn sync_permissions(&mut self, tls: Option<cellar_client::TlsClientConfig>) {
        if !self.region_server.authz.enabled() {
            return;
        }
        let c = self.coordination.clone();
        let rs = Arc::clone(&self.region_server);
        let stop = Arc::clone(&self.watcher_stop);
        let spawned = std::thread::Builder::new()
            .name("cellar-acl-sync".into())
            .spawn(move || {
                let mut client: Option<(String, cellar_client::blocking::Client)> = None;
                let mut failing = false;
                while !stop.load(Ordering::SeqCst) {
                    match fetch_permissions(&c, &mut client, &tls) {
                        Ok(list) => {
                            if failing {
                                tracing::info!("permissions fetched from the master again");
                            }
                            failing = false;
                            rs.authz.load(list);
                        }
                        Err(e) => {
                            if !failing {
                                tracing::warn!(error = %e, "cannot fetch the permissions from the master; checking against the last ones");
                            }
                            failing = true;
                            client = None;
                        }
                    }
                    for _ in 0..10 {
                        if stop.load(Ordering::SeqCst) {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            });
        match spawned {
            Ok(h) => self.acl_sync = Some(h),
            Err(e) => tracing::error!(error = %e, "cannot start the permission sync"),
        }
    }

    /// Whether this region server was fenced (its session expired), or this master stepped
    /// down: the process should exit.
    pub fn fenced(&self) -> bool {
        self.fenced.load(Ordering::SeqCst)
            || self.region_server.is_fenced()
            || self.region_server.stepped_down().is_some()
    }

    /// Why this master stepped down (it is no longer the active master), if it did.
    pub fn stepped_down(&self) -> Option<String> {
        self.region_server.stepped_down()
    }

    pub fn role(&self) -> NodeRole {
        self.role
    }

    /// The region server inside (tests look at its regions).
    pub fn region_server(&self) -> &Arc<RegionServer> {
        &self.region_server
    }

    /// Publishes this server as the cluster: its id, itself as active master and as the
    /// region server that holds `hbase:meta`.
    fn announce(&self, fs: &FsRef, config: &ServerConfig) -> Result<(), String> {
        let c = &self.coordination;
        let cluster_id = cluster_id(&**fs, &config.data_dir)?;
        let (host, port) = match self.hbase_addr() {
            Some(hbase) => split_host_port(&advertised_address(hbase)),
            None => split_host_port(self.region_server.advertised()),
        };
        let me = ServerRecord {
            name: ServerName {
                host,
                port,
                start_code: self.region_server.startcode,
            },
            native_addr: self.region_server.advertised().to_string(),
            http_addr: advertised_address(self.http_addr()),
        };
        let on = c.describe();
        match c.try_become_master(&me).map_err(|e| format!("{on}: {e}"))? {
            Election::Active => {}
            Election::Backup { active } => {
                let who = active
                    .map(|a| format!("{} (native {})", a.name, a.native_addr))
                    .unwrap_or_else(|| "another server".into());
                return Err(format!(
                    "{on} already has an active master: {who}. A standalone server is a whole \
                     cluster and does not join another; give it its own ensemble or \
                     cluster.znode_parent"
                ));
            }
        }
        c.publish_cluster_id(&cluster_id)
            .and_then(|()| c.register_server(&me))
            .and_then(|()| c.publish_meta_location(&me))
            .map_err(|e| format!("{on}: {e}"))?;
        tracing::info!(coordination = %on, server = %me.name, cluster_id = %cluster_id,
            "published as active master, region server and hbase:meta's server");
        Ok(())
    }

    /// The coordination in use.
    pub fn coordination(&self) -> &CoordRef {
        &self.coordination
    }

    /// The native RPC address actually bound.
    pub fn native_addr(&self) -> SocketAddr {
        self.rpc.local_addr()
    }

    /// The HBase-compatible address actually bound, unless that front end is off.
    pub fn hbase_addr(&self) -> Option<SocketAddr> {
        self.hbase.as_ref().map(FrontEnd::local_addr)
    }

    /// The Thrift gateway's address, when it runs.
    pub fn thrift_addr(&self) -> Option<SocketAddr> {
        self.thrift
            .as_ref()
            .map(crate::thrift::ThriftGateway::local_addr)
    }

    /// With TLS on every port: whether client certificates are `required`, `optional` or
    /// not asked for (`none`); `None` without TLS.
    pub fn tls_client_auth(&self) -> Option<&'static str> {
        self.tls_client_auth
    }

    /// The metrics and status address actually bound.
    pub fn http_addr(&self) -> SocketAddr {
        self.http.local_addr()
    }

    /// The data directory, absolute.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Where the data lives as users name it: the absolute path, or the `hdfs://` root.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Stops taking calls (in-flight ones finish), then closes the regions; HTTP goes last so
    /// the server can be watched while it stops.
    pub fn shutdown(self) -> Result<(), String> {
        let Node {
            region_server,
            master,
            rpc,
            hbase,
            http,
            thrift,
            coordination,
            watcher,
            watcher_stop,
            acl_sync,
            ..
        } = self;
        // The gateway is a client of this node: it stops first.
        if let Some(t) = thrift {
            t.shutdown();
        }
        watcher_stop.store(true, Ordering::SeqCst);
        if let Some(w) = watcher {
            let _ = w.join();
        }
        if let Some(a) = acl_sync {
            let _ = a.join();
        }
        // Withdrawn first, so that nobody is sent here while the server stops.
        coordination.close();
        rpc.shutdown();
        if let Some(h) = hbase {
            h.shutdown();
        }
        if let Some(m) = master {
            m.stop();
            if let Some(a) = m.assignment() {
                a.shutdown();
            }
        }
        let closed = region_server
            .shutdown()
            .map_err(|e| format!("region server shutdown: {e}"));
        http.shutdown();
        closed
    }
}

/// Starts the Thrift gateway as a client of this node: of its own native address on a
/// standalone server or a master, of the cluster's masters on a region server (looked up
/// again as they change). Its connections authenticate as the gateway — the node's own
/// certificate with TLS (trusting `tls.ca`, else `tls.client_ca`), else `thrift.user` — and
/// every call acts for its caller (a TLS caller's certificate user, else `thrift.user`).
/// With authorization on the gateway refuses to start where a caller would run as a
/// superuser or as nobody, or where this server would refuse its calls for want of a
/// `security.proxy_users` rule.
fn start_thrift(
    listener: TcpListener,
    config: &ServerConfig,
    role: NodeRole,
    node: &Node,
    fs: &FsRef,
    peer_tls: &Option<cellar_client::TlsClientConfig>,
    tls_server: Option<Arc<crate::security::TlsServer>>,
) -> Result<crate::thrift::ThriftGateway, String> {
    let tls = if config.tls.cert.is_some() && peer_tls.is_none() {
        // A standalone server without a CA to trust its own certificate by.
        peer_tls_required(config)?
    } else {
        peer_tls.clone()
    };
    if config.thrift.tls && tls_server.is_none() {
        return Err(
            "thrift.tls serves the Thrift port with the server's certificate: set tls.cert and tls.key (--tls-cert, --tls-key)"
                .into(),
        );
    }
    let authz = &node.region_server.authz;
    let default_user = thrift_default_user(config, authz)?;
    // Who the gateway's connections are: the node's certificate's user with TLS, else the
    // user it claims (thrift.user: calls for thrift.user then need no proxy rule).
    let gateway_user = if tls.is_some() {
        config
            .tls
            .cert
            .as_deref()
            .and_then(|c| crate::security::tls::read_certs(c, "tls.cert").ok())
            .and_then(|certs| {
                certs
                    .first()
                    .and_then(|c| crate::security::identity::user_from_certificate(c).ok())
            })
    } else {
        None
    };
    if authz.enabled() {
        if let Some(gw) = &gateway_user {
            let rule = |who: &str| {
                format!(
                    "the Thrift gateway calls this server as '{gw}' (the user of tls.cert) for {who}: let it with security.proxy_users = {{ \"{gw}\" = [...] }} (users, \"@group\"s or \"*\"; HBase's hadoop.proxyuser.{gw}.users)"
                )
            };
            match &default_user {
                Some(u) if !authz.may_act_for(gw, u) => {
                    return Err(rule(&format!("thrift.user '{u}'")))
                }
                _ if config.thrift.tls && !authz.is_proxy_user(gw) => {
                    return Err(rule("the users of its callers' certificates"))
                }
                _ => {}
            }
        }
    }
    let upstream = match role {
        NodeRole::RegionServer => {
            let coordination = node.coordination.clone();
            crate::thrift::Upstream::Resolve(Arc::new(move || masters_of(&coordination)))
        }
        _ => crate::thrift::Upstream::Fixed(node.region_server.advertised().to_string()),
    };
    let claimed = if gateway_user.is_some() {
        None
    } else {
        default_user
            .clone()
            .or_else(crate::security::authz::process_user)
    };
    let identity = crate::thrift::Identity {
        client: cellar_client::ClientConfig {
            tls,
            user: claimed,
            ..cellar_client::ClientConfig::default()
        },
        default_user,
        tls: if config.thrift.tls { tls_server } else { None },
    };
    let cluster_id = cluster_id(&**fs, &config.data_dir).ok();
    crate::thrift::ThriftGateway::start(listener, upstream, identity, &config.thrift, cluster_id)
}

/// Who Thrift callers without a certificate are: `thrift.user`. With authorization on it must
/// be set (unless the port is TLS, whose callers then all need certificates) and must not be
/// a superuser; off, it defaults to the user running the server (nothing is checked).
fn thrift_default_user(
    config: &ServerConfig,
    authz: &crate::security::Authz,
) -> Result<Option<String>, String> {
    let user = config.thrift.user.trim();
    if !authz.enabled() {
        return Ok(if user.is_empty() {
            crate::security::authz::process_user()
        } else {
            Some(user.to_string())
        });
    }
    if user.is_empty() {
        if config.thrift.tls {
            return Ok(None);
        }
        return Err("with security.authorization on, the Thrift gateway needs thrift.user: the user its callers' calls run as, with only the grants Thrift clients should have (or thrift.tls, so that callers present client certificates)".into());
    }
    if authz.is_superuser_name(user) {
        return Err(format!(
            "thrift.user '{user}' is a superuser (security.superusers, or a user this server runs as): every Thrift caller could do anything; name a user with only the grants Thrift clients should have"
        ));
    }
    Ok(Some(user.to_string()))
}

/// A cluster's masters as the client takes them: the active one first, then the backups.
fn masters_of(c: &CoordRef) -> Result<String, String> {
    let mut list: Vec<String> = Vec::new();
    if let Some(active) = c
        .active_master()
        .map_err(|e| format!("thrift gateway: {e}"))?
    {
        list.push(active.native_addr);
    }
    for b in c
        .backup_masters()
        .map_err(|e| format!("thrift gateway: {e}"))?
    {
        if !list.contains(&b.native_addr) {
            list.push(b.native_addr);
        }
    }
    if list.is_empty() {
        return Err("thrift gateway: no master to call".into());
    }
    Ok(list.join(","))
}

fn peer_tls_required(
    config: &ServerConfig,
) -> Result<Option<cellar_client::TlsClientConfig>, String> {
    peer_tls(config, NodeRole::Master).map_err(|_| {
        "the Thrift gateway calls this server over TLS: set tls.ca (or tls.client_ca) to the CA that signs its certificate".to_string()
    })
}

/// Starts the HBase front end on its bound listener, advertising that address in meta.
fn start_hbase(
    listener: TcpListener,
    config: &ServerConfig,
    native: &NativeService,
    fs: &FsRef,
    core: Arc<RpcCore>,
    tls: Option<Arc<crate::security::TlsServer>>,
) -> Result<FrontEnd, String> {
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
    let cluster_id = cluster_id(&**fs, &config.data_dir)?;
    let service = HbaseService::new(
        native.rs.clone(),
        native.master.clone(),
        host,
        bound.port(),
        cluster_id,
    );
    crate::hbase::start_in(listener, &config.rpc, Arc::new(service), core, tls)
        .map_err(|e| format!("cannot start the HBase RPC server on {bound}: {e}"))
}

/// The cluster id HBase clients see: made once per root (`<data_dir>/cluster_id`, written
/// atomically through the file system) so it stays the same across restarts.
fn cluster_id(fs: &dyn FileSystem, data_dir: &Path) -> Result<String, String> {
    let path = data_dir.join("cluster_id");
    let exists = fs
        .exists(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if exists {
        let bytes = cellar_storage::fs::read_all(fs, &path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let id = String::from_utf8_lossy(&bytes).trim().to_string();
        if !id.is_empty() {
            return Ok(id);
        }
    }
    let id = new_cluster_id();
    cellar_storage::fs::write_atomic(fs, &path, id.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(id)
}

/// The TLS a server's calls to other servers of its cluster use: its own certificate as the
/// client certificate, and `tls.ca` (else `tls.client_ca`) as the CA it trusts. A standalone
/// server calls no other server.
fn peer_tls(
    config: &ServerConfig,
    role: NodeRole,
) -> Result<Option<cellar_client::TlsClientConfig>, String> {
    let tls = &config.tls;
    let (Some(cert), Some(key)) = (&tls.cert, &tls.key) else {
        return Ok(None);
    };
    let Some(ca) = tls.ca.as_ref().or(tls.client_ca.as_ref()) else {
        if role == NodeRole::Standalone {
            return Ok(None);
        }
        return Err(format!(
            "{} calls other servers of its cluster over TLS: set tls.ca (or tls.client_ca) to the CA that signs their certificates",
            role.command()
        ));
    };
    cellar_client::TlsClientConfig::from_files(ca, Some(cert), Some(key))
        .map(Some)
        .map_err(|e| format!("{e} (tls.ca, tls.cert, tls.key)"))
}

/// Every grant, from the active master.
fn fetch_permissions(
    c: &CoordRef,
    client: &mut Option<(String, cellar_client::blocking::Client)>,
    tls: &Option<cellar_client::TlsClientConfig>,
) -> Result<Vec<crate::security::acl::Permission>, String> {
    let master = c
        .active_master()
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "no active master".to_string())?;
    let fresh = client
        .as_ref()
        .is_none_or(|(addr, _)| *addr != master.native_addr);
    if fresh {
        let config = cellar_client::ClientConfig {
            retries: 0,
            rpc_timeout: Duration::from_secs(10),
            tls: tls.clone(),
            user: crate::security::authz::process_user(),
            ..cellar_client::ClientConfig::default()
        };
        let connected = cellar_client::blocking::Client::connect_with(&master.native_addr, config)
            .map_err(|e| format!("master {}: {e}", master.native_addr))?;
        *client = Some((master.native_addr.clone(), connected));
    }
    let (_, cl) = client.as_ref().ok_or("no master connection")?;
    let list = cl
        .admin()
        .user_permissions(None, None)
        .map_err(|e| format!("master {}: {e}", master.native_addr))?;
    list.into_iter()
        .map(|p| {
            let scope = crate::native_service::scope_from_pb(p.scope.as_ref())
                .map_err(|e| e.to_string())?;
            let actions = crate::security::acl::Actions::parse(&p.actions)?;
            Ok(crate::security::acl::Permission {
                user: p.user,
                scope,
                actions,
            })
        })
        .collect()
}

/// How a region server asks the active master (found through coordination) to split a
/// region at a row: SPLIT_TABLE with that row, as a client would.
fn split_requester(
    c: CoordRef,
    tls: Option<cellar_client::TlsClientConfig>,
) -> crate::region_server::SplitRequester {
    let client: Arc<parking_lot::Mutex<Option<(String, cellar_client::blocking::Client)>>> =
        Arc::new(parking_lot::Mutex::new(None));
    Arc::new(move |table: &str, row: bytes::Bytes| {
        let master = c
            .active_master()
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "no active master".to_string())?;
        let mut cached = client.lock();
        let fresh = match cached.as_ref() {
            Some((addr, _)) => *addr != master.native_addr,
            None => true,
        };
        if fresh {
            let config = cellar_client::ClientConfig {
                retries: 0,
                tls: tls.clone(),
                user: crate::security::authz::process_user(),
                ..cellar_client::ClientConfig::default()
            };
            let connected =
                cellar_client::blocking::Client::connect_with(&master.native_addr, config)
                    .map_err(|e| format!("master {}: {e}", master.native_addr))?;
            *cached = Some((master.native_addr.clone(), connected));
        }
        let (_, c) = cached.as_ref().ok_or("no master connection")?;
        c.admin()
            .split(table, Some(&row))
            .map_err(|e| format!("master {}: {e}", master.native_addr))
    })
}

/// How a region server writes rows of regions served elsewhere (edits replicated in): a client
/// of the cluster that locates regions through the active master, calling as this server —
/// the replication sink checked its own caller (global WRITE) before, as HBase's sink writes
/// through its server's own connection.
fn row_forwarder(
    c: CoordRef,
    tls: Option<cellar_client::TlsClientConfig>,
) -> crate::region_server::RowForwarder {
    let client: Arc<parking_lot::Mutex<Option<(String, cellar_client::blocking::Client)>>> =
        Arc::new(parking_lot::Mutex::new(None));
    Arc::new(move |table: &str, rows: Vec<cellar_model::RowMutation>| {
        let unavailable = |why: String| {
            ServerError::Internal(format!("sending replicated rows of '{table}' on: {why}"))
        };
        let master = c
            .active_master()
            .map_err(|e| unavailable(e.to_string()))?
            .ok_or_else(|| unavailable("no active master".into()))?;
        let mut cached = client.lock();
        if cached
            .as_ref()
            .is_none_or(|(addr, _)| *addr != master.native_addr)
        {
            let config = cellar_client::ClientConfig {
                tls: tls.clone(),
                user: crate::security::authz::process_user(),
                ..cellar_client::ClientConfig::default()
            };
            let connected =
                cellar_client::blocking::Client::connect_with(&master.native_addr, config)
                    .map_err(|e| unavailable(format!("master {}: {e}", master.native_addr)))?;
            *cached = Some((master.native_addr.clone(), connected));
        }
        let (_, cl) = cached
            .as_ref()
            .ok_or_else(|| unavailable("no master connection".into()))?;
        cl.table(table)
            .put_all(rows)
            .map_err(|e| forwarded_error(table, e))
    })
}

/// A forwarded write's failure as the replication source should see it: HBase's exceptions
/// for a table or family missing here, else a retriable I/O error.
fn forwarded_error(table: &str, e: cellar_client::Error) -> ServerError {
    use cellar_client::{Error, ErrorCode};
    let last = match &e {
        Error::RetriesExhausted { last, .. } => last.as_ref(),
        other => other,
    };
    match last {
        Error::Rpc {
            code: ErrorCode::TableNotFound,
            ..
        } => ServerError::TableNotFound(table.to_string()),
        Error::Rpc {
            code: ErrorCode::NoSuchFamily,
            message,
        } => ServerError::NoSuchFamily {
            table: table.to_string(),
            family: message.clone(),
        },
        _ => ServerError::Internal(format!("sending replicated rows of '{table}' on: {e}")),
    }
}

/// Closes the coordination session when dropped, unless disarmed.
struct Withdraw(Option<CoordRef>);

impl Drop for Withdraw {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            c.close();
        }
    }
}

/// A master's preparation: win the election (waiting as a backup master while another is
/// active), check the root belongs to this cluster, publish the cluster id, and split the
/// logs of servers that are gone (an earlier master's holds meta's edits).
fn prepare_master(
    c: &CoordRef,
    fs: &FsRef,
    config: &ServerConfig,
    me: &ServerRecord,
    peer_tls: &Option<cellar_client::TlsClientConfig>,
) -> Result<Opening, String> {
    let on = c.describe();
    let mut waiting = false;
    loop {
        match c.try_become_master(me).map_err(|e| format!("{on}: {e}"))? {
            Election::Active => break,
            Election::Backup { active } => {
                if !waiting {
                    let who = active
                        .map(|a| format!("{} (native {})", a.name, a.native_addr))
                        .unwrap_or_else(|| "another master".into());
                    tracing::info!(active = %who, "backup master: waiting to take over");
                    waiting = true;
                }
                if c.session() == crate::coord::SessionState::Expired {
                    return Err(format!(
                        "{on}: session expired while waiting as backup master"
                    ));
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
    tracing::info!(coordination = %on, server = %me.name, "active master");
    cellar_storage::fs::create_dir_durable(&**fs, &config.data_dir)
        .map_err(|e| format!("cannot create the root {}: {e}", config.data_dir.display()))?;
    let cluster_id = check_cluster_id(c, &**fs, &config.data_dir, true)?;
    c.publish_cluster_id(&cluster_id)
        .map_err(|e| format!("{on}: {e}"))?;
    // The shorter of the session timeout asked for and the one ZooKeeper granted.
    let session_timeout = c
        .session_timeout()
        .unwrap_or(Duration::MAX)
        .min(Duration::from_millis(
            config.cluster.zookeeper_session_timeout_ms,
        ));
    let tenure = Arc::new(crate::coord::Tenure::new(
        c.clone(),
        me.name.clone(),
        session_timeout,
    ));
    let assignment = Assignment::new(
        tenure,
        fs.clone(),
        &config.data_dir,
        config.storage_config().wal.skip_errors,
        crate::master::AssignmentTimes {
            balancer_period: Duration::from_millis(config.cluster.balancer_period_ms),
            open_region_timeout: Duration::from_millis(config.cluster.open_region_timeout_ms),
        },
        peer_tls.clone(),
    )?;
    let split = assignment
        .split_dead_logs()
        .map_err(|e| format!("cannot split the logs of dead servers: {e}"))?;
    if split > 0 {
        tracing::info!(logs = split, "split the logs of servers that are gone");
    }
    Ok(Opening {
        role: Role::Master(assignment),
        startcode: me.name.start_code,
        wal_dir: crate::master::wal_dir(&config.data_dir, &me.name),
    })
}

/// A region server's preparation: check the root belongs to this cluster, then register,
/// before its WAL directory exists (the master relies on that order).
fn prepare_region_server(
    c: &CoordRef,
    fs: &FsRef,
    config: &ServerConfig,
    me: &ServerRecord,
) -> Result<Opening, String> {
    // The master makes the cluster id; a region server started with it waits for it.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if !check_cluster_id(c, &**fs, &config.data_dir, false)?.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "no cluster id in {} nor in {} after 30 s: start `cellar master` with the same \
                 --zk and --root first",
                c.describe(),
                config.data_dir.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    c.register_server(me)
        .map_err(|e| format!("{}: {e}", c.describe()))?;
    Ok(Opening {
        role: Role::RegionServer,
        startcode: me.name.start_code,
        wal_dir: crate::master::wal_dir(&config.data_dir, &me.name),
    })
}

/// The root's cluster id, which must be ZooKeeper's when both have one: a root that belongs to
/// another cluster is refused. A master makes the root's id if there is none.
fn check_cluster_id(
    c: &CoordRef,
    fs: &dyn FileSystem,
    data_dir: &Path,
    create: bool,
) -> Result<String, String> {
    let path = data_dir.join("cluster_id");
    let exists = fs
        .exists(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let published = c
        .cluster_id()
        .map_err(|e| format!("{}: {e}", c.describe()))?;
    let root_id = if exists || create {
        Some(cluster_id(fs, data_dir)?)
    } else {
        None
    };
    match (&root_id, &published) {
        (Some(r), Some(z)) if r != z => Err(format!(
            "the root {} belongs to cluster {r}, but {} is cluster {z}: give this process the \
             root and ZooKeeper of one cluster (or another cluster.znode_parent); to start \
             afresh, remove the root's cluster_id and data, or ZooKeeper's data directory \
             (scripts/cluster.sh up --fresh does both)",
            data_dir.display(),
            c.describe()
        )),
        _ => Ok(root_id.or(published).unwrap_or_default()),
    }
}

/// The coordination `config` asks for: ZooKeeper when `cluster.zookeeper` is set.
fn connect_coordination(config: &ServerConfig) -> Result<CoordRef, String> {
    let c = &config.cluster;
    if c.zookeeper.is_empty() {
        return Ok(Arc::new(LocalCoordination::new()));
    }
    let mut options = ZkOptions::new(&c.zookeeper);
    options.parent = c.znode_parent.clone();
    options.session_timeout = Duration::from_millis(c.zookeeper_session_timeout_ms);
    options.connect_timeout = Duration::from_millis(c.zookeeper_connect_timeout_ms);
    let zk = ZkCoordination::connect(options).map_err(|e| format!("{e} (cluster.zookeeper)"))?;
    Ok(Arc::new(zk))
}

/// `host:port` → (host, port); the port 0 if there is none.
fn split_host_port(addr: &str) -> (String, u16) {
    match addr.rsplit_once(':') {
        Some((h, p)) => (h.to_string(), p.parse().unwrap_or(0)),
        None => (addr.to_string(), 0),
    }
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

/// The ports a node binds, for what a bind error tells the user.
#[derive(Debug, Clone, Copy)]
enum Port {
    Native,
    Http,
    Hbase,
    Thrift,
}

impl Port {
    /// The config key, the flag and, for ports that can be turned off, how.
    fn names(self) -> (&'static str, &'static str, Option<&'static str>) {
        match self {
            Port::Native => ("listen", "--listen", None),
            Port::Http => ("http_listen", "--http-listen", None),
            Port::Hbase => ("hbase_listen", "--hbase-listen", Some("--hbase-listen off")),
            Port::Thrift => (
                "thrift.listen",
                "--thrift-listen",
                Some("leave --thrift-listen out"),
            ),
        }
    }
}

/// Binds `addr` for `port`; an address in use is told with the flag and key that move the
/// port (and, where it can be, how to turn it off): the HBase port's default, 16020, is the
/// one an Apache HBase on the same machine holds.
fn bind(addr: &str, port: Port) -> Result<TcpListener, String> {
    let (key, flag, off) = port.names();
    TcpListener::bind(addr).map_err(|e| {
        let mut msg = format!("cannot listen on {addr} ({key}): {e}");
        if e.kind() == std::io::ErrorKind::AddrInUse {
            msg.push_str(&format!(
                "; another server holds that port{}: move this one with {flag} HOST:PORT \
                 (or `{key}` in the config file; port 0 picks a free one)",
                match port {
                    Port::Hbase => " (an Apache HBase region server or master listens on 16020)",
                    _ => "",
                }
            ));
            if let Some(off) = off {
                msg.push_str(&format!(", or turn it off with {off}"));
            }
        }
        msg
    })
}
