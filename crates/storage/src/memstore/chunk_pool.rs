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
//!
//! Chunks made ahead ([`keep_ready`], `storage.memstore_chunks_ready_bytes`): a server also
//! keeps a few fresh chunks, already faulted in, so a writer that needs one finds it ready
//! instead of waiting for the kernel to zero it (when the thread falls behind, the writer
//! faults one in itself, as before). On a 2-vCPU virtual machine a fresh 2 MiB chunk took
//! about 4.5 ms of page faults on the reactor thread that asked for it, and the ten regions
//! of a table fill their chunks at the same pace, so they asked together: the load's p99.9
//! was 7 ms with fresh chunks against 1.6 ms with pooled ones. A background thread
//! (`cellar-chunk-prep`) pays those faults instead, topping the pool up whenever a writer
//! takes a chunk from it.
//!
//! Idle pools shrink ([`trim_if_idle`]): once no memstore has taken or given a chunk for
//! [`IDLE`], pooled chunks beyond the ready ones go back to the OS. Writes that stopped leave
//! no memory behind that reads could use for the page cache (at 10 M entries under a 4 GiB
//! cap, the ~400 MB kept after the writes was the largest difference from RocksDB's process).

use super::chunk::{fresh_chunk, DEFAULT_CHUNK_SIZE};
use parking_lot::{Condvar, Mutex};
use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};
use std::time::{Duration, Instant};

/// Bytes the pool may hold unless configured: 1 GiB, a memstore of 128 MiB in each of eight
/// regions. Below what a server's memstores hold together, chunks freed by one flush go back
/// to the OS and the next writes fault fresh ones in (HBase's pool may hold its whole global
/// memstore, 40 % of the heap).
pub const DEFAULT_LIMIT: usize = 1 << 30;

/// Fresh chunks a server keeps ready unless configured: 32 MiB, enough for every region of
/// a 16-region table to start a chunk at once.
pub const DEFAULT_READY: usize = 32 << 20;

static LIMIT: AtomicUsize = AtomicUsize::new(DEFAULT_LIMIT);
/// Chunks [`keep_ready`] keeps in the pool; 0 until a server asks.
static READY: AtomicUsize = AtomicUsize::new(0);
static POOL: Mutex<Vec<Chunk>> = Mutex::new(Vec::new());
/// Signalled when the pool falls below [`READY`] chunks (or the targets change).
static LOW: Condvar = Condvar::new();

/// How long the pool goes without a chunk taken or given before [`trim_if_idle`] frees what
/// is beyond the ready chunks.
pub const IDLE: Duration = Duration::from_secs(10);

/// Milliseconds since [`epoch`] of the last take or give.
static LAST_USE_MS: AtomicU64 = AtomicU64::new(0);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    epoch().elapsed().as_millis() as u64
}

/// Frees the pooled chunks beyond the ready ones if the pool has been idle for [`IDLE`];
/// returns the bytes freed. Called now and then by a background thread (the flush thread
/// when it has nothing to do).
pub fn trim_if_idle() -> usize {
    trim_idle_for(IDLE)
}

/// [`trim_if_idle`] with another idle time.
pub fn trim_idle_for(idle: Duration) -> usize {
    let idle_ms = idle.as_millis() as u64;
    if now_ms().saturating_sub(LAST_USE_MS.load(Ordering::Relaxed)) < idle_ms {
        return 0;
    }
    let keep = ready_target();
    let extra: Vec<Chunk> = {
        let mut pool = POOL.lock();
        let at = keep.min(pool.len());
        pool.split_off(at)
    };
    let freed = extra.len() * DEFAULT_CHUNK_SIZE;
    for chunk in extra {
        free(chunk.0);
    }
    if freed > 0 {
        // Once one 2 MiB chunk was freed, glibc serves the next from its heap rather than a
        // mapping of its own, and keeps it there when freed: give the pages back too.
        crate::heap::release_free_memory();
        tracing::debug!(bytes = freed, "freed idle memstore chunks");
    }
    freed
}

/// A pooled chunk: memory no arena owns, of the pool's layout.
struct Chunk(NonNull<u8>);

// SAFETY: a pooled chunk is owned by the pool alone; whoever takes it owns it next.
unsafe impl Send for Chunk {}

/// Sets the most bytes the pool holds and frees what is above it.
pub fn set_limit(bytes: usize) {
    LIMIT.store(bytes, Ordering::Relaxed);
    let mut pool = POOL.lock();
    while pool.len() * DEFAULT_CHUNK_SIZE > bytes {
        if let Some(chunk) = pool.pop() {
            free(chunk.0);
        }
    }
}

/// Bytes held now.
pub fn held_bytes() -> usize {
    POOL.lock().len() * DEFAULT_CHUNK_SIZE
}

/// Keeps `bytes` of fresh chunks (rounded down to whole chunks, within the pool's limit)
/// ready in the pool, made by a background thread started on the first call. `0` stops making
/// them; chunks already made stay pooled.
pub fn keep_ready(bytes: usize) {
    READY.store(bytes / DEFAULT_CHUNK_SIZE, Ordering::Relaxed);
    static START: Once = Once::new();
    START.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("cellar-chunk-prep".into())
            .spawn(prepare_forever);
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the memstore chunk thread; writers will fault chunks in themselves");
        }
    });
    let _pool = POOL.lock();
    LOW.notify_one();
}

/// The chunks the pool should hold ready now.
fn ready_target() -> usize {
    let by_limit = LIMIT.load(Ordering::Relaxed) / DEFAULT_CHUNK_SIZE;
    READY.load(Ordering::Relaxed).min(by_limit)
}

/// The body of `cellar-chunk-prep`: waits until the pool is below its target, then makes one
/// chunk with the pool unlocked, so writers taking chunks never wait for the page faults.
/// It runs at idle priority: with every CPU busy, a reactor that finds no chunk ready faults
/// one in itself, as without this thread, rather than waiting behind it for a CPU.
fn prepare_forever() {
    lower_priority();
    loop {
        {
            let mut pool = POOL.lock();
            while pool.len() >= ready_target() {
                LOW.wait(&mut pool);
            }
        }
        let chunk = fresh_chunk(layout());
        prefault(chunk);
        let mut pool = POOL.lock();
        if pool.len() < ready_target() {
            pool.push(Chunk(chunk));
        } else {
            drop(pool);
            free(chunk);
        }
    }
}

/// Moves the calling thread to Linux's idle scheduling class; elsewhere, or on failure, it
/// keeps its priority (only the tail latency of writes is at stake).
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid sched_param; pid 0 is the calling thread.
        let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
        if rc != 0 {
            tracing::debug!(error = %std::io::Error::last_os_error(), "cellar-chunk-prep keeps its priority");
        }
    }
}

/// Writes to every page of `chunk`, so the kernel backs (and zeroes) it now. One write per
/// 4 KiB: with a transparent huge page the first faults in all of it, without one each
/// faults its own page.
fn prefault(chunk: NonNull<u8>) {
    const PAGE: usize = 4096;
    for offset in (0..layout().size()).step_by(PAGE) {
        // SAFETY: `offset` is inside the chunk, which nobody else references yet; the arena
        // hands its memory out uninitialised, so any byte value is fine.
        unsafe { chunk.as_ptr().add(offset).write_volatile(0) };
    }
}

/// The layout of every pooled chunk: a standard chunk, aligned to its size.
pub(super) fn layout() -> Layout {
    let size = DEFAULT_CHUNK_SIZE;
    match Layout::from_size_align(size, size) {
        Ok(l) => l,
        Err(_) => panic!("memstore chunk pool: {size} is not a power of two"),
    }
}

/// A chunk of [`layout`] from the pool, if it holds one. Wakes the chunk thread when that
/// leaves the pool below its ready target.
pub(super) fn take() -> Option<NonNull<u8>> {
    LAST_USE_MS.store(now_ms(), Ordering::Relaxed);
    let mut pool = POOL.lock();
    let chunk = pool.pop().map(|c| c.0);
    if pool.len() < ready_target() {
        LOW.notify_one();
    }
    chunk
}

/// Hands `chunk` (allocated with [`layout`], no longer used by anyone) to the pool, or frees
/// it when the pool is full.
pub(super) fn give(chunk: NonNull<u8>) {
    LAST_USE_MS.store(now_ms(), Ordering::Relaxed);
    let limit = LIMIT.load(Ordering::Relaxed);
    let mut pool = POOL.lock();
    if (pool.len() + 1) * DEFAULT_CHUNK_SIZE <= limit {
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
