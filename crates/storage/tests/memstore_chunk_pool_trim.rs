//! An idle chunk pool gives its chunks back (`chunk_pool::trim_if_idle`): memory that writes
//! left behind becomes the OS's again once no memstore has used the pool for a while. One test
//! in its own process: the pool is process-wide.

mod common;

use cellar_storage::memstore::{chunk_pool, DEFAULT_CHUNK_SIZE};
use common::filled_memstore as filled;
use std::time::Duration;

#[test]
fn an_idle_pool_frees_its_chunks_and_a_busy_one_keeps_them() {
    chunk_pool::set_limit(4 * DEFAULT_CHUNK_SIZE);
    let (memstore, _) = filled(8000, 0xaa);
    drop(memstore);
    assert_eq!(chunk_pool::held_bytes(), 4 * DEFAULT_CHUNK_SIZE);

    // Just used: not idle for an hour, so nothing goes.
    assert_eq!(chunk_pool::trim_idle_for(Duration::from_secs(3600)), 0);
    assert_eq!(chunk_pool::held_bytes(), 4 * DEFAULT_CHUNK_SIZE);

    // Idle for the time asked (here: any): every chunk goes (no ready target was set).
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        chunk_pool::trim_idle_for(Duration::from_millis(10)),
        4 * DEFAULT_CHUNK_SIZE
    );
    assert_eq!(chunk_pool::held_bytes(), 0);

    // The next memstore works from fresh chunks, and the pool fills again when it drops.
    let (again, _) = filled(1500, 0x55);
    drop(again);
    assert!(chunk_pool::held_bytes() > 0);
}
