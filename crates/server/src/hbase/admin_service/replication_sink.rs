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
//! of HBase's `METAFAMILY` are markers, never user data, and are skipped, but for the
//! bulk-load marker (`HBASE::BULK_LOAD`) of a source replicating bulk loads: its files are
//! read from this server's disk and their cells applied in the marker's place in the batch
//! (`replicated_bulk_load.rs`). Entries of HBase's system tables (`hbase:acl`, which a source
//! ships; Cellar keeps grants in its catalog) are skipped. A table or family Cellar lacks
//! fails the call with HBase's own exception, and the source retries it until it exists here,
//! as with an HBase sink.
//!
//! Who may call: HBase's rule, global WRITE (a source calls as the user its region servers run
//! as); every refusal is audited.

use super::replicated_bulk_load::{self, ReplicatedBulkLoad, SourceDirs, BULK_LOAD_QUALIFIER};
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

/// One step of a replicated batch, applied in the source's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// A table's row mutations.
    Rows(ReplicatedTable),
    /// A bulk load's files, read and applied where the marker was.
    BulkLoad(ReplicatedBulkLoad),
}

/// A ReplicateWALEntry call, decoded: its steps in the source's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReplicateWalEntry {
    pub(crate) steps: Vec<Step>,
    /// Where the source's bulk-loaded files are.
    pub(crate) source: SourceDirs,
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
            steps: Vec::new(),
            source: SourceDirs::of(req),
            entries: req.entry.len() as u64,
            cells: 0,
            bytes: 0,
            last_write_ms: None,
        };
        let mut files = 0usize;
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
            // The clusters the edit has been through, kept with the write (HBase's sink does
            // the same), so that replication out never ships it back to one of them.
            let cluster_ids: Vec<u128> = key
                .cluster_ids
                .iter()
                .map(|id| (u128::from(id.most_sig_bits) << 64) | u128::from(id.least_sig_bits))
                .collect();
            if cluster_ids.len() > cellar_proto::convert::MAX_CLUSTER_IDS {
                return Err(bad(format!(
                    "{} cluster ids; at most {}",
                    cluster_ids.len(),
                    cellar_proto::convert::MAX_CLUSTER_IDS
                )));
            }
            for step in steps_of(&table, entry_cells, &cluster_ids).map_err(bad)? {
                match step {
                    Step::Rows(t) => {
                        for m in &t.rows {
                            for e in &m.entries {
                                out.cells += 1;
                                out.bytes += cellblock::encoded_len(
                                    &m.row,
                                    &e.family,
                                    &e.qualifier,
                                    &e.value,
                                ) as u64;
                            }
                        }
                        match out.steps.last_mut() {
                            Some(Step::Rows(last)) if last.table == t.table => {
                                last.rows.extend(t.rows)
                            }
                            _ => out.steps.push(Step::Rows(t)),
                        }
                    }
                    Step::BulkLoad(load) => {
                        files += load.file_count();
                        if files > replicated_bulk_load::MAX_FILES_PER_CALL {
                            return Err(bad(format!(
                                "the call's bulk-load markers name more than {} files",
                                replicated_bulk_load::MAX_FILES_PER_CALL
                            )));
                        }
                        out.steps.push(Step::BulkLoad(load));
                    }
                }
            }
        }
        if !cells.is_empty() {
            return Err(HbaseError::do_not_retry(
                "the cell block holds more cells than the WAL entries' associated_cell_count",
            ));
        }
        Ok(out)
    }

    /// The bulk loads of the call.
    fn bulk_loads(&self) -> Vec<&ReplicatedBulkLoad> {
        self.steps
            .iter()
            .filter_map(|s| match s {
                Step::BulkLoad(load) => Some(load),
                Step::Rows(_) => None,
            })
            .collect()
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
        match self.apply(svc) {
            Ok((files, file_cells)) => {
                stats.applied(self.entries, self.cells, self.bytes, self.last_write_ms);
                stats.bulk_loaded(files, file_cells);
                Ok(Reply::message(&hbase::ReplicateWalEntryResponse {}))
            }
            Err(e) => {
                stats
                    .failed_batches
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::warn!(error = %e, "a replicated batch failed; its source sends it again");
                Err(e)
            }
        }
    }

    /// Every step in order; the bulk-loaded files read and counted: `(files, cells)`. Every
    /// file is found (and allowed) before anything is applied.
    fn apply(&self, svc: &HbaseService) -> Result<(u64, u64), HbaseError> {
        let loads = self.bulk_loads();
        let mut found =
            replicated_bulk_load::resolve(&loads, &self.source, &svc.rs.bulk_files)?.into_iter();
        let (mut files, mut cells) = (0u64, 0u64);
        for step in &self.steps {
            match step {
                Step::Rows(t) => svc.rs.apply_replicated(std::slice::from_ref(t))?,
                Step::BulkLoad(load) => {
                    let these = found.next().unwrap_or_default();
                    cells += replicated_bulk_load::apply(&svc.rs, load, &these)?;
                    files += these.len() as u64;
                }
            }
        }
        Ok((files, cells))
    }
}

/// An entry's cells as steps: each run of cells of one row, in order, is one row mutation
/// (HBase's WAL entry holds one region's edits of a batch, a row's cells together), a
/// bulk-load marker a bulk load in its place, HBase's other markers skipped.
fn steps_of(table: &str, cells: Vec<Cell>, cluster_ids: &[u128]) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    let mut rows: Vec<RowMutation> = Vec::new();
    for c in cells {
        if c.family.as_ref() == HBASE_METAFAMILY {
            if c.qualifier.as_ref() == BULK_LOAD_QUALIFIER {
                if let Some(mut load) = ReplicatedBulkLoad::decode(table, &c.value)? {
                    load.cluster_ids = cluster_ids.to_vec();
                    if !rows.is_empty() {
                        steps.push(Step::Rows(ReplicatedTable {
                            table: table.to_string(),
                            rows: std::mem::take(&mut rows),
                        }));
                    }
                    steps.push(Step::BulkLoad(load));
                }
            }
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
                cluster_ids: cluster_ids.to_vec(),
            }),
        }
    }
    if !rows.is_empty() {
        steps.push(Step::Rows(ReplicatedTable {
            table: table.to_string(),
            rows,
        }));
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hbase::exceptions::{
        ACCESS_DENIED, DO_NOT_RETRY, IO, NO_SUCH_FAMILY, TABLE_NOT_FOUND,
    };
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
        fixture_reading(authorization, &[])
    }

    /// A fixture whose `bulk_load.dirs` are `dirs` (under its temporary directory).
    fn fixture_reading(authorization: bool, dirs: &[&str]) -> Fixture {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut config = ServerConfig {
            data_dir: tmp.path().join("data"),
            ..ServerConfig::default()
        };
        config.bulk_load.dirs = dirs.iter().map(|d| tmp.path().join(d)).collect();
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
        read_in(f, "t", row.as_bytes())
    }

    fn read_in(f: &Fixture, table: &str, row: &[u8]) -> Vec<String> {
        let region = f.svc.rs.router.locate(table, row).expect("located").info.id;
        f.svc
            .rs
            .get(table, region, &Get::new(row.to_vec()).versions(10))
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
                    "HBASE::REPLICATION_MARKER",
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

    // Replicated bulk loads: the source's files under `hbase-root` (its `hbase.rootdir`), the
    // fixtures written by HBase 2.6.4's own writer (family `cf`, 300 binary rows, versions and
    // every delete kind).

    const REGION: &str = "0123456789abcdef0123456789abcdef";

    fn hfile_fixture(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../hfile/tests/fixtures")
            .join(name)
    }

    /// The distinct rows of the fixtures (`cells.txt`, hex).
    fn fixture_rows() -> Vec<Vec<u8>> {
        let text = std::fs::read_to_string(hfile_fixture("cells.txt")).expect("cells.txt");
        let mut rows: Vec<Vec<u8>> = text
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(|hex| {
                (0..hex.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
                    .collect()
            })
            .collect();
        rows.dedup();
        rows
    }

    /// Copies fixture `name` to `ROOT/data/default/t/REGION/cf/file` under the fixture's
    /// temporary directory (or under `archive/data` when `archived`).
    fn place(f: &Fixture, name: &str, file: &str, archived: bool) -> std::path::PathBuf {
        let base = if archived { "archive/data" } else { "data" };
        let dir = f
            ._tmp
            .path()
            .join("hbase-root")
            .join(base)
            .join("default/t")
            .join(REGION)
            .join("cf");
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join(file);
        std::fs::copy(hfile_fixture(name), &path).expect("copy");
        path
    }

    /// A bulk-load marker cell naming `files` of family `cf` in REGION.
    fn marker(files: &[&str], replicate: Option<bool>) -> Cell {
        let d = hbase::BulkLoadDescriptor {
            table_name: hbase::TableName {
                namespace: Bytes::from_static(b"default"),
                qualifier: Bytes::from_static(b"t"),
            },
            encoded_region_name: Bytes::from_static(REGION.as_bytes()),
            stores: vec![hbase::StoreDescriptor {
                family_name: Bytes::from_static(b"cf"),
                store_home_dir: "cf".into(),
                store_file: files.iter().map(|f| f.to_string()).collect(),
                store_file_size_bytes: None,
            }],
            bulkload_seq_num: 7,
            cluster_ids: vec!["source-cluster".into()],
            replicate,
        };
        Cell {
            row: Bytes::from_static(b"\x00\x04\x01"),
            family: Bytes::from_static(b"METAFAMILY"),
            qualifier: Bytes::from_static(b"HBASE::BULK_LOAD"),
            timestamp: 1,
            cell_type: CellType::Put,
            seq_id: 0,
            value: Bytes::from(prost::Message::encode_to_vec(&d)),
        }
    }

    /// A call of `entries`, its source's root `hbase-root` under the fixture's directory.
    fn bulk_request(
        f: &Fixture,
        entries: &[(&str, Vec<Cell>)],
    ) -> (hbase::ReplicateWalEntryRequest, Bytes) {
        let (mut req, block) = request(entries);
        let root = f._tmp.path().join("hbase-root");
        req.replication_cluster_id = Some("source-cluster".into());
        req.source_base_namespace_dir_path = Some(format!("file:{}", root.join("data").display()));
        req.source_h_file_archive_dir_path =
            Some(format!("file:{}", root.join("archive/data").display()));
        (req, block)
    }

    #[test]
    fn a_replicated_bulk_load_brings_the_files_cells_in_the_batchs_order_and_a_resent_batch_changes_nothing(
    ) {
        let f = fixture_reading(false, &["hbase-root"]);
        place(&f, "fast_diff-gz.hfile", "one_SeqId_7_", false);
        // The same file loaded natively into a table of the same schema: what reads must show.
        let mut cf = FamilySchema::new("cf");
        cf.max_versions = 5;
        let master = f.svc.master.as_ref().expect("master");
        master
            .create_table(
                TableSchema::new("u", vec![cf, FamilySchema::new("cg")]),
                &[],
            )
            .expect("table u");
        let u = f.svc.rs.router.locate("u", b"").expect("u").info.id;
        f.svc
            .rs
            .bulk_load_call(
                "u",
                u,
                vec![cellar_proto::pb::BulkLoadFile {
                    family: "cf".into(),
                    path: hfile_fixture("fast_diff-gz.hfile").display().to_string(),
                    ..Default::default()
                }],
            )
            .expect_err("the fixtures are outside this server's bulk_load.dirs");
        let copy = f._tmp.path().join("hbase-root/native.hfile");
        std::fs::copy(hfile_fixture("fast_diff-gz.hfile"), &copy).expect("copy");
        f.svc
            .rs
            .bulk_load_call(
                "u",
                u,
                vec![cellar_proto::pb::BulkLoadFile {
                    family: "cf".into(),
                    path: copy.display().to_string(),
                    ..Default::default()
                }],
            )
            .expect("native bulk load");

        // Around the marker: a put the file's cell at the same coordinates replaces (it comes
        // later), and one that replaces the file's (it comes later still).
        let first = "\u{0}\u{4}\u{1}";
        let (req, block) = bulk_request(
            &f,
            &[
                (
                    "t",
                    vec![
                        cell(
                            first,
                            "cf",
                            "q0",
                            1_700_000_260_014,
                            CellType::Put,
                            "before",
                        ),
                        cell("zz", "cg", "x", 5, CellType::Put, "before-other-row"),
                    ],
                ),
                ("t", vec![marker(&["one_SeqId_7_"], None)]),
                (
                    "t",
                    vec![cell(
                        first,
                        "cf",
                        "q0",
                        1_700_000_260_007,
                        CellType::Put,
                        "after",
                    )],
                ),
            ],
        );
        let replicator = user("replicator");
        replicate(&f, &replicator, &req, &block).expect("applied");
        let rows = fixture_rows();
        assert_eq!(rows.len(), 300);
        let check = |f: &Fixture| {
            for row in &rows {
                let mut want = read_in(f, "u", row);
                if row.as_slice() == first.as_bytes() {
                    for c in &mut want {
                        if c.starts_with("cf:q0@1700000260007=") {
                            *c = "cf:q0@1700000260007=after".into();
                        }
                    }
                }
                assert_eq!(read_in(f, "t", row), want, "row {row:02x?}");
            }
            assert_eq!(read(f, "zz"), ["cg:x@5=before-other-row"]);
        };
        check(&f);
        assert!(
            read_in(&f, "t", first.as_bytes()).contains(&"cf:q0@1700000260014=same".to_string()),
            "the file's cell replaced the put before the marker"
        );
        let g = f.svc.rs.gauges().replication_sink;
        assert_eq!((g.batches, g.hfiles), (1, 1));
        assert!(g.hfile_cells > 1000, "{}", g.hfile_cells);
        assert_eq!(g.cells, 3, "the marker is not a cell applied");
        // Resent (its answer lost): every read the same.
        replicate(&f, &replicator, &req, &block).expect("applied again");
        check(&f);
        let again = f.svc.rs.gauges().replication_sink;
        assert_eq!((again.batches, again.hfiles), (2, 2));
        assert_eq!(again.hfile_cells, 2 * g.hfile_cells);
        // A marker the source says not to replicate names nothing to read.
        let (req, block) = bulk_request(&f, &[("t", vec![marker(&["absent"], Some(false))])]);
        replicate(&f, &replicator, &req, &block).expect("skipped");
    }

    #[test]
    fn a_bulk_load_marker_from_a_caller_without_global_write_is_refused_before_any_path_is_looked_at(
    ) {
        let f = fixture_reading(true, &["hbase-root"]);
        std::fs::create_dir_all(f._tmp.path().join("hbase-root")).expect("root");
        let (req, block) = bulk_request(&f, &[("t", vec![marker(&["gone_SeqId_7_"], None)])]);
        let nobody = Caller {
            protocol: "hbase",
            peer: Some([10, 0, 0, 9].into()),
            ..Caller::default()
        };
        // Unauthenticated, and with WRITE on the table only: refused as any replicated edit,
        // the answer saying nothing of the file (whether it exists is not theirs to learn).
        for caller in [nobody, user("alice")] {
            let e = replicate(&f, &caller, &req, &block).expect_err("refused");
            assert_eq!(e.class, ACCESS_DENIED, "{}", e.message);
            assert!(!e.message.contains("gone_SeqId_7_"), "{}", e.message);
        }
        // The replicating user gets as far as the file, which is missing.
        let e = replicate(&f, &user("replicator"), &req, &block).expect_err("missing");
        assert_eq!(e.class, IO, "{}", e.message);
        assert!(e.message.contains("gone_SeqId_7_"), "{}", e.message);
    }

    #[test]
    fn a_missing_file_fails_the_call_naming_it_and_one_moved_to_the_archive_is_read_there() {
        let f = fixture_reading(false, &["hbase-root"]);
        std::fs::create_dir_all(f._tmp.path().join("hbase-root")).expect("root");
        let replicator = user("replicator");
        let (req, block) = bulk_request(
            &f,
            &[
                ("t", vec![cell("a", "cf", "q", 1, CellType::Put, "v")]),
                ("t", vec![marker(&["gone_SeqId_7_"], None)]),
            ],
        );
        let e = replicate(&f, &replicator, &req, &block).expect_err("missing");
        assert_eq!(e.class, IO, "retried by the source: {}", e.message);
        assert!(
            e.message
                .contains(&format!("default/t/{REGION}/cf/gone_SeqId_7_")),
            "{}",
            e.message
        );
        assert!(e.message.contains("archive/data"), "{}", e.message);
        assert!(
            read(&f, "a").is_empty(),
            "nothing applied before every file is found"
        );
        assert_eq!(f.svc.rs.gauges().replication_sink.failed_batches, 1);
        // Compacted away on the source since: read from its archive.
        place(&f, "none-none.hfile", "gone_SeqId_7_", true);
        replicate(&f, &replicator, &req, &block).expect("read from the archive");
        assert_eq!(read(&f, "a"), ["cf:q@1=v"]);
        assert!(!read_in(&f, "t", b"\x00\x04\x01").is_empty());
    }

    #[test]
    fn replicated_bulk_loads_read_nothing_outside_the_bulk_load_dirs() {
        let replicator = user("replicator");
        // Bulk load off: refused, saying so, nothing applied.
        let f = fixture(false);
        place(&f, "none-none.hfile", "f1", false);
        let (req, block) = bulk_request(
            &f,
            &[
                ("t", vec![cell("a", "cf", "q", 1, CellType::Put, "v")]),
                ("t", vec![marker(&["f1"], None)]),
            ],
        );
        let e = replicate(&f, &replicator, &req, &block).expect_err("bulk load off");
        assert_eq!(e.class, IO);
        assert!(e.message.contains("bulk load is off"), "{}", e.message);
        assert!(e.message.contains("bulk_load.dirs"), "{}", e.message);
        assert!(read(&f, "a").is_empty());
        drop(f);

        let f = fixture_reading(false, &["hbase-root/data/default/t"]);
        let inside = place(&f, "none-none.hfile", "f1", false);
        let tmp = f._tmp.path().to_path_buf();
        let outside = tmp.join("elsewhere");
        std::fs::create_dir_all(outside.join("default/t").join(REGION).join("cf")).expect("dir");
        std::fs::copy(
            &inside,
            outside.join("default/t").join(REGION).join("cf/f1"),
        )
        .expect("copy");
        std::os::unix::fs::symlink(
            outside.join("default/t").join(REGION).join("cf/f1"),
            inside.with_file_name("link"),
        )
        .expect("symlink");
        let refused = |req: &hbase::ReplicateWalEntryRequest, block: &Bytes, what: &str| {
            let e = replicate(&f, &replicator, req, block).expect_err(what);
            assert_eq!(e.class, ACCESS_DENIED, "{what}: {}", e.message);
            assert!(
                e.message.contains("not under this server's bulk_load.dirs"),
                "{what}: {}",
                e.message
            );
        };
        // The source's directory elsewhere.
        let (mut req, block) = bulk_request(&f, &[("t", vec![marker(&["f1"], None)])]);
        req.source_base_namespace_dir_path = Some(outside.display().to_string());
        refused(&req, &block, "a base directory outside");
        // Out through `..` in a file's name, to a file that exists and to one that does not.
        for file in [
            "../../../../../../elsewhere/default/t/0123456789abcdef0123456789abcdef/cf/f1",
            "../../../../../../../../../../etc/passwd",
            "../../../../../../nothing-here",
        ] {
            let (req, block) = bulk_request(&f, &[("t", vec![marker(&[file], None)])]);
            refused(&req, &block, file);
        }
        // A link inside pointing outside.
        let (req, block) = bulk_request(&f, &[("t", vec![marker(&["link"], None)])]);
        refused(&req, &block, "a link to outside");
        // On an HDFS none of the bulk_load.dirs names: refused before any NameNode is asked.
        let (mut req, block) = bulk_request(&f, &[("t", vec![marker(&["f1"], None)])]);
        req.source_base_namespace_dir_path = Some("hdfs://namenode:8020/hbase/data".into());
        refused(&req, &block, "an HDFS source outside");
        assert!(read_in(&f, "t", b"\x00\x04\x01").is_empty(), "nothing read");
        // The file itself, inside: read.
        let (req, block) = bulk_request(&f, &[("t", vec![marker(&["f1"], None)])]);
        replicate(&f, &replicator, &req, &block).expect("inside");
        assert!(!read_in(&f, "t", b"\x00\x04\x01").is_empty());
    }

    #[test]
    fn bulk_load_markers_beyond_the_limits_or_malformed_are_refused_before_anything_is_read() {
        let f = fixture_reading(false, &["hbase-root"]);
        let names: Vec<String> = (0..=replicated_bulk_load::MAX_FILES_PER_CALL)
            .map(|i| format!("f{i}"))
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let (req, block) = bulk_request(&f, &[("t", vec![marker(&names, None)])]);
        let e = ReplicateWalEntry::new(&req, block).expect_err("too many files");
        assert_eq!(e.class, DO_NOT_RETRY);
        assert!(e.message.contains("more than 1024 files"), "{}", e.message);
        let mut bad = marker(&["f"], None);
        bad.value = Bytes::from_static(b"\xff\xff\xff");
        let (req, block) = bulk_request(&f, &[("t", vec![bad])]);
        let e = ReplicateWalEntry::new(&req, block).expect_err("malformed");
        assert!(e.message.contains("BulkLoadDescriptor"), "{}", e.message);
        let mut big = marker(&["f"], None);
        let mut d: hbase::BulkLoadDescriptor =
            prost::Message::decode(big.value.clone()).expect("decodes");
        d.stores[0].store_file_size_bytes = Some(replicated_bulk_load::MAX_FILE_BYTES + 1);
        big.value = Bytes::from(prost::Message::encode_to_vec(&d));
        let (req, block) = bulk_request(&f, &[("t", vec![big])]);
        let e = ReplicateWalEntry::new(&req, block).expect_err("too big");
        assert!(
            e.message.contains("bytes are not replicated here"),
            "{}",
            e.message
        );
        // Without the source's directory: refused.
        let (mut req, block) = bulk_request(&f, &[("t", vec![marker(&["f"], None)])]);
        req.source_base_namespace_dir_path = None;
        let e = replicate(&f, &user("replicator"), &req, &block).expect_err("no base");
        assert!(
            e.message.contains("sourceBaseNamespaceDirPath"),
            "{}",
            e.message
        );
    }

    /// The WAL keeps, with every replicated write, the clusters the source's WAL entry says the
    /// edit has been through (the request's entries name `(2 << 64) | 1`), rows and
    /// bulk-loaded cells alike; a client's own write carries none.
    #[test]
    fn replicated_writes_keep_their_cluster_ids_in_the_wal() {
        use cellar_model::key::KeyRef;
        use cellar_storage::region::wal_payload;
        let f = fixture_reading(false, &["hbase-root"]);
        place(&f, "none-none.hfile", "f1", false);
        let (req, block) = bulk_request(
            &f,
            &[
                ("t", vec![cell("a", "cf", "q", 1, CellType::Put, "v")]),
                ("t", vec![marker(&["f1"], None)]),
            ],
        );
        replicate(&f, &user("replicator"), &req, &block).expect("applied");
        let own = RowMutation::new(b"own".to_vec()).put(b"cf", b"q", 1, b"mine".to_vec());
        let region = f
            .svc
            .rs
            .router
            .locate("t", b"own")
            .expect("located")
            .info
            .id;
        f.svc
            .rs
            .mutate(
                "t",
                region,
                &own,
                cellar_model::MutationKind::PutDelete,
                None,
            )
            .expect("own write");
        let wal = &f.svc.rs.services.wal;
        wal.roll().expect("roll");
        let (mut replicated, mut own_records) = (0, 0);
        for segment in wal.segments() {
            let data = Bytes::from(std::fs::read(&segment).expect("segment"));
            let replay = cellar_storage::wal::replay_segment("segment", &data).expect("replay");
            for r in replay.records {
                let header = wal_payload::edit_header(&r.payload).expect("header");
                let cells = wal_payload::decode(&r.payload, "record").expect("cells");
                let rows: Vec<&[u8]> = cells
                    .iter()
                    .filter_map(|c| KeyRef::parse(c.key).map(|k| k.row()))
                    .collect();
                if rows.iter().any(|r| *r == b"own") {
                    assert!(header.cluster_ids.is_empty(), "a client's write");
                    own_records += 1;
                } else if rows.iter().any(|r| *r == b"a" || r.starts_with(b"\x00")) {
                    assert_eq!(header.cluster_ids, [(2u128 << 64) | 1], "rows {rows:?}");
                    replicated += 1;
                }
            }
        }
        assert_eq!(own_records, 1);
        assert!(
            replicated >= 2,
            "the row and the file's cells: {replicated} records"
        );
    }
}
