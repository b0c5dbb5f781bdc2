//! Edits replicated in from another cluster (an HBase replication source calling
//! `ReplicateWALEntry` on the HBase front end, `hbase/admin_service/replication_sink.rs`): applied as the
//! source wrote them — every cell with its own timestamp and type, each row's cells of one
//! WAL entry as one atomic row mutation, entries in the order they came.
//!
//! Delivery is at least once (a source resends a batch whose answer it lost), and that is
//! safe: every replicated cell carries a concrete timestamp (increments and appends arrive as
//! the puts of their results), so applying a batch twice leaves what reads return unchanged.
//! The answer goes only once every edit is in the WAL, as any write's.
//!
//! Rows are written through the same deferred path as the reactor's puts: their WAL records
//! are buffered and reach the OS together, a few writes per batch rather than one per row.
//! On a cluster's region server, rows of regions served elsewhere go on to their servers
//! through a client of the cluster ([`super::RowForwarder`], set by the node), as HBase's sink
//! writes through a connection to its own cluster.

use super::RegionServer;
use crate::error::ServerError;
use cellar_model::{MutationKind, RowMutation};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One table's share of a replicated batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicatedTable {
    pub table: String,
    /// Row mutations in the source's order.
    pub rows: Vec<RowMutation>,
}

/// Rows whose WAL records may wait unwritten before they are finished together.
const DEFERRED_ROWS: usize = 1024;

/// What the sink has applied since the server started (HBase's `sink.*` metrics).
#[derive(Debug, Default)]
pub struct SinkStats {
    /// Calls applied whole (`sink.appliedBatches`).
    pub batches: AtomicU64,
    /// Calls that failed (`sink.failedBatches`): the source sends them again.
    pub failed_batches: AtomicU64,
    /// WAL entries applied (`sink.appliedOps`).
    pub entries: AtomicU64,
    /// Cells applied, and their encoded bytes.
    pub cells: AtomicU64,
    pub bytes: AtomicU64,
    /// Bulk-loaded files replicated in (`sink.appliedHFiles`), and the cells read from them.
    pub hfiles: AtomicU64,
    pub hfile_cells: AtomicU64,
    /// The write time (ms since the epoch, the source's clock) of the last entry applied, and
    /// when it was applied (this server's clock): their difference is the lag
    /// (`sink.ageOfLastAppliedOp`).
    pub last_write_ms: AtomicU64,
    pub last_applied_ms: AtomicU64,
}

impl SinkStats {
    /// Counts a batch applied whole.
    pub fn applied(&self, entries: u64, cells: u64, bytes: u64, last_write_ms: Option<u64>) {
        self.batches.fetch_add(1, Relaxed);
        self.entries.fetch_add(entries, Relaxed);
        self.cells.fetch_add(cells, Relaxed);
        self.bytes.fetch_add(bytes, Relaxed);
        if let Some(w) = last_write_ms {
            self.last_write_ms.store(w, Relaxed);
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            self.last_applied_ms.store(now, Relaxed);
        }
    }

    /// Counts the bulk-loaded files (and their cells) of a batch applied whole.
    pub fn bulk_loaded(&self, files: u64, cells: u64) {
        self.hfiles.fetch_add(files, Relaxed);
        self.hfile_cells.fetch_add(cells, Relaxed);
    }

    /// How far behind the source the last batch was when it was applied, in ms (0 before
    /// any).
    pub fn lag_ms(&self) -> u64 {
        self.last_applied_ms
            .load(Relaxed)
            .saturating_sub(self.last_write_ms.load(Relaxed))
    }
}

impl RegionServer {
    /// Applies a replicated batch, table by table, each table's rows in order. The first
    /// error (a table or family this cluster lacks, a region not served here) stops it and is
    /// returned, the rows before it applied: the source sends the whole batch again, and
    /// applying those rows twice changes nothing.
    pub fn apply_replicated(&self, batch: &[ReplicatedTable]) -> Result<(), ServerError> {
        self.check_running()?;
        for t in batch {
            self.apply_replicated_table(t)?;
        }
        Ok(())
    }

    fn apply_replicated_table(&self, t: &ReplicatedTable) -> Result<(), ServerError> {
        // A cluster's region server sends rows of regions served elsewhere on through a client
        // of the cluster; a standalone server (or a master) serves every region itself.
        let forward = self.row_forwarder.lock().clone();
        if let (Err(e), None) = (self.router.require(&t.table), &forward) {
            return Err(e);
        }
        let mut elsewhere = Vec::new();
        let mut pending = Vec::new();
        let outcome = (|| {
            for m in &t.rows {
                let here = self
                    .router
                    .locate(&t.table, &m.row)
                    .ok()
                    .filter(|h| h.is_open() && h.check_row(&m.row).is_ok());
                let region_id = match (here, &forward) {
                    (Some(h), _) => h.info.id,
                    (None, Some(_)) => {
                        elsewhere.push(m.clone());
                        continue;
                    }
                    (None, None) => {
                        return Err(ServerError::not_serving(
                            &t.table,
                            0,
                            "no region serving the row is open here",
                        ))
                    }
                };
                match self.mutate_deferred(&t.table, region_id, m) {
                    Some(put) => pending.push(put?),
                    None => {
                        // The row is locked by another call (or by an earlier row of this
                        // batch), or the write could wait: finish what is buffered, then
                        // write this one on this thread, which may wait.
                        finish_all(&mut pending)?;
                        self.mutate(&t.table, region_id, m, MutationKind::PutDelete, None)?;
                    }
                }
                if pending.len() >= DEFERRED_ROWS {
                    finish_all(&mut pending)?;
                }
            }
            Ok(())
        })();
        // Every buffered write is finished (or fails) before its row lock goes, whatever
        // happened; the first error is the batch's.
        let finished = finish_all(&mut pending);
        outcome.and(finished)?;
        match forward {
            Some(send) if !elsewhere.is_empty() => send(&t.table, elsewhere),
            _ => Ok(()),
        }
    }
}

/// Finishes every deferred write (their WAL records reach the OS in one write); the first
/// error, after all are finished.
fn finish_all(pending: &mut Vec<super::DeferredPut>) -> Result<(), ServerError> {
    let mut first = Ok(());
    for put in pending.drain(..) {
        let done = put.finish();
        if first.is_ok() {
            first = done;
        }
    }
    first
}
