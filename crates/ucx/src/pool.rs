//! Receive buffers of one link, reused from message to message (seed 000 §IV-E: buffers
//! registered once per connection rather than per call).
//!
//! A message is received into a buffer of its size class (powers of two from 4 KiB to
//! 4 MiB) taken from the pool, and handed on as `Bytes` over that buffer: no copy, and no
//! zeroing of fresh memory per message. When the last `Bytes` of it is dropped, on whatever
//! thread that happens (a handler that finished with a request), the buffer goes back to its
//! pool, up to the pool's byte limit; past it, or when the link is gone, it is freed.
//!
//! Registration: a buffer keeps its address for its whole life, so on transports that need
//! registered memory (RDMA's rc/dc/ud) UCX's registration cache (`UCX_RCACHE_*`, on by
//! default) registers it on its first message and finds it registered on every later one:
//! registration is paid once per buffer, not per call. Shared memory and TCP need none.
//! Messages above the largest class get a buffer of their own, freed after use.

use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The smallest size class: 4 KiB (a page; most requests and answers fit).
const MIN_SHIFT: u32 = 12;
/// The largest size class: 4 MiB.
const MAX_SHIFT: u32 = 22;
const CLASSES: usize = (MAX_SHIFT - MIN_SHIFT + 1) as usize;

/// A pool of receive buffers; cheap to clone (the clones share it).
#[derive(Clone)]
pub struct RecvPool {
    shared: Arc<Shared>,
}

struct Shared {
    free: Mutex<Free>,
    /// Bytes of free buffers the pool keeps at most.
    limit: usize,
    reused: AtomicU64,
    allocated: AtomicU64,
}

#[derive(Default)]
struct Free {
    classes: [Vec<Box<[u8]>>; CLASSES],
    bytes: usize,
}

/// How a pool has served: buffers taken from it again, and buffers it had to allocate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub reused: u64,
    pub allocated: u64,
}

/// The size class of a message of `len` bytes, if pooled.
fn class_of(len: usize) -> Option<usize> {
    let shift = len
        .max(1)
        .next_power_of_two()
        .trailing_zeros()
        .max(MIN_SHIFT);
    (shift <= MAX_SHIFT).then(|| (shift - MIN_SHIFT) as usize)
}

impl RecvPool {
    /// A pool keeping at most `limit` bytes of free buffers (0: every buffer is freed after
    /// use, as without a pool).
    pub fn new(limit: usize) -> RecvPool {
        RecvPool {
            shared: Arc::new(Shared {
                free: Mutex::new(Free::default()),
                limit,
                reused: AtomicU64::new(0),
                allocated: AtomicU64::new(0),
            }),
        }
    }

    /// A buffer to receive a message of `len` bytes into: a free one of its size class, or
    /// a new one.
    pub fn take(&self, len: usize) -> PoolBuf {
        let Some(class) = class_of(len) else {
            self.shared.allocated.fetch_add(1, Ordering::Relaxed);
            return PoolBuf {
                buf: vec![0u8; len].into_boxed_slice(),
                len,
                pool: None,
            };
        };
        let reused = self.shared.free.lock().ok().and_then(|mut free| {
            let buf = free.classes.get_mut(class)?.pop()?;
            free.bytes -= buf.len();
            Some(buf)
        });
        let buf = match reused {
            Some(buf) => {
                self.shared.reused.fetch_add(1, Ordering::Relaxed);
                buf
            }
            None => {
                self.shared.allocated.fetch_add(1, Ordering::Relaxed);
                vec![0u8; 1 << (class as u32 + MIN_SHIFT)].into_boxed_slice()
            }
        };
        PoolBuf {
            buf,
            len,
            pool: Some(self.shared.clone()),
        }
    }

    pub fn stats(&self) -> PoolStats {
        PoolStats {
            reused: self.shared.reused.load(Ordering::Relaxed),
            allocated: self.shared.allocated.load(Ordering::Relaxed),
        }
    }

    /// Bytes of free buffers held now.
    pub fn free_bytes(&self) -> usize {
        self.shared.free.lock().map(|f| f.bytes).unwrap_or(0)
    }
}

/// A buffer from a [`RecvPool`] for one message of `len` bytes; it goes back to the pool when
/// dropped (directly, or as the last `Bytes` of [`PoolBuf::into_bytes`]).
pub struct PoolBuf {
    buf: Box<[u8]>,
    len: usize,
    pool: Option<Arc<Shared>>,
}

impl PoolBuf {
    /// Where the message goes: `len` bytes, which stay put as the value moves.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.buf.as_mut_ptr()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The message as `Bytes`, without a copy; the buffer returns to its pool when the last
    /// clone or slice of it is dropped.
    pub fn into_bytes(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

impl AsRef<[u8]> for PoolBuf {
    #[allow(
        clippy::indexing_slicing,
        reason = "`take` gives a message of `len` bytes a buffer of `len` bytes or of its size class, at least `len`; pooled buffers are only ever of a class's exact size"
    )]
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for PoolBuf {
    fn drop(&mut self) {
        let Some(pool) = self.pool.take() else {
            return;
        };
        let Some(class) = class_of(self.buf.len()) else {
            return;
        };
        let Ok(mut guard) = pool.free.lock() else {
            return;
        };
        let free = &mut *guard;
        let Some(class_free) = free.classes.get_mut(class) else {
            return;
        };
        if free.bytes + self.buf.len() <= pool.limit {
            free.bytes += self.buf.len();
            class_free.push(std::mem::take(&mut self.buf));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_and_are_reused_within_the_limit() {
        let pool = RecvPool::new(64 << 10);
        let first = pool.take(5000);
        assert_eq!(first.len(), 5000);
        let bytes = first.into_bytes();
        let slice = bytes.slice(10..20);
        drop(bytes);
        assert_eq!(pool.free_bytes(), 0, "a slice still holds the buffer");
        drop(slice);
        assert_eq!(pool.free_bytes(), 8192, "back in the pool");
        let again = pool.take(7000);
        assert_eq!(
            pool.stats(),
            PoolStats {
                reused: 1,
                allocated: 1
            }
        );
        drop(again);
        // Past the limit buffers are freed, not kept.
        let big: Vec<PoolBuf> = (0..3).map(|_| pool.take(32 << 10)).collect();
        drop(big);
        assert!(pool.free_bytes() <= 64 << 10);
        // Messages larger than the largest class are received but never kept.
        let huge = pool.take((4 << 20) + 1);
        assert_eq!(huge.as_ref().len(), (4 << 20) + 1);
        drop(huge);
        assert!(pool.free_bytes() <= 64 << 10);
    }

    #[test]
    fn size_classes_round_up_to_powers_of_two_from_a_page() {
        assert_eq!(class_of(0), Some(0));
        assert_eq!(class_of(4096), Some(0));
        assert_eq!(class_of(4097), Some(1));
        assert_eq!(class_of(4 << 20), Some(CLASSES - 1));
        assert_eq!(class_of((4 << 20) + 1), None);
    }
}
