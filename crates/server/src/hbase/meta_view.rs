//! `hbase:meta` as an HBase client reads it, computed from Cellar's catalog: one row per
//! region (`info:regioninfo`, `info:server`, `info:serverstartcode`, `info:seqnumDuringOpen`,
//! `info:state`) and one per table (`table:state`), in meta's own row order.

use super::{HbaseError, HbaseService};
use bytes::Bytes;
use cellar_model::filter::Filter;
use cellar_model::Cell;

/// A scan of meta, in HBase's terms.
#[derive(Debug, Clone, Default)]
pub(crate) struct MetaScan {
    pub start: Bytes,
    pub include_start: bool,
    /// Empty: no bound.
    pub stop: Bytes,
    pub include_stop: bool,
    pub reversed: bool,
    /// Families to return (empty: all); columns as (family, qualifier) narrow further.
    pub families: Vec<Bytes>,
    pub columns: Vec<(Bytes, Bytes)>,
    pub filter: Option<Filter>,
    /// At most this many rows (0: no limit).
    pub limit: usize,
}

/// The rows `scan` selects, in scan order; each row's cells in HBase's cell order.
pub(crate) fn scan(svc: &HbaseService, scan: &MetaScan) -> Result<Vec<Vec<Cell>>, HbaseError> {
    let _ = (svc, scan);
    Ok(Vec::new())
}

/// One meta row (empty when absent), narrowed to `families`/`columns` as in [`MetaScan`].
pub(crate) fn get(
    svc: &HbaseService,
    row: &[u8],
    families: &[Bytes],
    columns: &[(Bytes, Bytes)],
) -> Result<Vec<Cell>, HbaseError> {
    let _ = (svc, row, families, columns);
    Ok(Vec::new())
}
