//! YCSB's client: splits a phase's operations across OS threads, throttles each thread to its
//! share of the target rate, stops at `maxexecutiontime`, and reports progress on stderr.

use super::db::{Db, Measurements};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// What the runner drives: YCSB's workload interface (implemented by `CoreWorkload`).
pub trait Workload: Sync {
    /// Per-thread state (key sequences, random generators); made on the thread that uses it.
    type State;
    fn thread_state(&self, thread_id: usize, thread_count: usize) -> Self::State;
    /// One insert of the load phase; `false` stops the thread.
    fn do_insert(&self, db: &dyn Db, state: &mut Self::State) -> bool;
    /// One transaction of the run phase; `false` stops the thread.
    fn do_transaction(&self, db: &dyn Db, state: &mut Self::State, meas: &dyn Measurements)
        -> bool;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Inserts (`cellar bench load`).
    Load,
    /// Transactions (`cellar bench run`).
    Run,
}

/// How to run a phase.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    pub phase: Phase,
    pub threads: usize,
    /// Operations of the whole phase (insert count or operation count).
    pub op_count: u64,
    /// Total operations per second across threads; 0: unthrottled.
    pub target_ops: u64,
    /// YCSB's `maxexecutiontime`: threads stop after this long.
    pub max_execution: Option<Duration>,
    /// `-s`: a status line every this often.
    pub status_interval: Option<Duration>,
    /// A progress line redrawn every second (when stderr is a terminal).
    pub progress_line: bool,
}

/// What a phase did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOutcome {
    pub runtime: Duration,
    /// Operations completed, failed ones included.
    pub ops_done: u64,
}

/// Thread `id`'s share of `total` operations: an equal part, the remainder going one each to
/// the first threads (YCSB's split).
pub fn thread_share(total: u64, threads: usize, id: usize) -> u64 {
    let threads = threads.max(1) as u64;
    total / threads + u64::from((id as u64) < total % threads)
}

/// How long each thread waits between its operations' scheduled starts, if throttled.
fn tick(target_ops: u64, threads: usize) -> Option<Duration> {
    if target_ops == 0 {
        return None;
    }
    let per_thread = target_ops as f64 / threads.max(1) as f64;
    Some(Duration::from_secs_f64(1.0 / per_thread))
}

/// Sleeps until `deadline`, waking early if `stop` is set.
fn sleep_until(deadline: Instant, stop: &AtomicBool) {
    loop {
        let now = Instant::now();
        if now >= deadline || stop.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(100)));
    }
}

/// Runs the phase to completion (or `maxexecutiontime`) and returns its runtime and count.
pub fn run_phase<W: Workload>(
    workload: &W,
    db: &dyn Db,
    meas: &dyn Measurements,
    cfg: &RunnerConfig,
) -> RunOutcome {
    let threads = cfg.threads.max(1);
    let done = AtomicU64::new(0);
    let finished = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let tick = tick(cfg.target_ops, threads);
    let started = Instant::now();
    std::thread::scope(|s| {
        for id in 0..threads {
            let (done, finished, stop) = (&done, &finished, &stop);
            let share = thread_share(cfg.op_count, threads, id);
            s.spawn(move || {
                let mut state = workload.thread_state(id, threads);
                // Spread the threads' schedules over one tick so they do not fire together.
                let first = tick.map(|t| started + t.mul_f64(id as f64 / threads as f64));
                let mut mine = 0u64;
                while mine < share && !stop.load(Ordering::Relaxed) {
                    if let (Some(t), Some(first)) = (tick, first) {
                        sleep_until(first + t.mul_f64(mine as f64), stop);
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                    }
                    let more = match cfg.phase {
                        Phase::Load => workload.do_insert(db, &mut state),
                        Phase::Run => workload.do_transaction(db, &mut state, meas),
                    };
                    mine += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                    if !more {
                        break;
                    }
                }
                finished.fetch_add(1, Ordering::Release);
            });
        }
        watch(cfg, threads, started, &done, &finished, &stop);
    });
    RunOutcome {
        runtime: started.elapsed(),
        ops_done: done.load(Ordering::Relaxed),
    }
}

/// The main thread while the clients work: enforces `maxexecutiontime` and prints progress.
fn watch(
    cfg: &RunnerConfig,
    threads: usize,
    started: Instant,
    done: &AtomicU64,
    finished: &AtomicUsize,
    stop: &AtomicBool,
) {
    let mut progress = Progress::new(cfg.op_count, started);
    let mut next_status = cfg.status_interval.map(|i| started + i);
    let mut next_line = started + Duration::from_secs(1);
    let deadline = cfg.max_execution.map(|m| started + m);
    while finished.load(Ordering::Acquire) < threads {
        std::thread::sleep(Duration::from_millis(50));
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) && !stop.swap(true, Ordering::Relaxed) {
            eprintln!(
                "maxexecutiontime of {}s reached: stopping the client threads",
                cfg.max_execution.map_or(0, |m| m.as_secs())
            );
        }
        let ops = done.load(Ordering::Relaxed);
        if let (Some(at), Some(interval)) = (next_status, cfg.status_interval) {
            if now >= at {
                progress.clear_line(cfg.progress_line);
                eprintln!("{}", progress.status(now, ops));
                next_status = Some(at + interval);
            }
        }
        if cfg.progress_line && now >= next_line {
            let line = progress.line(now, ops);
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{line}\x1b[K");
            let _ = err.flush();
            next_line = now + Duration::from_secs(1);
        }
    }
    progress.clear_line(cfg.progress_line);
}

/// Rates since the start and since the last report.
struct Progress {
    total: u64,
    started: Instant,
    last: (Instant, u64),
}

impl Progress {
    fn new(total: u64, started: Instant) -> Progress {
        Progress {
            total,
            started,
            last: (started, 0),
        }
    }

    /// Operations per second since the last report and overall; remembers this report.
    fn rates(&mut self, now: Instant, ops: u64) -> (f64, f64) {
        let (at, before) = self.last;
        let window = now.duration_since(at).as_secs_f64();
        let current = if window > 0.0 {
            ops.saturating_sub(before) as f64 / window
        } else {
            0.0
        };
        let elapsed = now.duration_since(self.started).as_secs_f64();
        let overall = if elapsed > 0.0 {
            ops as f64 / elapsed
        } else {
            0.0
        };
        self.last = (now, ops);
        (current, overall)
    }

    fn eta(&self, ops: u64, overall: f64) -> String {
        if overall <= 0.0 {
            return "unknown".into();
        }
        let secs = self.total.saturating_sub(ops) as f64 / overall;
        format_duration(Duration::from_secs_f64(secs.min(1e9)))
    }

    /// YCSB's status line (`10 sec: 1234 operations; ...`).
    fn status(&mut self, now: Instant, ops: u64) -> String {
        let (current, overall) = self.rates(now, ops);
        format!(
            "{} sec: {ops} operations; {current:.2} current ops/sec; {overall:.2} overall ops/sec; est completion in {}",
            now.duration_since(self.started).as_secs(),
            self.eta(ops, overall)
        )
    }

    /// The redrawn terminal line.
    fn line(&mut self, now: Instant, ops: u64) -> String {
        let (current, overall) = self.rates(now, ops);
        let pct = if self.total > 0 {
            ops as f64 * 100.0 / self.total as f64
        } else {
            100.0
        };
        format!(
            "{ops}/{} ops ({pct:.1}%)  {current:.0} ops/s now  {overall:.0} ops/s overall  ETA {}",
            self.total,
            self.eta(ops, overall)
        )
    }

    fn clear_line(&self, drawn: bool) {
        if drawn {
            eprint!("\r\x1b[K");
        }
    }
}

/// `1h 02m 03s`, `4m 05s`, `6s`.
fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, sec) => format!("{m}m {sec:02}s"),
        (h, m, sec) => format!("{h}h {m:02}m {sec:02}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ycsb::db::{Fields, Status};
    use crate::ycsb::measure::{Measure, MeasuredDb};
    use bytes::Bytes;
    use std::collections::BTreeSet;
    use std::sync::Mutex;

    /// Records the keys written and read; reads of unwritten keys are NOT_FOUND.
    #[derive(Default)]
    struct KeySet(Mutex<BTreeSet<String>>);

    impl Db for KeySet {
        fn read(&self, _: &str, key: &str, _: Option<&[String]>) -> (Status, Fields) {
            let found = self.0.lock().expect("lock").contains(key);
            if found {
                (
                    Status::Ok,
                    vec![("field0".into(), Bytes::from_static(b"x"))],
                )
            } else {
                (Status::NotFound, Vec::new())
            }
        }
        fn scan(&self, _: &str, _: &str, _: usize, _: Option<&[String]>) -> (Status, Vec<Fields>) {
            (Status::Ok, Vec::new())
        }
        fn update(&self, _: &str, _: &str, _: &Fields) -> Status {
            Status::Ok
        }
        fn insert(&self, _: &str, key: &str, _: &Fields) -> Status {
            self.0.lock().expect("lock").insert(key.to_string());
            Status::Ok
        }
        fn delete(&self, _: &str, _: &str) -> Status {
            Status::Ok
        }
    }

    /// A test workload: thread `t` inserts keys `t, t+n, t+2n, ...`; transactions read key
    /// `i` of a per-thread counter. Optionally stops after `stop_after` operations.
    struct Counting {
        stop_after: Option<u64>,
    }

    impl Workload for Counting {
        type State = (u64, u64, u64);
        fn thread_state(&self, id: usize, n: usize) -> (u64, u64, u64) {
            (id as u64, n as u64, 0)
        }
        fn do_insert(&self, db: &dyn Db, st: &mut (u64, u64, u64)) -> bool {
            let key = format!("user{}", st.0 + st.2 * st.1);
            st.2 += 1;
            db.insert("t", &key, &Vec::new()).is_ok() && self.stop_after.is_none_or(|n| st.2 < n)
        }
        fn do_transaction(
            &self,
            db: &dyn Db,
            st: &mut (u64, u64, u64),
            _: &dyn Measurements,
        ) -> bool {
            let key = format!("user{}", st.2);
            st.2 += 1;
            db.read("t", &key, None);
            true
        }
    }

    fn cfg(phase: Phase, threads: usize, ops: u64) -> RunnerConfig {
        RunnerConfig {
            phase,
            threads,
            op_count: ops,
            target_ops: 0,
            max_execution: None,
            status_interval: None,
            progress_line: false,
        }
    }

    #[test]
    fn shares_add_up_and_differ_by_at_most_one() {
        for (total, threads) in [(10, 3), (0, 4), (3, 8), (1000, 4), (7, 1)] {
            let shares: Vec<u64> = (0..threads)
                .map(|i| thread_share(total, threads, i))
                .collect();
            assert_eq!(shares.iter().sum::<u64>(), total);
            let (lo, hi) = (shares.iter().min(), shares.iter().max());
            assert!(hi.zip(lo).is_some_and(|(h, l)| h - l <= 1), "{shares:?}");
        }
    }

    #[test]
    fn load_then_run_does_every_operation_once() {
        let store = KeySet::default();
        let meas = Measure::new();
        let db = MeasuredDb::new(&store, &meas);
        let w = Counting { stop_after: None };
        let out = run_phase(&w, &db, &meas, &cfg(Phase::Load, 3, 100));
        assert_eq!(out.ops_done, 100);
        assert_eq!(store.0.lock().expect("lock").len(), 100);
        assert_eq!(meas.summaries()["INSERT"].count, 100);

        let meas = Measure::new();
        let db = MeasuredDb::new(&store, &meas);
        // Each of 4 threads reads user0.. user(share-1): all exist.
        let out = run_phase(&w, &db, &meas, &cfg(Phase::Run, 4, 200));
        assert_eq!(out.ops_done, 200);
        let s = meas.summaries();
        assert_eq!(s["READ"].count, 200);
        assert_eq!(s["READ"].returns["OK"], 200);
    }

    #[test]
    fn a_workload_returning_false_stops_its_thread() {
        let store = KeySet::default();
        let meas = Measure::new();
        let db = MeasuredDb::new(&store, &meas);
        let w = Counting {
            stop_after: Some(5),
        };
        let out = run_phase(&w, &db, &meas, &cfg(Phase::Load, 2, 100));
        assert_eq!(out.ops_done, 10);
    }

    #[test]
    fn throttling_spaces_operations_out() {
        let store = KeySet::default();
        let meas = Measure::new();
        let db = MeasuredDb::new(&store, &meas);
        let w = Counting { stop_after: None };
        let mut c = cfg(Phase::Load, 2, 20);
        // 2 threads × 10 ops at 5 ops/s each: the last op is scheduled 1.8 s after the start.
        c.target_ops = 10;
        let out = run_phase(&w, &db, &meas, &c);
        assert_eq!(out.ops_done, 20);
        assert!(
            out.runtime >= Duration::from_millis(1700),
            "{:?}",
            out.runtime
        );
    }

    #[test]
    fn maxexecutiontime_stops_a_long_phase() {
        let store = KeySet::default();
        let meas = Measure::new();
        let db = MeasuredDb::new(&store, &meas);
        let w = Counting { stop_after: None };
        let mut c = cfg(Phase::Load, 2, 1_000_000);
        c.target_ops = 20;
        c.max_execution = Some(Duration::from_secs(1));
        let out = run_phase(&w, &db, &meas, &c);
        assert!(out.ops_done < 1_000_000);
        // Generous: the stop is checked every 50 ms; the machine may be loaded.
        assert!(out.runtime < Duration::from_secs(60), "{:?}", out.runtime);
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(format_duration(Duration::from_secs(6)), "6s");
        assert_eq!(format_duration(Duration::from_secs(245)), "4m 05s");
        assert_eq!(format_duration(Duration::from_secs(3723)), "1h 02m 03s");
    }
}
