//! The decode halves of the HBase front end, without a region server: for the fuzz targets in
//! `fuzz/` (not part of Cellar's API; hidden from its docs).
//!
//! [`METHODS`] is every (service, method) of [`super::SERVICES`], the table
//! [`super::HbaseService::call`] routes by, in its order; [`decode_call`] runs a call's decode
//! half as the router does: the request message, region names, every conversion to Cellar's
//! model (gets, scans, meta scans, mutations with their cells taken from the cell block in
//! request order, conditions, filters, table and family descriptors, table names, table-name
//! patterns, permissions). A method added to a service's table is fuzzed with nothing added
//! here. On a few decoded requests it then does what their execute halves do next that needs
//! no server, with the server's data made up: whole-row deletes expanded, atomic actions
//! merged, descriptors converted back and forth, table-name patterns matched.

use super::client_service::{self, multi};
use super::master_service::{self, table_info};
use super::{find_service, names, schema, HbaseError, Request, SERVICES};
use bytes::Bytes;
use std::sync::LazyLock;

type Result<T> = std::result::Result<T, HbaseError>;

/// Every (service, method) the front end answers, in a fixed order: a fuzz input picks one by
/// index.
pub static METHODS: LazyLock<Vec<(&'static str, &'static str)>> = LazyLock::new(|| {
    SERVICES
        .iter()
        .flat_map(|s| s.calls.iter().map(|(method, _)| (s.name, *method)))
        .collect()
});

/// Families a whole-row delete expands to here (the execute half uses the table's).
const FAMILIES: [&[u8]; 2] = [b"f", b"g"];

/// See the module documentation. Errors are what the front end would answer (a conversion
/// whose error the execute half raises later included).
pub fn decode_call(service: &str, method: &str, param: Bytes, cellblock: Bytes) -> Result<()> {
    let request = find_service(service)?.decode(method, param, cellblock)?;
    next_steps(request)
}

/// What the execute halves do next that needs no server.
fn next_steps(request: Request) -> Result<()> {
    use client_service::Call as Client;
    use master_service::Call as Master;
    match request {
        Request::Client(Client::Mutate(call)) => {
            call.mutation.expand(families());
            call.condition?;
        }
        Request::Client(Client::Multi(call)) => multi_steps(call),
        Request::Master(Master::CreateTable(call)) => table_schema(&call.schema),
        Request::Master(Master::ModifyTable(call)) => table_schema(&call.wanted?),
        Request::Master(Master::PutColumn(call)) => {
            call.family?;
        }
        Request::Master(Master::PutNamespace(call)) => {
            call.name?;
        }
        Request::Master(Master::HasUserPermissions(call)) => {
            call.permissions?;
        }
        Request::Master(Master::GetTableDescriptors(call)) => selection(&call.pick),
        Request::Master(Master::GetTableNames(call)) => selection(&call.pick),
        _ => {}
    }
    Ok(())
}

fn families() -> impl Iterator<Item = Bytes> {
    FAMILIES.into_iter().map(Bytes::from_static)
}

/// An atomic region action whose every action decoded: whole-row deletes expanded, then the
/// actions merged into one row mutation.
fn multi_steps(call: multi::MultiCall) {
    for region in call.regions {
        let multi::RegionCall::Atomic(atomic) = region else {
            continue;
        };
        let ready: Option<Vec<_>> = atomic
            .actions
            .into_iter()
            .map(|(index, m)| m.ok().map(|m| (index, m.expand(families()))))
            .collect();
        if let (Some(ready), Ok(_)) = (ready, atomic.condition) {
            let _ = multi::merge(&ready);
        }
    }
}

/// A table descriptor as CreateTable / ModifyTable converted it, checked to round-trip.
fn table_schema(s: &cellar_model::TableSchema) {
    let back = schema::table_from_pb(&schema::table_to_pb(s))
        .unwrap_or_else(|e| panic!("table '{}' does not read back: {}", s.name, e.message));
    assert_eq!(&back, s, "table descriptor does not round-trip");
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
