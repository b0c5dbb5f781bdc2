//! The region server: opens the data directory (WAL replay, meta, every region), serves data
//! and admin calls through typed methods ([`data`], [`crate::catalog`], [`crate::scanners`]),
//! runs the split checker and the scanner lease reaper, and closes everything on shutdown.
//!
//! Disk layout (`docs/server-layout.md`): `<data_dir>/LOCK` (held while a server runs),
//! `<data_dir>/wal` (one WAL for all regions), `<data_dir>/meta` (the `hbase:meta` region),
//! `<data_dir>/data/<namespace>/<qualifier>/<region_id>` (the tables' regions).

mod bulk_load;
mod control;
mod data;
mod nonces;
mod placement;
mod reactor;
mod replicated;
mod restart;
mod scan;
pub(crate) mod split_check;
mod views;
mod workers;

use crate::error::ServerError;
pub use data::{Check, DeferredPut, MutateOutcome};
pub use placement::{ClusterMaster, RegionWork};
pub use reactor::ReactorRead;
pub use replicated::{ReplicatedTable, SinkStats};

use crate::config::ServerConfig;
use crate::meta::{meta_schema, Meta, META_REGION_ID, META_TABLE};
use crate::names;
use crate::router::{HostedRegion, RegionState, Router, TableRoute, TableState};
use crate::scanners::ScannerRegistry;
use cellar_model::TableSchema;
use cellar_storage::fs::{FsRef, LocalFs};
use cellar_storage::region::{Region, RegionInfo, StorageServices};
use cellar_storage::wal::WalRecord;
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
pub(crate) use workers::Workers;

/// What this process is in the cluster (`docs/design/0004-cluster.md` §1). One code path:
/// the roles differ only in where regions open ([`placement`]) and in whether meta is here.
pub enum Role {
    /// Master and region server in one process: meta and every region are served here.
    Standalone,
    /// The active master of a cluster: meta is served here, user regions are assigned to
    /// region servers.
    Master(Arc<dyn ClusterMaster>),
    /// A region server of a cluster: serves the regions the master opens on it; no meta, no
    /// table administration.
    RegionServer,
}

impl Role {
    pub fn name(&self) -> &'static str {
        match self {
            Role::Standalone => "standalone",
            Role::Master(_) => "master",
            Role::RegionServer => "regionserver",
        }
    }
}

/// A region split or merged away, whose directory waits for the regions that replaced it
/// (its successors: a split's two daughters, or a merge's one region) to stop referencing its
/// files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetiredRegion {
    pub table: String,
    pub info: RegionInfo,
    pub successors: Vec<u64>,
}

/// Asks the master to split a region of a table at a row.
pub type SplitRequester = Arc<dyn Fn(&str, bytes::Bytes) -> Result<(), String> + Send + Sync>;

/// Writes row mutations of a table whose regions are served elsewhere in the cluster (a
/// client of the cluster), for edits replicated in (`replicated.rs`).
pub type RowForwarder =
    Arc<dyn Fn(&str, Vec<cellar_model::RowMutation>) -> Result<(), ServerError> + Send + Sync>;

/// How a server opens: its role, its start code and where its WAL lives.
pub struct Opening {
    pub role: Role,
    /// When this server started (ms since the epoch); 0: now.
    pub startcode: u64,
    /// The WAL directory; empty: `<data_dir>/wal` (standalone's layout).
    pub wal_dir: PathBuf,
}

impl Opening {
    pub fn standalone() -> Opening {
        Opening {
            role: Role::Standalone,
            startcode: 0,
            wal_dir: PathBuf::new(),
        }
    }
}

/// A region server with its regions, meta table and background threads.
pub struct RegionServer {
    pub(crate) config: ServerConfig,
    pub(crate) role: Role,
    /// `host:port` written into region locations.
    pub(crate) advertised: String,
    /// When this server started (ms since the epoch): meta's `serverstartcode`.
    pub(crate) startcode: u64,
    pub(crate) started: Instant,
    pub(crate) services: Arc<StorageServices>,
    /// `hbase:meta`, unless this is a region server of a cluster.
    pub(crate) meta: Option<Meta>,
    pub(crate) router: Router,
    pub(crate) scanners: ScannerRegistry,
    pub(crate) prepared: crate::prepared::PreparedRegistry,
    /// Serializes admin operations and splits with each other (never data calls).
    pub(crate) admin: Mutex<()>,
    /// Split and merge parents whose directories wait for their successors to drop their
    /// references.
    pub(crate) retired_regions: Mutex<Vec<RetiredRegion>>,
    /// A cluster's region server: per region, the highest open number a CLOSE_REGION fenced
    /// off (opens numbered up to it are refused: the master gave up on them).
    pub(crate) open_fences: Mutex<std::collections::HashMap<u64, u64>>,
    /// A cluster's region server: the coordination that names the active master, whose
    /// OPEN_REGIONs alone it takes (`control.rs`).
    pub(crate) coordination: std::sync::OnceLock<crate::coord::CoordRef>,
    /// Created namespaces (meta's namespace rows) and their configuration, by name.
    pub(crate) namespaces: RwLock<BTreeMap<String, Vec<(String, String)>>>,
    /// The last region id handed out.
    last_region_id: AtomicU64,
    pub(crate) requests: AtomicU64,
    pub(crate) splits_done: AtomicU64,
    /// A standalone server's balancer switch: on, as HBase's with its one region server
    /// (nothing ever moves); a master's is in its assignment.
    pub(crate) standalone_balancer: AtomicBool,
    /// Increments and appends applied, by nonce: their retries are not applied again.
    pub(crate) nonces: nonces::Nonces,
    /// What edits replicated in from another cluster have applied (`replicated.rs`).
    pub(crate) replication_sink: SinkStats,
    /// Where bulk loads may read files from (`bulk_load.dirs`), and the HDFS clients for them.
    pub(crate) bulk_files: crate::bulk_files::BulkFiles,
    stopping: AtomicBool,
    /// Fenced: this server must not serve again (see [`RegionServer::fence`]).
    fenced: AtomicBool,
    /// A cluster region server's way to ask the master for a split: `(table, split row)`.
    pub(crate) split_requester: Mutex<Option<SplitRequester>>,
    /// A cluster region server's way to write replicated rows of regions served elsewhere.
    pub(crate) row_forwarder: Mutex<Option<RowForwarder>>,
    shut_down: Mutex<bool>,
    workers: Workers<RegionServer>,
    /// Held while the server runs: a second server on the same directory is refused. Let go
    /// at shutdown, even if something still holds the server.
    lock: Mutex<Option<cellar_storage::fs::LockGuard>>,
    /// Who may do what (`docs/security.md`); every check passes when authorization is off.
    pub(crate) authz: Arc<crate::security::Authz>,
}

impl RegionServer {
    /// Opens or creates the data dir (config.data_dir), replays the WAL, opens meta and every
    /// OPEN region, finishes/rolls back interrupted splits, starts the split checker and the
    /// scanner lease reaper. `advertised` = "host:port" put in region locations.
    pub fn open(
        config: &ServerConfig,
        advertised: String,
    ) -> Result<Arc<RegionServer>, ServerError> {
        RegionServer::open_on(config, advertised, LocalFs::shared())
    }

    /// [`RegionServer::open`] on a given file system (the fault-injecting one in tests).
    pub fn open_on(
        config: &ServerConfig,
        advertised: String,
        fs: FsRef,
    ) -> Result<Arc<RegionServer>, ServerError> {
        RegionServer::open_as(config, advertised, fs, Opening::standalone())
    }

    /// Opens a server in any role. A standalone server holds `<data_dir>/LOCK`; in a cluster
    /// the ZooKeeper election (master) and the per-server WAL directory (region server) keep
    /// two processes from sharing what they write.
    pub fn open_as(
        config: &ServerConfig,
        advertised: String,
        fs: FsRef,
        opening: Opening,
    ) -> Result<Arc<RegionServer>, ServerError> {
        config.validate().map_err(ServerError::InvalidArgument)?;
        cellar_storage::fs::create_dir_durable(&*fs, &config.data_dir)?;
        let lock = match opening.role {
            Role::Standalone => Some(lock_data_dir(&*fs, &config.data_dir)?),
            _ => None,
        };
        let wal_dir = if opening.wal_dir.as_os_str().is_empty() {
            config.data_dir.join("wal")
        } else {
            opening.wal_dir.clone()
        };
        let mut storage = config.storage_config();
        // A cluster's server is fenced by its WAL directory being renamed: it checks for the
        // directory after every write round, unless the file system's lease recovery shuts
        // it out of the moved segments (HDFS); either way it creates segments only inside the
        // directory, never remaking it.
        storage.wal.fence_dir = !matches!(opening.role, Role::Standalone) && !fs.fences_writers();
        cellar_storage::memstore::chunk_pool::set_limit(config.storage.chunk_pool_limit());
        cellar_storage::memstore::chunk_pool::keep_ready(config.storage.chunks_ready());
        let authz = Arc::new(
            crate::security::Authz::new(
                &config.security,
                own_users(config),
                &config
                    .security
                    .audit_log
                    .clone()
                    .unwrap_or_else(|| config.data_dir.join("audit.log")),
            )
            .map_err(ServerError::InvalidArgument)?,
        );
        let clock = Arc::clone(&storage.clock);
        // Store files a region stops using go to the archive, where snapshots and clones
        // still read them (`cellar_storage::fs::ArchivingFs`, `docs/snapshots.md`).
        let fs: FsRef = Arc::new(cellar_storage::fs::ArchivingFs::new(fs, &config.data_dir));
        let (services, records) = StorageServices::open(fs, &wal_dir, storage)?;
        let router = Router::new();
        let nonces = nonces::Nonces::default();
        let meta = if matches!(opening.role, Role::RegionServer) {
            None
        } else {
            let meta_dir = config.data_dir.join("meta");
            let meta_info = RegionInfo::whole(META_REGION_ID);
            let meta_region = match placement::open_with_recovered(
                &services,
                &meta_dir,
                meta_info.clone(),
                meta_schema(),
                &records,
                &nonces,
            ) {
                Ok(r) => r,
                Err(e) => {
                    let _ = services.shutdown();
                    return Err(e);
                }
            };
            let meta_hosted =
                HostedRegion::new(META_TABLE, meta_info, &meta_dir, Some(meta_region));
            let mut route = TableRoute::new(meta_schema(), TableState::Enabled, 0);
            route
                .regions
                .insert(meta_hosted.info.start_key.clone(), Arc::clone(&meta_hosted));
            router.insert_table(META_TABLE, route);
            let tenure = match &opening.role {
                Role::Master(a) => Some(Arc::clone(a.tenure())),
                _ => None,
            };
            Some(Meta::new(meta_hosted, Arc::clone(&clock)).with_tenure(tenure))
        };
        let startcode = match opening.startcode {
            0 => clock.now_millis(),
            s => s,
        };
        let server = Arc::new(RegionServer {
            config: config.clone(),
            role: opening.role,
            advertised,
            startcode,
            started: Instant::now(),
            meta,
            router,
            scanners: ScannerRegistry::new(Duration::from_millis(config.scanner.lease_ms)),
            prepared: crate::prepared::PreparedRegistry::new(
                Duration::from_millis(config.scanner.lease_ms),
                config.scanner.max_prepared_per_connection,
            ),
            admin: Mutex::new(()),
            retired_regions: Mutex::new(Vec::new()),
            open_fences: Mutex::new(std::collections::HashMap::new()),
            coordination: std::sync::OnceLock::new(),
            namespaces: RwLock::new(BTreeMap::new()),
            last_region_id: AtomicU64::new(META_REGION_ID),
            requests: AtomicU64::new(0),
            splits_done: AtomicU64::new(0),
            standalone_balancer: AtomicBool::new(true),
            nonces,
            replication_sink: SinkStats::default(),
            bulk_files: crate::bulk_files::BulkFiles::new(&config.bulk_load.dirs),
            stopping: AtomicBool::new(false),
            fenced: AtomicBool::new(false),
            split_requester: Mutex::new(None),
            row_forwarder: Mutex::new(None),
            shut_down: Mutex::new(false),
            workers: Workers::new(),
            services,
            lock: Mutex::new(lock),
            authz,
        });
        if server.meta.is_some() {
            if let Err(e) = server.recover(&records) {
                tracing::error!(error = %e, "could not open the data directory");
                let _ = server.shutdown();
                return Err(e);
            }
        }
        server.start_workers();
        tracing::info!(
            role = server.role.name(),
            data_dir = %config.data_dir.display(),
            wal_dir = %wal_dir.display(),
            tables = server.router.tables().len().saturating_sub(1),
            "region server open"
        );
        Ok(server)
    }

    fn start_workers(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        // A cluster's region server asks its master to split big regions; standalone and a
        // cluster's master split through their `Master` (its own thread).
        if matches!(self.role, Role::RegionServer) {
            let split_every = Duration::from_millis(self.config.split.check_interval_ms);
            self.workers
                .spawn("cellar-split", split_every, weak.clone(), |s| {
                    s.split_request_tick()
                });
        }
        // Stores nobody writes to still get their periodic major compaction.
        let check_every = self.config.storage.compaction_check_interval();
        self.workers
            .spawn("cellar-compact-check", check_every, weak.clone(), |s| {
                for hosted in s.router.all_regions() {
                    hosted.if_open(|r| r.request_compaction_if_due());
                }
            });
        let lease = Duration::from_millis(self.config.scanner.lease_ms);
        let reap_every = (lease / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        self.workers.spawn("cellar-leases", reap_every, weak, |s| {
            s.scanners.reap_expired();
            s.prepared.reap_expired();
        });
    }

    /// Stops background threads, closes every region (flush), closes the WAL. Idempotent.
    pub fn shutdown(&self) -> Result<(), ServerError> {
        let mut done = self.shut_down.lock();
        if *done {
            return Ok(());
        }
        *done = true;
        self.stopping.store(true, Ordering::SeqCst);
        self.workers.stop();
        // Admin operations and splits in flight finish first.
        let _admin = self.admin.lock();
        self.scanners.clear();
        self.prepared.clear();
        let mut first_error: Option<ServerError> = None;
        let mut note = |r: Result<(), ServerError>| {
            if let Err(e) = r {
                tracing::error!(error = %e, "shutdown");
                first_error.get_or_insert(e);
            }
        };
        for hosted in self.router.all_regions() {
            if hosted.info.id == META_REGION_ID {
                continue;
            }
            if let Some(region) = hosted.take(RegionState::Closed) {
                note(region.close().map_err(ServerError::from));
            }
        }
        if let Some(meta) = self
            .meta
            .as_ref()
            .and_then(|m| m.hosted().take(RegionState::Closed))
        {
            note(meta.close().map_err(ServerError::from));
        }
        note(self.services.shutdown().map_err(ServerError::from));
        drop(self.lock.lock().take());
        tracing::info!("region server stopped");
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Stops serving for good (a region server whose ZooKeeper session expired: its regions
    /// are being given to others): every later call gets SERVER_STOPPING and clients locate
    /// again.
    pub fn fence(&self) {
        self.fenced.store(true, Ordering::SeqCst);
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// Whether [`RegionServer::fence`] was called: the process should exit as a crash would
    /// (its log is recovered by the master).
    pub fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::SeqCst)
    }

    /// A cluster master serves only while it is the active one (`coord::Tenure`); others
    /// pass.
    pub(crate) fn check_master(&self) -> Result<(), ServerError> {
        match &self.role {
            Role::Master(a) => a.tenure().check(),
            _ => Ok(()),
        }
    }

    /// Whether a call may be answered on the reactor as far as mastership goes: not on a
    /// master without a standing confirmation (the handler pool checks with ZooKeeper).
    pub(crate) fn master_fresh(&self) -> bool {
        match &self.role {
            Role::Master(a) => a.tenure().fresh(),
            _ => true,
        }
    }

    /// Why this master stepped down, if it is one that did.
    pub fn stepped_down(&self) -> Option<String> {
        match &self.role {
            Role::Master(a) => a.tenure().lost(),
            _ => None,
        }
    }

    /// SERVER_STOPPING once shutdown has begun.
    pub(crate) fn check_running(&self) -> Result<(), ServerError> {
        if self.stopping.load(Ordering::SeqCst) {
            return Err(ServerError::Stopping);
        }
        Ok(())
    }

    /// `hbase:meta`; an error on a region server of a cluster, where tables are administered
    /// by the master.
    pub(crate) fn meta(&self) -> Result<&Meta, ServerError> {
        self.meta.as_ref().ok_or_else(ServerError::not_the_master)
    }

    /// Sets how a cluster region server writes rows of regions served elsewhere.
    pub fn set_row_forwarder(&self, forward: RowForwarder) {
        *self.row_forwarder.lock() = Some(forward);
    }

    /// Sets how a cluster region server asks its master for splits.
    pub fn set_split_requester(&self, request: SplitRequester) {
        *self.split_requester.lock() = Some(request);
    }

    pub fn role(&self) -> &Role {
        &self.role
    }

    /// When this server started (ms since the epoch): its start code.
    pub fn startcode(&self) -> u64 {
        self.startcode
    }

    /// `host:port` in region locations.
    pub fn advertised(&self) -> &str {
        &self.advertised
    }

    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    pub fn data_dir(&self) -> &Path {
        &self.config.data_dir
    }

    /// A new region id: unique and increasing, the clock's milliseconds when it is ahead.
    pub(crate) fn next_region_id(&self) -> u64 {
        let now = self.services.config.clock.now_millis();
        let mut cur = self.last_region_id.load(Ordering::SeqCst);
        loop {
            let next = now.max(cur + 1);
            match self.last_region_id.compare_exchange(
                cur,
                next,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return next,
                Err(seen) => cur = seen,
            }
        }
    }

    /// Makes later ids larger than `id`.
    pub(crate) fn note_region_id(&self, id: u64) {
        self.last_region_id.fetch_max(id, Ordering::SeqCst);
    }

    pub(crate) fn region_dir(&self, table: &str, id: u64) -> PathBuf {
        names::region_dir(&self.config.data_dir, table, id)
    }

    /// Opens a region of `table` with `schema` from its directory (created if new). Family
    /// directories the schema no longer has (a family deleted by an alter that crashed before
    /// removing it) are removed first, so a family added again later starts empty.
    pub(crate) fn open_region(
        &self,
        table: &str,
        info: &RegionInfo,
        schema: &TableSchema,
        replay: &[WalRecord],
    ) -> Result<Region, ServerError> {
        let dir = self.region_dir(table, info.id);
        let fs = &self.services.fs;
        if fs.exists(&dir)? {
            for name in fs.list(&dir)? {
                let family_like = !name.starts_with('.')
                    && name != cellar_storage::wal::log_split::RECOVERED_EDITS;
                if family_like && !schema.families.iter().any(|f| f.name == name) {
                    tracing::info!(table, region = info.id, family = %name, "removing the directory of a deleted family");
                    fs.delete_dir_all(&dir.join(&name))?;
                }
            }
        }
        placement::open_with_recovered(
            &self.services,
            &dir,
            info.clone(),
            schema.clone(),
            replay,
            &self.nonces,
        )
    }
}

impl Drop for RegionServer {
    /// Without `shutdown` this is what a crash looks like: threads stop, nothing is flushed
    /// (the WAL has every acknowledged write). Flush and compaction threads are stopped too,
    /// so nothing writes into the directory once the server is gone (a server opened on it
    /// next, as tests do, would race with them).
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.workers.stop();
        if !*self.shut_down.get_mut() {
            if let Err(e) = self.services.shutdown() {
                tracing::warn!(error = %e, "closing the WAL of a server dropped without shutdown");
            }
        }
    }
}

/// Takes `<data_dir>/LOCK` exclusively.
fn lock_data_dir(
    fs: &dyn cellar_storage::fs::FileSystem,
    dir: &Path,
) -> Result<cellar_storage::fs::LockGuard, ServerError> {
    match fs.lock(&dir.join("LOCK")) {
        Ok(lock) => Ok(lock),
        Err(cellar_model::Error::Io { source, .. })
            if source.kind() == std::io::ErrorKind::WouldBlock =>
        {
            Err(ServerError::InvalidArgument(format!(
                "data directory {} is in use by another Cellar server (LOCK is held)",
                dir.display()
            )))
        }
        Err(e) => Err(e.into()),
    }
}

/// The users a server counts as superusers by itself: the one running it, and the one its
/// own certificate names (a cluster's servers call each other with it).
fn own_users(config: &ServerConfig) -> Vec<String> {
    let mut users: Vec<String> = crate::security::authz::process_user().into_iter().collect();
    if let Some(cert) = &config.tls.cert {
        match crate::security::tls::read_certs(cert, "tls.cert") {
            Ok(certs) => {
                if let Some(user) = certs
                    .first()
                    .and_then(|c| crate::security::identity::user_from_certificate(c).ok())
                {
                    users.push(user);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the server's certificate for its user")
            }
        }
    }
    users
}
