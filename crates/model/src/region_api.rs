//! One region's data operations, in model types: the interface a storage engine offers the
//! code above it (TiKV's `engine_traits` is the model).
//!
//! [`RegionApi`] is what `cellar_storage::region::Region` implements and what its users call:
//! the server's data path (`region_server/data.rs`: reads, writes, increments and appends,
//! checks), the embedded YCSB target and `engine_bench`'s Cellar engine. [`MemRegion`] is a
//! second implementation, a sorted map behind a lock, for fakes (the shell's) and tests; the
//! [`conformance`] checks (feature `conformance`) run against both, so the two cannot drift.
//!
//! Only model types cross it ([`Get`], [`Scan`], [`RowMutation`], [`Cell`], [`CellSink`],
//! [`crate::Error`]): no wire types, so a caller never converts to talk to a region, and no
//! storage types, so a fake needs no storage engine.
//!
//! What it leaves out, on purpose:
//! - the network reactor's calls that never wait (`Region::get_cached_into`,
//!   `Region::try_mutate_deferred` and its pending write): they are about the engine's caches
//!   and WAL rounds, which a fake does not have, and the reactor needs the engine's own types;
//! - increments and appends: the engine writes puts and deletes; the server reads, combines
//!   and writes under its row lock (`region_server/data.rs`), over this trait;
//! - what a read does above the region: a Get's or scan's filter and a scan's batch, caching
//!   and compression are applied by the server (a region ignores them, as the engine does).
//!
//! Methods are generic over the [`CellSink`] so that a read costs no dynamic call per cell:
//! the trait is meant for static dispatch (`R: RegionApi`), not `dyn`.

pub mod memory;

#[cfg(any(test, feature = "conformance"))]
pub mod conformance;

pub use memory::MemRegion;

use crate::cell::{Cell, CellRef, CellSink};
use crate::error::Result;
use crate::mutation::RowMutation;
use crate::query::{Get, Scan};
use bytes::Bytes;

/// The data operations of one open region. Thread-safe implementations take `&self`
/// everywhere; a write is visible to every read that starts after it returns.
pub trait RegionApi {
    /// What [`RegionApi::scan`] returns.
    type Scanner: RowScanner;

    /// Gives the row's cells that `get` asks for to `sink`, in read order (family, qualifier,
    /// newest version first), each family's ended with [`CellSink::end_family`]. Deletes,
    /// versions (the family's and the Get's), TTL and the time range are applied; the filter
    /// is not (see the module's notes). On an error the sink may hold part of the row.
    fn get_into<S: CellSink>(&self, get: &Get, sink: &mut S) -> Result<()>;

    /// [`RegionApi::get`] collected into [`Cell`]s.
    fn get(&self, get: &Get) -> Result<Vec<Cell>> {
        let mut cells = Vec::new();
        self.get_into(get, &mut CollectCells::new(&mut cells))?;
        Ok(cells)
    }

    /// A scanner over the rows `scan` asks for (its range, columns, time range, versions,
    /// limit, direction), seen as they were when it started.
    fn scan(&self, scan: &Scan) -> Result<Self::Scanner>;

    /// Applies a row mutation (puts and deletes) atomically; returns once it is as durable as
    /// the mutation asks. Entries at [`crate::LATEST_TIMESTAMP`] take the region's clock
    /// ([`RegionApi::now_millis`]); a `Delete` at it deletes the newest version.
    fn mutate(&self, m: &RowMutation) -> Result<()>;

    /// Writes what is in memory to files; returns when they are durable.
    fn flush(&self) -> Result<()>;

    /// Compacts every family: `major` rewrites all of a family's files into one, dropping
    /// deleted, expired and excess versions; otherwise the engine's policy picks files.
    fn compact(&self, major: bool) -> Result<()>;

    /// The region's clock, in milliseconds since the epoch: what a write at
    /// [`crate::LATEST_TIMESTAMP`] is stamped with.
    fn now_millis(&self) -> u64;

    /// Stops writes, makes everything written durable and lets the region go.
    fn close(self) -> Result<()>
    where
        Self: Sized;
}

/// Rows of a scan, in order: each item one row's cells (never empty), or an error, after
/// which the scanner ends.
pub trait RowScanner: Iterator<Item = Result<Vec<Cell>>> {
    /// Gives the next row's cells to `sink` (family by family, each ended with
    /// [`CellSink::end_family`]): `false` at the end of the scan. After an error the scanner
    /// is done and the sink may hold part of a row.
    fn next_row_into<S: CellSink>(&mut self, sink: &mut S) -> Result<bool>;
}

/// A [`CellSink`] that appends owned [`Cell`]s to a vector: two copies of each qualifier and
/// value, for readers where that does not matter (the storage engine has a faster one).
pub struct CollectCells<'a> {
    out: &'a mut Vec<Cell>,
}

impl<'a> CollectCells<'a> {
    pub fn new(out: &'a mut Vec<Cell>) -> CollectCells<'a> {
        CollectCells { out }
    }
}

impl CellSink for CollectCells<'_> {
    fn cell(&mut self, c: CellRef<'_>) {
        self.out.push(c.to_cell());
    }
}

/// Gives `cells` (one row's, in read order) to `sink` as a read would: each family's ended
/// with [`CellSink::end_family`].
pub fn replay_cells<S: CellSink>(cells: &[Cell], sink: &mut S) {
    let mut family: Option<&Bytes> = None;
    for c in cells {
        if family.is_some_and(|f| *f != c.family) {
            sink.end_family();
        }
        family = Some(&c.family);
        sink.cell(cell_ref(c));
    }
    if family.is_some() {
        sink.end_family();
    }
}

/// A cell lent to a sink.
fn cell_ref(c: &Cell) -> CellRef<'_> {
    CellRef {
        row: &c.row,
        family: &c.family,
        qualifier: &c.qualifier,
        timestamp: c.timestamp,
        cell_type: c.cell_type,
        seq_id: c.seq_id,
        value: &c.value,
    }
}
