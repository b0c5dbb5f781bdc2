//! In-flight bytes: what a front end holds in memory for its clients, counted per connection
//! and across all of a front end's connections (`rpc.max_connection_in_flight_bytes`,
//! `rpc.max_in_flight_bytes`). Both front ends use it.
//!
//! What counts: bytes read from a connection and not yet consumed (a frame still arriving),
//! request frames read and not yet answered, and answers not yet written to the socket. Each
//! is held as a [`Charge`] that gives its bytes back when dropped, so an answer dropped
//! because its connection died is uncounted too. A call's charge travels with it: the
//! request's size while it waits and runs, then its answer's size until the writer has sent
//! it ([`Charge::set`]).
//!
//! The bounds are enforced by the connections (`connection.rs` of each front end), not here:
//! a connection past its own bound stops reading ([`ConnBudget::room`]) and a front end past
//! its bound refuses new calls as busy ([`ConnBudget::server_full`]). Counters are relaxed
//! atomics: the bounds are limits on memory, not exact accounting barriers, and each check
//! may overshoot by what one read or one answer brings.
//!
//! Thread-safety: a [`ConnBudget`] is shared by its reader task, its writer task and the
//! handler threads answering its calls; charges are moved between them freely.

use crate::metrics::RpcMetrics;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use tokio::sync::Notify;

/// A front end's bound on in-flight bytes over all its connections.
pub(crate) struct ServerBudget {
    limit: u64,
    /// The count lives in the metrics (`in_flight_bytes`), so `/metrics` reads it directly.
    metrics: Arc<RpcMetrics>,
}

impl ServerBudget {
    pub(crate) fn new(limit: u64, metrics: Arc<RpcMetrics>) -> Arc<ServerBudget> {
        metrics.set_in_flight_limit(limit);
        Arc::new(ServerBudget { limit, metrics })
    }

    /// A budget for one new connection, bounded by `limit` bytes.
    pub(crate) fn connection(self: &Arc<Self>, limit: u64) -> Arc<ConnBudget> {
        Arc::new(ConnBudget {
            used: AtomicU64::new(0),
            limit,
            server: self.clone(),
            drained: Notify::new(),
        })
    }

    pub(crate) fn used(&self) -> u64 {
        self.metrics.in_flight_bytes()
    }
}

/// One connection's in-flight bytes.
pub(crate) struct ConnBudget {
    used: AtomicU64,
    limit: u64,
    server: Arc<ServerBudget>,
    /// Signalled whenever bytes are given back, for a reader waiting for room.
    drained: Notify,
}

impl ConnBudget {
    /// Counts `bytes` more, unconditionally; the returned charge gives them back when dropped.
    pub(crate) fn charge(self: &Arc<Self>, bytes: u64) -> Charge {
        let mut c = Charge {
            conn: self.clone(),
            bytes: 0,
        };
        c.set(bytes);
        c
    }

    pub(crate) fn used(&self) -> u64 {
        self.used.load(Relaxed)
    }

    /// True while the front end as a whole is at or past its bound: new calls are refused.
    pub(crate) fn server_full(&self) -> bool {
        self.server.used() >= self.server.limit
    }

    /// True when this connection may take in more: below its bound, or nothing of it is in
    /// flight beyond `own` (the bytes its reader holds itself, which only the reader can
    /// release: waiting for them would never end).
    pub(crate) fn room(&self, own: u64) -> bool {
        let used = self.used();
        used < self.limit || used <= own
    }

    /// Waits until [`ConnBudget::room`] holds for `own`. Wakes on every release, so the
    /// caller also sees a writer that died (its queued answers are released when dropped).
    pub(crate) async fn wait_for_room(&self, own: u64) {
        while !self.room(own) {
            // A release between the check and this wait leaves a permit: no wake-up is lost.
            self.drained.notified().await;
        }
    }

    /// True when growing a charge of `own` bytes to `to` bytes would take this connection or
    /// the front end past its bound while other bytes of this connection are in flight. A
    /// connection with nothing else in flight may always take its one answer, so any answer
    /// can eventually be sent.
    pub(crate) fn answer_overflows(&self, own: u64, to: u64) -> bool {
        let Some(grow) = to.checked_sub(own).filter(|g| *g > 0) else {
            return false;
        };
        let used = self.used();
        if used <= own {
            return false;
        }
        used + grow > self.limit || self.server.used() + grow > self.server.limit
    }

    fn add(&self, n: u64) {
        self.used.fetch_add(n, Relaxed);
        self.server.metrics.add_in_flight(n);
    }

    fn sub(&self, n: u64) {
        self.used.fetch_sub(n, Relaxed);
        self.server.metrics.sub_in_flight(n);
        self.drained.notify_one();
    }
}

/// Bytes counted against a connection and its front end until dropped (or [`Charge::set`]
/// to another size).
pub(crate) struct Charge {
    conn: Arc<ConnBudget>,
    bytes: u64,
}

impl Charge {
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    pub(crate) fn budget(&self) -> &Arc<ConnBudget> {
        &self.conn
    }

    /// Re-sizes the charge: a call's request becomes its answer.
    pub(crate) fn set(&mut self, bytes: u64) {
        if bytes > self.bytes {
            self.conn.add(bytes - self.bytes);
        } else if bytes < self.bytes {
            self.conn.sub(self.bytes - bytes);
        }
        self.bytes = bytes;
    }

    /// Moves `bytes` of this charge (at most all of it) into a charge of their own, without
    /// touching the counters: bytes cut out of the read buffer become a request's charge.
    pub(crate) fn split(&mut self, bytes: u64) -> Charge {
        let bytes = bytes.min(self.bytes);
        self.bytes -= bytes;
        Charge {
            conn: self.conn.clone(),
            bytes,
        }
    }

    /// Takes over `other`'s bytes (of the same connection) without touching the counters.
    pub(crate) fn absorb(&mut self, mut other: Charge) {
        debug_assert!(Arc::ptr_eq(&self.conn, &other.conn));
        self.bytes += std::mem::take(&mut other.bytes);
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.conn.sub(self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_count_per_connection_and_per_server_until_dropped() {
        let metrics = Arc::new(RpcMetrics::default());
        let server = ServerBudget::new(1000, metrics.clone());
        let a = server.connection(100);
        let b = server.connection(100);
        let mut buffered = a.charge(60);
        let request = buffered.split(50);
        assert_eq!((a.used(), metrics.in_flight_bytes()), (60, 60));
        assert!(a.room(0), "60 of 100");
        let mut answer = request;
        answer.set(80);
        assert_eq!(a.used(), 90);
        assert!(a.answer_overflows(0, 20), "90 + 20 > 100");
        assert!(!a.answer_overflows(0, 5), "90 + 5 fits");
        answer.set(95);
        assert!(!a.room(10), "past its bound with others' bytes in flight");
        assert!(
            a.room(105),
            "all of it the reader's own: never wait for oneself"
        );
        let other = b.charge(950);
        assert!(a.server_full() && b.server_full());
        assert!(
            !server.connection(100).answer_overflows(0, 500),
            "a lone answer always goes"
        );
        let c = server.connection(100);
        let held = c.charge(10);
        assert!(c.answer_overflows(0, 50), "c has room, the server has not");
        drop((other, held));
        assert!(!a.server_full());
        let mut batch = a.charge(0);
        batch.absorb(answer);
        assert_eq!((batch.bytes(), a.used()), (95, 105));
        drop(batch);
        drop(buffered);
        assert_eq!((a.used(), b.used(), metrics.in_flight_bytes()), (0, 0, 0));
        assert_eq!(metrics.in_flight_peak(), 1065);
    }

    #[test]
    fn a_waiting_reader_wakes_when_answers_drain() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let server = ServerBudget::new(1 << 20, Arc::new(RpcMetrics::default()));
        let conn = server.connection(100);
        let answer = conn.charge(150);
        let waiter = {
            let conn = conn.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                drop(answer);
                conn.used()
            })
        };
        rt.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(10), conn.wait_for_room(0))
                .await
                .expect("woken once the answer is written");
        });
        assert_eq!(waiter.join().expect("thread"), 0);
    }
}
