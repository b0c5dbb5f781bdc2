//! ASYNC_WAL writers do not outrun the disk: once `max_buffered_bytes` of records wait for the
//! OS, writers wait (writing the buffer out themselves), so memory stays bounded however slow
//! the disk is.

use bytes::Bytes;
use cellar_model::{Durability, FamilySchema, RowMutation, TableSchema};
use cellar_storage::fs::{FaultFs, FsRef};
use cellar_storage::region::{Region, StorageConfig};
use cellar_storage::wal::WalOptions;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const BOUND: usize = 64 * 1024;
const WRITERS: usize = 4;
const PUTS: usize = 300;
const VALUE: usize = 1024;

#[test]
fn async_writers_wait_once_the_buffer_is_full() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = FaultFs::new();
    let config = StorageConfig {
        wal: WalOptions {
            max_buffered_bytes: BOUND,
            async_flush_interval: Duration::from_millis(5),
            ..WalOptions::default()
        },
        ..StorageConfig::default()
    };
    let region = Arc::new(
        Region::open_standalone(
            Arc::new(fs.clone()) as FsRef,
            dir.path(),
            TableSchema::new("t", vec![FamilySchema::new("cf")]),
            config,
        )
        .expect("open"),
    );
    // The disk is slow: a write round takes 5 ms whatever its size.
    fs.set_write_delay(Duration::from_millis(5));
    let done = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicUsize::new(0));
    let monitor = {
        let (region, done, most) = (Arc::clone(&region), Arc::clone(&done), Arc::clone(&most));
        std::thread::spawn(move || {
            while !done.load(Ordering::Acquire) {
                most.fetch_max(region.services().wal.buffered_bytes(), Ordering::AcqRel);
                std::thread::sleep(Duration::from_micros(200));
            }
        })
    };
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let region = Arc::clone(&region);
            std::thread::spawn(move || {
                for i in 0..PUTS {
                    let row = Bytes::from(format!("w{w}-{i:05}"));
                    region
                        .mutate(
                            &RowMutation::new(row)
                                .put(b"cf", b"q", 1, vec![b'v'; VALUE])
                                .with_durability(Durability::AsyncWal),
                        )
                        .expect("async put");
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer");
    }
    done.store(true, Ordering::Release);
    monitor.join().expect("monitor");
    let stats = region.services().wal.stats();
    fs.set_write_delay(Duration::ZERO);
    // Each writer may append one record after passing the check.
    let slack = WRITERS * (VALUE + 200);
    let most = most.load(Ordering::Acquire);
    assert!(
        most <= BOUND + slack,
        "{most} bytes buffered, bound {BOUND} + {slack}"
    );
    assert!(
        most > BOUND / 2,
        "the disk was slow enough to fill the buffer: {most}"
    );
    // No round carried more than the bound: the records took many rounds.
    let total = (WRITERS * PUTS * VALUE) as u64;
    assert!(
        stats.flushes >= total / (BOUND + slack) as u64,
        "{} rounds for {total} bytes",
        stats.flushes
    );
    match Arc::try_unwrap(region) {
        Ok(r) => r.close().expect("close"),
        Err(_) => panic!("region still shared"),
    }
}
