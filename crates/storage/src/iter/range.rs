//! Restricts a source to rows in `[start, end)`: how a daughter region reads the half of its
//! parent's store file that belongs to it (a reference file).

use super::CellIter;
use cellar_model::key::{compare_keys, first_on_row};
use cellar_model::Result;
use std::cmp::Ordering;

pub struct RangeIter<I> {
    inner: I,
    /// Smallest key of the first row in range (empty: unbounded).
    start_key: Vec<u8>,
    /// Smallest key of the first row past the range (empty: unbounded).
    end_key: Vec<u8>,
}

impl<I: CellIter> RangeIter<I> {
    /// Rows in `[start, end)`; an empty bound is unbounded.
    pub fn new(inner: I, start: &[u8], end: &[u8]) -> RangeIter<I> {
        RangeIter {
            inner,
            start_key: if start.is_empty() {
                Vec::new()
            } else {
                first_on_row(start)
            },
            end_key: if end.is_empty() {
                Vec::new()
            } else {
                first_on_row(end)
            },
        }
    }

    fn below_end(&self, key: &[u8]) -> bool {
        self.end_key.is_empty() || compare_keys(key, &self.end_key) == Ordering::Less
    }

    fn above_start(&self, key: &[u8]) -> bool {
        self.start_key.is_empty() || compare_keys(key, &self.start_key) != Ordering::Less
    }
}

impl<I: CellIter> CellIter for RangeIter<I> {
    fn valid(&self) -> bool {
        self.inner.valid() && self.below_end(self.inner.key()) && self.above_start(self.inner.key())
    }

    fn key(&self) -> &[u8] {
        self.inner.key()
    }

    fn value(&self) -> &[u8] {
        self.inner.value()
    }

    fn next(&mut self) -> Result<()> {
        self.inner.next()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        if !self.above_start(target) {
            let start = self.start_key.clone();
            return self.inner.seek(&start);
        }
        self.inner.seek(target)
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        if !self.below_end(target) {
            // Last key strictly before the end row: the end row's smallest key is a seek key
            // no real cell equals, so "≤" there is "<".
            let end = self.end_key.clone();
            return self.inner.seek_for_prev(&end);
        }
        self.inner.seek_for_prev(target)
    }

    fn seek_to_first(&mut self) -> Result<()> {
        if self.start_key.is_empty() {
            self.inner.seek_to_first()
        } else {
            let start = self.start_key.clone();
            self.inner.seek(&start)
        }
    }
}
