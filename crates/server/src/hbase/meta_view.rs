//! `hbase:meta` as an HBase client reads it, computed from Cellar's catalog: one row per
//! region (`info:regioninfo`, `info:seqnumDuringOpen`, `info:server`, `info:serverstartcode`,
//! `info:sn`, `info:state`) and one per table (`table:state`), in meta's own row order.
//!
//! Facts the Java client depends on: `info:regioninfo` is `PBUF` + RegionInfo; without
//! `info:serverstartcode` a location has no server; `table:state` is a bare TableState
//! protobuf (no `PBUF` magic: `TableState.parseFrom` reads it directly). A disabled table keeps
//! its region rows (state `CLOSED`), as HBase's meta does; split parents never appear (the
//! router swaps them for their daughters in one step).

use super::names::{self, meta_compare};
use super::{HbaseError, HbaseService};
use crate::meta::META_TABLE;
use crate::names as catalog_names;
use crate::router::{HostedRegion, TableState};
use bytes::Bytes;
use cellar_model::filter::{Filter, FilterEval};
use cellar_model::{Cell, CellType};
use cellar_proto::hbase;
use prost::Message;
use std::cmp::Ordering;

#[cfg(test)]
mod tests;

/// The protobuf magic HBase puts before serialized RegionInfos.
#[allow(dead_code)] // also for ClientService (client.rs)
pub(crate) const PB_MAGIC: &[u8] = b"PBUF";
/// Meta's families.
#[allow(dead_code)] // also for ClientService (client.rs)
pub(crate) const INFO: &[u8] = b"info";
#[allow(dead_code)] // also for ClientService (client.rs)
pub(crate) const TABLE: &[u8] = b"table";

/// A scan of meta, in HBase's terms.
#[allow(dead_code)] // built by ClientService (client.rs)
#[derive(Debug, Clone, Default)]
pub(crate) struct MetaScan {
    pub start: Bytes,
    pub include_start: bool,
    /// Empty: no bound.
    pub stop: Bytes,
    pub include_stop: bool,
    pub reversed: bool,
    /// Families to return (empty: all); columns as (family, qualifier) narrow further.
    pub families: Vec<Bytes>,
    pub columns: Vec<(Bytes, Bytes)>,
    pub filter: Option<Filter>,
    /// At most this many rows (0: no limit).
    pub limit: usize,
}

/// The rows `scan` selects, in scan order; each row's cells in HBase's cell order.
#[allow(dead_code)] // called by ClientService (client.rs)
pub(crate) fn scan(svc: &HbaseService, scan: &MetaScan) -> Result<Vec<Vec<Cell>>, HbaseError> {
    if let Some(f) = &scan.filter {
        f.validate()
            .map_err(|e| HbaseError::do_not_retry(format!("filter on hbase:meta: {e}")))?;
    }
    let mut rows: Vec<(Bytes, Vec<Cell>)> = all_rows(svc)
        .into_iter()
        .filter(|(row, _)| in_range(scan, row))
        .collect();
    rows.sort_by(|a, b| meta_compare(&a.0, &b.0));
    if scan.reversed {
        rows.reverse();
    }
    let mut eval = scan.filter.as_ref().map(FilterEval::new);
    let mut out = Vec::new();
    for (_, cells) in rows {
        if scan.limit > 0 && out.len() >= scan.limit {
            break;
        }
        if eval
            .as_ref()
            .is_some_and(FilterEval::all_remaining_filtered)
        {
            break;
        }
        let cells = select(cells, &scan.families, &scan.columns);
        let cells = match eval.as_mut() {
            Some(e) => e.filter_row(cells),
            None => Some(cells).filter(|c| !c.is_empty()),
        };
        if let Some(cells) = cells {
            out.push(cells);
        }
    }
    Ok(out)
}

/// One meta row (empty when absent), narrowed to `families`/`columns` as in [`MetaScan`].
#[allow(dead_code)] // called by ClientService (client.rs)
pub(crate) fn get(
    svc: &HbaseService,
    row: &[u8],
    families: &[Bytes],
    columns: &[(Bytes, Bytes)],
) -> Result<Vec<Cell>, HbaseError> {
    Ok(all_rows(svc)
        .into_iter()
        .find(|(r, _)| &r[..] == row)
        .map(|(_, cells)| select(cells, families, columns))
        .unwrap_or_default())
}

/// Whether `row` lies between the scan's bounds (meta order; reversed scans start high).
fn in_range(scan: &MetaScan, row: &[u8]) -> bool {
    let (low, low_incl, high, high_incl) = if scan.reversed {
        (
            &scan.stop,
            scan.include_stop,
            &scan.start,
            scan.include_start,
        )
    } else {
        (
            &scan.start,
            scan.include_start,
            &scan.stop,
            scan.include_stop,
        )
    };
    let above_low = low.is_empty()
        || match meta_compare(row, low) {
            Ordering::Greater => true,
            Ordering::Equal => low_incl,
            Ordering::Less => false,
        };
    let below_high = high.is_empty()
        || match meta_compare(row, high) {
            Ordering::Less => true,
            Ordering::Equal => high_incl,
            Ordering::Greater => false,
        };
    above_low && below_high
}

/// The cells a family/column selection keeps: everything when both are empty; else a cell
/// of a listed family (unless that family also has listed columns) or of a listed column.
fn select(cells: Vec<Cell>, families: &[Bytes], columns: &[(Bytes, Bytes)]) -> Vec<Cell> {
    if families.is_empty() && columns.is_empty() {
        return cells;
    }
    cells
        .into_iter()
        .filter(|c| {
            let narrowed = columns.iter().any(|(f, _)| *f == c.family);
            if narrowed {
                columns
                    .iter()
                    .any(|(f, q)| *f == c.family && *q == c.qualifier)
            } else {
                families.contains(&c.family)
            }
        })
        .collect()
}

/// Every meta row, unordered: each user table's state row and its regions' rows.
fn all_rows(svc: &HbaseService) -> Vec<(Bytes, Vec<Cell>)> {
    let mut rows = Vec::new();
    for (table, route) in svc.rs.router.tables() {
        if table == META_TABLE || catalog_names::is_system(&table) {
            continue;
        }
        rows.push(table_row(svc, &table, route.state));
        for r in route.regions.values() {
            rows.push(region_row(svc, &table, r, route.state));
        }
    }
    rows
}

fn put(
    row: &Bytes,
    family: &'static [u8],
    qualifier: &'static [u8],
    ts: u64,
    value: Vec<u8>,
) -> Cell {
    Cell {
        row: row.clone(),
        family: Bytes::from_static(family),
        qualifier: Bytes::from_static(qualifier),
        timestamp: ts,
        cell_type: CellType::Put,
        seq_id: 0,
        value: Bytes::from(value),
    }
}

/// HBase's TableState for a Cellar table state.
pub(crate) fn table_state_pb(state: TableState) -> hbase::TableState {
    hbase::TableState {
        state: match state {
            TableState::Enabled => hbase::table_state::State::Enabled,
            TableState::Disabled => hbase::table_state::State::Disabled,
        } as i32,
    }
}

/// Row `<table>`: `table:state`.
fn table_row(svc: &HbaseService, table: &str, state: TableState) -> (Bytes, Vec<Cell>) {
    let row = Bytes::copy_from_slice(table.as_bytes());
    let value = table_state_pb(state).encode_to_vec();
    let cells = vec![put(&row, TABLE, b"state", svc.start_code, value)];
    (row, cells)
}

/// HBase's RegionInfo of a Cellar region.
pub(crate) fn region_info_pb(
    table: &str,
    info: &cellar_storage::region::RegionInfo,
) -> hbase::RegionInfo {
    hbase::RegionInfo {
        region_id: info.id,
        table_name: names::table_to_pb(table),
        start_key: Some(info.start_key.clone()),
        end_key: Some(info.end_key.clone()),
        offline: Some(false),
        split: Some(false),
        replica_id: Some(0),
    }
}

/// This server's name as HBase prints it: `host,port,startcode`.
pub(crate) fn server_name_string(svc: &HbaseService) -> String {
    format!("{},{},{}", svc.host, svc.port, svc.start_code)
}

/// Row `<region name>`: the region's info and location (columns in qualifier order).
fn region_row(
    svc: &HbaseService,
    table: &str,
    r: &HostedRegion,
    state: TableState,
) -> (Bytes, Vec<Cell>) {
    let row = names::region_name(table, &r.info.start_key, r.info.id);
    let ts = r.info.id;
    let mut regioninfo = PB_MAGIC.to_vec();
    regioninfo.extend(region_info_pb(table, &r.info).encode_to_vec());
    let region_state: &[u8] = match state {
        TableState::Enabled => b"OPEN",
        TableState::Disabled => b"CLOSED",
    };
    // On a cluster's master, regions are on the region servers they are assigned to.
    let (host, port, start_code) = match r.server() {
        Some(s) => (s.name.host.clone(), s.name.port, s.name.start_code),
        None => (svc.host.clone(), svc.port, svc.start_code),
    };
    let cells = vec![
        put(&row, INFO, b"regioninfo", ts, regioninfo),
        // The open sequence number only has to grow when a region is replaced (clients
        // keep the newer location); region ids do.
        put(
            &row,
            INFO,
            b"seqnumDuringOpen",
            ts,
            r.info.id.to_be_bytes().to_vec(),
        ),
        put(
            &row,
            INFO,
            b"server",
            ts,
            format!("{host}:{port}").into_bytes(),
        ),
        put(
            &row,
            INFO,
            b"serverstartcode",
            ts,
            start_code.to_be_bytes().to_vec(),
        ),
        put(
            &row,
            INFO,
            b"sn",
            ts,
            format!("{host},{port},{start_code}").into_bytes(),
        ),
        put(&row, INFO, b"state", ts, region_state.to_vec()),
    ];
    (row, cells)
}
