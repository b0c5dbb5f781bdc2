//! A region server's side of assignment: OPEN_REGION, CLOSE_REGION and FLUSH_REGION, sent by
//! the master of its cluster. Each is idempotent (the master retries after failures and
//! after a takeover), and they run one at a time under the admin lock.

use super::placement::RegionWork;
use super::{RegionServer, Role, ServerError};
use crate::router::{HostedRegion, RegionState};
use cellar_model::TableSchema;
use cellar_storage::region::RegionInfo;

impl RegionServer {
    fn check_region_server(&self, call: &str) -> Result<(), ServerError> {
        match self.role {
            Role::RegionServer => self.check_running(),
            _ => Err(ServerError::invalid(format!(
                "{call} is sent by a cluster's master to its region servers; this server is {}",
                self.role.name()
            ))),
        }
    }

    /// Opens region `info` of `schema`'s table here (replaying edits recovered for it).
    pub fn open_region_call(
        &self,
        table: &str,
        info: RegionInfo,
        schema: TableSchema,
    ) -> Result<(), ServerError> {
        self.check_region_server("OPEN_REGION")?;
        schema.validate()?;
        if schema.name != table {
            return Err(ServerError::invalid(format!(
                "OPEN_REGION: region of table '{table}' sent with the schema of '{}'",
                schema.name
            )));
        }
        let _admin = self.admin.lock();
        if let Some(h) = self.router.region(info.id) {
            if h.is_open() && h.table == table {
                return Ok(());
            }
        }
        let dir = self.region_dir(table, info.id);
        let region = self.open_region(table, &info, &schema, &[])?;
        let hosted = HostedRegion::new(table, info, &dir, Some(region));
        self.note_region_id(hosted.info.id);
        self.router.add_region(&schema, hosted);
        tracing::info!(table, region = %dir.display(), "region opened");
        Ok(())
    }

    /// Flushes and closes a region served here; one not served here is already closed.
    pub fn close_region_call(&self, table: &str, id: u64) -> Result<(), ServerError> {
        self.check_region_server("CLOSE_REGION")?;
        let _admin = self.admin.lock();
        let Some(hosted) = self.router.region(id).filter(|h| h.table == table) else {
            return Ok(());
        };
        if let Some(region) = hosted.take(RegionState::Closed) {
            region.close()?;
        }
        self.router.remove_region(id);
        tracing::info!(table, region = id, "region closed");
        Ok(())
    }

    /// Flushes (and compacts, if asked) a region served here.
    pub fn flush_region_call(
        &self,
        table: &str,
        id: u64,
        compact: bool,
        major: bool,
    ) -> Result<(), ServerError> {
        self.check_region_server("FLUSH_REGION")?;
        let hosted = self.router.region_for_call(table, id)?;
        let work = if compact {
            RegionWork::Compact { major }
        } else {
            RegionWork::Flush
        };
        self.region_work(&hosted, work)
    }
}
