//! Reads: what a client asks a region for.

use crate::filter::Filter;
use bytes::Bytes;

/// Which columns a read returns: whole families or single qualifiers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub family: Bytes,
    /// `None`: every qualifier of the family.
    pub qualifier: Option<Bytes>,
}

/// A half-open timestamp interval `[min, max)`, HBase's `TimeRange`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeRange {
    pub min: u64,
    pub max: u64,
}

impl TimeRange {
    pub const ALL: TimeRange = TimeRange {
        min: 0,
        max: u64::MAX,
    };

    pub fn contains(&self, ts: u64) -> bool {
        ts >= self.min && ts < self.max
    }

    /// Whether `[lo, hi]` (a file's time range) meets this range.
    pub fn overlaps(&self, lo: u64, hi: u64) -> bool {
        lo < self.max && hi >= self.min
    }
}

impl Default for TimeRange {
    fn default() -> Self {
        TimeRange::ALL
    }
}

/// A read of one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Get {
    pub row: Bytes,
    /// Empty: every family.
    pub columns: Vec<Column>,
    pub time_range: TimeRange,
    /// Versions returned per column (HBase default 1).
    pub max_versions: u32,
    /// Evaluated on the server over the row's visible cells.
    pub filter: Option<Filter>,
}

impl Get {
    pub fn new(row: impl Into<Bytes>) -> Get {
        Get {
            row: row.into(),
            columns: Vec::new(),
            time_range: TimeRange::ALL,
            max_versions: 1,
            filter: None,
        }
    }

    pub fn family(mut self, family: &[u8]) -> Get {
        self.columns.push(Column {
            family: Bytes::copy_from_slice(family),
            qualifier: None,
        });
        self
    }

    pub fn column(mut self, family: &[u8], qualifier: &[u8]) -> Get {
        self.columns.push(Column {
            family: Bytes::copy_from_slice(family),
            qualifier: Some(Bytes::copy_from_slice(qualifier)),
        });
        self
    }

    pub fn versions(mut self, n: u32) -> Get {
        self.max_versions = n;
        self
    }

    pub fn time_range(mut self, min: u64, max: u64) -> Get {
        self.time_range = TimeRange { min, max };
        self
    }
}

/// A read of a range of rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    /// Inclusive; empty: from the first row (for reversed scans: the row to start from,
    /// going down; empty: the last row).
    pub start_row: Bytes,
    /// Exclusive; empty: to the end (for reversed scans, the lower bound, exclusive).
    pub stop_row: Bytes,
    pub columns: Vec<Column>,
    pub time_range: TimeRange,
    pub max_versions: u32,
    /// Stop after this many rows (0: no limit).
    pub limit: u64,
    pub reversed: bool,
    /// Whether blocks read by this scan enter the block cache (HBase's `setCacheBlocks`).
    pub cache_blocks: bool,
    /// Evaluated on the server over each row's visible cells.
    pub filter: Option<Filter>,
    /// Rows fetched per RPC (HBase's scanner caching); 0: the client's default.
    pub caching: u32,
    /// At most this many cells per returned result (a wide row arrives in parts); 0: whole rows.
    pub batch: u32,
    /// Ask the server to zstd-compress each batch of results (the wire's concern, not the
    /// engine's).
    pub compress: bool,
    /// Every cell the store still holds, delete markers and the cells they mask included, up
    /// to `max_versions` puts per column (HBase's `Scan.setRaw`: what a major compaction has
    /// not yet removed).
    pub raw: bool,
    /// 0: the writes committed when the scanner opens. Otherwise the highest sequence id
    /// to see: the read point an earlier open of this scan in the same region reported,
    /// sent back when the scan is reopened so the rest of it reads the same writes (HBase's
    /// `mvcc_read_point`). Never above what is committed.
    pub read_point: u64,
}

impl Scan {
    pub fn new() -> Scan {
        Scan {
            start_row: Bytes::new(),
            stop_row: Bytes::new(),
            columns: Vec::new(),
            time_range: TimeRange::ALL,
            max_versions: 1,
            limit: 0,
            reversed: false,
            cache_blocks: true,
            filter: None,
            caching: 0,
            batch: 0,
            compress: false,
            raw: false,
            read_point: 0,
        }
    }

    pub fn range(mut self, start: &[u8], stop: &[u8]) -> Scan {
        self.start_row = Bytes::copy_from_slice(start);
        self.stop_row = Bytes::copy_from_slice(stop);
        self
    }

    pub fn family(mut self, family: &[u8]) -> Scan {
        self.columns.push(Column {
            family: Bytes::copy_from_slice(family),
            qualifier: None,
        });
        self
    }

    pub fn column(mut self, family: &[u8], qualifier: &[u8]) -> Scan {
        self.columns.push(Column {
            family: Bytes::copy_from_slice(family),
            qualifier: Some(Bytes::copy_from_slice(qualifier)),
        });
        self
    }

    pub fn versions(mut self, n: u32) -> Scan {
        self.max_versions = n;
        self
    }

    pub fn limit(mut self, n: u64) -> Scan {
        self.limit = n;
        self
    }

    pub fn reversed(mut self) -> Scan {
        self.reversed = true;
        self
    }

    pub fn time_range(mut self, min: u64, max: u64) -> Scan {
        self.time_range = TimeRange { min, max };
        self
    }
}

impl Scan {
    /// Rows starting with `prefix` (HBase's `setRowPrefixFilter`: sets start and stop rows).
    pub fn prefix(mut self, prefix: &[u8]) -> Scan {
        self.start_row = Bytes::copy_from_slice(prefix);
        self.stop_row = prefix_successor(prefix);
        self
    }

    pub fn filter(mut self, filter: Filter) -> Scan {
        self.filter = Some(filter);
        self
    }

    /// A raw scan (see [`Scan::raw`]).
    pub fn raw(mut self) -> Scan {
        self.raw = true;
        self
    }

    pub fn caching(mut self, rows: u32) -> Scan {
        self.caching = rows;
        self
    }

    pub fn batch(mut self, cells: u32) -> Scan {
        self.batch = cells;
        self
    }
}

impl Get {
    pub fn filter(mut self, filter: Filter) -> Get {
        self.filter = Some(filter);
        self
    }
}

/// The smallest row greater than every row starting with `prefix`; empty (no bound) when the
/// prefix is empty or all 0xff.
pub fn prefix_successor(prefix: &[u8]) -> Bytes {
    let mut p = prefix.to_vec();
    while let Some(&last) = p.last() {
        if last == 0xff {
            p.pop();
        } else {
            if let Some(b) = p.last_mut() {
                *b += 1;
            }
            return Bytes::from(p);
        }
    }
    Bytes::new()
}

impl Default for Scan {
    fn default() -> Self {
        Scan::new()
    }
}
