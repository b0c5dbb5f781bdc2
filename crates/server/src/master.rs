//! The master role of a cluster (`docs/design/0004-cluster.md` §5–6): regions are assigned
//! to live region servers over the native protocol (OPEN_REGION / CLOSE_REGION /
//! FLUSH_REGION), and a dead server's regions are recovered: its WAL directory is renamed
//! (fencing), split by region into `recovered.edits` (HDFS: every segment's lease is
//! recovered first), removed, and its regions opened elsewhere, where the edits are replayed
//! and flushed before the region serves.
//!
//! One loop does all of it ([`RegionServer::assignment_tick`], every `tick`): it lists the
//! WAL directories first and the live servers second, so a directory is only ever taken for
//! dead when its server was registered before the directory existed and is gone now (a
//! region server registers in ZooKeeper before it creates its WAL directory).

mod balance;

pub use balance::plan as balance_plan;

use crate::catalog::names;
use crate::coord::{CoordRef, ServerName, ServerRecord};
use crate::meta::{META_REGION_ID, META_TABLE};
use crate::region_server::{RegionServer, RegionWork, Role, ServerError};
use crate::router::{HostedRegion, RegionState, TableState};
use cellar_client::{Admin, Client, ClientConfig};
use cellar_model::TableSchema;
use cellar_storage::bridge::{wait_on, Waited};
use cellar_storage::fs::FsRef;
use cellar_storage::region::RegionInfo;
use cellar_storage::wal::split;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Suffix of a dead server's WAL directory while it is being split.
pub const SPLITTING: &str = "-splitting";

/// `<root>/wal`: one directory per server, named like the server (`host,port,startcode`).
pub fn wal_root(data_dir: &Path) -> PathBuf {
    data_dir.join("wal")
}

/// The WAL directory of `server`.
pub fn wal_dir(data_dir: &Path, server: &ServerName) -> PathBuf {
    wal_root(data_dir).join(server.to_string())
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
    skip_wal_errors: bool,
    /// Live region servers as of the last look.
    live: Mutex<Vec<Arc<ServerRecord>>>,
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    client: Mutex<Option<Client>>,
    /// Round-robin position among equally loaded servers.
    turn: AtomicUsize,
    /// Split parents whose daughters have no references left, since when.
    clean_since: Mutex<HashMap<u64, std::time::Instant>>,
    /// Whether the balancer runs (HBase's balance switch; on by default).
    balancer_on: std::sync::atomic::AtomicBool,
    /// When the balancer last ran.
    balanced_at: Mutex<std::time::Instant>,
    balancer_period: Duration,
}

impl Assignment {
    pub fn new(
        coord: CoordRef,
        fs: FsRef,
        data_dir: &Path,
        me: ServerName,
        skip_wal_errors: bool,
        balancer_period: Duration,
    ) -> Result<Arc<Assignment>, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("cellar-master-rpc")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the master's RPC runtime: {e}"))?;
        Ok(Arc::new(Assignment {
            coord,
            fs,
            data_dir: data_dir.to_path_buf(),
            me,
            tick: Duration::from_millis(250),
            call_timeout: Duration::from_secs(60),
            skip_wal_errors,
            live: Mutex::new(Vec::new()),
            runtime: Mutex::new(Some(runtime)),
            client: Mutex::new(None),
            turn: AtomicUsize::new(0),
            clean_since: Mutex::new(HashMap::new()),
            balancer_on: std::sync::atomic::AtomicBool::new(true),
            balanced_at: Mutex::new(std::time::Instant::now()),
            balancer_period,
        }))
    }

    pub fn tick_interval(&self) -> Duration {
        self.tick
    }

    /// Looks at ZooKeeper again: the live region servers.
    pub fn refresh_live(&self) -> Result<Vec<Arc<ServerRecord>>, ServerError> {
        let live: Vec<Arc<ServerRecord>> = self
            .coord
            .live_servers()
            .map_err(|e| ServerError::Internal(format!("listing live region servers: {e}")))?
            .into_iter()
            .filter(|s| s.name != self.me)
            .map(Arc::new)
            .collect();
        *self.live.lock() = live.clone();
        Ok(live)
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
        let handle = match self.runtime.lock().as_ref() {
            Some(rt) => rt.handle().clone(),
            None => return Err(ServerError::Stopping),
        };
        let addr = server.native_addr.clone();
        let client = self.client.lock().clone();
        let client = match client {
            Some(c) => c,
            None => {
                let config = ClientConfig {
                    rpc_timeout: self.call_timeout,
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
                Ok(r) => {
                    return r
                        .map_err(|e| ServerError::Internal(format!("region server {addr}: {e}")))
                }
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

    /// Opens `hosted` on `prefer` (if live) or the live server with the fewest regions,
    /// trying the others if that fails. Returns whether it is open somewhere; if not, it is
    /// left OFFLINE for the next tick.
    pub fn assign(
        &self,
        rs: &RegionServer,
        hosted: &HostedRegion,
        schema: &TableSchema,
        prefer: Option<Arc<ServerRecord>>,
    ) -> bool {
        let mut candidates = self.live.lock().clone();
        if candidates.is_empty() {
            candidates = self.refresh_live().unwrap_or_default();
        }
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
        candidates.sort_by_key(|s| load.get(&s.name).copied().unwrap_or(0));
        // A region whose server is alive goes back there and nowhere else: if that server
        // does not answer, it may still hold the region, and its log is not split until it
        // is gone (opening the region elsewhere first would miss its unflushed edits).
        let keep = prefer.filter(|p| self.is_live(p));
        if let Some(p) = &keep {
            candidates = vec![Arc::clone(p)];
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
        for server in candidates {
            let loc = client_location.clone();
            let schema = schema.clone();
            let opened = self.call(&server, move |admin, addr| async move {
                admin.open_region(&addr, &loc, &schema, splits).await
            });
            match opened {
                Ok(()) => {
                    tracing::info!(region = %location.name, server = %server.name, "region assigned");
                    hosted.assign(Some(server), RegionState::Open);
                    return true;
                }
                Err(e) => {
                    tracing::warn!(region = %location.name, server = %server.name, error = %e, "could not open the region there");
                }
            }
        }
        if hosted.state() != RegionState::Offline {
            tracing::warn!(region = %location.name, "no live region server could open the region; it waits for one");
        }
        hosted.assign(keep, RegionState::Offline);
        false
    }

    /// Closes `hosted` on its server (a dead server's regions are closed already).
    pub fn unassign(&self, hosted: &HostedRegion, state: RegionState) -> Result<(), ServerError> {
        if let Some(server) = hosted.server() {
            let (table, id) = (hosted.table.clone(), hosted.info.id);
            let closed = self.call(&server, move |admin, addr| async move {
                admin.close_region(&addr, &table, id).await
            });
            if let Err(e) = closed {
                let _ = self.refresh_live();
                if self.is_live(&server) {
                    return Err(e);
                }
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

    /// Splits the WAL directory of every server that is not alive (and not this master) by
    /// region, then removes it. Run before meta opens (an earlier master's log holds meta's
    /// edits) and on every tick.
    pub fn split_dead_logs(&self) -> Result<usize, ServerError> {
        let root = wal_root(&self.data_dir);
        if !self.fs.exists(&root)? {
            return Ok(0);
        }
        // Directories first, live servers second (see the module's comment).
        let dirs = self.fs.list(&root)?;
        let live = self.refresh_live()?;
        let mut split_count = 0;
        for d in dirs {
            let server = d.strip_suffix(SPLITTING).unwrap_or(&d);
            let Some(name) = ServerName::parse(server) else {
                continue;
            };
            if name == self.me || live.iter().any(|s| s.name == name) {
                continue;
            }
            self.split_one(&root, &d)?;
            split_count += 1;
        }
        Ok(split_count)
    }

    fn split_one(&self, root: &Path, dir: &str) -> Result<(), ServerError> {
        let started = std::time::Instant::now();
        let splitting = if dir.ends_with(SPLITTING) {
            root.join(dir)
        } else {
            // Fencing: a server that is only paused finds its directory gone when it next
            // rolls; on HDFS the lease recovery below also closes its open segment.
            let to = root.join(format!("{dir}{SPLITTING}"));
            self.fs.rename(&root.join(dir), &to)?;
            to
        };
        let regions = region_dirs(&*self.fs, &self.data_dir)?;
        let summary = split::split(&*self.fs, &splitting, self.skip_wal_errors, |id| {
            regions.get(&id).cloned()
        })?;
        self.fs.delete_dir_all(&splitting)?;
        tracing::info!(
            server = dir,
            records = summary.records,
            regions = summary.regions.len(),
            dropped = summary.dropped,
            ms = started.elapsed().as_millis() as u64,
            "split a dead server's log"
        );
        Ok(())
    }

    /// Stops the RPC runtime.
    pub fn shutdown(&self) {
        self.client.lock().take();
        if let Some(rt) = self.runtime.lock().take() {
            rt.shutdown_timeout(Duration::from_millis(500));
        }
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

/// Whether any family directory of a region holds reference files (`*.ref`).
fn has_reference_files(
    fs: &dyn cellar_storage::fs::FileSystem,
    region_dir: &Path,
) -> Result<bool, ServerError> {
    if !fs.exists(region_dir)? {
        return Ok(false);
    }
    for family in fs.list(region_dir)? {
        let dir = region_dir.join(&family);
        if family.starts_with('.') || family == split::RECOVERED_EDITS || !fs.exists(&dir)? {
            continue;
        }
        if fs
            .list(&dir)
            .unwrap_or_default()
            .iter()
            .any(|f| f.ends_with(".ref"))
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Every region directory under the root by region id (meta's included).
fn region_dirs(
    fs: &dyn cellar_storage::fs::FileSystem,
    data_dir: &Path,
) -> Result<HashMap<u64, PathBuf>, ServerError> {
    let mut out = HashMap::from([(META_REGION_ID, data_dir.join("meta"))]);
    let root = names::data_root(data_dir);
    if !fs.exists(&root)? {
        return Ok(out);
    }
    for ns in fs.list(&root)? {
        for table in fs.list(&root.join(&ns))? {
            let table_dir = root.join(&ns).join(&table);
            for region in fs.list(&table_dir)? {
                if let Ok(id) = region.parse::<u64>() {
                    out.insert(id, table_dir.join(region));
                }
            }
        }
    }
    Ok(out)
}

impl RegionServer {
    /// The master's loop: split dead servers' logs, then open every region of an enabled
    /// table that is not open on a live server.
    pub(crate) fn assignment_tick(&self) {
        let Role::Master(a) = &self.role else {
            return;
        };
        let _admin = self.admin.lock();
        if self.check_running().is_err() {
            return;
        }
        if let Err(e) = a.split_dead_logs() {
            tracing::error!(error = %e, "splitting dead servers' logs; retrying");
            return;
        }
        self.cluster_janitor(a);
        for (name, t) in self.router.tables() {
            if name == META_TABLE || t.state != TableState::Enabled {
                continue;
            }
            for hosted in t.regions.values() {
                // CLOSED: unassigned by an operator; SPLITTING: its split is under way.
                if matches!(hosted.state(), RegionState::Splitting | RegionState::Closed) {
                    continue;
                }
                let placed = hosted.server();
                let serving = hosted.state() == RegionState::Open
                    && placed.as_ref().is_some_and(|s| a.is_live(s));
                if serving {
                    continue;
                }
                if a.assign(self, hosted, &t.schema, placed) {
                    if let Ok(meta) = self.meta() {
                        if let Err(e) = meta.put_region(&self.record_of(hosted, RegionState::Open))
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

    /// A split in a cluster (the procedure of `split.rs`, with the region server doing the
    /// file work): meta says SPLITTING; the region's server closes it and writes the
    /// daughters; meta says SPLIT (the commit point); the daughters get rows and open on the
    /// same server; the router swaps them in. The admin lock is held.
    pub(crate) fn split_remote(
        &self,
        a: &Assignment,
        hosted: &Arc<HostedRegion>,
        row: bytes::Bytes,
    ) -> Result<(), ServerError> {
        let table = hosted.table.clone();
        let t = self.router.require(&table)?;
        let server = a.serving(hosted)?;
        let parent = hosted.info.clone();
        let da = RegionInfo {
            id: self.next_region_id(),
            start_key: parent.start_key.clone(),
            end_key: row.clone(),
        };
        let db = RegionInfo {
            id: self.next_region_id(),
            start_key: row.clone(),
            end_key: parent.end_key.clone(),
        };
        let mut rec = self.record_of(hosted, RegionState::Splitting);
        rec.split_a = Some(da.clone());
        rec.split_b = Some(db.clone());
        self.meta()?.put_region(&rec)?;
        hosted.set_state(RegionState::Splitting);
        let (t_name, id, at, ids) = (table.clone(), parent.id, row.clone(), (da.id, db.id));
        let split = a.call(&server, move |admin, addr| async move {
            admin.split_region_on(&addr, &t_name, id, at, ids).await
        });
        if let Err(e) = split {
            // Not committed: the daughters go, the parent is its server's again (if the
            // server failed the split it exits, and its log is split like any dead server's).
            for d in [&da, &db] {
                let _ = self
                    .services
                    .fs
                    .delete_dir_all(&self.region_dir(&table, d.id));
            }
            rec.split_a = None;
            rec.split_b = None;
            rec.state = RegionState::Open;
            self.meta()?.put_region(&rec)?;
            hosted.assign(Some(server), RegionState::Offline);
            tracing::warn!(table = %table, region = parent.id, error = %e, "split not done; the region reopens");
            return Err(e);
        }
        rec.state = RegionState::Split;
        if let Err(e) = self.meta()?.put_region(&rec) {
            hosted.set_state(RegionState::Offline);
            tracing::error!(table = %table, region = parent.id, error = %e, "could not commit a split; the region is offline until the master restarts");
            return Err(e);
        }
        hosted.assign(None, RegionState::Split);
        let mut daughters = Vec::with_capacity(2);
        for info in [da.clone(), db.clone()] {
            let d = HostedRegion::new(
                &table,
                info.clone(),
                &self.region_dir(&table, info.id),
                None,
            );
            a.assign(self, &d, &t.schema, Some(Arc::clone(&server)));
            self.meta()?
                .put_region(&self.record_of(&d, RegionState::Open))?;
            daughters.push(d);
        }
        let [a_region, b_region]: [Arc<HostedRegion>; 2] = daughters
            .try_into()
            .map_err(|_| ServerError::Internal("split made other than two daughters".into()))?;
        self.router
            .swap_split(&table, parent.id, [a_region, b_region]);
        self.split_parents.lock().push(crate::split::SplitParent {
            table: table.clone(),
            info: parent.clone(),
            daughters: [da.id, db.id],
        });
        self.splits_done
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.router.table(&table) {
            self.meta()?.put_table(&crate::meta::TableRecord {
                schema: (*t.schema).clone(),
                state: t.state,
                splits: t.splits,
                truncate_to: None,
            })?;
        }
        tracing::info!(table = %table, parent = parent.id, daughter_a = da.id, daughter_b = db.id,
            at = %String::from_utf8_lossy(&row), server = %server.name, "region split");
        Ok(())
    }

    /// Removes split parents once neither daughter has reference files left, and then only
    /// after twice the scanner lease: a scanner opened on a daughter before its compaction may
    /// still read the parent's files, and HDFS has no unlink-while-open.
    fn cluster_janitor(&self, a: &Assignment) {
        let parents = self.split_parents.lock().clone();
        if parents.is_empty() {
            return;
        }
        let grace = Duration::from_millis(self.config.scanner.lease_ms.saturating_mul(2));
        for p in parents {
            let referenced = p.daughters.iter().any(|d| {
                has_reference_files(&*self.services.fs, &self.region_dir(&p.table, *d))
                    .unwrap_or(true)
            });
            let mut clean = a.clean_since.lock();
            if referenced {
                clean.remove(&p.info.id);
                continue;
            }
            let since = *clean
                .entry(p.info.id)
                .or_insert_with(std::time::Instant::now);
            if since.elapsed() < grace {
                continue;
            }
            clean.remove(&p.info.id);
            drop(clean);
            let removed = self
                .services
                .fs
                .delete_dir_all(&self.region_dir(&p.table, p.info.id))
                .map_err(ServerError::from)
                .and_then(|()| self.meta()?.delete_region(&p.table, &p.info));
            match removed {
                Ok(()) => {
                    self.split_parents.lock().retain(|q| q != &p);
                    tracing::info!(table = %p.table, region = p.info.id, "split parent removed");
                }
                Err(e) => {
                    tracing::warn!(table = %p.table, region = p.info.id, error = %e, "could not remove a split parent; will retry")
                }
            }
        }
    }

    /// The assignment of a master, if this is one.
    pub fn assignment(&self) -> Option<&Arc<Assignment>> {
        match &self.role {
            Role::Master(a) => Some(a),
            _ => None,
        }
    }
}
