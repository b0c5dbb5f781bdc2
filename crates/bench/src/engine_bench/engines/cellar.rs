//! Cellar under test: one [`Region`] of a one-family table, entries stored as the single
//! column `cf:v` of the row named by the key.
//!
//! Sessions read and write through [`RegionApi`] (statically dispatched, so no cost over the
//! region's own methods); what only the engine has (its counters, background work, the WAL's
//! statistics) the engine asks its [`Region`] for.

use crate::engine_bench::args::{CompressionArg, EngineKind, SyncMode};
use crate::engine_bench::engines::{CacheCounters, Engine, EngineConfig, Session};
use crate::engine_bench::error::{Context, Result};
use cellar_model::{
    BloomType, CellRef, CellSink, Compression, Durability, FamilySchema, Get, RegionApi,
    RowMutation, RowScanner, Scan, TableSchema, LATEST_TIMESTAMP,
};
use cellar_storage::region::{Region, StorageConfig};
use std::collections::BTreeMap;
use std::path::Path;

const FAMILY: &[u8] = b"cf";
const QUALIFIER: &[u8] = b"v";

/// A Cellar region with the benchmark's options.
pub struct CellarEngine {
    region: Region,
    durability: Durability,
}

/// The family schema for `config`: block size, compression and bloom filter as asked.
pub fn family_schema(config: &EngineConfig) -> FamilySchema {
    let mut family = FamilySchema::new("cf");
    family.block_size = config.block_size;
    family.compression = match config.compression {
        CompressionArg::None => Compression::None,
        CompressionArg::Lz4 => Compression::Lz4,
        CompressionArg::Zstd => Compression::Zstd,
        CompressionArg::Snappy => Compression::Snappy,
    };
    if config.bloom_bits == 0 {
        family.bloom = BloomType::None;
    } else {
        family.bloom = BloomType::Row;
        family.bloom_bits_per_key = config.bloom_bits;
    }
    family
}

/// The durability level standing for `sync`.
pub fn durability(sync: SyncMode) -> Durability {
    match sync {
        SyncMode::None => Durability::SkipWal,
        SyncMode::Sync => Durability::SyncWal,
        SyncMode::Fsync => Durability::FsyncWal,
    }
}

impl CellarEngine {
    pub fn open(dir: &Path, config: &EngineConfig) -> Result<CellarEngine> {
        std::fs::create_dir_all(dir).context(format!("creating {}", dir.display()))?;
        let schema = TableSchema::new("bench", vec![family_schema(config)]);
        let storage = StorageConfig {
            block_cache_bytes: config.cache_bytes,
            memstore_flush_bytes: config.effective_memstore_bytes(),
            region_gate: config.region_gate,
            block_cache_compressed: config.cache_compressed,
            compaction_style: config.compaction_style,
            compaction_threads: config.compaction_threads,
            compaction_nice: config.compaction_nice,
            ..StorageConfig::default()
        };
        let region = Region::open_with_config(dir, schema, storage)
            .context(format!("opening a Cellar region in {}", dir.display()))?;
        Ok(CellarEngine {
            region,
            durability: durability(config.sync),
        })
    }
}

impl Engine for CellarEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Cellar
    }

    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(CellarSession {
            region: &self.region,
            durability: self.durability,
        }))
    }

    fn flush(&self) -> Result<()> {
        self.region.flush().context("cellar flush")
    }

    fn wait_for_background(&self) -> Result<()> {
        self.region.wait_for_background();
        Ok(())
    }

    fn cache_counters(&self) -> Option<CacheCounters> {
        let c = self.region.stats().block_cache;
        Some(CacheCounters {
            hits: c.hits,
            misses: c.misses,
        })
    }

    fn file_bytes_read(&self) -> Option<u64> {
        Some(cellar_storage::storefile::bytes_read())
    }

    fn stats(&self) -> BTreeMap<String, u64> {
        let s = self.region.stats();
        let wal = self.region.services().wal.stats();
        BTreeMap::from([
            ("memstore_bytes".to_string(), s.memstore_bytes),
            ("store_files".to_string(), s.store_files as u64),
            ("store_file_bytes".to_string(), s.store_file_bytes),
            ("flushes".to_string(), s.flushes),
            ("compactions".to_string(), s.compactions),
            ("bytes_flushed".to_string(), s.bytes_flushed),
            ("bytes_compacted".to_string(), s.bytes_compacted),
            (
                "block_cache_used_bytes".to_string(),
                s.block_cache.used_bytes,
            ),
            ("block_cache_evictions".to_string(), s.block_cache.evictions),
            (
                "writes_blocked_memstore".to_string(),
                s.writes_blocked_memstore,
            ),
            ("writes_blocked_files".to_string(), s.writes_blocked_files),
            ("writes_blocked_ms".to_string(), s.writes_blocked_ms),
            ("wal_rolls".to_string(), wal.rolls),
            ("wal_roll_hold_ms".to_string(), wal.roll_hold_us / 1000),
        ])
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.region.close().context("closing the Cellar region")
    }
}

/// One client thread's reads and writes, on any region ([`Region`] in the benchmark).
struct CellarSession<'a, R> {
    region: &'a R,
    durability: Durability,
}

impl<R: RegionApi> Session for CellarSession<'_, R> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let m = RowMutation::new(key.to_vec())
            .put(FAMILY, QUALIFIER, LATEST_TIMESTAMP, value.to_vec())
            .with_durability(self.durability);
        self.region.mutate(&m).context("cellar put")
    }

    /// Reads the one column the benchmark writes, as a key-value user of Cellar would: the
    /// equivalent of RocksDB's `get(key)`. (A whole-row Get must consult every file holding
    /// the row, since any file could hold another column.) Cells are borrowed where they
    /// lie ([`RegionApi::get_into`]), as RocksDB's pinned get does.
    fn get(&mut self, key: &[u8]) -> Result<Option<usize>> {
        let mut sink = Tally::default();
        self.region
            .get_into(&Get::new(key.to_vec()).column(FAMILY, QUALIFIER), &mut sink)
            .context("cellar get")?;
        Ok((sink.cells > 0).then_some(sink.value_bytes as usize))
    }

    /// Rows from the scanner's borrowed cells ([`RowScanner::next_row_into`]), as RocksDB's
    /// raw iterator gives borrowed keys and values.
    fn scan(&mut self, start: &[u8], count: usize) -> Result<(u64, u64)> {
        let scan = Scan::new()
            .range(start, b"")
            .column(FAMILY, QUALIFIER)
            .limit(count as u64);
        let mut scanner = self.region.scan(&scan).context("cellar scan")?;
        let mut sink = Tally::default();
        // Bounded by `count` even if the scanner ignored its limit.
        for _ in 0..count {
            if !scanner.next_row_into(&mut sink).context("cellar scan")? {
                break;
            }
        }
        Ok((sink.rows, sink.row_bytes + sink.value_bytes))
    }
}

/// Counts what a read gives: cells, rows (one per row's first cell) and their bytes.
#[derive(Default)]
struct Tally {
    cells: u64,
    rows: u64,
    row_bytes: u64,
    value_bytes: u64,
    in_row: bool,
}

impl CellSink for Tally {
    fn cell(&mut self, c: CellRef<'_>) {
        if !self.in_row {
            self.in_row = true;
            self.rows += 1;
            self.row_bytes += c.row.len() as u64;
        }
        self.cells += 1;
        self.value_bytes += c.value.len() as u64;
    }

    fn end_family(&mut self) {
        // One family per row here: the next cell starts the next row.
        self.in_row = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellar_model::MemRegion;

    /// The session's reads and writes over the in-memory region: what it counts is the
    /// region's answer, whichever region it is.
    #[test]
    fn a_session_reads_what_it_wrote_on_any_region() {
        let schema = TableSchema::new("bench", vec![FamilySchema::new("cf")]);
        let region = MemRegion::new(schema).expect("schema");
        let mut session = CellarSession {
            region: &region,
            durability: Durability::SkipWal,
        };
        for (k, v) in [("k1", "a"), ("k2", "bb"), ("k3", "ccc")] {
            session.put(k.as_bytes(), v.as_bytes()).expect("put");
        }
        assert_eq!(session.get(b"k2").expect("get"), Some(2));
        assert_eq!(session.get(b"k0").expect("get"), None);
        // From k2: two rows, keys (2 bytes each) and values (2 and 3 bytes).
        assert_eq!(session.scan(b"k2", 10).expect("scan"), (2, 9));
        assert_eq!(session.scan(b"k", 1).expect("scan"), (1, 3));
    }
}
