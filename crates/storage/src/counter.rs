//! A counter that many threads add to without contending for one cache line (a region's
//! request counts, bumped by every Get and every scanned row): one padded slot per stripe,
//! each thread adds to its own stripe, a read sums them. The count is exact; a read racing
//! with adds sees some of them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const STRIPES: usize = 16;

#[repr(align(64))]
#[derive(Default)]
struct Slot(AtomicU64);

#[derive(Default)]
pub struct StripedCounter {
    slots: [Slot; STRIPES],
}

impl StripedCounter {
    #[allow(
        clippy::indexing_slicing,
        reason = "stripe() is taken modulo STRIPES, the length of `slots`"
    )]
    pub fn add(&self, n: u64) {
        self.slots[stripe()].0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.slots
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }
}

/// This thread's stripe, handed out round-robin on first use.
fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    STRIPE.with(|s| *s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn adds_from_many_threads_are_all_counted() {
        let c = Arc::new(StripedCounter::default());
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let c = Arc::clone(&c);
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        c.add(1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert_eq!(c.get(), 80_000);
    }
}
