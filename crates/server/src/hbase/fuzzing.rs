//! The decoding half of the HBase front end, without a region server: for the fuzz targets in
//! `fuzz/` (not part of Cellar's API; hidden from its docs).
//!
//! [`decode_call`] takes a call's service, method, param and cell block as the connection hands
//! them to [`super::HbaseService::call`], and runs what the handlers run on those bytes before
//! they touch a region: the request message, region names, every conversion to Cellar's model
//! (gets, scans, meta scans, mutations with their cells taken from the cell block in request
//! order, conditions, filters, table descriptors, family descriptors, table names, table-name
//! patterns). Where Cellar converts both ways (table descriptors) it asserts the round trip.

use super::client_service::{get, multi, mutate, scan};
use super::master_service::table_info;
use super::names;
use super::{admin_service, registry};
use super::{schema, HbaseError};
use bytes::Bytes;

type Result<T> = std::result::Result<T, HbaseError>;

/// Every (service, method) the front end answers, in a fixed order: a fuzz input picks one by
/// index.
pub const METHODS: &[(&str, &str)] = &[
    ("ClientService", "Get"),
    ("ClientService", "Mutate"),
    ("ClientService", "Multi"),
    ("ClientService", "Scan"),
    ("MasterService", "IsMasterRunning"),
    ("MasterService", "GetClusterStatus"),
    ("MasterService", "IsBalancerEnabled"),
    ("MasterService", "SetBalancerRunning"),
    ("MasterService", "IsMasterInMaintenanceMode"),
    ("MasterService", "ListDecommissionedRegionServers"),
    ("MasterService", "CreateTable"),
    ("MasterService", "DeleteTable"),
    ("MasterService", "DisableTable"),
    ("MasterService", "EnableTable"),
    ("MasterService", "truncateTable"),
    ("MasterService", "ModifyTable"),
    ("MasterService", "AddColumn"),
    ("MasterService", "ModifyColumn"),
    ("MasterService", "DeleteColumn"),
    ("MasterService", "FlushTable"),
    ("MasterService", "SplitRegion"),
    ("MasterService", "GetSchemaAlterStatus"),
    ("MasterService", "getProcedureResult"),
    ("MasterService", "GetTableDescriptors"),
    ("MasterService", "GetTableNames"),
    ("MasterService", "GetTableState"),
    ("MasterService", "ListTableDescriptorsByNamespace"),
    ("MasterService", "ListTableNamesByNamespace"),
    ("MasterService", "ListNamespaceDescriptors"),
    ("MasterService", "ListNamespaces"),
    ("MasterService", "GetNamespaceDescriptor"),
    ("MasterService", "CreateNamespace"),
    ("MasterService", "ModifyNamespace"),
    ("MasterService", "DeleteNamespace"),
    ("ClientMetaService", "GetClusterId"),
    ("AdminService", "GetRegionInfo"),
    ("AdminService", "GetOnlineRegion"),
    ("AdminService", "FlushRegion"),
    ("AdminService", "CompactRegion"),
    ("AdminService", "GetRegionLoad"),
    ("AdminService", "GetServerInfo"),
];

/// Families a whole-row delete expands to here (the handlers use the table's).
const FAMILIES: [&[u8]; 2] = [b"f", b"g"];

/// A table descriptor as CreateTable / ModifyTable converted it, checked to round-trip.
fn table_schema(s: &cellar_model::TableSchema) {
    let back = schema::table_from_pb(&schema::table_to_pb(s))
        .unwrap_or_else(|e| panic!("table '{}' does not read back: {}", s.name, e.message));
    assert_eq!(&back, s, "table descriptor does not round-trip");
}

/// See the module documentation. Errors are what the front end would answer.
pub fn decode_call(service: &str, method: &str, param: Bytes, cellblock: Bytes) -> Result<()> {
    match (service, method) {
        ("ClientService", "Get") => {
            get::decode(param, cellblock)?;
        }
        ("ClientService", "Mutate") => {
            let call = mutate::decode(param, cellblock)?;
            call.mutation.expand(FAMILIES.map(Bytes::from_static));
            call.condition?;
        }
        ("ClientService", "Multi") => multi_checks(multi::decode(param, cellblock)?),
        ("ClientService", "Scan") => {
            scan::decode(param, cellblock)?;
        }
        ("MasterService", m) => master(m, param)?,
        ("ClientMetaService", "GetClusterId") => {
            registry::Call::ClusterId.decode(param, "GetClusterIdRequest")?;
        }
        ("AdminService", "GetRegionInfo") => {
            admin_service::GetRegionInfo::decode(param)?;
        }
        ("AdminService", "GetOnlineRegion") => {
            admin_service::GetOnlineRegion::decode(param)?;
        }
        ("AdminService", "FlushRegion") => {
            admin_service::FlushRegion::decode(param)?;
        }
        ("AdminService", "CompactRegion") => {
            admin_service::CompactRegion::decode(param)?;
        }
        ("AdminService", "GetRegionLoad") => {
            admin_service::GetRegionLoad::decode(param)?;
        }
        ("AdminService", "GetServerInfo") => {
            admin_service::GetServerInfo::decode(param)?;
        }
        _ => return Err(HbaseError::unknown_method(service, method)),
    }
    Ok(())
}

/// What MULTI's execute half does next with a decoded atomic region action whose every
/// action decoded: whole-row deletes expanded (to [`FAMILIES`] here), then the merge.
fn multi_checks(call: multi::MultiCall) {
    for rc in call.regions {
        let multi::RegionCall::Atomic(a) = rc else {
            continue;
        };
        let ready: Option<Vec<_>> = a
            .actions
            .into_iter()
            .map(|(index, m)| {
                m.ok()
                    .map(|m| (index, m.expand(FAMILIES.map(Bytes::from_static))))
            })
            .collect();
        if let (Some(ready), Ok(_)) = (ready, a.condition) {
            let _ = multi::merge(&ready);
        }
    }
}

fn master(method: &str, param: Bytes) -> Result<()> {
    use super::master_service::{cluster, namespaces, procedures, table_info, tables};
    match method {
        "IsMasterRunning" => {
            cluster::IsMasterRunning::decode(param)?;
        }
        "GetClusterStatus" => {
            cluster::GetClusterStatus::decode(param)?;
        }
        "IsBalancerEnabled" => {
            cluster::IsBalancerEnabled::decode(param)?;
        }
        "SetBalancerRunning" => {
            cluster::SetBalancerRunning::decode(param)?;
        }
        "IsMasterInMaintenanceMode" => {
            cluster::IsInMaintenanceMode::decode(param)?;
        }
        "ListDecommissionedRegionServers" => {
            cluster::ListDecommissioned::decode(param)?;
        }
        "CreateTable" => table_schema(&tables::CreateTable::decode(param)?.schema),
        "DeleteTable" => {
            tables::DeleteTable::decode(param)?;
        }
        "DisableTable" => {
            tables::DisableTable::decode(param)?;
        }
        "EnableTable" => {
            tables::EnableTable::decode(param)?;
        }
        "truncateTable" => {
            tables::TruncateTable::decode(param)?;
        }
        "ModifyTable" => table_schema(&tables::ModifyTable::decode(param)?.wanted?),
        "AddColumn" => {
            tables::PutColumn::decode_add(param)?.family?;
        }
        "ModifyColumn" => {
            tables::PutColumn::decode_modify(param)?.family?;
        }
        "DeleteColumn" => {
            tables::DeleteColumn::decode(param)?;
        }
        "FlushTable" => {
            tables::FlushTable::decode(param)?;
        }
        "SplitRegion" => {
            tables::SplitRegion::decode(param)?;
        }
        "GetSchemaAlterStatus" => {
            tables::GetSchemaAlterStatus::decode(param)?;
        }
        "getProcedureResult" => {
            procedures::GetProcedureResult::decode(param)?;
        }
        "GetTableDescriptors" => selection(&table_info::GetTableDescriptors::decode(param)?.pick),
        "GetTableNames" => selection(&table_info::GetTableNames::decode(param)?.pick),
        "GetTableState" => {
            table_info::GetTableState::decode(param)?;
        }
        "ListTableDescriptorsByNamespace" => {
            table_info::NamespaceTables::decode_descriptors(param)?;
        }
        "ListTableNamesByNamespace" => {
            table_info::NamespaceTables::decode_names(param)?;
        }
        "ListNamespaceDescriptors" => {
            namespaces::ListNamespaceDescriptors::decode(param)?;
        }
        "ListNamespaces" => {
            namespaces::ListNamespaces::decode(param)?;
        }
        "GetNamespaceDescriptor" => {
            namespaces::GetNamespaceDescriptor::decode(param)?;
        }
        "CreateNamespace" => {
            namespaces::PutNamespace::decode_create(param)?.name?;
        }
        "ModifyNamespace" => {
            namespaces::PutNamespace::decode_modify(param)?.name?;
        }
        "DeleteNamespace" => {
            namespaces::DeleteNamespace::decode(param)?;
        }
        _ => return Err(HbaseError::unknown_method("MasterService", method)),
    }
    Ok(())
}

/// What a table list does with its selection: match names.
fn selection(pick: &table_info::Selection) {
    pick.matches("t");
    pick.matches("ns:t");
    pick.matches_name("t");
}

/// The HBase region name of a user region, for seed inputs.
pub fn region_name(table: &str, start_key: &[u8], region_id: u64) -> Bytes {
    names::region_name(table, start_key, region_id)
}
