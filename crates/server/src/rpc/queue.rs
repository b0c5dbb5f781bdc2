//! The bounded call queue between the connection readers (on the reactor) and the handler
//! threads. A reader never waits on it: a full queue is an immediate refusal, which the
//! reader answers with SERVER_BUSY, so back-pressure reaches clients instead of piling up
//! memory in the server.

use crate::metrics::RpcMetrics;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::Arc;

/// Why a call was not queued; the call is handed back.
pub(crate) enum Refused<T> {
    Full(T),
    Closed(T),
}

struct State<T> {
    items: VecDeque<T>,
    closed: bool,
}

pub(crate) struct CallQueue<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
    capacity: usize,
    metrics: Arc<RpcMetrics>,
}

impl<T> CallQueue<T> {
    pub(crate) fn new(capacity: usize, metrics: Arc<RpcMetrics>) -> CallQueue<T> {
        CallQueue {
            state: Mutex::new(State {
                items: VecDeque::with_capacity(capacity.min(4096)),
                closed: false,
            }),
            ready: Condvar::new(),
            capacity,
            metrics,
        }
    }

    /// Queues a call unless the queue is full or closed. Never blocks beyond the lock.
    pub(crate) fn try_push(&self, item: T) -> Result<(), Refused<T>> {
        let mut s = self.state.lock();
        if s.closed {
            return Err(Refused::Closed(item));
        }
        if s.items.len() >= self.capacity {
            return Err(Refused::Full(item));
        }
        s.items.push_back(item);
        self.metrics.set_queue_depth(s.items.len());
        drop(s);
        self.ready.notify_one();
        Ok(())
    }

    /// The next call; waits for one. `None` once the queue is closed and drained.
    pub(crate) fn pop(&self) -> Option<T> {
        let mut s = self.state.lock();
        loop {
            if let Some(item) = s.items.pop_front() {
                self.metrics.set_queue_depth(s.items.len());
                return Some(item);
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

    #[test]
    fn full_and_closed_queues_refuse_and_drain() {
        let q = CallQueue::new(2, Arc::new(RpcMetrics::default()));
        assert!(q.try_push(1).is_ok());
        assert!(q.try_push(2).is_ok());
        assert!(matches!(q.try_push(3), Err(Refused::Full(3))));
        assert_eq!(q.metrics.queue_depth(), 2);
        q.close();
        assert!(matches!(q.try_push(4), Err(Refused::Closed(4))));
        assert_eq!(q.pop(), Some(1));
        assert_eq!(q.pop(), Some(2));
        assert_eq!(q.pop(), None);
        assert_eq!(q.metrics.queue_depth(), 0);
    }
}
