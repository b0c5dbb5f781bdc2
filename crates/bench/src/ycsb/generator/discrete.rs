//! YCSB's `DiscreteGenerator`: picks one of a few values with given weights (the operation
//! mix: `readproportion`, `updateproportion`, ...).

use rand::Rng;

/// Weighted choice among values, in the order they were added, as YCSB draws it: one
/// uniform draw walked down the normalised weights.
#[derive(Debug, Clone)]
pub struct DiscreteGenerator<T> {
    values: Vec<(f64, T)>,
}

impl<T> Default for DiscreteGenerator<T> {
    fn default() -> Self {
        DiscreteGenerator { values: Vec::new() }
    }
}

impl<T> DiscreteGenerator<T> {
    pub fn new() -> DiscreteGenerator<T> {
        DiscreteGenerator::default()
    }

    pub fn add_value(&mut self, weight: f64, value: T) {
        self.values.push((weight, value));
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// `None` when there is nothing to choose (YCSB's `null` operation, which ends a client
    /// thread). A draw that rounding carries past the last weight takes the last value,
    /// where YCSB would throw.
    pub fn next_value<R: Rng + ?Sized>(&self, rng: &mut R) -> Option<&T> {
        let sum: f64 = self.values.iter().map(|(w, _)| w).sum();
        let mut val = rng.gen::<f64>();
        for (weight, value) in &self.values {
            let share = weight / sum;
            if val < share {
                return Some(value);
            }
            val -= share;
        }
        self.values.last().map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn shares_follow_weights() {
        let mut rng = SmallRng::seed_from_u64(5);
        let mut g = DiscreteGenerator::new();
        g.add_value(0.5, 0usize);
        g.add_value(0.3, 1);
        g.add_value(0.2, 2);
        let n = 100_000;
        let mut counts = [0usize; 3];
        for _ in 0..n {
            counts[*g.next_value(&mut rng).expect("non-empty")] += 1;
        }
        for (i, want) in [0.5, 0.3, 0.2].iter().enumerate() {
            let got = counts[i] as f64 / n as f64;
            assert!((got - want).abs() < 0.008, "value {i}: {got} vs {want}");
        }
        assert!(DiscreteGenerator::<u8>::new()
            .next_value(&mut rng)
            .is_none());
    }
}
