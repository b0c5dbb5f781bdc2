//! A recording stand-in for a cluster, for tests of the shell's execution and input loops.

use super::exec::{Cluster, Rows, TableState};
use bytes::Bytes;
use cellar_model::{Cell, CellType, FamilySchema, Get, RowMutation, Scan, TableSchema};

/// Records requests and answers from a fixed table `t` with families `cf` and `cf2`.
#[derive(Default)]
pub struct Fake {
    pub calls: Vec<String>,
    pub mutations: Vec<RowMutation>,
    pub altered: Vec<(Vec<FamilySchema>, Vec<String>)>,
    /// Table options sent with alters.
    pub options_set: Vec<cellar_model::TableOptions>,
    pub scans: Vec<Scan>,
    pub rows: Vec<(Bytes, Vec<Cell>)>,
    pub enabled: bool,
}

pub fn cell(row: &[u8], q: &str, v: &[u8]) -> Cell {
    Cell {
        row: Bytes::copy_from_slice(row),
        family: Bytes::from_static(b"cf"),
        qualifier: Bytes::copy_from_slice(q.as_bytes()),
        timestamp: 1_795_326_000_123,
        cell_type: CellType::Put,
        seq_id: 1,
        value: Bytes::copy_from_slice(v),
    }
}

impl Fake {
    pub fn state(&self) -> TableState {
        let mut cf = FamilySchema::new("cf");
        cf.ttl_secs = Some(100);
        TableState {
            schema: TableSchema::new("t", vec![cf, FamilySchema::new("cf2")]),
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
        self.mutations.push(m);
        Ok(())
    }
    fn get(&mut self, table: &str, get: Get) -> Result<Vec<Cell>, String> {
        self.check(table)?;
        Ok(self
            .rows
            .iter()
            .filter(|(r, _)| *r == get.row)
            .flat_map(|(_, c)| c.clone())
            .collect())
    }
    fn scan(&mut self, table: &str, scan: Scan) -> Result<Rows<'_>, String> {
        if table == "broken" {
            return Ok(Box::new(std::iter::once(Err(
                "region is offline".to_string()
            ))));
        }
        self.check(table)?;
        self.scans.push(scan);
        Ok(Box::new(self.rows.clone().into_iter().map(Ok)))
    }
    fn increment(
        &mut self,
        _: &str,
        _: Bytes,
        _: &[u8],
        _: &[u8],
        amount: i64,
    ) -> Result<i64, String> {
        Ok(10 + amount)
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
