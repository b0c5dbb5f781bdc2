//! A memstore chunk: its standard size, and how a fresh one is made from the allocator. Both
//! the [arena](super::arena) and the [chunk pool](super::chunk_pool) make chunks, so this sits
//! below the two of them.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// Default chunk size: 2 MiB (HBase's MSLAB chunk), one transparent huge page. Searches hop
/// between nodes spread over the whole memstore; with 4 KiB pages nearly every hop is also a
/// TLB miss.
pub(crate) const DEFAULT_CHUNK_SIZE: usize = HUGE_PAGE;

/// Chunks of a multiple of this size are aligned to it and offered to the kernel as
/// transparent huge pages (`MADV_HUGEPAGE`; a no-op where THP is off).
pub(super) const HUGE_PAGE: usize = 2 << 20;

/// A chunk of `layout` (non-zero size) from the allocator, offered to the kernel as transparent
/// huge pages when its size is a multiple of one.
pub(super) fn fresh_chunk(layout: Layout) -> NonNull<u8> {
    // SAFETY: `layout` has a non-zero size (small chunks are ≥ 4 KiB, `alloc` is never asked
    // for zero bytes, and the pool's layout is a whole chunk).
    let raw = unsafe { alloc::alloc(layout) };
    let Some(chunk) = NonNull::new(raw) else {
        alloc::handle_alloc_error(layout)
    };
    // Miri cannot run `madvise`; the advice changes no contents, so skipping it there leaves
    // what Miri checks unchanged.
    if layout.size().is_multiple_of(HUGE_PAGE) && !cfg!(miri) {
        // SAFETY: the range is exactly the chunk just allocated, huge-page aligned; the advice
        // changes only how the kernel backs it, never its contents. Failure is harmless.
        unsafe {
            libc::madvise(chunk.as_ptr().cast(), layout.size(), libc::MADV_HUGEPAGE);
        }
    }
    chunk
}
