//! The master: the catalog's keeper ([`Master`]: tables, namespaces, grants, DDL, splits,
//! the balancer), over the region server whose meta it writes. Standalone runs one beside its
//! region server; a cluster's master serves meta alone; a cluster's region server has none.
//!
//! The master role of a cluster (`docs/design/0004-cluster.md` §5–6): regions are assigned
//! to live region servers over the native protocol (OPEN_REGION / CLOSE_REGION /
//! FLUSH_REGION), and a dead server's regions are recovered: its WAL directory is renamed
//! (fencing), split by region into `recovered.edits` (HDFS: every segment's lease is
//! recovered first), removed, and its regions opened elsewhere, where the edits are replayed
//! and flushed before the region serves.
//!
//! One loop does all of it ([`Master::assignment_tick`], every `tick`): it lists the
//! WAL directories first and the live servers second, so a directory is only ever taken for
//! dead when its server was registered before the directory existed and is gone now (a
//! region server registers in ZooKeeper before it creates its WAL directory).

mod balance;
mod crash;
mod merge_procedure;
mod snapshot_procedure;
mod split_procedure;
mod split_remote;

pub use merge_procedure::MergeStep;
pub use split_procedure::SplitStep;

pub use balance::plan as balance_plan;

use crate::coord::{CoordRef, ServerName, ServerRecord, Tenure};
use crate::error::ServerError;
use crate::meta::META_TABLE;
use crate::region_server::{ClusterMaster, RegionServer, RegionWork, Role, Workers};
use crate::router::{HostedRegion, RegionState, TableState};
use cellar_client::{Admin, Client, ClientConfig};
use cellar_model::TableSchema;
use cellar_storage::deadline_wait::{wait_on, Waited};
use cellar_storage::fs::FsRef;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Adds `gone` to `dead` (once each), then drops every dead server that has come back: a live
/// server on its host and port (HBase's), or on its native address, restarted there.
fn note_dead(
    dead: &mut Vec<ServerRecord>,
    gone: impl IntoIterator<Item = ServerRecord>,
    live: &[Arc<ServerRecord>],
) {
    for g in gone {
        if !dead.iter().any(|d| d.name == g.name) {
            dead.push(g);
        }
    }
    dead.retain(|d| {
        !live.iter().any(|s| {
            (s.name.host == d.name.host && s.name.port == d.name.port)
                || (!d.native_addr.is_empty() && s.native_addr == d.native_addr)
        })
    });
}

/// Suffix of a dead server's WAL directory while it is being split.
pub const SPLITTING: &str = "-splitting";

/// The master of a data directory's catalog: DDL, namespaces, grants, splits, and in a
/// cluster the assignment of regions to region servers ([`Assignment`]), the balancer and
/// crash handling. It works through the region server it stands over (`rs`), which serves
/// meta and, standalone, every region; the region server never calls back into it.
pub struct Master {
    pub(crate) rs: Arc<RegionServer>,
    /// A cluster master's assignment; `None` standalone.
    assignment: Option<Arc<Assignment>>,
    workers: Workers<Master>,
    /// When the archive was last cleaned (`snapshot_procedure.rs`).
    archive_cleaned: parking_lot::Mutex<Option<std::time::Instant>>,
}

impl Master {
    /// The master over `rs`, with its background threads started: standalone, the split
    /// checker; a cluster's master (`rs` opened as `Role::Master(assignment)`), the
    /// assignment loop.
    pub fn start(rs: Arc<RegionServer>) -> Arc<Master> {
        let assignment = match &rs.role {
            Role::Master(m) => {
                let any: Arc<dyn std::any::Any + Send + Sync> = Arc::clone(m) as _;
                any.downcast::<Assignment>().ok()
            }
            _ => None,
        };
        let master = Arc::new(Master {
            rs,
            assignment,
            workers: Workers::new(),
            archive_cleaned: parking_lot::Mutex::new(None),
        });
        let weak = Arc::downgrade(&master);
        match &master.assignment {
            Some(a) => master
                .workers
                .spawn("cellar-assign", a.tick_interval(), weak, |m| {
                    m.assignment_tick()
                }),
            None => {
                let every = Duration::from_millis(master.rs.config.split.check_interval_ms);
                master
                    .workers
                    .spawn("cellar-split", every, weak, |m| m.split_tick());
            }
        }
        master
    }

    /// The region server this master stands over.
    pub fn region_server(&self) -> &Arc<RegionServer> {
        &self.rs
    }

    /// The assignment of a cluster's master; `None` standalone.
    pub fn assignment(&self) -> Option<&Arc<Assignment>> {
        self.assignment.as_ref()
    }

    /// Stops the master's threads (the region server goes on until its own shutdown).
    pub fn stop(&self) {
        self.workers.stop();
    }
}

impl Drop for Master {
    fn drop(&mut self) {
        self.workers.stop();
    }
}

/// `<root>/wal`: one directory per server, named like the server (`host,port,startcode`).
pub fn wal_root(data_dir: &Path) -> PathBuf {
    data_dir.join("wal")
}

/// The WAL directory of `server`.
pub fn wal_dir(data_dir: &Path, server: &ServerName) -> PathBuf {
    wal_root(data_dir).join(server.to_string())
}

/// The periods and waits of a master's assignment (`[cluster]` configuration).
#[derive(Debug, Clone, Copy)]
pub struct AssignmentTimes {
    /// `cluster.balancer_period_ms`.
    pub balancer_period: Duration,
    /// `cluster.open_region_timeout_ms`.
    pub open_region_timeout: Duration,
}

/// The master's view of the region servers, and its calls to them.
pub struct Assignment {
    coord: CoordRef,
    fs: FsRef,
    data_dir: PathBuf,
    /// This master (its WAL directory is its own).
    me: ServerName,
    tick: Duration,
    call_timeout: Duration,
    /// How long an OPEN_REGION may take (`cluster.open_region_timeout_ms`).
    open_timeout: Duration,
    skip_wal_errors: bool,
    /// Live region servers as of the last look (the tick's decisions use this list).
    live: Mutex<Vec<Arc<ServerRecord>>>,
    /// Region servers this master saw live, or whose log it split, that are gone, oldest
    /// first (HBase's dead servers): one leaves the list when a server registers again on
    /// its native address.
    dead: Mutex<Vec<ServerRecord>>,
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    client: Mutex<Option<Client>>,
    /// Round-robin position among equally loaded servers.
    turn: AtomicUsize,
    /// Split parents whose daughters have no references left, since when.
    clean_since: Mutex<HashMap<u64, std::time::Instant>>,
    /// Whether every live region server has been checked for regions meta does not know.
    reconciled: std::sync::atomic::AtomicBool,
    /// Whether the balancer runs (HBase's balance switch; on by default).
    balancer_on: std::sync::atomic::AtomicBool,
    /// When the balancer last ran.
    balanced_at: Mutex<std::time::Instant>,
    balancer_period: Duration,
    /// TLS for calls to region servers, when the cluster has it.
    peer_tls: Option<cellar_client::TlsClientConfig>,
    /// Whether this is still the active master: checked before every call to a region
    /// server, meta write and log split.
    tenure: Arc<Tenure>,
}

impl Assignment {
    /// The master's assignment; `tenure` names this master and its coordination.
    pub fn new(
        tenure: Arc<Tenure>,
        fs: FsRef,
        data_dir: &Path,
        skip_wal_errors: bool,
        times: AssignmentTimes,
        peer_tls: Option<cellar_client::TlsClientConfig>,
    ) -> Result<Arc<Assignment>, String> {
        let coord = tenure.coord().clone();
        let me = tenure.me().clone();
        let AssignmentTimes {
            balancer_period,
            open_region_timeout: open_timeout,
        } = times;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("cellar-master-rpc")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the master's RPC runtime: {e}"))?;
        // The switch as the previous master left it (HBase keeps it in ZooKeeper too).
        let balancer_on = coord
            .balancer()
            .map_err(|e| {
                format!(
                    "cannot read the balancer switch from {}: {e}",
                    coord.describe()
                )
            })?
            .unwrap_or(true);
        Ok(Arc::new(Assignment {
            coord,
            fs,
            data_dir: data_dir.to_path_buf(),
            me,
            tick: Duration::from_millis(250),
            call_timeout: Duration::from_secs(60),
            open_timeout,
            skip_wal_errors,
            live: Mutex::new(Vec::new()),
            dead: Mutex::new(Vec::new()),
            runtime: Mutex::new(Some(runtime)),
            client: Mutex::new(None),
            turn: AtomicUsize::new(0),
            clean_since: Mutex::new(HashMap::new()),
            reconciled: std::sync::atomic::AtomicBool::new(false),
            balancer_on: std::sync::atomic::AtomicBool::new(balancer_on),
            balanced_at: Mutex::new(std::time::Instant::now()),
            balancer_period,
            peer_tls,
            tenure,
        }))
    }

    pub fn tick_interval(&self) -> Duration {
        self.tick
    }

    /// Whether this is still the active master.
    pub fn tenure(&self) -> &Arc<Tenure> {
        &self.tenure
    }

    /// The live region servers in ZooKeeper now.
    fn fetch_live(&self) -> Result<Vec<Arc<ServerRecord>>, ServerError> {
        Ok(self
            .coord
            .live_servers()
            .map_err(|e| ServerError::Internal(format!("listing live region servers: {e}")))?
            .into_iter()
            .filter(|s| s.name != self.me)
            .map(Arc::new)
            .collect())
    }

    /// Looks at ZooKeeper again: the live region servers, kept as the list decisions use.
    /// Servers that were live at the last look and are not now join the dead servers.
    pub fn refresh_live(&self) -> Result<Vec<Arc<ServerRecord>>, ServerError> {
        let live = self.fetch_live()?;
        let before = std::mem::replace(&mut *self.live.lock(), live.clone());
        let gone = before
            .iter()
            .filter(|b| !live.iter().any(|s| s.name == b.name))
            .map(|b| ServerRecord::clone(b));
        note_dead(&mut self.dead.lock(), gone, &live);
        Ok(live)
    }

    /// A server whose log is split as dead, though this master never saw it live (it died
    /// before this master started): a dead server known by its name only.
    fn note_dead_name(&self, name: ServerName) {
        let live = self.live.lock().clone();
        let record = ServerRecord {
            name,
            native_addr: String::new(),
            http_addr: String::new(),
        };
        note_dead(&mut self.dead.lock(), [record], &live);
    }

    /// The region servers this master saw that are gone, oldest first, with the addresses
    /// they had.
    pub fn dead_servers(&self) -> Vec<ServerRecord> {
        self.dead.lock().clone()
    }

    /// The live server with native address `native` and start code `startcode`, if any.
    pub fn live_server(&self, native: &str, startcode: u64) -> Option<Arc<ServerRecord>> {
        if self.live.lock().is_empty() {
            let _ = self.refresh_live();
        }
        self.live
            .lock()
            .iter()
            .find(|s| s.native_addr == native && s.name.start_code == startcode)
            .cloned()
    }

    fn is_live(&self, server: &ServerRecord) -> bool {
        self.live.lock().iter().any(|s| s.name == server.name)
    }

    /// Runs one call to a region server on the master's runtime, with a deadline.
    fn call<T, F, Fut>(&self, server: &ServerRecord, f: F) -> Result<T, ServerError>
    where
        T: Send + 'static,
        F: FnOnce(Admin, String) -> Fut,
        Fut: std::future::Future<Output = cellar_client::Result<T>> + Send + 'static,
    {
        let addr = server.native_addr.clone();
        match self.call_raw(server, f) {
            Ok(r) => r.map_err(|e| ServerError::Internal(format!("region server {addr}: {e}"))),
            Err(e) => Err(e),
        }
    }

    /// [`Assignment::call`], telling an answer (`Ok`: the server's own result, a refusal
    /// included) from no answer (`Err`: not connected, abandoned at the deadline or when the
    /// server left ZooKeeper; the call may or may not have been carried out).
    fn call_raw<T, F, Fut>(
        &self,
        server: &ServerRecord,
        f: F,
    ) -> Result<cellar_client::Result<T>, ServerError>
    where
        T: Send + 'static,
        F: FnOnce(Admin, String) -> Fut,
        Fut: std::future::Future<Output = cellar_client::Result<T>> + Send + 'static,
    {
        let handle = match self.runtime.lock().as_ref() {
            Some(rt) => rt.handle().clone(),
            None => return Err(ServerError::Stopping),
        };
        // Fencing: a master that is no longer the active one asks nothing of region servers.
        self.tenure.check()?;
        let addr = server.native_addr.clone();
        let client = self.client.lock().clone();
        let client = match client {
            Some(c) => c,
            None => {
                let config = ClientConfig {
                    rpc_timeout: self.call_timeout,
                    tls: self.peer_tls.clone(),
                    // Without certificates, servers say who they are: the user running them,
                    // a superuser on each (`security::authz::process_user`).
                    user: crate::security::authz::process_user(),
                    ..ClientConfig::default()
                };
                let target = addr.clone();
                let c = wait_on(&handle, Duration::from_secs(10), async move {
                    Client::connect_with(&target, config).await
                })
                .map_err(|e| waited(&addr, e))?;
                *self.client.lock() = Some(c.clone());
                c
            }
        };
        // Waited on in slices: a server that dies (or is paused past its session) during the
        // call leaves ZooKeeper, and the call is abandoned then rather than at the deadline,
        // so one hung server does not hold up assignment for everyone.
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let fut = f(client.admin(), addr.clone());
        let task = handle.spawn(async move {
            let _ = tx.send(fut.await);
        });
        let deadline = std::time::Instant::now() + self.call_timeout;
        loop {
            match rx.recv_timeout(Duration::from_millis(500)) {
                Ok(r) => return Ok(r),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(ServerError::Internal(format!(
                        "region server {addr}: the call was dropped"
                    )))
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            }
            let gone = match self.coord.live_servers() {
                Ok(live) => !live.iter().any(|s| s.name == server.name),
                Err(_) => false,
            };
            if gone || std::time::Instant::now() >= deadline {
                task.abort();
                let why = if gone {
                    "left the cluster during the call"
                } else {
                    "did not answer in time"
                };
                return Err(ServerError::Internal(format!("region server {addr} {why}")));
            }
        }
    }

    /// `server`'s STATUS (its regions and their numbers), waiting at most `within`.
    pub fn server_status(
        &self,
        server: &ServerRecord,
        within: Duration,
    ) -> Result<cellar_client::Status, ServerError> {
        self.call(server, move |admin, addr| async move {
            tokio::time::timeout(within, admin.server_status(&addr))
                .await
                .unwrap_or(Err(cellar_client::Error::Timeout(within)))
        })
    }

    /// Opens `hosted` on `prefer` (if live) or the live server with the fewest regions,
    /// trying the others if that one refuses. Returns whether it is open somewhere; if not,
    /// it is left OFFLINE for the next tick.
    ///
    /// A region is open on at most one server: before each OPEN_REGION the target and the
    /// open's number go to meta (`info:openseq`), and the target refuses an open addressed to
    /// another start code or numbered at or below a fence (`region_server/control.rs`). An
    /// open that goes unanswered (timeout, transport error) may still happen on its target:
    /// the region then opens nowhere else until that server answers a CLOSE_REGION fencing
    /// the open off, or is gone from ZooKeeper with its log split. Until then it stays
    /// OFFLINE on that server and the next tick asks again.
    pub fn assign(
        &self,
        rs: &RegionServer,
        hosted: &HostedRegion,
        schema: &TableSchema,
        prefer: Option<Arc<ServerRecord>>,
    ) -> bool {
        let mut prefer = prefer;
        // Servers that just failed an open: tried last.
        let mut avoid: Vec<ServerName> = Vec::new();
        if hosted.open_unanswered() {
            match self.settle_unanswered(hosted) {
                Some(Some(fenced)) => {
                    avoid.push(fenced.name.clone());
                    prefer = None;
                }
                Some(None) => {}
                None => return false,
            }
        }
        // A region whose server is alive goes back there and nowhere else: if that server
        // does not answer, it may still hold the region, and its log is not split until it
        // is gone (opening the region elsewhere first would miss its unflushed edits). "Alive"
        // is the list the caller decided on (the tick split the logs of everyone not in it).
        let keep = prefer.filter(|p| self.is_live(p));
        // Where else: ZooKeeper's list now, so a server that registered a moment ago gets
        // regions too. It is not stored: the tick's decisions stay on the tick's list.
        let mut candidates = match &keep {
            Some(_) => Vec::new(),
            None => self
                .fetch_live()
                .unwrap_or_else(|_| self.live.lock().clone()),
        };
        let mut load: HashMap<ServerName, usize> = HashMap::new();
        for r in rs.router.all_regions() {
            if let Some(s) = r.server() {
                *load.entry(s.name.clone()).or_default() += 1;
            }
        }
        // Fewest regions first; among equals, round robin (regions a create is opening are
        // not in the router yet, so they do not count).
        candidates.sort_by(|a, b| a.name.cmp(&b.name));
        let n = candidates.len().max(1);
        let turn = self.turn.fetch_add(1, Ordering::Relaxed) % n;
        candidates.rotate_left(turn);
        candidates.sort_by_key(|s| {
            (
                avoid.contains(&s.name),
                load.get(&s.name).copied().unwrap_or(0),
            )
        });
        if let Some(p) = &keep {
            candidates = vec![Arc::clone(p)];
        } else if !self.released(hosted) {
            // Its last server may still hold it, or left a log not yet split.
            return false;
        }
        let location = hosted.location("");
        let client_location = cellar_client::RegionLocation {
            table: location.table.clone(),
            region_id: location.info.id,
            start_key: location.info.start_key.clone(),
            end_key: location.info.end_key.clone(),
            server: String::new(),
            name: location.name.clone(),
        };
        let splits = rs.router.table(&hosted.table).map_or(0, |t| t.splits);
        // A table being created is not in the router until its commit; a master that takes
        // over before that does not know its regions and closes them wherever they are open
        // (`close_unknown_regions`, fencing off every open of them), so their opens need no
        // meta row first (a create of hundreds of regions would pay one meta write each).
        let committed = rs.router.table(&hosted.table).is_some();
        for server in candidates {
            // Where the open goes and its number are in meta before it is sent: a master that
            // takes over sends the region back there first.
            let seq = hosted.next_open_seq();
            hosted.assign(Some(Arc::clone(&server)), RegionState::Offline);
            let recorded = if committed {
                rs.meta()
                    .and_then(|m| m.put_region(&rs.record_of(hosted, RegionState::Offline)))
            } else {
                Ok(())
            };
            if let Err(e) = recorded {
                tracing::warn!(region = %location.name, error = %e, "cannot record an assignment in meta; the region waits");
                hosted.assign(keep, RegionState::Offline);
                return false;
            }
            let loc = client_location.clone();
            let schema = schema.clone();
            let within = self.open_timeout;
            let startcode = server.name.start_code;
            let me = self.me.to_string();
            let opened = self.call_raw(&server, move |admin, addr| async move {
                let open = admin.open_region(&addr, &loc, &schema, splits, startcode, seq, &me);
                tokio::time::timeout(within, open)
                    .await
                    .unwrap_or(Err(cellar_client::Error::Timeout(within)))
            });
            let unanswered = match opened {
                Ok(Ok(())) => {
                    tracing::info!(region = %location.name, server = %server.name, "region assigned");
                    hosted.set_open_unanswered(false);
                    hosted.assign(Some(server), RegionState::Open);
                    return true;
                }
                // Refused: not open there.
                Ok(Err(e)) if e.code().is_some() => {
                    tracing::warn!(region = %location.name, server = %server.name, error = %e, "the region server refused to open the region");
                    None
                }
                Ok(Err(e)) => Some(e.to_string()),
                Err(e) => Some(e.to_string()),
            };
            if let Some(e) = unanswered {
                // The open may still happen there: settled before the region goes anywhere else.
                tracing::warn!(region = %location.name, server = %server.name, error = %e, "an open went unanswered; the region opens elsewhere only once that server has closed it or is dead");
                hosted.set_open_unanswered(true);
                match self.settle_unanswered(hosted) {
                    // Fenced off there: the next candidate.
                    Some(Some(_)) => {}
                    // Still unsettled, or its server died: its log is split first.
                    _ => return false,
                }
            }
        }
        if hosted.state() != RegionState::Offline {
            tracing::warn!(region = %location.name, "no live region server could open the region; it waits for one");
        }
        hosted.assign(keep, RegionState::Offline);
        false
    }

    /// Settles an open of `hosted` that went unanswered on `hosted.server()`: that server
    /// answers a CLOSE_REGION fencing off every open numbered up to the last one (it holds
    /// the region no more, flushed if it had opened it, and refuses the open if it comes
    /// later): `Some(Some(server))`; or it is gone from ZooKeeper (its log is split before
    /// the region opens elsewhere: `released`): `Some(None)`. Else `None`: the region stays
    /// OFFLINE on that server, and the next tick asks again.
    fn settle_unanswered(&self, hosted: &HostedRegion) -> Option<Option<Arc<ServerRecord>>> {
        let Some(server) = hosted.server() else {
            hosted.set_open_unanswered(false);
            return Some(None);
        };
        match self.fetch_live() {
            Ok(live) if !live.iter().any(|s| s.name == server.name) => {
                hosted.set_open_unanswered(false);
                return Some(None);
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(region = %hosted.name(), error = %e, "cannot tell whether a region server is alive; its unanswered open waits");
                return None;
            }
        }
        let (table, id, fence) = (hosted.table.clone(), hosted.info.id, hosted.open_seq());
        let within = self.open_timeout;
        let closed = self.call(&server, move |admin, addr| async move {
            tokio::time::timeout(within, admin.close_region(&addr, &table, id, fence))
                .await
                .unwrap_or(Err(cellar_client::Error::Timeout(within)))
        });
        match closed {
            Ok(()) => {
                tracing::info!(region = %hosted.name(), server = %server.name, fence, "the server of an unanswered open closed the region and fenced the open off");
                hosted.set_open_unanswered(false);
                hosted.assign(None, RegionState::Offline);
                Some(Some(server))
            }
            Err(e) => {
                tracing::warn!(region = %hosted.name(), server = %server.name, error = %e, "the server of an unanswered open did not confirm the region closed; it stays unassigned");
                hosted.assign(Some(server), RegionState::Offline);
                None
            }
        }
    }

    /// Whether `hosted` may open on a server other than the one it was on: that server is
    /// gone from ZooKeeper and its log is split (split now if it was not). The rule that keeps
    /// a region's unflushed edits: never open it elsewhere before its old server's log is
    /// split into its recovered edits.
    fn released(&self, hosted: &HostedRegion) -> bool {
        let Some(prev) = hosted.server() else {
            return true;
        };
        match self.fetch_live() {
            Ok(live) if live.iter().any(|s| s.name == prev.name) => return false,
            Ok(_) => {}
            Err(_) => return false,
        }
        let root = wal_root(&self.data_dir);
        let unsplit = |fs: &dyn cellar_storage::fs::FileSystem| -> bool {
            let dir = root.join(prev.name.to_string());
            let splitting = root.join(format!("{}{SPLITTING}", prev.name));
            fs.exists(&dir).unwrap_or(true) || fs.exists(&splitting).unwrap_or(true)
        };
        if !unsplit(&*self.fs) {
            return true;
        }
        if let Err(e) = self.split_dead_logs() {
            tracing::warn!(server = %prev.name, error = %e, "splitting a dead server's log before reopening its region");
            return false;
        }
        !unsplit(&*self.fs)
    }

    /// Closes `hosted` on its server (a dead server's regions are closed already).
    pub fn unassign(&self, hosted: &HostedRegion, state: RegionState) -> Result<(), ServerError> {
        if let Some(server) = hosted.server() {
            let (table, id) = (hosted.table.clone(), hosted.info.id);
            let fence = hosted.open_seq();
            let closed = self.call(&server, move |admin, addr| async move {
                admin.close_region(&addr, &table, id, fence).await
            });
            if let Err(e) = closed {
                let alive = self
                    .fetch_live()
                    .map(|l| l.iter().any(|s| s.name == server.name))
                    .unwrap_or(true);
                if alive {
                    return Err(e);
                }
                // The server died: the region's unflushed edits are in its log, which the next
                // tick splits before it reopens the region elsewhere. Reopening it now (a move)
                // would lose them.
                let name = hosted.name();
                hosted.assign(Some(server), RegionState::Offline);
                return Err(ServerError::Internal(format!(
                    "{name}: its region server died ({e}); the region reopens elsewhere once that \
                     server's log is recovered"
                )));
            }
        }
        hosted.assign(None, state);
        Ok(())
    }

    /// Flushes or compacts `hosted` on its server.
    pub fn region_work(&self, hosted: &HostedRegion, work: RegionWork) -> Result<(), ServerError> {
        let Some(server) = hosted.server() else {
            return Ok(());
        };
        let (table, id) = (hosted.table.clone(), hosted.info.id);
        let (compact, major) = match work {
            RegionWork::Flush => (false, false),
            RegionWork::Compact { major } => (true, major),
        };
        self.call(&server, move |admin, addr| async move {
            admin.flush_region(&addr, &table, id, compact, major).await
        })
    }

    /// Readies `hosted` for a split on its server; its middle row, if it has one.
    pub fn prepare_split(
        &self,
        hosted: &HostedRegion,
    ) -> Result<Option<bytes::Bytes>, ServerError> {
        let server = self.serving(hosted)?;
        let (table, id) = (hosted.table.clone(), hosted.info.id);
        self.call(&server, move |admin, addr| async move {
            admin.prepare_split(&addr, &table, id).await
        })
    }

    /// The live server `hosted` is open on; NOT_SERVING_REGION if none.
    fn serving(&self, hosted: &HostedRegion) -> Result<Arc<ServerRecord>, ServerError> {
        hosted
            .server()
            .filter(|s| hosted.state() == RegionState::Open && self.is_live(s))
            .ok_or_else(|| hosted.not_serving("it is not open on a live region server"))
    }

    /// Stops the RPC runtime.
    pub fn shutdown(&self) {
        self.client.lock().take();
        if let Some(rt) = self.runtime.lock().take() {
            rt.shutdown_timeout(Duration::from_millis(500));
        }
    }
}

/// What the region server's code asks of its master (`region_server::ClusterMaster`).
impl ClusterMaster for Assignment {
    fn assign(&self, server: &RegionServer, hosted: &HostedRegion, schema: &TableSchema) {
        Assignment::assign(self, server, hosted, schema, None);
    }

    fn unassign(&self, hosted: &HostedRegion, state: RegionState) -> Result<(), ServerError> {
        Assignment::unassign(self, hosted, state)
    }

    fn region_work(&self, hosted: &HostedRegion, work: RegionWork) -> Result<(), ServerError> {
        Assignment::region_work(self, hosted, work)
    }

    fn live_server(&self, native: &str, startcode: u64) -> Option<Arc<ServerRecord>> {
        Assignment::live_server(self, native, startcode)
    }

    fn tenure(&self) -> &Arc<Tenure> {
        Assignment::tenure(self)
    }

    fn tick_interval(&self) -> Duration {
        Assignment::tick_interval(self)
    }

    fn dead_servers(&self) -> Vec<ServerRecord> {
        Assignment::dead_servers(self)
    }
}

fn waited<E: std::fmt::Display>(addr: &str, e: Waited<E>) -> ServerError {
    match e {
        Waited::TimedOut => {
            ServerError::Internal(format!("region server {addr} did not answer in time"))
        }
        Waited::Failed(e) => ServerError::Internal(format!("region server {addr}: {e}")),
    }
}

impl Master {
    /// The master's loop: split dead servers' logs, then open every region of an enabled
    /// table that is not open on a live server.
    pub(crate) fn assignment_tick(&self) {
        let Some(a) = self.assignment.as_deref() else {
            return;
        };
        let _admin = self.rs.admin.lock();
        if self.rs.check_running().is_err() || a.tenure.check().is_err() {
            return;
        }
        if let Err(e) = a.split_dead_logs() {
            tracing::error!(error = %e, "splitting dead servers' logs; retrying");
            return;
        }
        self.cluster_janitor(a);
        if self.archive_due() {
            self.clean_archive_locked();
        }
        if !a.reconciled.load(Ordering::SeqCst) && self.close_unknown_regions(a) {
            a.reconciled.store(true, Ordering::SeqCst);
        }
        for (name, t) in self.rs.router.tables() {
            if name == META_TABLE || t.state != TableState::Enabled {
                continue;
            }
            for hosted in t.regions.values() {
                // CLOSED: unassigned by an operator; SPLITTING, MERGING: a split or merge is
                // under way.
                if matches!(
                    hosted.state(),
                    RegionState::Splitting | RegionState::Merging | RegionState::Closed
                ) {
                    continue;
                }
                let placed = hosted.server();
                let serving = hosted.state() == RegionState::Open
                    && placed.as_ref().is_some_and(|s| a.is_live(s));
                if serving {
                    continue;
                }
                if a.assign(&self.rs, hosted, &t.schema, placed) {
                    if let Ok(meta) = self.rs.meta() {
                        if let Err(e) =
                            meta.put_region(&self.rs.record_of(hosted, RegionState::Open))
                        {
                            tracing::error!(region = %hosted.name(), error = %e, "recording an assignment in meta");
                        }
                    }
                }
            }
        }
        let due = a.balanced_at.lock().elapsed() >= a.balancer_period;
        if due && a.balancer_on.load(Ordering::SeqCst) {
            *a.balanced_at.lock() = std::time::Instant::now();
            if let Err(e) = self.balance_locked(a) {
                tracing::warn!(error = %e, "balancer");
            }
        }
    }

    /// Once after taking over: closes the regions live region servers hold that meta does not
    /// know (an earlier master opened them for a create it never committed). Whether every
    /// server answered.
    fn close_unknown_regions(&self, a: &Assignment) -> bool {
        let mut all = true;
        for server in a.live.lock().clone() {
            let status = a.call(&server, |admin, addr| async move {
                admin.server_status(&addr).await
            });
            let Ok(status) = status else {
                all = false;
                continue;
            };
            for name in status.servers.iter().flat_map(|l| l.regions.iter()) {
                // table,start_key,id: the id is what follows the last comma.
                let Some((table, id)) = name.rsplit_once(',').and_then(|(rest, id)| {
                    Some((rest.split(',').next()?, id.parse::<u64>().ok()?))
                }) else {
                    continue;
                };
                if self.rs.router.region(id).is_some() {
                    continue;
                }
                let table = table.to_string();
                // Meta does not know it, and never will (region ids are not reused): every
                // open of it is fenced off, one still on its way included.
                let closed = a.call(&server, move |admin, addr| async move {
                    admin.close_region(&addr, &table, id, u64::MAX).await
                });
                match closed {
                    Ok(()) => {
                        tracing::info!(region = %name, server = %server.name, "closed a region meta does not know")
                    }
                    Err(e) => {
                        all = false;
                        tracing::warn!(region = %name, error = %e, "closing a region meta does not know");
                    }
                }
            }
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, native: &str) -> ServerRecord {
        ServerRecord {
            name: ServerName::parse(name).expect("a server name"),
            native_addr: native.to_string(),
            http_addr: String::new(),
        }
    }

    #[test]
    fn a_server_gone_is_dead_until_one_starts_again_where_it_was() {
        let a = record("h,16020,1", "h:9000");
        let b = record("h,16021,2", "h:9001");
        let mut dead = Vec::new();
        note_dead(&mut dead, [a.clone()], &[Arc::new(b.clone())]);
        // Noted twice (two looks, or a look and its log's split): listed once.
        note_dead(&mut dead, [a.clone()], &[Arc::new(b.clone())]);
        assert_eq!(dead, vec![a.clone()]);

        // A server on another host and port does not bring it back.
        note_dead(&mut dead, [], &[Arc::new(record("g,16020,3", "g:9000"))]);
        assert_eq!(dead, vec![a.clone()]);

        // It restarts on its host and port (a new start code): no longer dead.
        note_dead(&mut dead, [], &[Arc::new(record("h,16020,5", "h:9100"))]);
        assert!(dead.is_empty(), "{dead:?}");

        // Known by its name only (its log was split): back when its host and port are.
        let c = ServerRecord {
            native_addr: String::new(),
            ..record("k,16020,1", "")
        };
        note_dead(&mut dead, [c.clone()], &[]);
        assert_eq!(dead, vec![c]);
        note_dead(&mut dead, [], &[Arc::new(record("k,16020,9", "k:1"))]);
        assert!(dead.is_empty(), "{dead:?}");
    }
}
