//! The in-memory region router: table + row → hosted region, region id → hosted region.
//!
//! The meta table is the durable record; the router is what the request path reads. It is
//! rebuilt from meta when the server opens and changed together with meta by admin operations
//! and splits. A split replaces the parent's entry by its daughters' in one step under the
//! router's write lock, so every row always maps to exactly one entry (no gap): a request
//! that reaches the retired parent gets NOT_SERVING_REGION and locates again.

mod hosted;
mod row_locks;
mod state;

pub use hosted::HostedRegion;
pub use row_locks::{RowGuard, RowLocks};
pub use state::{RegionLocation, RegionState};

use crate::error::ServerError;
use bytes::Bytes;
use cellar_model::TableSchema;
use parking_lot::RwLock;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Whether a table takes data calls (HBase's ENABLED / DISABLED).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableState {
    Enabled,
    Disabled,
}

/// A table as the router knows it.
#[derive(Clone)]
pub struct TableRoute {
    pub schema: Arc<TableSchema>,
    pub state: TableState,
    /// Splits of this table so far: its split size doubles with each.
    pub splits: u32,
    /// Regions by start key; together they cover every row exactly once.
    pub regions: BTreeMap<Bytes, Arc<HostedRegion>>,
}

impl TableRoute {
    pub fn new(schema: TableSchema, state: TableState, splits: u32) -> TableRoute {
        TableRoute {
            schema: Arc::new(schema),
            state,
            splits,
            regions: BTreeMap::new(),
        }
    }

    /// The region holding `row`.
    pub fn region_for_row(&self, row: &[u8]) -> Option<&Arc<HostedRegion>> {
        self.regions
            .range::<[u8], _>((std::ops::Bound::Unbounded, std::ops::Bound::Included(row)))
            .next_back()
            .map(|(_, r)| r)
            .filter(|r| r.info.contains_row(row))
    }
}

#[derive(Default)]
struct State {
    tables: BTreeMap<String, TableRoute>,
    by_id: HashMap<u64, Arc<HostedRegion>>,
}

/// Tables and their regions. Cheap reads (one read lock, a hash or tree lookup).
#[derive(Default)]
pub struct Router {
    state: RwLock<State>,
}

impl Router {
    pub fn new() -> Router {
        Router::default()
    }

    /// The region a data call names, checked against the table: an unknown table is
    /// TABLE_NOT_FOUND, a disabled one TABLE_DISABLED, a region id not served here (split,
    /// closed, unknown, or of another table) NOT_SERVING_REGION.
    pub fn region_for_call(&self, table: &str, id: u64) -> Result<Arc<HostedRegion>, ServerError> {
        let st = self.state.read();
        let t = st
            .tables
            .get(table)
            .ok_or_else(|| ServerError::TableNotFound(table.to_string()))?;
        if t.state == TableState::Disabled {
            return Err(ServerError::TableDisabled(table.to_string()));
        }
        match st.by_id.get(&id) {
            Some(r) if r.table == table => Ok(Arc::clone(r)),
            _ => Err(ServerError::not_serving(
                table,
                id,
                "no such region here (split, closed or unknown); locate it again",
            )),
        }
    }

    /// The region of `table` holding `row`, whatever its state.
    pub fn locate(&self, table: &str, row: &[u8]) -> Result<Arc<HostedRegion>, ServerError> {
        let st = self.state.read();
        let t = st
            .tables
            .get(table)
            .ok_or_else(|| ServerError::TableNotFound(table.to_string()))?;
        t.region_for_row(row).cloned().ok_or_else(|| {
            ServerError::Internal(format!(
                "table '{table}' has no region for row {:?}",
                String::from_utf8_lossy(row)
            ))
        })
    }

    /// A copy of a table's route.
    pub fn table(&self, table: &str) -> Option<TableRoute> {
        self.state.read().tables.get(table).cloned()
    }

    /// [`Router::table`], TABLE_NOT_FOUND when missing.
    pub fn require(&self, table: &str) -> Result<TableRoute, ServerError> {
        self.table(table)
            .ok_or_else(|| ServerError::TableNotFound(table.to_string()))
    }

    pub fn contains(&self, table: &str) -> bool {
        self.state.read().tables.contains_key(table)
    }

    /// Every table, by name.
    pub fn tables(&self) -> Vec<(String, TableRoute)> {
        self.state
            .read()
            .tables
            .iter()
            .map(|(n, t)| (n.clone(), t.clone()))
            .collect()
    }

    /// Every hosted region of every table.
    pub fn all_regions(&self) -> Vec<Arc<HostedRegion>> {
        self.state.read().by_id.values().cloned().collect()
    }

    pub fn region(&self, id: u64) -> Option<Arc<HostedRegion>> {
        self.state.read().by_id.get(&id).cloned()
    }

    /// Adds (or replaces) a table with its regions.
    pub fn insert_table(&self, name: &str, route: TableRoute) {
        let mut st = self.state.write();
        if let Some(old) = st.tables.remove(name) {
            for r in old.regions.values() {
                st.by_id.remove(&r.info.id);
            }
        }
        for r in route.regions.values() {
            st.by_id.insert(r.info.id, Arc::clone(r));
        }
        st.tables.insert(name.to_string(), route);
    }

    /// Removes a table and returns it.
    pub fn remove_table(&self, name: &str) -> Option<TableRoute> {
        let mut st = self.state.write();
        let old = st.tables.remove(name)?;
        for r in old.regions.values() {
            st.by_id.remove(&r.info.id);
        }
        Some(old)
    }

    /// Changes a table's state, schema or split count in place.
    pub fn update_table(&self, name: &str, f: impl FnOnce(&mut TableRoute)) {
        if let Some(t) = self.state.write().tables.get_mut(name) {
            f(t);
        }
    }

    /// Adds one region to `table`, creating the table's route (enabled, with `schema`) if this
    /// server has none yet, and taking `schema` if it has (a region server in a cluster
    /// learns tables region by region).
    pub fn add_region(&self, schema: &TableSchema, region: Arc<HostedRegion>) {
        let mut st = self.state.write();
        let State { tables, by_id } = &mut *st;
        let t = tables
            .entry(region.table.clone())
            .or_insert_with(|| TableRoute::new(schema.clone(), TableState::Enabled, 0));
        if *t.schema != *schema {
            t.schema = Arc::new(schema.clone());
        }
        if let Some(old) = by_id.insert(region.info.id, Arc::clone(&region)) {
            t.regions.remove(&old.info.start_key);
        }
        t.regions.insert(region.info.start_key.clone(), region);
    }

    /// Removes one region; a table left with none is forgotten.
    pub fn remove_region(&self, id: u64) -> Option<Arc<HostedRegion>> {
        let mut st = self.state.write();
        let State { tables, by_id } = &mut *st;
        let r = by_id.remove(&id)?;
        if let Some(t) = tables.get_mut(&r.table) {
            t.regions.remove(&r.info.start_key);
            if t.regions.is_empty() {
                tables.remove(&r.table);
            }
        }
        Some(r)
    }

    /// Replaces region `parent` of `table` by `daughters` in one step.
    pub fn swap_split(&self, table: &str, parent: u64, daughters: [Arc<HostedRegion>; 2]) {
        let mut st = self.state.write();
        let State { tables, by_id } = &mut *st;
        let Some(t) = tables.get_mut(table) else {
            return;
        };
        if let Some(p) = by_id.remove(&parent) {
            t.regions.remove(&p.info.start_key);
        }
        for d in daughters {
            by_id.insert(d.info.id, Arc::clone(&d));
            t.regions.insert(d.info.start_key.clone(), d);
        }
        t.splits = t.splits.saturating_add(1);
    }
}

impl Router {
    /// Replaces a merge's parents by the merged region, in one step.
    pub fn swap_merge(&self, table: &str, parents: &[u64], merged: Arc<HostedRegion>) {
        let mut st = self.state.write();
        let State { tables, by_id } = &mut *st;
        let Some(t) = tables.get_mut(table) else {
            return;
        };
        for id in parents {
            if let Some(p) = by_id.remove(id) {
                t.regions.remove(&p.info.start_key);
            }
        }
        by_id.insert(merged.info.id, Arc::clone(&merged));
        t.regions.insert(merged.info.start_key.clone(), merged);
    }
}

/// A table as `describe` and `list` report it.
#[derive(Debug, Clone)]
pub struct TableInfo {
    pub schema: Arc<TableSchema>,
    pub state: TableState,
    /// Its regions in key order.
    pub regions: Vec<RegionLocation>,
}
