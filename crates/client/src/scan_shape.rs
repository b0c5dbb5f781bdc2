//! What the executions of one prepared scan share: its shape (template scan, column list,
//! compression) and its handle on each server (see `prepared.rs`). Apart from `prepared.rs`
//! so scanners can run it without depending on the `PreparedScan` handle that makes them.

use crate::connection::Connection;
use crate::error::Result;
use cellar_model::Scan;
use cellar_proto::convert;
use cellar_proto::pb::{self, Method};
use cellar_proto::prepared::Columns;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// A prepared scan's shape and its handle on each server it was prepared on: what the
/// executions (scanners) of one [`PreparedScan`](crate::PreparedScan) share.
pub(crate) struct ScanShape {
    pub(crate) template: Scan,
    pub(crate) columns: Arc<Columns>,
    pub(crate) compress: bool,
    /// Per server: the connection it was prepared on, and its handle there.
    handles: Mutex<HashMap<String, (Weak<Connection>, u64)>>,
}

impl ScanShape {
    pub(crate) fn new(scan: Scan, compress: bool) -> Self {
        let columns = Columns::new(
            scan.columns
                .iter()
                .filter_map(|c| Some((c.family.clone(), c.qualifier.clone()?)))
                .collect(),
        );
        ScanShape {
            template: scan,
            columns: Arc::new(columns),
            compress,
            handles: Mutex::new(HashMap::new()),
        }
    }

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

    /// See [`PreparedScan::close`](crate::PreparedScan::close).
    pub(crate) async fn close(&self) {
        let handles: Vec<(Weak<Connection>, u64)> =
            self.handles.lock().drain().map(|(_, v)| v).collect();
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
