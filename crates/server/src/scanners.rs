//! Open scanners under leases.
//!
//! SCAN_OPEN creates a scanner on one region and returns its first rows; SCAN_NEXT returns
//! more; SCAN_CLOSE, the end of the region's rows, an expired lease or the end of the
//! connection that opened it remove it. Each call returns up to `rows` results, stopping
//! early once `max_result_bytes` of cells are gathered (at least one result always goes).
//! A row wider than the scan's `batch` comes as several results, all but the last `partial`.
//! The scan's `limit` and the filter count rows after filtering, as the client sees them.
//! A scanner may also hand out rows its opener computed whole ([`ScannerRegistry::open_rows`],
//! the HBase front end's `hbase:meta`), `rows` whole rows per call, under the same leases.
//!
//! `more_in_region` is exact: the scanner reads one row ahead, so a client never needs an
//! extra call to learn a region is done.
//!
//! Each scanner keeps HBase's call sequence: a call may carry the number it expects to be
//! (`next_call_seq`, 0 for the first call after the open); a number that is not the
//! scanner's next one is refused with [`ServerError::OutOfOrderScannerNext`] and changes
//! nothing, so a retried call never gets the rows after the ones whose answer was lost.
//! Calls without a number (the native protocol's) are not counted.
//!
//! Scanner ids are a counter run through a per-server keyed hash: unique while the server
//! runs and not guessable from another scanner's id.

use crate::error::ServerError;
use crate::router::HostedRegion;
use cellar_model::filter::FilterEval;
use cellar_model::{Cell, Scan};
use cellar_proto::cellblock;
use cellar_storage::region::RegionScanner;
use cellar_storage::storefile::block_bytes_scanned;
use parking_lot::Mutex;
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One result of a scan call: a row's cells (or a part of a wide row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanResult {
    pub cells: Vec<Cell>,
    /// More cells of the same row follow in the next result.
    pub partial: bool,
    /// Bytes of store file blocks read to produce this result (HBase's per-result
    /// `block_bytes_scanned`): the row's reading, given to its first part; rows the filter
    /// dropped on the way count toward the next row given.
    pub block_bytes: u64,
}

/// The answer to SCAN_OPEN / SCAN_NEXT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanBatch {
    pub scanner_id: u64,
    pub results: Vec<ScanResult>,
    /// False: the region has no more rows for this scan and the scanner is closed.
    pub more_in_region: bool,
    /// How the scanner's results travel (chosen when it opened).
    pub format: ResultFormat,
    /// What this call read (HBase's server-side scan metrics).
    pub counts: ScanCounts,
    /// On a region's open: the highest sequence id the scan sees, for a client to send back
    /// when it reopens the scan in this region (HBase's `mvcc_read_point`).
    pub read_point: Option<u64>,
}

/// The rows one scan call read: HBase's server-side scan metrics `ROWS_SCANNED` (every row
/// read, including those that gave nothing: all deleted, or outside the time range) and
/// `ROWS_FILTERED` (those of them the client does not get: nothing left, or the filter's
/// no). A row read ahead to tell whether the region has more counts in the call reading it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanCounts {
    pub rows_scanned: u64,
    pub rows_filtered: u64,
}

/// How a scanner's results are encoded on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ResultFormat {
    /// Results over a cell block, zstd-compressed when asked (and worth it).
    #[default]
    CellBlock,
    CellBlockZstd,
    /// A prepared scan's compact encoding over its columns.
    Prepared {
        columns: Arc<cellar_proto::prepared::Columns>,
        compress: bool,
    },
}

/// A scanner's position and state.
struct OpenScanner {
    hosted: Arc<HostedRegion>,
    /// The region incarnation the scanner reads; another one means it was closed or split.
    epoch: u64,
    rows: RegionScanner,
    filter: Option<FilterEval>,
    batch: usize,
    /// Rows still allowed by the scan's limit (`u64::MAX`: no limit).
    rows_left: u64,
    /// The rest of a row split by `batch`.
    pending: VecDeque<Cell>,
    /// The next row, read ahead, and the block bytes reading it took.
    peeked: Option<(Vec<Cell>, u64)>,
    /// Block bytes read and not yet given to a result (the open's first seek): the next row
    /// read gets them.
    unattributed: u64,
    exhausted: bool,
    /// Rows read from the region that the client gets (the others were filtered).
    passed: u64,
}

struct Slot {
    conn_id: u64,
    format: ResultFormat,
    /// The `next_call_seq` the scanner's next numbered call must carry.
    next_call_seq: AtomicU64,
    touched: Mutex<Instant>,
    scanner: Mutex<Source>,
}

/// What a scanner reads from.
// One per open scanner, inside its `Slot`: the size difference costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
enum Source {
    Region(OpenScanner),
    /// Rows computed whole when the scanner opened (the HBase front end's `hbase:meta`,
    /// which it builds from the catalog), handed out in order.
    Rows(VecDeque<Vec<Cell>>),
}

/// Every open scanner of the server.
pub struct ScannerRegistry {
    open: Mutex<HashMap<u64, Arc<Slot>>>,
    lease: Duration,
    counter: AtomicU64,
    keys: RandomState,
}

impl ScannerRegistry {
    pub fn new(lease: Duration) -> ScannerRegistry {
        ScannerRegistry {
            open: Mutex::new(HashMap::new()),
            lease,
            counter: AtomicU64::new(1),
            keys: RandomState::new(),
        }
    }

    pub fn lease(&self) -> Duration {
        self.lease
    }

    pub fn open_count(&self) -> usize {
        self.open.lock().len()
    }

    /// Keeps an open scanner of `conn_id` under `id` for its next calls (sequence 0, its lease
    /// starting now).
    fn keep(&self, id: u64, conn_id: u64, format: ResultFormat, source: Source) {
        self.open.lock().insert(
            id,
            Arc::new(Slot {
                conn_id,
                format,
                next_call_seq: AtomicU64::new(0),
                touched: Mutex::new(Instant::now()),
                scanner: Mutex::new(source),
            }),
        );
    }

    fn new_id(&self) -> u64 {
        loop {
            let n = self.counter.fetch_add(1, Ordering::Relaxed);
            let id = self.keys.hash_one(n);
            if id != 0 && !self.open.lock().contains_key(&id) {
                return id;
            }
        }
    }

    /// Drops scanners untouched for longer than the lease (not those inside a call).
    pub fn reap_expired(&self) {
        let now = Instant::now();
        self.open.lock().retain(|id, slot| {
            let idle = now.saturating_duration_since(*slot.touched.lock());
            let keep = idle <= self.lease || slot.scanner.is_locked();
            if !keep {
                tracing::debug!(scanner = id, "scanner lease expired");
            }
            keep
        });
    }

    /// Drops the scanners a connection opened.
    pub fn connection_closed(&self, conn_id: u64) {
        self.open.lock().retain(|_, slot| slot.conn_id != conn_id);
    }

    pub fn clear(&self) {
        self.open.lock().clear();
    }

    fn get(&self, id: u64) -> Result<Arc<Slot>, ServerError> {
        self.open
            .lock()
            .get(&id)
            .cloned()
            .ok_or(ServerError::UnknownScanner(id))
    }

    /// The connection that opened scanner `id`, if it is open.
    pub fn owner(&self, id: u64) -> Option<u64> {
        self.open.lock().get(&id).map(|s| s.conn_id)
    }

    fn remove(&self, id: u64) {
        self.open.lock().remove(&id);
    }
}

impl Slot {
    /// Takes call number `got` if it is the scanner's next one (HBase's `nextCallSeq`).
    fn take_call_seq(&self, scanner: u64, got: Option<u64>) -> Result<(), ServerError> {
        let Some(got) = got else { return Ok(()) };
        self.next_call_seq
            .compare_exchange(
                got,
                got.wrapping_add(1),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .map(|_| ())
            .map_err(|expected| ServerError::OutOfOrderScannerNext {
                scanner,
                expected,
                got,
            })
    }
}

impl OpenScanner {
    /// The next row the client gets (filtered, within the limit) and the block bytes
    /// reading it took, or `None` at the end.
    fn next_row(&mut self) -> Result<Option<(Vec<Cell>, u64)>, ServerError> {
        if let Some(row) = self.peeked.take() {
            return Ok(Some(row));
        }
        let scan_started = block_bytes_scanned();
        while !self.exhausted && self.rows_left > 0 {
            if self
                .filter
                .as_ref()
                .is_some_and(FilterEval::all_remaining_filtered)
            {
                break;
            }
            let Some(row) = self.rows.next() else { break };
            let row = row?;
            let row = match &mut self.filter {
                Some(f) => match f.filter_row(row) {
                    Some(r) if !r.is_empty() => r,
                    _ => continue,
                },
                None => row,
            };
            self.rows_left -= 1;
            self.passed += 1;
            let scanned = block_bytes_scanned().wrapping_sub(scan_started);
            return Ok(Some((
                row,
                scanned + std::mem::take(&mut self.unattributed),
            )));
        }
        self.exhausted = true;
        Ok(None)
    }

    /// Up to `max_results` results, stopping once `max_bytes` are gathered; whether the
    /// region has more; and the rows read meanwhile.
    fn fill(
        &mut self,
        max_results: usize,
        max_bytes: u64,
    ) -> Result<(Vec<ScanResult>, bool, ScanCounts), ServerError> {
        let (read_before, passed_before) = (self.rows.rows_read(), self.passed);
        let mut out = Vec::new();
        let mut bytes = 0u64;
        let mut block_bytes = 0u64;
        while out.len() < max_results && bytes < max_bytes {
            if self.pending.is_empty() {
                match self.next_row()? {
                    Some((row, scanned)) => {
                        self.pending.extend(row);
                        block_bytes = scanned;
                    }
                    None => break,
                }
            }
            let take = if self.batch == 0 {
                self.pending.len()
            } else {
                self.batch.min(self.pending.len())
            };
            let cells: Vec<Cell> = self.pending.drain(..take).collect();
            bytes += cells
                .iter()
                .map(|c| cellblock::encoded_len(&c.row, &c.family, &c.qualifier, &c.value) as u64)
                .sum::<u64>();
            out.push(ScanResult {
                cells,
                partial: !self.pending.is_empty(),
                block_bytes: std::mem::take(&mut block_bytes),
            });
        }
        let more = !self.pending.is_empty() || {
            self.peeked = self.next_row()?;
            self.peeked.is_some()
        };
        let rows_scanned = self.rows.rows_read() - read_before;
        let counts = ScanCounts {
            rows_scanned,
            rows_filtered: rows_scanned.saturating_sub(self.passed - passed_before),
        };
        Ok((out, more, counts))
    }
}

/// The counts of a call handing out whole rows computed before: each one scanned, none
/// filtered (the rows were picked when computed).
fn whole_rows(results: &[ScanResult]) -> ScanCounts {
    ScanCounts {
        rows_scanned: results.len() as u64,
        rows_filtered: 0,
    }
}

/// Up to `n` whole rows from the front of `rows`.
fn take_rows(rows: &mut VecDeque<Vec<Cell>>, n: u32) -> Vec<ScanResult> {
    let n = rows.len().min(usize::try_from(n).unwrap_or(usize::MAX));
    rows.drain(..n)
        .map(|cells| ScanResult {
            cells,
            partial: false,
            block_bytes: 0,
        })
        .collect()
}

impl ScannerRegistry {
    /// Opens a scanner on `hosted` for connection `conn_id` and returns its first `rows`
    /// results, at most `max_bytes` of cells (at least one result).
    pub fn open_region(
        &self,
        conn_id: u64,
        hosted: Arc<HostedRegion>,
        scan: &Scan,
        rows: u32,
        max_bytes: u64,
        format: ResultFormat,
    ) -> Result<ScanBatch, ServerError> {
        let mut storage_scan = scan.clone();
        // What the first batch reads at least, for the engine's first seek to ask the disk
        // for ahead of time (bounded there by the stop row and 1 MiB per source).
        storage_scan.caching = match scan.limit {
            0 => rows,
            l => rows.min(u32::try_from(l).unwrap_or(u32::MAX)),
        };
        // The limit and the filter work on what the client receives; the engine gets neither.
        // A filter sees every version the family keeps; the scan's version count applies to
        // what it lets through (`FilterEval`, HBase 2's order).
        storage_scan.limit = 0;
        storage_scan.filter = None;
        if scan.filter.is_some() {
            storage_scan.max_versions = u32::MAX;
        }
        let opening = block_bytes_scanned();
        let (iter, epoch) = hosted.with(|r| Ok((r.scan(&storage_scan)?, hosted.epoch())))?;
        let mut scanner = OpenScanner {
            hosted,
            epoch,
            rows: iter,
            filter: scan
                .filter
                .as_ref()
                .map(|f| FilterEval::new(f).versions(scan.max_versions)),
            batch: scan.batch as usize,
            rows_left: if scan.limit == 0 {
                u64::MAX
            } else {
                scan.limit
            },
            pending: VecDeque::new(),
            peeked: None,
            unattributed: block_bytes_scanned().wrapping_sub(opening),
            exhausted: false,
            passed: 0,
        };
        let read_point = scanner.rows.read_point();
        let (results, more, counts) = scanner.fill(rows as usize, max_bytes)?;
        let scanner_id = self.new_id();
        if more {
            self.keep(scanner_id, conn_id, format.clone(), Source::Region(scanner));
        }
        Ok(ScanBatch {
            scanner_id,
            results,
            more_in_region: more,
            format,
            counts,
            read_point: Some(read_point),
        })
    }

    /// The next `rows` results of an open scanner (at most `max_bytes` of cells); `rows == 0`
    /// only renews its lease. With `call_seq`, any other number than the scanner's next one
    /// is refused before anything is read, and the scanner stays as it was.
    pub fn next(
        &self,
        scanner_id: u64,
        rows: u32,
        call_seq: Option<u64>,
        max_bytes: u64,
    ) -> Result<ScanBatch, ServerError> {
        let slot = self.get(scanner_id)?;
        *slot.touched.lock() = Instant::now();
        let mut source = slot.scanner.lock();
        slot.take_call_seq(scanner_id, call_seq)?;
        if rows == 0 {
            return Ok(ScanBatch {
                scanner_id,
                results: Vec::new(),
                more_in_region: true,
                format: slot.format.clone(),
                counts: ScanCounts::default(),
                read_point: None,
            });
        }
        let scanner = match &mut *source {
            Source::Region(s) => s,
            Source::Rows(rows_left) => {
                let results = take_rows(rows_left, rows);
                let more = !rows_left.is_empty();
                drop(source);
                if !more {
                    self.remove(scanner_id);
                }
                return Ok(ScanBatch {
                    scanner_id,
                    counts: whole_rows(&results),
                    results,
                    more_in_region: more,
                    format: slot.format.clone(),
                    read_point: None,
                });
            }
        };
        let hosted = Arc::clone(&scanner.hosted);
        if hosted.epoch() != scanner.epoch || !hosted.is_open() {
            drop(source);
            self.remove(scanner_id);
            return Err(hosted.not_serving(
                "it was closed or split while scanned; reopen the scan from the last row received",
            ));
        }
        let filled = scanner.fill(rows as usize, max_bytes);
        *slot.touched.lock() = Instant::now();
        drop(source);
        match filled {
            Ok((results, more, counts)) => {
                if !more {
                    self.remove(scanner_id);
                }
                Ok(ScanBatch {
                    scanner_id,
                    results,
                    more_in_region: more,
                    format: slot.format.clone(),
                    counts,
                    read_point: None,
                })
            }
            Err(e) => {
                self.remove(scanner_id);
                Err(e)
            }
        }
    }

    /// A scanner over `rows`, computed whole by the caller, for connection `conn_id`: the
    /// first `first` of them answered now, the rest kept under a lease for the next calls
    /// (no scanner is kept when none are left).
    pub fn open_rows(
        &self,
        conn_id: u64,
        rows: Vec<Vec<Cell>>,
        first: u32,
        format: ResultFormat,
    ) -> ScanBatch {
        let mut rows = VecDeque::from(rows);
        let results = take_rows(&mut rows, first);
        let scanner_id = self.new_id();
        let more = !rows.is_empty();
        if more {
            self.keep(scanner_id, conn_id, format.clone(), Source::Rows(rows));
        }
        ScanBatch {
            scanner_id,
            counts: whole_rows(&results),
            results,
            more_in_region: more,
            format,
            read_point: None,
        }
    }

    /// Closes a scanner; closing one that is already gone is not an error.
    pub fn close(&self, scanner_id: u64) {
        self.remove(scanner_id);
    }

    /// Counts call number `call_seq` of an open scanner that is not a next (a close, or the
    /// open itself): refused, and the scanner left as it was, unless it is the scanner's next
    /// number. A scanner that is gone has nothing to check.
    pub fn take_call_seq(&self, scanner_id: u64, call_seq: u64) -> Result<(), ServerError> {
        match self.get(scanner_id) {
            Ok(slot) => {
                let _in_call = slot.scanner.lock();
                slot.take_call_seq(scanner_id, Some(call_seq))
            }
            Err(_) => Ok(()),
        }
    }
}
