//! Table administration: create, alter, disable, enable, truncate, delete, flush, compact,
//! list, describe, locate, status (HBase's semantics).
//!
//! Admin operations run one at a time (with splits) under the server's admin lock; data calls
//! never take it. Each changes meta first at its commit point and the router after, so a crash
//! leaves meta saying either the old or the new state (`region_server::restart` cleans up the
//! rest).

mod namespaces;
mod permissions;

use crate::error::ServerError;
use crate::master::Master;
use crate::meta::{TableRecord, META_TABLE};
use crate::names;
use crate::region_server::RegionWork;
use crate::router::{HostedRegion, RegionState, TableRoute, TableState};
use crate::status::{ServerLoad, ServerStatus};
use bytes::Bytes;
use cellar_model::{FamilySchema, TableSchema};
use cellar_storage::region::RegionInfo;
use std::collections::BTreeMap;
use std::sync::Arc;

impl Master {
    /// The canonical name of an existing table; TABLE_NOT_FOUND if there is none.
    fn existing(&self, name: &str) -> Result<(String, TableRoute), ServerError> {
        self.rs.existing_table(name)
    }

    /// [`Self::existing`], refusing system tables (they are not administered by clients).
    fn existing_user(&self, name: &str) -> Result<(String, TableRoute), ServerError> {
        let (name, t) = self.existing(name)?;
        if names::is_system(&name) {
            return Err(ServerError::invalid(format!(
                "table '{name}' is a system table and cannot be changed"
            )));
        }
        Ok((name, t))
    }

    /// Creates a table with one region per gap between `split_keys` (sorted, distinct,
    /// non-empty), enabled.
    pub fn create_table(
        &self,
        schema: TableSchema,
        split_keys: &[Bytes],
    ) -> Result<(), ServerError> {
        let _admin = self.rs.admin.lock();
        self.rs.check_running()?;
        let mut schema = schema;
        schema.name = names::user_table(&schema.name)?;
        schema.validate()?;
        let name = schema.name.clone();
        if self.rs.router.contains(&name) {
            return Err(ServerError::TableExists(name));
        }
        check_split_keys(&name, split_keys)?;
        let mut bounds = Vec::with_capacity(split_keys.len() + 2);
        bounds.push(Bytes::new());
        bounds.extend(split_keys.iter().cloned());
        bounds.push(Bytes::new());
        let ranges = bounds.windows(2).map(|w| (w[0].clone(), w[1].clone()));
        self.create_regions(schema, ranges.collect(), TableState::Enabled, |_, _, _| {
            Ok(())
        })
    }

    /// Creates table `schema.name` (checked, not existing; the admin lock is held) with one
    /// region per `(start, end)` range, in `state`. `prepare(range index, region, directory)`
    /// fills each new region's directory before it opens (a clone's references). On failure
    /// nothing of the table is left.
    pub(crate) fn create_regions(
        &self,
        schema: TableSchema,
        ranges: Vec<(Bytes, Bytes)>,
        state: TableState,
        prepare: impl Fn(usize, &RegionInfo, &std::path::Path) -> Result<(), ServerError>,
    ) -> Result<(), ServerError> {
        let name = schema.name.clone();
        // Leftovers of an earlier create that crashed have no meta rows: they go.
        self.rs
            .services
            .fs
            .delete_dir_all(&names::table_dir(self.rs.data_dir(), &name))?;
        let mut route = TableRoute::new(schema.clone(), state, 0);
        let count = ranges.len();
        let result = (|| {
            for (i, (start_key, end_key)) in ranges.into_iter().enumerate() {
                let info = RegionInfo {
                    id: self.rs.next_region_id(),
                    start_key,
                    end_key,
                };
                let dir = self.rs.region_dir(&name, info.id);
                prepare(i, &info, &dir)?;
                let hosted = HostedRegion::new(&name, info.clone(), &dir, None);
                route
                    .regions
                    .insert(info.start_key.clone(), Arc::clone(&hosted));
                let region_state = if state == TableState::Enabled {
                    self.rs.bring_up(&hosted, &schema)?;
                    RegionState::Open
                } else {
                    // A disabled table's region: its directory, closed.
                    cellar_storage::fs::create_dir_durable(&*self.rs.services.fs, &dir)?;
                    cellar_storage::region::write_descriptor(
                        &*self.rs.services.fs,
                        &dir,
                        &info,
                        &schema,
                    )?;
                    hosted.set_state(RegionState::Closed);
                    RegionState::Closed
                };
                self.rs
                    .meta()?
                    .put_region(&self.rs.record_of(&hosted, region_state))?;
            }
            // The commit point: the table exists once its row does.
            self.rs.meta()?.put_table(&TableRecord {
                schema: schema.clone(),
                state,
                splits: 0,
                truncate_to: None,
            })
        })();
        if let Err(e) = result {
            for r in route.regions.values() {
                if let Ok(meta) = self.rs.meta() {
                    let _ = meta.delete_region(&name, &r.info);
                }
                let _ = self.rs.bring_down(r, RegionState::Closed);
            }
            let _ = self
                .rs
                .services
                .fs
                .delete_dir_all(&names::table_dir(self.rs.data_dir(), &name));
            return Err(e);
        }
        self.rs.router.insert_table(&name, route);
        tracing::info!(table = %name, regions = count, "table created");
        Ok(())
    }

    /// Closes the table's regions (flushing them); data calls then get TABLE_DISABLED.
    pub fn disable_table(&self, name: &str) -> Result<(), ServerError> {
        let _admin = self.rs.admin.lock();
        self.rs.check_running()?;
        let (name, t) = self.existing_user(name)?;
        if t.state == TableState::Disabled {
            return Err(ServerError::TableDisabled(name));
        }
        self.rs
            .router
            .update_table(&name, |t| t.state = TableState::Disabled);
        self.close_regions(&t)?;
        self.rs.meta()?.put_table(&TableRecord {
            schema: (*t.schema).clone(),
            state: TableState::Disabled,
            splits: t.splits,
            truncate_to: None,
        })?;
        tracing::info!(table = %name, "table disabled");
        Ok(())
    }

    fn close_regions(&self, t: &TableRoute) -> Result<(), ServerError> {
        for hosted in t.regions.values() {
            self.rs.bring_down(hosted, RegionState::Closed)?;
            self.rs
                .meta()?
                .put_region(&self.rs.record_of(hosted, RegionState::Closed))?;
        }
        Ok(())
    }

    /// Opens a disabled table's regions again.
    pub fn enable_table(&self, name: &str) -> Result<(), ServerError> {
        let _admin = self.rs.admin.lock();
        self.rs.check_running()?;
        let (name, t) = self.existing_user(name)?;
        if t.state == TableState::Enabled {
            return Err(ServerError::TableNotDisabled(name));
        }
        for hosted in t.regions.values() {
            self.rs.bring_up(hosted, &t.schema)?;
            self.rs
                .meta()?
                .put_region(&self.rs.record_of(hosted, RegionState::Open))?;
        }
        self.rs.meta()?.put_table(&TableRecord {
            schema: (*t.schema).clone(),
            state: TableState::Enabled,
            splits: t.splits,
            truncate_to: None,
        })?;
        self.rs
            .router
            .update_table(&name, |t| t.state = TableState::Enabled);
        tracing::info!(table = %name, "table enabled");
        Ok(())
    }

    /// Deletes a disabled table: meta rows and files.
    pub fn delete_table(&self, name: &str) -> Result<(), ServerError> {
        let _admin = self.rs.admin.lock();
        self.rs.check_running()?;
        let (name, t) = self.existing_user(name)?;
        if t.state != TableState::Disabled {
            return Err(ServerError::TableNotDisabled(name));
        }
        self.rs.meta()?.delete_table(&name)?;
        self.rs.router.remove_table(&name);
        self.forget_regions(&name, &t)?;
        self.forget_permissions_of(&crate::security::acl::Scope::table(&name))?;
        self.rs
            .services
            .fs
            .delete_dir_all(&names::table_dir(self.rs.data_dir(), &name))?;
        tracing::info!(table = %name, "table deleted");
        Ok(())
    }

    /// Deletes the meta rows of a table's regions and of its split parents.
    pub(crate) fn forget_regions(&self, name: &str, t: &TableRoute) -> Result<(), ServerError> {
        for hosted in t.regions.values() {
            self.rs.meta()?.delete_region(name, &hosted.info)?;
        }
        let parents: Vec<_> = {
            let mut all = self.rs.retired_regions.lock();
            let (mine, others) = all.drain(..).partition(|p| p.table == name);
            *all = others;
            mine
        };
        for p in parents {
            self.rs.meta()?.delete_region(name, &p.info)?;
        }
        Ok(())
    }

    /// Empties a table, keeping its schema: afterwards it has one region and is enabled
    /// (HBase shell's `truncate`).
    pub fn truncate_table(&self, name: &str) -> Result<(), ServerError> {
        self.truncate(name, false)
    }

    /// Runs a truncate only up to its commit point, as if the process died there: for
    /// crash-recovery tests. Drop the server afterwards (without `shutdown`) and open it again.
    #[doc(hidden)]
    pub fn truncate_interrupted(&self, name: &str) -> Result<(), ServerError> {
        self.truncate(name, true)
    }

    fn truncate(&self, name: &str, stop_at_commit: bool) -> Result<(), ServerError> {
        let _admin = self.rs.admin.lock();
        self.rs.check_running()?;
        let (name, t) = self.existing_user(name)?;
        self.rs
            .router
            .update_table(&name, |t| t.state = TableState::Disabled);
        for hosted in t.regions.values() {
            self.rs.bring_down(hosted, RegionState::Closed)?;
        }
        let info = RegionInfo::whole(self.rs.next_region_id());
        let mut record = TableRecord {
            schema: (*t.schema).clone(),
            state: t.state,
            splits: t.splits,
            truncate_to: Some(info.id),
        };
        // The commit point: from here a restart finishes the truncate.
        self.rs.meta()?.put_table(&record)?;
        if stop_at_commit {
            return Ok(());
        }
        self.forget_regions(&name, &t)?;
        let hosted = HostedRegion::new(
            &name,
            info.clone(),
            &self.rs.region_dir(&name, info.id),
            None,
        );
        self.rs.bring_up(&hosted, &t.schema)?;
        self.rs
            .meta()?
            .put_region(&self.rs.record_of(&hosted, RegionState::Open))?;
        record.truncate_to = None;
        record.state = TableState::Enabled;
        record.splits = 0;
        self.rs.meta()?.put_table(&record)?;
        let mut route = TableRoute::new((*t.schema).clone(), TableState::Enabled, 0);
        route.regions.insert(Bytes::new(), hosted);
        self.rs.router.insert_table(&name, route);
        let table_dir = names::table_dir(self.rs.data_dir(), &name);
        for entry in self.rs.services.fs.list(&table_dir)? {
            if entry != info.id.to_string() {
                self.rs.services.fs.delete_dir_all(&table_dir.join(entry))?;
            }
        }
        tracing::info!(table = %name, "table truncated");
        Ok(())
    }

    /// Adds or changes families (`put`, found by name) and removes families (`delete`);
    /// an enabled table's regions reopen with the new schema. Removing the last family, or
    /// one the table does not have, is an error.
    pub fn alter_table(
        &self,
        name: &str,
        put: Vec<FamilySchema>,
        delete: &[String],
    ) -> Result<(), ServerError> {
        self.alter_table_with(name, put, delete, None)
    }

    /// [`Master::alter_table`] that also sets the table's options (`MAX_FILESIZE`,
    /// `DURABILITY`, `READONLY`) when given, in the same change.
    pub fn alter_table_with(
        &self,
        name: &str,
        put: Vec<FamilySchema>,
        delete: &[String],
        options: Option<cellar_model::TableOptions>,
    ) -> Result<(), ServerError> {
        self.alter_schema(name, |name, schema| {
            if let Some(o) = options {
                schema.options = o;
            }
            for f in put {
                match schema.families.iter_mut().find(|g| g.name == f.name) {
                    Some(g) => *g = f,
                    None => schema.families.push(f),
                }
            }
            for d in delete {
                let before = schema.families.len();
                schema.families.retain(|f| &f.name != d);
                if schema.families.len() == before {
                    return Err(ServerError::NoSuchFamily {
                        table: name.to_string(),
                        family: d.clone(),
                    });
                }
            }
            if schema.families.is_empty() {
                return Err(ServerError::invalid(format!(
                    "table '{name}': cannot delete its last column family"
                )));
            }
            Ok(())
        })
    }

    /// Sets a table's options (`MAX_FILESIZE`, `DURABILITY`, `READONLY`); an enabled
    /// table's regions reopen with them.
    pub fn set_table_options(
        &self,
        name: &str,
        options: cellar_model::TableOptions,
    ) -> Result<(), ServerError> {
        self.alter_schema(name, |_, schema| {
            schema.options = options;
            Ok(())
        })
    }

    /// Changes a user table's schema with `change`: meta first, then the router, then an
    /// enabled table's regions reopen with it.
    fn alter_schema(
        &self,
        name: &str,
        change: impl FnOnce(&str, &mut TableSchema) -> Result<(), ServerError>,
    ) -> Result<(), ServerError> {
        let _admin = self.rs.admin.lock();
        self.rs.check_running()?;
        let (name, t) = self.existing_user(name)?;
        let mut schema = (*t.schema).clone();
        change(&name, &mut schema)?;
        schema.validate()?;
        self.rs.meta()?.put_table(&TableRecord {
            schema: schema.clone(),
            state: t.state,
            splits: t.splits,
            truncate_to: None,
        })?;
        self.rs
            .router
            .update_table(&name, |t| t.schema = Arc::new(schema.clone()));
        if t.state == TableState::Enabled {
            for hosted in t.regions.values() {
                self.rs.bring_down(hosted, RegionState::Closed)?;
                self.rs.bring_up(hosted, &schema)?;
            }
        }
        tracing::info!(table = %name, "table altered");
        Ok(())
    }

    /// Flushes every region of an enabled table.
    pub fn flush_table(&self, name: &str) -> Result<(), ServerError> {
        self.each_open_region(name, RegionWork::Flush)
    }

    /// Compacts every region of an enabled table; returns when done.
    pub fn compact_table(&self, name: &str, major: bool) -> Result<(), ServerError> {
        self.each_open_region(name, RegionWork::Compact { major })
    }

    fn each_open_region(&self, name: &str, work: RegionWork) -> Result<(), ServerError> {
        self.rs.check_running()?;
        let (name, t) = self.existing(name)?;
        if t.state == TableState::Disabled {
            return Err(ServerError::TableDisabled(name));
        }
        for hosted in t.regions.values() {
            // A region being split is flushed by its split.
            self.rs.region_work(hosted, work)?;
        }
        Ok(())
    }

    /// STATUS on the master: its region server's numbers, with every live region server and
    /// its regions and the user regions open in the whole cluster (a cluster), and the
    /// balancer switch.
    pub fn status(&self) -> ServerStatus {
        let mut s = self.rs.status();
        if self.assignment().is_some() {
            s.servers = self.server_loads();
            // The cluster's user regions open anywhere, not only those here (meta alone).
            s.regions = 0;
            for (name, t) in self.rs.router.tables() {
                if names::is_system(&name) {
                    continue;
                }
                let open = t
                    .regions
                    .values()
                    .filter(|r| r.state() == RegionState::Open && r.server().is_some())
                    .count();
                s.regions += u32::try_from(open).unwrap_or(u32::MAX);
            }
        }
        s.balancer_on = self.balancer_enabled();
        s
    }

    /// The region servers and their regions: on a cluster's master every live region server
    /// (and regions not open anywhere, under "(not open)"); standalone, this server.
    pub fn server_loads(&self) -> Vec<ServerLoad> {
        let Some(a) = self.assignment() else {
            return self.rs.own_loads();
        };
        let mut by_server: BTreeMap<String, ServerLoad> = BTreeMap::new();
        for s in a.refresh_live().unwrap_or_default() {
            by_server.insert(
                s.name.to_string(),
                ServerLoad {
                    name: s.name.to_string(),
                    native_addr: s.native_addr.clone(),
                    http_addr: s.http_addr.clone(),
                    regions: Vec::new(),
                },
            );
        }
        for (name, t) in self.rs.router.tables() {
            if name == META_TABLE {
                continue;
            }
            for r in t.regions.values() {
                let key = match r.server() {
                    Some(s) if r.state() == RegionState::Open => s.name.to_string(),
                    _ => "(not open)".to_string(),
                };
                by_server
                    .entry(key.clone())
                    .or_insert_with(|| ServerLoad {
                        name: key,
                        ..ServerLoad::default()
                    })
                    .regions
                    .push(r.name());
            }
        }
        by_server.into_values().collect()
    }
}

/// Split keys must be non-empty, sorted and distinct; the error names the first bad one.
fn check_split_keys(table: &str, keys: &[Bytes]) -> Result<(), ServerError> {
    for (i, k) in keys.iter().enumerate() {
        let shown = String::from_utf8_lossy(k);
        if k.is_empty() {
            return Err(ServerError::invalid(format!(
                "table '{table}': split key {i} is empty"
            )));
        }
        if k.len() > cellar_model::key::MAX_ROW_LEN {
            return Err(ServerError::invalid(format!(
                "table '{table}': split key {i} is longer than a row key may be"
            )));
        }
        if i > 0 && keys[i - 1] >= *k {
            return Err(ServerError::invalid(format!(
                "table '{table}': split key {i} {shown:?} is not above the previous one {:?} (keys must be sorted and distinct)",
                String::from_utf8_lossy(&keys[i - 1])
            )));
        }
    }
    Ok(())
}
