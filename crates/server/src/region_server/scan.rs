//! The region server's scan calls: which region a scan opens on, the configured defaults,
//! and the running check, around the [`ScannerRegistry`](crate::scanners::ScannerRegistry)
//! that keeps scanners, and PREPARE_SCAN around the prepared-scan registry.

use super::RegionServer;
use crate::error::ServerError;
use crate::prepared::PreparedScan;
use crate::scanners::{ResultFormat, ScanBatch};
use cellar_model::{Cell, Scan};
use cellar_proto::prepared::Columns;
use std::sync::Arc;

impl RegionServer {
    /// Opens a scanner on a region for connection `conn_id` and returns its first `rows`
    /// results (0: the configured default caching).
    pub fn scan_open(
        &self,
        conn_id: u64,
        table: &str,
        region_id: u64,
        scan: &Scan,
        rows: u32,
        format: ResultFormat,
    ) -> Result<ScanBatch, ServerError> {
        let hosted = self.data_region(table, region_id)?;
        let rows = if rows == 0 {
            self.config.scanner.default_caching
        } else {
            rows
        };
        let max_bytes = self.config.scanner.max_result_bytes;
        self.scanners
            .open_region(conn_id, hosted, scan, rows, max_bytes, format)
    }

    /// The next `rows` results of an open scanner; `rows == 0` only renews its lease.
    pub fn scan_next(&self, scanner_id: u64, rows: u32) -> Result<ScanBatch, ServerError> {
        self.scan_next_in_order(scanner_id, rows, None)
    }

    /// [`RegionServer::scan_next`] for call number `call_seq` of the scanner, if the caller
    /// numbers its calls: any other number than the scanner's next one is refused before
    /// anything is read, and the scanner stays as it was.
    pub fn scan_next_in_order(
        &self,
        scanner_id: u64,
        rows: u32,
        call_seq: Option<u64>,
    ) -> Result<ScanBatch, ServerError> {
        self.check_running()?;
        let max_bytes = self.config.scanner.max_result_bytes;
        self.scanners.next(scanner_id, rows, call_seq, max_bytes)
    }

    /// A scanner over `rows`, computed whole by the caller (the HBase front end's
    /// `hbase:meta`), for connection `conn_id`: the first `first` of them (0: the configured
    /// default caching) answered now, the rest kept under a lease for the next calls.
    pub fn scan_open_rows(
        &self,
        conn_id: u64,
        rows: Vec<Vec<Cell>>,
        first: u32,
        format: ResultFormat,
    ) -> ScanBatch {
        let first = if first == 0 {
            self.config.scanner.default_caching
        } else {
            first
        };
        self.scanners.open_rows(conn_id, rows, first, format)
    }

    /// Closes a scanner; closing one that is already gone is not an error.
    pub fn scan_close(&self, scanner_id: u64) {
        self.scanners.close(scanner_id);
    }

    /// Counts call number `call_seq` of an open scanner that is not a next (a close, or the
    /// open itself); see [`ScannerRegistry::take_call_seq`](crate::scanners::ScannerRegistry::take_call_seq).
    pub fn scan_take_call_seq(&self, scanner_id: u64, call_seq: u64) -> Result<(), ServerError> {
        self.scanners.take_call_seq(scanner_id, call_seq)
    }

    /// With authorization on, a scanner serves only the connection that opened it (its rows
    /// were checked for that connection's user), as HBase checks a scanner's owner: another
    /// connection is told the scanner is unknown.
    pub fn check_scanner_owner(&self, conn_id: u64, scanner_id: u64) -> Result<(), ServerError> {
        if !self.authz.enabled() {
            return Ok(());
        }
        match self.scanners.owner(scanner_id) {
            Some(owner) if owner != conn_id => Err(ServerError::UnknownScanner(scanner_id)),
            _ => Ok(()),
        }
    }

    /// PREPARE_SCAN: checks the scan against the table and keeps it for connection `conn_id`.
    pub fn prepare_scan(
        &self,
        conn_id: u64,
        table: &str,
        scan: Scan,
        compress: bool,
    ) -> Result<u64, ServerError> {
        let route = self.router.require(table)?;
        for c in &scan.columns {
            if route.schema.family(&c.family).is_none() {
                return Err(ServerError::NoSuchFamily {
                    table: table.to_string(),
                    family: String::from_utf8_lossy(&c.family).into_owned(),
                });
            }
        }
        if scan.batch != 0 {
            return Err(ServerError::invalid(
                "a prepared scan returns whole rows: its scan's batch must be 0",
            ));
        }
        let columns = Columns::new(
            scan.columns
                .iter()
                .filter_map(|c| Some((c.family.clone(), c.qualifier.clone()?)))
                .collect(),
        );
        let mut template = scan;
        template.start_row = Default::default();
        template.stop_row = Default::default();
        template.limit = 0;
        self.prepared.prepare(
            conn_id,
            PreparedScan {
                table: table.to_string(),
                scan: template,
                columns: Arc::new(columns),
                compress,
            },
        )
    }
}
