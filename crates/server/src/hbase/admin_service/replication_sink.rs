//! AdminService `ReplicateWALEntry`: Cellar as a replication peer of an HBase cluster.
//!
//! An unmodified HBase 2.x cluster given `add_peer 'cellar', CLUSTER_KEY =>
//! "zk-host:port:/hbase"` (Cellar's ZooKeeper) reads Cellar's `hbaseid` and `rs/` znodes,
//! picks region servers from them and ships its WAL edits of families with
//! `REPLICATION_SCOPE => 1` to them, nothing else (docs/replication.md). A call carries WAL
//! entries — each a key (region, table, sequence id, write time, the clusters the edit has
//! passed through) and `associated_cell_count` cells of the call's cell block (in
//! `KeyValueCodecWithTags` layout; the tags are dropped before this module sees them).
//!
//! Each entry's cells are applied as the source wrote them (`RegionServer::apply_replicated`):
//! with their own timestamps and types, a row's consecutive cells as one row mutation. Cells
//! of HBase's `METAFAMILY` (bulk-load and replication markers, never user data) are skipped,
//! and so are entries of HBase's system tables (`hbase:acl`, which a source ships; Cellar
//! keeps grants in its catalog). A table or family Cellar lacks fails the call with HBase's
//! own exception, and the source retries it until it exists here, as with an HBase sink.
//!
//! Who may call: HBase's rule, global WRITE (a source calls as the user its region servers run
//! as); every refusal is audited.

use crate::hbase::{message, CallCtx, HbaseError, HbaseService, Reply, Request};
use crate::names;
use crate::region_server::ReplicatedTable;
use crate::security::acl::{Action, Scope};
use bytes::Bytes;
use cellar_model::{Cell, Durability, Entry, RowMutation};
use cellar_proto::cellblock::{self, CellReader};
use cellar_proto::hbase;

/// The family HBase writes its WAL markers under (bulk loads, region events, replication
/// markers); a source ships some of them, and none is data.
const HBASE_METAFAMILY: &[u8] = b"METAFAMILY";

/// A ReplicateWALEntry call, decoded: per table, its row mutations in the source's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReplicateWalEntry {
    pub(crate) tables: Vec<ReplicatedTable>,
    /// WAL entries in the call (HBase's `sink.appliedOps` counts these).
    pub(crate) entries: u64,
    /// Cells to apply and their encoded bytes.
    pub(crate) cells: u64,
    pub(crate) bytes: u64,
    /// The last entry's write time (ms, the source's clock): the lag once applied.
    pub(crate) last_write_ms: Option<u64>,
}

impl ReplicateWalEntry {
    pub(crate) fn decode(param: Bytes, cellblock: Bytes) -> Result<Request, HbaseError> {
        let req: hbase::ReplicateWalEntryRequest = message(param, "ReplicateWALEntryRequest")?;
        Ok(super::Call::ReplicateWalEntry(Self::new(&req, cellblock)?).into())
    }

    /// The call's entries with their cells from `cellblock`, grouped by table and row.
    pub(crate) fn new(
        req: &hbase::ReplicateWalEntryRequest,
        cellblock: Bytes,
    ) -> Result<ReplicateWalEntry, HbaseError> {
        let mut cells = CellReader::new(cellblock);
        let mut out = ReplicateWalEntry {
            tables: Vec::new(),
            entries: req.entry.len() as u64,
            cells: 0,
            bytes: 0,
            last_write_ms: None,
        };
        for (i, entry) in req.entry.iter().enumerate() {
            let bad = |what: String| HbaseError::do_not_retry(format!("WAL entry {i}: {what}"));
            let count = entry.associated_cell_count.unwrap_or(0);
            let count = usize::try_from(count)
                .map_err(|_| bad(format!("a negative cell count {count}")))?;
            let entry_cells = cells.take(count).map_err(|e| bad(e.to_string()))?;
            if !entry.key_value_bytes.is_empty() {
                return Err(bad(
                    "cells in key_value_bytes; HBase's sources send them in the cell block".into(),
                ));
            }
            let key = &entry.key;
            out.last_write_ms = Some(key.write_time);
            let table = std::str::from_utf8(&key.table_name)
                .map_err(|_| bad("the table name is not UTF-8".into()))
                .and_then(|t| {
                    names::canonical(t).map_err(|e| HbaseError::do_not_retry(e.to_string()))
                })?;
            if names::is_system(&table) {
                tracing::debug!(table, "replicated edit of a system table skipped");
                continue;
            }
            let rows = rows_of(entry_cells);
            if rows.is_empty() {
                continue;
            }
            for m in &rows {
                for e in &m.entries {
                    out.cells += 1;
                    out.bytes +=
                        cellblock::encoded_len(&m.row, &e.family, &e.qualifier, &e.value) as u64;
                }
            }
            match out.tables.last_mut() {
                Some(t) if t.table == table => t.rows.extend(rows),
                _ => out.tables.push(ReplicatedTable { table, rows }),
            }
        }
        if !cells.is_empty() {
            return Err(HbaseError::do_not_retry(
                "the cell block holds more cells than the WAL entries' associated_cell_count",
            ));
        }
        Ok(out)
    }

    /// Applies the edits once the caller may write everywhere (HBase's global WRITE).
    pub(crate) fn execute(self, svc: &HbaseService, ctx: &CallCtx) -> Result<Reply, HbaseError> {
        svc.rs.authz.require(
            &ctx.caller,
            Action::Write,
            &Scope::Global,
            "ReplicateWALEntry",
        )?;
        let stats = &svc.rs.replication_sink;
        match svc.rs.apply_replicated(&self.tables) {
            Ok(()) => {
                stats.applied(self.entries, self.cells, self.bytes, self.last_write_ms);
                Ok(Reply::message(&hbase::ReplicateWalEntryResponse {}))
            }
            Err(e) => {
                stats
                    .failed_batches
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::warn!(error = %e, "a replicated batch failed; its source sends it again");
                Err(e.into())
            }
        }
    }
}

/// An entry's cells as row mutations: each run of cells of one row, in order, is one
/// (HBase's WAL entry holds one region's edits of a batch, a row's cells together), without
/// HBase's marker cells.
fn rows_of(cells: Vec<Cell>) -> Vec<RowMutation> {
    let mut rows: Vec<RowMutation> = Vec::new();
    for c in cells {
        if c.family.as_ref() == HBASE_METAFAMILY {
            continue;
        }
        let entry = Entry {
            family: c.family,
            qualifier: c.qualifier,
            timestamp: c.timestamp,
            cell_type: c.cell_type,
            value: c.value,
        };
        match rows.last_mut() {
            Some(m) if m.row == c.row => m.entries.push(entry),
            _ => rows.push(RowMutation {
                row: c.row,
                entries: vec![entry],
                durability: Durability::UseDefault,
                nonce: None,
            }),
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hbase::exceptions::{ACCESS_DENIED, DO_NOT_RETRY, NO_SUCH_FAMILY, TABLE_NOT_FOUND};
    use crate::master::Master;
    use crate::region_server::RegionServer;
    use crate::security::acl::{Actions, Permission};
    use crate::security::Caller;
    use crate::ServerConfig;
    use bytes::BytesMut;
    use cellar_model::{CellType, FamilySchema, Get, TableSchema};
    use std::sync::Arc;

    struct Fixture {
        _tmp: tempfile::TempDir,
        svc: HbaseService,
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            let _ = self.svc.rs.shutdown();
        }
    }

    fn fixture(authorization: bool) -> Fixture {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut config = ServerConfig {
            data_dir: tmp.path().to_path_buf(),
            ..ServerConfig::default()
        };
        config.split.auto = false;
        config.security.authorization = authorization;
        config.security.audit_log = Some(tmp.path().join("audit.log"));
        let rs = RegionServer::open(&config, "127.0.0.1:16020".into()).expect("server opens");
        let master = Master::start(rs.clone());
        let mut cf = FamilySchema::new("cf");
        cf.max_versions = 5;
        master
            .create_table(
                TableSchema::new("t", vec![cf, FamilySchema::new("cg")]),
                &[Bytes::from_static(b"m")],
            )
            .expect("table created");
        rs.authz.load(vec![
            Permission {
                user: "replicator".into(),
                scope: Scope::Global,
                actions: Actions::parse("W").expect("codes"),
            },
            Permission {
                user: "alice".into(),
                scope: Scope::table("t"),
                actions: Actions::parse("RW").expect("codes"),
            },
        ]);
        let svc = HbaseService::new(
            rs,
            Some(master),
            "127.0.0.1".into(),
            16020,
            "test-cluster".into(),
        );
        Fixture { _tmp: tmp, svc }
    }

    fn cell(row: &str, family: &str, q: &str, ts: u64, t: CellType, v: &str) -> Cell {
        Cell {
            row: Bytes::copy_from_slice(row.as_bytes()),
            family: Bytes::copy_from_slice(family.as_bytes()),
            qualifier: Bytes::copy_from_slice(q.as_bytes()),
            timestamp: ts,
            cell_type: t,
            seq_id: 0,
            value: Bytes::copy_from_slice(v.as_bytes()),
        }
    }

    /// A request of one entry per `(table, cells)`, and its cell block.
    fn request(entries: &[(&str, Vec<Cell>)]) -> (hbase::ReplicateWalEntryRequest, Bytes) {
        let mut block = BytesMut::new();
        let mut req = hbase::ReplicateWalEntryRequest::default();
        for (i, (table, cells)) in entries.iter().enumerate() {
            for c in cells {
                cellblock::put(&mut block, c);
            }
            req.entry.push(hbase::WalEntry {
                key: hbase::WalKey {
                    encoded_region_name: Bytes::from_static(b"0123456789abcdef"),
                    table_name: Bytes::copy_from_slice(table.as_bytes()),
                    log_sequence_number: 100 + i as u64,
                    write_time: 1_000 + i as u64,
                    cluster_ids: vec![hbase::Uuid {
                        least_sig_bits: 1,
                        most_sig_bits: 2,
                    }],
                    ..Default::default()
                },
                key_value_bytes: Vec::new(),
                associated_cell_count: Some(cells.len() as i32),
            });
        }
        (req, block.freeze())
    }

    fn replicate(
        f: &Fixture,
        caller: &Caller,
        req: &hbase::ReplicateWalEntryRequest,
        block: &Bytes,
    ) -> Result<Reply, HbaseError> {
        let call = ReplicateWalEntry::new(req, block.clone())?;
        let ctx = CallCtx {
            conn_id: 1,
            cell_blocks: true,
            caller: caller.clone(),
        };
        call.execute(&f.svc, &ctx)
    }

    /// A row's cells as `family:qualifier@ts=value`, every version.
    fn read(f: &Fixture, row: &str) -> Vec<String> {
        let region = f
            .svc
            .rs
            .router
            .locate("t", row.as_bytes())
            .expect("located")
            .info
            .id;
        f.svc
            .rs
            .get("t", region, &Get::new(row.as_bytes().to_vec()).versions(10))
            .expect("get")
            .iter()
            .map(|c| {
                format!(
                    "{}:{}@{}={}",
                    String::from_utf8_lossy(&c.family),
                    String::from_utf8_lossy(&c.qualifier),
                    c.timestamp,
                    String::from_utf8_lossy(&c.value)
                )
            })
            .collect()
    }

    fn user(name: &str) -> Caller {
        Caller {
            user: Some(Arc::from(name)),
            certified: true,
            protocol: "hbase",
            ..Caller::default()
        }
    }

    #[test]
    fn puts_and_every_delete_kind_apply_with_their_own_timestamps_and_a_resent_batch_changes_nothing(
    ) {
        let f = fixture(false);
        use CellType::*;
        let (req, block) = request(&[
            (
                "t",
                vec![
                    cell("a1", "cf", "q", 10, Put, "v10"),
                    cell("a1", "cf", "q", 20, Put, "v20"),
                    cell("a1", "cg", "x", 10, Put, "x"),
                    cell("a2", "cf", "q", 5, Put, "old"),
                    cell("a3", "cf", "b", 7, Put, "b7"),
                    cell("a3", "cf", "c", 8, Put, "c8"),
                    cell("z4", "cf", "c", 3, Put, "c3"),
                    cell("z4", "cf", "c", 4, Put, "c4"),
                ],
            ),
            // An HBase marker (never data) and an entry of HBase's own ACL table: skipped.
            (
                "t",
                vec![cell(
                    "a1",
                    "METAFAMILY",
                    "HBASE::BULK_LOAD",
                    1,
                    Put,
                    "marker",
                )],
            ),
            ("hbase:acl", vec![cell("t", "l", "alice", 1, Put, "RW")]),
            (
                "default:t",
                vec![
                    // One version, exactly; every version ≤ 6 of a family; every column of
                    // a family at exactly 7; a column's versions ≤ 3.
                    cell("a1", "cf", "q", 20, Delete, ""),
                    cell("a2", "cf", "", 6, DeleteFamily, ""),
                    cell("a3", "cf", "", 7, DeleteFamilyVersion, ""),
                    cell("z4", "cf", "c", 3, DeleteColumn, ""),
                ],
            ),
        ]);
        let want = |f: &Fixture| {
            assert_eq!(read(f, "a1"), ["cf:q@10=v10", "cg:x@10=x"]);
            assert!(read(f, "a2").is_empty());
            assert_eq!(read(f, "a3"), ["cf:c@8=c8"]);
            assert_eq!(read(f, "z4"), ["cf:c@4=c4"], "rows of the other region too");
        };
        let replicator = user("replicator");
        replicate(&f, &replicator, &req, &block).expect("applied");
        want(&f);
        // The source resends the batch (its answer was lost): nothing changes.
        replicate(&f, &replicator, &req, &block).expect("applied again");
        want(&f);
        let g = f.svc.rs.gauges().replication_sink;
        assert_eq!((g.batches, g.failed_batches, g.entries), (2, 0, 8));
        assert_eq!(g.cells, 2 * 12, "markers and system tables are not counted");
    }

    #[test]
    fn a_table_or_family_missing_here_fails_the_batch_with_hbases_exception() {
        let f = fixture(false);
        let replicator = user("replicator");
        let (req, block) = request(&[("nope", vec![cell("r", "cf", "q", 1, CellType::Put, "v")])]);
        let e = replicate(&f, &replicator, &req, &block).expect_err("no table");
        assert_eq!(e.class, TABLE_NOT_FOUND);
        let (req, block) = request(&[("t", vec![cell("r", "zz", "q", 1, CellType::Put, "v")])]);
        let e = replicate(&f, &replicator, &req, &block).expect_err("no family");
        assert_eq!(e.class, NO_SUCH_FAMILY);
        let g = f.svc.rs.gauges().replication_sink;
        assert_eq!((g.batches, g.failed_batches), (0, 2));
    }

    #[test]
    fn cell_counts_that_disagree_with_the_cell_block_are_refused_before_anything_applies() {
        let f = fixture(false);
        let (mut req, block) = request(&[("t", vec![cell("r", "cf", "q", 1, CellType::Put, "v")])]);
        for count in [2, -1] {
            req.entry[0].associated_cell_count = Some(count);
            let e = ReplicateWalEntry::new(&req, block.clone()).expect_err("refused");
            assert_eq!(e.class, DO_NOT_RETRY, "count {count}");
        }
        req.entry[0].associated_cell_count = Some(0);
        let e = ReplicateWalEntry::new(&req, block.clone()).expect_err("cells left over");
        assert_eq!(e.class, DO_NOT_RETRY);
        req.entry[0].associated_cell_count = Some(1);
        req.entry[0].key.table_name = Bytes::from_static(b"bad name!");
        let e = ReplicateWalEntry::new(&req, block).expect_err("bad table name");
        assert!(e.message.contains("illegal table name"), "{}", e.message);
        assert!(read(&f, "r").is_empty());
    }

    #[test]
    fn replicating_needs_global_write_and_every_refusal_writes_nothing() {
        let f = fixture(true);
        let (req, block) = request(&[("t", vec![cell("r", "cf", "q", 1, CellType::Put, "v")])]);
        let nobody = Caller {
            protocol: "hbase",
            peer: Some([10, 0, 0, 9].into()),
            ..Caller::default()
        };
        let e = replicate(&f, &nobody, &req, &block).expect_err("unauthenticated");
        assert_eq!(e.class, ACCESS_DENIED);
        // WRITE on the table is not enough: HBase's sink asks for it globally.
        let e = replicate(&f, &user("alice"), &req, &block).expect_err("table write only");
        assert_eq!(e.class, ACCESS_DENIED);
        assert!(read(&f, "r").is_empty());
        replicate(&f, &user("replicator"), &req, &block).expect("global write");
        assert_eq!(read(&f, "r"), ["cf:q@1=v"]);
    }
}
