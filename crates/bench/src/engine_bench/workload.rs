//! The workloads: timed loops of puts, gets or seek+scans over an [`Engine`], with the
//! process counters read around them.
//!
//! What is timed: only the operations themselves, one latency sample per operation. What is
//! counted for write amplification: every byte this process wrote from the first operation
//! until the engine has flushed its memtable and finished its background work.

use crate::engine_bench::args::{Args, Workload};
use crate::engine_bench::engines::{Engine, Session};
use crate::engine_bench::error::{BenchError, Context, Result};
use crate::engine_bench::keys::{self, KeyFormat, ValuePool};
use crate::engine_bench::report::WorkloadResult;
use crate::engine_bench::sys::{self, ProcIo};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::Rng;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Latencies are recorded in nanoseconds up to a minute, to three significant digits.
const MAX_LATENCY_NS: u64 = 60_000_000_000;
/// How often a client thread publishes its progress, in operations.
const PROGRESS_EVERY: u64 = 256;
/// How often progress is printed.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(2);

/// What a workload needs besides the engine: the flags and the key and value makers.
pub struct Bench {
    pub args: Args,
    pub keys: KeyFormat,
    pub values: ValuePool,
    /// The label of progress lines (the engine's name).
    pub label: String,
}

impl Bench {
    pub fn new(args: Args, label: impl Into<String>) -> Result<Bench> {
        let keys = KeyFormat::new(args.key_size, args.num)?;
        let values = ValuePool::new(args.value_size, args.value_compressibility, args.seed);
        Ok(Bench {
            args,
            keys,
            values,
            label: label.into(),
        })
    }
}

/// Per-thread state handed to each operation.
pub struct ThreadCtx {
    pub rng: StdRng,
    pub key: Vec<u8>,
}

/// What one operation did.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpOut {
    /// Key plus value bytes written or returned.
    pub bytes: u64,
    /// Keys found (gets) or entries returned (scans).
    pub found: u64,
}

/// The outcome of a timed loop.
pub struct Timed {
    pub ops: u64,
    pub elapsed: Duration,
    pub latencies_ns: Histogram<u64>,
    pub bytes: u64,
    pub found: u64,
}

/// Progress shared by the client threads of one loop; printed to stderr on long phases.
struct Progress<'a> {
    label: &'a str,
    phase: &'a str,
    total: u64,
    done: AtomicU64,
    start: Instant,
}

impl Progress<'_> {
    /// Prints the share done and the throughput since the previous line (`last`: operations
    /// done and time then), and returns the new snapshot.
    fn print(&self, last: (u64, Instant)) -> (u64, Instant) {
        let now = Instant::now();
        let done = self.done.load(Ordering::Relaxed);
        let secs = now.duration_since(last.1).as_secs_f64().max(1e-9);
        eprintln!(
            "[{}] {}: {:5.1}% done, {:.0} ops/s now, {:.0} s elapsed",
            self.label,
            self.phase,
            100.0 * done as f64 / self.total.max(1) as f64,
            done.saturating_sub(last.0) as f64 / secs,
            now.duration_since(self.start).as_secs_f64(),
        );
        (done, now)
    }
}

/// Runs `op` for every index of `indices`, split into contiguous shares over `threads`
/// client threads, each with its own session, and times every call.
pub fn timed_loop<F>(
    engine: &dyn Engine,
    bench: &Bench,
    phase: &str,
    indices: Range<u64>,
    salt: u64,
    op: F,
) -> Result<Timed>
where
    F: Fn(&mut dyn Session, &mut ThreadCtx, u64) -> Result<OpOut> + Sync,
{
    let threads = bench.args.threads.max(1) as u64;
    let total = indices.end.saturating_sub(indices.start);
    let progress = Progress {
        label: &bench.label,
        phase,
        total,
        done: AtomicU64::new(0),
        start: Instant::now(),
    };
    let start = Instant::now();
    let per_thread: Vec<Result<(Histogram<u64>, OpOut)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let lo = indices.start + total * t / threads;
                let hi = indices.start + total * (t + 1) / threads;
                let (op, progress) = (&op, &progress);
                s.spawn(move || {
                    let mut session = engine.session()?;
                    let mut ctx = ThreadCtx {
                        rng: keys::thread_rng(bench.args.seed, salt, t as usize),
                        key: bench.keys.buffer(),
                    };
                    let mut hist = Histogram::<u64>::new_with_bounds(1, MAX_LATENCY_NS, 3)
                        .context("creating a latency histogram")?;
                    let mut sum = OpOut::default();
                    let mut last_print = (0, Instant::now());
                    for i in lo..hi {
                        let t0 = Instant::now();
                        let out = op(session.as_mut(), &mut ctx, i)?;
                        hist.saturating_record(t0.elapsed().as_nanos().max(1) as u64);
                        sum.bytes += out.bytes;
                        sum.found += out.found;
                        if (i - lo + 1).is_multiple_of(PROGRESS_EVERY) {
                            progress.done.fetch_add(PROGRESS_EVERY, Ordering::Relaxed);
                            // One thread prints, so lines do not interleave.
                            if t == 0 && last_print.1.elapsed() >= PROGRESS_INTERVAL {
                                last_print = progress.print(last_print);
                            }
                        }
                    }
                    Ok((hist, sum))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError::new("a client thread panicked")))
            })
            .collect()
    });
    let elapsed = start.elapsed();
    let mut latencies_ns = Histogram::<u64>::new_with_bounds(1, MAX_LATENCY_NS, 3)
        .context("creating a latency histogram")?;
    let (mut bytes, mut found) = (0, 0);
    for r in per_thread {
        let (h, sum) = r.map_err(|e| e.context(phase))?;
        latencies_ns.add(&h).context("merging latency histograms")?;
        bytes += sum.bytes;
        found += sum.found;
    }
    Ok(Timed {
        ops: total,
        elapsed,
        latencies_ns,
        bytes,
        found,
    })
}

/// A put of entry `n` with a fresh value.
fn put(bench: &Bench, s: &mut dyn Session, ctx: &mut ThreadCtx, n: u64) -> Result<OpOut> {
    bench.keys.write(n, &mut ctx.key);
    let value = bench.values.value(&mut ctx.rng);
    s.put(&ctx.key, value)?;
    Ok(OpOut {
        bytes: (ctx.key.len() + value.len()) as u64,
        found: 0,
    })
}

/// A get of entry `n`.
fn get(s: &mut dyn Session, ctx: &mut ThreadCtx, keys: &KeyFormat, n: u64) -> Result<OpOut> {
    keys.write(n, &mut ctx.key);
    Ok(match s.get(&ctx.key)? {
        Some(len) => OpOut {
            bytes: (ctx.key.len() + len) as u64,
            found: 1,
        },
        None => OpOut::default(),
    })
}

/// A get of a key that is absent: entry `n`'s key with `.` appended, between entries `n` and
/// `n + 1` in key order.
fn get_missing(
    s: &mut dyn Session,
    ctx: &mut ThreadCtx,
    keys: &KeyFormat,
    n: u64,
) -> Result<OpOut> {
    ctx.key.resize(keys.width(), b'0');
    keys.write(n, &mut ctx.key);
    ctx.key.push(b'.');
    let found = s.get(&ctx.key)?;
    ctx.key.truncate(keys.width());
    Ok(match found {
        Some(len) => OpOut {
            bytes: (ctx.key.len() + 1 + len) as u64,
            found: 1,
        },
        None => OpOut::default(),
    })
}

/// Writes every entry `0..num` once in shuffled order: the load of the read workloads, and
/// the operation of fillrandom.
pub fn fill_random(engine: &dyn Engine, bench: &Bench, phase: &str) -> Result<Timed> {
    let order = keys::shuffled(bench.args.num, bench.args.seed);
    timed_loop(engine, bench, phase, 0..bench.args.num, 1, |s, ctx, i| {
        let n = order.get(i as usize).copied().unwrap_or(i);
        put(bench, s, ctx, n)
    })
}

/// Reads every entry of `range` once in key order, so its blocks are in the block cache.
pub fn warm(engine: &dyn Engine, bench: &Bench, range: Range<u64>) -> Result<Timed> {
    timed_loop(
        engine,
        bench,
        "warming the hot range",
        range,
        7,
        |s, ctx, n| get(s, ctx, &bench.keys, n),
    )
}

/// Runs one workload's timed operations (the store is assumed to be in the state the
/// workload needs: empty for fills, loaded otherwise).
fn run_ops(engine: &dyn Engine, bench: &Bench, w: Workload) -> Result<Timed> {
    let a = &bench.args;
    let phase = w.name();
    match w {
        Workload::Fillseq => timed_loop(engine, bench, phase, 0..a.num, 0, |s, ctx, n| {
            put(bench, s, ctx, n)
        }),
        Workload::Fillrandom => fill_random(engine, bench, phase),
        Workload::Overwrite => timed_loop(engine, bench, phase, 0..a.num, 2, |s, ctx, _| {
            let n = ctx.rng.gen_range(0..a.num);
            put(bench, s, ctx, n)
        }),
        Workload::Readrandom => timed_loop(engine, bench, phase, 0..a.reads, 3, |s, ctx, _| {
            let n = ctx.rng.gen_range(0..a.num);
            get(s, ctx, &bench.keys, n)
        }),
        Workload::ReadrandomHot => {
            let hot = keys::hot_range(a.num, a.entry_bytes(), a.cache_bytes, a.seed);
            timed_loop(engine, bench, phase, 0..a.reads, 4, |s, ctx, _| {
                let n = ctx.rng.gen_range(hot.clone());
                get(s, ctx, &bench.keys, n)
            })
        }
        Workload::Seekrandom => timed_loop(engine, bench, phase, 0..a.seeks, 5, |s, ctx, _| {
            let n = ctx.rng.gen_range(0..a.num);
            bench.keys.write(n, &mut ctx.key);
            let (found, bytes) = s.scan(&ctx.key, a.scan_length)?;
            Ok(OpOut { bytes, found })
        }),
        Workload::Readmissing => timed_loop(engine, bench, phase, 0..a.reads, 8, |s, ctx, _| {
            let n = ctx.rng.gen_range(0..a.num);
            get_missing(s, ctx, &bench.keys, n)
        }),
        Workload::Readmixed => timed_loop(engine, bench, phase, 0..a.reads, 9, |s, ctx, _| {
            let n = ctx.rng.gen_range(0..a.num);
            if ctx.rng.gen_bool(0.5) {
                get_missing(s, ctx, &bench.keys, n)
            } else {
                get(s, ctx, &bench.keys, n)
            }
        }),
    }
}

/// Runs workload `w` and measures it: the timed operations, then (for writes) a memtable flush
/// and the wait for background work, with IO, RSS and cache counters read around both.
pub fn measure(
    engine: &dyn Engine,
    bench: &Bench,
    w: Workload,
    db_dir: &std::path::Path,
) -> Result<WorkloadResult> {
    if w == Workload::ReadrandomHot {
        let a = &bench.args;
        warm(
            engine,
            bench,
            keys::hot_range(a.num, a.entry_bytes(), a.cache_bytes, a.seed),
        )?;
    }
    let peak_rss = sys::PeakAnonRss::start();
    let cache_before = engine.cache_counters();
    let io_before = ProcIo::read()?;
    let read_before = engine.file_bytes_read();
    let cpu_before = sys::process_cpu()?;
    let timed = run_ops(engine, bench, w)?;
    let cpu_timed = sys::process_cpu()?.saturating_sub(cpu_before);
    let io_timed = ProcIo::read()?;
    let read_after = engine.file_bytes_read();
    let cache_after = engine.cache_counters();
    let drain_start = Instant::now();
    if w.writes() {
        eprintln!(
            "[{}] {w}: flushing and waiting for background work",
            bench.label
        );
        engine.flush()?;
        engine.wait_for_background()?;
    }
    let drain_seconds = drain_start.elapsed().as_secs_f64();
    let io = ProcIo::read()?.since(&io_before);
    let peak_rss = peak_rss.finish()?;
    // An engine that reads its files through mappings counts the bytes itself; `rchar` sees
    // only read-family system calls.
    let file_bytes_read = match (read_before, read_after) {
        (Some(b), Some(a)) => a.saturating_sub(b),
        _ => io_timed.since(&io_before).rchar,
    };
    let secs = timed.elapsed.as_secs_f64().max(1e-9);
    let user_bytes_written = if w.writes() { timed.bytes } else { 0 };
    let q = |p: f64| timed.latencies_ns.value_at_quantile(p) as f64 / 1000.0;
    let cache_hit_rate = match (cache_before, cache_after) {
        (Some(b), Some(a)) => {
            let hits = a.hits.saturating_sub(b.hits);
            let lookups = hits + a.misses.saturating_sub(b.misses);
            (lookups > 0).then(|| hits as f64 / lookups as f64)
        }
        _ => None,
    };
    Ok(WorkloadResult {
        engine: engine.kind(),
        workload: w,
        ops: timed.ops,
        seconds: secs,
        ops_per_sec: timed.ops as f64 / secs,
        mb_per_sec: timed.bytes as f64 / secs / 1e6,
        p50_us: q(0.50),
        p99_us: q(0.99),
        p999_us: q(0.999),
        max_us: timed.latencies_ns.max() as f64 / 1000.0,
        user_bytes_written,
        file_bytes_written: io.wchar,
        write_amp: (user_bytes_written > 0).then(|| io.wchar as f64 / user_bytes_written as f64),
        device_bytes_written: io.write_bytes,
        file_bytes_read_per_op: file_bytes_read as f64 / timed.ops.max(1) as f64,
        device_bytes_read_per_op: io_timed.since(&io_before).read_bytes as f64
            / timed.ops.max(1) as f64,
        cpu_us_per_op: cpu_timed.as_secs_f64() * 1e6 / timed.ops.max(1) as f64,
        drain_seconds,
        found: timed.found,
        cache_hit_rate,
        peak_rss_bytes: peak_rss,
        peak_rss_is_per_workload: true,
        db_bytes: sys::dir_size(db_dir)?,
        engine_stats: engine.stats(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine_bench::engines::memory::MemoryEngine;
    use clap::Parser;

    fn bench(extra: &[&str]) -> Bench {
        let args = Args::try_parse_from(
            [
                "engine_bench",
                "--num",
                "2000",
                "--value-size",
                "100",
                "--threads",
                "3",
            ]
            .into_iter()
            .chain(extra.iter().copied()),
        )
        .expect("flags");
        Bench::new(args, "test").expect("bench")
    }

    #[test]
    fn fills_write_every_key_and_reads_find_them() {
        let b = bench(&["--reads", "500", "--seeks", "50", "--scan-length", "10"]);
        let engine = MemoryEngine::default();
        let dir = tempfile::tempdir().expect("tempdir");
        let fill = measure(&engine, &b, Workload::Fillrandom, dir.path()).expect("fill");
        assert_eq!(engine.entries(), 2000);
        assert_eq!(fill.ops, 2000);
        assert_eq!(fill.user_bytes_written, 2000 * 116);
        assert!(fill.write_amp.is_some() && fill.ops_per_sec > 0.0);
        assert!(fill.p50_us > 0.0 && fill.p99_us >= fill.p50_us);
        let read = measure(&engine, &b, Workload::Readrandom, dir.path()).expect("read");
        assert_eq!((read.ops, read.found), (500, 500));
        assert_eq!(read.write_amp, None);
        let hot = measure(&engine, &b, Workload::ReadrandomHot, dir.path()).expect("hot");
        assert_eq!(hot.found, 500);
        let seek = measure(&engine, &b, Workload::Seekrandom, dir.path()).expect("seek");
        assert_eq!(seek.ops, 50);
        // Scans near the end of the key space return fewer than 10 entries.
        assert!(seek.found > 400 && seek.found <= 500, "{}", seek.found);
        let over = measure(&engine, &b, Workload::Overwrite, dir.path()).expect("overwrite");
        assert_eq!((over.ops, engine.entries()), (2000, 2000));
    }

    #[test]
    fn fillseq_writes_keys_in_order() {
        let b = bench(&[]);
        let engine = MemoryEngine::default();
        let dir = tempfile::tempdir().expect("tempdir");
        measure(&engine, &b, Workload::Fillseq, dir.path()).expect("fillseq");
        assert_eq!(engine.entries(), 2000);
        let mut s: &MemoryEngine = &engine;
        assert_eq!(s.get(b"0000000000001999").expect("get"), Some(100));
        assert_eq!(s.get(b"0000000000002000").expect("get"), None);
    }
}
