//! A chunked bump allocator: the memstore copies every cell into it, so the write path makes
//! no heap allocation per cell.
//!
//! HOT PATH: `alloc` runs once per insert. It must not allocate except to start a new chunk,
//! must not lock, and must not touch bytes it has already handed out.
//!
//! Invariants:
//! - every chunk is allocated with `std::alloc::alloc` (or taken from the
//!   [chunk pool](super::chunk_pool)) and freed (or given back) only in `Drop`, so a pointer
//!   returned by [`Arena::alloc`] stays valid, and never moves, for the arena's whole life;
//! - allocations never overlap, so the owner may initialise a fresh allocation while other
//!   threads read older ones;
//! - `cur..cur + remaining` is the unused tail of the newest small-cell chunk.
//!
//! Thread-safety: `alloc` takes `&mut self`; the memstore keeps the arena under its writer
//! mutex. Readers never touch the arena itself, only memory it handed out.

use super::chunk::{fresh_chunk, HUGE_PAGE};
use super::chunk_pool;
use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// Alignment of every chunk; allocations may ask for at most this.
pub(crate) const CHUNK_ALIGN: usize = 16;

/// A bump allocator over chunks that are freed together when it drops.
pub(crate) struct Arena {
    /// Every chunk ever allocated with the layout it was allocated with.
    chunks: Vec<(NonNull<u8>, Layout)>,
    /// Next free byte of the current chunk (dangling when there is none).
    cur: NonNull<u8>,
    /// Free bytes at `cur`.
    remaining: usize,
    chunk_size: usize,
    /// Bytes handed out, counting alignment padding and the tails abandoned in full chunks.
    used: usize,
    /// Bytes of all chunks.
    reserved: usize,
}

// SAFETY: the arena exclusively owns its chunks (like a `Vec<Box<[u8]>>`); the raw pointers
// are only there so handed-out memory is never re-borrowed through a `Box`. Moving the arena
// to another thread moves that ownership.
unsafe impl Send for Arena {}

impl Arena {
    /// An arena that allocates chunks of `chunk_size` bytes (at least 4 KiB); none yet.
    pub(crate) fn new(chunk_size: usize) -> Arena {
        Arena {
            chunks: Vec::new(),
            cur: NonNull::dangling(),
            remaining: 0,
            chunk_size: chunk_size.max(4096),
            used: 0,
            reserved: 0,
        }
    }

    /// Returns `size` bytes aligned to `align` (a power of two ≤ [`CHUNK_ALIGN`]),
    /// uninitialised, valid and never moved until the arena drops. `size` must be non-zero.
    ///
    /// Requests above a quarter of a chunk get a dedicated chunk, so the current chunk's tail
    /// is not wasted on them.
    pub(crate) fn alloc(&mut self, size: usize, align: usize) -> NonNull<u8> {
        debug_assert!(size > 0);
        debug_assert!(align.is_power_of_two() && align <= CHUNK_ALIGN);
        let pad = self.cur.as_ptr().addr().wrapping_neg() & (align - 1);
        if let Some(needed) = size.checked_add(pad) {
            if needed <= self.remaining {
                // SAFETY: `pad < needed <= remaining`, so the result lies inside the current
                // chunk (invariant on `cur..cur + remaining`).
                let ptr = unsafe { self.cur.add(pad) };
                // SAFETY: `needed <= remaining`: at most one past the chunk's end.
                self.cur = unsafe { self.cur.add(needed) };
                self.remaining -= needed;
                self.used += needed;
                return ptr;
            }
        }
        if size > self.chunk_size / 4 {
            let ptr = self.new_chunk(size);
            self.used += size;
            return ptr;
        }
        // Start a new small-cell chunk; the old tail is abandoned and counted as used.
        self.used += self.remaining;
        let chunk = self.new_chunk(self.chunk_size);
        // SAFETY: `size <= chunk_size / 4`, so both offsets lie inside the new chunk, which
        // is `CHUNK_ALIGN`-aligned and so needs no padding.
        self.cur = unsafe { chunk.add(size) };
        self.remaining = self.chunk_size - size;
        self.used += size;
        chunk
    }

    /// Allocates a chunk of `size` bytes and records it for `Drop`.
    fn new_chunk(&mut self, size: usize) -> NonNull<u8> {
        let pooled = chunk_pool::layout();
        if size == pooled.size() {
            if let Some(chunk) = chunk_pool::take() {
                self.chunks.push((chunk, pooled));
                self.reserved += size;
                return chunk;
            }
        }
        let huge = size.is_multiple_of(HUGE_PAGE);
        let align = if huge { HUGE_PAGE } else { CHUNK_ALIGN };
        let layout = match Layout::from_size_align(size, align) {
            Ok(layout) => layout,
            Err(_) => panic!("memstore arena: cannot lay out a chunk of {size} bytes"),
        };
        let chunk = fresh_chunk(layout);
        self.chunks.push((chunk, layout));
        self.reserved += size;
        chunk
    }

    /// Bytes handed out, including alignment padding and the abandoned tails of full chunks.
    pub(crate) fn used_bytes(&self) -> usize {
        self.used
    }

    /// Bytes of all chunks held.
    pub(crate) fn reserved_bytes(&self) -> usize {
        self.reserved
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        let pooled = chunk_pool::layout();
        for &(chunk, layout) in &self.chunks {
            // The owner guarantees no handed-out pointer is used after the arena drops (the
            // memstore drops it last, when no iterator remains), so the chunk is free to reuse.
            if layout == pooled {
                chunk_pool::give(chunk);
                continue;
            }
            // SAFETY: each chunk was allocated by `alloc::alloc` with exactly this layout and
            // is freed only here, once.
            unsafe { alloc::dealloc(chunk.as_ptr(), layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memstore::chunk::DEFAULT_CHUNK_SIZE;

    #[test]
    fn allocations_are_aligned_and_disjoint() {
        let mut arena = Arena::new(4096);
        let mut spans = Vec::new();
        for i in 1..2000usize {
            let size = i % 97 + 1;
            let align = 1 << (i % 4);
            let p = arena.alloc(size, align).as_ptr();
            assert_eq!(p.addr() % align, 0);
            // SAFETY: `p` is a fresh allocation of `size` bytes.
            unsafe { std::ptr::write_bytes(p, (i % 251) as u8, size) };
            spans.push((p, size, (i % 251) as u8));
        }
        for &(p, size, byte) in &spans {
            // SAFETY: the arena is alive and allocations are disjoint, so each span still
            // holds what was written to it.
            let bytes = unsafe { std::slice::from_raw_parts(p, size) };
            assert!(bytes.iter().all(|&b| b == byte));
        }
        assert!(arena.used_bytes() <= arena.reserved_bytes());
        assert!(arena.chunks.len() > 1);
    }

    #[test]
    fn big_requests_get_dedicated_chunks() {
        let mut arena = Arena::new(4096);
        arena.alloc(10, 8);
        let before = arena.remaining;
        arena.alloc(10_000, 8);
        assert_eq!(arena.remaining, before, "small chunk untouched");
        assert_eq!(arena.chunks.len(), 2);
        assert_eq!(arena.reserved_bytes(), 4096 + 10_000);
        assert_eq!(arena.used_bytes(), 10 + 10_000);
    }

    #[test]
    fn empty_arena_holds_nothing() {
        let arena = Arena::new(DEFAULT_CHUNK_SIZE);
        assert_eq!(arena.used_bytes(), 0);
        assert_eq!(arena.reserved_bytes(), 0);
    }
}
