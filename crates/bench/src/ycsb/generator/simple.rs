//! YCSB's stateless generators: uniform, constant, hotspot and exponential.

use rand::Rng;

/// YCSB's `UniformLongGenerator`: uniform over `[lb, ub]`, both inclusive. (YCSB reduces a
/// random long modulo the interval; the bias of that is below 2^-40 for any realistic
/// interval, so an unbiased draw gives the same distribution.)
#[derive(Debug, Clone)]
pub struct UniformLongGenerator {
    lb: u64,
    ub: u64,
}

impl UniformLongGenerator {
    /// An empty interval (`ub < lb`) yields `lb`.
    pub fn new(lb: u64, ub: u64) -> UniformLongGenerator {
        UniformLongGenerator { lb, ub: ub.max(lb) }
    }

    pub fn next_value<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        rng.gen_range(self.lb..=self.ub)
    }

    pub fn mean(&self) -> f64 {
        (self.lb as f64 + self.ub as f64) / 2.0
    }
}

/// YCSB's `ConstantIntegerGenerator`: always the same value (the constant field length).
#[derive(Debug, Clone)]
pub struct ConstantIntegerGenerator {
    value: u64,
}

impl ConstantIntegerGenerator {
    pub fn new(value: u64) -> ConstantIntegerGenerator {
        ConstantIntegerGenerator { value }
    }

    pub fn next_value(&self) -> u64 {
        self.value
    }
}

/// YCSB's `HotspotIntegerGenerator`: a fraction `hot_opn_fraction` of draws falls uniformly
/// in the hot set, the lowest `hotset_fraction` of `[lower, upper]`; the rest falls
/// uniformly in the cold remainder.
#[derive(Debug, Clone)]
pub struct HotspotIntegerGenerator {
    lower_bound: u64,
    hot_interval: u64,
    cold_interval: u64,
    hot_opn_fraction: f64,
}

impl HotspotIntegerGenerator {
    /// As YCSB: a fraction outside `[0, 1]` becomes 0, swapped bounds are swapped back.
    pub fn new(
        lower_bound: u64,
        upper_bound: u64,
        hotset_fraction: f64,
        hot_opn_fraction: f64,
    ) -> HotspotIntegerGenerator {
        let in_range = |f: f64| if (0.0..=1.0).contains(&f) { f } else { 0.0 };
        let (lo, hi) = if lower_bound > upper_bound {
            (upper_bound, lower_bound)
        } else {
            (lower_bound, upper_bound)
        };
        let interval = hi - lo + 1;
        // YCSB truncates the hot set's size towards zero.
        let hot_interval = (interval as f64 * in_range(hotset_fraction)) as u64;
        HotspotIntegerGenerator {
            lower_bound: lo,
            hot_interval,
            cold_interval: interval - hot_interval,
            hot_opn_fraction: in_range(hot_opn_fraction),
        }
    }

    /// The hot set: `lower_bound .. lower_bound + hot_len()`.
    pub fn hot_len(&self) -> u64 {
        self.hot_interval
    }

    pub fn next_value<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        // An empty hot (or cold) set sends every draw to the other one, where YCSB would
        // divide by zero.
        let hot = rng.gen::<f64>() < self.hot_opn_fraction;
        if (hot && self.hot_interval > 0) || self.cold_interval == 0 {
            self.lower_bound + rng.gen_range(0..self.hot_interval)
        } else {
            self.lower_bound + self.hot_interval + rng.gen_range(0..self.cold_interval)
        }
    }
}

/// YCSB's `ExponentialGenerator`: exponentially distributed values with rate `gamma`,
/// skewed to small values (the run phase subtracts them from the newest key).
#[derive(Debug, Clone)]
pub struct ExponentialGenerator {
    gamma: f64,
}

impl ExponentialGenerator {
    /// YCSB's `exponential.percentile` property and default: 95.
    pub const PERCENTILE_DEFAULT: f64 = 95.0;
    /// YCSB's `exponential.frac` property default, 6/7 of the records.
    pub const FRAC_DEFAULT: f64 = 0.8571428571;

    /// Mean `mean` (rate `1 / mean`).
    pub fn with_mean(mean: f64) -> ExponentialGenerator {
        ExponentialGenerator { gamma: 1.0 / mean }
    }

    /// `percentile` percent of the values fall below `range`.
    pub fn new(percentile: f64, range: f64) -> ExponentialGenerator {
        ExponentialGenerator {
            gamma: -(1.0 - percentile / 100.0).ln() / range,
        }
    }

    pub fn next_value<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        -rng.gen::<f64>().ln() / self.gamma
    }

    pub fn mean(&self) -> f64 {
        1.0 / self.gamma
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn uniform_is_flat() {
        let mut rng = SmallRng::seed_from_u64(7);
        let g = UniformLongGenerator::new(10, 29);
        let n = 200_000;
        let mut counts = [0u64; 20];
        for _ in 0..n {
            let v = g.next_value(&mut rng);
            assert!((10..=29).contains(&v), "{v} out of range");
            counts[(v - 10) as usize] += 1;
        }
        // Chi-square with 19 degrees of freedom: 43.8 is its 99.9th percentile.
        let expected = n as f64 / 20.0;
        let chi2: f64 = counts
            .iter()
            .map(|&c| (c as f64 - expected).powi(2) / expected)
            .sum();
        assert!(chi2 < 43.8, "chi-square {chi2}, counts {counts:?}");
        assert_eq!(g.mean(), 19.5);
    }

    #[test]
    fn hotspot_sends_the_hot_fraction_to_the_hot_set() {
        let mut rng = SmallRng::seed_from_u64(11);
        let g = HotspotIntegerGenerator::new(100, 1099, 0.2, 0.8);
        assert_eq!(g.hot_len(), 200);
        let n = 100_000;
        let mut hot = 0;
        for _ in 0..n {
            let v = g.next_value(&mut rng);
            assert!((100..=1099).contains(&v), "{v} out of range");
            if v < 300 {
                hot += 1;
            }
        }
        let share = hot as f64 / n as f64;
        // Binomial sd is 0.0013; allow 5 sd.
        assert!((share - 0.8).abs() < 0.0065, "hot share {share}");
    }

    #[test]
    fn hotspot_degenerate_sets_stay_in_range() {
        let mut rng = SmallRng::seed_from_u64(1);
        let all_hot = HotspotIntegerGenerator::new(0, 9, 1.0, 0.5);
        let none_hot = HotspotIntegerGenerator::new(0, 9, 0.0, 0.9);
        let bad = HotspotIntegerGenerator::new(9, 0, 2.0, -1.0);
        for _ in 0..1000 {
            assert!(all_hot.next_value(&mut rng) < 10);
            assert!(none_hot.next_value(&mut rng) < 10);
            assert!(bad.next_value(&mut rng) < 10);
        }
    }

    #[test]
    fn exponential_percentile_holds() {
        let mut rng = SmallRng::seed_from_u64(3);
        let g = ExponentialGenerator::new(90.0, 100.0);
        let n = 100_000;
        let below = (0..n).filter(|_| g.next_value(&mut rng) < 100.0).count();
        let share = below as f64 / n as f64;
        assert!((share - 0.9).abs() < 0.005, "share below range {share}");
        let m = ExponentialGenerator::with_mean(4.0);
        assert_eq!(m.mean(), 4.0);
    }
}
