//! A recording stand-in for a cluster, for tests of the shell's execution and input loops.
//!
//! Its table's data lives in a [`MemRegion`]: the same [`RegionApi`] a real region offers,
//! held to the storage engine's answers by `cellar_model::region_api::conformance`, so what
//! the shell prints from the fake is what it would print from a server's region.

use super::exec::{Cluster, Rows, TableState};
use bytes::Bytes;
use cellar_model::{
    Cell, CellType, FamilySchema, Get, MemRegion, RegionApi, RowMutation, Scan, TableSchema,
    LATEST_TIMESTAMP,
};

/// The fake's clock: every write at the latest timestamp is stamped with it, and its
/// family's TTL counts from it.
pub const NOW_MS: u64 = 1_795_326_000_123;

/// Records requests, and serves a fixed table `t` with families `cf` and `cf2`.
pub struct Fake {
    pub calls: Vec<String>,
    /// Every mutation asked for, as sent (each is applied to the data too).
    pub mutations: Vec<RowMutation>,
    pub altered: Vec<(Vec<FamilySchema>, Vec<String>)>,
    /// Table options sent with alters.
    pub options_set: Vec<cellar_model::TableOptions>,
    pub scans: Vec<Scan>,
    /// Table `t`'s rows.
    pub data: MemRegion,
    pub enabled: bool,
}

impl Default for Fake {
    fn default() -> Fake {
        Fake {
            calls: Vec::new(),
            mutations: Vec::new(),
            altered: Vec::new(),
            options_set: Vec::new(),
            scans: Vec::new(),
            data: MemRegion::new(Fake::schema())
                .expect("the fake's schema is valid")
                .with_clock(|| NOW_MS),
            enabled: false,
        }
    }
}

/// A put of `cf:q` = `v` in `row`, at [`NOW_MS`].
pub fn cell(row: &[u8], q: &str, v: &[u8]) -> Cell {
    Cell {
        row: Bytes::copy_from_slice(row),
        family: Bytes::from_static(b"cf"),
        qualifier: Bytes::copy_from_slice(q.as_bytes()),
        timestamp: NOW_MS,
        cell_type: CellType::Put,
        seq_id: 1,
        value: Bytes::copy_from_slice(v),
    }
}

impl Fake {
    /// A fake whose table holds `cells` (puts), written one by one.
    pub fn with_cells(cells: Vec<Cell>) -> Fake {
        let fake = Fake::default();
        for c in cells {
            let m = RowMutation::new(c.row).put(&c.family, &c.qualifier, c.timestamp, c.value);
            fake.data.mutate(&m).expect("a put into the fake's table");
        }
        fake
    }

    fn schema() -> TableSchema {
        let mut cf = FamilySchema::new("cf");
        cf.ttl_secs = Some(100);
        TableSchema::new("t", vec![cf, FamilySchema::new("cf2")])
    }

    pub fn state(&self) -> TableState {
        TableState {
            schema: Fake::schema(),
            enabled: self.enabled,
            regions: vec!["['', '') on 127.0.0.1:1".into()],
        }
    }

    fn check(&self, table: &str) -> Result<(), String> {
        if table == "t" {
            Ok(())
        } else {
            Err(format!("table {table} does not exist"))
        }
    }
}

impl Cluster for Fake {
    fn create_table(&mut self, s: TableSchema, _: Vec<Bytes>) -> Result<(), String> {
        self.calls.push(format!("create {}", s.name));
        Ok(())
    }
    fn alter_table(
        &mut self,
        table: &str,
        f: Vec<FamilySchema>,
        d: Vec<String>,
        options: Option<cellar_model::TableOptions>,
    ) -> Result<(), String> {
        self.check(table)?;
        if !f.is_empty() || !d.is_empty() {
            self.altered.push((f, d));
        }
        self.options_set.extend(options);
        Ok(())
    }
    fn list_tables(&mut self) -> Result<Vec<TableState>, String> {
        let mut other = self.state();
        other.schema.name = "abc".into();
        Ok(vec![self.state(), other])
    }
    fn describe_table(&mut self, table: &str) -> Result<TableState, String> {
        self.check(table)?;
        Ok(self.state())
    }
    fn table_exists(&mut self, table: &str) -> Result<bool, String> {
        Ok(table == "t")
    }
    fn mutate(&mut self, table: &str, m: RowMutation) -> Result<(), String> {
        self.check(table)?;
        let applied = self.data.mutate(&m).map_err(|e| e.to_string());
        self.mutations.push(m);
        applied
    }
    fn get(&mut self, table: &str, get: Get) -> Result<Vec<Cell>, String> {
        self.check(table)?;
        self.data.get(&get).map_err(|e| e.to_string())
    }
    fn scan(&mut self, table: &str, scan: Scan) -> Result<Rows<'_>, String> {
        if table == "broken" {
            return Ok(Box::new(std::iter::once(Err(
                "region is offline".to_string()
            ))));
        }
        self.check(table)?;
        let rows = self.data.scan(&scan).map_err(|e| e.to_string())?;
        self.scans.push(scan);
        Ok(Box::new(rows.map(|row| {
            let cells = row.map_err(|e| e.to_string())?;
            let key = cells.first().map(|c| c.row.clone()).unwrap_or_default();
            Ok((key, cells))
        })))
    }
    /// Reads the counter (8 bytes, big-endian; missing is 0), adds, writes: what the server
    /// does for an increment, without its row lock (the fake has one caller).
    fn increment(
        &mut self,
        table: &str,
        row: Bytes,
        family: &[u8],
        qualifier: &[u8],
        amount: i64,
    ) -> Result<i64, String> {
        self.check(table)?;
        let get = Get::new(row.clone()).column(family, qualifier);
        let old = match self.data.get(&get).map_err(|e| e.to_string())?.first() {
            None => 0,
            Some(c) => i64::from_be_bytes(
                c.value[..]
                    .try_into()
                    .map_err(|_| format!("{} bytes, not an 8-byte counter", c.value.len()))?,
            ),
        };
        let new = old.wrapping_add(amount);
        let m = RowMutation::new(row).put(
            family,
            qualifier,
            LATEST_TIMESTAMP,
            new.to_be_bytes().to_vec(),
        );
        self.data.mutate(&m).map_err(|e| e.to_string())?;
        Ok(new)
    }
    fn disable_table(&mut self, table: &str) -> Result<(), String> {
        self.calls.push(format!("disable {table}"));
        self.enabled = false;
        Ok(())
    }
    fn enable_table(&mut self, table: &str) -> Result<(), String> {
        self.calls.push(format!("enable {table}"));
        Ok(())
    }
    fn delete_table(&mut self, table: &str) -> Result<(), String> {
        self.check(table)?;
        self.calls.push(format!("drop {table}"));
        Ok(())
    }
    fn truncate_table(&mut self, table: &str) -> Result<(), String> {
        self.calls.push(format!("truncate {table}"));
        Ok(())
    }
    fn flush(&mut self, table: &str) -> Result<(), String> {
        self.calls.push(format!("flush {table}"));
        Ok(())
    }
    fn major_compact(&mut self, table: &str) -> Result<(), String> {
        self.calls.push(format!("compact {table}"));
        Ok(())
    }
    fn split(&mut self, table: &str, row: Option<&[u8]>) -> Result<(), String> {
        self.calls.push(format!("split {table} {row:?}"));
        Ok(())
    }
    fn status(&mut self, detailed: bool) -> Result<Vec<String>, String> {
        let mut lines = vec!["1 servers, 0 dead".to_string()];
        if detailed {
            lines.push("  fake,1,1: 0 regions".into());
        }
        Ok(lines)
    }
    fn grant(
        &mut self,
        user: &str,
        actions: &str,
        scope: cellar_client::PermissionScope,
    ) -> Result<(), String> {
        self.calls.push(format!("grant {user} {actions} {scope:?}"));
        Ok(())
    }
    fn revoke(&mut self, user: &str, scope: cellar_client::PermissionScope) -> Result<(), String> {
        self.calls.push(format!("revoke {user} {scope:?}"));
        Ok(())
    }
    fn user_permissions(
        &mut self,
        scope: Option<cellar_client::PermissionScope>,
    ) -> Result<Vec<cellar_client::Permission>, String> {
        self.calls.push(format!("user_permission {scope:?}"));
        Ok(Vec::new())
    }
    fn balance_switch(&mut self, on: bool) -> Result<bool, String> {
        self.calls.push(format!("balance_switch {on}"));
        Ok(true)
    }
    fn balance(&mut self) -> Result<(u32, bool), String> {
        self.calls.push("balance".into());
        Ok((0, true))
    }
    fn snapshot(&mut self, table: &str, name: &str, skip_flush: bool) -> Result<(), String> {
        self.calls
            .push(format!("snapshot {table} {name} {skip_flush}"));
        Ok(())
    }
    fn list_snapshots(&mut self) -> Result<Vec<(String, String, u64)>, String> {
        Ok(Vec::new())
    }
    fn delete_snapshot(&mut self, name: &str) -> Result<(), String> {
        self.calls.push(format!("delete_snapshot {name}"));
        Ok(())
    }
    fn clone_snapshot(&mut self, name: &str, table: &str) -> Result<(), String> {
        self.calls.push(format!("clone_snapshot {name} {table}"));
        Ok(())
    }
    fn restore_snapshot(&mut self, name: &str) -> Result<(), String> {
        self.calls.push(format!("restore_snapshot {name}"));
        Ok(())
    }
    fn merge_regions(&mut self, regions: &[String], force: bool) -> Result<Option<String>, String> {
        self.calls.push(format!("merge {regions:?} {force}"));
        Ok(None)
    }
    fn move_region(&mut self, region: &str, server: Option<&str>) -> Result<(), String> {
        self.calls.push(format!("move {region} {server:?}"));
        Ok(())
    }
    fn assign(&mut self, region: &str) -> Result<(), String> {
        self.calls.push(format!("assign {region}"));
        Ok(())
    }
    fn unassign(&mut self, region: &str) -> Result<(), String> {
        self.calls.push(format!("unassign {region}"));
        Ok(())
    }
}
