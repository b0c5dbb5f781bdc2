//! MasterService: table admin (DDL), namespaces, the cluster's status and switches, the
//! procedures DDL leaves for clients to poll, and grants. One file per call family:
//! [`tables`] (DDL), [`table_info`] (descriptors, names, states), [`namespaces`],
//! [`cluster`] (master, balancer, status), [`procedures`] and [`access`] (grants). Each call
//! is a request type with a decode half (the request's bytes to the typed request, no server
//! state) and an execute half.

pub(super) mod access;
pub(super) mod cluster;
pub(super) mod namespaces;
pub(super) mod procedures;
pub(super) mod snapshots;
pub(super) mod table_info;
pub(super) mod tables;

pub(crate) use procedures::Procedures;

use super::names;
use super::{CallCtx, HbaseError, HbaseService, Reply, Request, Service};
use crate::names as catalog_names;
use crate::security::acl::{Action, Scope};
use bytes::Bytes;
use cellar_model::TableSchema;
use cellar_proto::hbase;

#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;

type Result<T> = std::result::Result<T, HbaseError>;

/// The exception HBase raises for adding an existing family or removing a missing one.
pub(crate) const INVALID_FAMILY_OPERATION: &str =
    "org.apache.hadoop.hbase.InvalidFamilyOperationException";

/// The table a request names, as Cellar spells it; a missing name is a bad request.
pub(super) fn table_of(t: &hbase::TableName, what: &str) -> Result<String> {
    if t.qualifier.is_empty() {
        return Err(HbaseError::do_not_retry(format!("{what} names no table")));
    }
    names::table_from_pb(t)
}

/// A MasterService request, decoded.
#[derive(Debug)]
pub(crate) enum Call {
    IsMasterRunning(cluster::IsMasterRunning),
    GetClusterStatus(cluster::GetClusterStatus),
    IsBalancerEnabled(cluster::IsBalancerEnabled),
    SetBalancerRunning(cluster::SetBalancerRunning),
    IsInMaintenanceMode(cluster::IsInMaintenanceMode),
    ListDecommissioned(cluster::ListDecommissioned),
    CreateTable(tables::CreateTable),
    DeleteTable(tables::DeleteTable),
    SwitchTable(tables::SwitchTable),
    TruncateTable(tables::TruncateTable),
    ModifyTable(tables::ModifyTable),
    PutColumn(tables::PutColumn),
    DeleteColumn(tables::DeleteColumn),
    FlushTable(tables::FlushTable),
    SplitRegion(tables::SplitRegion),
    MergeRegions(tables::MergeRegions),
    Snapshot(snapshots::Snapshot),
    IsSnapshotDone(snapshots::IsSnapshotDone),
    GetCompletedSnapshots(snapshots::GetCompletedSnapshots),
    DeleteSnapshot(snapshots::DeleteSnapshot),
    RestoreSnapshot(snapshots::RestoreSnapshot),
    IsRestoreSnapshotDone(snapshots::IsRestoreSnapshotDone),
    GetSchemaAlterStatus(tables::GetSchemaAlterStatus),
    GetProcedureResult(procedures::GetProcedureResult),
    GetTableDescriptors(table_info::GetTableDescriptors),
    GetTableNames(table_info::GetTableNames),
    GetTableState(table_info::GetTableState),
    NamespaceTables(table_info::NamespaceTables),
    ListNamespaceDescriptors(namespaces::ListNamespaceDescriptors),
    ListNamespaces(namespaces::ListNamespaces),
    GetNamespaceDescriptor(namespaces::GetNamespaceDescriptor),
    PutNamespace(namespaces::PutNamespace),
    DeleteNamespace(namespaces::DeleteNamespace),
    GetProcedures(procedures::GetProcedures),
    Grant(access::Grant),
    Revoke(access::Revoke),
    GetUserPermissions(access::GetUserPermissions),
    HasUserPermissions(access::HasUserPermissions),
    SecurityCapabilities(access::SecurityCapabilities),
}

/// MasterService's calls and their decode halves, by family (the fuzz target picks a call by
/// its index: new ones go at the end).
pub(crate) const SERVICE: Service = Service {
    name: "MasterService",
    admit,
    calls: &[
        ("IsMasterRunning", cluster::IsMasterRunning::decode),
        ("GetClusterStatus", cluster::GetClusterStatus::decode),
        ("IsBalancerEnabled", cluster::IsBalancerEnabled::decode),
        ("SetBalancerRunning", cluster::SetBalancerRunning::decode),
        (
            "IsMasterInMaintenanceMode",
            cluster::IsInMaintenanceMode::decode,
        ),
        (
            "ListDecommissionedRegionServers",
            cluster::ListDecommissioned::decode,
        ),
        ("CreateTable", tables::CreateTable::decode),
        ("DeleteTable", tables::DeleteTable::decode),
        ("DisableTable", tables::SwitchTable::decode_disable),
        ("EnableTable", tables::SwitchTable::decode_enable),
        ("truncateTable", tables::TruncateTable::decode),
        ("ModifyTable", tables::ModifyTable::decode),
        ("AddColumn", tables::PutColumn::decode_add),
        ("ModifyColumn", tables::PutColumn::decode_modify),
        ("DeleteColumn", tables::DeleteColumn::decode),
        ("FlushTable", tables::FlushTable::decode),
        ("SplitRegion", tables::SplitRegion::decode),
        ("MergeTableRegions", tables::MergeRegions::decode),
        ("Snapshot", snapshots::Snapshot::decode),
        ("IsSnapshotDone", snapshots::IsSnapshotDone::decode),
        (
            "GetCompletedSnapshots",
            snapshots::GetCompletedSnapshots::decode,
        ),
        ("DeleteSnapshot", snapshots::DeleteSnapshot::decode),
        ("RestoreSnapshot", snapshots::RestoreSnapshot::decode),
        (
            "IsRestoreSnapshotDone",
            snapshots::IsRestoreSnapshotDone::decode,
        ),
        ("GetSchemaAlterStatus", tables::GetSchemaAlterStatus::decode),
        ("getProcedureResult", procedures::GetProcedureResult::decode),
        (
            "GetTableDescriptors",
            table_info::GetTableDescriptors::decode,
        ),
        ("GetTableNames", table_info::GetTableNames::decode),
        ("GetTableState", table_info::GetTableState::decode),
        (
            "ListTableDescriptorsByNamespace",
            table_info::NamespaceTables::decode_descriptors,
        ),
        (
            "ListTableNamesByNamespace",
            table_info::NamespaceTables::decode_names,
        ),
        (
            "ListNamespaceDescriptors",
            namespaces::ListNamespaceDescriptors::decode,
        ),
        ("ListNamespaces", namespaces::ListNamespaces::decode),
        (
            "GetNamespaceDescriptor",
            namespaces::GetNamespaceDescriptor::decode,
        ),
        ("CreateNamespace", namespaces::PutNamespace::decode_create),
        ("ModifyNamespace", namespaces::PutNamespace::decode_modify),
        ("DeleteNamespace", namespaces::DeleteNamespace::decode),
        ("GetProcedures", procedures::GetProcedures::decode),
        ("Grant", access::Grant::decode),
        ("Revoke", access::Revoke::decode),
        ("GetUserPermissions", access::GetUserPermissions::decode),
        ("HasUserPermissions", access::HasUserPermissions::decode),
        (
            "getSecurityCapabilities",
            access::SecurityCapabilities::decode,
        ),
    ],
};

/// Calls on the cluster rather than a table need global ADMIN, checked before anything is
/// decoded.
fn admit(svc: &HbaseService, ctx: &CallCtx, method: &str) -> Result<()> {
    if needs_global_admin(method) {
        svc.rs
            .authz
            .require(&ctx.caller, Action::Admin, &Scope::Global, method)?;
    }
    Ok(())
}

impl From<Call> for Request {
    fn from(call: Call) -> Request {
        Request::Master(call)
    }
}

/// The execute halves.
pub(crate) fn execute(svc: &HbaseService, ctx: &CallCtx, call: Call) -> Result<Reply> {
    match call {
        Call::IsMasterRunning(call) => call.execute(svc),
        Call::GetClusterStatus(call) => call.execute(svc),
        Call::IsBalancerEnabled(call) => call.execute(svc),
        Call::SetBalancerRunning(call) => call.execute(svc),
        Call::IsInMaintenanceMode(call) => call.execute(),
        Call::ListDecommissioned(call) => call.execute(),
        Call::CreateTable(call) => call.execute(svc, ctx),
        Call::DeleteTable(call) => call.execute(svc, ctx),
        Call::SwitchTable(call) => call.execute(svc, ctx),
        Call::TruncateTable(call) => call.execute(svc, ctx),
        Call::ModifyTable(call) => call.execute(svc, ctx),
        Call::PutColumn(call) => call.execute(svc, ctx),
        Call::DeleteColumn(call) => call.execute(svc, ctx),
        Call::FlushTable(call) => call.execute(svc, ctx),
        Call::SplitRegion(call) => call.execute(svc, ctx),
        Call::MergeRegions(call) => call.execute(svc, ctx),
        Call::Snapshot(call) => call.execute(svc, ctx),
        Call::IsSnapshotDone(call) => call.execute(svc),
        Call::GetCompletedSnapshots(call) => call.execute(svc, ctx),
        Call::DeleteSnapshot(call) => call.execute(svc, ctx),
        Call::RestoreSnapshot(call) => call.execute(svc, ctx),
        Call::IsRestoreSnapshotDone(call) => call.execute(),
        Call::GetSchemaAlterStatus(call) => call.execute(svc),
        Call::GetProcedureResult(call) => call.execute(svc),
        Call::GetTableDescriptors(call) => call.execute(svc, ctx),
        Call::GetTableNames(call) => call.execute(svc, ctx),
        Call::GetTableState(call) => call.execute(svc),
        Call::NamespaceTables(call) => call.execute(svc, ctx),
        Call::ListNamespaceDescriptors(call) => call.execute(svc),
        Call::ListNamespaces(call) => call.execute(svc),
        Call::GetNamespaceDescriptor(call) => call.execute(svc),
        Call::PutNamespace(call) => call.execute(svc, ctx),
        Call::DeleteNamespace(call) => call.execute(svc, ctx),
        Call::GetProcedures(call) => call.execute(svc),
        Call::Grant(call) => call.execute(svc, ctx),
        Call::Revoke(call) => call.execute(svc, ctx),
        Call::GetUserPermissions(call) => call.execute(svc, ctx),
        Call::HasUserPermissions(call) => call.execute(svc, ctx),
        Call::SecurityCapabilities(call) => call.execute(svc),
    }
}

/// HBase's check of the families a flush names: every one the table lacks, in one
/// NoSuchColumnFamilyException ("Column families [a, b] don't exist in table t").
pub(super) fn check_families(schema: &TableSchema, families: &[Bytes], table: &str) -> Result<()> {
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

fn current_schema(svc: &HbaseService, table: &str) -> Result<TableSchema> {
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
            | "MergeTableRegions"
            | "Snapshot"
            | "IsSnapshotDone"
            | "GetCompletedSnapshots"
            | "DeleteSnapshot"
            | "RestoreSnapshot"
            | "IsRestoreSnapshotDone"
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
) -> Result<()> {
    Ok(svc.rs.authz.require_table_admin(&ctx.caller, table, what)?)
}
