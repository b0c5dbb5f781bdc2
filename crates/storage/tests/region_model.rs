//! Property test: random puts, deletes of every kind, gets, scans, flushes, compactions,
//! clock moves and reopens (clean and crash-like) against a plain model of HBase semantics.
//!
//! The model is written from the rules, not from the engine's code: it keeps every cell ever
//! written, decides visibility per column by checking each put against every delete marker,
//! and applies a major compaction by replacing the flushed cells with the puts that survive.

use bytes::Bytes;
use cellar_model::{
    BloomType, Cell, CellRef, CellSink, CellType, Compression, FamilySchema, Get, RowMutation,
    Scan, TableSchema,
};
use cellar_storage::region::{Compacted, ManualClock, Region, StorageConfig};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

const BASE_TS: u64 = 1_000_000;

fn schema() -> TableSchema {
    let a = FamilySchema::new("a");
    let mut b = FamilySchema::new("b");
    b.max_versions = 3;
    b.bloom = BloomType::RowCol;
    b.compression = Compression::Lz4;
    b.block_size = 1024;
    let mut c = FamilySchema::new("c");
    c.max_versions = 2;
    c.min_versions = 1;
    c.ttl_secs = Some(10);
    c.compression = Compression::Zstd;
    c.bloom = BloomType::None;
    TableSchema::new("model", vec![a, b, c])
}

#[derive(Debug, Clone)]
enum Op {
    Put {
        row: u8,
        fam: u8,
        qual: u8,
        ts: u64,
        value: u8,
    },
    Delete {
        kind: CellType,
        row: u8,
        fam: u8,
        qual: u8,
        ts: u64,
    },
    Get {
        row: u8,
        fam: Option<u8>,
        qual: Option<u8>,
        versions: u32,
        range: Option<(u64, u64)>,
    },
    Scan {
        start: Option<u8>,
        stop: Option<u8>,
        fam: Option<u8>,
        versions: u32,
        reversed: bool,
        limit: u64,
    },
    Flush,
    Compact {
        major: bool,
    },
    Advance {
        ms: u64,
    },
    Reopen {
        crash: bool,
    },
}

fn ts_strategy() -> impl Strategy<Value = u64> {
    (0u64..8).prop_map(|k| BASE_TS + k * 1000)
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0u8..6, 0u8..3, 0u8..4, ts_strategy(), any::<u8>())
            .prop_map(|(row, fam, qual, ts, value)| Op::Put { row, fam, qual, ts, value }),
        4 => (prop_oneof![Just(CellType::Delete), Just(CellType::DeleteColumn), Just(CellType::DeleteFamily), Just(CellType::DeleteFamilyVersion)],
              0u8..6, 0u8..3, 0u8..4, ts_strategy())
            .prop_map(|(kind, row, fam, qual, ts)| Op::Delete { kind, row, fam, qual, ts }),
        5 => (0u8..6, proptest::option::of(0u8..3), proptest::option::of(0u8..4), 1u32..5,
              proptest::option::of((ts_strategy(), ts_strategy())))
            .prop_map(|(row, fam, qual, versions, range)| Op::Get { row, fam, qual: if fam.is_some() { qual } else { None }, versions, range }),
        3 => (proptest::option::of(0u8..6), proptest::option::of(0u8..7), proptest::option::of(0u8..3), 1u32..4, any::<bool>(), 0u64..4)
            .prop_map(|(start, stop, fam, versions, reversed, limit)| Op::Scan { start, stop, fam, versions, reversed, limit }),
        2 => Just(Op::Flush),
        1 => any::<bool>().prop_map(|major| Op::Compact { major }),
        1 => (1000u64..6000).prop_map(|ms| Op::Advance { ms }),
        1 => any::<bool>().prop_map(|crash| Op::Reopen { crash }),
    ]
}

fn row_name(r: u8) -> Vec<u8> {
    format!("row{r}").into_bytes()
}

fn fam_name(f: u8) -> &'static [u8] {
    [b"a", b"b", b"c"][f as usize % 3]
}

fn qual_name(q: u8) -> Vec<u8> {
    if q == 0 {
        Vec::new()
    } else {
        format!("q{q}").into_bytes()
    }
}

#[derive(Clone, Debug)]
struct MCell {
    qual: Vec<u8>,
    ts: u64,
    kind: CellType,
    order: u64,
    value: Vec<u8>,
    flushed: bool,
}

/// Every cell ever written, per (row, family).
#[derive(Default)]
struct Model {
    cells: BTreeMap<(Vec<u8>, Vec<u8>), Vec<MCell>>,
    order: u64,
}

struct ReadQ<'a> {
    quals: Option<&'a [Vec<u8>]>,
    versions: u32,
    range: (u64, u64),
}

impl Model {
    fn write(
        &mut self,
        row: Vec<u8>,
        fam: &[u8],
        qual: Vec<u8>,
        ts: u64,
        kind: CellType,
        value: Vec<u8>,
    ) {
        self.order += 1;
        self.cells
            .entry((row, fam.to_vec()))
            .or_default()
            .push(MCell {
                qual,
                ts,
                kind,
                order: self.order,
                value,
                flushed: false,
            });
    }

    fn flush(&mut self) {
        for v in self.cells.values_mut() {
            for c in v {
                c.flushed = true;
            }
        }
    }

    /// The puts of one (row, family) a reader may see, per column newest first, from `cells`.
    fn surviving(cells: &[&MCell], fam: &FamilySchema, now: u64) -> BTreeMap<Vec<u8>, Vec<MCell>> {
        let mut out: BTreeMap<Vec<u8>, Vec<MCell>> = BTreeMap::new();
        let fam_deletes: Vec<&&MCell> =
            cells.iter().filter(|c| c.kind.is_family_delete()).collect();
        let mut quals: Vec<&Vec<u8>> = cells
            .iter()
            .filter(|c| c.kind == CellType::Put)
            .map(|c| &c.qual)
            .collect();
        quals.sort();
        quals.dedup();
        for q in quals {
            // Newest write per timestamp wins.
            let mut by_ts: BTreeMap<u64, &MCell> = BTreeMap::new();
            for c in cells
                .iter()
                .filter(|c| c.kind == CellType::Put && &c.qual == q)
            {
                let e = by_ts.entry(c.ts).or_insert(c);
                if c.order > e.order {
                    *e = c;
                }
            }
            let masked = |ts: u64| {
                fam_deletes.iter().any(|d| {
                    (d.kind == CellType::DeleteFamily && d.ts >= ts)
                        || (d.kind == CellType::DeleteFamilyVersion && d.ts == ts)
                }) || cells.iter().any(|d| {
                    &d.qual == q
                        && ((d.kind == CellType::DeleteColumn && d.ts >= ts)
                            || (d.kind == CellType::Delete && d.ts == ts))
                })
            };
            let live: Vec<MCell> = by_ts
                .values()
                .rev()
                .filter(|c| !masked(c.ts))
                .take(fam.max_versions as usize)
                .map(|c| (*c).clone())
                .collect();
            let ttl_cut = fam.ttl_secs.map_or(0, |t| now.saturating_sub(t * 1000));
            let kept: Vec<MCell> = live
                .into_iter()
                .enumerate()
                .filter(|(i, c)| c.ts >= ttl_cut || (*i as u32) < fam.min_versions)
                .map(|(_, c)| c)
                .collect();
            if !kept.is_empty() {
                out.insert(q.clone(), kept);
            }
        }
        out
    }

    fn read(&self, row: &[u8], fam: &FamilySchema, q: &ReadQ<'_>, now: u64) -> Flat {
        let Some(cells) = self
            .cells
            .get(&(row.to_vec(), fam.name.as_bytes().to_vec()))
        else {
            return Vec::new();
        };
        let refs: Vec<&MCell> = cells.iter().collect();
        let mut out = Vec::new();
        for (qual, puts) in Self::surviving(&refs, fam, now) {
            if q.quals.is_some_and(|qs| !qs.contains(&qual)) {
                continue;
            }
            for c in puts
                .iter()
                .filter(|c| c.ts >= q.range.0 && c.ts < q.range.1)
                .take(q.versions as usize)
            {
                out.push((
                    fam.name.as_bytes().to_vec(),
                    qual.clone(),
                    c.ts,
                    c.value.clone(),
                ));
            }
        }
        out
    }

    /// A major compaction of `family`: its flushed cells become the flushed puts that survive
    /// among themselves.
    fn major_compact(&mut self, schema: &TableSchema, family: &str, now: u64) {
        for ((_, fam), cells) in self.cells.iter_mut() {
            if fam.as_slice() != family.as_bytes() {
                continue;
            }
            let Some(f) = schema.family(fam) else {
                continue;
            };
            let flushed: Vec<&MCell> = cells.iter().filter(|c| c.flushed).collect();
            let survivors: Vec<MCell> = Self::surviving(&flushed, f, now)
                .into_values()
                .flatten()
                .collect();
            let mut next: Vec<MCell> = cells.iter().filter(|c| !c.flushed).cloned().collect();
            next.extend(survivors);
            *cells = next;
        }
    }

    fn rows(&self) -> Vec<Vec<u8>> {
        let mut rows: Vec<Vec<u8>> = self.cells.keys().map(|(r, _)| r.clone()).collect();
        rows.dedup();
        rows
    }
}

type Flat = Vec<(Vec<u8>, Vec<u8>, u64, Vec<u8>)>;

/// A sink that copies every cell it is given, and checks that each family's cells come
/// together and are ended.
#[derive(Default)]
struct Recorder {
    cells: Vec<Cell>,
    open_family: Option<Bytes>,
}

impl CellSink for Recorder {
    fn cell(&mut self, c: CellRef<'_>) {
        match &self.open_family {
            Some(f) => assert_eq!(f, c.family, "a family's cells came apart"),
            None => self.open_family = Some(c.family.clone()),
        }
        self.cells.push(c.to_cell());
    }

    fn end_family(&mut self) {
        self.open_family = None;
    }
}

fn flatten(cells: &[Cell]) -> Flat {
    for c in cells {
        assert_eq!(c.cell_type, CellType::Put, "reads return only puts");
    }
    cells
        .iter()
        .map(|c| {
            (
                c.family.to_vec(),
                c.qualifier.to_vec(),
                c.timestamp,
                c.value.to_vec(),
            )
        })
        .collect()
}

fn open(dir: &Path, clock: &Arc<ManualClock>) -> Region {
    let config = StorageConfig {
        background: false,
        block_cache_bytes: 64 * 1024,
        clock: Arc::clone(clock) as Arc<dyn cellar_storage::region::Clock>,
        ..StorageConfig::default()
    };
    Region::open_with_config(dir, schema(), config).expect("open region")
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(BASE_TS + 4000));
    let schema = schema();
    let mut region = Some(open(dir.path(), &clock));
    let mut model = Model::default();
    for (step, op) in ops.into_iter().enumerate() {
        let r = region.as_ref().expect("region open");
        let now = clock.now_millis_for_test();
        match op {
            Op::Put {
                row,
                fam,
                qual,
                ts,
                value,
            } => {
                let m = RowMutation::new(row_name(row)).put(
                    fam_name(fam),
                    &qual_name(qual),
                    ts,
                    vec![value],
                );
                r.mutate(&m).expect("put");
                model.write(
                    row_name(row),
                    fam_name(fam),
                    qual_name(qual),
                    ts,
                    CellType::Put,
                    vec![value],
                );
            }
            Op::Delete {
                kind,
                row,
                fam,
                qual,
                ts,
            } => {
                let q = if kind.is_family_delete() {
                    Vec::new()
                } else {
                    qual_name(qual)
                };
                let m = RowMutation::new(row_name(row));
                let m = match kind {
                    CellType::Delete => m.delete_version(fam_name(fam), &q, ts),
                    CellType::DeleteColumn => m.delete_column(fam_name(fam), &q, ts),
                    CellType::DeleteFamily => m.delete_family(fam_name(fam), ts),
                    _ => m.delete_family_version(fam_name(fam), ts),
                };
                r.mutate(&m).expect("delete");
                model.write(row_name(row), fam_name(fam), q, ts, kind, Vec::new());
            }
            Op::Get {
                row,
                fam,
                qual,
                versions,
                range,
            } => {
                let mut g = Get::new(row_name(row)).versions(versions);
                let range = range
                    .map(|(a, b)| (a.min(b), a.max(b)))
                    .unwrap_or((0, u64::MAX));
                g = g.time_range(range.0, range.1);
                if let Some(f) = fam {
                    g = match qual {
                        Some(q) => g.column(fam_name(f), &qual_name(q)),
                        None => g.family(fam_name(f)),
                    };
                }
                let got = flatten(&r.get(&g).expect("get"));
                // The reactor's read, cells given one by one to a sink, selects the same
                // (when memstores and the block cache hold all it needs).
                let mut rec = Recorder::default();
                if let Some(given) = r.get_cached_into(&g, &mut rec) {
                    given.expect("get into a sink");
                    assert_eq!(flatten(&rec.cells), got, "a sink's cells differ from get's");
                    assert!(rec.open_family.is_none(), "a family was left unended");
                }
                let quals = qual.map(|q| vec![qual_name(q)]);
                let mut want = Vec::new();
                for f in &schema.families {
                    if fam.is_some_and(|x| fam_name(x) != f.name.as_bytes()) {
                        continue;
                    }
                    want.extend(model.read(
                        &row_name(row),
                        f,
                        &ReadQ {
                            quals: quals.as_deref(),
                            versions,
                            range,
                        },
                        now,
                    ));
                }
                assert_eq!(got, want, "step {step}: get {g:?}");
            }
            Op::Scan {
                start,
                stop,
                fam,
                versions,
                reversed,
                limit,
            } => {
                let mut s = Scan::new().versions(versions).limit(limit);
                if let Some(st) = start {
                    s.start_row = Bytes::from(row_name(st));
                }
                if let Some(sp) = stop {
                    s.stop_row = Bytes::from(row_name(sp));
                }
                if reversed {
                    s = s.reversed();
                }
                if let Some(f) = fam {
                    s = s.family(fam_name(f));
                }
                let got: Vec<Flat> = r
                    .scan(&s)
                    .expect("scan")
                    .map(|row| flatten(&row.expect("scan row")))
                    .collect();
                // The sink path gives the same rows, borrowed, each row's families ended.
                let mut scanner = r.scan(&s).expect("scan");
                let mut by_sink: Vec<Flat> = Vec::new();
                for _ in 0..=got.len() {
                    let mut rec = Recorder::default();
                    if !scanner.next_row_into(&mut rec).expect("scan row into") {
                        break;
                    }
                    assert!(rec.open_family.is_none(), "a family was left open");
                    by_sink.push(flatten(&rec.cells));
                }
                assert_eq!(by_sink, got, "step {step}: scan {s:?} through a sink");
                let mut rows = model.rows();
                rows.retain(|row| {
                    let (lo, hi) = if reversed {
                        (stop, start)
                    } else {
                        (start, stop)
                    };
                    let above = lo.is_none_or(|l| {
                        if reversed {
                            row.as_slice() > row_name(l).as_slice()
                        } else {
                            row.as_slice() >= row_name(l).as_slice()
                        }
                    });
                    let below = hi.is_none_or(|h| {
                        if reversed {
                            row.as_slice() <= row_name(h).as_slice()
                        } else {
                            row.as_slice() < row_name(h).as_slice()
                        }
                    });
                    above && below
                });
                if reversed {
                    rows.reverse();
                }
                let mut want = Vec::new();
                for row in rows {
                    let mut cells = Vec::new();
                    for f in &schema.families {
                        if fam.is_some_and(|x| fam_name(x) != f.name.as_bytes()) {
                            continue;
                        }
                        cells.extend(model.read(
                            &row,
                            f,
                            &ReadQ {
                                quals: None,
                                versions,
                                range: (0, u64::MAX),
                            },
                            now,
                        ));
                    }
                    if !cells.is_empty() {
                        want.push(cells);
                    }
                }
                if limit > 0 {
                    want.truncate(limit as usize);
                }
                assert_eq!(got, want, "step {step}: scan {s:?}");
            }
            Op::Flush => {
                r.flush().expect("flush");
                model.flush();
            }
            Op::Compact { major } => {
                // A minor compaction that takes every file of a store is a major one: the
                // engine says which stores it compacted how.
                let done = r.compact_stores(major).expect("compact");
                for (family, kind) in r.families().iter().zip(done) {
                    if kind == Compacted::Major {
                        model.major_compact(&schema, family, now);
                    }
                }
            }
            Op::Advance { ms } => clock.advance(ms),
            Op::Reopen { crash } => {
                let old = region.take().expect("region");
                if crash {
                    drop(old); // no flush: the WAL brings the memstore back
                } else {
                    old.close().expect("close");
                    model.flush();
                }
                region = Some(open(dir.path(), &clock));
            }
        }
    }
    if let Some(r) = region {
        r.close().expect("final close");
    }
}

trait NowForTest {
    fn now_millis_for_test(&self) -> u64;
}

impl NowForTest for ManualClock {
    fn now_millis_for_test(&self) -> u64 {
        cellar_storage::region::Clock::now_millis(self)
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(96),
        max_shrink_iters: 2000,
        ..ProptestConfig::default()
    })]

    #[test]
    fn region_matches_model(ops in proptest::collection::vec(op_strategy(), 1..80)) {
        run(ops);
    }
}

#[test]
fn delete_masks_a_later_put_with_an_older_timestamp_until_major_compaction() {
    use Op::*;
    run(vec![
        Delete {
            kind: CellType::DeleteColumn,
            row: 1,
            fam: 0,
            qual: 1,
            ts: BASE_TS + 5000,
        },
        Put {
            row: 1,
            fam: 0,
            qual: 1,
            ts: BASE_TS + 1000,
            value: 7,
        },
        Get {
            row: 1,
            fam: Some(0),
            qual: Some(1),
            versions: 1,
            range: None,
        },
        Flush,
        Compact { major: true },
        Put {
            row: 1,
            fam: 0,
            qual: 1,
            ts: BASE_TS + 1000,
            value: 8,
        },
        Get {
            row: 1,
            fam: Some(0),
            qual: Some(1),
            versions: 1,
            range: None,
        },
    ]);
}

#[test]
fn compaction_that_drops_everything_does_not_let_the_wal_replay_old_deletes() {
    use Op::*;
    run(vec![
        Delete {
            kind: CellType::DeleteFamily,
            row: 0,
            fam: 1,
            qual: 0,
            ts: BASE_TS + 3000,
        },
        Flush,
        Compact { major: true },
        Reopen { crash: false },
        Put {
            row: 0,
            fam: 1,
            qual: 0,
            ts: BASE_TS,
            value: 0,
        },
        Get {
            row: 0,
            fam: None,
            qual: None,
            versions: 1,
            range: None,
        },
        Reopen { crash: true },
        Get {
            row: 0,
            fam: None,
            qual: None,
            versions: 1,
            range: None,
        },
    ]);
}
