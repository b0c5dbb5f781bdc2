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
pub(super) mod table_info;
pub(super) mod tables;

pub(crate) use procedures::Procedures;

use super::names;
use super::{CallCtx, HReply, HbaseError, HbaseService};
use crate::catalog::names as catalog_names;
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

pub(crate) fn call(
    svc: &HbaseService,
    ctx: &CallCtx,
    method: &str,
    param: Bytes,
) -> Result<HReply> {
    if needs_global_admin(method) {
        svc.rs
            .authz
            .require(&ctx.caller, Action::Admin, &Scope::Global, method)?;
    }
    match method {
        "Grant" => access::Grant::decode(param)?.execute(svc, ctx),
        "Revoke" => access::Revoke::decode(param)?.execute(svc, ctx),
        "GetUserPermissions" => access::GetUserPermissions::decode(param)?.execute(svc, ctx),
        "HasUserPermissions" => access::HasUserPermissions::decode(param)?.execute(svc, ctx),
        "getSecurityCapabilities" => access::SecurityCapabilities::decode(param)?.execute(svc),
        "IsMasterRunning" => cluster::IsMasterRunning::decode(param)?.execute(svc),
        "GetClusterStatus" => cluster::GetClusterStatus::decode(param)?.execute(svc),
        "IsBalancerEnabled" => cluster::IsBalancerEnabled::decode(param)?.execute(svc),
        "SetBalancerRunning" => cluster::SetBalancerRunning::decode(param)?.execute(svc),
        "GetProcedures" => procedures::GetProcedures::decode(param)?.execute(svc),
        "IsMasterInMaintenanceMode" => cluster::IsInMaintenanceMode::decode(param)?.execute(),
        "ListDecommissionedRegionServers" => cluster::ListDecommissioned::decode(param)?.execute(),
        "CreateTable" => tables::CreateTable::decode(param)?.execute(svc, ctx),
        "DeleteTable" => tables::DeleteTable::decode(param)?.execute(svc, ctx),
        "DisableTable" => tables::DisableTable::decode(param)?.execute(svc, ctx),
        "EnableTable" => tables::EnableTable::decode(param)?.execute(svc, ctx),
        "truncateTable" => tables::TruncateTable::decode(param)?.execute(svc, ctx),
        "ModifyTable" => tables::ModifyTable::decode(param)?.execute(svc, ctx),
        "AddColumn" => tables::PutColumn::decode_add(param)?.execute(svc, ctx),
        "ModifyColumn" => tables::PutColumn::decode_modify(param)?.execute(svc, ctx),
        "DeleteColumn" => tables::DeleteColumn::decode(param)?.execute(svc, ctx),
        "FlushTable" => tables::FlushTable::decode(param)?.execute(svc, ctx),
        "SplitRegion" => tables::SplitRegion::decode(param)?.execute(svc, ctx),
        "GetSchemaAlterStatus" => tables::GetSchemaAlterStatus::decode(param)?.execute(svc),
        "getProcedureResult" => procedures::GetProcedureResult::decode(param)?.execute(svc),
        "GetTableDescriptors" => table_info::GetTableDescriptors::decode(param)?.execute(svc, ctx),
        "GetTableNames" => table_info::GetTableNames::decode(param)?.execute(svc, ctx),
        "GetTableState" => table_info::GetTableState::decode(param)?.execute(svc),
        "ListTableDescriptorsByNamespace" => {
            table_info::NamespaceTables::decode_descriptors(param)?.execute(svc, ctx)
        }
        "ListTableNamesByNamespace" => {
            table_info::NamespaceTables::decode_names(param)?.execute(svc, ctx)
        }
        "ListNamespaceDescriptors" => {
            namespaces::ListNamespaceDescriptors::decode(param)?.execute(svc)
        }
        "ListNamespaces" => namespaces::ListNamespaces::decode(param)?.execute(svc),
        "GetNamespaceDescriptor" => namespaces::GetNamespaceDescriptor::decode(param)?.execute(svc),
        "CreateNamespace" => namespaces::PutNamespace::decode_create(param)?.execute(svc, ctx),
        "ModifyNamespace" => namespaces::PutNamespace::decode_modify(param)?.execute(svc, ctx),
        "DeleteNamespace" => namespaces::DeleteNamespace::decode(param)?.execute(svc, ctx),
        _ => Err(HbaseError::unknown_method("MasterService", method)),
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
