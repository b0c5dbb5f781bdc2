//! Coordination on ZooKeeper, in HBase's znode layout (`coord/znodes.rs`).
//!
//! The async client (`zookeeper-client`) runs on a one-thread runtime this object owns;
//! every trait call hands its request to that runtime and waits for the answer with a
//! deadline, so a ZooKeeper that is down or unreachable gives an error naming it, never a
//! hang. Ephemeral nodes (this server under `rs/`, the master node) live as long as the
//! session; a background task follows the session's state and logs when it is lost.

use super::znodes::{self, Paths};
use super::{CoordError, Coordination, Election, ServerRecord, SessionState};
use bytes::Bytes;
use cellar_storage::deadline_wait::{wait_on, Waited as Wait};
use parking_lot::Mutex;
use std::future::Future;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;
use zookeeper_client as zk;

/// How to reach ZooKeeper.
#[derive(Debug, Clone)]
pub struct ZkOptions {
    /// `host:port[,host:port…]`.
    pub quorum: String,
    /// HBase's `zookeeper.znode.parent`.
    pub parent: String,
    /// After this long without contact the session expires and ephemeral nodes go.
    pub session_timeout: Duration,
    /// How long connecting at startup may take before it is an error.
    pub connect_timeout: Duration,
    /// How long one call may take.
    pub op_timeout: Duration,
}

impl ZkOptions {
    pub fn new(quorum: &str) -> ZkOptions {
        ZkOptions {
            quorum: quorum.to_string(),
            parent: "/hbase".to_string(),
            session_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            op_timeout: Duration::from_secs(10),
        }
    }
}

/// Pause between rounds of connection attempts at startup.
const CONNECT_RETRY: Duration = Duration::from_millis(250);

const STATE_CONNECTED: u8 = 0;
const STATE_DISCONNECTED: u8 = 1;
const STATE_EXPIRED: u8 = 2;
const STATE_CLOSED: u8 = 3;

/// What this process has announced, withdrawn at close.
#[derive(Default)]
struct Announced {
    server: Option<String>,
    master: bool,
    backup: Option<String>,
}

/// Coordination through a ZooKeeper ensemble.
pub struct ZkCoordination {
    options: ZkOptions,
    paths: Paths,
    writer: Bytes,
    client: Mutex<Option<zk::Client>>,
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    state: Arc<AtomicU8>,
    announced: Mutex<Announced>,
}

impl ZkCoordination {
    /// Connects and makes sure the parent node and its `rs` and `backup-masters` children
    /// exist. Fails within `connect_timeout` when no server of the quorum answers.
    pub fn connect(options: ZkOptions) -> Result<ZkCoordination, CoordError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("cellar-zk")
            .enable_all()
            .build()
            .map_err(|e| {
                CoordError::Unreachable(format!("cannot start the ZooKeeper client: {e}"))
            })?;
        let quorum = options.quorum.clone();
        let connecting = {
            let quorum = quorum.clone();
            let (session, connection) = (options.session_timeout, options.connect_timeout);
            // Each round tries every host once; a refused connection is retried until the
            // deadline (an ensemble that is still starting refuses for a moment).
            async move {
                let deadline = tokio::time::Instant::now() + connection;
                loop {
                    let attempt = zk::Client::connector()
                        .with_session_timeout(session)
                        .with_connection_timeout(connection)
                        .with_fail_eagerly()
                        .connect(&quorum)
                        .await;
                    match attempt {
                        Ok(client) => return Ok(client),
                        Err(e) if tokio::time::Instant::now() + CONNECT_RETRY >= deadline => {
                            return Err(e)
                        }
                        Err(_) => tokio::time::sleep(CONNECT_RETRY).await,
                    }
                }
            }
        };
        let client = wait_on(runtime.handle(), options.connect_timeout, connecting)
            .map_err(|e| match e {
                Wait::TimedOut => format!(
                    "cannot reach ZooKeeper at {quorum}: no answer within {} ms",
                    options.connect_timeout.as_millis()
                ),
                Wait::Failed(e) => format!("cannot reach ZooKeeper at {quorum}: {e}"),
            })
            .map_err(CoordError::Unreachable)?;
        let state = Arc::new(AtomicU8::new(STATE_CONNECTED));
        runtime.spawn(follow_session(
            client.state_watcher(),
            Arc::clone(&state),
            quorum,
        ));
        let paths = Paths::new(&options.parent);
        let coord = ZkCoordination {
            paths,
            writer: znodes::writer_id(),
            client: Mutex::new(Some(client)),
            runtime: Mutex::new(Some(runtime)),
            state,
            announced: Mutex::new(Announced::default()),
            options,
        };
        for dir in [
            coord.paths.parent.clone(),
            coord.paths.region_servers(),
            coord.paths.backup_masters(),
        ] {
            coord.call(format!("creating {dir}"), move |c| async move {
                c.mkdir(&dir, &persistent()).await
            })?;
        }
        Ok(coord)
    }

    /// Runs one request on the client's runtime and waits for it (op_timeout).
    fn call<T, F, Fut>(&self, what: String, f: F) -> Result<T, CoordError>
    where
        T: Send + 'static,
        F: FnOnce(zk::Client) -> Fut,
        Fut: Future<Output = Result<T, zk::Error>> + Send + 'static,
    {
        let client = self
            .client
            .lock()
            .clone()
            .ok_or_else(|| CoordError::Failed {
                what: what.clone(),
                reason: "the coordination session is closed".into(),
            })?;
        let runtime = self.runtime.lock();
        let Some(runtime) = runtime.as_ref() else {
            return Err(CoordError::Failed {
                what,
                reason: "the coordination session is closed".into(),
            });
        };
        match wait_on(runtime.handle(), self.options.op_timeout, f(client)) {
            Ok(v) => Ok(v),
            Err(Wait::TimedOut) => Err(CoordError::Timeout {
                what,
                millis: u64::try_from(self.options.op_timeout.as_millis()).unwrap_or(u64::MAX),
            }),
            Err(Wait::Failed(zk::Error::SessionExpired)) => {
                Err(CoordError::SessionExpired { what })
            }
            Err(Wait::Failed(e)) => Err(CoordError::Failed {
                what,
                reason: e.to_string(),
            }),
        }
    }

    /// A node's value, or None if there is no such node.
    fn get(&self, path: &str) -> Result<Option<Vec<u8>>, CoordError> {
        let p = path.to_string();
        self.call(format!("reading {path}"), move |c| async move {
            match c.get_data(&p).await {
                Ok((data, _)) => Ok(Some(data)),
                Err(zk::Error::NoNode) => Ok(None),
                Err(e) => Err(e),
            }
        })
    }

    /// Sets a persistent node's value, creating the node if needed.
    fn put(&self, path: &str, data: Vec<u8>) -> Result<(), CoordError> {
        let p = path.to_string();
        self.call(format!("writing {path}"), move |c| async move {
            match c.set_data(&p, &data, None).await {
                Ok(_) => Ok(()),
                Err(zk::Error::NoNode) => match c.create(&p, &data, &persistent()).await {
                    Ok(_) => Ok(()),
                    // Created between the two calls: set it again.
                    Err(zk::Error::NodeExists) => c.set_data(&p, &data, None).await.map(|_| ()),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            }
        })
    }

    /// Creates an ephemeral node; false if it already exists.
    fn create_ephemeral(&self, path: &str, data: Vec<u8>) -> Result<bool, CoordError> {
        let p = path.to_string();
        self.call(format!("creating {path}"), move |c| async move {
            let options = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
            match c.create(&p, &data, &options).await {
                Ok(_) => Ok(true),
                Err(zk::Error::NodeExists) => Ok(false),
                Err(e) => Err(e),
            }
        })
    }

    fn delete(&self, path: &str) -> Result<(), CoordError> {
        let p = path.to_string();
        self.call(format!("deleting {path}"), move |c| async move {
            match c.delete(&p, None).await {
                Ok(()) | Err(zk::Error::NoNode) => Ok(()),
                Err(e) => Err(e),
            }
        })
    }

    fn children(&self, path: &str) -> Result<Vec<String>, CoordError> {
        let p = path.to_string();
        self.call(format!("listing {path}"), move |c| async move {
            match c.list_children(&p).await {
                Ok(names) => Ok(names),
                Err(zk::Error::NoNode) => Ok(Vec::new()),
                Err(e) => Err(e),
            }
        })
    }

    /// The children of `dir` decoded with `decode`; nodes gone since the listing are
    /// skipped, undecodable ones are errors.
    fn records(
        &self,
        dir: &str,
        decode: impl Fn(&str, &[u8]) -> Result<ServerRecord, String>,
    ) -> Result<Vec<ServerRecord>, CoordError> {
        let mut out = Vec::new();
        let mut names = self.children(dir)?;
        names.sort();
        for name in names {
            let path = format!("{dir}/{name}");
            if let Some(data) = self.get(&path)? {
                out.push(
                    decode(&name, &data).map_err(|reason| CoordError::Corrupt { path, reason })?,
                );
            }
        }
        Ok(out)
    }
}

impl Coordination for ZkCoordination {
    fn describe(&self) -> String {
        format!("zookeeper {}{}", self.options.quorum, self.paths.parent)
    }

    fn cluster_id(&self) -> Result<Option<String>, CoordError> {
        let path = self.paths.cluster_id();
        match self.get(&path)? {
            None => Ok(None),
            Some(data) => znodes::decode_cluster_id(&data)
                .map(Some)
                .map_err(|reason| CoordError::Corrupt { path, reason }),
        }
    }

    fn publish_cluster_id(&self, id: &str) -> Result<(), CoordError> {
        self.put(
            &self.paths.cluster_id(),
            znodes::encode_cluster_id(&self.writer, id),
        )
    }

    fn register_server(&self, me: &ServerRecord) -> Result<(), CoordError> {
        let path = self.paths.region_server(&me.name);
        if !self.create_ephemeral(&path, znodes::encode_region_server(&self.writer, me))? {
            return Err(CoordError::Conflict(format!(
                "a region server named {} is already registered in ZooKeeper ({path})",
                me.name
            )));
        }
        self.announced.lock().server = Some(path);
        Ok(())
    }

    fn live_servers(&self) -> Result<Vec<ServerRecord>, CoordError> {
        self.records(&self.paths.region_servers(), znodes::decode_region_server)
    }

    fn try_become_master(&self, me: &ServerRecord) -> Result<Election, CoordError> {
        let path = self.paths.master();
        if self.create_ephemeral(&path, znodes::encode_master(&self.writer, me))? {
            let backup = self.announced.lock().backup.take();
            if let Some(b) = backup {
                self.delete(&b)?;
            }
            self.announced.lock().master = true;
            return Ok(Election::Active);
        }
        let active = self.active_master()?;
        if active.as_ref().is_some_and(|a| a.name == me.name) {
            self.announced.lock().master = true;
            return Ok(Election::Active);
        }
        // HBase's rule for a master restarted at its own address: the node names this
        // server's host and port with another start code, so it is the run before this one
        // (which held the port this run has bound since), dead, its session not yet expired.
        // Its node is deleted and the election run again, rather than waiting out the session.
        if let Some(previous) = active.as_ref().filter(|a| {
            a.name.host == me.name.host
                && a.name.port == me.name.port
                && a.name.start_code != me.name.start_code
        }) {
            tracing::warn!(previous = %previous.name, server = %me.name,
                "the active master's node names this server's own address: left by a run \
                 that ended without closing its session (a crash); deleting it");
            self.delete(&path)?;
            if self.create_ephemeral(&path, znodes::encode_master(&self.writer, me))? {
                self.announced.lock().master = true;
                return Ok(Election::Active);
            }
        }
        let backup = self.paths.backup_master(&me.name);
        self.create_ephemeral(&backup, znodes::encode_master(&self.writer, me))?;
        self.announced.lock().backup = Some(backup);
        Ok(Election::Backup { active })
    }

    fn active_master(&self) -> Result<Option<ServerRecord>, CoordError> {
        let path = self.paths.master();
        match self.get(&path)? {
            None => Ok(None),
            Some(data) => znodes::decode_master(&data)
                .map(Some)
                .map_err(|reason| CoordError::Corrupt { path, reason }),
        }
    }

    fn backup_masters(&self) -> Result<Vec<ServerRecord>, CoordError> {
        self.records(&self.paths.backup_masters(), |_, data| {
            znodes::decode_master(data)
        })
    }

    fn publish_meta_location(&self, server: &ServerRecord) -> Result<(), CoordError> {
        self.put(
            &self.paths.meta_server(),
            znodes::encode_meta_server(&self.writer, server),
        )
    }

    fn meta_location(&self) -> Result<Option<ServerRecord>, CoordError> {
        let path = self.paths.meta_server();
        match self.get(&path)? {
            None => Ok(None),
            Some(data) => znodes::decode_meta_server(&data)
                .map(Some)
                .map_err(|reason| CoordError::Corrupt { path, reason }),
        }
    }

    fn publish_balancer(&self, on: bool) -> Result<(), CoordError> {
        self.put(&self.paths.balancer(), znodes::encode_balancer(on))
    }

    fn balancer(&self) -> Result<Option<bool>, CoordError> {
        let path = self.paths.balancer();
        match self.get(&path)? {
            None => Ok(None),
            Some(data) => znodes::decode_balancer(&data)
                .map(Some)
                .map_err(|reason| CoordError::Corrupt { path, reason }),
        }
    }

    fn session(&self) -> SessionState {
        match self.state.load(Ordering::Acquire) {
            STATE_CONNECTED => SessionState::Connected,
            STATE_DISCONNECTED => SessionState::Disconnected,
            STATE_EXPIRED => SessionState::Expired,
            _ => SessionState::Closed,
        }
    }

    fn session_timeout(&self) -> Option<Duration> {
        self.client.lock().as_ref().map(zk::Client::session_timeout)
    }

    fn close(&self) {
        let announced = std::mem::take(&mut *self.announced.lock());
        let mut paths: Vec<String> = announced.server.into_iter().collect();
        paths.extend(announced.backup);
        if announced.master {
            paths.push(self.paths.master());
        }
        if self.session() == SessionState::Connected {
            for path in paths {
                if let Err(e) = self.delete(&path) {
                    tracing::warn!(error = %e, "leaving ZooKeeper");
                }
            }
        }
        // Dropping the last client ends the session (the client sends CloseSession).
        drop(self.client.lock().take());
        self.state.store(STATE_CLOSED, Ordering::Release);
        if let Some(runtime) = self.runtime.lock().take() {
            runtime.shutdown_timeout(Duration::from_millis(500));
        }
    }
}

impl std::fmt::Debug for ZkCoordination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ZkCoordination({})", self.describe())
    }
}

impl Drop for ZkCoordination {
    fn drop(&mut self) {
        drop(self.client.lock().take());
        if let Some(runtime) = self.runtime.lock().take() {
            runtime.shutdown_background();
        }
    }
}

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

/// Keeps `state` in step with the session; logs when it is lost.
async fn follow_session(mut watcher: zk::StateWatcher, state: Arc<AtomicU8>, quorum: String) {
    loop {
        let now = watcher.changed().await;
        let code = match now {
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                tracing::info!(zookeeper = %quorum, "ZooKeeper session connected again");
                STATE_CONNECTED
            }
            zk::SessionState::Disconnected => {
                tracing::warn!(zookeeper = %quorum, "ZooKeeper connection lost; the session may still recover");
                STATE_DISCONNECTED
            }
            zk::SessionState::Expired | zk::SessionState::AuthFailed => {
                tracing::error!(zookeeper = %quorum, state = %now,
                    "ZooKeeper session lost: this server's ephemeral nodes are gone");
                STATE_EXPIRED
            }
            zk::SessionState::Closed => STATE_CLOSED,
        };
        // A close by this process is final whatever the watcher reports after it.
        let _ = state.fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
            (old != STATE_CLOSED).then_some(code)
        });
        if now.is_terminated() {
            return;
        }
    }
}
