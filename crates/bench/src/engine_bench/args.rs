//! Command-line flags of `engine_bench`, their defaults, and how a parent passes them to a child.
//!
//! Every option that shapes the engines (block size, compression, bloom bits, cache, memstore,
//! sync) is applied identically to Cellar and RocksDB; see `docs/engine-bench.md`.

use crate::engine_bench::error::{BenchError, Result};
use clap::{Parser, ValueEnum};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;

/// The workloads, in the spelling `--benchmarks` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// `--num` puts in ascending key order into an empty store.
    #[value(name = "fillseq")]
    Fillseq,
    /// `--num` puts of every key once, in shuffled order, into an empty store.
    #[value(name = "fillrandom")]
    Fillrandom,
    /// `--num` puts of uniformly random existing keys (with repeats) over the loaded store.
    #[value(name = "overwrite")]
    Overwrite,
    /// `--reads` gets of uniformly random keys over all `--num` keys (data larger than the cache).
    #[value(name = "readrandom")]
    Readrandom,
    /// `--reads` gets of random keys from a contiguous key range a quarter of the cache's size,
    /// read once beforehand so that it is cached.
    #[value(name = "readrandom-hot")]
    ReadrandomHot,
    /// `--seeks` scans: seek to a random key, read the next `--scan-length` entries.
    #[value(name = "seekrandom")]
    Seekrandom,
    /// `--reads` gets of keys that are absent: a random existing key with `.` appended, so it
    /// sorts between two present keys (db_bench's readmissing).
    #[value(name = "readmissing")]
    Readmissing,
    /// `--reads` gets, each absent (as in `readmissing`) or present (as in `readrandom`) with
    /// equal odds.
    #[value(name = "readmixed")]
    Readmixed,
}

impl Workload {
    /// Every workload: the default ones in their order, then the absent-key reads.
    pub const ALL: [Workload; 8] = [
        Workload::Fillseq,
        Workload::Fillrandom,
        Workload::Overwrite,
        Workload::Readrandom,
        Workload::ReadrandomHot,
        Workload::Seekrandom,
        Workload::Readmissing,
        Workload::Readmixed,
    ];

    /// The name `--benchmarks` and the report use.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Fillseq => "fillseq",
            Workload::Fillrandom => "fillrandom",
            Workload::Overwrite => "overwrite",
            Workload::Readrandom => "readrandom",
            Workload::ReadrandomHot => "readrandom-hot",
            Workload::Seekrandom => "seekrandom",
            Workload::Readmissing => "readmissing",
            Workload::Readmixed => "readmixed",
        }
    }

    /// Whether the workload writes (and so has a write amplification).
    pub fn writes(self) -> bool {
        matches!(
            self,
            Workload::Fillseq | Workload::Fillrandom | Workload::Overwrite
        )
    }

    /// Whether the workload starts from an empty store.
    pub fn starts_empty(self) -> bool {
        matches!(self, Workload::Fillseq | Workload::Fillrandom)
    }

    /// Parses one name as `--benchmarks` spells it.
    pub fn parse(name: &str) -> Result<Workload> {
        Workload::ALL
            .into_iter()
            .find(|w| w.name() == name.trim())
            .ok_or_else(|| {
                BenchError::new(format!(
                    "unknown workload '{name}' (expected one of {})",
                    Workload::ALL.map(Workload::name).join(", ")
                ))
            })
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which engine(s) to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineChoice {
    Cellar,
    Rocksdb,
    /// Cellar and RocksDB, alternating per workload.
    Both,
}

/// One engine (what a child runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineKind {
    Cellar,
    Rocksdb,
}

impl EngineKind {
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Cellar => "cellar",
            EngineKind::Rocksdb => "rocksdb",
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Block compression, the same for every level of both engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CompressionArg {
    None,
    Lz4,
    Zstd,
    Snappy,
}

impl CompressionArg {
    pub fn name(self) -> &'static str {
        match self {
            CompressionArg::None => "none",
            CompressionArg::Lz4 => "lz4",
            CompressionArg::Zstd => "zstd",
            CompressionArg::Snappy => "snappy",
        }
    }
}

/// How durable each put is before it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SyncMode {
    /// No WAL (Cellar `SkipWal`, RocksDB `disableWAL`).
    None,
    /// WAL written to the OS, not synced (Cellar `SyncWal`, RocksDB's default write options).
    Sync,
    /// WAL fdatasync'ed per write (Cellar `FsyncWal`, RocksDB `WriteOptions::sync = true`).
    Fsync,
}

impl SyncMode {
    pub fn name(self) -> &'static str {
        match self {
            SyncMode::None => "none",
            SyncMode::Sync => "sync",
            SyncMode::Fsync => "fsync",
        }
    }
}

const AFTER_HELP: &str = "\
Workloads (--benchmarks, run in the order given):
  fillseq         --num puts, keys ascending, into an empty store
  fillrandom      --num puts, every key once in shuffled order, into an empty store
  overwrite       --num puts of uniformly random existing keys (repeats allowed)
  readrandom      --reads gets of uniformly random keys over all --num keys; with the
                  defaults the data (~1 GiB) is ~16x the block cache
  readrandom-hot  --reads gets from a contiguous key range holding a quarter of
                  --cache-bytes of data, read once (unmeasured) first so it is cached
  seekrandom      --seeks times: seek to a uniformly random key, read the next
                  --scan-length entries (\"seekrandom + scan of 100\")
  readmissing     --reads gets of absent keys (a random key with '.' appended, so it
                  sorts between two present keys); not in the default list
  readmixed       --reads gets, half absent as in readmissing, half as in readrandom;
                  not in the default list
Read workloads run on the data of the preceding fill in the same child process; if
none ran, the child loads the store with an unmeasured fillrandom first. After every
write workload both engines flush their memtable and wait for background flushes and
compactions; those bytes count in write amplification but not in ops/s.

Measured per engine and workload: ops/s and MB/s (key+value bytes, 10^6) of the timed
operations; p50/p99 latency (HdrHistogram, µs); write amplification = bytes written by
the process (/proc/self/io wchar: WAL, flushes, compactions) until background work is
done, divided by key+value bytes put; file reads per operation (rchar, or bytes of
blocks Cellar read from its mapped store files); peak RSS (anonymous memory, sampled every
10 ms: the page cache is left out for both engines).
Progress lines and per-result summaries go to stderr, the Markdown table to stdout.

Each engine runs in its own child process (this binary re-executed with --child), so
peak RSS is per engine; with --engine both the workloads alternate cellar, rocksdb.
Sizes accept K/M/G (powers of 1024) suffixes, e.g. --cache-bytes 64M.
Details: docs/engine-bench.md";

/// Flags of `engine_bench`. Defaults: 1,000,000 entries of 16-byte keys and 1 KiB values.
#[derive(Debug, Clone, Parser, Serialize, Deserialize)]
#[command(
    name = "engine_bench",
    about = "Storage-engine benchmark: Cellar's region vs RocksDB, db_bench-style workloads",
    after_help = AFTER_HELP
)]
pub struct Args {
    /// Comma-separated workloads to run, in order: fillseq, fillrandom, overwrite,
    /// readrandom, readrandom-hot, seekrandom (the default), readmissing, readmixed.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fillseq,fillrandom,overwrite,readrandom,readrandom-hot,seekrandom"
    )]
    pub benchmarks: Vec<Workload>,

    /// Engine(s) to benchmark; rocksdb needs a build with `--features rocksdb`.
    #[arg(long, value_enum, default_value_t = EngineChoice::Both)]
    pub engine: EngineChoice,

    /// Number of entries the fills write (and overwrite puts).
    #[arg(long, default_value_t = 1_000_000)]
    pub num: u64,

    /// Key length in bytes: the entry number as zero-padded decimal, so both engines store
    /// the same bytes and key order is numeric order.
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,

    /// Value length in bytes.
    #[arg(long, default_value_t = 1024)]
    pub value_size: usize,

    /// Fraction of each value that compresses away (0 = random bytes, 0.5 = half
    /// compressible); matters only with --compression other than none.
    #[arg(long, default_value_t = 0.5)]
    pub value_compressibility: f64,

    /// Gets per read workload (readrandom, readrandom-hot).
    #[arg(long, default_value_t = 200_000)]
    pub reads: u64,

    /// Seeks of seekrandom (each reads --scan-length entries).
    #[arg(long, default_value_t = 20_000)]
    pub seeks: u64,

    /// Entries read after each seek of seekrandom.
    #[arg(long, default_value_t = 100)]
    pub scan_length: usize,

    /// Data block size (uncompressed), both engines.
    #[arg(long, default_value = "65536", value_parser = parse_size_u32)]
    pub block_size: u32,

    /// Block compression for every level, both engines.
    #[arg(long, value_enum, default_value_t = CompressionArg::None)]
    pub compression: CompressionArg,

    /// Bloom filter bits per key (0: no bloom filter), both engines.
    #[arg(long, default_value_t = 10)]
    pub bloom_bits: u32,

    /// Block cache capacity in bytes, both engines (Cellar's block cache, RocksDB's LRU cache).
    #[arg(long, default_value = "64M", value_parser = parse_size)]
    pub cache_bytes: u64,

    /// Memstore flush size = RocksDB write_buffer_size; 0 uses Cellar's default
    /// (StorageConfig::default().memstore_flush_bytes) for both.
    #[arg(long, default_value = "0", value_parser = parse_size)]
    pub memstore_bytes: u64,

    /// Cellar's block cache keeps data blocks compressed, decompressing on each hit (RocksDB's
    /// LRU cache keeps them uncompressed either way).
    #[arg(long)]
    pub cache_compressed: bool,

    /// Cellar's region-level gate for Gets (`true`/`false`); off only to measure what it saves.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub region_gate: bool,

    /// Cellar's compaction style: `leveled` (the default, as RocksDB's) or `tiered` (HBase's
    /// ratio rule over whole runs).
    #[arg(long, default_value = "leveled", value_parser = parse_compaction_style)]
    pub compaction_style: String,

    /// Cellar's compaction threads (RocksDB keeps its defaults: `max_background_jobs` 2, one
    /// of them for flushes).
    #[arg(long, default_value_t = 2)]
    pub compaction_threads: usize,

    /// Cellar's compaction threads' nice value (0: equal to the client threads; RocksDB's
    /// background threads keep normal priority, its default).
    #[arg(long, default_value_t = 10)]
    pub compaction_nice: i32,

    /// Caps each engine's memory (its process plus the page cache of its files) at this
    /// many bytes from the first read workload on, with a memory cgroup per engine child
    /// (Linux; root or a delegated cgroup). Without it both stores share the machine's page
    /// cache and compete for it; 0: no cap.
    #[arg(long, default_value = "0", value_parser = parse_size)]
    pub read_memory: u64,

    /// Durability of each put: none (no WAL), sync (WAL handed to the OS), fsync (WAL
    /// fdatasync'ed per write).
    #[arg(long, value_enum, default_value_t = SyncMode::Sync)]
    pub sync: SyncMode,

    /// Client threads issuing operations concurrently (the ops of a workload are split
    /// evenly among them).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,

    /// Directory for the databases (one subdirectory per engine) [default: a fresh
    /// directory under the system temp dir, removed afterwards].
    #[arg(long)]
    pub db_dir: Option<PathBuf>,

    /// Keep the databases after the run.
    #[arg(long)]
    pub keep_db: bool,

    /// Run each workload on RocksDB first, then Cellar (the default is Cellar first). The
    /// engine that writes last finds more of its files in the page cache when the reads
    /// begin; `scripts/bench-engine.sh` alternates the order between runs.
    #[arg(long)]
    pub rocksdb_first: bool,

    /// Run the workloads on the databases a run with `--keep-db` left in `--db-dir` (same
    /// `--num` and engine settings), without loading or removing them: read workloads again
    /// without the writes before them. Drop the page cache first (`echo 3 >
    /// /proc/sys/vm/drop_caches`) for cold reads as after a full run.
    #[arg(long)]
    pub use_existing_db: bool,

    /// Also write every result and the configuration as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// Seed of every random choice (keys, values, hot range), so runs are repeatable.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,

    /// Internal: run one engine in this process, driven by the parent over stdin/stdout.
    #[arg(long, hide = true)]
    pub child: bool,
}

/// Parses a byte size: a number with an optional K, M or G suffix (powers of 1024, `KiB`,
/// `MB` and lower case accepted alike).
pub fn parse_size(text: &str) -> std::result::Result<u64, String> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, suffix) = t.split_at(digits);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a size (expected e.g. 65536, 64K, 64M, 1G)"))?;
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        other => {
            return Err(format!(
                "'{text}': unknown size suffix '{other}' (use K, M or G)"
            ))
        }
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("'{text}' is too large"))
}

fn parse_size_u32(text: &str) -> std::result::Result<u32, String> {
    let n = parse_size(text)?;
    u32::try_from(n).map_err(|_| format!("'{text}' does not fit in 32 bits"))
}

impl Args {
    /// Checks the flags together, naming the first that is out of range.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(BenchError::new(m));
        if self.benchmarks.is_empty() {
            return bad("--benchmarks is empty".into());
        }
        if self.use_existing_db {
            if self.db_dir.is_none() {
                return bad(
                    "--use-existing-db needs --db-dir (where a --keep-db run left its databases)"
                        .into(),
                );
            }
            if let Some(w) = self.benchmarks.iter().find(|w| w.starts_empty()) {
                return bad(format!(
                    "--use-existing-db with {w}: it starts from an empty store and would erase the existing one"
                ));
            }
        }
        if self.num == 0 {
            return bad("--num must be at least 1".into());
        }
        let digits = decimal_digits(self.num - 1);
        if self.key_size < digits || self.key_size > 1024 {
            return bad(format!(
                "--key-size {} cannot hold {} entries as zero-padded decimal (need {digits}..=1024 bytes)",
                self.key_size, self.num
            ));
        }
        if self.value_size == 0 || self.value_size > 64 << 20 {
            return bad(format!(
                "--value-size {} is outside 1..=64 MiB",
                self.value_size
            ));
        }
        if !(0.0..=1.0).contains(&self.value_compressibility) {
            return bad(format!(
                "--value-compressibility {} is outside 0..=1",
                self.value_compressibility
            ));
        }
        if !(1..=64).contains(&self.compaction_threads) {
            return bad(format!(
                "--compaction-threads {} is outside 1..=64",
                self.compaction_threads
            ));
        }
        if !(0..=19).contains(&self.compaction_nice) {
            return bad(format!(
                "--compaction-nice {} is outside 0..=19",
                self.compaction_nice
            ));
        }
        if !(1..=1024).contains(&self.threads) {
            return bad(format!("--threads {} is outside 1..=1024", self.threads));
        }
        if self.scan_length == 0 {
            return bad("--scan-length must be at least 1".into());
        }
        if !(1024..=16 << 20).contains(&self.block_size) {
            return bad(format!(
                "--block-size {} is outside 1 KiB..16 MiB",
                self.block_size
            ));
        }
        if self.bloom_bits > 64 {
            return bad(format!(
                "--bloom-bits {} is outside 0..=64",
                self.bloom_bits
            ));
        }
        if self.cache_bytes < 1 << 20 {
            return bad(format!("--cache-bytes {} is below 1 MiB", self.cache_bytes));
        }
        if self.read_memory != 0 && self.read_memory < self.cache_bytes + (64 << 20) {
            return bad(format!(
                "--read-memory {} leaves no room beside the {}-byte block cache (give it at least 64 MiB more)",
                self.read_memory, self.cache_bytes
            ));
        }
        if self.memstore_bytes != 0 && self.memstore_bytes < 1 << 20 {
            return bad(format!(
                "--memstore-bytes {} is below 1 MiB (0 takes Cellar's default)",
                self.memstore_bytes
            ));
        }
        Ok(())
    }

    /// The engines this run covers, in the order they alternate.
    pub fn engines(&self) -> Vec<EngineKind> {
        match self.engine {
            EngineChoice::Cellar => vec![EngineKind::Cellar],
            EngineChoice::Rocksdb => vec![EngineKind::Rocksdb],
            EngineChoice::Both => vec![EngineKind::Cellar, EngineKind::Rocksdb],
        }
    }

    /// Bytes of one entry as the user sees it (key plus value).
    pub fn entry_bytes(&self) -> u64 {
        (self.key_size + self.value_size) as u64
    }

    /// The command line of a child that runs `engine` with these options in `db_dir`. Every
    /// option is spelled out, so the child never depends on defaults matching.
    pub fn child_command_line(&self, engine: EngineKind, db_dir: &std::path::Path) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        let mut flag = |name: &str, value: String| {
            v.push(format!("--{name}"));
            v.push(value);
        };
        flag(
            "benchmarks",
            self.benchmarks
                .iter()
                .map(|w| w.name())
                .collect::<Vec<_>>()
                .join(","),
        );
        flag("engine", engine.name().into());
        flag("num", self.num.to_string());
        flag("key-size", self.key_size.to_string());
        flag("value-size", self.value_size.to_string());
        flag(
            "value-compressibility",
            self.value_compressibility.to_string(),
        );
        flag("reads", self.reads.to_string());
        flag("seeks", self.seeks.to_string());
        flag("scan-length", self.scan_length.to_string());
        flag("block-size", self.block_size.to_string());
        flag("compression", self.compression.name().into());
        flag("bloom-bits", self.bloom_bits.to_string());
        flag("cache-bytes", self.cache_bytes.to_string());
        flag("memstore-bytes", self.memstore_bytes.to_string());
        flag("sync", self.sync.name().into());
        flag("threads", self.threads.to_string());
        flag("db-dir", db_dir.display().to_string());
        flag("seed", self.seed.to_string());
        flag("region-gate", self.region_gate.to_string());
        flag("compaction-style", self.compaction_style.clone());
        flag("compaction-threads", self.compaction_threads.to_string());
        flag("compaction-nice", self.compaction_nice.to_string());
        if self.cache_compressed {
            v.push("--cache-compressed".into());
        }
        if self.use_existing_db {
            v.push("--use-existing-db".into());
        }
        v.push("--child".into());
        v
    }
}

/// How many decimal digits `n` has (at least 1).
pub fn decimal_digits(n: u64) -> usize {
    let mut digits = 1;
    let mut rest = n / 10;
    // At most 20 iterations: u64::MAX has 20 digits.
    while rest > 0 {
        digits += 1;
        rest /= 10;
    }
    digits
}

/// `leveled` or `tiered`.
fn parse_compaction_style(s: &str) -> std::result::Result<String, String> {
    cellar_storage::region::CompactionStyle::parse(s)
        .map(|c| c.name().to_string())
        .ok_or_else(|| format!("{s:?} is not a compaction style (leveled or tiered)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Args {
        Args::try_parse_from(std::iter::once("engine_bench").chain(args.iter().copied()))
            .expect("parses")
    }

    #[test]
    fn defaults_match_the_documented_ones() {
        let a = parse(&[]);
        assert_eq!(a.benchmarks, Workload::ALL[..6].to_vec());
        assert_eq!(a.engine, EngineChoice::Both);
        assert_eq!((a.num, a.key_size, a.value_size), (1_000_000, 16, 1024));
        assert_eq!(a.block_size, 65536);
        assert_eq!(a.cache_bytes, 64 << 20);
        assert_eq!(a.bloom_bits, 10);
        assert_eq!(a.compression, CompressionArg::None);
        assert_eq!(a.sync, SyncMode::Sync);
        assert_eq!(a.threads, 1);
        assert_eq!(a.scan_length, 100);
        a.validate().expect("defaults are valid");
        // The data of readrandom is larger than the cache by default.
        assert!(a.num * a.entry_bytes() > 8 * a.cache_bytes);
    }

    #[test]
    fn flags_parse_with_suffixes_and_lists() {
        let a = parse(&[
            "--benchmarks",
            "readrandom-hot,fillseq",
            "--cache-bytes",
            "1G",
            "--block-size",
            "4K",
            "--compression",
            "zstd",
            "--sync",
            "fsync",
            "--engine",
            "cellar",
        ]);
        assert_eq!(
            a.benchmarks,
            vec![Workload::ReadrandomHot, Workload::Fillseq]
        );
        assert_eq!(a.cache_bytes, 1 << 30);
        assert_eq!(a.block_size, 4096);
        assert_eq!(a.compression, CompressionArg::Zstd);
        assert_eq!(a.sync, SyncMode::Fsync);
        assert_eq!(a.engines(), vec![EngineKind::Cellar]);
    }

    #[test]
    fn bad_flags_are_named() {
        let e = Args::try_parse_from(["b", "--benchmarks", "readseq"]).expect_err("unknown");
        assert!(e.to_string().contains("readseq"), "{e}");
        let e = Args::try_parse_from(["b", "--cache-bytes", "12X"]).expect_err("suffix");
        assert!(e.to_string().contains("suffix"), "{e}");
        let mut a = parse(&["--num", "1000", "--key-size", "3"]);
        assert!(a.validate().is_ok(), "999 fits in 3 digits");
        a.num = 1001;
        let msg = a.validate().expect_err("too short").to_string();
        assert!(msg.contains("--key-size"), "{msg}");
        let a = parse(&["--threads", "0"]);
        assert!(a.validate().expect_err("threads").0.contains("--threads"));
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert!(parse_size("").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("99999999999999G").is_err());
    }

    #[test]
    fn the_child_command_line_round_trips() {
        let a = parse(&[
            "--num",
            "5000",
            "--benchmarks",
            "fillrandom,seekrandom",
            "--compression",
            "lz4",
            "--memstore-bytes",
            "8M",
            "--threads",
            "3",
            "--value-compressibility",
            "0.25",
            "--region-gate",
            "false",
            "--cache-compressed",
            "--compaction-style",
            "tiered",
            "--compaction-threads",
            "3",
            "--compaction-nice",
            "0",
        ]);
        let dir = std::path::Path::new("/tmp/x y");
        let line = a.child_command_line(EngineKind::Rocksdb, dir);
        let c = Args::try_parse_from(std::iter::once("engine_bench".to_string()).chain(line))
            .expect("child parses");
        assert!(c.child);
        assert_eq!(c.engine, EngineChoice::Rocksdb);
        assert_eq!(c.db_dir.as_deref(), Some(dir));
        assert_eq!(c.benchmarks, a.benchmarks);
        assert_eq!((c.num, c.threads, c.memstore_bytes), (5000, 3, 8 << 20));
        assert_eq!(c.compression, CompressionArg::Lz4);
        assert_eq!(c.value_compressibility, 0.25);
        // Every engine option reaches the child.
        assert_eq!(
            crate::engine_bench::engines::EngineConfig::from_args(&c),
            crate::engine_bench::engines::EngineConfig::from_args(&a)
        );
        assert!(!c.region_gate && c.cache_compressed);
        assert_eq!(c.compaction_style, "tiered");
        assert_eq!((c.compaction_threads, c.compaction_nice), (3, 0));
        assert!(!c.use_existing_db);
    }

    /// Reading a kept store again: the children get it, and a fill (which would erase it) or
    /// a missing directory is refused with the reason.
    #[test]
    fn an_existing_store_is_read_never_filled() {
        let a = parse(&[
            "--use-existing-db",
            "--db-dir",
            "/tmp/kept",
            "--benchmarks",
            "readrandom,seekrandom",
        ]);
        a.validate().expect("valid");
        let line =
            a.child_command_line(EngineKind::Cellar, std::path::Path::new("/tmp/kept/cellar"));
        let c = Args::try_parse_from(std::iter::once("engine_bench".to_string()).chain(line))
            .expect("child parses");
        assert!(c.use_existing_db);
        let fill = parse(&[
            "--use-existing-db",
            "--db-dir",
            "/tmp/kept",
            "--benchmarks",
            "fillrandom",
        ]);
        let e = fill.validate().expect_err("a fill erases the store");
        assert!(e.0.contains("fillrandom"), "{}", e.0);
        let nowhere = parse(&["--use-existing-db", "--benchmarks", "readrandom"]);
        let e = nowhere.validate().expect_err("no directory");
        assert!(e.0.contains("--db-dir"), "{}", e.0);
    }

    #[test]
    fn workload_names_round_trip() {
        for w in Workload::ALL {
            assert_eq!(Workload::parse(w.name()), Ok(w));
        }
        assert!(Workload::parse("fillsync").is_err());
        assert_eq!(decimal_digits(0), 1);
        assert_eq!(decimal_digits(999_999), 6);
        assert_eq!(decimal_digits(u64::MAX), 20);
    }
}
