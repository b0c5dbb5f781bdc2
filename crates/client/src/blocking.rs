//! The same client for synchronous code: every call runs on one runtime shared by all
//! blocking clients (two worker threads), so connections keep being served between calls.
//! Do not call these from inside an async runtime (blocking a runtime thread on itself
//! would panic); use the async API there.

use crate::error::{Error, Result};
use crate::location::RegionLocation;
use crate::{BatchOp, BatchOutcome, ClientConfig, Row, Status, TableInfo};
use bytes::Bytes;
use cellar_model::{Condition, FamilySchema, Get, RowMutation, Scan, TableSchema};
use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::runtime::Runtime;

fn runtime() -> Result<&'static Runtime> {
    static RUNTIME: OnceLock<std::result::Result<Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("cellar-client")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| {
            Error::Io(std::io::Error::other(format!(
                "cannot start the client runtime: {e}"
            )))
        })
}

fn block_on<F: Future>(f: F) -> Result<F::Output> {
    Ok(runtime()?.block_on(f))
}

/// A blocking [`crate::Client`].
#[derive(Clone, Debug)]
pub struct Client {
    inner: crate::Client,
}

impl Client {
    pub fn connect(addr: &str) -> Result<Client> {
        Client::connect_with(addr, ClientConfig::default())
    }

    pub fn connect_with(addr: &str, config: ClientConfig) -> Result<Client> {
        let inner = block_on(crate::Client::connect_with(addr, config))??;
        Ok(Client { inner })
    }

    pub fn table(&self, name: &str) -> Table {
        Table {
            inner: self.inner.table(name),
        }
    }

    pub fn admin(&self) -> Admin {
        Admin {
            inner: self.inner.admin(),
        }
    }

    /// Whether calls travel over UCX (see [`crate::Client::uses_ucx`]).
    pub fn uses_ucx(&self) -> Result<bool> {
        block_on(self.inner.uses_ucx())?
    }

    pub fn ping(&self) -> Result<Duration> {
        block_on(self.inner.ping())?
    }

    /// The async client underneath.
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }
}

/// A blocking [`crate::Table`].
#[derive(Clone, Debug)]
pub struct Table {
    inner: crate::Table,
}

impl Table {
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    pub fn get(&self, get: Get) -> Result<Row> {
        block_on(self.inner.get(get))?
    }

    pub fn mutate(&self, m: RowMutation) -> Result<()> {
        block_on(self.inner.mutate(m))?
    }

    pub fn put(&self, m: RowMutation) -> Result<()> {
        block_on(self.inner.put(m))?
    }

    pub fn delete(&self, m: RowMutation) -> Result<()> {
        block_on(self.inner.delete(m))?
    }

    pub fn increment(
        &self,
        row: &[u8],
        family: &[u8],
        qualifier: &[u8],
        amount: i64,
    ) -> Result<i64> {
        block_on(self.inner.increment(row, family, qualifier, amount))?
    }

    pub fn increment_columns(&self, row: &[u8], cols: &[(&[u8], &[u8], i64)]) -> Result<Row> {
        block_on(self.inner.increment_columns(row, cols))?
    }

    pub fn append(&self, row: &[u8], cols: &[(&[u8], &[u8], &[u8])]) -> Result<Row> {
        block_on(self.inner.append(row, cols))?
    }

    pub fn check_and_mutate(&self, cond: Condition, m: RowMutation) -> Result<bool> {
        block_on(self.inner.check_and_mutate(cond, m))?
    }

    pub fn batch(&self, ops: Vec<BatchOp>) -> Result<Vec<Result<BatchOutcome>>> {
        block_on(self.inner.batch(ops))?
    }

    pub fn put_all(&self, ms: Vec<RowMutation>) -> Result<()> {
        block_on(self.inner.put_all(ms))?
    }

    pub fn scan(&self, scan: Scan) -> Scanner {
        Scanner {
            inner: self.inner.scan(scan),
        }
    }

    /// A blocking [`crate::Table::prepare_scan`].
    pub fn prepare_scan(&self, scan: Scan, compress: bool) -> PreparedScan {
        PreparedScan {
            inner: self.inner.prepare_scan(scan, compress),
        }
    }
}

/// A blocking [`crate::PreparedScan`].
#[derive(Debug)]
pub struct PreparedScan {
    inner: crate::PreparedScan,
}

impl PreparedScan {
    /// See [`crate::PreparedScan::execute`].
    pub fn execute(
        &self,
        start: impl Into<Bytes>,
        stop: impl Into<Bytes>,
        limit: u64,
        caching: u32,
    ) -> Scanner {
        Scanner {
            inner: self.inner.execute(start, stop, limit, caching),
        }
    }

    pub fn close(&self) -> Result<()> {
        block_on(self.inner.close())
    }
}

/// A blocking [`crate::Scanner`]: an iterator of rows.
#[derive(Debug)]
pub struct Scanner {
    inner: crate::Scanner,
}

impl Scanner {
    /// The next row; `None` at the end.
    pub fn next_row(&mut self) -> Result<Option<Row>> {
        block_on(self.inner.next())?
    }
}

impl Iterator for Scanner {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        self.next_row().transpose()
    }
}

/// A blocking [`crate::Admin`].
#[derive(Clone, Debug)]
pub struct Admin {
    inner: crate::Admin,
}

impl Admin {
    pub fn create_table(&self, schema: TableSchema, split_keys: Vec<Bytes>) -> Result<()> {
        block_on(self.inner.create_table(schema, split_keys))?
    }

    pub fn delete_table(&self, table: &str) -> Result<()> {
        block_on(self.inner.delete_table(table))?
    }

    pub fn disable_table(&self, table: &str) -> Result<()> {
        block_on(self.inner.disable_table(table))?
    }

    pub fn enable_table(&self, table: &str) -> Result<()> {
        block_on(self.inner.enable_table(table))?
    }

    pub fn truncate_table(&self, table: &str) -> Result<()> {
        block_on(self.inner.truncate_table(table))?
    }

    pub fn alter_table(
        &self,
        table: &str,
        put_families: Vec<FamilySchema>,
        delete_families: Vec<String>,
    ) -> Result<()> {
        block_on(self.inner.alter_table(table, put_families, delete_families))?
    }

    /// A blocking [`crate::Admin::alter_table_with`].
    pub fn alter_table_with(
        &self,
        table: &str,
        put_families: Vec<FamilySchema>,
        delete_families: Vec<String>,
        options: Option<cellar_model::TableOptions>,
    ) -> Result<()> {
        block_on(
            self.inner
                .alter_table_with(table, put_families, delete_families, options),
        )?
    }

    pub fn list_tables(&self) -> Result<Vec<TableInfo>> {
        block_on(self.inner.list_tables())?
    }

    pub fn describe_table(&self, table: &str) -> Result<TableInfo> {
        block_on(self.inner.describe_table(table))?
    }

    pub fn table_exists(&self, table: &str) -> Result<bool> {
        block_on(self.inner.table_exists(table))?
    }

    pub fn list_regions(&self, table: &str) -> Result<Vec<RegionLocation>> {
        block_on(self.inner.list_regions(table))?
    }

    pub fn flush(&self, table: &str) -> Result<()> {
        block_on(self.inner.flush(table))?
    }

    /// A blocking [`crate::Admin::bulk_load`].
    pub fn bulk_load(
        &self,
        table: &str,
        row: &[u8],
        files: Vec<crate::BulkLoadFile>,
    ) -> Result<crate::BulkLoaded> {
        block_on(self.inner.bulk_load(table, row, files))?
    }

    pub fn compact(&self, table: &str, major: bool) -> Result<()> {
        block_on(self.inner.compact(table, major))?
    }

    pub fn split(&self, table: &str, split_row: Option<&[u8]>) -> Result<()> {
        block_on(self.inner.split(table, split_row))?
    }

    /// See [`crate::Admin::server_status`].
    pub fn server_status(&self, server: &str) -> Result<crate::Status> {
        block_on(self.inner.server_status(server))?
    }

    /// See [`crate::Admin::balance`].
    pub fn balance(&self) -> Result<(u32, bool)> {
        block_on(self.inner.balance())?
    }

    /// See [`crate::Admin::grant`].
    pub fn grant(&self, user: &str, scope: crate::PermissionScope, actions: &str) -> Result<()> {
        block_on(self.inner.grant(user, scope, actions))?
    }

    /// See [`crate::Admin::revoke`].
    pub fn revoke(
        &self,
        user: &str,
        scope: crate::PermissionScope,
        actions: Option<&str>,
    ) -> Result<()> {
        block_on(self.inner.revoke(user, scope, actions))?
    }

    /// See [`crate::Admin::user_permissions`].
    pub fn user_permissions(
        &self,
        scope: Option<crate::PermissionScope>,
        user: Option<&str>,
    ) -> Result<Vec<crate::Permission>> {
        block_on(self.inner.user_permissions(scope, user))?
    }

    /// See [`crate::Admin::balance_switch`].
    pub fn balance_switch(&self, on: bool) -> Result<bool> {
        block_on(self.inner.balance_switch(on))?
    }

    /// See [`crate::Admin::snapshot`].
    pub fn snapshot(&self, table: &str, name: &str, skip_flush: bool) -> Result<()> {
        block_on(self.inner.snapshot(table, name, skip_flush))?
    }

    /// See [`crate::Admin::list_snapshots`].
    pub fn list_snapshots(&self) -> Result<Vec<cellar_proto::pb::SnapshotInfo>> {
        block_on(self.inner.list_snapshots())?
    }

    /// See [`crate::Admin::delete_snapshot`].
    pub fn delete_snapshot(&self, name: &str) -> Result<()> {
        block_on(self.inner.delete_snapshot(name))?
    }

    /// See [`crate::Admin::clone_snapshot`].
    pub fn clone_snapshot(&self, name: &str, table: &str) -> Result<()> {
        block_on(self.inner.clone_snapshot(name, table))?
    }

    /// See [`crate::Admin::restore_snapshot`].
    pub fn restore_snapshot(&self, name: &str) -> Result<()> {
        block_on(self.inner.restore_snapshot(name))?
    }

    /// See [`crate::Admin::merge_regions`].
    pub fn merge_regions(
        &self,
        regions: &[&str],
        forcible: bool,
    ) -> Result<Option<RegionLocation>> {
        block_on(self.inner.merge_regions(regions, forcible))?
    }

    /// See [`crate::Admin::move_region`].
    pub fn move_region(&self, region: &str, server: Option<&str>) -> Result<()> {
        block_on(self.inner.move_region(region, server))?
    }

    /// See [`crate::Admin::assign_region`].
    pub fn assign_region(&self, region: &str) -> Result<()> {
        block_on(self.inner.assign_region(region))?
    }

    /// See [`crate::Admin::unassign_region`].
    pub fn unassign_region(&self, region: &str) -> Result<()> {
        block_on(self.inner.unassign_region(region))?
    }

    pub fn status(&self) -> Result<Status> {
        block_on(self.inner.status())?
    }
}
