//! `cellar bench bigtable`: the Bigtable paper's §7 suite at several value sizes (seed 002's
//! 10, 100, 1000 and 10000 bytes): sequential write, random write, random read, random read
//! from memory (an IN_MEMORY family small enough for the block cache) and scan, each reported
//! as operations and value megabytes (10^6 bytes) per second.

mod keys;
mod output;
mod store;

use keys::{permutation, random_reads, row_key, Distribution};
use output::TestResult;
use rand::{RngCore, SeedableRng};
use std::path::PathBuf;
use std::time::Instant;
use store::{Store, Target};

/// Block-cache share the random-read-from-memory table is sized to (the default cache is
/// 256 MiB; the table stays well inside it).
const MEMORY_TABLE_BYTES: u64 = 64 * 1024 * 1024;

/// Command-line options of `cellar bench bigtable`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// cellar://HOST:PORT, or embedded:DIR for regions in this process (tables are made
    /// fresh: a previous run's table of the same name is dropped).
    #[arg(long, default_value = "cellar://127.0.0.1:16200")]
    pub db: String,
    /// Value sizes in bytes, comma-separated; every test runs at each.
    #[arg(long, value_delimiter = ',', default_value = "10,100,1000,10000")]
    pub value_sizes: Vec<usize>,
    /// Rows written (and read or scanned) per test and value size.
    #[arg(long, default_value_t = 100_000)]
    pub rows: u64,
    /// Client threads issuing operations.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// How random reads pick rows: uniform (every row once) or zipfian (exponent 0.8).
    #[arg(long, value_enum, default_value = "uniform")]
    pub read_distribution: Distribution,
    /// Rows fetched per scan call (scanner caching).
    #[arg(long, default_value_t = 1000)]
    pub scan_caching: u32,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<(), String> {
    let target = Target::parse(&args.db)?;
    if args.rows == 0 || args.threads == 0 || args.value_sizes.is_empty() {
        return Err("--rows, --threads and --value-sizes must be at least 1".into());
    }
    if let Some(v) = args.value_sizes.iter().find(|v| **v == 0) {
        return Err(format!("--value-sizes: {v} is not a value size"));
    }
    let mut results = Vec::new();
    for &size in &args.value_sizes {
        results.extend(run_size(&target, &args, size)?);
    }
    print!("{}", output::table(&results));
    if let Some(path) = &args.json {
        output::write_json(path, &args.db, &results)?;
    }
    Ok(())
}

/// The five tests at one value size.
fn run_size(target: &Target, args: &Args, size: usize) -> Result<Vec<TestResult>, String> {
    let rows = args.rows;
    let values = ValueSource::new(size);
    let store = target.fresh_table(&format!("bigtable_v{size}"), false)?;
    let mut out = Vec::new();
    let sequential: Vec<u64> = (0..rows).collect();
    out.push(timed(args, size, "sequential-write", &sequential, |i| {
        store.put(&row_key(i), values.value(i))
    })?);
    let shuffled = permutation(rows, 1);
    out.push(timed(args, size, "random-write", &shuffled, |i| {
        store.put(&row_key(i), values.value(i))
    })?);
    store.flush()?;
    let reads = random_reads(rows, rows, args.read_distribution, 2);
    let mut read = timed(args, size, "random-read", &reads, |i| {
        read_one(&store, i, size)
    })?;
    read.distribution = Some(args.read_distribution.name());
    out.push(read);

    let mem_rows = rows.min((MEMORY_TABLE_BYTES / (size as u64 + 64)).max(1));
    let memory = target.fresh_table(&format!("bigtable_mem_v{size}"), true)?;
    for i in 0..mem_rows {
        memory.put(&row_key(i), values.value(i))?;
    }
    memory.flush()?;
    // One untimed pass loads the table's blocks into the cache.
    for i in 0..mem_rows {
        read_one(&memory, i, size)?;
    }
    let reads = random_reads(mem_rows, rows, args.read_distribution, 3);
    let mut read = timed(args, size, "random-read-memory", &reads, |i| {
        read_one(&memory, i, size)
    })?;
    read.distribution = Some(args.read_distribution.name());
    out.push(read);

    let started = Instant::now();
    let (scanned, bytes) = store.scan_all(args.scan_caching)?;
    let seconds = started.elapsed().as_secs_f64();
    if scanned != rows {
        return Err(format!(
            "scan of bigtable_v{size} returned {scanned} rows, {rows} were written"
        ));
    }
    out.push(TestResult::new(
        "scan", size, rows, 1, scanned, bytes, seconds,
    ));
    Ok(out)
}

fn read_one(store: &Store, i: u64, size: usize) -> Result<(), String> {
    let len = store.get(&row_key(i))?;
    if len != size {
        return Err(format!(
            "row {} holds {len} bytes, {size} were written",
            String::from_utf8_lossy(&row_key(i))
        ));
    }
    Ok(())
}

/// Runs `op` on every index of `order`, split in contiguous shares among the threads.
fn timed(
    args: &Args,
    size: usize,
    test: &'static str,
    order: &[u64],
    op: impl Fn(u64) -> Result<(), String> + Sync,
) -> Result<TestResult, String> {
    let threads = args.threads.min(order.len()).max(1);
    let share = order.len().div_ceil(threads);
    let started = Instant::now();
    let outcome: Result<(), String> = std::thread::scope(|s| {
        let workers: Vec<_> = order
            .chunks(share)
            .map(|chunk| s.spawn(|| chunk.iter().try_for_each(|&i| op(i))))
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .unwrap_or_else(|_| Err(format!("a {test} thread panicked")))
        })
    });
    let seconds = started.elapsed().as_secs_f64();
    outcome.map_err(|e| format!("{test} ({size}-byte values): {e}"))?;
    let ops = order.len() as u64;
    Ok(TestResult::new(
        test,
        size,
        args.rows,
        threads,
        ops,
        ops * size as u64,
        seconds,
    ))
}

/// Incompressible values: windows of one random buffer, a different start per row.
struct ValueSource {
    buf: Vec<u8>,
    size: usize,
}

impl ValueSource {
    fn new(size: usize) -> ValueSource {
        let mut buf = vec![0u8; size * 2 + 4096];
        rand::rngs::StdRng::seed_from_u64(size as u64).fill_bytes(&mut buf);
        ValueSource { buf, size }
    }

    fn value(&self, i: u64) -> &[u8] {
        let start = (i as usize).wrapping_mul(7919) % (self.buf.len() - self.size);
        &self.buf[start..start + self.size]
    }
}
