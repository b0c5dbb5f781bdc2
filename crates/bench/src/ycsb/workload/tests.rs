//! CoreWorkload against an in-memory target: key names, the load phase, the operation mix,
//! key choice, retries, the shipped workload files and property errors.

use super::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// An in-memory target that counts calls and remembers records.
#[derive(Default)]
struct MemDb {
    records: Mutex<HashMap<String, Fields>>,
    calls: Mutex<HashMap<&'static str, u64>>,
    missing: AtomicU64,
    fail_inserts: AtomicU64,
    scan_lengths: Mutex<Vec<usize>>,
}

impl MemDb {
    fn count(&self, op: &'static str) {
        *self.calls.lock().expect("calls").entry(op).or_default() += 1;
    }

    fn calls(&self, op: &str) -> u64 {
        self.calls
            .lock()
            .expect("calls")
            .get(op)
            .copied()
            .unwrap_or(0)
    }

    fn exists(&self, key: &str) -> bool {
        let found = self.records.lock().expect("records").contains_key(key);
        if !found {
            self.missing.fetch_add(1, Ordering::Relaxed);
        }
        found
    }
}

impl Db for MemDb {
    fn read(&self, _t: &str, key: &str, fields: Option<&[String]>) -> (Status, Fields) {
        self.count("read");
        if let Some(f) = fields {
            assert!(!f.is_empty());
        }
        if self.exists(key) {
            (Status::Ok, Vec::new())
        } else {
            (Status::NotFound, Vec::new())
        }
    }

    fn scan(
        &self,
        _t: &str,
        start: &str,
        n: usize,
        _f: Option<&[String]>,
    ) -> (Status, Vec<Fields>) {
        self.count("scan");
        self.exists(start);
        self.scan_lengths.lock().expect("scans").push(n);
        (Status::Ok, Vec::new())
    }

    fn update(&self, _t: &str, key: &str, values: &Fields) -> Status {
        self.count("update");
        assert!(!values.is_empty());
        if self.exists(key) {
            Status::Ok
        } else {
            Status::NotFound
        }
    }

    fn insert(&self, _t: &str, key: &str, values: &Fields) -> Status {
        self.count("insert");
        let failing = self.fail_inserts.load(Ordering::Relaxed);
        if failing > 0 {
            self.fail_inserts.store(failing - 1, Ordering::Relaxed);
            return Status::Error("injected".into());
        }
        self.records
            .lock()
            .expect("records")
            .insert(key.to_string(), values.clone());
        Status::Ok
    }

    fn delete(&self, _t: &str, _key: &str) -> Status {
        Status::Ok
    }
}

#[derive(Default)]
struct CountingMeasurements {
    measured: Mutex<HashMap<String, u64>>,
    statuses: Mutex<Vec<(String, Status)>>,
}

impl Measurements for CountingMeasurements {
    fn measure(&self, op: &str, _latency_us: u64) {
        *self
            .measured
            .lock()
            .expect("m")
            .entry(op.to_string())
            .or_default() += 1;
    }

    fn report_status(&self, op: &str, status: &Status) {
        self.statuses
            .lock()
            .expect("s")
            .push((op.to_string(), status.clone()));
    }
}

fn props(pairs: &[(&str, &str)]) -> Properties {
    let mut p = Properties::new();
    p.set(SEED_PROPERTY, "42");
    for (k, v) in pairs {
        p.set(k, v);
    }
    p
}

fn load(w: &CoreWorkload, db: &MemDb) {
    let mut st = w.thread_state(0, 1);
    for _ in 0..w.insert_count() {
        assert!(w.do_insert(db, &mut st));
    }
}

#[test]
fn key_names_follow_ycsb() {
    // Hashed: "user" + fnvhash64(keynum) in decimal.
    assert_eq!(build_key_name(0, 1, false), "user6284781860667377211");
    assert_eq!(build_key_name(1, 1, false), "user8517097267634966620");
    assert_eq!(build_key_name(42, 1, false), "user55488592825689361");
    assert_eq!(build_key_name(1 << 40, 1, false), "user6908947124047430886");
    assert_eq!(build_key_name(42, 20, false), "user00055488592825689361");
    // Ordered: the key number itself, zero-padded to `zeropadding` digits.
    assert_eq!(build_key_name(0, 1, true), "user0");
    assert_eq!(build_key_name(42, 1, true), "user42");
    assert_eq!(build_key_name(42, 8, true), "user00000042");
    assert_eq!(build_key_name(1 << 40, 8, true), "user1099511627776");
    assert_eq!(build_key_name(1 << 40, 15, true), "user001099511627776");

    let w = CoreWorkload::new(&props(&[("insertorder", "ordered"), ("zeropadding", "8")]))
        .expect("workload");
    assert_eq!(w.build_key_name(5), "user00000005");
    let w = CoreWorkload::new(&props(&[])).expect("workload");
    assert_eq!(w.build_key_name(42), "user55488592825689361");
}

#[test]
fn defaults_are_ycsbs() {
    let w = CoreWorkload::new(&Properties::new()).expect("workload");
    assert_eq!(w.table(), "usertable");
    assert_eq!(w.record_count(), i32::MAX as u64);
    assert_eq!(w.operation_count(), 0);
    assert_eq!(w.insert_count(), i32::MAX as u64);
    assert_eq!(w.field_names().len(), 10);
    assert_eq!(w.field_names()[3], "field3");
    let w = CoreWorkload::new(&props(&[
        ("recordcount", "100"),
        ("insertstart", "40"),
        ("fieldnameprefix", "f"),
    ]))
    .expect("workload");
    assert_eq!((w.insert_start(), w.insert_count()), (40, 60));
    assert_eq!(w.field_names()[0], "f0");
}

#[test]
fn load_inserts_every_record_with_its_fields() {
    let w =
        CoreWorkload::new(&props(&[("recordcount", "50"), ("fieldcount", "3")])).expect("workload");
    let db = MemDb::default();
    load(&w, &db);
    let records = db.records.lock().expect("records");
    assert_eq!(records.len(), 50);
    for k in 0..50 {
        let fields = records.get(&w.build_key_name(k)).expect("loaded");
        let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["field0", "field1", "field2"]);
        for (_, v) in fields {
            assert_eq!(v.len(), 100);
            assert!(v.iter().all(|b| (b' '..=b'_').contains(b)));
        }
    }
}

#[test]
fn field_lengths_follow_their_distribution() {
    for dist in ["uniform", "zipfian"] {
        let w = CoreWorkload::new(&props(&[
            ("fieldlengthdistribution", dist),
            ("minfieldlength", "5"),
            ("fieldlength", "10"),
        ]))
        .expect("workload");
        let mut st = w.thread_state(0, 1);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..2000 {
            let len = w.random_value(&mut st.rng).len();
            // YCSB's zipfian may return max + 1 on a rounding edge.
            assert!((5..=11).contains(&len), "{dist}: {len}");
            seen.insert(len);
        }
        assert!(seen.len() >= 5, "{dist}: lengths {seen:?}");
    }
}

#[test]
fn operation_mix_follows_the_proportions() {
    let w = CoreWorkload::new(&props(&[
        ("recordcount", "200"),
        ("operationcount", "100000"),
        ("fieldcount", "2"),
        ("fieldlength", "4"),
        ("maxscanlength", "10"),
        ("readproportion", "0.5"),
        ("updateproportion", "0.2"),
        ("insertproportion", "0.1"),
        ("scanproportion", "0.1"),
        ("readmodifywriteproportion", "0.1"),
    ]))
    .expect("workload");
    let db = MemDb::default();
    load(&w, &db);
    let loads = db.calls("insert");
    let meas = CountingMeasurements::default();
    let mut st = w.thread_state(0, 1);
    let n = 100_000u64;
    for _ in 0..n {
        assert!(w.do_transaction(&db, &mut st, &meas));
    }
    let rmw = meas
        .measured
        .lock()
        .expect("m")
        .get("READ-MODIFY-WRITE")
        .copied();
    let rmw = rmw.unwrap_or(0);
    let shares = [
        ("read", db.calls("read") - rmw, 0.5),
        ("update", db.calls("update") - rmw, 0.2),
        ("insert", db.calls("insert") - loads, 0.1),
        ("scan", db.calls("scan"), 0.1),
        ("read-modify-write", rmw, 0.1),
    ];
    for (op, count, want) in shares {
        let got = count as f64 / n as f64;
        // 5 binomial standard deviations are at most 0.008.
        assert!((got - want).abs() < 0.008, "{op}: {got} vs {want}");
    }
    assert_eq!(
        db.missing.load(Ordering::Relaxed),
        0,
        "picked a key never inserted"
    );
    let statuses = meas.statuses.lock().expect("s");
    assert_eq!(statuses.len() as u64, rmw);
    assert!(statuses
        .iter()
        .all(|(op, s)| op == "READ-MODIFY-WRITE" && s.is_ok()));
    let scans = db.scan_lengths.lock().expect("scans");
    assert!(scans.iter().all(|n| (1..=10).contains(n)));
}

#[test]
fn run_never_picks_a_key_not_yet_inserted() {
    for dist in [
        "uniform",
        "zipfian",
        "latest",
        "hotspot",
        "sequential",
        "exponential",
    ] {
        let w = CoreWorkload::new(&props(&[
            ("recordcount", "300"),
            ("operationcount", "5000"),
            ("fieldcount", "1"),
            ("fieldlength", "1"),
            ("requestdistribution", dist),
            ("readproportion", "0.5"),
            ("insertproportion", "0.5"),
            ("updateproportion", "0"),
        ]))
        .expect("workload");
        let db = MemDb::default();
        load(&w, &db);
        let meas = CountingMeasurements::default();
        let mut st = w.thread_state(0, 1);
        for _ in 0..5000 {
            assert!(w.do_transaction(&db, &mut st, &meas));
        }
        assert_eq!(db.missing.load(Ordering::Relaxed), 0, "{dist}");
        assert!(db.records.lock().expect("records").len() > 2000, "{dist}");
    }
}

#[test]
fn hotspot_workload_hits_the_hot_set() {
    let w = CoreWorkload::new(&props(&[
        ("recordcount", "1000"),
        ("requestdistribution", "hotspot"),
        ("hotspotdatafraction", "0.1"),
        ("hotspotopnfraction", "0.9"),
    ]))
    .expect("workload");
    let mut st = w.thread_state(0, 1);
    let n = 50_000;
    let hot = (0..n).filter(|_| w.next_keynum(&mut st.rng) < 100).count();
    let share = hot as f64 / n as f64;
    assert!((share - 0.9).abs() < 0.01, "hot share {share}");
}

#[test]
fn insert_retries_up_to_the_limit() {
    let db = MemDb::default();
    let w = CoreWorkload::new(&props(&[
        ("recordcount", "10"),
        ("core_workload_insertion_retry_limit", "2"),
        ("core_workload_insertion_retry_interval", "0"),
    ]))
    .expect("workload");
    let mut st = w.thread_state(0, 1);
    db.fail_inserts.store(2, Ordering::Relaxed);
    assert!(w.do_insert(&db, &mut st), "third attempt succeeds");
    assert_eq!(db.calls("insert"), 3);
    db.fail_inserts.store(3, Ordering::Relaxed);
    assert!(
        !w.do_insert(&db, &mut st),
        "three failures exhaust two retries"
    );
    assert_eq!(db.calls("insert"), 6);

    let w = CoreWorkload::new(&props(&[("recordcount", "10")])).expect("workload");
    db.fail_inserts.store(1, Ordering::Relaxed);
    assert!(!w.do_insert(&db, &mut st), "no retries by default");
}

#[test]
fn seeded_threads_are_reproducible_and_distinct() {
    let p = props(&[("fieldlength", "16")]);
    let a = CoreWorkload::new(&p).expect("workload");
    let b = CoreWorkload::new(&p).expect("workload");
    let va = a.random_value(&mut a.thread_state(3, 4).rng);
    let vb = b.random_value(&mut b.thread_state(3, 4).rng);
    let other = a.random_value(&mut a.thread_state(2, 4).rng);
    assert_eq!(va, vb);
    assert_ne!(va, other);
}

#[test]
fn shipped_workloads_load_and_run() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads");
    for name in ["a", "b", "c", "d", "e", "f", "w"] {
        let path = dir.join(format!("workload{name}"));
        let mut p = Properties::new();
        p.load_file(&path).expect("workload file");
        p.set(SEED_PROPERTY, "1");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.starts_with("# Cellar bench (YCSB)"), "{name}: header");
        let w = CoreWorkload::new(&p).unwrap_or_else(|e| panic!("workload{name}: {e}"));
        assert_eq!(w.record_count(), 1000, "workload{name}");
        assert_eq!(w.operation_count(), 1000, "workload{name}");
        let db = MemDb::default();
        load(&w, &db);
        let meas = CountingMeasurements::default();
        let mut st = w.thread_state(0, 1);
        for _ in 0..w.operation_count() {
            assert!(w.do_transaction(&db, &mut st, &meas));
        }
        assert_eq!(db.missing.load(Ordering::Relaxed), 0, "workload{name}");
        let ops = ["read", "update", "scan"].map(|op| db.calls(op) > 0);
        let expected = match name {
            "a" | "b" | "f" => [true, true, false],
            "c" | "d" => [true, false, false],
            "e" => [false, false, true],
            _ => [false, true, false],
        };
        assert_eq!(ops, expected, "workload{name}: read/update/scan");
        let inserted = db.calls("insert") > 1000;
        assert_eq!(
            inserted,
            name == "d" || name == "e",
            "workload{name}: inserts"
        );
        let rmw = meas
            .measured
            .lock()
            .expect("m")
            .contains_key("READ-MODIFY-WRITE");
        assert_eq!(rmw, name == "f", "workload{name}: read-modify-write");
    }
}

#[test]
fn bad_values_name_the_property() {
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: &[Case] = &[
        (
            &[("requestdistribution", "pareto")],
            &["requestdistribution", "pareto"],
        ),
        (
            &[("fieldlengthdistribution", "bogus")],
            &["fieldlengthdistribution", "bogus"],
        ),
        (
            &[("fieldlengthdistribution", "histogram")],
            &["fieldlengthdistribution"],
        ),
        (
            &[("scanlengthdistribution", "latest")],
            &["scanlengthdistribution", "latest"],
        ),
        (&[("fieldcount", "x")], &["fieldcount", "x"]),
        (&[("fieldcount", "0")], &["fieldcount"]),
        (&[("readproportion", "-0.5")], &["readproportion"]),
        (&[("readproportion", "lots")], &["readproportion", "lots"]),
        (
            &[
                ("hotspotopnfraction", "1.5"),
                ("requestdistribution", "hotspot"),
            ],
            &["hotspotopnfraction"],
        ),
        (&[("readallfields", "yes")], &["readallfields", "yes"]),
        (&[("dataintegrity", "true")], &["dataintegrity"]),
        (
            &[("recordcount", "10"), ("insertcount", "11")],
            &["insertcount", "recordcount"],
        ),
        (
            &[("minscanlength", "20"), ("maxscanlength", "10")],
            &["maxscanlength"],
        ),
        (
            &[
                ("fieldlengthdistribution", "uniform"),
                ("minfieldlength", "200"),
            ],
            &["minfieldlength"],
        ),
        (
            &[
                ("exponential.percentile", "100"),
                ("requestdistribution", "exponential"),
            ],
            &["exponential.percentile"],
        ),
        (
            &[("readproportion", "0"), ("updateproportion", "0")],
            &["readproportion"],
        ),
        (&[("cellar.seed", "abc")], &["cellar.seed"]),
    ];
    for (pairs, words) in cases {
        let e = CoreWorkload::new(&props(pairs)).expect_err("bad property");
        for word in *words {
            assert!(e.contains(word), "{pairs:?}: {e:?} lacks {word}");
        }
    }
}

#[test]
fn one_workload_serves_many_threads() {
    fn shared<T: Send + Sync>(_: &T) {}
    let w = CoreWorkload::new(&props(&[
        ("recordcount", "500"),
        ("operationcount", "8000"),
        ("fieldcount", "1"),
        ("fieldlength", "1"),
        ("requestdistribution", "latest"),
        ("readproportion", "0.5"),
        ("insertproportion", "0.5"),
        ("updateproportion", "0"),
    ]))
    .expect("workload");
    shared(&w);
    let db = MemDb::default();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (w, db) = (&w, &db);
            s.spawn(move || {
                let mut st = w.thread_state(t, 4);
                for _ in 0..125 {
                    assert!(w.do_insert(db, &mut st));
                }
            });
        }
    });
    assert_eq!(db.records.lock().expect("records").len(), 500);
    std::thread::scope(|s| {
        for t in 0..4 {
            let (w, db) = (&w, &db);
            s.spawn(move || {
                let meas = CountingMeasurements::default();
                let mut st = w.thread_state(t, 4);
                for _ in 0..2000 {
                    assert!(w.do_transaction(db, &mut st, &meas));
                }
            });
        }
    });
    assert_eq!(
        db.missing.load(Ordering::Relaxed),
        0,
        "read a key before its insert"
    );
    assert!(db.records.lock().expect("records").len() > 4000);
}
