//! Latencies and return codes per operation (YCSB's HdrHistogram measurements), and the
//! measuring `Db` wrapper (YCSB's `DBWrapper`) that feeds them.

use super::db::{Db, Fields, Measurements, Status};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

/// One operation's summary, as the exporters print it. Latencies in µs.
#[derive(Debug, Clone, PartialEq)]
pub struct OpSummary {
    /// Measured (successful, for DB operations) operations.
    pub count: u64,
    pub avg_us: f64,
    pub min_us: u64,
    pub max_us: u64,
    pub p50_us: u64,
    pub p95_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    /// Return codes by YCSB status name (`OK`, `NOT_FOUND`, ...), failed ones included.
    pub returns: BTreeMap<String, u64>,
}

/// Significant digits of the histograms (YCSB uses 3).
const SIGNIFICANT_DIGITS: u8 = 3;

struct OpStats {
    histogram: Histogram<u64>,
    returns: BTreeMap<String, u64>,
}

impl OpStats {
    fn new() -> OpStats {
        OpStats {
            // Auto-resizing, so no latency is ever out of range.
            histogram: Histogram::new(SIGNIFICANT_DIGITS)
                .expect("hdrhistogram accepts 0..=5 significant digits; 3 is constant"),
            returns: BTreeMap::new(),
        }
    }

    fn summary(&self) -> OpSummary {
        let h = &self.histogram;
        let empty = h.is_empty();
        let pct = |p: f64| {
            if empty {
                0
            } else {
                h.value_at_quantile(p / 100.0)
            }
        };
        OpSummary {
            count: h.len(),
            avg_us: if empty { 0.0 } else { h.mean() },
            min_us: if empty { 0 } else { h.min() },
            max_us: if empty { 0 } else { h.max() },
            p50_us: pct(50.0),
            p95_us: pct(95.0),
            p99_us: pct(99.0),
            p999_us: pct(99.9),
            returns: self.returns.clone(),
        }
    }
}

/// Every operation's histogram and return counts. Shared by all client threads: one lock per
/// operation name, so threads doing different operations do not contend.
#[derive(Default)]
pub struct Measure {
    ops: RwLock<BTreeMap<String, Arc<Mutex<OpStats>>>>,
}

impl Measure {
    pub fn new() -> Measure {
        Measure::default()
    }

    fn op(&self, name: &str) -> Arc<Mutex<OpStats>> {
        if let Ok(ops) = self.ops.read() {
            if let Some(s) = ops.get(name) {
                return Arc::clone(s);
            }
        }
        let mut ops = match self.ops.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        Arc::clone(
            ops.entry(name.to_string())
                .or_insert_with(|| Arc::new(Mutex::new(OpStats::new()))),
        )
    }

    fn with_op(&self, name: &str, f: impl FnOnce(&mut OpStats)) {
        let op = self.op(name);
        let mut g = match op.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut g);
    }

    /// Every operation seen so far, by name.
    pub fn summaries(&self) -> BTreeMap<String, OpSummary> {
        let ops: Vec<(String, Arc<Mutex<OpStats>>)> = match self.ops.read() {
            Ok(g) => g.iter().map(|(k, v)| (k.clone(), Arc::clone(v))).collect(),
            Err(poisoned) => poisoned
                .into_inner()
                .iter()
                .map(|(k, v)| (k.clone(), Arc::clone(v)))
                .collect(),
        };
        ops.into_iter()
            .map(|(name, s)| {
                let summary = match s.lock() {
                    Ok(g) => g.summary(),
                    Err(poisoned) => poisoned.into_inner().summary(),
                };
                (name, summary)
            })
            .collect()
    }
}

impl Measurements for Measure {
    fn measure(&self, op: &str, latency_us: u64) {
        // `record` grows the auto-resizing histogram; `saturating_record` would not, and would
        // clamp every latency above its first range (about 2 ms) to that range's top.
        self.with_op(op, |s| {
            if s.histogram.record(latency_us).is_err() {
                s.histogram.saturating_record(latency_us);
            }
        });
    }

    fn report_status(&self, op: &str, status: &Status) {
        self.with_op(op, |s| {
            *s.returns.entry(status.name().to_string()).or_insert(0) += 1
        });
    }
}

/// A `Db` that times every call: the latency goes under the operation's name when it
/// succeeded and under `<OP>-FAILED` otherwise, and the status is counted under the
/// operation's name, as YCSB's `DBWrapper` does.
pub struct MeasuredDb<'a> {
    inner: &'a dyn Db,
    meas: &'a dyn Measurements,
}

impl<'a> MeasuredDb<'a> {
    pub fn new(inner: &'a dyn Db, meas: &'a dyn Measurements) -> MeasuredDb<'a> {
        MeasuredDb { inner, meas }
    }

    fn record(&self, op: &str, started: Instant, status: &Status) {
        let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        if status.is_ok() {
            self.meas.measure(op, us);
        } else {
            self.meas.measure(&format!("{op}-FAILED"), us);
        }
        self.meas.report_status(op, status);
    }
}

impl Db for MeasuredDb<'_> {
    fn read(&self, table: &str, key: &str, fields: Option<&[String]>) -> (Status, Fields) {
        let t = Instant::now();
        let r = self.inner.read(table, key, fields);
        self.record("READ", t, &r.0);
        r
    }

    fn scan(
        &self,
        table: &str,
        start_key: &str,
        record_count: usize,
        fields: Option<&[String]>,
    ) -> (Status, Vec<Fields>) {
        let t = Instant::now();
        let r = self.inner.scan(table, start_key, record_count, fields);
        self.record("SCAN", t, &r.0);
        r
    }

    fn update(&self, table: &str, key: &str, values: &Fields) -> Status {
        let t = Instant::now();
        let s = self.inner.update(table, key, values);
        self.record("UPDATE", t, &s);
        s
    }

    fn insert(&self, table: &str, key: &str, values: &Fields) -> Status {
        let t = Instant::now();
        let s = self.inner.insert(table, key, values);
        self.record("INSERT", t, &s);
        s
    }

    fn delete(&self, table: &str, key: &str) -> Status {
        let t = Instant::now();
        let s = self.inner.delete(table, key);
        self.record("DELETE", t, &s);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    /// Finds keys starting with "k"; everything else is missing.
    struct Prefixed;

    impl Db for Prefixed {
        fn read(&self, _: &str, key: &str, _: Option<&[String]>) -> (Status, Fields) {
            if key.starts_with('k') {
                (
                    Status::Ok,
                    vec![("field0".into(), Bytes::from_static(b"v"))],
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
        fn insert(&self, _: &str, _: &str, _: &Fields) -> Status {
            Status::Error("disk full".into())
        }
        fn delete(&self, _: &str, _: &str) -> Status {
            Status::Ok
        }
    }

    #[test]
    fn failed_ops_are_timed_apart_but_counted_under_the_op() {
        let m = Measure::new();
        let db = MeasuredDb::new(&Prefixed, &m);
        for key in ["k1", "k2", "x"] {
            db.read("t", key, None);
        }
        db.insert("t", "k1", &Vec::new());
        db.update("t", "k1", &Vec::new());
        let s = m.summaries();
        assert_eq!(s["READ"].count, 2);
        assert_eq!(s["READ-FAILED"].count, 1);
        assert_eq!(s["READ"].returns["OK"], 2);
        assert_eq!(s["READ"].returns["NOT_FOUND"], 1);
        assert_eq!(s["INSERT"].count, 0);
        assert_eq!(s["INSERT"].returns["ERROR"], 1);
        assert_eq!(s["INSERT-FAILED"].count, 1);
        assert_eq!(s["UPDATE"].count, 1);
    }

    #[test]
    fn percentiles_follow_the_recorded_latencies() {
        let m = Measure::new();
        for us in 1..=1000 {
            m.measure("READ", us);
        }
        let s = &m.summaries()["READ"];
        assert_eq!(s.count, 1000);
        assert_eq!(s.min_us, 1);
        assert_eq!(s.max_us, 1000);
        assert!((s.avg_us - 500.5).abs() < 1.0, "{}", s.avg_us);
        assert!((499..=501).contains(&s.p50_us), "{}", s.p50_us);
        assert!((949..=951).contains(&s.p95_us), "{}", s.p95_us);
        assert!((989..=991).contains(&s.p99_us), "{}", s.p99_us);
        assert!((998..=1000).contains(&s.p999_us), "{}", s.p999_us);
    }

    #[test]
    fn long_latencies_are_kept_not_clamped() {
        let m = Measure::new();
        for us in [150, 3_000, 250_000, 7_000_000] {
            m.measure("INSERT", us);
        }
        let s = &m.summaries()["INSERT"];
        assert_eq!(s.min_us, 150);
        assert!((6_990_000..=7_010_000).contains(&s.max_us), "{}", s.max_us);
        assert!(s.avg_us > 1_000_000.0, "{}", s.avg_us);
    }
}
