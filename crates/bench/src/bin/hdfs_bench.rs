//! `hdfs_bench`: WAL and flush throughput of Cellar's storage engine on HDFS by write-buffer
//! size (seed 001: the write pipeline's packet and buffer sizes matter per network).
//!
//! For each write buffer it opens a real [`Wal`] on the HDFS root and has `--wal-threads`
//! writers append records and wait for SYNC_WAL (one hsync per group commit) for
//! `--wal-seconds`, then writes a real store file of `--flush-mib` MiB (what a memstore flush
//! writes) and times it to its final sync. The packet size is the NameNode's
//! (`dfs.client-write-packet-size`, a server default the client takes): `scripts/bench-hdfs.sh
//! --sweep` restarts a MiniDFS per packet size and runs this for each. One JSON object per
//! measurement on stdout.

use cellar_model::key::make_key;
use cellar_model::{CellType, Durability};
use cellar_storage::fs::{FileSystem, HdfsFs};
use cellar_storage::storefile::{StoreFileOptions, StoreFileWriter};
use cellar_storage::wal::{Wal, WalOptions};
use clap::Parser;
use hdrhistogram::Histogram;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser, Debug, Clone)]
#[command(
    name = "hdfs_bench",
    about = "WAL (SYNC_WAL group commit) and flush (store file) throughput on HDFS, per write-buffer size"
)]
struct Args {
    /// NameNode URL, e.g. hdfs://127.0.0.1:9000.
    #[arg(long)]
    hdfs: String,
    /// Write-buffer sizes to measure, in bytes with an optional k/m suffix.
    #[arg(long, value_delimiter = ',', default_value = "64k,1m,8m")]
    write_buffers: Vec<String>,
    /// Concurrent WAL writers.
    #[arg(long, default_value_t = 8)]
    wal_threads: usize,
    /// How long each WAL measurement runs.
    #[arg(long, default_value_t = 5.0)]
    wal_seconds: f64,
    /// Bytes per WAL record (YCSB's row of 10 fields × 100 bytes is about 1 KiB).
    #[arg(long, default_value_t = 1024)]
    record_bytes: usize,
    /// MiB of cells in the store file a flush writes.
    #[arg(long, default_value_t = 128)]
    flush_mib: u64,
    /// Bytes per cell value in the store file.
    #[arg(long, default_value_t = 1024)]
    value_bytes: usize,
    /// Seconds of unmeasured WAL writes (and a 16 MiB store file) first, so a freshly
    /// started NameNode and DataNodes (JVMs) are warmed up.
    #[arg(long, default_value_t = 3.0)]
    warmup_seconds: f64,
    /// A label copied into every result (e.g. the NameNode's packet size).
    #[arg(long, default_value = "")]
    label: String,
    /// Directory on HDFS for the files written (removed afterwards).
    #[arg(long, default_value = "/hdfs-bench")]
    dir: PathBuf,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("hdfs_bench: error: {e}");
        std::process::exit(1);
    }
}

fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim().to_ascii_lowercase();
    let (digits, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1024),
        Some('m') => (&t[..t.len() - 1], 1024 * 1024),
        _ => (t.as_str(), 1),
    };
    digits
        .parse::<usize>()
        .map(|n| n * mult)
        .map_err(|_| format!("bad size '{s}' (expected bytes, or a number with k or m)"))
}

fn run(args: &Args) -> Result<(), String> {
    if args.wal_threads == 0 || args.record_bytes == 0 || args.value_bytes == 0 {
        return Err("--wal-threads, --record-bytes and --value-bytes must be positive".into());
    }
    let buffers = args
        .write_buffers
        .iter()
        .map(|s| parse_size(s))
        .collect::<Result<Vec<_>, _>>()?;
    if args.warmup_seconds > 0.0 {
        let fs: Arc<dyn FileSystem> =
            Arc::new(HdfsFs::connect(&args.hdfs).map_err(|e| e.to_string())?);
        let dir = args.dir.join(format!("warmup-{}", std::process::id()));
        let warmup = Args {
            wal_seconds: args.warmup_seconds,
            flush_mib: 16,
            ..args.clone()
        };
        wal_phase(&fs, &dir.join("wal"), &warmup)?;
        flush_phase(&fs, &dir.join("storefile"), &warmup)?;
        fs.delete_dir_all(&dir).map_err(|e| e.to_string())?;
    }
    for (i, &buffer) in buffers.iter().enumerate() {
        let fs: Arc<dyn FileSystem> = Arc::new(
            HdfsFs::connect(&args.hdfs)
                .map_err(|e| e.to_string())?
                .with_write_buffer(buffer),
        );
        let dir = args.dir.join(format!("run-{}-{i}", std::process::id()));
        let wal = wal_phase(&fs, &dir.join("wal"), args)?;
        let flush = flush_phase(&fs, &dir.join("storefile"), args)?;
        if let Err(e) = fs.delete_dir_all(&dir) {
            eprintln!("hdfs_bench: could not remove {}: {e}", dir.display());
        }
        for (phase, fields) in [("wal", wal), ("flush", flush)] {
            let mut obj = serde_json::json!({
                "label": args.label,
                "write_buffer": buffer,
                "phase": phase,
            });
            if let (Some(o), serde_json::Value::Object(f)) = (obj.as_object_mut(), fields) {
                o.extend(f);
            }
            println!("{obj}");
        }
    }
    Ok(())
}

/// `wal_threads` writers, each appending a record and waiting for SYNC_WAL, for
/// `wal_seconds`.
fn wal_phase(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    args: &Args,
) -> Result<serde_json::Value, String> {
    let (wal, _) =
        Wal::open(Arc::clone(fs), dir, WalOptions::default()).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs_f64(args.wal_seconds);
    let started = Instant::now();
    let workers: Vec<_> = (0..args.wal_threads)
        .map(|t| {
            let wal = Arc::clone(&wal);
            let payload = vec![b'x'; args.record_bytes];
            std::thread::spawn(move || -> Result<(u64, Histogram<u64>), String> {
                let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)
                    .map_err(|e| e.to_string())?;
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let t0 = Instant::now();
                    let ticket = wal
                        .append(t as u64, n + 1, &payload)
                        .map_err(|e| e.to_string())?;
                    wal.sync(ticket, Durability::SyncWal)
                        .map_err(|e| e.to_string())?;
                    hist.saturating_record(t0.elapsed().as_micros().max(1) as u64);
                    n += 1;
                }
                Ok((n, hist))
            })
        })
        .collect();
    let mut total = 0u64;
    let mut hist =
        Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())?;
    for w in workers {
        let (n, h) = w
            .join()
            .map_err(|_| "a WAL writer panicked".to_string())??;
        total += n;
        hist.add(h).map_err(|e| e.to_string())?;
    }
    let secs = started.elapsed().as_secs_f64();
    let stats = wal.stats();
    wal.close().map_err(|e| e.to_string())?;
    Ok(serde_json::json!({
        "records_per_s": total as f64 / secs,
        "mib_per_s": (total * args.record_bytes as u64) as f64 / secs / (1024.0 * 1024.0),
        "records_per_write_round": stats.appends as f64 / stats.flushes.max(1) as f64,
        "p50_us": hist.value_at_quantile(0.5),
        "p99_us": hist.value_at_quantile(0.99),
    }))
}

/// One store file of `flush_mib` MiB of sorted cells, timed from create to its final sync.
fn flush_phase(
    fs: &Arc<dyn FileSystem>,
    path: &Path,
    args: &Args,
) -> Result<serde_json::Value, String> {
    let cells = (args.flush_mib * 1024 * 1024 / args.value_bytes as u64).max(1);
    let value = vec![b'v'; args.value_bytes];
    let started = Instant::now();
    let mut w = StoreFileWriter::create(fs, path, StoreFileOptions::default())
        .map_err(|e| e.to_string())?;
    for i in 0..cells {
        let row = format!("user{i:016}");
        let key = make_key(row.as_bytes(), b"field0", 1, CellType::Put, i + 1);
        w.add(&key, &value).map_err(|e| e.to_string())?;
    }
    w.finish().map_err(|e| e.to_string())?;
    let secs = started.elapsed().as_secs_f64();
    let bytes = fs.open(path).map_err(|e| e.to_string())?.len();
    Ok(serde_json::json!({
        "file_bytes": bytes,
        "seconds": secs,
        "mib_per_s": bytes as f64 / secs / (1024.0 * 1024.0),
    }))
}
