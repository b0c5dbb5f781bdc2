//! Memstore micro-benchmark: ns per insert and per seek for random 16-byte-row keys with
//! 100-byte values, against a `BTreeMap` under a mutex (a heap allocation per cell) as a
//! baseline. Not a test; run in release mode:
//!
//! ```text
//! cargo run --release -p cellar-storage --example memstore_bench [entries]
//! ```

use cellar_model::cell::CellType;
use cellar_model::key::{compare_keys, make_key};
use cellar_storage::iter::CellIter;
use cellar_storage::memstore::Memstore;
use rand::{Rng, SeedableRng};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A key ordered by `compare_keys`, for the baseline map.
#[derive(PartialEq, Eq)]
struct OrdKey(Vec<u8>);

impl PartialOrd for OrdKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrdKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_keys(&self.0, &other.0)
    }
}

fn per_op(start: Instant, ops: usize) -> f64 {
    start.elapsed().as_nanos() as f64 / ops as f64
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let keys: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let row: [u8; 16] = rng.gen();
            make_key(&row, b"cf:q", 1_700_000_000_000, CellType::Put, i as u64)
        })
        .collect();
    let value = [7u8; 100];
    let mut probes = keys.clone();
    for i in (1..probes.len()).rev() {
        probes.swap(i, rng.gen_range(0..=i));
    }

    let memstore = Arc::new(Memstore::new());
    let start = Instant::now();
    for key in &keys {
        memstore.insert(key, &value);
    }
    let insert_ns = per_op(start, n);

    let mut it = memstore.iter();
    let start = Instant::now();
    for probe in &probes {
        it.seek(probe).expect("memstore seeks do not fail");
        black_box(it.key());
    }
    let seek_ns = per_op(start, n);

    let start = Instant::now();
    it.seek_to_first().expect("memstore seeks do not fail");
    let mut count = 0usize;
    while it.valid() {
        black_box(it.value());
        count += 1;
        it.next().expect("memstore next does not fail");
    }
    let scan_ns = per_op(start, count);

    println!(
        "memstore: {n} entries, {:.0} ns/insert, {:.0} ns/seek, {:.1} ns/next, {:.1} MiB used ({:.1} MiB reserved)",
        insert_ns,
        seek_ns,
        scan_ns,
        memstore.approximate_bytes() as f64 / (1 << 20) as f64,
        memstore.reserved_bytes() as f64 / (1 << 20) as f64,
    );

    let map = Mutex::new(BTreeMap::new());
    let start = Instant::now();
    for key in &keys {
        map.lock()
            .expect("not poisoned")
            .insert(OrdKey(key.clone()), value.to_vec());
    }
    let insert_ns = per_op(start, n);
    let start = Instant::now();
    for probe in &probes {
        let map = map.lock().expect("not poisoned");
        black_box(map.range(OrdKey(probe.clone())..).next());
    }
    let seek_ns = per_op(start, n);
    println!("BTreeMap+Mutex baseline: {insert_ns:.0} ns/insert, {seek_ns:.0} ns/seek (seek includes a key clone)");
}
