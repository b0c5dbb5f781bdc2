//! MasterService: table admin. DDL runs synchronously; its procedure id and outcome are kept
//! so `getProcedureResult` can answer the client's polling.
//!
//! Where an error surfaces mirrors HBase 2.6's master: create and delete table wait for their
//! procedure's prepare step (HBASE-19953), so "table exists", "not found" and "not disabled"
//! come back from the call itself; disable, enable, truncate, modify and flush fail through
//! the procedure (`getProcedureResult` carries the exception, which the client rethrows by
//! class). Family add/modify/delete check the family while submitting, as HBase does.

use super::names::{self, show};
use super::schema;
use super::{meta_view, CallCtx, HReply, HbaseError, HbaseService};
use crate::catalog::names as catalog_names;
use crate::meta::META_TABLE;
use crate::router::TableState;
use crate::security::acl::{Action, Scope};
use bytes::Bytes;
use cellar_model::TableSchema;
use cellar_proto::hbase;
use cellar_proto::hbase::get_procedure_result_response::State as ProcState;
use parking_lot::Mutex;
use prost::Message;
use std::collections::{BTreeMap, HashMap};

#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;

/// The exception HBase raises for adding an existing family or removing a missing one.
pub(crate) const INVALID_FAMILY_OPERATION: &str =
    "org.apache.hadoop.hbase.InvalidFamilyOperationException";
/// Procedure outcomes kept for polling; the oldest go first.
const MAX_PROCEDURES: usize = 1024;

/// A finished procedure: when it ran and how it ended.
#[derive(Debug, Clone)]
struct Outcome {
    /// HBase's procedure class for the operation (what `list_procedures` shows).
    class: &'static str,
    owner: Option<std::sync::Arc<str>>,
    submitted_ms: u64,
    finished_ms: u64,
    error: Option<HbaseError>,
}

/// Finished procedures, by id (bounded: clients poll right after submitting).
#[derive(Debug, Default)]
pub(crate) struct Procedures {
    inner: Mutex<ProcTable>,
}

#[derive(Debug, Default)]
struct ProcTable {
    last_id: u64,
    done: BTreeMap<u64, Outcome>,
    /// The procedure each client nonce started, while that procedure is kept: a request
    /// retried with the same `(nonce_group, nonce)` gets that procedure back instead of
    /// running again (HBase's `ProcedureExecutor.registerNonce`).
    nonces: HashMap<(u64, u64), u64>,
}

/// A request's nonce as HBase keys procedures by it; none when the nonce is 0 (`NO_NONCE`).
pub(super) fn nonce_key(group: Option<u64>, nonce: Option<u64>) -> Option<(u64, u64)> {
    match nonce {
        Some(n) if n != 0 => Some((group.unwrap_or(0), n)),
        _ => None,
    }
}

impl Procedures {
    /// Runs `op` now and records its outcome under a new procedure id, as a procedure of
    /// HBase's class `class` (`org.apache.hadoop.hbase.master.` + `procedure.CreateTableProcedure` and the like) owned
    /// by the caller.
    fn run(
        &self,
        class: &'static str,
        ctx: &CallCtx,
        nonce: Option<(u64, u64)>,
        op: impl FnOnce() -> Result<(), HbaseError>,
    ) -> u64 {
        let submitted_ms = super::now_ms();
        let error = op().err();
        let mut st = self.inner.lock();
        st.last_id += 1;
        let id = st.last_id;
        if let Some(key) = nonce {
            st.nonces.insert(key, id);
        }
        st.done.insert(
            id,
            Outcome {
                class,
                owner: ctx.caller.user.clone(),
                submitted_ms,
                finished_ms: super::now_ms(),
                error,
            },
        );
        while st.done.len() > MAX_PROCEDURES {
            if let Some((old, _)) = st.done.pop_first() {
                st.nonces.retain(|_, v| *v != old);
            }
        }
        id
    }

    /// The procedure a request with this nonce already started, if it is still kept.
    fn replayed(&self, nonce: Option<(u64, u64)>) -> Option<u64> {
        let key = nonce?;
        self.inner.lock().nonces.get(&key).copied()
    }

    fn get(&self, id: u64) -> Option<Outcome> {
        self.inner.lock().done.get(&id).cloned()
    }

    /// Every procedure kept, oldest first, as `GetProcedures` lists them.
    fn list(&self) -> Vec<hbase::Procedure> {
        let st = self.inner.lock();
        st.done
            .iter()
            .map(|(id, o)| hbase::Procedure {
                class_name: format!("org.apache.hadoop.hbase.master.{}", o.class),
                proc_id: *id,
                submitted_time: o.submitted_ms,
                owner: o.owner.as_deref().map(str::to_string),
                state: if o.error.is_some() {
                    hbase::ProcedureState::Failed
                } else {
                    hbase::ProcedureState::Success
                } as i32,
                last_update: o.finished_ms,
                executed: Some(true),
                ..Default::default()
            })
            .collect()
    }
}

fn decode<M: Message + Default>(what: &str, param: &Bytes) -> Result<M, HbaseError> {
    M::decode(param.clone()).map_err(|e| HbaseError::malformed(what, e))
}

/// The table a request names, as Cellar spells it; a missing name is a bad request.
pub(super) fn table_of(t: &hbase::TableName, what: &str) -> Result<String, HbaseError> {
    if t.qualifier.is_empty() {
        return Err(HbaseError::do_not_retry(format!("{what} names no table")));
    }
    names::table_from_pb(t)
}

pub(crate) fn call(
    svc: &HbaseService,
    ctx: &CallCtx,
    method: &str,
    param: Bytes,
) -> Result<HReply, HbaseError> {
    let rs = &svc.rs;
    let procs = &svc.procedures;
    if needs_global_admin(method) {
        rs.authz
            .require(&ctx.caller, Action::Admin, &Scope::Global, method)?;
    }
    if let Some(answer) = super::access::call(svc, ctx, method, &param) {
        return answer;
    }
    match method {
        "IsMasterRunning" => {
            decode::<hbase::IsMasterRunningRequest>("IsMasterRunningRequest", &param)?;
            rs.check_running().map_err(HbaseError::from)?;
            Ok(HReply::message(&hbase::IsMasterRunningResponse {
                is_master_running: true,
            }))
        }
        "GetClusterStatus" => {
            let req: hbase::GetClusterStatusRequest = decode("GetClusterStatusRequest", &param)?;
            Ok(HReply::message(&hbase::GetClusterStatusResponse {
                cluster_status: super::cluster_status::cluster_status(svc, &req.options),
            }))
        }
        // A standalone server holds every region: its balancer (on, as HBase's standalone's)
        // never has a region to move; there is no maintenance mode and no server to
        // decommission.
        "IsBalancerEnabled" => {
            decode::<hbase::IsBalancerEnabledRequest>(method, &param)?;
            Ok(HReply::message(&hbase::IsBalancerEnabledResponse {
                enabled: svc.master()?.balancer_enabled(),
            }))
        }
        "SetBalancerRunning" => {
            let req: hbase::SetBalancerRunningRequest = decode(method, &param)?;
            let previous = svc
                .master()?
                .balance_switch(req.on)
                .map_err(HbaseError::from)?;
            Ok(HReply::message(&hbase::SetBalancerRunningResponse {
                prev_balance_value: Some(previous),
            }))
        }
        "GetProcedures" => {
            decode::<hbase::GetProceduresRequest>(method, &param)?;
            Ok(HReply::message(&hbase::GetProceduresResponse {
                procedure: procs.list(),
            }))
        }
        "IsMasterInMaintenanceMode" => {
            decode::<hbase::IsInMaintenanceModeRequest>(method, &param)?;
            Ok(HReply::message(&hbase::IsInMaintenanceModeResponse {
                in_maintenance_mode: false,
            }))
        }
        "ListDecommissionedRegionServers" => {
            decode::<hbase::ListDecommissionedRegionServersRequest>(method, &param)?;
            Ok(HReply::message(
                &hbase::ListDecommissionedRegionServersResponse::default(),
            ))
        }
        "CreateTable" => {
            let req: hbase::CreateTableRequest = decode("CreateTableRequest", &param)?;
            let schema = schema::table_from_pb(&req.table_schema)?;
            svc.rs.authz.require_create(&ctx.caller, &schema.name)?;
            let nonce = nonce_key(req.nonce_group, req.nonce);
            if let Some(id) = procs.replayed(nonce) {
                return Ok(HReply::message(&hbase::CreateTableResponse {
                    proc_id: Some(id),
                }));
            }
            let name = schema.name.clone();
            svc.master()?.create_table(schema, &req.split_keys)?;
            svc.master()?.grant_owner(&ctx.caller, &name)?;
            let proc_id = procs.run("procedure.CreateTableProcedure", ctx, nonce, || Ok(()));
            Ok(HReply::message(&hbase::CreateTableResponse {
                proc_id: Some(proc_id),
            }))
        }
        "DeleteTable" => {
            let req: hbase::DeleteTableRequest = decode("DeleteTableRequest", &param)?;
            let table = table_of(&req.table_name, "DeleteTableRequest")?;
            table_admin(svc, ctx, &table, "delete a table")?;
            let nonce = nonce_key(req.nonce_group, req.nonce);
            if let Some(id) = procs.replayed(nonce) {
                return Ok(HReply::message(&hbase::DeleteTableResponse {
                    proc_id: Some(id),
                }));
            }
            svc.master()?.delete_table(&table)?;
            let proc_id = procs.run("procedure.DeleteTableProcedure", ctx, nonce, || Ok(()));
            Ok(HReply::message(&hbase::DeleteTableResponse {
                proc_id: Some(proc_id),
            }))
        }
        "DisableTable" => {
            let req: hbase::DisableTableRequest = decode("DisableTableRequest", &param)?;
            let table = table_of(&req.table_name, "DisableTableRequest")?;
            table_admin(svc, ctx, &table, "disable a table")?;
            let nonce = nonce_key(req.nonce_group, req.nonce);
            if let Some(id) = procs.replayed(nonce) {
                return Ok(HReply::message(&hbase::DisableTableResponse {
                    proc_id: Some(id),
                }));
            }
            let proc_id = procs.run("procedure.DisableTableProcedure", ctx, nonce, || {
                Ok(svc.master()?.disable_table(&table)?)
            });
            Ok(HReply::message(&hbase::DisableTableResponse {
                proc_id: Some(proc_id),
            }))
        }
        "EnableTable" => {
            let req: hbase::EnableTableRequest = decode("EnableTableRequest", &param)?;
            let table = table_of(&req.table_name, "EnableTableRequest")?;
            table_admin(svc, ctx, &table, "enable a table")?;
            let nonce = nonce_key(req.nonce_group, req.nonce);
            if let Some(id) = procs.replayed(nonce) {
                return Ok(HReply::message(&hbase::EnableTableResponse {
                    proc_id: Some(id),
                }));
            }
            let proc_id = procs.run("procedure.EnableTableProcedure", ctx, nonce, || {
                Ok(svc.master()?.enable_table(&table)?)
            });
            Ok(HReply::message(&hbase::EnableTableResponse {
                proc_id: Some(proc_id),
            }))
        }
        "truncateTable" => {
            let req: hbase::TruncateTableRequest = decode("TruncateTableRequest", &param)?;
            let table = table_of(&req.table_name, "TruncateTableRequest")?;
            table_admin(svc, ctx, &table, "truncate a table")?;
            let nonce = nonce_key(req.nonce_group, req.nonce);
            if let Some(id) = procs.replayed(nonce) {
                return Ok(HReply::message(&hbase::TruncateTableResponse {
                    proc_id: Some(id),
                }));
            }
            let preserve = req.preserve_splits();
            let proc_id = procs.run("procedure.TruncateTableProcedure", ctx, nonce, || {
                truncate(svc, &table, preserve)
            });
            Ok(HReply::message(&hbase::TruncateTableResponse {
                proc_id: Some(proc_id),
            }))
        }
        "ModifyTable" => {
            let req: hbase::ModifyTableRequest = decode("ModifyTableRequest", &param)?;
            let table = table_of(&req.table_name, "ModifyTableRequest")?;
            table_admin(svc, ctx, &table, "modify a table")?;
            let nonce = nonce_key(req.nonce_group, req.nonce);
            if let Some(id) = procs.replayed(nonce) {
                return Ok(HReply::message(&hbase::ModifyTableResponse {
                    proc_id: Some(id),
                }));
            }
            let wanted = schema::table_from_pb(&req.table_schema)?;
            if wanted.name != table {
                return Err(HbaseError::do_not_retry(format!(
                    "ModifyTableRequest names table '{table}' but its descriptor is of '{}'",
                    wanted.name
                )));
            }
            let proc_id = procs.run("procedure.ModifyTableProcedure", ctx, nonce, || {
                modify(svc, &table, wanted)
            });
            Ok(HReply::message(&hbase::ModifyTableResponse {
                proc_id: Some(proc_id),
            }))
        }
        "AddColumn" | "ModifyColumn" => {
            let (table, family, nonce) = if method == "AddColumn" {
                let req: hbase::AddColumnRequest = decode("AddColumnRequest", &param)?;
                let nonce = nonce_key(req.nonce_group, req.nonce);
                (req.table_name, req.column_families, nonce)
            } else {
                let req: hbase::ModifyColumnRequest = decode("ModifyColumnRequest", &param)?;
                let nonce = nonce_key(req.nonce_group, req.nonce);
                (req.table_name, req.column_families, nonce)
            };
            let table = table_of(&table, method)?;
            table_admin(svc, ctx, &table, "modify a table")?;
            if let Some(id) = procs.replayed(nonce) {
                // AddColumnResponse and ModifyColumnResponse are the same message.
                return Ok(HReply::message(&hbase::AddColumnResponse {
                    proc_id: Some(id),
                }));
            }
            let family = schema::family_from_pb(&table, &family)?;
            let current = current_schema(svc, &table)?;
            let exists = current.family(family.name.as_bytes()).is_some();
            if method == "AddColumn" && exists {
                return Err(invalid_family(format!(
                    "column family '{}' in table '{table}' already exists so cannot be added",
                    family.name
                )));
            }
            if method == "ModifyColumn" && !exists {
                return Err(invalid_family(format!(
                    "column family '{}' does not exist in table '{table}'",
                    family.name
                )));
            }
            let proc_id = procs.run("procedure.ModifyTableProcedure", ctx, nonce, || {
                Ok(svc.master()?.alter_table(&table, vec![family], &[])?)
            });
            let reply = hbase::AddColumnResponse {
                proc_id: Some(proc_id),
            };
            Ok(HReply::message(&reply))
        }
        "DeleteColumn" => {
            let req: hbase::DeleteColumnRequest = decode("DeleteColumnRequest", &param)?;
            let table = table_of(&req.table_name, "DeleteColumnRequest")?;
            table_admin(svc, ctx, &table, "modify a table")?;
            let nonce = nonce_key(req.nonce_group, req.nonce);
            if let Some(id) = procs.replayed(nonce) {
                return Ok(HReply::message(&hbase::DeleteColumnResponse {
                    proc_id: Some(id),
                }));
            }
            let family = String::from_utf8_lossy(&req.column_name).into_owned();
            let current = current_schema(svc, &table)?;
            if current.family(&req.column_name).is_none() {
                return Err(invalid_family(format!(
                    "family '{}' does not exist in table '{table}', so it cannot be deleted",
                    show(&req.column_name)
                )));
            }
            if current.families.len() == 1 {
                return Err(invalid_family(format!(
                    "family '{family}' is the only column family of table '{table}', so it cannot be deleted"
                )));
            }
            let proc_id = procs.run("procedure.ModifyTableProcedure", ctx, nonce, || {
                Ok(svc.master()?.alter_table(&table, Vec::new(), &[family])?)
            });
            Ok(HReply::message(&hbase::DeleteColumnResponse {
                proc_id: Some(proc_id),
            }))
        }
        "FlushTable" => {
            let req: hbase::FlushTableRequest = decode("FlushTableRequest", &param)?;
            let table = table_of(&req.table_name, "FlushTableRequest")?;
            table_admin(svc, ctx, &table, "flush a table")?;
            let nonce = nonce_key(req.nonce_group, req.nonce);
            if let Some(id) = procs.replayed(nonce) {
                return Ok(HReply::message(&hbase::FlushTableResponse {
                    proc_id: Some(id),
                }));
            }
            // As HBase's FlushTableProcedure, families the table lacks fail the call itself.
            // Cellar then flushes whole regions: a family list flushes them all, a superset
            // with the same data visible.
            check_families(&current_schema(svc, &table)?, &req.column_family, &table)?;
            let proc_id = procs.run("procedure.FlushTableProcedure", ctx, nonce, || {
                Ok(svc.master()?.flush_table(&table)?)
            });
            Ok(HReply::message(&hbase::FlushTableResponse {
                proc_id: Some(proc_id),
            }))
        }
        "SplitRegion" => {
            // Admin.split / splitRegionAsync. Like HBase's, a bad split row or a region that
            // cannot split fails the call itself; the split then runs before the answer.
            let req: hbase::SplitTableRegionRequest = decode("SplitTableRegionRequest", &param)?;
            let info = &req.region_info;
            let table = table_of(&info.table_name, "SplitTableRegionRequest")?;
            svc.rs.authz.require(
                &ctx.caller,
                Action::Admin,
                &Scope::table(&table),
                "split a region",
            )?;
            let nonce = nonce_key(req.nonce_group, req.nonce);
            if let Some(id) = procs.replayed(nonce) {
                return Ok(HReply::message(&hbase::SplitTableRegionResponse {
                    proc_id: Some(id),
                }));
            }
            let row = req.split_row.filter(|r| !r.is_empty());
            svc.master()?
                .split_region_by_id(&table, info.region_id, row)?;
            let proc_id = procs.run(
                "assignment.SplitTableRegionProcedure",
                ctx,
                nonce,
                || Ok(()),
            );
            Ok(HReply::message(&hbase::SplitTableRegionResponse {
                proc_id: Some(proc_id),
            }))
        }
        "GetSchemaAlterStatus" => {
            // Cellar alters a table's regions before the Modify call returns, so none is left.
            let req: hbase::GetSchemaAlterStatusRequest =
                decode("GetSchemaAlterStatusRequest", &param)?;
            let table = table_of(&req.table_name, "GetSchemaAlterStatusRequest")?;
            let regions = rs.list_regions(&table)?.len();
            Ok(HReply::message(&hbase::GetSchemaAlterStatusResponse {
                yet_to_update_regions: Some(0),
                total_regions: Some(u32::try_from(regions).unwrap_or(u32::MAX)),
            }))
        }
        "getProcedureResult" => {
            let req: hbase::GetProcedureResultRequest =
                decode("GetProcedureResultRequest", &param)?;
            Ok(HReply::message(&procedure_result(svc, req.proc_id)))
        }
        "GetTableDescriptors" => {
            let req: hbase::GetTableDescriptorsRequest =
                decode("GetTableDescriptorsRequest", &param)?;
            let pick = Selection::new(
                req.regex.as_deref(),
                req.namespace.as_deref(),
                req.include_sys_tables(),
            )?;
            let schemas: Vec<TableSchema> = if req.table_names.is_empty() {
                pick.check_namespace(svc)?;
                user_tables(svc, ctx)
                    .into_iter()
                    .filter(|(n, _)| pick.matches(n))
                    .map(|(_, s)| s)
                    .collect()
            } else {
                // Tables that do not exist are left out; the client reports them. As in
                // HBase, the regex still applies to the tables named (the namespace does not).
                let mut v = Vec::new();
                for t in &req.table_names {
                    let name = names::table_from_pb(t)?;
                    if let Some(route) = visible_table(svc, &name) {
                        if pick.matches_name(&name) {
                            v.push((*route.schema).clone());
                        }
                    }
                }
                v
            };
            Ok(HReply::message(&hbase::GetTableDescriptorsResponse {
                table_schema: schemas.iter().map(schema::table_to_pb).collect(),
            }))
        }
        "GetTableNames" => {
            let req: hbase::GetTableNamesRequest = decode("GetTableNamesRequest", &param)?;
            let pick = Selection::new(
                req.regex.as_deref(),
                req.namespace.as_deref(),
                req.include_sys_tables(),
            )?;
            pick.check_namespace(svc)?;
            Ok(HReply::message(&hbase::GetTableNamesResponse {
                table_names: user_tables(svc, ctx)
                    .into_iter()
                    .filter(|(n, _)| pick.matches(n))
                    .map(|(n, _)| names::table_to_pb(&n))
                    .collect(),
            }))
        }
        "GetTableState" => {
            let req: hbase::GetTableStateRequest = decode("GetTableStateRequest", &param)?;
            let table = table_of(&req.table_name, "GetTableStateRequest")?;
            let state = if table == META_TABLE {
                TableState::Enabled
            } else {
                visible_table(svc, &table)
                    .ok_or_else(|| table_not_found(&table))?
                    .state
            };
            Ok(HReply::message(&hbase::GetTableStateResponse {
                table_state: meta_view::table_state_pb(state),
            }))
        }
        "ListTableDescriptorsByNamespace" | "ListTableNamesByNamespace" => {
            let ns = if method == "ListTableNamesByNamespace" {
                decode::<hbase::ListTableNamesByNamespaceRequest>(method, &param)?.namespace_name
            } else {
                decode::<hbase::ListTableDescriptorsByNamespaceRequest>(method, &param)?
                    .namespace_name
            };
            if !svc.master()?.namespaces().contains_key(&ns) {
                return Err(namespace_not_found(&ns));
            }
            let tables: Vec<_> = user_tables(svc, ctx)
                .into_iter()
                .filter(|(n, _)| catalog_names::split(n).0 == ns)
                .collect();
            if method == "ListTableNamesByNamespace" {
                Ok(HReply::message(&hbase::ListTableNamesByNamespaceResponse {
                    table_name: tables.iter().map(|(n, _)| names::table_to_pb(n)).collect(),
                }))
            } else {
                Ok(HReply::message(
                    &hbase::ListTableDescriptorsByNamespaceResponse {
                        table_schema: tables.iter().map(|(_, s)| schema::table_to_pb(s)).collect(),
                    },
                ))
            }
        }
        "ListNamespaceDescriptors" => {
            decode::<hbase::ListNamespaceDescriptorsRequest>(method, &param)?;
            Ok(HReply::message(&hbase::ListNamespaceDescriptorsResponse {
                namespace_descriptor: svc
                    .master()?
                    .namespaces()
                    .iter()
                    .map(|(n, conf)| ns_descriptor(n, conf))
                    .collect(),
            }))
        }
        "ListNamespaces" => {
            decode::<hbase::ListNamespacesRequest>(method, &param)?;
            Ok(HReply::message(&hbase::ListNamespacesResponse {
                namespace_name: svc.master()?.namespaces().into_keys().collect(),
            }))
        }
        "GetNamespaceDescriptor" => {
            let req: hbase::GetNamespaceDescriptorRequest = decode(method, &param)?;
            let all = svc.master()?.namespaces();
            let conf = all
                .get(&req.namespace_name)
                .ok_or_else(|| namespace_not_found(&req.namespace_name))?;
            Ok(HReply::message(&hbase::GetNamespaceDescriptorResponse {
                namespace_descriptor: ns_descriptor(&req.namespace_name, conf),
            }))
        }
        // Namespace DDL. As in HBase, "exists", "not found" and "not empty" fail the call.
        "CreateNamespace" | "ModifyNamespace" => {
            let (descriptor, nonce) = if method == "CreateNamespace" {
                let req: hbase::CreateNamespaceRequest = decode(method, &param)?;
                let nonce = nonce_key(req.nonce_group, req.nonce);
                (req.namespace_descriptor, nonce)
            } else {
                let req: hbase::ModifyNamespaceRequest = decode(method, &param)?;
                let nonce = nonce_key(req.nonce_group, req.nonce);
                (req.namespace_descriptor, nonce)
            };
            if let Some(id) = procs.replayed(nonce) {
                // Both responses are the same message.
                return Ok(HReply::message(&hbase::CreateNamespaceResponse {
                    proc_id: Some(id),
                }));
            }
            let name = String::from_utf8(descriptor.name.to_vec()).map_err(|_| {
                HbaseError::do_not_retry(format!("{method}: the namespace name is not UTF-8"))
            })?;
            let conf = descriptor
                .configuration
                .into_iter()
                .map(|p| (p.name, p.value))
                .collect();
            if method == "CreateNamespace" {
                svc.master()?.create_namespace(&name, conf)?;
            } else {
                svc.master()?.modify_namespace(&name, conf)?;
            }
            let proc_id = Some(procs.run(
                if method == "CreateNamespace" {
                    "procedure.CreateNamespaceProcedure"
                } else {
                    "procedure.ModifyNamespaceProcedure"
                },
                ctx,
                nonce,
                || Ok(()),
            ));
            Ok(if method == "CreateNamespace" {
                HReply::message(&hbase::CreateNamespaceResponse { proc_id })
            } else {
                HReply::message(&hbase::ModifyNamespaceResponse { proc_id })
            })
        }
        "DeleteNamespace" => {
            let req: hbase::DeleteNamespaceRequest = decode(method, &param)?;
            let nonce = nonce_key(req.nonce_group, req.nonce);
            if let Some(id) = procs.replayed(nonce) {
                return Ok(HReply::message(&hbase::DeleteNamespaceResponse {
                    proc_id: Some(id),
                }));
            }
            // HBase checks before its procedure runs (its prepare latch): a namespace that
            // still holds tables, or a reserved one, is refused by the call itself.
            svc.master()?.delete_namespace(&req.namespace_name)?;
            let proc_id =
                Some(procs.run("procedure.DeleteNamespaceProcedure", ctx, nonce, || Ok(())));
            Ok(HReply::message(&hbase::DeleteNamespaceResponse { proc_id }))
        }
        _ => Err(HbaseError::unknown_method("MasterService", method)),
    }
}

/// What `getProcedureResult` answers for `proc_id`.
fn procedure_result(svc: &HbaseService, proc_id: u64) -> hbase::GetProcedureResultResponse {
    let Some(o) = svc.procedures.get(proc_id) else {
        return hbase::GetProcedureResultResponse {
            state: ProcState::NotFound as i32,
            ..Default::default()
        };
    };
    hbase::GetProcedureResultResponse {
        state: ProcState::Finished as i32,
        submitted_time: Some(o.submitted_ms),
        last_update: Some(o.finished_ms),
        result: None,
        exception: o.error.map(|e| foreign_exception(svc, &e)),
    }
}

/// A failed procedure's exception as the client rebuilds it (class by name, message).
pub(crate) fn foreign_exception(
    svc: &HbaseService,
    e: &HbaseError,
) -> hbase::ForeignExceptionMessage {
    hbase::ForeignExceptionMessage {
        source: Some(meta_view::server_name_string(svc)),
        generic_exception: Some(hbase::GenericExceptionMessage {
            class_name: Some(e.class.to_string()),
            message: Some(e.message.clone()),
            error_info: None,
            trace: Vec::new(),
        }),
    }
}

/// HBase's check of the families a flush names: every one the table lacks, in one
/// NoSuchColumnFamilyException ("Column families [a, b] don't exist in table t").
pub(super) fn check_families(
    schema: &TableSchema,
    families: &[Bytes],
    table: &str,
) -> Result<(), HbaseError> {
    let missing: Vec<String> = families
        .iter()
        .filter(|f| schema.family(f).is_none())
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(HbaseError::new(
        super::exceptions::NO_SUCH_FAMILY,
        format!(
            "Column families [{}] don't exist in table {table}",
            missing.join(", ")
        ),
        true,
    ))
}

fn invalid_family(message: String) -> HbaseError {
    HbaseError::new(INVALID_FAMILY_OPERATION, message, true)
}

fn table_not_found(table: &str) -> HbaseError {
    HbaseError::new(super::exceptions::TABLE_NOT_FOUND, table.to_string(), true)
}

fn namespace_not_found(ns: &str) -> HbaseError {
    HbaseError::new(super::exceptions::NAMESPACE_NOT_FOUND, ns.to_string(), true)
}

/// A user table's route (system tables, Cellar's meta among them, are not shown).
fn visible_table(svc: &HbaseService, table: &str) -> Option<crate::router::TableRoute> {
    if catalog_names::is_system(table) {
        return None;
    }
    svc.rs.router.table(table)
}

fn current_schema(svc: &HbaseService, table: &str) -> Result<TableSchema, HbaseError> {
    visible_table(svc, table)
        .map(|r| (*r.schema).clone())
        .ok_or_else(|| table_not_found(table))
}

/// User tables and their schemas, by name: those the caller holds any permission on.
fn user_tables(svc: &HbaseService, ctx: &CallCtx) -> Vec<(String, TableSchema)> {
    svc.rs
        .router
        .tables()
        .into_iter()
        .filter(|(n, _)| !catalog_names::is_system(n))
        .filter(|(n, _)| svc.rs.authz.sees_table(&ctx.caller, n))
        .map(|(n, r)| (n, (*r.schema).clone()))
        .collect()
}

/// `default`, `hbase` and every namespace a table lives in (Cellar has no namespace records).
fn ns_descriptor(name: &str, configuration: &[(String, String)]) -> hbase::NamespaceDescriptor {
    hbase::NamespaceDescriptor {
        name: Bytes::copy_from_slice(name.as_bytes()),
        configuration: configuration
            .iter()
            .map(|(k, v)| hbase::NameStringPair {
                name: k.clone(),
                value: v.clone(),
            })
            .collect(),
    }
}

/// Which tables a list call wants: HBase matches the regex against the whole name, and for
/// tables of the default namespace also against `default:<name>`.
pub(super) struct Selection {
    regex: Option<regex::Regex>,
    namespace: Option<String>,
}

impl Selection {
    pub(super) fn new(
        regex: Option<&str>,
        namespace: Option<&str>,
        _sys: bool,
    ) -> Result<Selection, HbaseError> {
        let regex = regex
            .filter(|r| !r.is_empty())
            .map(|r| {
                regex::RegexBuilder::new(&format!("^(?:{r})$"))
                    .size_limit(cellar_model::filter::MAX_REGEX_BYTES)
                    .dfa_size_limit(cellar_model::filter::MAX_REGEX_BYTES)
                    .build()
                    .map_err(|e| {
                        HbaseError::do_not_retry(format!("invalid table name pattern '{r}': {e}"))
                    })
            })
            .transpose()?;
        Ok(Selection {
            regex,
            namespace: namespace.filter(|n| !n.is_empty()).map(String::from),
        })
    }

    /// HBase looks the namespace up first: one that does not exist is
    /// NamespaceNotFoundException, not an empty list.
    pub(super) fn check_namespace(&self, svc: &HbaseService) -> Result<(), HbaseError> {
        match &self.namespace {
            Some(ns) if !svc.master()?.namespaces().contains_key(ns) => {
                Err(namespace_not_found(ns))
            }
            _ => Ok(()),
        }
    }

    pub(super) fn matches(&self, table: &str) -> bool {
        let (ns, _) = catalog_names::split(table);
        if self.namespace.as_deref().is_some_and(|want| want != ns) {
            return false;
        }
        self.matches_name(table)
    }

    /// Whether the regex (if any) takes `table`, whatever the namespace asked for.
    pub(super) fn matches_name(&self, table: &str) -> bool {
        let (ns, _) = catalog_names::split(table);
        match &self.regex {
            None => true,
            Some(re) => {
                re.is_match(table)
                    || (ns == catalog_names::DEFAULT_NAMESPACE
                        && re.is_match(&format!("default:{table}")))
            }
        }
    }
}

/// HBase's truncate: the table must be disabled; afterwards it is enabled and empty, with its
/// old region boundaries when `preserve_splits`.
fn truncate(svc: &HbaseService, table: &str, preserve_splits: bool) -> Result<(), HbaseError> {
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
fn modify(svc: &HbaseService, table: &str, wanted: TableSchema) -> Result<(), HbaseError> {
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

/// Master calls that change the cluster rather than a table need global ADMIN (HBase's
/// AccessController: namespaces, the balancer, and anything this front end does not list as
/// a read or check by table).
fn needs_global_admin(method: &str) -> bool {
    !matches!(
        method,
        "IsMasterRunning"
            | "GetClusterStatus"
            | "IsBalancerEnabled"
            | "IsMasterInMaintenanceMode"
            | "ListDecommissionedRegionServers"
            | "CreateTable"
            | "DeleteTable"
            | "DisableTable"
            | "EnableTable"
            | "truncateTable"
            | "ModifyTable"
            | "AddColumn"
            | "ModifyColumn"
            | "DeleteColumn"
            | "FlushTable"
            | "SplitRegion"
            | "GetSchemaAlterStatus"
            | "getProcedureResult"
            | "GetTableDescriptors"
            | "GetTableNames"
            | "GetTableState"
            | "ListTableDescriptorsByNamespace"
            | "ListTableNamesByNamespace"
            | "ListNamespaceDescriptors"
            | "ListNamespaces"
            | "GetNamespaceDescriptor"
            | "Grant"
            | "Revoke"
            | "GetUserPermissions"
            | "HasUserPermissions"
            | "getSecurityCapabilities"
    )
}

/// ADMIN or CREATE on `table` (HBase's rule for table DDL, flushes and compactions).
pub(super) fn table_admin(
    svc: &HbaseService,
    ctx: &CallCtx,
    table: &str,
    what: &str,
) -> Result<(), HbaseError> {
    Ok(svc.rs.authz.require_table_admin(&ctx.caller, table, what)?)
}
