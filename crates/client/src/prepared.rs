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
use crate::connection::Connection;
use crate::error::Result;
use crate::scanner::Scanner;
use bytes::Bytes;
use cellar_model::Scan;
use cellar_proto::convert;
use cellar_proto::pb::{self, Method};
use cellar_proto::prepared::Columns;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// What executions of one prepared scan share.
pub(crate) struct Shared {
    pub(crate) template: Scan,
    pub(crate) columns: Arc<Columns>,
    pub(crate) compress: bool,
    /// Per server: the connection it was prepared on, and its handle there.
    handles: Mutex<HashMap<String, (Weak<Connection>, u64)>>,
}

impl Shared {
    /// The handle of this scan on `conn` (to `server`), preparing it there if needed.
    pub(crate) async fn handle(
        &self,
        table: &str,
        server: &str,
        conn: &Arc<Connection>,
    ) -> Result<u64> {
        if let Some((c, h)) = self.handles.lock().get(server) {
            if c.upgrade().is_some_and(|c| Arc::ptr_eq(&c, conn)) {
                return Ok(*h);
            }
        }
        let req = pb::PrepareScanRequest {
            table: table.to_string(),
            scan: Some(convert::scan_to_pb(&self.template)),
            compress: self.compress,
        };
        let resp = conn.call(Method::PrepareScan, &req, &[]).await?;
        let r: pb::PrepareScanResponse = resp.decode("PrepareScanResponse")?;
        self.handles
            .lock()
            .insert(server.to_string(), (Arc::downgrade(conn), r.handle));
        Ok(r.handle)
    }

    /// The server no longer knows the handle: prepare again next time.
    pub(crate) fn forget(&self, server: &str) {
        self.handles.lock().remove(server);
    }
}

/// A scan prepared once and executed many times. Cheap to share between tasks (executions
/// run concurrently); see the module docs.
pub struct PreparedScan {
    inner: Arc<Inner>,
    table: Arc<str>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for PreparedScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedScan")
            .field("table", &self.table)
            .field("columns", &self.shared.columns.len())
            .finish()
    }
}

impl PreparedScan {
    pub(crate) fn new(inner: Arc<Inner>, table: Arc<str>, scan: Scan, compress: bool) -> Self {
        let columns = Columns::new(
            scan.columns
                .iter()
                .filter_map(|c| Some((c.family.clone(), c.qualifier.clone()?)))
                .collect(),
        );
        PreparedScan {
            inner,
            table,
            shared: Arc::new(Shared {
                template: scan,
                columns: Arc::new(columns),
                compress,
                handles: Mutex::new(HashMap::new()),
            }),
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
        let mut scan = self.shared.template.clone();
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
            Arc::clone(&self.shared),
        )
    }

    /// Releases the scan on every server it was prepared on (they release it anyway when the
    /// connection ends or its lease runs out).
    pub async fn close(&self) {
        let handles: Vec<(Weak<Connection>, u64)> =
            self.shared.handles.lock().drain().map(|(_, v)| v).collect();
        for (conn, handle) in handles {
            if let Some(conn) = conn.upgrade() {
                let _ = conn
                    .call(
                        Method::ClosePreparedScan,
                        &pb::ClosePreparedScanRequest { handle },
                        &[],
                    )
                    .await;
            }
        }
    }
}
