//! The RPC service: decodes each method's message (and its cells from the request cell
//! block), calls the region server's typed method, encodes the response message and the
//! response cell block. PING is answered by the front end itself; unknown methods get
//! UNKNOWN_METHOD.

use crate::error::ServerError;
use crate::master::Master;
use crate::region_server::ReactorRead;
use crate::region_server::{DeferredPut, RegionServer};
use crate::router::TableInfo;
use crate::router::{RegionLocation, RegionState, TableState};
use crate::rpc::{CallContext, Handler, Inline, Reply};
use crate::scanners::{ResultFormat, ScanBatch};
use crate::security::acl::{Action, Actions, Permission, Scope};
use crate::security::Caller;
use crate::status::Gauges;
use crate::status::{ServerStatus, StatusSource, TableView};
use bytes::{Bytes, BytesMut};
use cellar_model::Cell;
use cellar_model::MutationKind;
use cellar_proto::cellblock::CellReader;
use cellar_proto::convert::{self, ConvertError};
use cellar_proto::frame::decode_param;
use cellar_proto::pb::{self, Method};
use cellar_proto::prepared;
use prost::Message;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The native protocol's dispatcher: decodes each call, checks who may make it, and calls the
/// region server (data, scanners, region control) or the master (catalog, DDL, balancing).
/// A cluster's region server has no master here and refuses those calls, naming where to go.
pub struct NativeService {
    pub(crate) rs: Arc<RegionServer>,
    pub(crate) master: Option<Arc<Master>>,
}

impl NativeService {
    pub fn new(rs: Arc<RegionServer>, master: Option<Arc<Master>>) -> Arc<NativeService> {
        Arc::new(NativeService { rs, master })
    }

    /// STATUS: the master's view where this process has a master, else the region server's.
    pub fn status(&self) -> ServerStatus {
        match &self.master {
            Some(m) => m.status(),
            None => self.rs.status(),
        }
    }

    /// The master of this process, or the refusal a cluster's region server answers.
    fn require_master(&self) -> Result<&Master, ServerError> {
        self.master
            .as_deref()
            .ok_or_else(ServerError::not_the_master)
    }

    /// The region server the calls go to.
    pub fn region_server(&self) -> &Arc<RegionServer> {
        &self.rs
    }

    /// The master of this process: standalone and a cluster's master have one.
    pub fn master(&self) -> Option<&Arc<Master>> {
        self.master.as_ref()
    }

    /// Stops the master's threads, then shuts the region server down (idempotent).
    pub fn shutdown(&self) -> Result<(), ServerError> {
        if let Some(m) = &self.master {
            m.stop();
        }
        self.rs.shutdown()
    }
}

impl From<ConvertError> for ServerError {
    fn from(e: ConvertError) -> Self {
        ServerError::InvalidArgument(e.0)
    }
}

fn decode<M: Message + Default>(param: Bytes, what: &str) -> Result<M, ServerError> {
    decode_param(param, what).map_err(|e| ServerError::Malformed(e.to_string()))
}

fn region_ref(r: Option<pb::RegionRef>, what: &str) -> Result<pb::RegionRef, ServerError> {
    r.ok_or_else(|| ServerError::invalid(format!("{what} names no region")))
}

impl NativeService {
    /// Dispatches one call (the body of [`Handler::call`]).
    pub fn dispatch(
        &self,
        ctx: &CallContext,
        method: Method,
        param: Bytes,
        cellblock: Bytes,
    ) -> Result<Reply, ServerError> {
        // A master that is no longer the active one answers nothing, naming why.
        self.rs.check_master()?;
        self.rs.check_running()?;
        // With authorization on, nobody the server cannot name is served anything.
        self.rs.authz.authenticate(&ctx.caller)?;
        self.rs.requests.fetch_add(1, Ordering::Relaxed);
        let empty = || Ok(Reply::message(&pb::Empty {}));
        match method {
            Method::Unspecified | Method::Ping | Method::TransportHello => {
                Err(ServerError::UnknownMethod(method as i32))
            }
            Method::LocateRegion => {
                let req: pb::LocateRegionRequest = decode(param, "LocateRegionRequest")?;
                let location = self.rs.locate_region(&req.table, &req.row)?;
                Ok(Reply::message(&pb::LocateRegionResponse {
                    location: Some(location_to_pb(&location)),
                }))
            }
            Method::ListRegions => {
                let req: pb::ListRegionsRequest = decode(param, "ListRegionsRequest")?;
                let regions = self.rs.list_regions(&req.table)?;
                Ok(Reply::message(&pb::ListRegionsResponse {
                    regions: regions.iter().map(location_to_pb).collect(),
                }))
            }
            Method::Get => {
                let req: pb::GetRequest = decode(param, "GetRequest")?;
                let r = region_ref(req.region, "GetRequest")?;
                let mut get = convert::get_from_pb(
                    req.get
                        .ok_or_else(|| ServerError::invalid("GetRequest has no get"))?,
                )?;
                self.rs
                    .authz
                    .check_get(&ctx.caller, &r.table, &mut get, "get")?;
                let cells = self.rs.get(&r.table, r.region_id, &get)?;
                let mut out = BytesMut::new();
                let result = convert::result_to_pb(&cells, false, &mut out);
                Ok(Reply::with_cells(
                    &pb::GetResponse {
                        result: Some(result),
                    },
                    out,
                ))
            }
            Method::Mutate => {
                let req: pb::MutateRequest = decode(param, "MutateRequest")?;
                let r = region_ref(req.region, "MutateRequest")?;
                let m = req
                    .mutation
                    .ok_or_else(|| ServerError::invalid("MutateRequest has no mutation"))?;
                let (mutation, kind) =
                    convert::mutation_from_pb(&m, &mut CellReader::new(cellblock))?;
                let condition = req.condition.map(convert::condition_from_pb).transpose()?;
                self.rs.authz.check_mutation(
                    &ctx.caller,
                    &r.table,
                    &mutation,
                    kind,
                    condition.as_ref(),
                )?;
                let outcome =
                    self.rs
                        .mutate(&r.table, r.region_id, &mutation, kind, condition.as_ref())?;
                let mut out = BytesMut::new();
                let result = (kind != MutationKind::PutDelete)
                    .then(|| convert::result_to_pb(&outcome.cells, false, &mut out));
                Ok(Reply::with_cells(
                    &pb::MutateResponse {
                        processed: outcome.processed,
                        result,
                    },
                    out,
                ))
            }
            Method::Multi => {
                let req: pb::MultiRequest = decode(param, "MultiRequest")?;
                let (resp, out) = self.multi(&ctx.caller, req, cellblock);
                Ok(Reply::with_cells(&resp, out))
            }
            Method::ScanOpen => {
                let req: pb::ScanOpenRequest = decode(param, "ScanOpenRequest")?;
                let r = region_ref(req.region, "ScanOpenRequest")?;
                let asked = convert::scan_from_pb(
                    req.scan
                        .ok_or_else(|| ServerError::invalid("ScanOpenRequest has no scan"))?,
                )?;
                let (mut scan, format) = if req.prepared != 0 {
                    let p = self.rs.prepared.execute(ctx.conn_id, req.prepared)?;
                    if p.table != r.table {
                        return Err(ServerError::invalid(format!(
                            "prepared scan {} is of table '{}', not '{}'",
                            req.prepared, p.table, r.table
                        )));
                    }
                    let mut scan = p.scan.clone();
                    scan.start_row = asked.start_row;
                    scan.stop_row = asked.stop_row;
                    scan.limit = asked.limit;
                    let format = ResultFormat::Prepared {
                        columns: Arc::clone(&p.columns),
                        compress: p.compress || req.compress,
                    };
                    (scan, format)
                } else if req.compress {
                    (asked, ResultFormat::CellBlockZstd)
                } else {
                    (asked, ResultFormat::CellBlock)
                };
                self.rs
                    .authz
                    .check_scan(&ctx.caller, &r.table, &mut scan, "scan")?;
                let batch = self.rs.scan_open(
                    ctx.conn_id,
                    &r.table,
                    r.region_id,
                    &scan,
                    req.rows,
                    format,
                )?;
                let (results, out, encoding) = encode_batch(&batch);
                Ok(Reply::with_cells(
                    &pb::ScanOpenResponse {
                        scanner_id: batch.scanner_id,
                        results,
                        more_in_region: batch.more_in_region,
                        lease_ms: self.rs.config.scanner.lease_ms.min(u64::from(u32::MAX)) as u32,
                        encoding: encoding as i32,
                    },
                    out,
                ))
            }
            Method::ScanNext => {
                let req: pb::ScanNextRequest = decode(param, "ScanNextRequest")?;
                self.rs.check_scanner_owner(ctx.conn_id, req.scanner_id)?;
                let batch = self.rs.scan_next(req.scanner_id, req.rows)?;
                let (results, out, encoding) = encode_batch(&batch);
                Ok(Reply::with_cells(
                    &pb::ScanNextResponse {
                        results,
                        more_in_region: batch.more_in_region,
                        encoding: encoding as i32,
                    },
                    out,
                ))
            }
            Method::PrepareScan => {
                let req: pb::PrepareScanRequest = decode(param, "PrepareScanRequest")?;
                let mut scan = convert::scan_from_pb(
                    req.scan
                        .ok_or_else(|| ServerError::invalid("PrepareScanRequest has no scan"))?,
                )?;
                self.rs
                    .authz
                    .check_scan(&ctx.caller, &req.table, &mut scan, "prepare a scan")?;
                let handle = self
                    .rs
                    .prepare_scan(ctx.conn_id, &req.table, scan, req.compress)?;
                Ok(Reply::message(&pb::PrepareScanResponse {
                    handle,
                    lease_ms: self
                        .rs
                        .prepared
                        .lease()
                        .as_millis()
                        .min(u128::from(u32::MAX)) as u32,
                }))
            }
            Method::ClosePreparedScan => {
                let req: pb::ClosePreparedScanRequest = decode(param, "ClosePreparedScanRequest")?;
                self.rs.prepared.close(ctx.conn_id, req.handle);
                empty()
            }
            Method::ScanClose => {
                let req: pb::ScanCloseRequest = decode(param, "ScanCloseRequest")?;
                self.rs.check_scanner_owner(ctx.conn_id, req.scanner_id)?;
                self.rs.scan_close(req.scanner_id);
                empty()
            }
            Method::CreateTable => {
                let req: pb::CreateTableRequest = decode(param, "CreateTableRequest")?;
                let schema =
                    convert::schema_from_pb(req.schema.ok_or_else(|| {
                        ServerError::invalid("CreateTableRequest has no schema")
                    })?)?;
                self.rs.authz.require_create(&ctx.caller, &schema.name)?;
                let name = schema.name.clone();
                self.require_master()?
                    .create_table(schema, &req.split_keys)?;
                self.require_master()?.grant_owner(&ctx.caller, &name)?;
                empty()
            }
            Method::DeleteTable
            | Method::DisableTable
            | Method::EnableTable
            | Method::TruncateTable
            | Method::DescribeTable
            | Method::FlushTable => {
                let req: pb::TableRequest = decode(param, "TableRequest")?;
                let t = req.table.as_str();
                if method == Method::DescribeTable {
                    if !self.rs.authz.sees_table(&ctx.caller, t) && !is_meta(t) {
                        self.rs.authz.require(
                            &ctx.caller,
                            Action::Admin,
                            &Scope::table(t),
                            "describe a table",
                        )?;
                    }
                } else {
                    self.rs
                        .authz
                        .require_table_admin(&ctx.caller, t, admin_what(method))?;
                }
                match method {
                    Method::DeleteTable => self.require_master()?.delete_table(t)?,
                    Method::DisableTable => self.require_master()?.disable_table(t)?,
                    Method::EnableTable => self.require_master()?.enable_table(t)?,
                    Method::TruncateTable => self.require_master()?.truncate_table(t)?,
                    Method::FlushTable => self.require_master()?.flush_table(t)?,
                    _ => {
                        let table = self.rs.describe_table(t)?;
                        return Ok(Reply::message(&pb::DescribeTableResponse {
                            table: Some(table_info_to_pb(&table)),
                        }));
                    }
                }
                empty()
            }
            Method::AlterTable => {
                let req: pb::AlterTableRequest = decode(param, "AlterTableRequest")?;
                self.rs
                    .authz
                    .require_table_admin(&ctx.caller, &req.table, "alter a table")?;
                let put = req
                    .put_families
                    .into_iter()
                    .map(convert::family_from_pb)
                    .collect::<Result<Vec<_>, _>>()?;
                let options = req.options.map(convert::options_from_pb).transpose()?;
                self.require_master()?.alter_table_with(
                    &req.table,
                    put,
                    &req.delete_families,
                    options,
                )?;
                empty()
            }
            Method::ListTables => Ok(Reply::message(&pb::ListTablesResponse {
                tables: self
                    .rs
                    .list_tables()
                    .iter()
                    .filter(|t| self.rs.authz.sees_table(&ctx.caller, &t.schema.name))
                    .map(table_info_to_pb)
                    .collect(),
            })),
            Method::Status => Ok(Reply::message(&convert::status_to_pb(self.status()))),
            Method::CompactTable => {
                let req: pb::CompactTableRequest = decode(param, "CompactTableRequest")?;
                self.rs
                    .authz
                    .require_table_admin(&ctx.caller, &req.table, "compact a table")?;
                self.require_master()?
                    .compact_table(&req.table, req.major)?;
                empty()
            }
            Method::BulkLoadRegion => {
                let req: pb::BulkLoadRegionRequest = decode(param, "BulkLoadRegionRequest")?;
                let r = region_ref(req.region, "BulkLoadRegionRequest")?;
                self.rs.authz.require_table_admin(
                    &ctx.caller,
                    &r.table,
                    "bulk load into a table",
                )?;
                Ok(Reply::message(&self.rs.bulk_load_call(
                    &r.table,
                    r.region_id,
                    req.files,
                )?))
            }
            Method::OpenRegion
            | Method::CloseRegion
            | Method::FlushRegion
            | Method::PrepareSplit
            | Method::SplitRegion
            | Method::MergeRegion
            | Method::SnapshotRegion
            | Method::Balance
            | Method::BalanceSwitch
            | Method::MoveRegion
            | Method::AssignRegion
            | Method::UnassignRegion
                if self.rs.authz.enabled() && ctx.caller.protocol != "internal" =>
            {
                self.rs.authz.require(
                    &ctx.caller,
                    Action::Admin,
                    &Scope::Global,
                    admin_what(method),
                )?;
                self.dispatch_unchecked(ctx, method, param, cellblock)
            }
            Method::OpenRegion => {
                let req: pb::OpenRegionRequest = decode(param, "OpenRegionRequest")?;
                let l = req
                    .region
                    .ok_or_else(|| ServerError::invalid("OpenRegionRequest names no region"))?;
                let schema = convert::schema_from_pb(
                    req.schema
                        .ok_or_else(|| ServerError::invalid("OpenRegionRequest has no schema"))?,
                )?;
                let info = cellar_storage::region::RegionInfo {
                    id: l.region_id,
                    start_key: l.start_key,
                    end_key: l.end_key,
                };
                self.rs.open_region_call(
                    &l.table,
                    info,
                    schema,
                    req.table_splits,
                    req.target_startcode,
                    req.open_seq,
                    &req.master,
                )?;
                empty()
            }
            Method::CloseRegion => {
                let req: pb::CloseRegionRequest = decode(param, "CloseRegionRequest")?;
                let r = region_ref(req.region, "CloseRegionRequest")?;
                self.rs
                    .close_region_call(&r.table, r.region_id, req.fence_seq)?;
                empty()
            }
            Method::FlushRegion => {
                let req: pb::FlushRegionRequest = decode(param, "FlushRegionRequest")?;
                let r = region_ref(req.region, "FlushRegionRequest")?;
                self.rs
                    .flush_region_call(&r.table, r.region_id, req.compact, req.major)?;
                empty()
            }
            Method::PrepareSplit => {
                let req: pb::PrepareSplitRequest = decode(param, "PrepareSplitRequest")?;
                let r = region_ref(req.region, "PrepareSplitRequest")?;
                let middle_row = self.rs.prepare_split_call(&r.table, r.region_id)?;
                Ok(Reply::message(&pb::PrepareSplitResponse { middle_row }))
            }
            Method::SplitRegion => {
                let req: pb::SplitRegionRequest = decode(param, "SplitRegionRequest")?;
                let r = region_ref(req.region, "SplitRegionRequest")?;
                self.rs.split_region_call(
                    &r.table,
                    r.region_id,
                    req.split_row,
                    (req.daughter_a, req.daughter_b),
                )?;
                empty()
            }
            Method::SnapshotRegion => {
                let req: pb::SnapshotRegionRequest = decode(param, "SnapshotRegionRequest")?;
                let r = region_ref(req.region, "SnapshotRegionRequest")?;
                let files = self
                    .rs
                    .snapshot_region_call(&r.table, r.region_id, req.skip_flush)?
                    .into_iter()
                    .map(|f| pb::SnapshotFileRef {
                        family: f.family,
                        path: f.path.to_string_lossy().into_owned(),
                        start: f.start.into(),
                        end: f.end.into(),
                    })
                    .collect();
                Ok(Reply::message(&pb::SnapshotRegionResponse { files }))
            }
            Method::MergeRegion => {
                let req: pb::MergeRegionRequest = decode(param, "MergeRegionRequest")?;
                self.rs
                    .merge_regions_call(&req.table, &req.region_ids, req.merged)?;
                empty()
            }
            Method::Balance => {
                let moved = self.require_master()?.balance()?;
                Ok(Reply::message(&pb::BalanceResponse {
                    moved: u32::try_from(moved).unwrap_or(u32::MAX),
                    enabled: self.require_master()?.balancer_enabled(),
                }))
            }
            Method::BalanceSwitch => {
                let req: pb::BalanceSwitchRequest = decode(param, "BalanceSwitchRequest")?;
                let previous = self.require_master()?.balance_switch(req.on)?;
                Ok(Reply::message(&pb::BalanceSwitchResponse { previous }))
            }
            Method::MoveRegion => {
                let req: pb::MoveRegionRequest = decode(param, "MoveRegionRequest")?;
                self.require_master()?
                    .move_region(&req.region, req.server.as_deref())?;
                empty()
            }
            Method::AssignRegion | Method::UnassignRegion => {
                let req: pb::RegionNameRequest = decode(param, "RegionNameRequest")?;
                if method == Method::AssignRegion {
                    self.require_master()?.assign_region(&req.region)?;
                } else {
                    self.require_master()?.unassign_region(&req.region)?;
                }
                empty()
            }
            Method::SplitTable => {
                let req: pb::SplitTableRequest = decode(param, "SplitTableRequest")?;
                self.rs
                    .authz
                    .require_table_admin(&ctx.caller, &req.table, "split a table")?;
                self.require_master()?
                    .split_table(&req.table, req.split_row)?;
                empty()
            }
            Method::Snapshot => {
                let req: pb::SnapshotRequest = decode(param, "SnapshotRequest")?;
                self.rs
                    .authz
                    .require_table_admin(&ctx.caller, &req.table, "take a snapshot")?;
                self.require_master()?
                    .snapshot(&req.table, &req.name, req.skip_flush)?;
                empty()
            }
            Method::ListSnapshots => {
                self.rs.authz.require(
                    &ctx.caller,
                    Action::Admin,
                    &Scope::Global,
                    "list snapshots",
                )?;
                let snapshots = self
                    .require_master()?
                    .list_snapshots()?
                    .into_iter()
                    .map(|m| pb::SnapshotInfo {
                        files: u32::try_from(
                            m.regions.iter().map(|r| r.files.len()).sum::<usize>(),
                        )
                        .unwrap_or(u32::MAX),
                        regions: u32::try_from(m.regions.len()).unwrap_or(u32::MAX),
                        name: m.name,
                        table: m.table,
                        created_ms: m.created_ms,
                    })
                    .collect();
                Ok(Reply::message(&pb::ListSnapshotsResponse { snapshots }))
            }
            Method::DeleteSnapshot | Method::RestoreSnapshot => {
                let req: pb::SnapshotNameRequest = decode(param, "SnapshotNameRequest")?;
                let master = self.require_master()?;
                let m = master.snapshot_named(&req.name)?;
                let what = if method == Method::DeleteSnapshot {
                    "delete a snapshot"
                } else {
                    "restore a snapshot"
                };
                self.rs
                    .authz
                    .require_table_admin(&ctx.caller, &m.table, what)?;
                if method == Method::DeleteSnapshot {
                    master.delete_snapshot(&req.name)?;
                } else {
                    master.restore_snapshot(&req.name)?;
                }
                empty()
            }
            Method::CloneSnapshot => {
                let req: pb::CloneSnapshotRequest = decode(param, "CloneSnapshotRequest")?;
                let master = self.require_master()?;
                let m = master.snapshot_named(&req.name)?;
                self.rs
                    .authz
                    .require_table_admin(&ctx.caller, &m.table, "clone a snapshot")?;
                self.rs.authz.require_create(&ctx.caller, &req.table)?;
                master.clone_snapshot(&req.name, &req.table)?;
                master.grant_owner(&ctx.caller, &req.table)?;
                empty()
            }
            Method::MergeRegions => {
                let req: pb::MergeRegionsRequest = decode(param, "MergeRegionsRequest")?;
                let master = self.require_master()?;
                for table in master.tables_of_regions(&req.regions)? {
                    self.rs
                        .authz
                        .require_table_admin(&ctx.caller, &table, "merge regions")?;
                }
                let info = master.merge_regions(&req.regions, req.forcible)?;
                let merged = self
                    .rs
                    .router
                    .region(info.id)
                    .map(|h| location_to_pb(&h.location(&self.rs.advertised)));
                Ok(Reply::message(&pb::MergeRegionsResponse { merged }))
            }
            Method::Grant | Method::Revoke => {
                let (perm, what) = if method == Method::Grant {
                    let req: pb::GrantRequest = decode(param, "GrantRequest")?;
                    (req.permission, "GrantRequest")
                } else {
                    let req: pb::RevokeRequest = decode(param, "RevokeRequest")?;
                    (req.permission, "RevokeRequest")
                };
                let perm =
                    perm.ok_or_else(|| ServerError::invalid(format!("{what} has no permission")))?;
                let scope = scope_from_pb(perm.scope.as_ref())?;
                if method == Method::Grant {
                    let actions =
                        Actions::parse(&perm.actions).map_err(ServerError::InvalidArgument)?;
                    self.require_master()?.grant(
                        &ctx.caller,
                        &Permission {
                            user: perm.user,
                            scope,
                            actions,
                        },
                    )?;
                } else {
                    let actions = if perm.actions.is_empty() {
                        None
                    } else {
                        Some(Actions::parse(&perm.actions).map_err(ServerError::InvalidArgument)?)
                    };
                    self.require_master()?
                        .revoke(&ctx.caller, &perm.user, &scope, actions)?;
                }
                empty()
            }
            Method::UserPermissions => {
                let req: pb::UserPermissionsRequest = decode(param, "UserPermissionsRequest")?;
                let scope = req
                    .scope
                    .as_ref()
                    .map(|s| scope_from_pb(Some(s)))
                    .transpose()?;
                let user = (!req.user.is_empty()).then_some(req.user.as_str());
                let list =
                    self.require_master()?
                        .user_permissions(&ctx.caller, scope.as_ref(), user)?;
                Ok(Reply::message(&pb::UserPermissionsResponse {
                    permissions: list.iter().map(permission_to_pb).collect(),
                }))
            }
        }
    }

    /// The region-control and balancing calls once their ADMIN check passed.
    fn dispatch_unchecked(
        &self,
        ctx: &CallContext,
        method: Method,
        param: Bytes,
        cellblock: Bytes,
    ) -> Result<Reply, ServerError> {
        let internal = CallContext::internal(ctx.conn_id);
        self.dispatch(&internal, method, param, cellblock)
    }

    /// MULTI: each action on its own region, failing on its own. Cells of the request block
    /// belong to the mutations in action order; results' cells go to the response block in
    /// result order.
    fn multi(
        &self,
        caller: &Caller,
        req: pb::MultiRequest,
        cellblock: Bytes,
    ) -> (pb::MultiResponse, BytesMut) {
        let mut reader = CellReader::new(cellblock);
        let mut out = BytesMut::new();
        let mut results = Vec::with_capacity(req.actions.len());
        for action in req.actions {
            let index = action.index;
            // Mutation cells are taken from the block even when the action fails, so the
            // next action finds its own.
            let outcome: Result<Option<Vec<Cell>>, ServerError> = match action.op {
                None => Err(ServerError::invalid(format!(
                    "action {index} has no operation"
                ))),
                Some(pb::action::Op::Get(g)) => region_ref(action.region, "action").and_then(|r| {
                    let mut get = convert::get_from_pb(g)?;
                    self.rs.authz.check_get(caller, &r.table, &mut get, "get")?;
                    self.rs.get(&r.table, r.region_id, &get).map(Some)
                }),
                Some(pb::action::Op::Mutation(m)) => convert::mutation_from_pb(&m, &mut reader)
                    .map_err(ServerError::from)
                    .and_then(|(mutation, kind)| {
                        let r = region_ref(action.region, "action")?;
                        self.rs
                            .authz
                            .check_mutation(caller, &r.table, &mutation, kind, None)?;
                        let o = self
                            .rs
                            .mutate(&r.table, r.region_id, &mutation, kind, None)?;
                        Ok((kind != MutationKind::PutDelete).then_some(o.cells))
                    }),
            };
            results.push(match outcome {
                Ok(cells) => pb::ActionResult {
                    index,
                    error: None,
                    result: Some(convert::result_to_pb(
                        cells.as_deref().unwrap_or(&[]),
                        false,
                        &mut out,
                    )),
                },
                Err(e) => pb::ActionResult {
                    index,
                    error: Some(e.to_rpc()),
                    result: None,
                },
            });
        }
        (pb::MultiResponse { results }, out)
    }

    /// Point-in-time gauges for `/metrics`: the region server's, with the master's list of
    /// servers where this process has a master.
    pub fn current_gauges(&self) -> Gauges {
        let mut g = self.rs.gauges();
        if let Some(m) = &self.master {
            g.servers = m.server_loads();
        }
        g
    }
}

/// A scan call's results in the scanner's format: the `results` messages (empty for the
/// compact encoding), the cell block and how to read it.
fn encode_batch(batch: &ScanBatch) -> (Vec<pb::Result>, BytesMut, pb::ResultEncoding) {
    match &batch.format {
        ResultFormat::Prepared { columns, compress } => {
            let mut e = prepared::Encoder::new(columns);
            for r in &batch.results {
                e.row(&r.cells, r.partial);
            }
            (
                Vec::new(),
                e.finish(*compress),
                pb::ResultEncoding::PreparedV1,
            )
        }
        format => {
            let mut out = BytesMut::new();
            let results = batch
                .results
                .iter()
                .map(|r| convert::result_to_pb(&r.cells, r.partial, &mut out))
                .collect();
            if *format == ResultFormat::CellBlockZstd && out.len() >= prepared::COMPRESS_FROM {
                if let Ok(z) = zstd::bulk::compress(&out, 1) {
                    return (
                        results,
                        BytesMut::from(&z[..]),
                        pb::ResultEncoding::CellBlockZstd,
                    );
                }
            }
            (results, out, pb::ResultEncoding::CellBlock)
        }
    }
}

impl Handler for NativeService {
    fn call(
        &self,
        ctx: &CallContext,
        method: Method,
        param: Bytes,
        cellblock: Bytes,
    ) -> Result<Reply, pb::RpcError> {
        self.dispatch(ctx, method, param, cellblock).map_err(|e| {
            tracing::debug!(?method, error = %e, "call failed");
            e.to_rpc()
        })
    }

    /// Gets that memstores and the block cache can answer, and plain puts that need not
    /// wait, are served on the reactor, saving two thread hand-offs; a put whose WAL write
    /// would wait is finished on the handler pool; everything else goes to the pool.
    fn call_inline(
        &self,
        ctx: &CallContext,
        method: Method,
        param: &Bytes,
        cellblock: &Bytes,
    ) -> Option<Inline> {
        match method {
            Method::Get => self.get_on_reactor(&ctx.caller, param).map(Inline::Done),
            Method::Mutate => self.put_on_reactor(&ctx.caller, param, cellblock),
            _ => None,
        }
    }

    fn connection_closed(&self, conn_id: u64) {
        self.rs.scanners.connection_closed(conn_id);
        self.rs.prepared.connection_closed(conn_id);
    }
}

impl StatusSource for NativeService {
    fn gauges(&self) -> Gauges {
        self.current_gauges()
    }

    fn tables_view(&self, table: Option<&str>) -> Vec<TableView> {
        self.rs.tables_view(table)
    }
}

impl NativeService {
    /// A Get served on the reactor ([`RegionServer::read_on_reactor`]).
    fn get_on_reactor(
        &self,
        caller: &Caller,
        param: &Bytes,
    ) -> Option<Result<Reply, pb::RpcError>> {
        let req: pb::GetRequest = decode(param.clone(), "GetRequest").ok()?;
        let r = req.region?;
        let get = convert::get_from_pb(req.get?).ok()?;
        let read = match self
            .rs
            .read_on_reactor(caller, &r.table, r.region_id, get, true)?
        {
            Ok(read) => read,
            Err(e) => return Some(Err(e.to_rpc())),
        };
        let (result, out) = match read {
            ReactorRead::Block { cell_count, block } => (
                pb::Result {
                    cell_count,
                    partial: false,
                },
                block,
            ),
            ReactorRead::Cells(cells) => {
                let mut out = BytesMut::new();
                (convert::result_to_pb(&cells, false, &mut out), out)
            }
        };
        Some(Ok(Reply::with_cells(
            &pb::GetResponse {
                result: Some(result),
            },
            out,
        )))
    }

    /// A Mutate that is a plain put without condition, applied on the reactor
    /// ([`RegionServer::put_on_reactor`]); finished by the connection before its answer.
    fn put_on_reactor(&self, caller: &Caller, param: &Bytes, cellblock: &Bytes) -> Option<Inline> {
        let req: pb::MutateRequest = decode(param.clone(), "MutateRequest").ok()?;
        if req.condition.is_some() {
            return None;
        }
        let r = req.region?;
        let (mutation, kind) = convert::mutation_from_pb(
            req.mutation.as_ref()?,
            &mut CellReader::new(cellblock.clone()),
        )
        .ok()?;
        if kind != MutationKind::PutDelete {
            return None;
        }
        let put = match self
            .rs
            .put_on_reactor(caller, &r.table, r.region_id, &mutation)?
        {
            Ok(put) => put,
            Err(e) => return Some(Inline::Done(Err(e.to_rpc()))),
        };
        let answer = Reply::message(&pb::MutateResponse {
            processed: true,
            result: None,
        });
        Some(Inline::AfterWal(Box::new(put), answer))
    }
}

impl crate::rpc::PendingWrite for DeferredPut {
    fn try_finish(
        self: Box<Self>,
    ) -> Result<Result<(), pb::RpcError>, Box<dyn crate::rpc::PendingWrite>> {
        match DeferredPut::try_finish(*self) {
            Ok(done) => Ok(done.map_err(|e| e.to_rpc())),
            Err(put) => Err(Box::new(put)),
        }
    }

    fn finish(
        self: Box<Self>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), pb::RpcError>> + Send>> {
        Box::pin(async move { (*self).finish_async().await.map_err(|e| e.to_rpc()) })
    }
}

/// The native protocol's message for a region's location.
pub fn location_to_pb(l: &RegionLocation) -> pb::RegionLocation {
    pb::RegionLocation {
        table: l.table.clone(),
        region_id: l.info.id,
        start_key: l.info.start_key.clone(),
        end_key: l.info.end_key.clone(),
        server: l.server.clone(),
        name: l.name.clone(),
        state: match l.state {
            RegionState::Open => pb::RegionState::Open,
            RegionState::Closed => pb::RegionState::Closed,
            RegionState::Splitting => pb::RegionState::Splitting,
            RegionState::Split => pb::RegionState::Split,
            RegionState::Offline => pb::RegionState::Offline,
            RegionState::Merging => pb::RegionState::Merging,
            RegionState::Merged => pb::RegionState::Merged,
        } as i32,
    }
}

fn table_info_to_pb(t: &TableInfo) -> pb::TableInfo {
    pb::TableInfo {
        schema: Some(convert::schema_to_pb(&t.schema)),
        state: match t.state {
            TableState::Enabled => pb::TableState::Enabled,
            TableState::Disabled => pb::TableState::Disabled,
        } as i32,
        regions: t.regions.iter().map(location_to_pb).collect(),
    }
}

/// Whether `table` is the meta table: every caller may read it (HBase lets every client
/// locate regions).
fn is_meta(table: &str) -> bool {
    table == crate::meta::META_TABLE
}

/// How refusals name an admin call.
fn admin_what(method: Method) -> &'static str {
    match method {
        Method::DeleteTable => "delete a table",
        Method::DisableTable => "disable a table",
        Method::EnableTable => "enable a table",
        Method::TruncateTable => "truncate a table",
        Method::FlushTable => "flush a table",
        Method::OpenRegion => "open a region",
        Method::CloseRegion => "close a region",
        Method::FlushRegion => "flush a region",
        Method::PrepareSplit | Method::SplitRegion => "split a region",
        Method::MergeRegion => "merge regions",
        Method::SnapshotRegion => "snapshot a region",
        Method::Balance => "run the balancer",
        Method::BalanceSwitch => "switch the balancer",
        Method::MoveRegion => "move a region",
        Method::AssignRegion => "assign a region",
        Method::UnassignRegion => "unassign a region",
        _ => "administer",
    }
}

/// A permission scope from the wire: nothing set is global.
pub fn scope_from_pb(s: Option<&pb::PermissionScope>) -> Result<Scope, ServerError> {
    let Some(s) = s else {
        return Ok(Scope::Global);
    };
    match (s.namespace.is_empty(), s.table.is_empty()) {
        (true, true) => {
            if s.family.is_some() || s.qualifier.is_some() {
                return Err(ServerError::invalid(
                    "a permission's family needs its table",
                ));
            }
            Ok(Scope::Global)
        }
        (false, true) => {
            if s.family.is_some() || s.qualifier.is_some() {
                return Err(ServerError::invalid(
                    "a namespace permission names no family",
                ));
            }
            Ok(Scope::Namespace(s.namespace.clone()))
        }
        (true, false) => {
            if s.qualifier.is_some() && s.family.is_none() {
                return Err(ServerError::invalid(
                    "a permission's qualifier needs its family",
                ));
            }
            Ok(Scope::Table {
                table: crate::names::canonical(&s.table)?,
                family: s.family.clone(),
                qualifier: s.qualifier.clone(),
            })
        }
        (false, false) => Err(ServerError::invalid(
            "a permission names a namespace or a table, not both",
        )),
    }
}

/// A permission for the wire.
pub fn permission_to_pb(p: &Permission) -> pb::Permission {
    let scope = match &p.scope {
        Scope::Global => pb::PermissionScope::default(),
        Scope::Namespace(ns) => pb::PermissionScope {
            namespace: ns.clone(),
            ..Default::default()
        },
        Scope::Table {
            table,
            family,
            qualifier,
        } => pb::PermissionScope {
            table: table.clone(),
            family: family.clone(),
            qualifier: qualifier.clone(),
            ..Default::default()
        },
    };
    pb::Permission {
        user: p.user.clone(),
        scope: Some(scope),
        actions: p.actions.to_string(),
    }
}
