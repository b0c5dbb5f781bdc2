//! The region scanner: rows in order (or reversed), each row's visible cells from every family
//! asked for, seen at the read point taken when the scan started.
//!
//! Each family has a merged cursor over its memstores and store files. Forward: the next row is
//! the smallest row any cursor is at. Reversed: the next row is the largest row below the
//! current one in any source (found by `seek_for_prev`), read forward like a Get.

use super::matcher::{ReadSpec, RowMatcher};
use super::sink::RowCells;
use super::{read_row_cells, RegionInner};
use crate::iter::MergeIter;
use crate::storefile::RowProbe;
use bytes::Bytes;
use cellar_model::key::{first_on_row, KeyRef, MAX_ROW_LEN};
use cellar_model::{Cell, Result, Scan};
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
    /// The current row, reused between rows.
    row_buf: Vec<u8>,
    now: u64,
    done: bool,
}

impl RegionScanner {
    pub(crate) fn new(region: Arc<RegionInner>, scan: &Scan) -> Result<RegionScanner> {
        for c in &scan.columns {
            region.store_index(&c.family)?;
        }
        let read_point = region.mvcc.read_point();
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
        let one_row = region.services.config.region_gate
            && !scan.reversed
            && hi.len() == lo.len() + 1
            && hi.starts_with(&lo)
            && hi.last() == Some(&0);
        let probe = one_row.then(|| RowProbe::new(&lo));
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
            row_buf: Vec::new(),
            now,
            done: false,
        };
        if scan.reversed {
            scanner.next_reversed = scanner.first_reversed_row(&hi)?;
        } else {
            let start = first_on_row(&lo);
            for c in &mut scanner.cursors {
                c.merge.seek(&start)?;
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

    /// Reads one row from every cursor positioned on it.
    fn read_row(&mut self, row: &[u8], seek_first: bool) -> Result<Vec<Cell>> {
        let mut cells = Vec::new();
        let start = if seek_first {
            first_on_row(row)
        } else {
            Vec::new()
        };
        for c in &mut self.cursors {
            if seek_first {
                c.merge.seek(&start)?;
            }
            if c.row() != Some(row) {
                continue;
            }
            let store = &self.region.stores[c.store];
            let mut matcher = RowMatcher::new(&store.family, &c.spec, self.now);
            read_row_cells(
                &mut c.merge,
                row,
                &store.name,
                &mut matcher,
                &mut RowCells::new(&mut cells),
            )?;
        }
        Ok(cells)
    }

    fn next_forward(&mut self) -> Result<Option<Vec<Cell>>> {
        loop {
            let mut row = std::mem::take(&mut self.row_buf);
            row.clear();
            match self.cursors.iter().filter_map(FamilyCursor::row).min() {
                Some(r) => row.extend_from_slice(r),
                None => return Ok(None),
            }
            if !self.stop.is_empty() && row.as_slice() >= self.stop.as_slice() {
                return Ok(None);
            }
            let cells = self.read_row(&row, false);
            self.row_buf = row;
            let cells = cells?;
            if !cells.is_empty() {
                return Ok(Some(cells));
            }
        }
    }

    fn next_backward(&mut self) -> Result<Option<Vec<Cell>>> {
        while let Some(row) = self.next_reversed.take() {
            let cells = self.read_row(&row, true)?;
            self.next_reversed = self.largest_row_below(&row)?;
            if !cells.is_empty() {
                return Ok(Some(cells));
            }
        }
        Ok(None)
    }
}

impl Iterator for RegionScanner {
    type Item = Result<Vec<Cell>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || (self.limit > 0 && self.returned >= self.limit) {
            return None;
        }
        let r = if self.reversed {
            self.next_backward()
        } else {
            self.next_forward()
        };
        match r {
            Ok(Some(cells)) => {
                self.returned += 1;
                self.region.read_requests.add(1);
                Some(Ok(cells))
            }
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// The row after `row` in byte order: `row` followed by a zero byte.
pub fn next_row(row: &[u8]) -> Bytes {
    let mut r = row.to_vec();
    r.push(0);
    Bytes::from(r)
}
