//! Where a region opens: in this process (standalone, and a region server told to by its
//! master), or on a region server the master picks (a cluster's master). Catalog operations
//! call [`RegionServer::bring_up`], [`RegionServer::bring_down`] and
//! [`RegionServer::region_work`] and never ask which.

use super::nonces::Nonces;
use super::{RegionServer, Role};
use crate::coord::ServerRecord;
use crate::coord::Tenure;
use crate::error::ServerError;
use crate::meta::RegionRecord;
use crate::router::{HostedRegion, RegionState};
use cellar_model::TableSchema;
use cellar_storage::region::{Region, RegionInfo, StorageServices};
use cellar_storage::wal::log_split;
use cellar_storage::wal::WalRecord;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A cluster master's part in where regions open (its `master::Assignment`): the region
/// server's code asks through this and never names the master, which builds on it.
pub trait ClusterMaster: Send + Sync + std::any::Any {
    /// Opens `hosted` on a live region server, or leaves it to the assignment loop when
    /// none is live.
    fn assign(&self, server: &RegionServer, hosted: &HostedRegion, schema: &TableSchema);
    /// Closes `hosted` on the server holding it (flushing it) and records `state`.
    fn unassign(&self, hosted: &HostedRegion, state: RegionState) -> Result<(), ServerError>;
    /// Flushes or compacts `hosted` on the server holding it.
    fn region_work(&self, hosted: &HostedRegion, work: RegionWork) -> Result<(), ServerError>;
    /// The live region server `native` with start code `startcode`, if it is one.
    fn live_server(&self, native: &str, startcode: u64) -> Option<Arc<ServerRecord>>;
    /// Whether this master is still the active one.
    fn tenure(&self) -> &Arc<Tenure>;
    /// How often the assignment loop runs.
    fn tick_interval(&self) -> Duration;
    /// The region servers the master saw that are gone (HBase's dead servers), oldest first.
    fn dead_servers(&self) -> Vec<ServerRecord> {
        Vec::new()
    }
}

/// Work on an open region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegionWork {
    Flush,
    Compact { major: bool },
}

/// Opens a region with its own WAL's `replay` records and the edits split for it from dead
/// servers' logs (`recovered.edits`). Recovered edits are in no log of this server, so they
/// are flushed before the region serves, and only then removed.
///
/// The nonces the recovered edits carry go to `nonces` before the region serves: a client
/// that retries an increment or append the dead server applied but never answered is
/// answered as a duplicate here, not applied twice (HBase's nonce handling of replayed edits).
pub(crate) fn open_with_recovered(
    services: &Arc<StorageServices>,
    dir: &Path,
    info: RegionInfo,
    schema: TableSchema,
    replay: &[WalRecord],
    nonces: &Nonces,
) -> Result<Region, ServerError> {
    let recovered = log_split::read_recovered(&*services.fs, dir)?;
    if recovered.is_empty() {
        return Ok(Region::open_in(services, dir, info, schema, replay)?);
    }
    for r in &recovered {
        if let Some(n) = cellar_storage::region::wal_payload::nonce(&r.payload) {
            nonces.replayed(n);
        }
    }
    let count = recovered.len();
    let mut all = replay.to_vec();
    all.extend(recovered);
    let region = Region::open_in(services, dir, info, schema, &all)?;
    region.flush()?;
    log_split::clear_recovered(&*services.fs, dir)?;
    tracing::info!(region = %dir.display(), edits = count, "replayed and flushed edits recovered from a dead server's log");
    Ok(region)
}

impl RegionServer {
    /// Opens `hosted`'s region: here, or (master) on a region server. A master with no live
    /// region server leaves the region waiting; its assignment loop opens it when one comes.
    pub(crate) fn bring_up(
        &self,
        hosted: &HostedRegion,
        schema: &TableSchema,
    ) -> Result<(), ServerError> {
        match &self.role {
            Role::Master(a) => {
                a.assign(self, hosted, schema);
                Ok(())
            }
            Role::Standalone | Role::RegionServer => {
                if !hosted.is_open() {
                    hosted.put(self.open_region(&hosted.table, &hosted.info, schema, &[])?);
                }
                Ok(())
            }
        }
    }

    /// Closes `hosted`'s region (flushing it) wherever it is open, and reports `state`.
    pub(crate) fn bring_down(
        &self,
        hosted: &HostedRegion,
        state: RegionState,
    ) -> Result<(), ServerError> {
        match &self.role {
            Role::Master(a) => a.unassign(hosted, state),
            Role::Standalone | Role::RegionServer => {
                if let Some(region) = hosted.take(state) {
                    region.close()?;
                }
                Ok(())
            }
        }
    }

    /// Flushes or compacts `hosted`'s region wherever it is open; nothing if it is not open.
    pub(crate) fn region_work(
        &self,
        hosted: &HostedRegion,
        work: RegionWork,
    ) -> Result<(), ServerError> {
        match &self.role {
            Role::Master(a) => a.region_work(hosted, work),
            Role::Standalone | Role::RegionServer => hosted
                .if_open(|r| -> Result<(), ServerError> {
                    match work {
                        RegionWork::Flush => Ok(r.flush()?),
                        RegionWork::Compact { major } => Ok(r.compact(major)?),
                    }
                })
                .transpose()
                .map(|_| ()),
        }
    }

    /// The server a region row names: the assigned region server on a master, else this one.
    pub(crate) fn placed_on(&self, hosted: &HostedRegion) -> (String, u64) {
        match (&self.role, hosted.server()) {
            (_, Some(s)) => (s.native_addr.clone(), s.name.start_code),
            (Role::Master(_), None) => (String::new(), 0),
            _ => (self.advertised.clone(), self.startcode),
        }
    }

    /// A region row naming the server `hosted` is on (see [`RegionServer::placed_on`]).
    pub(crate) fn record_of(&self, hosted: &HostedRegion, state: RegionState) -> RegionRecord {
        let mut r = RegionRecord::new(&hosted.table, hosted.info.clone(), state);
        (r.server, r.startcode) = self.placed_on(hosted);
        r.open_seq = hosted.open_seq();
        r
    }

    /// A region row naming this server.
    pub(crate) fn record(&self, table: &str, info: RegionInfo, state: RegionState) -> RegionRecord {
        let mut r = RegionRecord::new(table, info, state);
        r.server = self.advertised.clone();
        r.startcode = self.startcode;
        r
    }
}
