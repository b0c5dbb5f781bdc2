//! BULK_LOAD_REGION: HBase store files (HFiles, `crates/hfile`) brought into a region served
//! here without the write path (`cellar_storage::region::ingest`, `docs/migration.md`).
//!
//! The files are read from the server's own disk, so where they may be is a boundary: only
//! under the configured `bulk_load.dirs`, with symbolic links resolved first; bulk load is off
//! when none is configured. The caller needs CREATE or ADMIN on the table (HBase's rule for
//! bulk loading), checked by the RPC layer before this runs.

use super::{RegionServer, Role};
use crate::bulk_files::{Found, Refusal};
use crate::error::ServerError;
use cellar_hfile::HFile;
use cellar_model::key::{compare_keys, make_key};
use cellar_model::{CellType, Error as ModelError};
use cellar_proto::pb;
use cellar_storage::region::IngestFile;
use std::cmp::Ordering;

/// The file-info key where HBase records a store file's highest sequence id.
const MAX_SEQ_ID: &[u8] = b"MAX_SEQ_ID_KEY";

impl RegionServer {
    /// Loads `files` into region `id` of `table`.
    pub fn bulk_load_call(
        &self,
        table: &str,
        id: u64,
        files: Vec<pb::BulkLoadFile>,
    ) -> Result<pb::BulkLoadRegionResponse, ServerError> {
        if let Role::Master(_) = self.role {
            return Err(ServerError::invalid(
                "BULK_LOAD_REGION goes to the region server serving the region, not the master",
            ));
        }
        self.check_running()?;
        if files.is_empty() {
            return Err(ServerError::invalid("BULK_LOAD_REGION names no file"));
        }
        if self.bulk_files.is_off() {
            return Err(ServerError::invalid(
                "bulk load is off on this server: set bulk_load.dirs in cellar.toml \
                 (or start it with --bulk-load-dir DIR) to the directories it may read files from",
            ));
        }
        let hosted = self.router.region_for_call(table, id)?;
        let mut opened = Vec::with_capacity(files.len());
        for f in files {
            let found = self.allowed_file(&f.path)?;
            let hfile = self
                .bulk_files
                .open_hfile(&found)
                .map_err(|e| ServerError::invalid(e.to_string()))?;
            let seq = hfile.info.long(MAX_SEQ_ID).unwrap_or(0);
            opened.push((seq, f, hfile));
        }
        // Oldest first: a later file's cells are newer at the same coordinates.
        opened.sort_by_key(|(seq, _, _)| *seq);
        let bytes_read = opened.iter().map(|(_, _, h)| h.size()).sum();
        let count = opened.len() as u64;
        let cells = hosted.with(|region| {
            let info = region.info().clone();
            let ingest = opened
                .into_iter()
                .map(|(_, f, hfile)| {
                    let bounds = Bounds {
                        start: info.start_key.to_vec(),
                        end: info.end_key.to_vec(),
                        keep_from: f.keep_from.to_vec(),
                        keep_to: f.keep_to.to_vec(),
                    };
                    let family = f.family.clone();
                    IngestFile {
                        family: f.family,
                        fill: Box::new(move |w, seq| copy_cells(&hfile, &family, &bounds, w, seq)),
                    }
                })
                .collect();
            Ok(region.ingest(ingest)?)
        })?;
        tracing::info!(
            table,
            region = id,
            files = count,
            cells,
            bytes_read,
            "bulk loaded"
        );
        Ok(pb::BulkLoadRegionResponse {
            cells,
            files: count,
            bytes_read,
        })
    }
}

impl RegionServer {
    /// `given` (a path, a file:// or an hdfs:// URL), if it is a file under `bulk_load.dirs`.
    fn allowed_file(&self, given: &str) -> Result<Found, ServerError> {
        let refused = || {
            ServerError::PermissionDenied(format!(
                "bulk load file '{given}' is not under this server's bulk_load.dirs"
            ))
        };
        match self.bulk_files.find(given) {
            Ok(Some(found)) => Ok(found),
            // Missing and outside answer alike: what exists outside is not the caller's to learn.
            Ok(None) | Err(Refusal::NotAllowed) => Err(refused()),
            Err(Refusal::Io(e)) => Err(ServerError::invalid(format!(
                "bulk load file '{given}': {e}"
            ))),
        }
    }
}

/// Which rows a file may hold (the region's) and which of them to load (the caller's half).
struct Bounds {
    start: Vec<u8>,
    end: Vec<u8>,
    keep_from: Vec<u8>,
    keep_to: Vec<u8>,
}

impl Bounds {
    fn keeps(&self, row: &[u8]) -> bool {
        row >= self.keep_from.as_slice()
            && (self.keep_to.is_empty() || row < self.keep_to.as_slice())
    }

    fn in_region(&self, row: &[u8]) -> bool {
        row >= self.start.as_slice() && (self.end.is_empty() || row < self.end.as_slice())
    }
}

/// Copies the cells of `hfile` into a store file, every key at `seq`. Cells identical but for
/// HBase's sequence id keep the first (HBase orders them newest first).
fn copy_cells(
    hfile: &HFile,
    family: &str,
    bounds: &Bounds,
    w: &mut cellar_storage::storefile::StoreFileWriter,
    seq: u64,
) -> cellar_model::Result<u64> {
    let name = hfile.path().display().to_string();
    let bad = |what: String| ModelError::InvalidArgument(format!("{name}: {what}"));
    let mut last: Vec<u8> = Vec::new();
    let mut n = 0;
    for cell in hfile.cells() {
        let cell = cell.map_err(|e| ModelError::InvalidArgument(e.to_string()))?;
        if !bounds.keeps(&cell.row) {
            continue;
        }
        if cell.family != family.as_bytes() {
            return Err(bad(format!(
                "holds cells of family '{}', loaded into family '{family}'",
                String::from_utf8_lossy(&cell.family)
            )));
        }
        if !bounds.in_region(&cell.row) {
            return Err(bad(format!(
                "row '{}' is outside the region [{}, {}): split the file at the region's boundaries",
                String::from_utf8_lossy(&cell.row),
                String::from_utf8_lossy(&bounds.start),
                String::from_utf8_lossy(&bounds.end)
            )));
        }
        if cell.is_mob_reference() {
            return Err(bad(crate::bulk_files::mob_reference(&cell.row)));
        }
        let kind = CellType::from_code(cell.kind)
            .ok_or_else(|| bad(format!("a cell of type {}", cell.kind)))?;
        let ts = u64::try_from(cell.timestamp)
            .map_err(|_| bad(format!("a negative timestamp {}", cell.timestamp)))?;
        let key = make_key(&cell.row, &cell.qualifier, ts, kind, seq);
        if n > 0 && compare_keys(&key, &last) == Ordering::Equal {
            continue;
        }
        w.add(&key, &cell.value)?;
        last = key;
        n += 1;
    }
    Ok(n)
}
