//! Memstore chunks kept for reuse: when a memstore drops (flushed, or its region closed or
//! its table dropped), its standard-size chunks go here instead of back to the OS, and the
//! next memstore takes them (HBase's MSLAB chunk pool).
//!
//! Why: a chunk fresh from the OS costs a page fault that zeroes it, and on a virtual machine
//! the first touch of guest memory can cost far more; a write-heavy server otherwise pays that
//! for every 2 MiB it buffers, flush after flush. Reused chunks hold stale bytes, which is
//! fine: the arena hands out memory uninitialised and the skiplist writes every node in full
//! before publishing it.
//!
//! The pool holds at most [`set_limit`] bytes (`storage.memstore_chunk_pool_bytes`); chunks
//! beyond it are freed. Process-wide, like the allocator it stands in front of.

use parking_lot::Mutex;
use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes the pool may hold unless configured: 256 MiB, two regions' worth of memstore.
pub const DEFAULT_LIMIT: usize = 256 << 20;

static LIMIT: AtomicUsize = AtomicUsize::new(DEFAULT_LIMIT);
static POOL: Mutex<Vec<Chunk>> = Mutex::new(Vec::new());

/// A pooled chunk: memory no arena owns, of the pool's layout.
struct Chunk(NonNull<u8>);

// SAFETY: a pooled chunk is owned by the pool alone; whoever takes it owns it next.
unsafe impl Send for Chunk {}

/// Sets the most bytes the pool holds and frees what is above it.
pub fn set_limit(bytes: usize) {
    LIMIT.store(bytes, Ordering::Relaxed);
    let mut pool = POOL.lock();
    while pool.len() * super::arena::DEFAULT_CHUNK_SIZE > bytes {
        if let Some(chunk) = pool.pop() {
            free(chunk.0);
        }
    }
}

/// Bytes held now.
pub fn held_bytes() -> usize {
    POOL.lock().len() * super::arena::DEFAULT_CHUNK_SIZE
}

/// The layout of every pooled chunk: a standard chunk, aligned to its size.
pub(super) fn layout() -> Layout {
    let size = super::arena::DEFAULT_CHUNK_SIZE;
    match Layout::from_size_align(size, size) {
        Ok(l) => l,
        Err(_) => panic!("memstore chunk pool: {size} is not a power of two"),
    }
}

/// A chunk of [`layout`] from the pool, if it holds one.
pub(super) fn take() -> Option<NonNull<u8>> {
    POOL.lock().pop().map(|c| c.0)
}

/// Hands `chunk` (allocated with [`layout`], no longer used by anyone) to the pool, or frees
/// it when the pool is full.
pub(super) fn give(chunk: NonNull<u8>) {
    let limit = LIMIT.load(Ordering::Relaxed);
    let mut pool = POOL.lock();
    if (pool.len() + 1) * super::arena::DEFAULT_CHUNK_SIZE <= limit {
        pool.push(Chunk(chunk));
    } else {
        drop(pool);
        free(chunk);
    }
}

fn free(chunk: NonNull<u8>) {
    // SAFETY: pooled chunks were allocated with `layout()` by the arena and are owned by no one
    // else once given to the pool.
    unsafe { alloc::dealloc(chunk.as_ptr(), layout()) };
}
