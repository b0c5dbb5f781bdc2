//! Bulk loads replicated by HBase (`hbase.replication.bulkload.enabled` on the source): a
//! bulk load into a replicated table writes a marker cell, `METAFAMILY:HBASE::BULK_LOAD`,
//! whose value is a `BulkLoadDescriptor` (WAL.proto: the region's encoded name, and per family
//! the names of the files it brought in). The source ships that cell like any edit, with the
//! call's `sourceBaseNamespaceDirPath` (its `<root>/data`) and `sourceHFileArchiveDirPath`
//! (its `<root>/archive/data`). HBase's sink copies each file from
//! `BASE/<namespace>/<table>/<encoded region>/<family>/<file>` (from the same place under the
//! archive directory when it is gone: compacted away since) and bulk loads the copies.
//!
//! Cellar reads the files where they are, on its own disk or on the source's HDFS, with its
//! HFile reader (`cellar_hfile`), and only under the server's `bulk_load.dirs`: a replication
//! source names any path it likes, so every path is checked (`bulk_files.rs`: local paths as
//! written and with their links resolved, HDFS URLs against the allowed NameNodes and
//! directories) before a byte of it is read. With no `bulk_load.dirs`, or a path outside them,
//! the call fails and its source sends it again, as it does when an HBase sink's copy fails.
//! Counts and sizes beyond [`MAX_FILES_PER_CALL`], [`MAX_FILE_BYTES`] and [`MAX_CALL_BYTES`]
//! are refused before anything is read.
//!
//! **How the cells come in: as replicated row mutations, in the batch's order** — not through
//! the region ingest path (`region_server/bulk_load.rs`). The source's region is not Cellar's
//! (other boundaries, other splits since), and a replicated call must apply idempotently when
//! its source resends it: written as row mutations, every cell keeps its own timestamp and type
//! (puts and each delete kind), rows are routed to Cellar's regions one by one, and applying a
//! file twice changes no read, exactly as for the WAL edits around it. The marker's place in
//! the batch is kept: edits before it are applied before its cells, edits after it after (HBase's
//! own sink applies a batch's bulk loads after all its edits). What this costs is the write
//! path's work (the WAL, memstores, flushes) for every cell, where an ingest would write store
//! files directly; the files are streamed a block at a time, [`CHUNK_ROWS`] rows or
//! [`CHUNK_BYTES`] bytes per write, so memory stays bounded whatever their size.

use crate::bulk_files::{self, BulkFiles, Location, Refusal};
use crate::hbase::exceptions::{ACCESS_DENIED, IO};
use crate::hbase::HbaseError;
use crate::names;
use crate::region_server::{RegionServer, ReplicatedTable};
use bytes::Bytes;
use cellar_model::{CellType, Durability, Entry, RowMutation};
use cellar_proto::hbase;
use prost::Message;

/// The qualifier of HBase's bulk-load marker cell (family `METAFAMILY`).
pub(crate) const BULK_LOAD_QUALIFIER: &[u8] = b"HBASE::BULK_LOAD";

/// Most files one call may name (HBase loads at most 32 per region and family by default).
pub(crate) const MAX_FILES_PER_CALL: usize = 1024;
/// Largest file read (HBase splits regions at 10 GiB by default).
pub(crate) const MAX_FILE_BYTES: u64 = 32 << 30;
/// Most bytes of files one call may bring in.
pub(crate) const MAX_CALL_BYTES: u64 = 64 << 30;
/// Rows, and bytes of cells, written together.
const CHUNK_ROWS: usize = 1024;
const CHUNK_BYTES: usize = 8 << 20;
/// Cells of one row put in one row mutation (a longer row goes in several: a replicated
/// cell is idempotent on its own).
const ROW_CELLS: usize = 4096;

/// One replicated bulk load: the files a bulk load brought into one region of the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReplicatedBulkLoad {
    /// Cellar's name for the table (the WAL entry's, canonical).
    pub(crate) table: String,
    /// The source region's encoded name: the directory its files are in.
    pub(crate) region: String,
    pub(crate) stores: Vec<Store>,
    /// The marker's WAL entry's cluster ids: kept with every cell written from the files.
    pub(crate) cluster_ids: Vec<u128>,
}

/// One family's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Store {
    pub(crate) family: String,
    pub(crate) files: Vec<String>,
}

impl ReplicatedBulkLoad {
    /// The load a marker's value describes, for `table` (the WAL entry's); `None` when the
    /// descriptor says it is not to be replicated (as HBase's sink skips it).
    pub(crate) fn decode(table: &str, value: &[u8]) -> Result<Option<Self>, String> {
        let d = hbase::BulkLoadDescriptor::decode(value).map_err(|e| {
            format!("a bulk-load marker whose BulkLoadDescriptor is malformed: {e}")
        })?;
        if !d.replicate() {
            return Ok(None);
        }
        let region = String::from_utf8(d.encoded_region_name.to_vec())
            .map_err(|_| "a bulk-load marker whose encoded region name is not UTF-8".to_string())?;
        let mut stores = Vec::with_capacity(d.stores.len());
        for s in d.stores {
            let family = String::from_utf8(s.family_name.to_vec())
                .map_err(|_| "a bulk-load marker naming a family that is not UTF-8".to_string())?;
            if let Some(size) = s.store_file_size_bytes.filter(|&n| n > MAX_FILE_BYTES) {
                return Err(format!(
                    "a bulk-loaded file of {size} bytes in family '{family}': files above \
                     {MAX_FILE_BYTES} bytes are not replicated here"
                ));
            }
            stores.push(Store {
                family,
                files: s.store_file,
            });
        }
        Ok(Some(ReplicatedBulkLoad {
            table: table.to_string(),
            region,
            stores,
            cluster_ids: Vec::new(),
        }))
    }

    pub(crate) fn file_count(&self) -> usize {
        self.stores.iter().map(|s| s.files.len()).sum()
    }

    /// Each file's path relative to the source's namespace directory (HBase's sink's rule:
    /// namespace, table, encoded region, family, file), with its family.
    fn relative_paths(&self) -> Vec<(String, &str)> {
        let (namespace, qualifier) = names::split(&self.table);
        self.stores
            .iter()
            .flat_map(|s| {
                s.files.iter().map(move |f| {
                    (
                        format!("{namespace}/{qualifier}/{}/{}/{f}", self.region, s.family),
                        s.family.as_str(),
                    )
                })
            })
            .collect()
    }
}

/// Where the source's files are: the call's `sourceBaseNamespaceDirPath` and
/// `sourceHFileArchiveDirPath`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SourceDirs {
    pub(crate) base: Option<String>,
    pub(crate) archive: Option<String>,
    /// `replicationClusterId`: which source (HBase's sink finds its file system's settings by
    /// it); named in errors only, the files are read from this server's own disk.
    pub(crate) cluster: Option<String>,
}

impl SourceDirs {
    pub(crate) fn of(req: &hbase::ReplicateWalEntryRequest) -> SourceDirs {
        SourceDirs {
            base: req.source_base_namespace_dir_path.clone(),
            archive: req.source_h_file_archive_dir_path.clone(),
            cluster: req.replication_cluster_id.clone(),
        }
    }
}

/// A file found and allowed: where it is, its family and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) location: Location,
    pub(crate) family: String,
    pub(crate) size: u64,
}

/// Finds every file of `loads` under `source`'s directories, each under one of the server's
/// `bulk_load.dirs` (`files`, local or HDFS: `bulk_files.rs`), and checks the limits; nothing
/// is read but directory entries and sizes. The files of each load, in order.
pub(crate) fn resolve(
    loads: &[&ReplicatedBulkLoad],
    source: &SourceDirs,
    files: &BulkFiles,
) -> Result<Vec<Vec<Found>>, HbaseError> {
    let Some(first) = loads.first() else {
        return Ok(Vec::new());
    };
    if files.is_off() {
        return Err(HbaseError::new(
            IO,
            format!(
                "a replicated bulk load into table '{}' is refused: bulk load is off on this \
                 server. Set bulk_load.dirs in cellar.toml (or start it with --bulk-load-dir \
                 DIR) to a directory holding the source cluster's root directory (a local \
                 one, or hdfs://NAMENODE/DIR), which this server reads the files from; the \
                 source sends the batch again until then",
                first.table
            ),
            false,
        ));
    }
    let base = source.base.as_deref().ok_or_else(|| {
        HbaseError::do_not_retry(
            "a bulk-load marker in a call without sourceBaseNamespaceDirPath: where its \
             files are is not known",
        )
    })?;
    let mut total = 0u64;
    let mut out = Vec::with_capacity(loads.len());
    for load in loads {
        let mut found = Vec::with_capacity(load.file_count());
        for (relative, family) in load.relative_paths() {
            let f = find(&relative, base, source.archive.as_deref(), files, source)?;
            total = total.saturating_add(f.size);
            if total > MAX_CALL_BYTES {
                return Err(HbaseError::do_not_retry(format!(
                    "the call's bulk-loaded files come to more than {MAX_CALL_BYTES} bytes: \
                     not replicated here"
                )));
            }
            found.push(Found {
                location: f.location,
                family: family.to_string(),
                size: f.size,
            });
        }
        out.push(found);
    }
    Ok(out)
}

/// `relative` under the base directory, or under the archive when it is not there.
fn find(
    relative: &str,
    base: &str,
    archive: Option<&str>,
    files: &BulkFiles,
    source: &SourceDirs,
) -> Result<bulk_files::Found, HbaseError> {
    let mut tried = Vec::new();
    for dir in std::iter::once(base).chain(archive) {
        let candidate = format!("{}/{relative}", dir.trim_end_matches('/'));
        match files.find(&candidate) {
            Ok(Some(f)) if f.size > MAX_FILE_BYTES => {
                return Err(HbaseError::do_not_retry(format!(
                    "replicated bulk-loaded file '{}' has {} bytes: files above \
                     {MAX_FILE_BYTES} bytes are not replicated here",
                    f.location, f.size
                )))
            }
            Ok(Some(f)) => return Ok(f),
            Ok(None) => tried.push(candidate),
            Err(Refusal::NotAllowed) => return Err(refused(&candidate)),
            Err(Refusal::Io(e)) => {
                return Err(HbaseError::new(
                    IO,
                    format!("replicated bulk-loaded file '{candidate}': {e}"),
                    false,
                ))
            }
        }
    }
    Err(HbaseError::new(
        IO,
        format!(
            "replicated bulk-loaded file {relative} of source cluster {} is not found (looked \
             for {}); the source sends the batch again",
            source.cluster.as_deref().unwrap_or("(unnamed)"),
            tried.join(" and ")
        ),
        false,
    ))
}

fn refused(path: &str) -> HbaseError {
    // The path as the caller's directory and file names make it, `..` resolved: the message
    // says where it pointed without the server having looked.
    let shown = if path.contains("://") {
        path.to_string()
    } else {
        bulk_files::lexical(std::path::Path::new(
            path.strip_prefix("file:")
                .map_or(path, |p| p.trim_start_matches("//")),
        ))
        .display()
        .to_string()
    };
    HbaseError::new(
        ACCESS_DENIED,
        format!(
            "replicated bulk-loaded file '{shown}' is not under this server's bulk_load.dirs: not read"
        ),
        true,
    )
}

/// Writes the cells of `files` into `table` as replicated row mutations, file after file, each
/// in its order; returns the cells written.
pub(crate) fn apply(
    rs: &RegionServer,
    load: &ReplicatedBulkLoad,
    files: &[Found],
) -> Result<u64, HbaseError> {
    let mut cells = 0;
    for f in files {
        cells += apply_file(rs, load, f)?;
    }
    Ok(cells)
}

fn apply_file(rs: &RegionServer, load: &ReplicatedBulkLoad, f: &Found) -> Result<u64, HbaseError> {
    let table = load.table.as_str();
    let name = f.location.to_string();
    let unreadable = |e: cellar_hfile::Error| match e {
        cellar_hfile::Error::Io { .. } => HbaseError::new(IO, e.to_string(), false),
        _ => HbaseError::do_not_retry(format!("replicated bulk-loaded file: {e}")),
    };
    let bad = |what: String| HbaseError::do_not_retry(format!("{name}: {what}"));
    let hfile = rs
        .bulk_files
        .open_hfile(&bulk_files::Found {
            location: f.location.clone(),
            size: f.size,
        })
        .map_err(unreadable)?;
    let family = Bytes::copy_from_slice(f.family.as_bytes());
    let mut rows: Vec<RowMutation> = Vec::new();
    let mut chunk_bytes = 0usize;
    let mut written = 0u64;
    // The key of the previous cell: cells identical but for HBase's sequence id keep the
    // first (the newest, as HBase orders them).
    let mut last: Option<(Bytes, Bytes, u64, CellType)> = None;
    for cell in hfile.cells() {
        let cell = cell.map_err(unreadable)?;
        if cell.family != family {
            return Err(bad(format!(
                "holds cells of family '{}', bulk loaded into family '{}'",
                String::from_utf8_lossy(&cell.family),
                f.family
            )));
        }
        if cell.is_mob_reference() {
            return Err(bad(bulk_files::mob_reference(&cell.row)));
        }
        let kind = CellType::from_code(cell.kind)
            .ok_or_else(|| bad(format!("a cell of type {}", cell.kind)))?;
        let timestamp = u64::try_from(cell.timestamp)
            .map_err(|_| bad(format!("a negative timestamp {}", cell.timestamp)))?;
        let row = Bytes::from(cell.row);
        let qualifier = Bytes::from(cell.qualifier);
        let key = (row.clone(), qualifier.clone(), timestamp, kind);
        if last.as_ref() == Some(&key) {
            continue;
        }
        last = Some(key);
        let size = row.len() + qualifier.len() + cell.value.len() + 32;
        let entry = Entry {
            family: family.clone(),
            qualifier,
            timestamp,
            cell_type: kind,
            value: Bytes::from(cell.value),
        };
        match rows.last_mut() {
            Some(m) if m.row == row && m.entries.len() < ROW_CELLS => m.entries.push(entry),
            _ => {
                if rows.len() >= CHUNK_ROWS || chunk_bytes >= CHUNK_BYTES {
                    write(rs, table, &mut rows)?;
                    chunk_bytes = 0;
                }
                rows.push(RowMutation {
                    row,
                    entries: vec![entry],
                    durability: Durability::UseDefault,
                    nonce: None,
                    cluster_ids: load.cluster_ids.clone(),
                });
            }
        }
        chunk_bytes += size;
        written += 1;
    }
    write(rs, table, &mut rows)?;
    tracing::info!(
        table,
        file = %name,
        cells = written,
        bytes = f.size,
        "replicated bulk-loaded file applied"
    );
    Ok(written)
}

fn write(rs: &RegionServer, table: &str, rows: &mut Vec<RowMutation>) -> Result<(), HbaseError> {
    if rows.is_empty() {
        return Ok(());
    }
    let batch = [ReplicatedTable {
        table: table.to_string(),
        rows: std::mem::take(rows),
    }];
    rs.apply_replicated(&batch).map_err(HbaseError::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn descriptor(replicate: Option<bool>) -> Vec<u8> {
        hbase::BulkLoadDescriptor {
            table_name: hbase::TableName {
                namespace: Bytes::from_static(b"ns"),
                qualifier: Bytes::from_static(b"orders"),
            },
            encoded_region_name: Bytes::from_static(b"abc123"),
            stores: vec![
                hbase::StoreDescriptor {
                    family_name: Bytes::from_static(b"f"),
                    store_home_dir: "f".into(),
                    store_file: vec!["x_SeqId_4_".into(), "y_SeqId_4_".into()],
                    store_file_size_bytes: Some(10),
                },
                hbase::StoreDescriptor {
                    family_name: Bytes::from_static(b"g"),
                    store_home_dir: "g".into(),
                    store_file: vec!["z".into()],
                    store_file_size_bytes: None,
                },
            ],
            bulkload_seq_num: 4,
            cluster_ids: vec![],
            replicate,
        }
        .encode_to_vec()
    }

    #[test]
    fn a_descriptor_decodes_into_the_paths_hbases_sink_copies_from() {
        let load = ReplicatedBulkLoad::decode("ns:orders", &descriptor(None))
            .expect("decodes")
            .expect("replicated by default");
        assert_eq!(load.file_count(), 3);
        let paths: Vec<_> = load.relative_paths();
        assert_eq!(
            paths,
            [
                ("ns/orders/abc123/f/x_SeqId_4_".to_string(), "f"),
                ("ns/orders/abc123/f/y_SeqId_4_".to_string(), "f"),
                ("ns/orders/abc123/g/z".to_string(), "g"),
            ]
        );
        // The default namespace is named in the path, as HBase lays out its root directory.
        let load = ReplicatedBulkLoad::decode("orders", &descriptor(Some(true)))
            .expect("decodes")
            .expect("replicated");
        assert_eq!(
            load.relative_paths()[0].0,
            "default/orders/abc123/f/x_SeqId_4_"
        );
        assert_eq!(
            ReplicatedBulkLoad::decode("orders", &descriptor(Some(false))),
            Ok(None)
        );
        assert!(ReplicatedBulkLoad::decode("orders", b"\x0a\xff").is_err());
    }
}
