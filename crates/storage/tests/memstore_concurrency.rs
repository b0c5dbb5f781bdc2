//! Memstore readers running against concurrent writers: every scan is sorted and sees every
//! key whose insert finished before the scan started; seeks land on finished keys.

use cellar_model::cell::CellType;
use cellar_model::key::{compare_keys, first_on_row, make_key, KeyRef};
use cellar_storage::iter::CellIter;
use cellar_storage::memstore::Memstore;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::cmp::Ordering;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const WRITERS: usize = 2;
const READERS: usize = 3;
const KEYS_PER_WRITER: usize = if cfg!(miri) { 60 } else { 20_000 };
const MAX_SCANS_PER_READER: usize = if cfg!(miri) { 3 } else { 200 };
const TIME_LIMIT: Duration = Duration::from_secs(20);

/// Writer `w`'s keys in insertion order: random 16-byte rows, so inserts land all over.
fn writer_keys(w: usize) -> Vec<Vec<u8>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(w as u64);
    let mut keys: Vec<Vec<u8>> = (0..KEYS_PER_WRITER)
        .map(|i| {
            let row: [u8; 16] = rng.gen();
            // The sequence id makes keys unique across writers.
            let seq = (w * KEYS_PER_WRITER + i) as u64;
            make_key(&row, b"q", rng.gen_range(0..4), CellType::Put, seq)
        })
        .collect();
    keys.shuffle(&mut rng);
    keys
}

fn value_for(key: &[u8]) -> Vec<u8> {
    key.iter().rev().copied().collect()
}

#[test]
fn readers_see_every_finished_insert_in_order() {
    let memstore = Arc::new(Memstore::with_chunk_size(64 * 1024));
    let keys: Arc<Vec<Vec<Vec<u8>>>> = Arc::new((0..WRITERS).map(writer_keys).collect());
    // done[w]: how many of writer w's keys are fully inserted (published with Release).
    let done: Arc<Vec<AtomicUsize>> = Arc::new((0..WRITERS).map(|_| AtomicUsize::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + TIME_LIMIT;

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (memstore, keys, done) = (memstore.clone(), keys.clone(), done.clone());
            thread::spawn(move || {
                for (i, key) in keys[w].iter().enumerate() {
                    memstore.insert(key, &value_for(key));
                    done[w].store(i + 1, AtomicOrdering::Release);
                    if Instant::now() > deadline {
                        break;
                    }
                }
            })
        })
        .collect();

    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let (memstore, keys, done, stop) =
                (memstore.clone(), keys.clone(), done.clone(), stop.clone());
            thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(100 + r as u64);
                let mut scans = 0;
                while scans < MAX_SCANS_PER_READER
                    && !stop.load(AtomicOrdering::Acquire)
                    && Instant::now() < deadline
                {
                    let finished: Vec<usize> = done
                        .iter()
                        .map(|d| d.load(AtomicOrdering::Acquire))
                        .collect();
                    let mut it = memstore.iter();

                    // Seeks to finished keys land exactly on them.
                    for _ in 0..20 {
                        let w = rng.gen_range(0..WRITERS);
                        if finished[w] == 0 {
                            continue;
                        }
                        let key = &keys[w][rng.gen_range(0..finished[w])];
                        it.seek(key).expect("seek");
                        assert!(it.valid());
                        assert_eq!(it.key(), &key[..]);
                        assert_eq!(it.value(), &value_for(key)[..]);
                        it.seek_for_prev(key).expect("seek_for_prev");
                        assert_eq!(it.key(), &key[..]);
                        // A seek to its row's start (answered by the row index) lands on that
                        // row, at or before the key.
                        let row = KeyRef::parse(key).expect("well-formed").row();
                        it.seek(&first_on_row(row)).expect("seek row start");
                        assert!(it.valid());
                        let found = KeyRef::parse(it.key()).expect("well-formed");
                        assert_eq!(found.row(), row);
                        assert_ne!(compare_keys(it.key(), key), Ordering::Greater);
                    }

                    // A full scan is sorted and holds every finished key.
                    let mut scanned: Vec<Vec<u8>> = Vec::new();
                    it.seek_to_first().expect("seek_to_first");
                    while it.valid() {
                        if let Some(last) = scanned.last() {
                            assert_eq!(
                                compare_keys(last, it.key()),
                                Ordering::Less,
                                "scan out of order"
                            );
                        }
                        assert_eq!(it.value(), &value_for(it.key())[..]);
                        scanned.push(it.key().to_vec());
                        it.next().expect("next");
                    }
                    for (w, &n) in finished.iter().enumerate() {
                        for key in &keys[w][..n] {
                            assert!(
                                scanned.binary_search_by(|k| compare_keys(k, key)).is_ok(),
                                "scan missed a key inserted before it started"
                            );
                        }
                    }
                    scans += 1;
                }
                scans
            })
        })
        .collect();

    for writer in writers {
        writer.join().expect("writer panicked");
    }
    stop.store(true, AtomicOrdering::Release);
    let mut total_scans = 0;
    for reader in readers {
        total_scans += reader.join().expect("reader panicked");
    }
    assert!(total_scans > 0);

    let inserted: usize = done.iter().map(|d| d.load(AtomicOrdering::Acquire)).sum();
    assert_eq!(memstore.len(), inserted);
    let mut it = memstore.iter();
    it.seek_to_first().expect("seek_to_first");
    let mut count = 0;
    while it.valid() {
        count += 1;
        it.next().expect("next");
    }
    assert_eq!(count, inserted);
}
