//! SCAN: open (region + scan), next (scanner id), renew (lease only) or close. A meta scan's
//! rows are computed whole at the open and handed out `number_of_rows` at a time by a
//! scanner like a region's. `more_results` stays true: the client stops by itself at its stop
//! row and limit, and moves on to the next region when `more_results_in_region` is false. A
//! `next_call_seq` on any call is checked against the scanner's call sequence (the open is
//! call 0): a number out of order gets HBase's `OutOfOrderScannerNextException` and the
//! scanner stays as it was. With `track_scan_metrics` an answer carries the rows the call
//! read and filtered (HBase's server-side `ROWS_SCANNED` and `ROWS_FILTERED`).
//!
//! A region's open answers the scan's read point (`mvcc_read_point`), which HBase's
//! synchronous client sends back in the Scan when it reopens the scan in that region, so the
//! rows after a move read the same writes as those before. With the Scan's
//! `query_metrics_enabled` each result of the open's answer carries the block bytes its row
//! took to read; later calls carry no Scan and so, as from HBase 2.6.4, no metrics.

use super::{region, Call, Result};
use crate::hbase::meta_view::{self, MetaScan};
use crate::hbase::names::RegionTarget;
use crate::hbase::{convert, filters, CallCtx, HbaseError, HbaseService, Reply, Request};
use crate::scanners::{ScanBatch, ScanCounts};
use bytes::{Bytes, BytesMut};
use cellar_model::{Cell, Scan};
use cellar_proto::hbase;

/// A Scan as its decode half hands it on.
#[derive(Debug, Clone)]
pub(crate) enum ScanCall {
    /// A scanner opened, its first `rows` rows answered.
    Open {
        target: Box<OpenTarget>,
        rows: u32,
        /// 0 when given (an open is call 0); a scanner with more to come takes it.
        next_call_seq: Option<u64>,
        /// `track_scan_metrics`: the answer carries what the call read.
        metrics: bool,
        /// The Scan's `query_metrics_enabled`: each result carries its block bytes.
        query_metrics: bool,
        /// `close_scanner` with the open: the first rows answered, the scanner closed (the
        /// answer's flags as computed, as HBase leaves them).
        close: bool,
    },
    /// The next `rows` rows of an open scanner (0 when only renewing its lease).
    Next {
        scanner_id: u64,
        rows: u32,
        next_call_seq: Option<u64>,
        metrics: bool,
    },
    Close {
        scanner_id: u64,
        next_call_seq: Option<u64>,
    },
}

/// What a scanner is opened on.
#[derive(Debug, Clone)]
pub(crate) enum OpenTarget {
    /// Meta, in HBase's own terms (bounds with their inclusiveness).
    Meta(MetaScan),
    User {
        table: String,
        region_id: u64,
        scan: Scan,
    },
}

impl ScanCall {
    /// `req`, its region named by `resolve` (tests substitute it).
    pub(crate) fn new(
        req: &hbase::ScanRequest,
        resolve: impl Fn(&hbase::RegionSpecifier) -> Result<RegionTarget>,
    ) -> Result<ScanCall> {
        let metrics = req.track_scan_metrics == Some(true);
        if let Some(scanner_id) = req.scanner_id {
            if req.close_scanner.unwrap_or(false) {
                return Ok(ScanCall::Close {
                    scanner_id,
                    next_call_seq: req.next_call_seq,
                });
            }
            let rows = if req.renew.unwrap_or(false) {
                0
            } else {
                req.number_of_rows.unwrap_or(0)
            };
            return Ok(ScanCall::Next {
                scanner_id,
                rows,
                next_call_seq: req.next_call_seq,
                metrics,
            });
        }
        let spec = req.region.as_ref().ok_or_else(|| {
            HbaseError::do_not_retry("ScanRequest has neither a scanner id nor a region")
        })?;
        let s = req.scan.as_ref().ok_or_else(|| {
            HbaseError::do_not_retry("ScanRequest opens a scanner without a scan")
        })?;
        let limit = req.limit_of_rows.unwrap_or(0);
        // A numbered open is the new scanner's call 0, as in HBase.
        if let Some(got) = req.next_call_seq.filter(|s| *s != 0) {
            return Err(crate::error::ServerError::OutOfOrderScannerNext {
                scanner: 0,
                expected: 0,
                got,
            }
            .into());
        }
        let target = match resolve(spec)? {
            RegionTarget::Meta => OpenTarget::Meta(meta_scan(s, limit)?),
            RegionTarget::User { table, region_id } => OpenTarget::User {
                table,
                region_id,
                scan: convert::scan_from_hbase(s, limit)?,
            },
        };
        Ok(ScanCall::Open {
            target: Box::new(target),
            rows: req.number_of_rows.unwrap_or(0),
            next_call_seq: req.next_call_seq,
            metrics,
            query_metrics: s.query_metrics_enabled == Some(true),
            close: req.close_scanner == Some(true),
        })
    }
}

/// The decode half: a ScanRequest (it carries no cells).
pub(crate) fn decode(param: Bytes, _cellblock: Bytes) -> Result<Request> {
    let req: hbase::ScanRequest = crate::hbase::message(param, "ScanRequest")?;
    Ok(Call::Scan(ScanCall::new(&req, region)?).into())
}

/// A scan of meta in HBase's own terms (bounds with their inclusiveness).
pub(crate) fn meta_scan(s: &hbase::Scan, limit: u32) -> Result<MetaScan> {
    let reversed = s.reversed.unwrap_or(false);
    let mut families = Vec::new();
    let mut columns = Vec::new();
    for c in &s.column {
        if c.qualifier.is_empty() {
            families.push(c.family.clone());
        }
        for q in &c.qualifier {
            columns.push((c.family.clone(), q.clone()));
        }
    }
    Ok(MetaScan {
        start: s.start_row.clone().unwrap_or_default(),
        include_start: s.include_start_row.unwrap_or(true),
        stop: s.stop_row.clone().unwrap_or_default(),
        include_stop: s.include_stop_row.unwrap_or(false),
        reversed,
        families,
        columns,
        filter: s
            .filter
            .as_ref()
            .map(|f| filters::checked_filter_from_hbase(f, reversed))
            .transpose()?,
        limit: limit as usize,
    })
}

/// The execute half: a scanner of this connection moved on, closed, or opened.
pub(crate) fn execute(svc: &HbaseService, ctx: &CallCtx, call: ScanCall) -> Result<Reply> {
    match call {
        ScanCall::Close {
            scanner_id: id,
            next_call_seq,
        } => {
            svc.rs.check_scanner_owner(ctx.conn_id, id)?;
            if let Some(seq) = next_call_seq {
                svc.rs.scan_take_call_seq(id, seq)?;
            }
            svc.rs.scan_close(id);
            Ok(Reply::message(&hbase::ScanResponse {
                scanner_id: Some(id),
                more_results: Some(false),
                more_results_in_region: Some(false),
                ..Default::default()
            }))
        }
        ScanCall::Next {
            scanner_id: id,
            rows,
            next_call_seq,
            metrics,
        } => {
            svc.rs.check_scanner_owner(ctx.conn_id, id)?;
            let batch = svc.rs.scan_next_in_order(id, rows, next_call_seq)?;
            Ok(scan_response(ctx, batch, metrics, false, ttl(svc)))
        }
        ScanCall::Open {
            target,
            rows,
            next_call_seq,
            metrics,
            query_metrics,
            close,
        } => {
            let batch = match *target {
                OpenTarget::Meta(scan) => {
                    // Computed whole from the catalog, answered `number_of_rows` at a time.
                    let all = meta_view::scan(svc, &scan)?;
                    svc.rs.scan_open_rows(
                        ctx.conn_id,
                        all,
                        rows,
                        crate::scanners::ResultFormat::CellBlock,
                    )
                }
                OpenTarget::User {
                    table,
                    region_id,
                    mut scan,
                } => {
                    svc.rs
                        .authz
                        .check_scan(&ctx.caller, &table, &mut scan, "scan")?;
                    svc.rs.scan_open(
                        ctx.conn_id,
                        &table,
                        region_id,
                        &scan,
                        rows,
                        crate::scanners::ResultFormat::CellBlock,
                    )?
                }
            };
            if close && batch.more_in_region {
                svc.rs.scan_close(batch.scanner_id);
            } else if let (Some(seq), true) = (next_call_seq, batch.more_in_region) {
                svc.rs.scan_take_call_seq(batch.scanner_id, seq)?;
            }
            Ok(scan_response(ctx, batch, metrics, query_metrics, ttl(svc)))
        }
    }
}

fn ttl(svc: &HbaseService) -> u32 {
    svc.rs.config().scanner.lease_ms.min(u64::from(u32::MAX)) as u32
}

/// A batch's results and flags as the connection takes them, with `metrics` the rows the
/// call read, and with `query_metrics` each result's block bytes.
fn scan_response(
    ctx: &CallCtx,
    batch: ScanBatch,
    metrics: bool,
    query_metrics: bool,
    ttl: u32,
) -> Reply {
    let mut out = BytesMut::new();
    let mut resp = hbase::ScanResponse {
        scanner_id: Some(batch.scanner_id),
        more_results: Some(true),
        more_results_in_region: Some(batch.more_in_region),
        ttl: Some(ttl),
        scan_metrics: metrics.then(|| scan_metrics(batch.counts)),
        mvcc_read_point: batch.read_point,
        ..Default::default()
    };
    if query_metrics {
        resp.query_metrics = batch
            .results
            .iter()
            .map(|r| super::get::query_metrics(r.block_bytes))
            .collect();
    }
    for r in &batch.results {
        let cells: &[Cell] = &r.cells;
        if ctx.cell_blocks {
            for c in cells {
                cellar_proto::cellblock::put(&mut out, c);
            }
            resp.cells_per_result.push(cells.len() as u32);
            resp.partial_flag_per_result.push(r.partial);
        } else {
            resp.results
                .push(convert::result_to_hbase(cells, r.partial, false, &mut out));
        }
    }
    Reply::with_cells(&resp, out)
}

/// HBase's server-side scan metrics of one call, by the names its client sums them under.
/// (HBase 2.6 also reports block, file system and memstore bytes and times; this engine
/// does not measure those per scan, so the client shows them as 0.)
fn scan_metrics(c: ScanCounts) -> hbase::ScanMetrics {
    let pair = |name: &str, value: u64| hbase::NameInt64Pair {
        name: Some(name.to_string()),
        value: Some(i64::try_from(value).unwrap_or(i64::MAX)),
    };
    hbase::ScanMetrics {
        metrics: vec![
            pair("ROWS_SCANNED", c.rows_scanned),
            pair("ROWS_FILTERED", c.rows_filtered),
        ],
    }
}
