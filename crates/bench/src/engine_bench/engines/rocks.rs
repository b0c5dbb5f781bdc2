//! RocksDB under test, configured to match Cellar: one column family, block-based tables with
//! the same block size, bloom bits per key, LRU block cache size and compression on every
//! level, and a write buffer the size of Cellar's memstore flush size. Everything else keeps
//! RocksDB's defaults (leveled compaction, two background jobs, `bytes_per_sync` 0).

use crate::engine_bench::args::{CompressionArg, EngineKind, SyncMode};
use crate::engine_bench::engines::{CacheCounters, Engine, EngineConfig, Session};
use crate::engine_bench::error::{Context, Result};
use rocksdb::{
    BlockBasedOptions, Cache, DBCompressionType, Options, WaitForCompactOptions, WriteOptions, DB,
};
use std::collections::BTreeMap;
use std::path::Path;

/// RocksDB's default number of levels; every one gets the same compression.
const LEVELS: usize = 7;

/// A RocksDB database with the benchmark's options.
pub struct RocksEngine {
    db: DB,
    sync: SyncMode,
    // Kept alive for as long as the database uses it.
    _cache: Cache,
}

fn compression(c: CompressionArg) -> DBCompressionType {
    match c {
        CompressionArg::None => DBCompressionType::None,
        CompressionArg::Lz4 => DBCompressionType::Lz4,
        CompressionArg::Zstd => DBCompressionType::Zstd,
        CompressionArg::Snappy => DBCompressionType::Snappy,
    }
}

impl RocksEngine {
    pub fn open(dir: &Path, config: &EngineConfig) -> Result<RocksEngine> {
        let cache_bytes = usize::try_from(config.cache_bytes).context("--cache-bytes")?;
        let cache = Cache::new_lru_cache(cache_bytes);
        let mut table = BlockBasedOptions::default();
        table.set_block_size(config.block_size as usize);
        table.set_block_cache(&cache);
        if config.bloom_bits > 0 {
            // A full (not block-based) filter per file, as Cellar keeps one per store file.
            table.set_bloom_filter(f64::from(config.bloom_bits), false);
        }
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_block_based_table_factory(&table);
        let c = compression(config.compression);
        opts.set_compression_type(c);
        opts.set_compression_per_level(&[c; LEVELS]);
        opts.set_bottommost_compression_type(c);
        let memstore =
            usize::try_from(config.effective_memstore_bytes()).context("--memstore-bytes")?;
        opts.set_write_buffer_size(memstore);
        let db = DB::open(&opts, dir).context(format!("opening RocksDB in {}", dir.display()))?;
        Ok(RocksEngine {
            db,
            sync: config.sync,
            _cache: cache,
        })
    }
}

impl Engine for RocksEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Rocksdb
    }

    fn session(&self) -> Result<Box<dyn Session + '_>> {
        let mut write = WriteOptions::default();
        match self.sync {
            SyncMode::None => write.disable_wal(true),
            SyncMode::Sync => {}
            SyncMode::Fsync => write.set_sync(true),
        }
        Ok(Box::new(RocksSession {
            db: &self.db,
            write,
        }))
    }

    fn flush(&self) -> Result<()> {
        self.db.flush().context("rocksdb flush")
    }

    fn wait_for_background(&self) -> Result<()> {
        self.db
            .wait_for_compact(&WaitForCompactOptions::default())
            .context("rocksdb wait_for_compact")
    }

    fn cache_counters(&self) -> Option<CacheCounters> {
        // Counting hits needs RocksDB statistics, which cost throughput; the workloads report
        // bytes read from files instead, which both engines share.
        None
    }

    fn stats(&self) -> BTreeMap<String, u64> {
        let mut names: Vec<String> = [
            "total-sst-files-size",
            "live-sst-files-size",
            "estimate-num-keys",
            "block-cache-usage",
            "cur-size-all-mem-tables",
            "num-running-compactions",
            "num-running-flushes",
        ]
        .iter()
        .map(|n| format!("rocksdb.{n}"))
        .collect();
        names.extend((0..LEVELS).map(|l| format!("rocksdb.num-files-at-level{l}")));
        names
            .into_iter()
            .filter_map(|name| {
                // A property this RocksDB version lacks is left out rather than failing the run.
                let v = self.db.property_int_value(name.as_str()).ok().flatten()?;
                Some((name.trim_start_matches("rocksdb.").to_string(), v))
            })
            .collect()
    }

    fn close(self: Box<Self>) -> Result<()> {
        // Dropping the handle closes the database after its background work stops.
        drop(self.db);
        Ok(())
    }
}

struct RocksSession<'a> {
    db: &'a DB,
    write: WriteOptions,
}

impl Session for RocksSession<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.db
            .put_opt(key, value, &self.write)
            .context("rocksdb put")
    }

    fn get(&mut self, key: &[u8]) -> Result<Option<usize>> {
        let v = self.db.get_pinned(key).context("rocksdb get")?;
        Ok(v.map(|s| s.len()))
    }

    fn scan(&mut self, start: &[u8], count: usize) -> Result<(u64, u64)> {
        let mut it = self.db.raw_iterator();
        it.seek(start);
        let (mut entries, mut bytes) = (0u64, 0u64);
        for _ in 0..count {
            let (Some(k), Some(v)) = (it.key(), it.value()) else {
                break;
            };
            entries += 1;
            bytes += (k.len() + v.len()) as u64;
            it.next();
        }
        it.status().context("rocksdb scan")?;
        Ok((entries, bytes))
    }
}
