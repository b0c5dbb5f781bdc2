//! The bounded call queue between the connection readers (on the reactor) and the handler
//! threads, one per node, shared by both front ends. A reader never waits on it: a full queue
//! is an immediate refusal, which the reader answers as busy, so back-pressure reaches clients
//! instead of piling up memory in the server.

use crate::metrics::RpcMetrics;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;

/// A call waiting for a handler thread, of either front end.
pub(crate) trait Job: Send + 'static {
    /// Runs the call on a handler thread and queues its answer; never waits on a connection.
    fn run(self: Box<Self>);
    /// The counters of the call's front end (its share of the queue's depth).
    fn metrics(&self) -> &RpcMetrics;
}

/// Why a call was not queued; the call is handed back.
pub(crate) enum Refused<T> {
    Full(T),
    Closed(T),
}

struct State {
    items: VecDeque<Box<dyn Job>>,
    closed: bool,
}

pub(crate) struct CallQueue {
    state: Mutex<State>,
    ready: Condvar,
    capacity: usize,
}

impl CallQueue {
    pub(crate) fn new(capacity: usize) -> CallQueue {
        CallQueue {
            state: Mutex::new(State {
                items: VecDeque::with_capacity(capacity.min(4096)),
                closed: false,
            }),
            ready: Condvar::new(),
            capacity,
        }
    }

    /// Queues a call unless the queue is full or closed. Never blocks beyond the lock.
    pub(crate) fn try_push<J: Job>(&self, job: J) -> Result<(), Refused<J>> {
        let mut s = self.state.lock();
        if s.closed {
            return Err(Refused::Closed(job));
        }
        if s.items.len() >= self.capacity {
            return Err(Refused::Full(job));
        }
        job.metrics().queued();
        s.items.push_back(Box::new(job));
        drop(s);
        self.ready.notify_one();
        Ok(())
    }

    /// The next call; waits for one. `None` once the queue is closed and drained.
    pub(crate) fn pop(&self) -> Option<Box<dyn Job>> {
        let mut s = self.state.lock();
        loop {
            if let Some(job) = s.items.pop_front() {
                job.metrics().dequeued();
                return Some(job);
            }
            if s.closed {
                return None;
            }
            self.ready.wait(&mut s);
        }
    }

    /// Refuses new calls; the handlers finish what is queued, then [`CallQueue::pop`]
    /// returns `None`.
    pub(crate) fn close(&self) {
        self.state.lock().closed = true;
        self.ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    struct Numbered {
        n: u32,
        ran: Arc<AtomicU32>,
        metrics: Arc<RpcMetrics>,
    }

    impl Job for Numbered {
        fn run(self: Box<Self>) {
            self.ran.store(self.n, Ordering::Relaxed);
        }
        fn metrics(&self) -> &RpcMetrics {
            &self.metrics
        }
    }

    #[test]
    fn full_and_closed_queues_refuse_and_drain_counting_each_front_end() {
        let q = CallQueue::new(2);
        let (native, hbase) = (
            Arc::new(RpcMetrics::default()),
            Arc::new(RpcMetrics::default()),
        );
        let ran = Arc::new(AtomicU32::new(0));
        let job = |n, m: &Arc<RpcMetrics>| Numbered {
            n,
            ran: ran.clone(),
            metrics: m.clone(),
        };
        assert!(q.try_push(job(1, &native)).is_ok());
        assert!(q.try_push(job(2, &hbase)).is_ok());
        assert!(matches!(q.try_push(job(3, &native)), Err(Refused::Full(j)) if j.n == 3));
        assert_eq!((native.queue_depth(), hbase.queue_depth()), (1, 1));
        q.close();
        assert!(matches!(q.try_push(job(4, &hbase)), Err(Refused::Closed(j)) if j.n == 4));
        for want in [1, 2] {
            q.pop().expect("a queued call").run();
            assert_eq!(ran.load(Ordering::Relaxed), want);
        }
        assert!(q.pop().is_none());
        assert_eq!((native.queue_depth(), hbase.queue_depth()), (0, 0));
    }
}
