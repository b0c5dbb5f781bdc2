//! YCSB's zipfian family: [`ZipfianGenerator`] (Gray et al., "Quickly Generating
//! Billion-Record Synthetic Databases", SIGMOD 1994, as YCSB implements it), its scrambled
//! form that scatters the popular items over the key space, and the `latest` distribution
//! that favours the newest inserts.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rand::Rng;

use super::counter::LastValue;
use super::fnvhash64;

/// YCSB's `ZipfianGenerator`: item `base` is the most popular, `base + 1` the next, ...
/// The item count may grow between draws (the `latest` distribution does that); zeta is
/// then extended incrementally, as YCSB does, under a lock, and read lock-free otherwise.
#[derive(Debug)]
pub struct ZipfianGenerator {
    items: u64,
    base: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    /// `countforzeta`: the item count `zetan` and `eta` were computed for.
    count_for_zeta: AtomicU64,
    zetan: AtomicF64,
    eta: AtomicF64,
    recompute: Mutex<()>,
}

impl ZipfianGenerator {
    /// YCSB's `ZIPFIAN_CONSTANT`.
    pub const ZIPFIAN_CONSTANT: f64 = 0.99;

    /// Items `0 .. items`.
    pub fn new(items: u64) -> ZipfianGenerator {
        let zetan = Self::zeta_static(0, items, Self::ZIPFIAN_CONSTANT, 0.0);
        Self::with_items(0, items, Self::ZIPFIAN_CONSTANT, zetan)
    }

    /// Items `min ..= max`.
    pub fn with_range(min: u64, max: u64) -> ZipfianGenerator {
        Self::with_constant(min, max, Self::ZIPFIAN_CONSTANT)
    }

    /// Items `min ..= max` with zipfian constant `constant`.
    pub fn with_constant(min: u64, max: u64, constant: f64) -> ZipfianGenerator {
        let items = Self::range_len(min, max);
        let zetan = Self::zeta_static(0, items, constant, 0.0);
        Self::with_items(min, items, constant, zetan)
    }

    /// Items `min ..= max` with a precomputed `zetan` (zeta over the item count).
    pub fn with_zetan(min: u64, max: u64, constant: f64, zetan: f64) -> ZipfianGenerator {
        Self::with_items(min, Self::range_len(min, max), constant, zetan)
    }

    fn range_len(min: u64, max: u64) -> u64 {
        max.saturating_sub(min).saturating_add(1)
    }

    fn with_items(base: u64, items: u64, theta: f64, zetan: f64) -> ZipfianGenerator {
        let zeta2theta = Self::zeta_static(0, 2, theta, 0.0);
        ZipfianGenerator {
            items,
            base,
            theta,
            zeta2theta,
            alpha: 1.0 / (1.0 - theta),
            count_for_zeta: AtomicU64::new(items),
            zetan: AtomicF64::new(zetan),
            eta: AtomicF64::new(Self::eta_for(items, theta, zeta2theta, zetan)),
            recompute: Mutex::new(()),
        }
    }

    /// YCSB's `eta`; note that YCSB keeps using the constructor's item count here even
    /// after zeta has been extended to a larger count.
    fn eta_for(items: u64, theta: f64, zeta2theta: f64, zetan: f64) -> f64 {
        (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan)
    }

    /// YCSB's `zetastatic(st, n, theta, initialsum)`: `initialsum` plus the terms
    /// `1 / (i + 1)^theta` for `i` in `st .. n`.
    pub fn zeta_static(st: u64, n: u64, theta: f64, initial_sum: f64) -> f64 {
        let mut sum = initial_sum;
        for i in st..n {
            sum += 1.0 / ((i + 1) as f64).powf(theta);
        }
        sum
    }

    /// The zeta over the current item count (YCSB's `zetan`).
    pub fn zetan(&self) -> f64 {
        self.zetan.load()
    }

    /// A draw over `item_count` items (YCSB's `nextLong(itemcount)`). A count larger than
    /// the one zeta covers extends zeta first; a smaller one keeps the larger zeta, as
    /// YCSB does unless told to allow decreases.
    pub fn next_long<R: Rng + ?Sized>(&self, item_count: u64, rng: &mut R) -> u64 {
        if item_count > self.count_for_zeta.load(Ordering::Acquire) {
            let _guard = self.recompute.lock().unwrap_or_else(|e| e.into_inner());
            let counted = self.count_for_zeta.load(Ordering::Acquire);
            if item_count > counted {
                let zetan = Self::zeta_static(counted, item_count, self.theta, self.zetan.load());
                self.zetan.store(zetan);
                self.eta.store(Self::eta_for(
                    self.items,
                    self.theta,
                    self.zeta2theta,
                    zetan,
                ));
                self.count_for_zeta.store(item_count, Ordering::Release);
            }
        }
        let zetan = self.zetan.load();
        let eta = self.eta.load();
        let u: f64 = rng.gen();
        let uz = u * zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        self.base + (item_count as f64 * (eta * u - eta + 1.0).powf(self.alpha)) as u64
    }

    /// A draw over the constructor's item count.
    pub fn next_value<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        self.next_long(self.items, rng)
    }
}

/// An `f64` shared between threads, stored as its bits.
#[derive(Debug)]
struct AtomicF64(AtomicU64);

impl AtomicF64 {
    fn new(v: f64) -> AtomicF64 {
        AtomicF64(AtomicU64::new(v.to_bits()))
    }

    fn load(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Acquire))
    }

    fn store(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::Release)
    }
}

/// YCSB's `ScrambledZipfianGenerator`: a zipfian draw over a fixed huge item space
/// ([`Self::ITEM_COUNT`], whose zeta YCSB precomputed), hashed with [`fnvhash64`] onto
/// `min ..= max`. Popularity follows the zipfian, but popular items are scattered, and the
/// key space can grow without reshuffling which keys are popular.
#[derive(Debug)]
pub struct ScrambledZipfianGenerator {
    gen: ZipfianGenerator,
    min: u64,
    item_count: u64,
}

impl ScrambledZipfianGenerator {
    /// YCSB's `ZETAN`: zeta over [`Self::ITEM_COUNT`] items at constant 0.99.
    pub const ZETAN: f64 = 26.46902820178302;
    /// YCSB's `USED_ZIPFIAN_CONSTANT`.
    pub const USED_ZIPFIAN_CONSTANT: f64 = 0.99;
    /// YCSB's `ITEM_COUNT`: 10^10.
    pub const ITEM_COUNT: u64 = 10_000_000_000;

    /// Items `min ..= max`.
    pub fn new(min: u64, max: u64) -> ScrambledZipfianGenerator {
        let (min, max) = (min.min(max), max.max(min));
        ScrambledZipfianGenerator {
            // As YCSB: the underlying zipfian spans 0 ..= ITEM_COUNT.
            gen: ZipfianGenerator::with_zetan(
                0,
                Self::ITEM_COUNT,
                Self::USED_ZIPFIAN_CONSTANT,
                Self::ZETAN,
            ),
            min,
            item_count: max - min + 1,
        }
    }

    /// Items `min ..= max` drawn with zipfian constant `constant` (the `zipfianconstant`
    /// property, as YCSB's later versions and forks spell it): a zipfian over the items
    /// themselves (zeta computed over them, not YCSB's precomputed 10^10), hashed onto them
    /// the same way.
    pub fn with_constant(min: u64, max: u64, constant: f64) -> ScrambledZipfianGenerator {
        let (min, max) = (min.min(max), max.max(min));
        let item_count = max - min + 1;
        ScrambledZipfianGenerator {
            gen: ZipfianGenerator::with_constant(0, item_count - 1, constant),
            min,
            item_count,
        }
    }

    pub fn next_value<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let z = self.gen.next_value(rng);
        self.min + fnvhash64(z) % self.item_count
    }

    /// The items are scattered (hopefully) uniformly, so the mean is the middle.
    pub fn mean(&self) -> f64 {
        self.min as f64 + (self.item_count - 1) as f64 / 2.0
    }
}

/// YCSB's `SkewedLatestGenerator`: zipfian over how far back from the newest value of
/// `basis` to go, so the most recent inserts are the most popular.
pub struct SkewedLatestGenerator {
    basis: Arc<dyn LastValue>,
    zipfian: ZipfianGenerator,
}

impl SkewedLatestGenerator {
    pub fn new(basis: Arc<dyn LastValue>) -> SkewedLatestGenerator {
        let zipfian = ZipfianGenerator::new(basis.last_value().max(0) as u64);
        SkewedLatestGenerator { basis, zipfian }
    }

    /// `last - zipfian(last)`: in `1 ..= last` (as YCSB, value 0 is never drawn once
    /// there is more than one), 0 while the basis is empty.
    pub fn next_value<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let max = self.basis.last_value();
        if max <= 0 {
            return 0;
        }
        let max = max as u64;
        max.saturating_sub(self.zipfian.next_long(max, rng))
    }
}

impl std::fmt::Debug for SkewedLatestGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkewedLatestGenerator")
            .field("last_value", &self.basis.last_value())
            .field("zipfian", &self.zipfian)
            .finish()
    }
}
