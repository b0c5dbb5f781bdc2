//! YCSB's generators against the distributions they promise, with fixed seeds.

use std::sync::Arc;

use cellar_bench::ycsb::generator::{
    fnvhash64, AcknowledgedCounterGenerator, CounterGenerator, LastValue,
    ScrambledZipfianGenerator, SkewedLatestGenerator, ZipfianGenerator,
};
use rand::rngs::SmallRng;
use rand::SeedableRng;

/// Exact zipf(theta) probabilities over `n` items.
fn zipf_probabilities(n: usize, theta: f64) -> Vec<f64> {
    let weights: Vec<f64> = (1..=n).map(|k| 1.0 / (k as f64).powf(theta)).collect();
    let total: f64 = weights.iter().sum();
    weights.iter().map(|w| w / total).collect()
}

/// `|observed share - p|` within `sds` binomial standard deviations.
fn within_sds(count: u64, n: u64, p: f64, sds: f64) -> bool {
    let share = count as f64 / n as f64;
    let sd = (p * (1.0 - p) / n as f64).sqrt();
    (share - p).abs() <= sds * sd
}

#[test]
fn fnvhash64_matches_hand_computed_vectors() {
    // FNV-1 over the 8 little-endian bytes, then Java's Math.abs of the signed result;
    // computed independently from YCSB's Utils.fnvhash64 description.
    assert_eq!(fnvhash64(0), 6_284_781_860_667_377_211);
    assert_eq!(fnvhash64(1), 8_517_097_267_634_966_620);
    assert_eq!(fnvhash64(42), 55_488_592_825_689_361);
    assert_eq!(fnvhash64(1 << 40), 6_908_947_124_047_430_886);
    assert_eq!(fnvhash64(999), 2_071_219_101_098_386_137);
    for v in [0u64, 1, 7, 1 << 33, u64::MAX, i64::MAX as u64] {
        assert!(
            fnvhash64(v) <= i64::MAX as u64 + 1,
            "abs keeps {v} non-negative"
        );
    }
}

#[test]
fn zipfian_over_1000_items_follows_zipf_099() {
    let n_items = 1000;
    let exact = zipf_probabilities(n_items, 0.99);
    let gen = ZipfianGenerator::new(n_items as u64);
    let mut rng = SmallRng::seed_from_u64(0x21bf);
    let draws = 1_000_000u64;
    let mut counts = vec![0u64; n_items];
    for _ in 0..draws {
        let v = gen.next_value(&mut rng) as usize;
        assert!(v < n_items, "{v} out of range");
        counts[v] += 1;
    }
    // Items 0 and 1 are drawn exactly (Gray et al. special-case them).
    for k in 0..2 {
        assert!(
            within_sds(counts[k], draws, exact[k], 5.0),
            "item {k}: {} draws, expected share {}",
            counts[k],
            exact[k]
        );
    }
    // The rest follow Gray's closed-form approximation, which overshoots the exact
    // probability by 17% at item 2, fading to 1.5% by item 9.
    for k in 2..10 {
        let ratio = counts[k] as f64 / draws as f64 / exact[k];
        assert!(
            (0.97..1.21).contains(&ratio),
            "item {k}: share/exact = {ratio}"
        );
    }
    // Popularity decreases down the head.
    for k in 0..9 {
        assert!(counts[k] > counts[k + 1], "item {k} vs {}", k + 1);
    }
    let top100: u64 = counts[..100].iter().sum();
    let exact100: f64 = exact[..100].iter().sum();
    let ratio = top100 as f64 / draws as f64 / exact100;
    assert!(
        (0.98..1.05).contains(&ratio),
        "top-100 share/exact = {ratio}"
    );
}

#[test]
fn zipfian_range_and_incremental_zeta() {
    let gen = ZipfianGenerator::with_range(1, 100);
    let mut rng = SmallRng::seed_from_u64(9);
    for _ in 0..10_000 {
        let v = gen.next_value(&mut rng);
        assert!((1..=101).contains(&v), "{v}");
    }
    // Growing the item count extends zeta incrementally to the from-scratch value.
    let grown = ZipfianGenerator::new(1000);
    grown.next_long(5000, &mut rng);
    let scratch = ZipfianGenerator::zeta_static(0, 5000, 0.99, 0.0);
    assert!(
        (grown.zetan() - scratch).abs() < 1e-9,
        "{} vs {scratch}",
        grown.zetan()
    );
    // A smaller count keeps the larger zeta, as YCSB does.
    grown.next_long(10, &mut rng);
    assert!((grown.zetan() - scratch).abs() < 1e-9);
}

#[test]
fn scrambled_zipfian_zetan_is_zeta_over_ten_billion_items() {
    // zeta(10^10, 0.99): the first 10^6 terms summed, the rest by Euler-Maclaurin.
    let theta = 0.99f64;
    let head = ZipfianGenerator::zeta_static(0, 1_000_000, theta, 0.0);
    let (a, b) = (1_000_001f64, 1e10f64);
    let f = |x: f64| x.powf(-theta);
    let df = |x: f64| -theta * x.powf(-theta - 1.0);
    let integral = (b.powf(1.0 - theta) - a.powf(1.0 - theta)) / (1.0 - theta);
    let tail = integral + (f(a) + f(b)) / 2.0 + (df(b) - df(a)) / 12.0;
    let zeta = head + tail;
    assert!(
        (zeta - ScrambledZipfianGenerator::ZETAN).abs() < 1e-6,
        "zeta(1e10) = {zeta}"
    );
    assert_eq!(ScrambledZipfianGenerator::ITEM_COUNT, 10_000_000_000);
}

#[test]
fn scrambled_zipfian_scatters_the_popular_items() {
    let gen = ScrambledZipfianGenerator::new(0, 999);
    let mut rng = SmallRng::seed_from_u64(77);
    let draws = 500_000u64;
    let mut counts = vec![0u64; 1000];
    for _ in 0..draws {
        let v = gen.next_value(&mut rng);
        assert!(v < 1000, "{v} out of range");
        counts[v as usize] += 1;
    }
    // Zipfian items 0 and 1 land on fnvhash64(0) % 1000 and fnvhash64(1) % 1000; each
    // slot also gets about 1/1000 of the other draws.
    let zetan = ScrambledZipfianGenerator::ZETAN;
    let p0 = 1.0 / zetan;
    let p1 = 0.5f64.powf(0.99) / zetan;
    let k0 = (fnvhash64(0) % 1000) as usize;
    let k1 = (fnvhash64(1) % 1000) as usize;
    assert_eq!((k0, k1), (211, 620));
    let expect0 = p0 + (1.0 - p0 - p1) / 1000.0;
    let expect1 = p1 + (1.0 - p0 - p1) / 1000.0;
    assert!(
        within_sds(counts[k0], draws, expect0, 5.0),
        "key {k0}: {}",
        counts[k0]
    );
    assert!(
        within_sds(counts[k1], draws, expect1, 5.0),
        "key {k1}: {}",
        counts[k1]
    );
    let most = counts
        .iter()
        .enumerate()
        .max_by_key(|(_, c)| **c)
        .map(|(i, _)| i);
    assert_eq!(most, Some(k0));
    // Scattered: the popular keys are not at the start of the range.
    assert!(counts[0] < counts[k1] / 4, "key 0 got {}", counts[0]);
    assert!((gen.mean() - 499.5).abs() < 1e-9);
}

#[test]
fn skewed_latest_favours_the_newest_inserts() {
    let basis = Arc::new(CounterGenerator::new(0));
    for _ in 0..1000 {
        basis.next_value();
    }
    assert_eq!(basis.last_value(), 999);
    let shared: Arc<dyn LastValue> = basis.clone();
    let gen = SkewedLatestGenerator::new(shared);
    let mut rng = SmallRng::seed_from_u64(4);
    let draws = 200_000u64;
    let mut counts = vec![0u64; 1000];
    for _ in 0..draws {
        let v = gen.next_value(&mut rng);
        assert!((1..=999).contains(&v), "{v} out of range");
        counts[v as usize] += 1;
    }
    // The newest key is drawn as often as zipfian item 0 over 999 items.
    let exact = zipf_probabilities(999, 0.99);
    assert!(
        within_sds(counts[999], draws, exact[0], 5.0),
        "{}",
        counts[999]
    );
    assert!(
        within_sds(counts[998], draws, exact[1], 5.0),
        "{}",
        counts[998]
    );
    let newest_tenth: u64 = counts[900..].iter().sum();
    let oldest_tenth: u64 = counts[..100].iter().sum();
    assert!(
        newest_tenth > 5 * oldest_tenth,
        "{newest_tenth} vs {oldest_tenth}"
    );

    // New inserts become the most popular at once.
    for _ in 0..500 {
        basis.next_value();
    }
    let mut newest = 0;
    for _ in 0..20_000 {
        let v = gen.next_value(&mut rng);
        assert!(v <= 1499, "{v} beyond the newest");
        if v == 1499 {
            newest += 1;
        }
    }
    assert!(newest > 20_000 / 10, "newest key drawn {newest} times");
}

#[test]
fn skewed_latest_over_acknowledged_inserts_never_passes_the_limit() {
    let inserts = Arc::new(AcknowledgedCounterGenerator::new(100));
    let shared: Arc<dyn LastValue> = inserts.clone();
    let gen = SkewedLatestGenerator::new(shared);
    let mut rng = SmallRng::seed_from_u64(12);
    let pending = inserts.next_value();
    let done = inserts.next_value();
    inserts.acknowledge(done).expect("ack");
    for _ in 0..10_000 {
        assert!(
            gen.next_value(&mut rng) <= 99,
            "picked an unacknowledged key"
        );
    }
    inserts.acknowledge(pending).expect("ack");
    assert_eq!(inserts.last_value(), 101);
    let picked_new = (0..10_000).any(|_| gen.next_value(&mut rng) == 101);
    assert!(picked_new);
}
