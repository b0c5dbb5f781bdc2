//! Row keys and the orders they are visited in: Bigtable's `%016d`-style keys, sequential or
//! from a random permutation, and Zipfian (exponent 0.8, seed 002) or uniform random reads.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// The row key of index `i`: zero-padded to 16 digits so keys sort as numbers.
pub fn row_key(i: u64) -> [u8; 16] {
    let mut key = [b'0'; 16];
    let mut n = i;
    for b in key.iter_mut().rev() {
        *b = b'0' + (n % 10) as u8;
        n /= 10;
    }
    key
}

/// 0..n in a random order (fixed seed, so runs are comparable).
pub fn permutation(n: u64, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    v.shuffle(&mut StdRng::seed_from_u64(seed));
    v
}

/// How random reads pick rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Distribution {
    Uniform,
    /// Zipfian with exponent 0.8 over the rows, hot rows scattered by a permutation.
    Zipfian,
}

impl Distribution {
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Zipfian => "zipfian",
        }
    }
}

/// `count` row indexes below `n` drawn from `dist`.
pub fn random_reads(n: u64, count: u64, dist: Distribution, seed: u64) -> Vec<u64> {
    let mut rng = StdRng::seed_from_u64(seed);
    match dist {
        // Every row once (Bigtable's random read), again if more reads are asked.
        Distribution::Uniform => permutation(n, seed)
            .into_iter()
            .cycle()
            .take(count as usize)
            .collect(),
        Distribution::Zipfian => {
            let zipf = Zipf::new(n, 0.8);
            let scatter = permutation(n, seed ^ 0x5eed);
            (0..count)
                .map(|_| {
                    let rank = zipf.sample(rng.gen::<f64>());
                    scatter.get(rank as usize).copied().unwrap_or(0)
                })
                .collect()
        }
    }
}

/// A Zipfian distribution over ranks 0..n by its cumulative table (n is a benchmark's row
/// count, so the table fits in memory).
struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(n: u64, exponent: f64) -> Zipf {
        let mut cdf = Vec::with_capacity(n as usize);
        let mut sum = 0.0;
        for rank in 1..=n {
            sum += 1.0 / (rank as f64).powf(exponent);
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        Zipf { cdf }
    }

    /// The rank whose cumulative probability first reaches `u` in [0, 1).
    fn sample(&self, u: f64) -> u64 {
        self.cdf.partition_point(|c| *c < u) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_as_numbers_and_permutations_cover_all_rows() {
        assert_eq!(&row_key(42), b"0000000000000042");
        assert!(row_key(9) < row_key(10));
        let mut p = permutation(1000, 1);
        assert_ne!(p, (0..1000).collect::<Vec<_>>());
        p.sort_unstable();
        assert_eq!(p, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn zipfian_reads_favour_few_rows() {
        let reads = random_reads(1000, 20_000, Distribution::Zipfian, 7);
        assert!(reads.iter().all(|r| *r < 1000));
        let mut counts = vec![0u32; 1000];
        for r in &reads {
            counts[*r as usize] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top: u32 = counts[..100].iter().sum();
        // With exponent 0.8 the hottest 10% of 1000 rows draw about half the reads.
        assert!(top > 20_000 * 35 / 100, "top 10% drew {top} of 20000");
    }
}
