//! The region scanner: rows in order (or reversed), each row's visible cells from every family
//! asked for, seen at the read point taken when the scan started.
//!
//! Each family has a merged cursor over its memstores and store files. Forward: the next row is
//! the smallest row any cursor is at. Reversed: the next row is the largest row below the
//! current one in any source (found by `seek_for_prev`), read forward like a Get.

use super::matcher::{MatcherScratch, ReadSpec, RowMatcher};
use super::sink::RowCells;
use super::{read_row_cells, RegionInner, RowEnd};
use crate::iter::MergeIter;
use crate::storefile::RowProbe;
use cellar_model::key::{first_on_row, KeyRef, MAX_ROW_LEN};
use cellar_model::{Cell, CellRef, CellSink, Result, Scan};
use std::sync::Arc;

struct FamilyCursor {
    store: usize,
    spec: ReadSpec,
    merge: MergeIter,
}

impl FamilyCursor {
    fn row(&self) -> Option<&[u8]> {
        if !self.merge.valid() {
            return None;
        }
        KeyRef::parse(self.merge.key()).map(|k| k.row())
    }
}

/// Iterates rows: each item is one row's cells (never empty), or an error, after which the
/// scanner ends.
pub struct RegionScanner {
    region: Arc<RegionInner>,
    cursors: Vec<FamilyCursor>,
    /// Forward: exclusive upper bound; reversed: lower bound. Empty: none.
    stop: Vec<u8>,
    /// Reversed: the lower bound is the region's start key (rows at it belong to the scan),
    /// not the scan's own exclusive stop row.
    stop_inclusive: bool,
    reversed: bool,
    /// Reversed: the row to read next (found ahead of time).
    next_reversed: Option<Vec<u8>>,
    limit: u64,
    returned: u64,
    /// Rows read, those that gave no cell included ([`RegionScanner::rows_read`]).
    rows_read: u64,
    /// The current row, reused between rows.
    row_buf: Vec<u8>,
    /// Buffers reused from row to row: the matchers' and [`RowCells`]'.
    scratch: MatcherScratch,
    parts: Vec<(usize, usize, usize)>,
    now: u64,
    done: bool,
    /// The highest sequence id the scan sees ([`RegionScanner::read_point`]).
    read_point: u64,
}

/// Counts the cells a row gives on their way to the caller's sink (a row whose cells are all
/// deleted or outside the read gives none and is skipped).
struct Counted<'s, S> {
    sink: &'s mut S,
    cells: usize,
}

impl<S: CellSink> CellSink for Counted<'_, S> {
    fn cell(&mut self, cell: CellRef<'_>) {
        self.cells += 1;
        self.sink.cell(cell);
    }

    fn end_family(&mut self) {
        self.sink.end_family();
    }
}

/// The rows a scan's first batch reads: its limit or its caching (the smaller if both are
/// set), 0 if neither says.
fn rows_expected(scan: &Scan) -> u64 {
    match (scan.limit, u64::from(scan.caching)) {
        (0, c) => c,
        (l, 0) => l,
        (l, c) => l.min(c),
    }
}

impl RegionScanner {
    pub(crate) fn new(region: Arc<RegionInner>, scan: &Scan) -> Result<RegionScanner> {
        for c in &scan.columns {
            region.store_index(&c.family)?;
        }
        let read_point = match scan.read_point {
            0 => region.mvcc.read_point(),
            at => region.mvcc.read_point().at_most(at),
        };
        let read_point_high = read_point.high();
        let info = &region.info;
        // Clamp the scan to the region's rows.
        let stop_inclusive = scan.reversed && scan.stop_row[..] < info.start_key[..];
        let (lo, hi): (Vec<u8>, Vec<u8>) = if scan.reversed {
            let stop = scan.stop_row.to_vec().max(info.start_key.to_vec());
            (stop, scan.start_row.to_vec())
        } else {
            let start = scan.start_row.to_vec().max(info.start_key.to_vec());
            let stop = match (scan.stop_row.is_empty(), info.end_key.is_empty()) {
                (true, _) => info.end_key.to_vec(),
                (false, true) => scan.stop_row.to_vec(),
                (false, false) => scan.stop_row.to_vec().min(info.end_key.to_vec()),
            };
            (start, stop)
        };
        // A forward scan of exactly one row (`[r, r\0)`, how clients often read one row) goes
        // through the region-level gate and bloom filters as a Get does.
        let one_row = !scan.reversed
            && hi.len() == lo.len() + 1
            && hi.starts_with(&lo)
            && hi.last() == Some(&0);
        let probe = (one_row && region.services.config.region_gate).then(|| RowProbe::new(&lo));
        let mut cursors = Vec::new();
        for (i, store) in region.stores.iter().enumerate() {
            let Some(mut spec) = region.read_spec(
                &scan.columns,
                &store.name,
                read_point.clone(),
                scan.time_range,
                scan.max_versions,
            ) else {
                continue;
            };
            spec.raw = scan.raw;
            let view = store.view();
            let (src_lo, src_hi) = if scan.reversed {
                let hi = if hi.is_empty() {
                    info.end_key.to_vec()
                } else {
                    let mut h = hi.clone();
                    h.push(0); // the start row itself is included
                    h
                };
                (lo.clone(), hi)
            } else {
                (lo.clone(), hi.clone())
            };
            let sources = store.sources(
                &view,
                &src_lo,
                &src_hi,
                &scan.time_range,
                probe.as_ref().map(|p| (p, spec.qualifiers.as_deref())),
                scan.cache_blocks,
            );
            if probe.is_some() && sources.is_empty() {
                // The gate: no memstore or file of this family can hold the row.
                continue;
            }
            cursors.push(FamilyCursor {
                store: i,
                spec,
                merge: MergeIter::new(sources),
            });
        }
        let now = region.services.config.clock.now_millis();
        let mut scanner = RegionScanner {
            region,
            cursors,
            stop: if scan.reversed {
                lo.clone()
            } else {
                hi.clone()
            },
            stop_inclusive,
            reversed: scan.reversed,
            next_reversed: None,
            limit: scan.limit,
            returned: 0,
            rows_read: 0,
            row_buf: Vec::new(),
            scratch: MatcherScratch::default(),
            parts: Vec::new(),
            now,
            done: false,
            read_point: read_point_high,
        };
        if scan.reversed {
            scanner.next_reversed = scanner.first_reversed_row(&hi)?;
        } else {
            let start = first_on_row(&lo);
            // One row reads like a Get, whatever batch its caller allows.
            let rows = if one_row { 1 } else { rows_expected(scan) };
            let stop = if hi.is_empty() {
                Vec::new()
            } else {
                first_on_row(&hi)
            };
            for c in &mut scanner.cursors {
                c.merge.seek_ahead(&start, rows, &stop)?;
            }
        }
        Ok(scanner)
    }

    /// The first row of a reversed scan: `start` itself if present, else the largest row below
    /// it; with no start, the last row of the region.
    fn first_reversed_row(&mut self, start: &[u8]) -> Result<Option<Vec<u8>>> {
        let upper: Vec<u8> = if start.is_empty() {
            if self.region.info.end_key.is_empty() {
                // Above every real row but the all-0xFF row of maximal length, checked first.
                vec![0xff; MAX_ROW_LEN]
            } else {
                return self.largest_row_below(&self.region.info.end_key.clone());
            }
        } else {
            start.to_vec()
        };
        let seek = first_on_row(&upper);
        for c in &mut self.cursors {
            c.merge.seek(&seek)?;
            if c.row() == Some(upper.as_slice()) {
                return Ok(self.above_stop(&upper).then_some(upper));
            }
        }
        self.largest_row_below(&upper)
    }

    fn largest_row_below(&mut self, row: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut best: Option<Vec<u8>> = None;
        for c in &mut self.cursors {
            if let Some(r) = c.merge.last_row_before(row)? {
                if best.as_ref().is_none_or(|b| &r > b) {
                    best = Some(r);
                }
            }
        }
        Ok(best.filter(|r| self.above_stop(r)))
    }

    /// Reversed scans: whether `row` is above the lower bound (exclusive for the scan's stop
    /// row, inclusive for the region's start key).
    fn above_stop(&self, row: &[u8]) -> bool {
        self.stop.is_empty()
            || row > self.stop.as_slice()
            || (self.stop_inclusive && row == self.stop.as_slice())
    }

    /// Reads one row from every cursor positioned on it into `sink`; the number of cells
    /// given.
    fn read_row_into<S: CellSink>(
        &mut self,
        row: &[u8],
        seek_first: bool,
        sink: &mut S,
    ) -> Result<usize> {
        let mut counted = Counted { sink, cells: 0 };
        let start = if seek_first {
            first_on_row(row)
        } else {
            Vec::new()
        };
        let RegionScanner {
            region,
            cursors,
            scratch,
            now,
            ..
        } = self;
        for c in cursors.iter_mut() {
            if seek_first {
                c.merge.seek(&start)?;
            }
            if c.row() != Some(row) {
                continue;
            }
            #[allow(
                clippy::indexing_slicing,
                reason = "a cursor's store is a position in `stores`, which a region never resizes"
            )]
            let store = &region.stores[c.store];
            let mut matcher =
                RowMatcher::with_scratch(&store.family, &c.spec, *now, std::mem::take(scratch));
            read_row_cells(
                &mut c.merge,
                row,
                &store.name,
                &mut matcher,
                &mut counted,
                RowEnd::PastRow,
            )?;
            *scratch = matcher.into_scratch();
        }
        Ok(counted.cells)
    }

    fn next_forward_into<S: CellSink>(&mut self, sink: &mut S) -> Result<bool> {
        loop {
            let mut row = std::mem::take(&mut self.row_buf);
            row.clear();
            match self.cursors.iter().filter_map(FamilyCursor::row).min() {
                Some(r) => row.extend_from_slice(r),
                None => return Ok(false),
            }
            if !self.stop.is_empty() && row.as_slice() >= self.stop.as_slice() {
                return Ok(false);
            }
            let cells = self.read_row_into(&row, false, sink);
            self.rows_read += 1;
            self.row_buf = row;
            if cells? > 0 {
                return Ok(true);
            }
        }
    }

    fn next_backward_into<S: CellSink>(&mut self, sink: &mut S) -> Result<bool> {
        while let Some(row) = self.next_reversed.take() {
            let cells = self.read_row_into(&row, true, sink)?;
            self.rows_read += 1;
            self.next_reversed = self.largest_row_below(&row)?;
            if cells > 0 {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The highest sequence id this scan sees: the region's committed writes when it opened,
    /// or the scan's own `read_point` when it asked for an earlier one. A client reopening
    /// the scan in this region (on this or another server) sends it back to read the same
    /// writes (HBase's `mvcc_read_point`).
    pub fn read_point(&self) -> u64 {
        self.read_point
    }

    /// The rows this scanner has read so far, rows that gave no cell (every cell deleted,
    /// outside the time range or the versions asked for) included: HBase's "rows scanned".
    pub fn rows_read(&self) -> u64 {
        self.rows_read
    }

    /// Gives the next row's cells to `sink` (borrowed, family by family, each family's
    /// ended with [`CellSink::end_family`]): `false` at the end of the scan. The iterator
    /// without a `Vec<Cell>` per row, for a caller that encodes or counts cells where they
    /// lie. After an error the scanner is done and the sink may hold part of a row.
    pub fn next_row_into<S: CellSink>(&mut self, sink: &mut S) -> Result<bool> {
        if self.done || (self.limit > 0 && self.returned >= self.limit) {
            return Ok(false);
        }
        let r = if self.reversed {
            self.next_backward_into(sink)
        } else {
            self.next_forward_into(sink)
        };
        match r {
            Ok(true) => {
                self.returned += 1;
                self.region.read_requests.add(1);
                Ok(true)
            }
            Ok(false) => {
                self.done = true;
                Ok(false)
            }
            Err(e) => {
                self.done = true;
                Err(e)
            }
        }
    }
}

impl cellar_model::RowScanner for RegionScanner {
    fn next_row_into<S: CellSink>(&mut self, sink: &mut S) -> Result<bool> {
        RegionScanner::next_row_into(self, sink)
    }
}

impl Iterator for RegionScanner {
    type Item = Result<Vec<Cell>>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut cells = Vec::new();
        let mut sink = RowCells::with_parts(&mut cells, std::mem::take(&mut self.parts));
        let r = self.next_row_into(&mut sink);
        self.parts = sink.into_parts();
        match r {
            Ok(true) => Some(Ok(cells)),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}
