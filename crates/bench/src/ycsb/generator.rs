//! YCSB's number generators, with YCSB's names, constants and arithmetic, so that a Cellar
//! run draws keys, field lengths, scan lengths and operations from the same distributions a
//! YCSB run does.
//!
//! Generators that YCSB shares between client threads (counters, the zipfian's zeta state)
//! are `Send + Sync` and use atomics; randomness comes from the caller's per-thread rng
//! (YCSB's `ThreadLocalRandom`), passed to every `next_value`.

mod counter;
mod discrete;
mod simple;
mod zipfian;

pub use counter::{AcknowledgedCounterGenerator, CounterGenerator, LastValue, SequentialGenerator};
pub use discrete::DiscreteGenerator;
pub use simple::{
    ConstantIntegerGenerator, ExponentialGenerator, HotspotIntegerGenerator, UniformLongGenerator,
};
pub use zipfian::{ScrambledZipfianGenerator, SkewedLatestGenerator, ZipfianGenerator};

/// FNV-1 offset basis, 64-bit (YCSB's `Utils.FNV_OFFSET_BASIS_64`).
pub const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
/// FNV-1 prime, 64-bit (YCSB's `Utils.FNV_PRIME_64`).
pub const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// YCSB's `Utils.fnvhash64`: the 8 bytes of `val`, low byte first, each xor-ed into the hash
/// and then multiplied by the prime (wrapping), and finally Java's `Math.abs` of the result
/// read as a signed long. That keeps hashed key numbers non-negative; the one value `abs`
/// cannot negate, `i64::MIN`, stays as its bit pattern (2^63), which Java would print as
/// negative.
pub fn fnvhash64(val: u64) -> u64 {
    let mut rest = val;
    let mut hash = FNV_OFFSET_BASIS_64;
    for _ in 0..8 {
        let octet = rest & 0xff;
        rest >>= 8;
        hash ^= octet;
        hash = hash.wrapping_mul(FNV_PRIME_64);
    }
    (hash as i64).wrapping_abs() as u64
}
