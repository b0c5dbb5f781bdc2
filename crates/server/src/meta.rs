//! The meta table, `hbase:meta`: the durable record of tables and regions, kept in a regular
//! region (same engine, same WAL) at `<data_dir>/meta`. Layout (`docs/server-layout.md`):
//!
//! - one row per region, keyed by its HBase region name `<table>,<start_key>,<region_id>`,
//!   family `info`: `regioninfo` (a `RegionLocation` message holding table, id, start and end
//!   keys and name), `server` (host:port), `serverstartcode` (u64 BE), `state` (`OPEN`,
//!   `CLOSED`, `SPLITTING`, `SPLIT`, `OFFLINE`, `MERGING`, `MERGED`), `openseq` (u64 BE: the
//!   number of the last OPEN_REGION a cluster's master sent, written before it sends it;
//!   absent: 0) and, for a region being or having been split, `splitA` / `splitB` (the
//!   daughters, encoded as `regioninfo`); for the region a merge makes, until its parents are
//!   marked, `mergeParents` (a `ListRegionsResponse` of the parents); for a merged parent,
//!   `mergedInto` (the region it became part of, encoded as `regioninfo`);
//! - one row per table, keyed by its name, family `table`: `state` (`ENABLED` / `DISABLED`),
//!   `schema` (a `TableSchema` message), `splits` (u64 BE, splits so far) and, while a
//!   truncate is in progress, `truncate` (u64 BE, the id of the region that replaces them all).
//!
//! - one row per created namespace, keyed `<namespace>:` (no table name ends in `:`), family
//!   `table`: `namespace` (empty: marks the row) and one `conf:<key>` column per configuration
//!   entry of its descriptor. Namespaces that only exist because a table is named in them
//!   have no row.
//!
//! - one row per object with granted permissions (`docs/security.md`), keyed `@acl/<object>`
//!   (object: empty for global grants, `@<namespace>`, or a table name; no table or namespace
//!   name holds `@` or `/`), family `table`: one column per grant, its qualifier
//!   `security::acl::encode_key(user, scope)`, its value the actions as HBase writes them
//!   (`RWXCA` letters).
//!
//! Every change of one row is one atomic row mutation. Cells are written with strictly
//! increasing timestamps (never below the largest found in meta), so a column deleted and
//! written again within one millisecond is not hidden by its own delete marker.

use crate::error::ServerError;
use crate::names::{region_name, region_row};
use crate::router::{HostedRegion, RegionState, TableState};
use crate::security::acl::{self, Actions, Permission, Scope, ACL_ROW_PREFIX};
use bytes::Bytes;
use cellar_model::{Cell, Durability, Error, FamilySchema, RowMutation, Scan, TableSchema};
use cellar_proto::{convert, pb};
use cellar_storage::region::{Clock, RegionInfo};
use prost::Message;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use crate::names::META_TABLE;
/// The meta region's id; data regions get ids from the clock, far above it.
pub const META_REGION_ID: u64 = 1;

pub const INFO: &[u8] = b"info";
pub const TABLE: &[u8] = b"table";
pub const REGIONINFO: &[u8] = b"regioninfo";
pub const SERVER: &[u8] = b"server";
pub const STARTCODE: &[u8] = b"serverstartcode";
pub const STATE: &[u8] = b"state";
pub const OPEN_SEQ: &[u8] = b"openseq";
pub const SPLIT_A: &[u8] = b"splitA";
pub const SPLIT_B: &[u8] = b"splitB";
pub const MERGE_PARENTS: &[u8] = b"mergeParents";
pub const MERGED_INTO: &[u8] = b"mergedInto";
pub const SCHEMA: &[u8] = b"schema";
pub const SPLITS: &[u8] = b"splits";
pub const TRUNCATE: &[u8] = b"truncate";
pub const NAMESPACE: &[u8] = b"namespace";
/// Prefix of a namespace row's configuration columns.
pub const NAMESPACE_CONF: &[u8] = b"conf:";

/// The meta table's schema: `info` (region rows, three versions kept as HBase does) and
/// `table` (table rows).
pub fn meta_schema() -> TableSchema {
    let mut info = FamilySchema::new("info");
    info.max_versions = 3;
    info.in_memory = true;
    let mut table = FamilySchema::new("table");
    table.in_memory = true;
    TableSchema::new(META_TABLE, vec![info, table])
}

/// One region row.
#[derive(Debug, Clone, PartialEq)]
pub struct RegionRecord {
    pub table: String,
    pub info: RegionInfo,
    pub server: String,
    pub startcode: u64,
    pub state: RegionState,
    /// The number of the last OPEN_REGION sent for the region (a cluster's master).
    pub open_seq: u64,
    /// The daughters of a region being split (`SPLITTING`) or split (`SPLIT`).
    pub split_a: Option<RegionInfo>,
    pub split_b: Option<RegionInfo>,
    /// The regions a merge makes this one of (`MERGING`, and after the commit until the
    /// parents' rows say `MERGED`), in key order.
    pub merge_parents: Vec<RegionInfo>,
    /// The region a merged parent (`MERGED`) became part of.
    pub merged_into: Option<RegionInfo>,
}

impl RegionRecord {
    pub fn new(table: &str, info: RegionInfo, state: RegionState) -> RegionRecord {
        RegionRecord {
            table: table.to_string(),
            info,
            server: String::new(),
            startcode: 0,
            state,
            open_seq: 0,
            split_a: None,
            split_b: None,
            merge_parents: Vec::new(),
            merged_into: None,
        }
    }

    pub fn row(&self) -> Bytes {
        region_row(&self.table, &self.info.start_key, self.info.id)
    }
}

/// One table row.
#[derive(Debug, Clone, PartialEq)]
pub struct TableRecord {
    pub schema: TableSchema,
    pub state: TableState,
    pub splits: u32,
    /// A truncate in progress: the id of the one region that replaces the table's regions.
    pub truncate_to: Option<u64>,
}

/// A created namespace: its name and its descriptor's configuration, sorted by key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceRecord {
    pub name: String,
    pub configuration: Vec<(String, String)>,
}

/// A namespace row's key.
fn namespace_row(name: &str) -> Bytes {
    Bytes::from(format!("{name}:"))
}

/// The row of `scope`'s object's grants.
fn acl_row(scope: &Scope) -> Bytes {
    Bytes::from([ACL_ROW_PREFIX, scope.object().as_bytes()].concat())
}

/// Everything meta holds.
#[derive(Debug, Default)]
pub struct MetaContents {
    pub tables: Vec<TableRecord>,
    pub regions: Vec<RegionRecord>,
    pub namespaces: Vec<NamespaceRecord>,
    pub permissions: Vec<Permission>,
}

/// Reads and writes the meta table through its hosted region.
pub struct Meta {
    hosted: Arc<HostedRegion>,
    clock: Arc<dyn Clock>,
    last_ts: AtomicU64,
    /// A cluster master's tenure: meta is written only while it is the active master.
    tenure: Option<Arc<crate::coord::Tenure>>,
}

fn encode_info(table: &str, info: &RegionInfo) -> Bytes {
    pb::RegionLocation {
        table: table.to_string(),
        region_id: info.id,
        start_key: info.start_key.clone(),
        end_key: info.end_key.clone(),
        server: String::new(),
        name: region_name(table, &info.start_key, info.id),
        state: 0,
    }
    .encode_to_vec()
    .into()
}

fn decode_info(v: &Bytes) -> Option<(String, RegionInfo)> {
    let l = pb::RegionLocation::decode(v.clone()).ok()?;
    Some((
        l.table,
        RegionInfo {
            id: l.region_id,
            start_key: l.start_key,
            end_key: l.end_key,
        },
    ))
}

fn u64_value(v: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(v.try_into().ok()?))
}

fn corrupt(row: &[u8], what: &str) -> ServerError {
    ServerError::Storage(Error::corruption(
        META_TABLE,
        0,
        format!("row {:?}: {what}", String::from_utf8_lossy(row)),
    ))
}

impl Meta {
    pub fn new(hosted: Arc<HostedRegion>, clock: Arc<dyn Clock>) -> Meta {
        Meta {
            hosted,
            clock,
            last_ts: AtomicU64::new(0),
            tenure: None,
        }
    }

    /// Meta of a cluster's master: every write first checks that it is still the active one.
    pub fn with_tenure(mut self, tenure: Option<Arc<crate::coord::Tenure>>) -> Meta {
        self.tenure = tenure;
        self
    }

    pub fn hosted(&self) -> &Arc<HostedRegion> {
        &self.hosted
    }

    /// A timestamp above every one meta has used.
    fn next_ts(&self) -> u64 {
        let now = self.clock.now_millis();
        let mut cur = self.last_ts.load(Ordering::SeqCst);
        loop {
            let next = now.max(cur + 1);
            match self
                .last_ts
                .compare_exchange(cur, next, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return next,
                Err(seen) => cur = seen,
            }
        }
    }

    fn write(&self, m: RowMutation) -> Result<(), ServerError> {
        if let Some(t) = &self.tenure {
            t.check()?;
        }
        let m = m.with_durability(Durability::SyncWal);
        self.hosted.with(|r| Ok(r.mutate(&m)?))
    }

    /// Writes a region row whole (all columns; daughters removed when absent): one mutation.
    pub fn put_region(&self, r: &RegionRecord) -> Result<(), ServerError> {
        let ts = self.next_ts();
        let mut m = RowMutation::new(r.row())
            .put(INFO, REGIONINFO, ts, encode_info(&r.table, &r.info))
            .put(INFO, SERVER, ts, Bytes::from(r.server.clone()))
            .put(
                INFO,
                STARTCODE,
                ts,
                Bytes::copy_from_slice(&r.startcode.to_be_bytes()),
            )
            .put(
                INFO,
                STATE,
                ts,
                Bytes::from_static(r.state.name().as_bytes()),
            )
            .put(
                INFO,
                OPEN_SEQ,
                ts,
                Bytes::copy_from_slice(&r.open_seq.to_be_bytes()),
            );
        m = if r.merge_parents.is_empty() {
            m.delete_column(INFO, MERGE_PARENTS, ts)
        } else {
            let list = pb::ListRegionsResponse {
                regions: r
                    .merge_parents
                    .iter()
                    .filter_map(|p| pb::RegionLocation::decode(encode_info(&r.table, p)).ok())
                    .collect(),
            };
            m.put(INFO, MERGE_PARENTS, ts, Bytes::from(list.encode_to_vec()))
        };
        for (q, d) in [
            (SPLIT_A, &r.split_a),
            (SPLIT_B, &r.split_b),
            (MERGED_INTO, &r.merged_into),
        ] {
            m = match d {
                Some(d) => m.put(INFO, q, ts, encode_info(&r.table, d)),
                None => m.delete_column(INFO, q, ts),
            };
        }
        self.write(m)
    }

    pub fn delete_region(&self, table: &str, info: &RegionInfo) -> Result<(), ServerError> {
        let ts = self.next_ts();
        self.write(
            RowMutation::new(region_row(table, &info.start_key, info.id)).delete_family(INFO, ts),
        )
    }

    pub fn put_table(&self, t: &TableRecord) -> Result<(), ServerError> {
        let ts = self.next_ts();
        let state: &'static [u8] = match t.state {
            TableState::Enabled => b"ENABLED",
            TableState::Disabled => b"DISABLED",
        };
        let schema = convert::schema_to_pb(&t.schema).encode_to_vec();
        let m = RowMutation::new(Bytes::from(t.schema.name.clone()))
            .put(TABLE, STATE, ts, Bytes::from_static(state))
            .put(TABLE, SCHEMA, ts, Bytes::from(schema))
            .put(
                TABLE,
                SPLITS,
                ts,
                Bytes::copy_from_slice(&u64::from(t.splits).to_be_bytes()),
            );
        let m = match t.truncate_to {
            Some(id) => m.put(
                TABLE,
                TRUNCATE,
                ts,
                Bytes::copy_from_slice(&id.to_be_bytes()),
            ),
            None => m.delete_column(TABLE, TRUNCATE, ts),
        };
        self.write(m)
    }

    pub fn delete_table(&self, name: &str) -> Result<(), ServerError> {
        let ts = self.next_ts();
        self.write(RowMutation::new(Bytes::from(name.to_string())).delete_family(TABLE, ts))
    }

    /// Writes a namespace row whole: its old configuration goes, the given one stays.
    pub fn put_namespace(&self, ns: &NamespaceRecord) -> Result<(), ServerError> {
        let cleared = self.next_ts();
        let ts = self.next_ts();
        let mut m = RowMutation::new(namespace_row(&ns.name))
            .delete_family(TABLE, cleared)
            .put(TABLE, NAMESPACE, ts, Bytes::new());
        for (k, v) in &ns.configuration {
            let q = [NAMESPACE_CONF, k.as_bytes()].concat();
            m = m.put(TABLE, &q, ts, Bytes::from(v.clone()));
        }
        self.write(m)
    }

    pub fn delete_namespace(&self, name: &str) -> Result<(), ServerError> {
        let ts = self.next_ts();
        self.write(RowMutation::new(namespace_row(name)).delete_family(TABLE, ts))
    }

    /// Writes what `user` holds at `scope` (all of it: the caller merged the actions); no
    /// actions removes the grant.
    pub fn put_permission(
        &self,
        user: &str,
        scope: &Scope,
        actions: Actions,
    ) -> Result<(), ServerError> {
        let ts = self.next_ts();
        let key = acl::encode_key(user, scope);
        let m = RowMutation::new(acl_row(scope));
        let m = if actions.is_empty() {
            m.delete_column(TABLE, &key, ts)
        } else {
            m.put(TABLE, &key, ts, Bytes::from(actions.to_string()))
        };
        self.write(m)
    }

    /// Removes every grant of one object (a table dropped, a namespace removed).
    pub fn delete_permissions_of(&self, scope: &Scope) -> Result<(), ServerError> {
        let ts = self.next_ts();
        self.write(RowMutation::new(acl_row(scope)).delete_family(TABLE, ts))
    }

    /// Reads every row. Also moves the timestamp source past every timestamp found.
    pub fn load(&self) -> Result<MetaContents, ServerError> {
        let scanner = self.hosted.with(|r| Ok(r.scan(&Scan::new())?))?;
        let mut out = MetaContents::default();
        let mut max_ts = 0;
        for row in scanner {
            let cells = row?;
            max_ts = cells.iter().map(|c| c.timestamp).fold(max_ts, u64::max);
            let Some(first) = cells.first() else { continue };
            let row = first.row.clone();
            let info: Vec<&Cell> = cells.iter().filter(|c| c.family == INFO).collect();
            let table: Vec<&Cell> = cells.iter().filter(|c| c.family == TABLE).collect();
            if !info.is_empty() {
                out.regions.push(parse_region(&row, &info)?);
            }
            if row.starts_with(ACL_ROW_PREFIX) {
                for c in &table {
                    out.permissions.push(parse_permission(&row, c)?);
                }
            } else if column(&table, NAMESPACE).is_some() {
                out.namespaces.push(parse_namespace(&row, &table)?);
            } else if !table.is_empty() {
                out.tables.push(parse_table(&row, &table)?);
            }
        }
        self.last_ts.fetch_max(max_ts, Ordering::SeqCst);
        Ok(out)
    }
}

fn column<'a>(cells: &[&'a Cell], q: &[u8]) -> Option<&'a Bytes> {
    cells.iter().find(|c| c.qualifier == q).map(|c| &c.value)
}

fn parse_region(row: &[u8], cells: &[&Cell]) -> Result<RegionRecord, ServerError> {
    let (table, info) = column(cells, REGIONINFO)
        .and_then(decode_info)
        .ok_or_else(|| corrupt(row, "missing or undecodable info:regioninfo"))?;
    let daughter = |q: &[u8]| -> Result<Option<RegionInfo>, ServerError> {
        match column(cells, q) {
            None => Ok(None),
            Some(v) => decode_info(v)
                .map(|(_, i)| Some(i))
                .ok_or_else(|| corrupt(row, "undecodable split daughter or merged region")),
        }
    };
    Ok(RegionRecord {
        server: column(cells, SERVER)
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default(),
        startcode: column(cells, STARTCODE)
            .and_then(|v| u64_value(v))
            .unwrap_or(0),
        state: column(cells, STATE)
            .and_then(|v| RegionState::from_name(v))
            .ok_or_else(|| corrupt(row, "missing or unknown info:state"))?,
        open_seq: column(cells, OPEN_SEQ)
            .and_then(|v| u64_value(v))
            .unwrap_or(0),
        split_a: daughter(SPLIT_A)?,
        split_b: daughter(SPLIT_B)?,
        merged_into: daughter(MERGED_INTO)?,
        merge_parents: match column(cells, MERGE_PARENTS) {
            None => Vec::new(),
            Some(v) => pb::ListRegionsResponse::decode(v.clone())
                .map_err(|_| corrupt(row, "undecodable info:mergeParents"))?
                .regions
                .into_iter()
                .map(|l| RegionInfo {
                    id: l.region_id,
                    start_key: l.start_key,
                    end_key: l.end_key,
                })
                .collect(),
        },
        table,
        info,
    })
}

fn parse_table(row: &[u8], cells: &[&Cell]) -> Result<TableRecord, ServerError> {
    let schema = column(cells, SCHEMA)
        .and_then(|v| pb::TableSchema::decode(v.clone()).ok())
        .ok_or_else(|| corrupt(row, "missing or undecodable table:schema"))?;
    let schema =
        convert::schema_from_pb(schema).map_err(|e| corrupt(row, &format!("table:schema: {e}")))?;
    let state = match column(cells, STATE).map(|v| &v[..]) {
        Some(b"ENABLED") => TableState::Enabled,
        Some(b"DISABLED") => TableState::Disabled,
        _ => return Err(corrupt(row, "missing or unknown table:state")),
    };
    Ok(TableRecord {
        schema,
        state,
        splits: column(cells, SPLITS)
            .and_then(|v| u64_value(v))
            .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX)),
        truncate_to: column(cells, TRUNCATE).and_then(|v| u64_value(v)),
    })
}

fn parse_permission(row: &[u8], cell: &Cell) -> Result<Permission, ServerError> {
    let (user, scope) = acl::decode_key(&cell.qualifier).map_err(|e| corrupt(row, &e))?;
    let actions = std::str::from_utf8(&cell.value)
        .map_err(|_| corrupt(row, "a permission's actions are not text"))
        .and_then(|a| Actions::parse(a).map_err(|e| corrupt(row, &e)))?;
    if acl_row(&scope) != row {
        return Err(corrupt(
            row,
            "a permission is stored in another object's row",
        ));
    }
    Ok(Permission {
        user,
        scope,
        actions,
    })
}

fn parse_namespace(row: &[u8], cells: &[&Cell]) -> Result<NamespaceRecord, ServerError> {
    let name = row
        .strip_suffix(b":")
        .and_then(|n| std::str::from_utf8(n).ok())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| corrupt(row, "a namespace row's key is not '<namespace>:'"))?;
    let mut configuration = Vec::new();
    for c in cells {
        if let Some(key) = c.qualifier.strip_prefix(NAMESPACE_CONF) {
            let text = |b: &[u8]| {
                String::from_utf8(b.to_vec())
                    .map_err(|_| corrupt(row, "a namespace configuration entry is not UTF-8"))
            };
            configuration.push((text(key)?, text(&c.value)?));
        }
    }
    Ok(NamespaceRecord {
        name: name.to_string(),
        configuration,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_rows_are_hbase_region_names_and_sort_by_table() {
        assert_eq!(&region_row("t", b"abc", 42)[..], b"t,abc,42");
        assert_eq!(region_name("ns:t", b"", 7), "ns:t,,7");
        // Every legal table-name character sorts above ',', so a table's rows are contiguous.
        assert!(region_row("t", b"\xff", 1) < region_row("t-x", b"", 1));
        assert!(region_row("t", b"\xff", 1) < region_row("t.x", b"", 1));
    }

    #[test]
    fn infos_round_trip() {
        let info = RegionInfo {
            id: 9,
            start_key: Bytes::from_static(b"a,b"),
            end_key: Bytes::from_static(b"\x00z"),
        };
        let (t, back) = decode_info(&encode_info("t", &info)).expect("decodes");
        assert_eq!((t.as_str(), back), ("t", info));
        for s in [
            RegionState::Open,
            RegionState::Closed,
            RegionState::Splitting,
            RegionState::Split,
            RegionState::Offline,
        ] {
            assert_eq!(RegionState::from_name(s.name().as_bytes()), Some(s));
        }
    }
}
