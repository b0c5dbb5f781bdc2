//! Keys and values: the exact bytes both engines are given.
//!
//! A key is its entry number in zero-padded decimal, `--key-size` bytes wide, so byte order
//! is numeric order and a range of numbers is a range of keys (which `readrandom-hot` relies
//! on). Values are slices of a pool of pseudo-random bytes made with a chosen compressibility.

use crate::engine_bench::args::decimal_digits;
use crate::engine_bench::error::{BenchError, Result};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, RngCore, SeedableRng};

/// Writes entry numbers as fixed-width keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyFormat {
    width: usize,
}

impl KeyFormat {
    /// Keys `width` bytes wide for entries `0..num`; fails if `num - 1` has more digits.
    pub fn new(width: usize, num: u64) -> Result<KeyFormat> {
        let need = decimal_digits(num.saturating_sub(1));
        if width < need {
            return Err(BenchError::new(format!(
                "a {width}-byte key cannot hold entry numbers up to {} ({need} digits)",
                num.saturating_sub(1)
            )));
        }
        Ok(KeyFormat { width })
    }

    pub fn width(&self) -> usize {
        self.width
    }

    /// A buffer of the right size for [`KeyFormat::write`].
    pub fn buffer(&self) -> Vec<u8> {
        vec![b'0'; self.width]
    }

    /// Writes the key of entry `n` into `buf` (which must be [`KeyFormat::width`] long).
    pub fn write(&self, n: u64, buf: &mut [u8]) {
        buf.fill(b'0');
        let mut rest = n;
        // Digits from the right; at most 20 iterations (u64 has at most 20 digits), and never
        // past the front of `buf` (the constructor checked the width against `num`).
        for slot in buf.iter_mut().rev().take(20) {
            *slot = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
    }

    /// The key of entry `n` as a new vector.
    pub fn key(&self, n: u64) -> Vec<u8> {
        let mut buf = self.buffer();
        self.write(n, &mut buf);
        buf
    }
}

/// A pool of value bytes; values are `value_size`-long windows at random offsets.
#[derive(Debug, Clone)]
pub struct ValuePool {
    data: Vec<u8>,
    value_size: usize,
}

/// Pool bytes are laid out in runs of this many bytes: a random head, a constant tail.
const RUN: usize = 128;

impl ValuePool {
    /// A pool for values of `value_size` bytes of which about `compressibility` (0..=1) is
    /// redundant: each 128-byte run is random for its first `(1 - compressibility) * 128`
    /// bytes and one repeated byte after.
    pub fn new(value_size: usize, compressibility: f64, seed: u64) -> ValuePool {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_7a1e);
        // Large enough that windows at random offsets rarely repeat within a block, so block
        // compression sees no cross-value redundancy beyond what was asked for.
        let len = (1 << 20).max(value_size * 4) + value_size;
        let mut data = vec![0u8; len];
        rng.fill_bytes(&mut data);
        let random_len = ((1.0 - compressibility.clamp(0.0, 1.0)) * RUN as f64).round() as usize;
        for run in data.chunks_mut(RUN) {
            if let Some(tail) = run.get_mut(random_len..) {
                tail.fill(b'v');
            }
        }
        ValuePool { data, value_size }
    }

    /// A value: a window of the pool at a random offset.
    pub fn value<'a>(&'a self, rng: &mut StdRng) -> &'a [u8] {
        let max_start = self.data.len() - self.value_size;
        let start = rng.gen_range(0..=max_start);
        &self.data[start..start + self.value_size]
    }
}

/// Every entry number `0..num` once, in an order shuffled by `seed` (the order of fillrandom).
pub fn shuffled(num: u64, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..num).collect();
    v.shuffle(&mut StdRng::seed_from_u64(seed));
    v
}

/// The random-number generator of thread `thread` in workload `salt`, derived from the run's
/// seed so that every run with the same flags issues the same keys.
pub fn thread_rng(seed: u64, salt: u64, thread: usize) -> StdRng {
    // Spread the three inputs so neighbouring (salt, thread) pairs get unrelated streams.
    let mixed = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(salt.wrapping_mul(0xBF58_476D_1CE4_E5B9))
        .wrapping_add((thread as u64).wrapping_mul(0x94D0_49BB_1331_11EB));
    StdRng::seed_from_u64(mixed)
}

/// The contiguous range of entry numbers `readrandom-hot` reads: as many entries as fill a
/// quarter of the cache (all of them if the cache is larger than the data), starting at a
/// seeded random entry. A quarter leaves room for index and filter blocks and for uneven
/// filling of a sharded cache.
pub fn hot_range(num: u64, entry_bytes: u64, cache_bytes: u64, seed: u64) -> std::ops::Range<u64> {
    let count = (cache_bytes / 4 / entry_bytes.max(1)).clamp(1, num.max(1));
    let slack = num.saturating_sub(count);
    let start = if slack == 0 {
        0
    } else {
        StdRng::seed_from_u64(seed ^ 0x407).gen_range(0..=slack)
    };
    start..start + count
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn keys_are_fixed_width_and_sort_numerically() {
        let f = KeyFormat::new(16, 1_000_000).expect("fits");
        assert_eq!(f.key(0), b"0000000000000000");
        assert_eq!(f.key(123_456), b"0000000000123456");
        let mut buf = f.buffer();
        f.write(999_999, &mut buf);
        assert_eq!(buf, b"0000000000999999");
        // Reusing a buffer leaves no digits of the previous key behind.
        f.write(7, &mut buf);
        assert_eq!(buf, b"0000000000000007");
        assert!(f.key(99) < f.key(100));
        let tight = KeyFormat::new(3, 1000).expect("999 fits in 3");
        assert_eq!(tight.key(999), b"999");
        assert!(KeyFormat::new(3, 1001).is_err());
        assert_eq!(
            KeyFormat::new(20, u64::MAX)
                .expect("fits")
                .key(u64::MAX - 1)
                .len(),
            20
        );
    }

    #[test]
    fn shuffled_is_a_repeatable_permutation() {
        let a = shuffled(1000, 7);
        assert_eq!(a, shuffled(1000, 7));
        assert_ne!(a, shuffled(1000, 8));
        assert_ne!(a, (0..1000).collect::<Vec<_>>());
        assert_eq!(a.iter().copied().collect::<HashSet<_>>().len(), 1000);
        assert!(a.iter().all(|&n| n < 1000));
    }

    #[test]
    fn values_have_the_asked_size_and_redundancy() {
        let pool = ValuePool::new(1024, 0.5, 1);
        let mut rng = thread_rng(1, 2, 3);
        let v = pool.value(&mut rng);
        assert_eq!(v.len(), 1024);
        let constant = v.iter().filter(|&&b| b == b'v').count();
        assert!(
            (480..=620).contains(&constant),
            "{constant} of 1024 redundant"
        );
        let random = ValuePool::new(100, 0.0, 1);
        let v = random.value(&mut rng);
        assert!(v.iter().filter(|&&b| b == b'v').count() < 10);
    }

    #[test]
    fn the_hot_range_is_a_quarter_of_the_cache() {
        let r = hot_range(1_000_000, 1040, 64 << 20, 42);
        assert_eq!(r.end - r.start, (64 << 20) / 4 / 1040);
        assert!(r.end <= 1_000_000);
        assert_eq!(r, hot_range(1_000_000, 1040, 64 << 20, 42));
        // A cache larger than the data: everything is hot.
        assert_eq!(hot_range(1000, 1040, 1 << 30, 42), 0..1000);
    }

    #[test]
    fn thread_streams_differ() {
        let a: u64 = thread_rng(1, 1, 0).gen();
        let b: u64 = thread_rng(1, 1, 1).gen();
        let c: u64 = thread_rng(1, 2, 0).gen();
        assert!(a != b && a != c && b != c);
    }
}
