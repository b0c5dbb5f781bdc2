//! The one iterator trait every sorted source implements: memstore, store-file block, store
//! file, merged view. Keys are internal keys ([`cellar_model::key`]) in their order.

use cellar_model::Result;

/// A positioned cursor over sorted (internal key, value) entries.
///
/// Contract: after any positioning call, either `valid()` is false or `key()`/`value()` refer
/// to the current entry. `key()`/`value()` may only be called while valid. An error leaves the
/// iterator invalid.
pub trait CellIter: Send {
    fn valid(&self) -> bool;
    fn key(&self) -> &[u8];
    fn value(&self) -> &[u8];
    /// Moves to the next entry (invalid past the last).
    fn next(&mut self) -> Result<()>;
    /// Positions at the first entry with key ≥ `target`.
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    /// Positions at the last entry with key ≤ `target` (used by reversed scans to find the
    /// previous row).
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()>;
    fn seek_to_first(&mut self) -> Result<()>;
    /// Advice that `seek(target)` comes next and that about `ahead` bytes of this source
    /// after the target will be read (0: the seek alone, a Get), none at or past the key
    /// `stop` (empty: no bound): a source that would read from the disk for them starts
    /// those reads now, without waiting. A merge asks all its sources before seeking any, so
    /// that the reads of several files overlap. Nothing by default.
    fn prefetch_seek(&mut self, _target: &[u8], _ahead: u64, _stop: &[u8]) {}
    /// What this source holds on disk: its bytes and cells (a merge spreads a scan's
    /// expected length over its sources by these). Nothing by default (memory).
    fn extent(&self) -> Extent {
        Extent::default()
    }
}

/// The bytes and cells a source holds in files ([`CellIter::extent`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extent {
    pub bytes: u64,
    pub cells: u64,
}

impl std::ops::Add for Extent {
    type Output = Extent;
    fn add(self, o: Extent) -> Extent {
        Extent {
            bytes: self.bytes.saturating_add(o.bytes),
            cells: self.cells.saturating_add(o.cells),
        }
    }
}

impl<T: CellIter + ?Sized> CellIter for Box<T> {
    fn valid(&self) -> bool {
        (**self).valid()
    }
    fn key(&self) -> &[u8] {
        (**self).key()
    }
    fn value(&self) -> &[u8] {
        (**self).value()
    }
    fn next(&mut self) -> Result<()> {
        (**self).next()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        (**self).seek(target)
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        (**self).seek_for_prev(target)
    }
    fn seek_to_first(&mut self) -> Result<()> {
        (**self).seek_to_first()
    }
    fn prefetch_seek(&mut self, target: &[u8], ahead: u64, stop: &[u8]) {
        (**self).prefetch_seek(target, ahead, stop)
    }
    fn extent(&self) -> Extent {
        (**self).extent()
    }
}

mod merge;
mod range;

pub use merge::MergeIter;
pub(crate) use range::RangeIter;
