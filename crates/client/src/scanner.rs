//! Scanners: a scan runs region by region. Each region gets a server-side scanner (SCAN_OPEN
//! returns the first rows, SCAN_NEXT the following ones) on the connection that opened it.
//!
//! When a region scanner is lost — the region split or moved (NOT_SERVING_REGION), the
//! connection dropped, the server forgot the scanner although its lease had not run out — the
//! region is looked up again and a new scanner opens just after the last row returned (for a
//! reversed scan, just before), so no row is lost or repeated. A scanner left idle past its
//! lease fails with UNKNOWN_SCANNER, as HBase's does.

use crate::cluster::Inner;
use crate::connection::{Connection, Response};
use crate::error::{Error, Handling, Result};
use crate::location::RegionLocation;
use crate::retry::Retrier;
use crate::row::Row;
use crate::scan_shape::ScanShape;
use bytes::Bytes;
use cellar_model::filter::ListOp;
use cellar_model::{Filter, Scan};
use cellar_proto::cellblock::CellReader;
use cellar_proto::convert;
use cellar_proto::pb::{self, ErrorCode, Method};
use cellar_proto::prepared;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The rows of `results` over a cell block.
fn rows_of(results: &[pb::Result], block: Bytes) -> Result<Vec<(Row, bool)>> {
    let mut reader = CellReader::new(block);
    results
        .iter()
        .map(|r| Ok((Row::from_pb(Bytes::new(), r, &mut reader)?, r.partial)))
        .collect()
}

/// A zstd-compressed cell block, inflated (bounded like the compact encoding's bodies).
fn inflate(block: &[u8]) -> Result<Bytes> {
    let size = zstd::zstd_safe::get_frame_content_size(block)
        .ok()
        .flatten()
        .filter(|&n| n <= prepared::MAX_BODY as u64)
        .ok_or_else(|| {
            Error::Protocol("compressed cell block without a size within bounds".into())
        })?;
    zstd::bulk::decompress(block, size as usize)
        .map(Bytes::from)
        .map_err(|e| Error::Protocol(format!("compressed cell block: {e}")))
}

/// Where the next region scanner starts.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Position {
    /// Forward: from this row (inclusive) up.
    From(Bytes),
    /// Reversed: from this row (inclusive) down.
    DownFrom(Bytes),
    /// Reversed: from the rows below this key down (empty: from the table's last row).
    Below(Bytes),
}

/// Cells a reopened scanner returns again and the client drops: the whole row (`None`) or its
/// first cells (a wide row returned in parts).
#[derive(Debug, Clone)]
struct Skip {
    row: Bytes,
    cells: Option<usize>,
}

/// The last result handed to the caller.
#[derive(Debug, Clone)]
struct Delivered {
    row: Bytes,
    /// Cells of this row delivered so far.
    cells: usize,
    /// Whether the row is complete (its last part was delivered).
    complete: bool,
}

struct OpenScanner {
    id: u64,
    conn: Arc<Connection>,
    region: RegionLocation,
}

/// Rows of a scan, fetched `caching` rows per call. Dropping it closes its server-side scanner.
pub struct Scanner {
    inner: Arc<Inner>,
    table: Arc<str>,
    scan: Scan,
    caching: u32,
    /// Rows to return in all (0: no limit): the scan's limit, or a page filter's size.
    limit: u64,
    rows_started: u64,
    buffer: VecDeque<(Row, bool)>,
    open: Option<OpenScanner>,
    /// `None`: no region is left to scan.
    position: Option<Position>,
    last: Option<Delivered>,
    skip: Option<Skip>,
    lease: Duration,
    last_contact: Instant,
    retrier: Retrier,
    /// Set for an execution of a prepared scan.
    prepared: Option<Arc<ScanShape>>,
}

impl std::fmt::Debug for Scanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scanner")
            .field("table", &self.table)
            .field("rows_started", &self.rows_started)
            .field("position", &self.position)
            .finish()
    }
}

impl Scanner {
    pub(crate) fn new(inner: Arc<Inner>, table: Arc<str>, scan: Scan) -> Scanner {
        let caching = if scan.caching > 0 {
            scan.caching
        } else {
            inner.config.scanner_caching.max(1)
        };
        let limit = match (scan.limit, page_size(scan.filter.as_ref())) {
            (0, Some(p)) => p,
            (l, Some(p)) => l.min(p),
            (l, None) => l,
        };
        let position = if !scan.reversed {
            Position::From(scan.start_row.clone())
        } else if scan.start_row.is_empty() {
            Position::Below(Bytes::new())
        } else {
            Position::DownFrom(scan.start_row.clone())
        };
        let retrier = inner.retrier();
        Scanner {
            inner,
            table,
            scan,
            caching,
            limit,
            rows_started: 0,
            buffer: VecDeque::new(),
            open: None,
            position: Some(position),
            last: None,
            skip: None,
            lease: Duration::ZERO,
            last_contact: Instant::now(),
            retrier,
            prepared: None,
        }
    }

    /// An execution of a prepared scan: `scan` is its template with the execution's range,
    /// limit and caching.
    pub(crate) fn prepared(
        inner: Arc<Inner>,
        table: Arc<str>,
        scan: Scan,
        shared: Arc<ScanShape>,
    ) -> Scanner {
        let mut s = Scanner::new(inner, table, scan);
        s.prepared = Some(shared);
        s
    }

    /// The next row (or part of a wide row when the scan sets `batch`); `None` at the end.
    pub async fn next(&mut self) -> Result<Option<Row>> {
        loop {
            if let Some((row, partial)) = self.buffer.pop_front() {
                let new_row = self
                    .last
                    .as_ref()
                    .is_none_or(|l| l.complete || l.row != row.row);
                if new_row && self.limit_reached() {
                    self.finish();
                    return Ok(None);
                }
                if new_row {
                    self.rows_started += 1;
                    self.last = Some(Delivered {
                        row: row.row.clone(),
                        cells: row.cells.len(),
                        complete: !partial,
                    });
                } else if let Some(l) = &mut self.last {
                    l.cells += row.cells.len();
                    l.complete = !partial;
                }
                return Ok(Some(row));
            }
            if self.limit_reached() && self.last.as_ref().is_none_or(|l| l.complete) {
                self.finish();
                return Ok(None);
            }
            let step = if self.open.is_some() {
                self.fetch_more().await
            } else if self.position.is_some() {
                self.open_region().await
            } else {
                return Ok(None);
            };
            match step {
                Ok(()) => self.retrier.reset(),
                Err(e) => self.recover(e).await?,
            }
        }
    }

    /// Every remaining row.
    pub async fn collect(mut self) -> Result<Vec<Row>> {
        let mut rows = Vec::new();
        while let Some(r) = self.next().await? {
            rows.push(r);
        }
        Ok(rows)
    }

    fn limit_reached(&self) -> bool {
        self.limit > 0 && self.rows_started >= self.limit
    }

    /// Rows the next server call may return: the caching, bounded by what the limit leaves
    /// (plus a row the reopened scanner returns again).
    fn rows_wanted(&self) -> u32 {
        if self.limit == 0 {
            return self.caching;
        }
        let left = self.limit.saturating_sub(self.rows_started) + u64::from(self.skip.is_some());
        left.clamp(1, u64::from(self.caching)) as u32
    }

    /// Opens a scanner on the region at the current position.
    async fn open_region(&mut self) -> Result<()> {
        let Some(position) = self.position.clone() else {
            return Ok(());
        };
        if self.past_stop(&position) {
            self.position = None;
            return Ok(());
        }
        let (loc, start_row) = match &position {
            Position::From(row) => (self.inner.locate(&self.table, row).await?, row.clone()),
            Position::DownFrom(row) => (self.inner.locate(&self.table, row).await?, row.clone()),
            Position::Below(key) => {
                let loc = self.inner.locate_below(&self.table, key).await?;
                if !key.is_empty() && self.skip.is_none() {
                    // Start at the key itself and drop it should the region hold it.
                    self.skip = Some(Skip {
                        row: key.clone(),
                        cells: None,
                    });
                }
                (loc, key.clone())
            }
        };
        let mut scan = convert::scan_to_pb(&self.scan);
        scan.start_row = start_row;
        if self.limit > 0 {
            scan.limit =
                self.limit.saturating_sub(self.rows_started) + u64::from(self.skip.is_some());
        }
        let mut req = pb::ScanOpenRequest {
            region: Some(loc.region_ref()),
            scan: Some(scan),
            rows: self.rows_wanted(),
            prepared: 0,
            compress: self.scan.compress,
        };
        let answer = match self.inner.connection(&loc.server).await {
            Ok(conn) => match self.call_open(&conn, &loc, &mut req).await {
                Ok(resp) => Ok((conn, resp)),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        let (conn, resp) = answer.inspect_err(|e| {
            if e.handling() == Handling::Relocate {
                self.inner.cache.invalidate(&loc);
            }
        })?;
        let r: pb::ScanOpenResponse = resp.decode("ScanOpenResponse")?;
        self.lease = Duration::from_millis(u64::from(r.lease_ms));
        self.last_contact = Instant::now();
        self.take_results(&r.results, &resp, r.encoding())?;
        if r.more_in_region {
            self.open = Some(OpenScanner {
                id: r.scanner_id,
                conn,
                region: loc,
            });
        } else {
            self.region_done(&loc);
        }
        Ok(())
    }

    /// SCAN_OPEN on `conn`, for a prepared scan with its handle there (prepared first if
    /// needed; an unknown handle is forgotten, so the retry prepares again).
    async fn call_open(
        &self,
        conn: &Arc<Connection>,
        loc: &RegionLocation,
        req: &mut pb::ScanOpenRequest,
    ) -> Result<Response> {
        let Some(p) = &self.prepared else {
            return conn.call(Method::ScanOpen, req, &[]).await;
        };
        req.prepared = p.handle(&self.table, &loc.server, conn).await?;
        let r = conn.call(Method::ScanOpen, req, &[]).await;
        if let Err(e) = &r {
            if e.code() == Some(ErrorCode::UnknownPreparedScan) {
                p.forget(&loc.server);
            }
        }
        r
    }

    /// The next rows of the open region scanner.
    async fn fetch_more(&mut self) -> Result<()> {
        let Some(open) = &self.open else {
            return Ok(());
        };
        let req = pb::ScanNextRequest {
            scanner_id: open.id,
            rows: self.rows_wanted(),
        };
        let resp = open.conn.call(Method::ScanNext, &req, &[]).await?;
        let r: pb::ScanNextResponse = resp.decode("ScanNextResponse")?;
        self.last_contact = Instant::now();
        self.take_results(&r.results, &resp, r.encoding())?;
        if !r.more_in_region {
            if let Some(open) = self.open.take() {
                self.region_done(&open.region);
            }
        }
        Ok(())
    }

    /// Queues a response's results, dropping what a reopened scanner returned again.
    fn take_results(
        &mut self,
        results: &[pb::Result],
        resp: &Response,
        encoding: pb::ResultEncoding,
    ) -> Result<()> {
        let rows: Vec<(Row, bool)> = match encoding {
            pb::ResultEncoding::PreparedV1 => {
                let columns = self
                    .prepared
                    .as_ref()
                    .map(|p| Arc::clone(&p.columns))
                    .unwrap_or_default();
                prepared::decode(resp.cellblock.clone(), &columns)
                    .map_err(|e| Error::Protocol(format!("prepared scan results: {e}")))?
                    .into_iter()
                    .filter_map(|(cells, partial)| {
                        let row = cells.first()?.row.clone();
                        Some((Row { row, cells }, partial))
                    })
                    .collect()
            }
            pb::ResultEncoding::CellBlockZstd => {
                let block = inflate(&resp.cellblock)?;
                rows_of(results, block)?
            }
            pb::ResultEncoding::CellBlock => rows_of(results, resp.cellblock.clone())?,
        };
        for (mut row, partial) in rows {
            if row.cells.is_empty() {
                continue;
            }
            if let Some(skip) = &mut self.skip {
                if skip.row == row.row {
                    match &mut skip.cells {
                        None => continue,
                        Some(n) => {
                            let k = (*n).min(row.cells.len());
                            row.cells.drain(..k);
                            *n -= k;
                            if row.cells.is_empty() {
                                continue;
                            }
                        }
                    }
                } else {
                    self.skip = None;
                }
            }
            self.buffer.push_back((row, partial));
        }
        Ok(())
    }

    /// The region has no more rows for the scan: move to the next one, if any.
    fn region_done(&mut self, region: &RegionLocation) {
        self.skip = None;
        let stop = &self.scan.stop_row;
        self.position = if !self.scan.reversed {
            let end = &region.end_key;
            (!end.is_empty() && (stop.is_empty() || end < stop))
                .then(|| Position::From(end.clone()))
        } else {
            let start = &region.start_key;
            (!start.is_empty() && (stop.is_empty() || start > stop))
                .then(|| Position::Below(start.clone()))
        };
    }

    /// Whether no row at or past `position` can be in the scan.
    fn past_stop(&self, position: &Position) -> bool {
        let stop = &self.scan.stop_row;
        if stop.is_empty() {
            return false;
        }
        match position {
            Position::From(row) => row >= stop,
            Position::DownFrom(row) | Position::Below(row) => !row.is_empty() && row <= stop,
        }
    }

    /// After a failed call: gives up (the error is the caller's) or repositions just past the
    /// last row returned, so that the next step reopens a scanner there.
    async fn recover(&mut self, err: Error) -> Result<()> {
        let lease_expired = err.code() == Some(ErrorCode::UnknownScanner)
            && !self.lease.is_zero()
            && self.last_contact.elapsed() >= self.lease;
        // A scanner the server forgot inside its lease (a split closed the region) reopens.
        let err = match err {
            Error::Rpc {
                code: ErrorCode::UnknownScanner,
                message,
            } if !lease_expired => Error::rpc(ErrorCode::NotServingRegion, message),
            e => e,
        };
        if let Some(open) = self.open.take() {
            if err.handling() == Handling::Relocate {
                self.inner.cache.invalidate(&open.region);
            }
            self.close_in_background(open);
        }
        if let Err(e) = self.retrier.failed(err).await {
            self.position = None;
            return Err(e);
        }
        if let Some(last) = &self.last {
            let (position, skip) = resume_after(last, self.scan.reversed);
            self.position = Some(position);
            self.skip = skip;
        }
        Ok(())
    }

    /// Ends the scan early: the server-side scanner is closed.
    fn finish(&mut self) {
        self.position = None;
        self.buffer.clear();
        if let Some(open) = self.open.take() {
            self.close_in_background(open);
        }
    }

    fn close_in_background(&self, open: OpenScanner) {
        self.inner.runtime.spawn(async move {
            let req = pb::ScanCloseRequest {
                scanner_id: open.id,
            };
            if let Err(e) = open.conn.call(Method::ScanClose, &req, &[]).await {
                tracing::debug!(scanner = open.id, error = %e, "closing scanner failed");
            }
        });
    }
}

impl Drop for Scanner {
    fn drop(&mut self) {
        if let Some(open) = self.open.take() {
            self.close_in_background(open);
        }
    }
}

/// Where a new scanner resumes after `last`, and what it will return again that the caller
/// already has.
fn resume_after(last: &Delivered, reversed: bool) -> (Position, Option<Skip>) {
    let again = |cells| {
        Some(Skip {
            row: last.row.clone(),
            cells,
        })
    };
    match (reversed, last.complete) {
        (false, true) => {
            let mut next = last.row.to_vec();
            next.push(0);
            (Position::From(Bytes::from(next)), None)
        }
        (false, false) => (Position::From(last.row.clone()), again(Some(last.cells))),
        (true, true) => (Position::DownFrom(last.row.clone()), again(None)),
        (true, false) => (
            Position::DownFrom(last.row.clone()),
            again(Some(last.cells)),
        ),
    }
}

/// The row count of a page filter that bounds the whole scan (alone or in an AND list).
fn page_size(filter: Option<&Filter>) -> Option<u64> {
    match filter? {
        Filter::Page(n) => Some(*n),
        Filter::List(ListOp::MustPassAll, filters) => {
            filters.iter().filter_map(|f| page_size(Some(f))).min()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivered(row: &str, cells: usize, complete: bool) -> Delivered {
        Delivered {
            row: Bytes::copy_from_slice(row.as_bytes()),
            cells,
            complete,
        }
    }

    #[test]
    fn resume_points_neither_lose_nor_repeat_rows() {
        let (p, s) = resume_after(&delivered("r5", 3, true), false);
        assert_eq!(p, Position::From(Bytes::from_static(b"r5\0")));
        assert!(s.is_none());
        let (p, s) = resume_after(&delivered("r5", 3, false), false);
        assert_eq!(p, Position::From(Bytes::from_static(b"r5")));
        assert_eq!(s.and_then(|s| s.cells), Some(3));
        let (p, s) = resume_after(&delivered("r5", 3, true), true);
        assert_eq!(p, Position::DownFrom(Bytes::from_static(b"r5")));
        let s = s.expect("the row itself is skipped");
        assert_eq!((s.row.as_ref(), s.cells), (&b"r5"[..], None));
        let (_, s) = resume_after(&delivered("r5", 2, false), true);
        assert_eq!(s.and_then(|s| s.cells), Some(2));
    }

    #[test]
    fn page_filters_bound_the_scan_only_when_they_must_pass() {
        assert_eq!(page_size(Some(&Filter::Page(4))), None.or(Some(4)));
        let and = Filter::List(
            ListOp::MustPassAll,
            vec![Filter::FirstKeyOnly, Filter::Page(7), Filter::Page(5)],
        );
        assert_eq!(page_size(Some(&and)), Some(5));
        let or = Filter::List(ListOp::MustPassOne, vec![Filter::Page(7)]);
        assert_eq!(page_size(Some(&or)), None);
        assert_eq!(page_size(None), None);
    }
}
