//! Prepared scans (seed 003): a scan's shape (table, columns, filter, time range, versions)
//! kept by the server for the connection that prepared it, then executed any number of times
//! by SCAN_OPEN with `prepared` set, each execution naming only its row range and limit. Its
//! results travel in the compact encoding of `cellar_proto::prepared`: every row key once,
//! columns by index into the prepared list.
//!
//! A handle belongs to one connection: it is dropped by CLOSE_PREPARED_SCAN, when its
//! connection ends, or after a scanner lease without use; a connection holds at most
//! `scanner.max_prepared_per_connection`. Handles are a counter run through a keyed hash, like
//! scanner ids.

use crate::error::ServerError;
use cellar_model::Scan;
use cellar_proto::prepared::Columns;
use parking_lot::Mutex;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a handle stands for.
#[derive(Debug)]
pub struct PreparedScan {
    pub table: String,
    /// The scan without its row range and limit.
    pub scan: Scan,
    pub columns: Arc<Columns>,
    pub compress: bool,
}

struct Entry {
    conn_id: u64,
    touched: Instant,
    scan: Arc<PreparedScan>,
}

/// Every prepared scan of the server.
pub struct PreparedRegistry {
    handles: Mutex<HashMap<u64, Entry>>,
    lease: Duration,
    per_connection: usize,
    counter: AtomicU64,
    keys: RandomState,
    prepared: AtomicU64,
    executions: AtomicU64,
}

impl PreparedRegistry {
    pub fn new(lease: Duration, per_connection: usize) -> PreparedRegistry {
        PreparedRegistry {
            handles: Mutex::new(HashMap::new()),
            lease,
            per_connection,
            counter: AtomicU64::new(1),
            keys: RandomState::new(),
            prepared: AtomicU64::new(0),
            executions: AtomicU64::new(0),
        }
    }

    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Keeps `scan` for connection `conn_id`; its handle.
    pub fn prepare(&self, conn_id: u64, scan: PreparedScan) -> Result<u64, ServerError> {
        let mut handles = self.handles.lock();
        let held = handles.values().filter(|e| e.conn_id == conn_id).count();
        if held >= self.per_connection {
            return Err(ServerError::invalid(format!(
                "this connection already holds {held} prepared scans \
                 (scanner.max_prepared_per_connection); close some first"
            )));
        }
        let handle = loop {
            let n = self.counter.fetch_add(1, Ordering::Relaxed);
            let h = self.keys.hash_one(n);
            if h != 0 && !handles.contains_key(&h) {
                break h;
            }
        };
        handles.insert(
            handle,
            Entry {
                conn_id,
                touched: Instant::now(),
                scan: Arc::new(scan),
            },
        );
        self.prepared.fetch_add(1, Ordering::Relaxed);
        Ok(handle)
    }

    /// The prepared scan of `handle`, if connection `conn_id` holds it; renews its lease and
    /// counts an execution.
    pub fn execute(&self, conn_id: u64, handle: u64) -> Result<Arc<PreparedScan>, ServerError> {
        let mut handles = self.handles.lock();
        match handles.get_mut(&handle) {
            Some(e) if e.conn_id == conn_id => {
                e.touched = Instant::now();
                self.executions.fetch_add(1, Ordering::Relaxed);
                Ok(Arc::clone(&e.scan))
            }
            _ => Err(ServerError::UnknownPreparedScan(handle)),
        }
    }

    /// Drops `handle` if connection `conn_id` holds it.
    pub fn close(&self, conn_id: u64, handle: u64) {
        let mut handles = self.handles.lock();
        if handles.get(&handle).is_some_and(|e| e.conn_id == conn_id) {
            handles.remove(&handle);
        }
    }

    pub fn connection_closed(&self, conn_id: u64) {
        self.handles.lock().retain(|_, e| e.conn_id != conn_id);
    }

    /// Drops handles unused for longer than the lease.
    pub fn reap_expired(&self) {
        let now = Instant::now();
        self.handles
            .lock()
            .retain(|_, e| now.saturating_duration_since(e.touched) <= self.lease);
    }

    pub fn clear(&self) {
        self.handles.lock().clear();
    }

    /// (handles open, prepared since start, executions since start).
    pub fn counts(&self) -> (u64, u64, u64) {
        (
            self.handles.lock().len() as u64,
            self.prepared.load(Ordering::Relaxed),
            self.executions.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan() -> PreparedScan {
        PreparedScan {
            table: "t".into(),
            scan: Scan::new(),
            columns: Arc::new(Columns::default()),
            compress: false,
        }
    }

    #[test]
    fn handles_belong_to_their_connection_and_are_bounded() {
        let r = PreparedRegistry::new(Duration::from_secs(60), 2);
        let a = r.prepare(1, scan()).expect("prepare");
        let b = r.prepare(1, scan()).expect("prepare");
        assert_ne!(a, b);
        let e = r.prepare(1, scan()).expect_err("bounded");
        assert!(e.to_string().contains("max_prepared_per_connection"), "{e}");
        assert!(
            r.prepare(2, scan()).is_ok(),
            "another connection has its own bound"
        );
        assert!(r.execute(1, a).is_ok());
        assert!(matches!(
            r.execute(2, a),
            Err(ServerError::UnknownPreparedScan(_))
        ));
        r.close(2, a);
        assert!(
            r.execute(1, a).is_ok(),
            "another connection cannot close it"
        );
        r.close(1, a);
        assert!(r.execute(1, a).is_err());
        r.connection_closed(1);
        assert!(r.execute(1, b).is_err());
        assert_eq!(r.counts(), (1, 3, 2));
    }

    #[test]
    fn unused_handles_expire() {
        let r = PreparedRegistry::new(Duration::ZERO, 4);
        let h = r.prepare(1, scan()).expect("prepare");
        std::thread::sleep(Duration::from_millis(5));
        r.reap_expired();
        assert!(r.execute(1, h).is_err());
    }
}
