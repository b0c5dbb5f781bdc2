//! Flush and compaction threads shared by the regions of a server: a flush thread, so a long
//! compaction never delays a flush (which would hold writers back), and compaction threads
//! (`StorageConfig::compaction_threads`, two by default), so a long compaction does not hold
//! back the small ones behind it (a store's compactions claim disjoint files:
//! `compaction.rs`).
//!
//! Compaction threads run at a lower CPU priority (`StorageConfig::compaction_nice`): when
//! every core is busy, reads and writes get the CPU first and compactions take what is left,
//! as a merge is never what a client waits for, until a store's file count holds its writers
//! back; a compaction of such a store runs at normal priority ([`compaction_priority`]). At
//! 10 M random writes on two cores, a writer sharing the CPU with a flush and two merges at
//! equal priority spent a quarter of its time waiting for a core (`docs/benchmarks.md`,
//! "Compaction threads").

use parking_lot::{Condvar, Mutex};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::thread::{self, JoinHandle, ThreadId};

type Job = Box<dyn FnOnce() + Send>;

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Flush,
    Compaction,
}

struct Queued {
    region: u64,
    job: Job,
}

#[derive(Default)]
struct State {
    queues: HashMap<(Kind,), VecDeque<Queued>>,
    /// Regions with a queued job of a kind: a second request is dropped, the queued job will
    /// look at the region's state when it runs.
    queued: HashSet<(Kind, u64)>,
    /// Jobs queued or running per region.
    outstanding: HashMap<u64, usize>,
    /// Jobs running now, per kind.
    running: HashMap<Kind, usize>,
    stopped: bool,
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
    idle: Condvar,
}

pub struct Background {
    shared: Option<Arc<Shared>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    thread_ids: Vec<ThreadId>,
}

impl Background {
    /// Starts the flush thread and `compaction_threads` compaction threads (at least one)
    /// at `compaction_nice`; with `enabled` false, none, and submissions are ignored.
    pub fn start(enabled: bool, compaction_threads: usize, compaction_nice: i32) -> Background {
        if !enabled {
            return Background {
                shared: None,
                threads: Mutex::new(Vec::new()),
                thread_ids: Vec::new(),
            };
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            idle: Condvar::new(),
        });
        let mut threads = Vec::new();
        let workers = std::iter::once((Kind::Flush, "cellar-flush".to_string())).chain(
            (1..=compaction_threads.max(1))
                .map(|i| (Kind::Compaction, format!("cellar-compact-{i}"))),
        );
        for (kind, name) in workers {
            let sh = Arc::clone(&shared);
            match thread::Builder::new().name(name.clone()).spawn(move || {
                if kind == Kind::Compaction {
                    COMPACTION_NICE.with(|n| n.set(Some(compaction_nice)));
                    compaction_priority(false);
                }
                worker(sh, kind)
            }) {
                Ok(h) => threads.push(h),
                Err(e) => tracing::error!(error = %e, "could not start the {name} thread"),
            }
        }
        let thread_ids = threads.iter().map(|h| h.thread().id()).collect();
        Background {
            shared: Some(shared),
            threads: Mutex::new(threads),
            thread_ids,
        }
    }

    fn submit(&self, kind: Kind, region: u64, job: Job) {
        let Some(sh) = &self.shared else { return };
        let mut st = sh.state.lock();
        if st.stopped || !st.queued.insert((kind, region)) {
            return;
        }
        *st.outstanding.entry(region).or_default() += 1;
        st.queues
            .entry((kind,))
            .or_default()
            .push_back(Queued { region, job });
        sh.work.notify_all();
    }

    pub fn submit_flush(&self, region: u64, job: impl FnOnce() + Send + 'static) {
        self.submit(Kind::Flush, region, Box::new(job));
    }

    pub fn submit_compaction(&self, region: u64, job: impl FnOnce() + Send + 'static) {
        self.submit(Kind::Compaction, region, Box::new(job));
    }

    /// Waits until `region` has no queued or running job.
    pub fn wait_idle(&self, region: u64) {
        let Some(sh) = &self.shared else { return };
        let mut st = sh.state.lock();
        while st.outstanding.get(&region).copied().unwrap_or(0) > 0 && !st.stopped {
            sh.idle.wait(&mut st);
        }
    }

    /// Flush and compaction jobs queued or running: `(flushes, compactions)`, for gauges.
    pub fn queue_lengths(&self) -> (usize, usize) {
        let Some(sh) = &self.shared else {
            return (0, 0);
        };
        let st = sh.state.lock();
        let len = |kind: Kind| {
            st.queues.get(&(kind,)).map_or(0, VecDeque::len)
                + st.running.get(&kind).copied().unwrap_or(0)
        };
        (len(Kind::Flush), len(Kind::Compaction))
    }

    /// Stops the threads after their current job; queued jobs are dropped. Idempotent.
    pub fn stop(&self) {
        let Some(sh) = &self.shared else { return };
        {
            let mut st = sh.state.lock();
            st.stopped = true;
            st.queues.clear();
            st.queued.clear();
            st.outstanding.clear();
            sh.work.notify_all();
            sh.idle.notify_all();
        }
        // A worker may end up dropping the last reference to what owns us: never join itself.
        if self.thread_ids.contains(&thread::current().id()) {
            return;
        }
        for h in self.threads.lock().drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How often an idle worker wakes to look for idle memstore chunks.
const IDLE_CHECK: std::time::Duration = std::time::Duration::from_secs(2);

thread_local! {
    /// On a compaction thread: the nice value it runs at when no writer waits on it.
    static COMPACTION_NICE: std::cell::Cell<Option<i32>> = const { std::cell::Cell::new(None) };
}

/// On a compaction thread, sets its CPU priority for the merge about to run: normal when
/// `urgent` (the store's writers are held back by its file count), else the configured
/// `compaction_nice`. Elsewhere (an explicit compaction on a caller's thread), and off Linux,
/// nothing changes.
pub(crate) fn compaction_priority(urgent: bool) {
    let Some(nice) = COMPACTION_NICE.with(std::cell::Cell::get) else {
        return;
    };
    set_nice(if urgent { 0 } else { nice });
}

#[cfg(target_os = "linux")]
fn set_nice(nice: i32) {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    // Linux applies PRIO_PROCESS with a thread id to that thread alone. A thread may always
    // lower its priority; raising it back needs CAP_SYS_NICE or RLIMIT_NICE, without which
    // the thread stays lowered (logged once per thread).
    // SAFETY: plain system call on the calling thread's id.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    if rc != 0 {
        thread_local!(static WARNED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
        if !WARNED.with(|w| w.replace(true)) {
            tracing::debug!(nice, error = %std::io::Error::last_os_error(), "a compaction thread cannot change its priority");
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn set_nice(_nice: i32) {}

fn worker(sh: Arc<Shared>, kind: Kind) {
    loop {
        let q = {
            let mut st = sh.state.lock();
            loop {
                if st.stopped {
                    return;
                }
                if let Some(q) = st.queues.get_mut(&(kind,)).and_then(VecDeque::pop_front) {
                    st.queued.remove(&(kind, q.region));
                    *st.running.entry(kind).or_default() += 1;
                    break q;
                }
                // The flush thread, with nothing to do for a while, gives idle memstore
                // chunks back to the OS (`chunk_pool::trim_if_idle`).
                let idle = sh.work.wait_for(&mut st, IDLE_CHECK).timed_out();
                if idle && kind == Kind::Flush {
                    parking_lot::MutexGuard::unlocked(&mut st, || {
                        crate::memstore::chunk_pool::trim_if_idle();
                    });
                }
            }
        };
        let region = q.region;
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(q.job)).is_err() {
            tracing::error!(
                region,
                "a background job panicked; the region keeps serving"
            );
        }
        let mut st = sh.state.lock();
        if let Some(n) = st.running.get_mut(&kind) {
            *n = n.saturating_sub(1);
        }
        if let Some(n) = st.outstanding.get_mut(&region) {
            *n -= 1;
            if *n == 0 {
                st.outstanding.remove(&region);
            }
        }
        sh.idle.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    #[test]
    fn queue_lengths_count_queued_and_running_jobs() {
        let bg = Background::start(true, 2, 0);
        assert_eq!(bg.queue_lengths(), (0, 0));
        let (started_tx, started_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        bg.submit_flush(1, move || {
            let _ = started_tx.send(());
            let _ = release_rx.recv_timeout(Duration::from_secs(60));
        });
        started_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the flush job started");
        bg.submit_flush(2, || {});
        bg.submit_compaction(3, || {});
        let (flushes, compactions) = bg.queue_lengths();
        assert_eq!(flushes, 2, "one running, one queued");
        assert!(compactions <= 1, "the compaction may already have run");
        release_tx.send(()).expect("release");
        let deadline = Instant::now() + Duration::from_secs(60);
        while bg.queue_lengths() != (0, 0) {
            assert!(Instant::now() < deadline, "jobs never finished");
            std::thread::sleep(Duration::from_millis(5));
        }
        bg.stop();
    }

    /// The calling thread's nice value.
    #[cfg(target_os = "linux")]
    fn own_nice() -> i32 {
        // SAFETY: gettid has no preconditions; getpriority only reads.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
    }

    /// Compaction threads run at the configured nice value, flushes and callers' threads at
    /// their own; a merge whose writers wait runs at normal priority (where the process may
    /// raise a thread's priority back: as root, or with `RLIMIT_NICE`).
    #[cfg(target_os = "linux")]
    #[test]
    fn compaction_threads_run_at_their_nice_value() {
        let caller = own_nice();
        let bg = Background::start(true, 1, 7);
        let (tx, rx) = mpsc::channel();
        let send = tx.clone();
        bg.submit_compaction(1, move || {
            let lowered = own_nice();
            compaction_priority(true);
            let urgent = own_nice();
            compaction_priority(false);
            let _ = send.send(("compaction", lowered, urgent, own_nice()));
        });
        bg.submit_flush(2, move || {
            compaction_priority(false);
            let _ = tx.send(("flush", own_nice(), own_nice(), own_nice()));
        });
        let mut got: Vec<_> = (0..2)
            .map(|_| {
                rx.recv_timeout(Duration::from_secs(60))
                    .expect("both jobs ran")
            })
            .collect();
        got.sort();
        let (_, lowered, urgent, again) = got[0];
        assert_eq!((lowered, again), (7, 7), "a compaction thread at nice 7");
        // SAFETY: geteuid only reads.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!(urgent, 0, "an urgent merge runs at normal priority");
        }
        assert_eq!(
            got[1],
            ("flush", caller, caller, caller),
            "the flush thread is not lowered"
        );
        compaction_priority(false);
        assert_eq!(own_nice(), caller, "a caller's thread keeps its priority");
        bg.stop();
    }
}
