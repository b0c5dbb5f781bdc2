//! Table administration and server status.

use crate::cluster::Inner;
use crate::error::{missing, Error, Result};
use crate::location::RegionLocation;
use bytes::Bytes;
use cellar_model::{FamilySchema, ServerStatus as Status, TableSchema};
use cellar_proto::convert;
use cellar_proto::pb::{self, ErrorCode, Method, Permission, PermissionScope};
use std::sync::Arc;

/// A table's schema, state and regions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableInfo {
    pub schema: TableSchema,
    pub enabled: bool,
    pub regions: Vec<RegionLocation>,
}

/// Administration calls; they go to the server given to `connect`.
#[derive(Clone)]
pub struct Admin {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("server", &self.inner.bootstrap)
            .finish()
    }
}

fn table_request(table: &str) -> pb::TableRequest {
    pb::TableRequest {
        table: table.to_string(),
    }
}

impl Admin {
    pub(crate) fn new(inner: Arc<Inner>) -> Admin {
        Admin { inner }
    }

    /// Creates a table; `split_keys` pre-split it (one region per gap between the keys).
    pub async fn create_table(&self, schema: TableSchema, split_keys: Vec<Bytes>) -> Result<()> {
        let req = pb::CreateTableRequest {
            schema: Some(convert::schema_to_pb(&schema)),
            split_keys,
        };
        self.inner.cache.invalidate_table(&schema.name);
        self.change(Method::CreateTable, &req, &schema.name).await
    }

    pub async fn delete_table(&self, table: &str) -> Result<()> {
        self.change(Method::DeleteTable, &table_request(table), table)
            .await
    }

    pub async fn disable_table(&self, table: &str) -> Result<()> {
        self.change(Method::DisableTable, &table_request(table), table)
            .await
    }

    pub async fn enable_table(&self, table: &str) -> Result<()> {
        self.change(Method::EnableTable, &table_request(table), table)
            .await
    }

    /// Removes every row, keeping the schema (and the region boundaries, as HBase's
    /// `truncate_preserve` does, if the server keeps them).
    pub async fn truncate_table(&self, table: &str) -> Result<()> {
        self.change(Method::TruncateTable, &table_request(table), table)
            .await
    }

    /// Adds families or changes their options (`put_families`, found by name) and removes
    /// families (`delete_families`).
    pub async fn alter_table(
        &self,
        table: &str,
        put_families: Vec<FamilySchema>,
        delete_families: Vec<String>,
    ) -> Result<()> {
        self.alter_table_with(table, put_families, delete_families, None)
            .await
    }

    /// [`Admin::alter_table`] that also sets the table's options when `options` is given.
    pub async fn alter_table_with(
        &self,
        table: &str,
        put_families: Vec<FamilySchema>,
        delete_families: Vec<String>,
        options: Option<cellar_model::TableOptions>,
    ) -> Result<()> {
        let req = pb::AlterTableRequest {
            table: table.to_string(),
            put_families: put_families.iter().map(convert::family_to_pb).collect(),
            delete_families,
            options: options.as_ref().map(convert::options_to_pb),
        };
        self.change(Method::AlterTable, &req, table).await
    }

    pub async fn list_tables(&self) -> Result<Vec<TableInfo>> {
        let r: pb::ListTablesResponse = self
            .inner
            .master_call(Method::ListTables, &pb::Empty {}, true)
            .await?
            .decode("ListTablesResponse")?;
        r.tables.into_iter().map(table_info_from_pb).collect()
    }

    pub async fn describe_table(&self, table: &str) -> Result<TableInfo> {
        let r: pb::DescribeTableResponse = self
            .inner
            .master_call(Method::DescribeTable, &table_request(table), true)
            .await?
            .decode("DescribeTableResponse")?;
        table_info_from_pb(r.table.ok_or_else(|| missing("the table"))?)
    }

    pub async fn table_exists(&self, table: &str) -> Result<bool> {
        match self.describe_table(table).await {
            Ok(_) => Ok(true),
            Err(e) if e.code() == Some(ErrorCode::TableNotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The table's regions in key order (and the client's location cache is refreshed).
    pub async fn list_regions(&self, table: &str) -> Result<Vec<RegionLocation>> {
        self.inner.list_regions(table).await
    }

    /// Writes the table's memstores to store files.
    pub async fn flush(&self, table: &str) -> Result<()> {
        self.change(Method::FlushTable, &table_request(table), table)
            .await
    }

    /// Compacts the table's stores; `major` rewrites each store into one file.
    pub async fn compact(&self, table: &str, major: bool) -> Result<()> {
        let req = pb::CompactTableRequest {
            table: table.to_string(),
            major,
        };
        self.change(Method::CompactTable, &req, table).await
    }

    /// Splits the region holding `split_row` there, or (`None`) every region at its middle.
    pub async fn split(&self, table: &str, split_row: Option<&[u8]>) -> Result<()> {
        let req = pb::SplitTableRequest {
            table: table.to_string(),
            split_row: split_row.map(Bytes::copy_from_slice),
        };
        self.change(Method::SplitTable, &req, table).await
    }

    pub async fn status(&self) -> Result<Status> {
        let r: pb::StatusResponse = self
            .inner
            .master_call(Method::Status, &pb::Empty {}, true)
            .await?
            .decode("StatusResponse")?;
        Ok(convert::status_from_pb(r))
    }

    /// The status of one server (`host:port`, native), e.g. a region server and its regions.
    /// One attempt.
    pub async fn server_status(&self, server: &str) -> Result<Status> {
        let conn = self.inner.connection(server).await?;
        let r: pb::StatusResponse = conn
            .call(Method::Status, &pb::Empty {}, &[])
            .await?
            .decode("StatusResponse")?;
        Ok(convert::status_from_pb(r))
    }
}

impl Admin {
    /// Grants `actions` (HBase's letters, `"RW"`) to `user` (or `@group`) at `scope` (the
    /// default scope is global), adding to what it holds there. Needs ADMIN at the scope.
    pub async fn grant(&self, user: &str, scope: PermissionScope, actions: &str) -> Result<()> {
        let req = pb::GrantRequest {
            permission: Some(Permission {
                user: user.to_string(),
                scope: Some(scope),
                actions: actions.to_string(),
            }),
        };
        self.inner.master_call(Method::Grant, &req, true).await?;
        Ok(())
    }

    /// Takes `actions` (all when `None`) from what `user` holds at exactly `scope`.
    pub async fn revoke(
        &self,
        user: &str,
        scope: PermissionScope,
        actions: Option<&str>,
    ) -> Result<()> {
        let req = pb::RevokeRequest {
            permission: Some(Permission {
                user: user.to_string(),
                scope: Some(scope),
                actions: actions.unwrap_or_default().to_string(),
            }),
        };
        self.inner.master_call(Method::Revoke, &req, true).await?;
        Ok(())
    }

    /// The grants at and inside `scope` (all when `None`), of `user` when given.
    pub async fn user_permissions(
        &self,
        scope: Option<PermissionScope>,
        user: Option<&str>,
    ) -> Result<Vec<Permission>> {
        let req = pb::UserPermissionsRequest {
            scope,
            user: user.unwrap_or_default().to_string(),
        };
        let r: pb::UserPermissionsResponse = self
            .inner
            .master_call(Method::UserPermissions, &req, true)
            .await?
            .decode("UserPermissionsResponse")?;
        Ok(r.permissions)
    }

    /// Runs the balancer now: `(regions moved, whether the balancer is on)`.
    pub async fn balance(&self) -> Result<(u32, bool)> {
        let r: pb::BalanceResponse = self
            .inner
            .master_call(Method::Balance, &pb::Empty {}, false)
            .await?
            .decode("BalanceResponse")?;
        self.inner.cache.clear();
        Ok((r.moved, r.enabled))
    }

    /// Turns the balancer on or off; whether it was on.
    pub async fn balance_switch(&self, on: bool) -> Result<bool> {
        let r: pb::BalanceSwitchResponse = self
            .inner
            .master_call(
                Method::BalanceSwitch,
                &pb::BalanceSwitchRequest { on },
                true,
            )
            .await?
            .decode("BalanceSwitchResponse")?;
        Ok(r.previous)
    }

    /// Merges two or more adjacent regions of one table (each named by id, region name or
    /// encoded name) into one; returns the merged region. Regions with a gap between them are
    /// refused, `forcible` or not. Not retried once sent.
    pub async fn merge_regions(
        &self,
        regions: &[&str],
        forcible: bool,
    ) -> Result<Option<RegionLocation>> {
        let req = pb::MergeRegionsRequest {
            regions: regions.iter().map(|r| r.to_string()).collect(),
            forcible,
        };
        let r = self
            .inner
            .master_call(Method::MergeRegions, &req, false)
            .await;
        self.inner.cache.clear();
        let r: pb::MergeRegionsResponse = r?.decode("MergeRegionsResponse")?;
        Ok(r.merged.map(RegionLocation::from_pb))
    }

    /// Takes snapshot `name` of `table`: each region is flushed first unless `skip_flush`.
    pub async fn snapshot(&self, table: &str, name: &str, skip_flush: bool) -> Result<()> {
        let req = pb::SnapshotRequest {
            table: table.to_string(),
            name: name.to_string(),
            skip_flush,
        };
        self.change(Method::Snapshot, &req, table).await
    }

    /// Every snapshot, oldest first.
    pub async fn list_snapshots(&self) -> Result<Vec<pb::SnapshotInfo>> {
        let r: pb::ListSnapshotsResponse = self
            .inner
            .master_call(Method::ListSnapshots, &pb::Empty {}, true)
            .await?
            .decode("ListSnapshotsResponse")?;
        Ok(r.snapshots)
    }

    /// Deletes snapshot `name`.
    pub async fn delete_snapshot(&self, name: &str) -> Result<()> {
        let req = pb::SnapshotNameRequest {
            name: name.to_string(),
        };
        self.inner
            .master_call(Method::DeleteSnapshot, &req, false)
            .await
            .map(|_| ())
    }

    /// Creates table `table` from snapshot `name` (no data is copied).
    pub async fn clone_snapshot(&self, name: &str, table: &str) -> Result<()> {
        let req = pb::CloneSnapshotRequest {
            name: name.to_string(),
            table: table.to_string(),
        };
        self.change(Method::CloneSnapshot, &req, table).await
    }

    /// Brings the snapshot's (disabled) table back to snapshot `name`.
    pub async fn restore_snapshot(&self, name: &str) -> Result<()> {
        let req = pb::SnapshotNameRequest {
            name: name.to_string(),
        };
        let r = self
            .inner
            .master_call(Method::RestoreSnapshot, &req, false)
            .await;
        self.inner.cache.clear();
        r.map(|_| ())
    }

    /// Moves a region (id, name or encoded name) to `server` (`host,port,startcode` or the
    /// native `host:port`), or to the least loaded other server.
    pub async fn move_region(&self, region: &str, server: Option<&str>) -> Result<()> {
        let req = pb::MoveRegionRequest {
            region: region.to_string(),
            server: server.map(str::to_string),
        };
        let r = self
            .inner
            .master_call(Method::MoveRegion, &req, false)
            .await;
        self.inner.cache.clear();
        r.map(|_| ())
    }

    /// Opens a region that is not open.
    pub async fn assign_region(&self, region: &str) -> Result<()> {
        let req = pb::RegionNameRequest {
            region: region.to_string(),
        };
        let r = self
            .inner
            .master_call(Method::AssignRegion, &req, false)
            .await;
        self.inner.cache.clear();
        r.map(|_| ())
    }

    /// Closes a region and keeps it closed until [`Admin::assign_region`].
    pub async fn unassign_region(&self, region: &str) -> Result<()> {
        let req = pb::RegionNameRequest {
            region: region.to_string(),
        };
        let r = self
            .inner
            .master_call(Method::UnassignRegion, &req, false)
            .await;
        self.inner.cache.clear();
        r.map(|_| ())
    }

    /// Region server control (the master's calls in a cluster): opens `region` of `schema`'s
    /// table on the region server at `server` (`host:port`, native), which must have started
    /// at `target_startcode`, as open number `open_seq` of the region, for `master` (the
    /// sending master's server name). One attempt.
    #[allow(clippy::too_many_arguments, reason = "the request's fields, one each")]
    pub async fn open_region(
        &self,
        server: &str,
        region: &RegionLocation,
        schema: &TableSchema,
        table_splits: u32,
        target_startcode: u64,
        open_seq: u64,
        master: &str,
    ) -> Result<()> {
        let req = pb::OpenRegionRequest {
            region: Some(pb::RegionLocation {
                table: region.table.clone(),
                region_id: region.region_id,
                start_key: region.start_key.clone(),
                end_key: region.end_key.clone(),
                server: server.to_string(),
                name: region.name.clone(),
                state: pb::RegionState::Open as i32,
            }),
            schema: Some(convert::schema_to_pb(schema)),
            table_splits,
            target_startcode,
            open_seq,
            master: master.to_string(),
        };
        self.server_call(server, Method::OpenRegion, &req).await
    }

    /// Region server control: flushes and closes a region on `server`; from then on it
    /// refuses opens of the region numbered `fence_seq` or lower. One attempt.
    pub async fn close_region(
        &self,
        server: &str,
        table: &str,
        region_id: u64,
        fence_seq: u64,
    ) -> Result<()> {
        let req = pb::CloseRegionRequest {
            region: Some(pb::RegionRef {
                table: table.to_string(),
                region_id,
            }),
            fence_seq,
        };
        self.server_call(server, Method::CloseRegion, &req).await
    }

    /// Region server control: flushes a region on `server`, then compacts it if `compact`.
    pub async fn flush_region(
        &self,
        server: &str,
        table: &str,
        region_id: u64,
        compact: bool,
        major: bool,
    ) -> Result<()> {
        let req = pb::FlushRegionRequest {
            region: Some(pb::RegionRef {
                table: table.to_string(),
                region_id,
            }),
            compact,
            major,
        };
        self.server_call(server, Method::FlushRegion, &req).await
    }

    /// Bulk load: brings HBase store files (`files`: family, path on the region server's
    /// machine under its `bulk_load.dirs`, and the rows to keep) into the region of `table`
    /// holding `row`, without the write path (`docs/migration.md`). All or nothing: a file
    /// that cannot be read, or holds rows outside the region, refuses the load. Retried like
    /// a read: loading the same files twice leaves the same cells.
    pub async fn bulk_load(
        &self,
        table: &str,
        row: &[u8],
        files: Vec<BulkLoadFile>,
    ) -> Result<BulkLoaded> {
        let files: Vec<pb::BulkLoadFile> = files
            .into_iter()
            .map(|f| pb::BulkLoadFile {
                family: f.family,
                path: f.path,
                keep_from: f.keep_from,
                keep_to: f.keep_to,
            })
            .collect();
        let r: pb::BulkLoadRegionResponse = self
            .inner
            .region_call(
                table,
                row,
                Method::BulkLoadRegion,
                |region| pb::BulkLoadRegionRequest {
                    region: Some(region),
                    files: files.clone(),
                },
                &[],
                true,
            )
            .await?
            .decode("BulkLoadRegionResponse")?;
        Ok(BulkLoaded {
            cells: r.cells,
            files: r.files,
            bytes_read: r.bytes_read,
        })
    }

    /// Region server control: flushes a region on `server` and compacts away its references;
    /// its middle row, if it has one. One attempt.
    pub async fn prepare_split(
        &self,
        server: &str,
        table: &str,
        region_id: u64,
    ) -> Result<Option<Bytes>> {
        let req = pb::PrepareSplitRequest {
            region: Some(pb::RegionRef {
                table: table.to_string(),
                region_id,
            }),
        };
        let conn = self.inner.connection(server).await?;
        let r: pb::PrepareSplitResponse = conn
            .call(Method::PrepareSplit, &req, &[])
            .await?
            .decode("PrepareSplitResponse")?;
        Ok(r.middle_row)
    }

    /// Region server control: closes a region on `server` and writes its daughters
    /// (`daughters.0` below `split_row`, `daughters.1` from it). One attempt.
    pub async fn split_region_on(
        &self,
        server: &str,
        table: &str,
        region_id: u64,
        split_row: Bytes,
        daughters: (u64, u64),
    ) -> Result<()> {
        let req = pb::SplitRegionRequest {
            region: Some(pb::RegionRef {
                table: table.to_string(),
                region_id,
            }),
            split_row,
            daughter_a: daughters.0,
            daughter_b: daughters.1,
        };
        self.server_call(server, Method::SplitRegion, &req).await
    }

    /// Region server control: closes adjacent regions on `server` (in key order) and writes
    /// region `merged` reading their files. One attempt.
    pub async fn merge_regions_on(
        &self,
        server: &str,
        table: &str,
        region_ids: &[u64],
        merged: u64,
    ) -> Result<()> {
        let req = pb::MergeRegionRequest {
            table: table.to_string(),
            region_ids: region_ids.to_vec(),
            merged,
        };
        self.server_call(server, Method::MergeRegion, &req).await
    }

    /// Region server control: flushes a region on `server` (unless `skip_flush`) and names
    /// its store files, for a snapshot. One attempt.
    pub async fn snapshot_region_on(
        &self,
        server: &str,
        table: &str,
        region_id: u64,
        skip_flush: bool,
    ) -> Result<Vec<pb::SnapshotFileRef>> {
        let req = pb::SnapshotRegionRequest {
            region: Some(pb::RegionRef {
                table: table.to_string(),
                region_id,
            }),
            skip_flush,
        };
        let conn = self.inner.connection(server).await?;
        let r: pb::SnapshotRegionResponse = conn
            .call(Method::SnapshotRegion, &req, &[])
            .await?
            .decode("SnapshotRegionResponse")?;
        Ok(r.files)
    }

    async fn server_call(
        &self,
        server: &str,
        method: Method,
        req: &impl prost::Message,
    ) -> Result<()> {
        let conn = self.inner.connection(server).await?;
        conn.call(method, req, &[]).await.map(|_| ())
    }

    /// A call that changes a table: not retried once sent (it may have been applied), and the
    /// table's cached locations are dropped afterwards (regions may have changed).
    async fn change(&self, method: Method, req: &impl prost::Message, table: &str) -> Result<()> {
        let result = self.inner.master_call(method, req, false).await;
        self.inner.cache.invalidate_table(table);
        result.map(|_| ())
    }
}

/// One file of a bulk load ([`Admin::bulk_load`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkLoadFile {
    pub family: String,
    /// A path (or file:// URL) on the region server's machine.
    pub path: String,
    /// Only rows in `[keep_from, keep_to)`; empty: unbounded.
    pub keep_from: Bytes,
    pub keep_to: Bytes,
}

/// What a bulk load brought in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BulkLoaded {
    pub cells: u64,
    pub files: u64,
    /// Bytes of the files read.
    pub bytes_read: u64,
}

fn table_info_from_pb(t: pb::TableInfo) -> Result<TableInfo> {
    let schema = convert::schema_from_pb(t.schema.ok_or_else(|| missing("a table schema"))?)
        .map_err(|e| Error::Protocol(format!("table schema: {e}")))?;
    Ok(TableInfo {
        schema,
        enabled: t.state == pb::TableState::Enabled as i32,
        regions: t.regions.into_iter().map(RegionLocation::from_pb).collect(),
    })
}
