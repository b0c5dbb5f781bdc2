//! Table DDL: create, delete, disable, enable, truncate and modify tables, add, modify and
//! delete families, flush a table, split a region, merge regions, and the alter status clients
//! poll.
//!
//! Where an error surfaces mirrors HBase 2.6's master: create and delete table wait for their
//! procedure's prepare step (HBASE-19953), so "table exists", "not found" and "not disabled"
//! come back from the call itself; disable, enable, truncate, modify and flush fail through
//! the procedure (`getProcedureResult` carries the exception, which the client rethrows by
//! class). Family add/modify/delete check the family while submitting, as HBase does.
//!
//! Each request's decode half names its table and converts its descriptors; a descriptor the
//! handler used to convert only after the permission check and the nonce lookup keeps its
//! error until then.

use super::procedures::nonce_key;
use super::{
    check_families, current_schema, invalid_family, table_admin, table_not_found, table_of,
    visible_table, Call, Result,
};
use crate::error::ServerError;
use crate::hbase::exceptions::HBASE_IO;
use crate::hbase::names::show;
use crate::hbase::{message, schema, CallCtx, HbaseError, HbaseService, Reply, Request};
use crate::router::TableState;
use crate::security::acl::{Action, Scope};
use bytes::Bytes;
use cellar_model::{FamilySchema, TableSchema};
use cellar_proto::hbase;

/// A client's retry key for a procedure (see [`nonce_key`]).
type Nonce = Option<(u64, u64)>;

/// CreateTable: a descriptor and its split keys.
#[derive(Debug, Clone)]
pub(crate) struct CreateTable {
    pub(crate) schema: TableSchema,
    pub(crate) split_keys: Vec<Bytes>,
    pub(crate) nonce: Nonce,
}

impl CreateTable {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::CreateTableRequest = message(param, "CreateTableRequest")?;
        Ok(Call::CreateTable(CreateTable {
            schema: schema::table_from_pb(&req.table_schema)?,
            split_keys: req.split_keys,
            nonce: nonce_key(req.nonce_group, req.nonce),
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let procs = &svc.procedures;
        svc.rs
            .authz
            .require_create(&ctx.caller, &self.schema.name)?;
        let reply = |id| hbase::CreateTableResponse { proc_id: Some(id) };
        let create = || -> Result<()> {
            let name = self.schema.name.clone();
            // HBase creates a table only in a namespace that exists
            // (NamespaceNotFoundException). The native protocol, which has no namespace
            // calls, still creates one with its table.
            let namespace = crate::names::split(&name).0;
            if !svc.master()?.namespaces().contains_key(namespace) {
                return Err(ServerError::NamespaceNotFound(namespace.to_string()).into());
            }
            svc.master()?.create_table(self.schema, &self.split_keys)?;
            Ok(svc.master()?.grant_owner(&ctx.caller, &name)?)
        };
        procs.submit_checked(
            "procedure.CreateTableProcedure",
            ctx,
            self.nonce,
            reply,
            create,
            Ok,
        )
    }
}

/// DeleteTable.
#[derive(Debug, Clone)]
pub(crate) struct DeleteTable {
    pub(crate) table: String,
    pub(crate) nonce: Nonce,
}

impl DeleteTable {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::DeleteTableRequest = message(param, "DeleteTableRequest")?;
        Ok(Call::DeleteTable(DeleteTable {
            table: table_of(&req.table_name, "DeleteTableRequest")?,
            nonce: nonce_key(req.nonce_group, req.nonce),
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let procs = &svc.procedures;
        table_admin(svc, ctx, &self.table, "delete a table")?;
        let reply = |id| hbase::DeleteTableResponse { proc_id: Some(id) };
        let delete = || Ok(svc.master()?.delete_table(&self.table)?);
        procs.submit_checked(
            "procedure.DeleteTableProcedure",
            ctx,
            self.nonce,
            reply,
            delete,
            Ok,
        )
    }
}

/// DisableTable and EnableTable: a table's regions closed (data calls then get
/// TableNotEnabledException) or opened again.
#[derive(Debug, Clone)]
pub(crate) struct SwitchTable {
    pub(crate) table: String,
    pub(crate) enable: bool,
    pub(crate) nonce: Nonce,
}

impl SwitchTable {
    pub(crate) fn decode_disable(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::DisableTableRequest = message(param, "DisableTableRequest")?;
        Self::decoded(&req.table_name, false, req.nonce_group, req.nonce)
    }

    pub(crate) fn decode_enable(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::EnableTableRequest = message(param, "EnableTableRequest")?;
        Self::decoded(&req.table_name, true, req.nonce_group, req.nonce)
    }

    fn decoded(
        name: &hbase::TableName,
        enable: bool,
        nonce_group: Option<u64>,
        nonce: Option<u64>,
    ) -> Result<Request> {
        let what = if enable {
            "EnableTableRequest"
        } else {
            "DisableTableRequest"
        };
        Ok(Call::SwitchTable(SwitchTable {
            table: table_of(name, what)?,
            enable,
            nonce: nonce_key(nonce_group, nonce),
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let procs = &svc.procedures;
        let table = self.table;
        if self.enable {
            table_admin(svc, ctx, &table, "enable a table")?;
            let reply = |id| hbase::EnableTableResponse { proc_id: Some(id) };
            Ok(procs.submit(
                "procedure.EnableTableProcedure",
                ctx,
                self.nonce,
                reply,
                || Ok(svc.master()?.enable_table(&table)?),
            ))
        } else {
            table_admin(svc, ctx, &table, "disable a table")?;
            let reply = |id| hbase::DisableTableResponse { proc_id: Some(id) };
            Ok(procs.submit(
                "procedure.DisableTableProcedure",
                ctx,
                self.nonce,
                reply,
                || Ok(svc.master()?.disable_table(&table)?),
            ))
        }
    }
}

/// truncateTable: a disabled table emptied and enabled, its split points kept if asked.
#[derive(Debug, Clone)]
pub(crate) struct TruncateTable {
    pub(crate) table: String,
    pub(crate) preserve_splits: bool,
    pub(crate) nonce: Nonce,
}

impl TruncateTable {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::TruncateTableRequest = message(param, "TruncateTableRequest")?;
        Ok(Call::TruncateTable(TruncateTable {
            table: table_of(&req.table_name, "TruncateTableRequest")?,
            preserve_splits: req.preserve_splits(),
            nonce: nonce_key(req.nonce_group, req.nonce),
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let procs = &svc.procedures;
        let table = self.table;
        table_admin(svc, ctx, &table, "truncate a table")?;
        let preserve = self.preserve_splits;
        let reply = |id| hbase::TruncateTableResponse { proc_id: Some(id) };
        Ok(procs.submit(
            "procedure.TruncateTableProcedure",
            ctx,
            self.nonce,
            reply,
            || truncate(svc, &table, preserve),
        ))
    }
}

/// ModifyTable: the table's families and options made those of a descriptor.
#[derive(Debug, Clone)]
pub(crate) struct ModifyTable {
    pub(crate) table: String,
    /// The descriptor, of this table; its error is raised after the permission check and
    /// the nonce lookup.
    pub(crate) wanted: Result<TableSchema>,
    /// `false`: HBase stores the descriptor without reopening the regions, and so refuses
    /// changes that need a reopen (families added or removed).
    pub(crate) reopen_regions: bool,
    pub(crate) nonce: Nonce,
}

impl ModifyTable {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::ModifyTableRequest = message(param, "ModifyTableRequest")?;
        let table = table_of(&req.table_name, "ModifyTableRequest")?;
        let wanted = schema::table_from_pb(&req.table_schema).and_then(|wanted| {
            if wanted.name != table {
                return Err(HbaseError::do_not_retry(format!(
                    "ModifyTableRequest names table '{table}' but its descriptor is of '{}'",
                    wanted.name
                )));
            }
            Ok(wanted)
        });
        Ok(Call::ModifyTable(ModifyTable {
            table,
            wanted,
            reopen_regions: req.reopen_regions(),
            nonce: nonce_key(req.nonce_group, req.nonce),
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let procs = &svc.procedures;
        let table = self.table;
        table_admin(svc, ctx, &table, "modify a table")?;
        let reply = |id| hbase::ModifyTableResponse { proc_id: Some(id) };
        let reopen = self.reopen_regions;
        procs.submit_checked(
            "procedure.ModifyTableProcedure",
            ctx,
            self.nonce,
            reply,
            || self.wanted,
            |wanted| {
                if !reopen {
                    check_without_reopen(svc, &table, &wanted)?;
                }
                modify(svc, &table, wanted)
            },
        )
    }
}

/// AddColumn or ModifyColumn: one family put.
#[derive(Debug, Clone)]
pub(crate) struct PutColumn {
    /// AddColumn (the family must be new), else ModifyColumn (it must exist).
    pub(crate) add: bool,
    pub(crate) table: String,
    /// The family's descriptor; its error is raised after the permission check and the
    /// nonce lookup.
    pub(crate) family: Result<FamilySchema>,
    pub(crate) nonce: Nonce,
}

impl PutColumn {
    pub(crate) fn decode_add(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::AddColumnRequest = message(param, "AddColumnRequest")?;
        let nonce = nonce_key(req.nonce_group, req.nonce);
        PutColumn::new(true, &req.table_name, &req.column_families, nonce)
            .map(|call| Call::PutColumn(call).into())
    }

    pub(crate) fn decode_modify(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::ModifyColumnRequest = message(param, "ModifyColumnRequest")?;
        let nonce = nonce_key(req.nonce_group, req.nonce);
        PutColumn::new(false, &req.table_name, &req.column_families, nonce)
            .map(|call| Call::PutColumn(call).into())
    }

    fn new(
        add: bool,
        table: &hbase::TableName,
        family: &hbase::ColumnFamilySchema,
        nonce: Nonce,
    ) -> Result<Self> {
        let method = if add { "AddColumn" } else { "ModifyColumn" };
        let table = table_of(table, method)?;
        Ok(PutColumn {
            add,
            family: schema::family_from_pb(&table, family),
            table,
            nonce,
        })
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let procs = &svc.procedures;
        let table = self.table;
        table_admin(svc, ctx, &table, "modify a table")?;
        // AddColumnResponse and ModifyColumnResponse are the same message.
        let reply = |id| hbase::AddColumnResponse { proc_id: Some(id) };
        let add = self.add;
        let check = || {
            let family = self.family?;
            let current = current_schema(svc, &table)?;
            let exists = current.family(family.name.as_bytes()).is_some();
            if add && exists {
                return Err(invalid_family(format!(
                    "column family '{}' in table '{table}' already exists so cannot be added",
                    family.name
                )));
            }
            if !add && !exists {
                return Err(invalid_family(format!(
                    "column family '{}' does not exist in table '{table}'",
                    family.name
                )));
            }
            Ok(family)
        };
        procs.submit_checked(
            "procedure.ModifyTableProcedure",
            ctx,
            self.nonce,
            reply,
            check,
            |family| Ok(svc.master()?.alter_table(&table, vec![family], &[])?),
        )
    }
}

/// DeleteColumn: one family removed (not the last).
#[derive(Debug, Clone)]
pub(crate) struct DeleteColumn {
    pub(crate) table: String,
    pub(crate) family: Bytes,
    pub(crate) nonce: Nonce,
}

impl DeleteColumn {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::DeleteColumnRequest = message(param, "DeleteColumnRequest")?;
        Ok(Call::DeleteColumn(DeleteColumn {
            table: table_of(&req.table_name, "DeleteColumnRequest")?,
            family: req.column_name,
            nonce: nonce_key(req.nonce_group, req.nonce),
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let procs = &svc.procedures;
        let table = self.table;
        table_admin(svc, ctx, &table, "modify a table")?;
        let reply = |id| hbase::DeleteColumnResponse { proc_id: Some(id) };
        let check = || {
            let family = String::from_utf8_lossy(&self.family).into_owned();
            let current = current_schema(svc, &table)?;
            if current.family(&self.family).is_none() {
                return Err(invalid_family(format!(
                    "family '{}' does not exist in table '{table}', so it cannot be deleted",
                    show(&self.family)
                )));
            }
            if current.families.len() == 1 {
                return Err(invalid_family(format!(
                    "family '{family}' is the only column family of table '{table}', so it cannot be deleted"
                )));
            }
            Ok(family)
        };
        procs.submit_checked(
            "procedure.ModifyTableProcedure",
            ctx,
            self.nonce,
            reply,
            check,
            |family| Ok(svc.master()?.alter_table(&table, Vec::new(), &[family])?),
        )
    }
}

/// FlushTable: every region's memstores written out.
#[derive(Debug, Clone)]
pub(crate) struct FlushTable {
    pub(crate) table: String,
    /// The families named (none: all).
    pub(crate) families: Vec<Bytes>,
    pub(crate) nonce: Nonce,
}

impl FlushTable {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::FlushTableRequest = message(param, "FlushTableRequest")?;
        Ok(Call::FlushTable(FlushTable {
            table: table_of(&req.table_name, "FlushTableRequest")?,
            families: req.column_family,
            nonce: nonce_key(req.nonce_group, req.nonce),
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let procs = &svc.procedures;
        let table = self.table;
        table_admin(svc, ctx, &table, "flush a table")?;
        let reply = |id| hbase::FlushTableResponse { proc_id: Some(id) };
        // As HBase's FlushTableProcedure, families the table lacks fail the call itself.
        // Cellar then flushes whole regions: a family list flushes them all, a superset
        // with the same data visible.
        let check = || check_families(&current_schema(svc, &table)?, &self.families, &table);
        procs.submit_checked(
            "procedure.FlushTableProcedure",
            ctx,
            self.nonce,
            reply,
            check,
            |()| Ok(svc.master()?.flush_table(&table)?),
        )
    }
}

/// SplitRegion (Admin.split / splitRegionAsync). Like HBase's, a bad split row or a region
/// that cannot split fails the call itself; the split then runs before the answer.
#[derive(Debug, Clone)]
pub(crate) struct SplitRegion {
    pub(crate) table: String,
    pub(crate) region_id: u64,
    /// None: the middle of the region.
    pub(crate) split_row: Option<Bytes>,
    pub(crate) nonce: Nonce,
}

impl SplitRegion {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::SplitTableRegionRequest = message(param, "SplitTableRegionRequest")?;
        let info = &req.region_info;
        Ok(Call::SplitRegion(SplitRegion {
            table: table_of(&info.table_name, "SplitTableRegionRequest")?,
            region_id: info.region_id,
            split_row: req.split_row.filter(|r| !r.is_empty()),
            nonce: nonce_key(req.nonce_group, req.nonce),
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        let procs = &svc.procedures;
        svc.rs.authz.require(
            &ctx.caller,
            Action::Admin,
            &Scope::table(&self.table),
            "split a region",
        )?;
        let reply = |id| hbase::SplitTableRegionResponse { proc_id: Some(id) };
        let split = || {
            Ok(svc
                .master()?
                .split_region_by_id(&self.table, self.region_id, self.split_row)?)
        };
        procs.submit_checked(
            "assignment.SplitTableRegionProcedure",
            ctx,
            self.nonce,
            reply,
            split,
            Ok,
        )
    }
}

/// MergeTableRegions (Admin.mergeRegionsAsync, the shell's `merge_region`). As in HBase, the
/// regions are checked by the call itself (an unknown region is an UnknownRegionException,
/// regions that cannot merge a MergeRegionException); the merge then runs before the answer.
#[derive(Debug, Clone)]
pub(crate) struct MergeRegions {
    pub(crate) regions: Vec<crate::hbase::names::RegionRef>,
    pub(crate) forcible: bool,
    pub(crate) nonce: Nonce,
}

impl MergeRegions {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::MergeTableRegionsRequest = message(param, "MergeTableRegionsRequest")?;
        let regions = req
            .region
            .iter()
            .map(|r| crate::hbase::names::region_ref(r.r#type, &r.value))
            .collect::<Result<Vec<_>>>()?;
        Ok(Call::MergeRegions(MergeRegions {
            regions,
            forcible: req.forcible.unwrap_or(false),
            nonce: nonce_key(req.nonce_group, req.nonce),
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply> {
        use crate::hbase::exceptions::{MERGE_REGION, UNKNOWN_REGION};
        use crate::hbase::names::RegionTarget;
        let mut ids = Vec::with_capacity(self.regions.len());
        let mut tables: Vec<String> = Vec::new();
        for r in self.regions {
            let target = r.resolve(svc).map_err(|e| {
                HbaseError::new(UNKNOWN_REGION, format!("merge: {}", e.message), true)
            })?;
            match target {
                RegionTarget::Meta => {
                    return Err(HbaseError::new(
                        MERGE_REGION,
                        "hbase:meta has one region and cannot be merged",
                        true,
                    ))
                }
                RegionTarget::User { table, region_id } => {
                    if !tables.contains(&table) {
                        tables.push(table);
                    }
                    ids.push(region_id.to_string());
                }
            }
        }
        for table in &tables {
            table_admin(svc, ctx, table, "merge regions")?;
        }
        let reply = |id| hbase::MergeTableRegionsResponse { proc_id: Some(id) };
        let merge = || {
            svc.master()?
                .merge_regions(&ids, self.forcible)
                .map_err(|e| match e {
                    ServerError::InvalidArgument(m) => HbaseError::new(MERGE_REGION, m, true),
                    e => e.into(),
                })
        };
        svc.procedures.submit_checked(
            "assignment.MergeTableRegionsProcedure",
            ctx,
            self.nonce,
            reply,
            merge,
            |_| Ok(()),
        )
    }
}

/// GetSchemaAlterStatus. Cellar alters a table's regions before the Modify call returns, so
/// none is left.
#[derive(Debug, Clone)]
pub(crate) struct GetSchemaAlterStatus {
    pub(crate) table: String,
}

impl GetSchemaAlterStatus {
    pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
        let req: hbase::GetSchemaAlterStatusRequest =
            message(param, "GetSchemaAlterStatusRequest")?;
        Ok(Call::GetSchemaAlterStatus(GetSchemaAlterStatus {
            table: table_of(&req.table_name, "GetSchemaAlterStatusRequest")?,
        })
        .into())
    }

    pub(crate) fn execute(self, svc: &HbaseService) -> Result<Reply> {
        let regions = svc.rs.list_regions(&self.table)?.len();
        Ok(Reply::message(&hbase::GetSchemaAlterStatusResponse {
            yet_to_update_regions: Some(0),
            total_regions: Some(u32::try_from(regions).unwrap_or(u32::MAX)),
        }))
    }
}

/// HBase's truncate: the table must be disabled; afterwards it is enabled and empty, with its
/// old region boundaries when `preserve_splits`.
fn truncate(svc: &HbaseService, table: &str, preserve_splits: bool) -> Result<()> {
    let route = visible_table(svc, table).ok_or_else(|| table_not_found(table))?;
    if route.state != TableState::Disabled {
        return Err(HbaseError::from(
            crate::error::ServerError::TableNotDisabled(table.to_string()),
        ));
    }
    let splits: Vec<Bytes> = route
        .regions
        .keys()
        .filter(|k| !k.is_empty())
        .cloned()
        .collect();
    if !preserve_splits || splits.is_empty() {
        return Ok(svc.master()?.truncate_table(table)?);
    }
    // Cellar's truncate leaves one region; the old boundaries come back as splits of the
    // empty table. Each step is crash-safe on its own, so a crash in between leaves the table
    // empty, enabled and with its schema, only with fewer regions.
    svc.master()?.truncate_table(table)?;
    for key in splits {
        svc.master()?.split_table(table, Some(key))?;
    }
    Ok(())
}

/// Makes `table`'s families those of `wanted`: changed or new ones put, missing ones removed.
/// What HBase's ModifyTableProcedure refuses when it is not to reopen the regions: a change
/// in the number of families (Cellar's descriptors carry no coprocessors or replica counts,
/// its other checks). HBase fails the call and answers the client's retry (same nonce) with
/// the failed procedure; here the procedure fails at once, which the client reports the same
/// way. Everything else is applied at once, as a reopen would (HBase keeps the regions on
/// the old descriptor until they next open).
fn check_without_reopen(svc: &HbaseService, table: &str, wanted: &TableSchema) -> Result<()> {
    let current = current_schema(svc, table)?;
    if current.families.len() != wanted.families.len() {
        return Err(HbaseError::new(
            HBASE_IO,
            "Cannot add or remove column families when this modification won't reopen regions."
                .to_string(),
            false,
        ));
    }
    Ok(())
}

fn modify(svc: &HbaseService, table: &str, wanted: TableSchema) -> Result<()> {
    let current = current_schema(svc, table)?;
    if wanted.options != current.options {
        svc.master()?.set_table_options(table, wanted.options)?;
    }
    let put: Vec<_> = wanted
        .families
        .iter()
        .filter(|f| current.family(f.name.as_bytes()) != Some(*f))
        .cloned()
        .collect();
    let delete: Vec<String> = current
        .families
        .iter()
        .filter(|f| wanted.family(f.name.as_bytes()).is_none())
        .map(|f| f.name.clone())
        .collect();
    if put.is_empty() && delete.is_empty() {
        return Ok(());
    }
    Ok(svc.master()?.alter_table(table, put, &delete)?)
}
