//! `cellar verify-against --hbase ADDR --cellar ADDR --table T`: compares a table on two live
//! clusters, range by range, and names the rows that differ. Both sides are read the same
//! way, over HBase's RPC (`verify_against/rpc.rs`, `cluster.rs`), so the check is the one a
//! client of either would make: every version (or `--versions N`), deletes applied (or
//! `--raw`). The rows of both scans are merged by key and cut into ranges of
//! `--rows-per-range` rows, each with a SHA-256 digest per side (`compare.rs`). While
//! replication still runs, the newest writes may not have arrived yet: a range that differs
//! is read again (`--recheck`, after `--recheck-pause`) and only one that still differs is
//! reported. Exits non-zero when any does (`docs/migration.md`, step 6).

mod cluster;
mod compare;
mod rpc;

use bytes::Bytes;
use cluster::{printable, Cluster, Locator, Row, ScanSpec};
use compare::{compare_streams, RangeReport};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The HBase cluster (the source): a server answering HBase's client, HOST:PORT[,...]
    /// (HBase's `hbase.client.bootstrap.servers`: a master or region server), or its
    /// ZooKeeper as HBase's cluster key HOST:PORT[,HOST:PORT]:/hbase (or zk://HOST:PORT/hbase).
    #[arg(long, value_name = "ADDR")]
    hbase: String,
    /// The Cellar cluster (the target): its HBase port HOST:PORT, or its ZooKeeper (as for
    /// --hbase).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:16020")]
    cellar: String,
    /// The table to compare.
    #[arg(long)]
    table: String,
    /// The table's name on Cellar, when it differs (`import-hbase --table`).
    #[arg(long, value_name = "NAME")]
    cellar_table: Option<String>,
    /// Versions per column to compare: a number, or `all`.
    #[arg(long, default_value = "all")]
    versions: String,
    /// Compare delete markers and deleted cells too (HBase's raw scan). Off by default: a
    /// compaction on either side may already have dropped what a delete covers.
    #[arg(long)]
    raw: bool,
    /// Only these families (comma-separated).
    #[arg(long, value_delimiter = ',')]
    families: Vec<String>,
    /// Only cells with timestamps at or after this (ms since the epoch).
    #[arg(long, value_name = "MS")]
    starttime: Option<u64>,
    /// Only cells with timestamps before this (ms since the epoch).
    #[arg(long, value_name = "MS")]
    endtime: Option<u64>,
    /// First row to compare (inclusive).
    #[arg(long, value_name = "ROW")]
    start_row: Option<String>,
    /// Row to stop at (exclusive).
    #[arg(long, value_name = "ROW")]
    stop_row: Option<String>,
    /// Rows per compared range.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    rows_per_range: u64,
    /// Differing rows named per range.
    #[arg(long, value_name = "N", default_value_t = 10)]
    show: usize,
    /// How many times a differing range is read again before it is reported (replication
    /// may still be bringing its newest writes).
    #[arg(long, value_name = "N", default_value_t = 2)]
    recheck: u32,
    /// Seconds to wait before each re-read.
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    recheck_pause: f64,
    /// Print every range, equal or not.
    #[arg(long)]
    verbose: bool,
    /// The user to say you are (HBase's SIMPLE authentication); default $USER.
    #[arg(long)]
    user: Option<String>,
}

struct Setup {
    source: Locator,
    target: Locator,
    source_table: String,
    target_table: String,
    spec: ScanSpec,
    user: String,
}

pub fn run(args: Args) -> Result<(), String> {
    let versions = match args.versions.as_str() {
        "all" => None,
        n => Some(
            n.parse::<u32>()
                .ok()
                .filter(|&v| v > 0)
                .ok_or_else(|| format!("--versions {n}: a positive number or 'all'"))?,
        ),
    };
    let time_range = match (args.starttime, args.endtime) {
        (None, None) => None,
        (from, to) => {
            let (from, to) = (from.unwrap_or(0), to.unwrap_or(i64::MAX as u64));
            if from >= to {
                return Err(format!("--starttime {from} is not before --endtime {to}"));
            }
            Some((from, to))
        }
    };
    if !args.recheck_pause.is_finite() || args.recheck_pause < 0.0 {
        return Err(format!(
            "--recheck-pause {}: a number of seconds ≥ 0",
            args.recheck_pause
        ));
    }
    let user = args
        .user
        .clone()
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "cellar".to_string());
    let setup = Setup {
        source: Locator::parse(&args.hbase).map_err(|e| format!("--hbase: {e}"))?,
        target: Locator::parse(&args.cellar).map_err(|e| format!("--cellar: {e}"))?,
        source_table: args.table.clone(),
        target_table: args
            .cellar_table
            .clone()
            .unwrap_or_else(|| args.table.clone()),
        spec: ScanSpec {
            versions,
            raw: args.raw,
            families: args
                .families
                .iter()
                .map(|f| Bytes::from(f.clone()))
                .collect(),
            time_range,
        },
        user,
    };
    // Both tables must exist before anything is read: a name typed wrong is not "differs".
    let source_regions = Cluster::new("hbase", setup.source.clone(), &setup.user)
        .regions(&setup.source_table)?
        .len();
    let target_regions = Cluster::new("cellar", setup.target.clone(), &setup.user)
        .regions(&setup.target_table)?
        .len();
    eprintln!(
        "comparing '{}' ({} regions on {}) with '{}' ({} regions on {})",
        setup.source_table,
        source_regions,
        args.hbase,
        setup.target_table,
        target_regions,
        args.cellar
    );

    let started = Instant::now();
    let start = Bytes::from(args.start_row.clone().unwrap_or_default());
    let stop = Bytes::from(args.stop_row.clone().unwrap_or_default());
    let (mut ranges, mut rows, mut cells) = (0u64, 0u64, 0u64);
    let mut differing: Vec<(u64, RangeReport)> = Vec::new();
    let mut last_progress = Instant::now();
    pass(
        &setup,
        start,
        stop,
        args.rows_per_range,
        args.show,
        &mut |r| {
            ranges += 1;
            rows += r.source.0.max(r.target.0);
            cells += r.source.1.max(r.target.1);
            if args.verbose {
                print_range(ranges, &r);
            }
            if !r.equal() {
                differing.push((ranges, r));
            } else if last_progress.elapsed() > Duration::from_secs(5) {
                last_progress = Instant::now();
                eprintln!("  {ranges} ranges, {rows} rows compared...");
            }
        },
    )?;

    // Ranges that differed are read again, whole, until equal or out of rechecks.
    let pause = Duration::from_secs_f64(args.recheck_pause);
    let mut still = Vec::new();
    for (n, mut report) in differing {
        for attempt in 1..=args.recheck {
            eprintln!(
                "  range ['{}', {}) differs ({} rows); reading it again in {:.1} s ({attempt}/{})",
                printable(&report.start),
                end_label(&report.end),
                report.differing_rows,
                pause.as_secs_f64(),
                args.recheck
            );
            std::thread::sleep(pause);
            let mut again = Vec::new();
            pass(
                &setup,
                report.start.clone(),
                report.end.clone(),
                u64::MAX,
                args.show,
                &mut |r| again.push(r),
            )?;
            match again.pop() {
                Some(r) => report = r,
                None => break,
            }
            if report.equal() {
                break;
            }
        }
        if !report.equal() {
            still.push((n, report));
        }
    }

    let secs = started.elapsed().as_secs_f64();
    for (n, r) in &still {
        print_range(*n, r);
    }
    if still.is_empty() {
        println!(
            "verify-against: equal: {rows} rows, {cells} cells in {ranges} ranges, every range's digest the same on both ({secs:.1} s)"
        );
        return Ok(());
    }
    let differing_rows: u64 = still.iter().map(|(_, r)| r.differing_rows).sum();
    let first = still
        .iter()
        .find_map(|(_, r)| r.first.first())
        .map(|(k, _)| format!("; first differing row '{}'", printable(k)))
        .unwrap_or_default();
    println!(
        "verify-against: DIFFERENT: {differing_rows} rows differ in {} of {ranges} ranges ({rows} rows, {cells} cells compared){first} ({secs:.1} s)",
        still.len()
    );
    Err(format!(
        "'{}' and '{}' differ (rows named above)",
        setup.source_table, setup.target_table
    ))
}

/// Reads [start, stop) from both sides at once and compares it.
fn pass(
    setup: &Setup,
    start: Bytes,
    stop: Bytes,
    rows_per_range: u64,
    show: usize,
    each: &mut dyn FnMut(RangeReport),
) -> Result<(), String> {
    let (source_rows, source_scan) = side(
        "hbase",
        setup.source.clone(),
        setup.source_table.clone(),
        &setup.user,
        &setup.spec,
        &start,
        &stop,
    );
    let (target_rows, target_scan) = side(
        "cellar",
        setup.target.clone(),
        setup.target_table.clone(),
        &setup.user,
        &setup.spec,
        &start,
        &stop,
    );
    let compared = compare_streams(
        source_rows.into_iter(),
        target_rows.into_iter(),
        start,
        stop,
        rows_per_range,
        show,
        each,
    );
    // With the receivers gone a scan still running stops at its next row.
    let _ = source_scan.join();
    let _ = target_scan.join();
    compared
}

/// Rows queued ahead of the comparison per side.
const ROWS_AHEAD: usize = 256;

/// One side scanned on its own thread, its rows (or its error) sent in order.
fn side(
    label: &str,
    locator: Locator,
    table: String,
    user: &str,
    spec: &ScanSpec,
    start: &Bytes,
    stop: &Bytes,
) -> (
    mpsc::Receiver<Result<Row, String>>,
    std::thread::JoinHandle<()>,
) {
    let (tx, rx) = mpsc::sync_channel(ROWS_AHEAD);
    let mut cluster = Cluster::new(label, locator, user);
    let (spec, start, stop) = (spec.clone(), start.clone(), stop.clone());
    let handle = std::thread::spawn(move || {
        let scanned = cluster.scan_range(&table, &start, &stop, &spec, &mut |row| {
            tx.send(Ok(row))
                .map_err(|_| "the comparison stopped".to_string())
        });
        if let Err(e) = scanned {
            let _ = tx.send(Err(e));
        }
    });
    (rx, handle)
}

fn end_label(end: &[u8]) -> String {
    if end.is_empty() {
        "end".to_string()
    } else {
        format!("'{}'", printable(end))
    }
}

fn print_range(n: u64, r: &RangeReport) {
    let (s, t) = (&r.source, &r.target);
    if r.equal() {
        println!(
            "range {n} ['{}', {}): equal, {} rows, {} cells, sha256 {}",
            printable(&r.start),
            end_label(&r.end),
            s.0,
            s.1,
            &s.2[..16]
        );
        return;
    }
    println!(
        "range {n} ['{}', {}): DIFFERS in {} rows: hbase {} rows, {} cells, sha256 {}; cellar {} rows, {} cells, sha256 {}",
        printable(&r.start),
        end_label(&r.end),
        r.differing_rows,
        s.0,
        s.1,
        &s.2[..16],
        t.0,
        t.1,
        &t.2[..16]
    );
    for (row, what) in &r.first {
        println!("  row '{}': {what}", printable(row));
    }
    if r.differing_rows > r.first.len() as u64 {
        println!(
            "  ... and {} more rows",
            r.differing_rows - r.first.len() as u64
        );
    }
}
