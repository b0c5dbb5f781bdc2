//! A global allocator that aborts on any single allocation above [`MAX_ALLOCATION`]: a decoder
//! that sizes a buffer from a length it read before checking it against the data is a crash,
//! whichever sanitizer (or none) the target was built with. libFuzzer's `-malloc_limit_mb`
//! does the same under a sanitizer; this keeps the check in `--sanitizer none` builds and in
//! this crate's tests.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;

/// The largest single allocation a target may make (libFuzzer's `-malloc_limit_mb=512`).
pub const MAX_ALLOCATION: usize = 512 << 20;

pub struct LimitedAlloc;

#[cold]
fn too_large(size: usize) -> ! {
    // Formatting into a stack buffer: allocating here would re-enter the allocator.
    let mut buf = [0u8; 96];
    let mut w = &mut buf[..];
    let _ = writeln!(w, "allocation of {size} bytes exceeds the fuzz limit");
    let n = 96 - w.len();
    let _ = std::io::stderr().write_all(&buf[..n]);
    std::process::abort()
}

// SAFETY: every method forwards to `System` with the caller's own arguments, after a check that
// only reads `size`; the contract of `GlobalAlloc` is `System`'s.
unsafe impl GlobalAlloc for LimitedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > MAX_ALLOCATION {
            too_large(layout.size());
        }
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > MAX_ALLOCATION {
            too_large(layout.size());
        }
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > MAX_ALLOCATION {
            too_large(new_size);
        }
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.dealloc(ptr, layout) }
    }
}
