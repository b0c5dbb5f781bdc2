//! Chunks made ahead: once a server asks for them, a background thread keeps the pool topped
//! up with fresh chunks, and refills it after writers take some. One test in its own process:
//! the pool is process-wide.

mod common;

use cellar_storage::memstore::{chunk_pool, DEFAULT_CHUNK_SIZE};
use common::{filled_memstore, read_all};
use std::time::{Duration, Instant};

/// Waits (at most 20 s) until the pool holds `chunks` chunks; false if it never did.
fn pool_reaches(chunks: usize) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if chunk_pool::held_bytes() == chunks * DEFAULT_CHUNK_SIZE {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

#[test]
fn the_pool_is_kept_topped_up_with_fresh_chunks() {
    chunk_pool::set_limit(16 * DEFAULT_CHUNK_SIZE);
    assert_eq!(
        chunk_pool::held_bytes(),
        0,
        "nothing is made before a server asks"
    );

    chunk_pool::keep_ready(4 * DEFAULT_CHUNK_SIZE + 1000);
    assert!(
        pool_reaches(4),
        "4 whole chunks made ahead, got {} bytes",
        chunk_pool::held_bytes()
    );

    // A memstore of about 6 MiB takes the ready chunks (and makes more itself if it must); the
    // thread then makes the pool whole again while the memstore still holds its chunks.
    let (memstore, cells) = filled_memstore(6000, 0x5a);
    assert!(memstore.reserved_bytes() >= 3 * DEFAULT_CHUNK_SIZE);
    assert!(
        pool_reaches(4),
        "refilled to 4 chunks, got {} bytes",
        chunk_pool::held_bytes()
    );
    assert_eq!(
        read_all(&mut memstore.iter()),
        cells,
        "made chunks serve like any other"
    );

    // Dropped, its chunks join the ready ones, up to the limit.
    let reserved = memstore.reserved_bytes() / DEFAULT_CHUNK_SIZE;
    drop(memstore);
    assert_eq!(
        chunk_pool::held_bytes(),
        (4 + reserved).min(16) * DEFAULT_CHUNK_SIZE
    );

    // The limit caps the ready chunks too; with nothing asked, nothing more is made.
    chunk_pool::set_limit(2 * DEFAULT_CHUNK_SIZE);
    assert_eq!(chunk_pool::held_bytes(), 2 * DEFAULT_CHUNK_SIZE);
    chunk_pool::keep_ready(0);
    let (small, _) = filled_memstore(3000, 1);
    drop(small);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(chunk_pool::held_bytes(), 2 * DEFAULT_CHUNK_SIZE);
    let (taker, _) = filled_memstore(3000, 1);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        chunk_pool::held_bytes() < 2 * DEFAULT_CHUNK_SIZE,
        "with keep_ready(0) chunks taken are not made again"
    );
    drop(taker);
}
