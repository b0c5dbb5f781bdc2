//! Background threads (the region server's lease reaper and compaction check, the master's
//! split checker and assignment loop): each wakes every interval, runs its job on its owner if
//! the owner still exists, and stops when told.
//!
//! Threads hold only a weak reference, so dropping the last `Arc` of the owner without a
//! shutdown (a simulated crash) still frees it and ends the threads.

use parking_lot::{Condvar, Mutex};
use std::sync::{Arc, Weak};
use std::thread::{self, JoinHandle};
use std::time::Duration;

#[derive(Default)]
struct Stop {
    stopped: Mutex<bool>,
    wake: Condvar,
}

pub(crate) struct Workers<T> {
    stop: Arc<Stop>,
    handles: Mutex<Vec<JoinHandle<()>>>,
    owner: std::marker::PhantomData<fn(&T)>,
}

impl<T: Send + Sync + 'static> Workers<T> {
    pub fn new() -> Workers<T> {
        Workers {
            stop: Arc::default(),
            handles: Mutex::default(),
            owner: std::marker::PhantomData,
        }
    }

    /// Starts a thread running `job` every `every` until stopped.
    pub fn spawn(&self, name: &str, every: Duration, owner: Weak<T>, job: fn(&T)) {
        let stop = Arc::clone(&self.stop);
        let spawned = thread::Builder::new()
            .name(name.into())
            .spawn(move || loop {
                {
                    let mut stopped = stop.stopped.lock();
                    if !*stopped {
                        stop.wake.wait_for(&mut stopped, every);
                    }
                    if *stopped {
                        return;
                    }
                }
                let Some(s) = owner.upgrade() else { return };
                job(&s);
            });
        match spawned {
            Ok(h) => self.handles.lock().push(h),
            Err(e) => tracing::error!(error = %e, "could not start the {name} thread"),
        }
    }

    /// Tells every thread to stop and waits for them (never for the calling thread itself,
    /// which may be a worker dropping the last reference to the server).
    pub fn stop(&self) {
        {
            let mut stopped = self.stop.stopped.lock();
            *stopped = true;
            self.stop.wake.notify_all();
        }
        let me = thread::current().id();
        let handles: Vec<JoinHandle<()>> = self.handles.lock().drain(..).collect();
        for h in handles {
            if h.thread().id() != me && h.join().is_err() {
                tracing::error!("a background thread panicked");
            }
        }
    }
}
