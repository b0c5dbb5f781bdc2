//! The memstore chunk pool: a dropped memstore's chunks serve the next memstore, within the
//! pool's limit. One test in its own process: the pool is process-wide.

mod common;

use cellar_storage::iter::CellIter;
use cellar_storage::memstore::{chunk_pool, DEFAULT_CHUNK_SIZE};
use common::{filled_memstore as filled, read_all};

#[test]
fn dropped_memstores_feed_the_next_within_the_limit() {
    chunk_pool::set_limit(4 * DEFAULT_CHUNK_SIZE);
    assert_eq!(chunk_pool::held_bytes(), 0);

    // ~8 MiB of cells: more chunks than the pool keeps.
    let (first, _) = filled(8000, 0xaa);
    let first_reserved = first.reserved_bytes();
    assert!(first_reserved > 4 * DEFAULT_CHUNK_SIZE);
    // An iterator keeps the memory alive after the memstore handle goes.
    let mut it = first.iter();
    drop(first);
    it.seek_to_first().expect("seek");
    assert_eq!(it.value(), &[0xaa; 1024][..]);
    assert_eq!(chunk_pool::held_bytes(), 0, "still in use");
    drop(it);
    assert_eq!(
        chunk_pool::held_bytes(),
        4 * DEFAULT_CHUNK_SIZE,
        "kept up to the limit"
    );

    // The next memstore takes the kept chunks (stale bytes and all) and reads back only what
    // it was given.
    let (second, cells) = filled(1500, 0x55);
    assert_eq!(
        chunk_pool::held_bytes(),
        3 * DEFAULT_CHUNK_SIZE,
        "one chunk reused"
    );
    assert_eq!(read_all(&mut second.iter()), cells);
    drop(second);
    assert_eq!(chunk_pool::held_bytes(), 4 * DEFAULT_CHUNK_SIZE);

    // Lowering the limit frees what is above it; zero keeps nothing.
    chunk_pool::set_limit(DEFAULT_CHUNK_SIZE);
    assert_eq!(chunk_pool::held_bytes(), DEFAULT_CHUNK_SIZE);
    chunk_pool::set_limit(0);
    assert_eq!(chunk_pool::held_bytes(), 0);
    let (third, _) = filled(10, 1);
    drop(third);
    assert_eq!(chunk_pool::held_bytes(), 0);
}
