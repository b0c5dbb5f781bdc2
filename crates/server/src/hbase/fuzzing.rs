//! The decoding half of the HBase front end, without a region server: for the fuzz targets in
//! `fuzz/` (not part of Cellar's API; hidden from its docs).
//!
//! [`decode_call`] takes a call's service, method, param and cell block as the connection hands
//! them to [`super::HbaseService::call`], and runs what the handlers run on those bytes before
//! they touch a region: the request message, region names, every conversion to Cellar's model
//! (gets, scans, meta scans, mutations with their cells taken from the cell block in request
//! order, conditions, filters, table descriptors, family descriptors, table names, table-name
//! patterns). Where Cellar converts both ways (table descriptors) it asserts the round trip.

use super::client_service::{meta_scan, region};
use super::convert;
use super::master_service::{table_of, Selection};
use super::names::{self, RegionTarget};
use super::{schema, HbaseError};
use bytes::Bytes;
use cellar_proto::cellblock::CellReader;
use cellar_proto::hbase;
use prost::Message;

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

fn decode<M: Message + Default>(param: Bytes, what: &str) -> Result<M> {
    let m = M::decode(param).map_err(|e| HbaseError::malformed(what, e))?;
    // What Cellar decodes, re-encoded, decodes to the same message.
    let again = m.encode_to_vec();
    let back = M::decode(again.as_slice()).map_err(|e| HbaseError::malformed(what, e))?;
    assert_eq!(back.encode_to_vec(), again, "{what} does not round-trip");
    Ok(m)
}

/// A table descriptor as CreateTable / ModifyTable convert it, checked to round-trip.
fn table_schema(t: &hbase::TableSchema) -> Result<()> {
    let s = schema::table_from_pb(t)?;
    let back = schema::table_from_pb(&schema::table_to_pb(&s))
        .unwrap_or_else(|e| panic!("table '{}' does not read back: {}", s.name, e.message));
    assert_eq!(back, s, "table descriptor does not round-trip");
    Ok(())
}

/// One mutation as the handlers take it: its cells off the block first, then the whole-row
/// expansion, then the condition.
fn mutation(m: &hbase::MutationProto, cells: &mut CellReader) -> Result<convert::HMutation> {
    let mut m2 = convert::mutation_from_hbase(m, Some(77), cells)?;
    m2.expand_whole_row(
        FAMILIES.map(Bytes::from_static),
        convert::mutation_timestamp(m),
    );
    Ok(m2)
}

/// The region a call names; encoded user-region names need the server and stop here.
fn target(spec: &hbase::RegionSpecifier) -> Result<RegionTarget> {
    region(spec)
}

/// See the module documentation. Errors are what the front end would answer.
pub fn decode_call(service: &str, method: &str, param: Bytes, cellblock: Bytes) -> Result<()> {
    match (service, method) {
        ("ClientService", "Get") => {
            let req: hbase::GetRequest = decode(param, "GetRequest")?;
            target(&req.region)?;
            convert::get_from_hbase(&req.get)?;
        }
        ("ClientService", "Mutate") => {
            let req: hbase::MutateRequest = decode(param, "MutateRequest")?;
            target(&req.region)?;
            let mut cells = CellReader::new(cellblock);
            mutation(&req.mutation, &mut cells)?;
            if let Some(c) = &req.condition {
                convert::condition_from_hbase(c)?;
            }
        }
        ("ClientService", "Multi") => {
            let req: hbase::MultiRequest = decode(param, "MultiRequest")?;
            multi(&req, cellblock);
        }
        ("ClientService", "Scan") => {
            let req: hbase::ScanRequest = decode(param, "ScanRequest")?;
            if req.scanner_id.is_some() {
                return Ok(());
            }
            let spec = req
                .region
                .as_ref()
                .ok_or_else(|| HbaseError::do_not_retry("no region"))?;
            let s = req
                .scan
                .as_ref()
                .ok_or_else(|| HbaseError::do_not_retry("no scan"))?;
            let limit = req.limit_of_rows.unwrap_or(0);
            match target(spec)? {
                RegionTarget::Meta => {
                    meta_scan(s, limit)?;
                }
                RegionTarget::User { .. } => {
                    convert::scan_from_hbase(s, limit)?;
                }
            }
        }
        ("MasterService", m) => master(m, param)?,
        ("ClientMetaService", _) => {
            decode::<hbase::GetClusterIdRequest>(param, "GetClusterIdRequest")?;
        }
        ("AdminService", "GetRegionInfo") => {
            let req: hbase::GetRegionInfoRequest = decode(param, "GetRegionInfoRequest")?;
            names::parse_region(req.region.r#type, &req.region.value)?;
        }
        ("AdminService", "GetOnlineRegion") => {
            decode::<hbase::GetOnlineRegionRequest>(param, "GetOnlineRegionRequest")?;
        }
        ("AdminService", "FlushRegion") => {
            let req: hbase::FlushRegionRequest = decode(param, "FlushRegionRequest")?;
            names::parse_region(req.region.r#type, &req.region.value)?;
        }
        ("AdminService", "CompactRegion") => {
            let req: hbase::CompactRegionRequest = decode(param, "CompactRegionRequest")?;
            names::parse_region(req.region.r#type, &req.region.value)?;
        }
        ("AdminService", "GetRegionLoad") => {
            let req: hbase::GetRegionLoadRequest = decode(param, "GetRegionLoadRequest")?;
            if let Some(t) = &req.table_name {
                names::table_from_pb(t)?;
            }
        }
        ("AdminService", "GetServerInfo") => {
            decode::<hbase::GetServerInfoRequest>(param, "GetServerInfoRequest")?;
        }
        _ => return Err(HbaseError::unknown_method(service, method)),
    }
    Ok(())
}

/// MULTI as `client_service::multi` walks it: region by region, actions in order, cells taken from
/// the block by every mutation (and skipped for actions that will not run).
#[allow(deprecated)] // MultiRequest.condition: older clients use it.
fn multi(req: &hbase::MultiRequest, cellblock: Bytes) {
    let mut cells = CellReader::new(cellblock);
    let legacy_condition = (req.region_action.len() == 1)
        .then_some(req.condition.as_ref())
        .flatten();
    for ra in &req.region_action {
        let condition = ra.condition.as_ref().or(legacy_condition);
        let t = target(&ra.region);
        let atomic = ra.atomic.unwrap_or(false) || condition.is_some();
        if t.is_err() || (atomic && matches!(t, Ok(RegionTarget::Meta))) {
            super::client_service::skip_cells(&ra.action, &mut cells);
            continue;
        }
        if atomic {
            let mut decoded = Vec::new();
            let mut failed = false;
            for a in &ra.action {
                match &a.mutation {
                    Some(m) => match mutation(m, &mut cells) {
                        Ok(m) => decoded.push((a.index, m)),
                        Err(_) => failed = true,
                    },
                    None => failed = true,
                }
            }
            if !failed {
                if let Some(c) = condition {
                    let _ = convert::condition_from_hbase(c);
                }
                let _ = super::client_service::merge(&decoded);
            }
        } else {
            for a in &ra.action {
                if let Some(m) = &a.mutation {
                    let _ = mutation(m, &mut cells);
                } else if let Some(g) = &a.get {
                    let _ = convert::get_from_hbase(g);
                }
            }
        }
    }
}

fn master(method: &str, param: Bytes) -> Result<()> {
    match method {
        "IsMasterRunning" => {
            decode::<hbase::IsMasterRunningRequest>(param, method)?;
        }
        "GetClusterStatus" => {
            decode::<hbase::GetClusterStatusRequest>(param, method)?;
        }
        "IsBalancerEnabled" => {
            decode::<hbase::IsBalancerEnabledRequest>(param, method)?;
        }
        "SetBalancerRunning" => {
            decode::<hbase::SetBalancerRunningRequest>(param, method)?;
        }
        "IsMasterInMaintenanceMode" => {
            decode::<hbase::IsInMaintenanceModeRequest>(param, method)?;
        }
        "ListDecommissionedRegionServers" => {
            decode::<hbase::ListDecommissionedRegionServersRequest>(param, method)?;
        }
        "CreateTable" => {
            let req: hbase::CreateTableRequest = decode(param, method)?;
            table_schema(&req.table_schema)?;
        }
        "DeleteTable" => {
            let req: hbase::DeleteTableRequest = decode(param, method)?;
            table_of(&req.table_name, method)?;
        }
        "DisableTable" => {
            let req: hbase::DisableTableRequest = decode(param, method)?;
            table_of(&req.table_name, method)?;
        }
        "EnableTable" => {
            let req: hbase::EnableTableRequest = decode(param, method)?;
            table_of(&req.table_name, method)?;
        }
        "truncateTable" => {
            let req: hbase::TruncateTableRequest = decode(param, method)?;
            table_of(&req.table_name, method)?;
        }
        "ModifyTable" => {
            let req: hbase::ModifyTableRequest = decode(param, method)?;
            table_of(&req.table_name, method)?;
            table_schema(&req.table_schema)?;
        }
        "AddColumn" | "ModifyColumn" => {
            let (table, family) = if method == "AddColumn" {
                let req: hbase::AddColumnRequest = decode(param, method)?;
                (req.table_name, req.column_families)
            } else {
                let req: hbase::ModifyColumnRequest = decode(param, method)?;
                (req.table_name, req.column_families)
            };
            let table = table_of(&table, method)?;
            schema::family_from_pb(&table, &family)?;
        }
        "DeleteColumn" => {
            let req: hbase::DeleteColumnRequest = decode(param, method)?;
            table_of(&req.table_name, method)?;
        }
        "FlushTable" => {
            let req: hbase::FlushTableRequest = decode(param, method)?;
            table_of(&req.table_name, method)?;
        }
        "SplitRegion" => {
            let req: hbase::SplitTableRegionRequest = decode(param, method)?;
            table_of(&req.region_info.table_name, method)?;
        }
        "GetSchemaAlterStatus" => {
            let req: hbase::GetSchemaAlterStatusRequest = decode(param, method)?;
            table_of(&req.table_name, method)?;
        }
        "getProcedureResult" => {
            decode::<hbase::GetProcedureResultRequest>(param, method)?;
        }
        "GetTableDescriptors" => {
            let req: hbase::GetTableDescriptorsRequest = decode(param, method)?;
            if req.table_names.is_empty() {
                let pick = Selection::new(
                    req.regex.as_deref(),
                    req.namespace.as_deref(),
                    req.include_sys_tables(),
                )?;
                pick.matches("t");
                pick.matches("ns:t");
            } else {
                for t in &req.table_names {
                    names::table_from_pb(t)?;
                }
            }
        }
        "GetTableNames" => {
            let req: hbase::GetTableNamesRequest = decode(param, method)?;
            let pick = Selection::new(
                req.regex.as_deref(),
                req.namespace.as_deref(),
                req.include_sys_tables(),
            )?;
            pick.matches("t");
        }
        "GetTableState" => {
            let req: hbase::GetTableStateRequest = decode(param, method)?;
            table_of(&req.table_name, method)?;
        }
        "ListTableDescriptorsByNamespace" => {
            decode::<hbase::ListTableDescriptorsByNamespaceRequest>(param, method)?;
        }
        "ListTableNamesByNamespace" => {
            decode::<hbase::ListTableNamesByNamespaceRequest>(param, method)?;
        }
        "ListNamespaceDescriptors" => {
            decode::<hbase::ListNamespaceDescriptorsRequest>(param, method)?;
        }
        "ListNamespaces" => {
            decode::<hbase::ListNamespacesRequest>(param, method)?;
        }
        "GetNamespaceDescriptor" => {
            decode::<hbase::GetNamespaceDescriptorRequest>(param, method)?;
        }
        "CreateNamespace" => {
            let req: hbase::CreateNamespaceRequest = decode(param, method)?;
            namespace_name(&req.namespace_descriptor)?;
        }
        "ModifyNamespace" => {
            let req: hbase::ModifyNamespaceRequest = decode(param, method)?;
            namespace_name(&req.namespace_descriptor)?;
        }
        "DeleteNamespace" => {
            decode::<hbase::DeleteNamespaceRequest>(param, method)?;
        }
        _ => return Err(HbaseError::unknown_method("MasterService", method)),
    }
    Ok(())
}

fn namespace_name(d: &hbase::NamespaceDescriptor) -> Result<String> {
    String::from_utf8(d.name.to_vec())
        .map_err(|_| HbaseError::do_not_retry("the namespace name is not UTF-8"))
}

/// The HBase region name of a user region, for seed inputs.
pub fn region_name(table: &str, start_key: &[u8], region_id: u64) -> Bytes {
    names::region_name(table, start_key, region_id)
}
