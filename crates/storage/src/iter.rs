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
}

pub mod merge;
pub mod range;

pub use merge::MergeIter;
pub use range::RangeIter;
