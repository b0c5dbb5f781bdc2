//! Prepared scans (seed 003): [`Table::prepare_scan`](crate::Table::prepare_scan) keeps a
//! scan's shape — columns, filter, time range, versions — and [`PreparedScan::execute`] runs it
//! over any row range as often as wanted. Results come in the compact encoding (each row key
//! once, columns by index into the prepared list), optionally zstd-compressed.
//!
//! The server keeps a prepared scan per connection: it is prepared on a region server the
//! first time an execution reaches it, again if the connection was replaced or the server
//! forgot it (lease, restart: UNKNOWN_PREPARED_SCAN), and released by
//! [`PreparedScan::close`] or when the connection ends.

use crate::cluster::Inner;
use crate::scan_shape::ScanShape;
use crate::scanner::Scanner;
use bytes::Bytes;
use cellar_model::Scan;
use std::sync::Arc;

/// A scan prepared once and executed many times. Cheap to share between tasks (executions
/// run concurrently); see the module docs.
pub struct PreparedScan {
    inner: Arc<Inner>,
    table: Arc<str>,
    shape: Arc<ScanShape>,
}

impl std::fmt::Debug for PreparedScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedScan")
            .field("table", &self.table)
            .field("columns", &self.shape.columns.len())
            .finish()
    }
}

impl PreparedScan {
    pub(crate) fn new(inner: Arc<Inner>, table: Arc<str>, scan: Scan, compress: bool) -> Self {
        PreparedScan {
            inner,
            table,
            shape: Arc::new(ScanShape::new(scan, compress)),
        }
    }

    /// The rows of `[start, stop)` (empty stop: to the end of the table; for a reversed scan
    /// from `start` down to `stop`), at most `limit` of them (0: all), fetched `caching` rows
    /// per call (0: the prepared scan's caching, else the client's default).
    pub fn execute(
        &self,
        start: impl Into<Bytes>,
        stop: impl Into<Bytes>,
        limit: u64,
        caching: u32,
    ) -> Scanner {
        let mut scan = self.shape.template.clone();
        scan.start_row = start.into();
        scan.stop_row = stop.into();
        scan.limit = limit;
        if caching > 0 {
            scan.caching = caching;
        }
        Scanner::prepared(
            self.inner.clone(),
            self.table.clone(),
            scan,
            Arc::clone(&self.shape),
        )
    }

    /// Releases the scan on every server it was prepared on (they release it anyway when the
    /// connection ends or its lease runs out).
    pub async fn close(&self) {
        self.shape.close().await
    }
}
