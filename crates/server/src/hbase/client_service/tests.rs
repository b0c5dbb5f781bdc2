//! ClientService against a real region server on a temporary directory, with prost-encoded
//! HBase messages. Regions are addressed by target (names are another module's job).

use super::*;
use crate::hbase::exceptions::{
    DO_NOT_RETRY, NO_SUCH_FAMILY, OUT_OF_ORDER_SCANNER_NEXT, UNKNOWN_PROTOCOL, UNKNOWN_SCANNER,
};
use crate::hbase::{convert, Inline};
use crate::master::Master;
use crate::region_server::RegionServer;
use crate::ServerConfig;
use bytes::{Bytes, BytesMut};
use cellar_model::Cell;
use cellar_model::{FamilySchema, TableSchema};
use cellar_proto::cellblock::CellReader;
use cellar_proto::hbase::mutation_proto::{
    column_value::QualifierValue, ColumnValue, DeleteType, MutationType,
};
use prost::Message;
use std::sync::Arc;

// The calls as these tests make them: a request message on a region target (names are
// another module's job), through each family's execute half.

fn get(svc: &HbaseService, ctx: &CallCtx, target: &RegionTarget, g: &hbase::Get) -> Result<HReply> {
    get::execute(svc, ctx, get::GetCall::new(target.clone(), g)?)
}

fn mutate(
    svc: &HbaseService,
    ctx: &CallCtx,
    target: &RegionTarget,
    req: &hbase::MutateRequest,
    cells: &mut CellReader,
) -> Result<HReply> {
    mutate::execute(svc, ctx, mutate::MutateCall::new(target, req, cells)?)
}

fn multi(
    svc: &HbaseService,
    ctx: &CallCtx,
    req: &hbase::MultiRequest,
    cellblock: Bytes,
    resolve: impl Fn(&hbase::RegionSpecifier) -> Result<RegionTarget>,
) -> (hbase::MultiResponse, BytesMut) {
    multi::run(svc, ctx, multi::MultiCall::new(req, cellblock, resolve))
}

fn scan(
    svc: &HbaseService,
    ctx: &CallCtx,
    req: &hbase::ScanRequest,
    resolve: impl Fn(&hbase::RegionSpecifier) -> Result<RegionTarget>,
) -> Result<HReply> {
    scan::execute(svc, ctx, scan::ScanCall::new(req, resolve)?)
}

/// Scan results: each result's cells and whether it is partial.
type Results = Vec<(Vec<Cell>, bool)>;

struct Fixture {
    _tmp: tempfile::TempDir,
    svc: HbaseService,
    target: RegionTarget,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.svc.rs.shutdown();
    }
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut config = ServerConfig {
        data_dir: tmp.path().to_path_buf(),
        ..ServerConfig::default()
    };
    config.split.auto = false;
    let rs: Arc<RegionServer> =
        RegionServer::open(&config, "127.0.0.1:16020".into()).expect("server opens");
    let master = Master::start(rs.clone());
    let mut cf = FamilySchema::new("cf");
    cf.max_versions = 5;
    master
        .create_table(
            TableSchema::new("t", vec![cf, FamilySchema::new("cg")]),
            &[],
        )
        .expect("table created");
    let route = rs.router.table("t").expect("table routed");
    let region_id = route.regions.values().next().expect("one region").info.id;
    let svc = HbaseService::new(
        rs,
        Some(master),
        "127.0.0.1".into(),
        16020,
        "test-cluster".into(),
    );
    Fixture {
        _tmp: tmp,
        svc,
        target: RegionTarget::User {
            table: "t".into(),
            region_id,
        },
    }
}

const PB: CallCtx = CallCtx {
    conn_id: 7,
    cell_blocks: false,
    caller: crate::security::Caller::internal(),
};
const BLOCKS: CallCtx = CallCtx {
    conn_id: 7,
    cell_blocks: true,
    caller: crate::security::Caller::internal(),
};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn qv(q: &str, v: &str, ts: Option<u64>) -> QualifierValue {
    QualifierValue {
        qualifier: Some(b(q)),
        value: Some(b(v)),
        timestamp: ts,
        ..Default::default()
    }
}

fn mutation(
    t: MutationType,
    row: &str,
    family: &str,
    qvs: Vec<QualifierValue>,
) -> hbase::MutationProto {
    hbase::MutationProto {
        row: Some(b(row)),
        mutate_type: Some(t as i32),
        column_value: if qvs.is_empty() {
            Vec::new()
        } else {
            vec![ColumnValue {
                family: b(family),
                qualifier_value: qvs,
            }]
        },
        ..Default::default()
    }
}

/// A put of one `cf` cell carried in the request's cell block, as the Java client sends it.
fn cell_block_put(row: &str, q: &str, ts: u64, v: &str) -> (hbase::MutationProto, Bytes) {
    let mut block = BytesMut::new();
    cellar_proto::cellblock::put_cell(
        &mut block,
        row.as_bytes(),
        b"cf",
        q.as_bytes(),
        ts,
        cellar_model::CellType::Put,
        v.as_bytes(),
    );
    let m = hbase::MutationProto {
        row: Some(b(row)),
        mutate_type: Some(MutationType::Put as i32),
        associated_cell_count: Some(1),
        ..Default::default()
    };
    (m, block.freeze())
}

fn del(row: &str, family: &str, q: &str, t: DeleteType, ts: u64) -> hbase::MutationProto {
    let mut v = qv(q, "", Some(ts));
    v.delete_type = Some(t as i32);
    mutation(MutationType::Delete, row, family, vec![v])
}

fn req(m: hbase::MutationProto, condition: Option<hbase::Condition>) -> hbase::MutateRequest {
    hbase::MutateRequest {
        region: hbase::RegionSpecifier::default(),
        mutation: m,
        condition,
        nonce_group: None,
    }
}

impl Fixture {
    fn mutate(
        &self,
        ctx: &CallCtx,
        r: hbase::MutateRequest,
        block: Bytes,
    ) -> Result<(hbase::MutateResponse, Bytes)> {
        let reply = mutate(
            &self.svc,
            ctx,
            &self.target,
            &r,
            &mut CellReader::new(block),
        )?;
        let resp = hbase::MutateResponse::decode(reply.param).expect("decodes");
        Ok((resp, reply.cellblock))
    }

    fn put(&self, row: &str, q: &str, v: &str, ts: u64) {
        let m = mutation(MutationType::Put, row, "cf", vec![qv(q, v, Some(ts))]);
        self.mutate(&PB, req(m, None), Bytes::new()).expect("put");
    }

    fn get_with(&self, ctx: &CallCtx, g: hbase::Get) -> Vec<Cell> {
        let reply = get(&self.svc, ctx, &self.target, &g).expect("get");
        let resp = hbase::GetResponse::decode(reply.param).expect("decodes");
        result_cells(
            ctx,
            &resp.result.expect("result"),
            &mut CellReader::new(reply.cellblock),
        )
    }

    fn get_row(&self, row: &str, versions: u32) -> Vec<(String, u64, String)> {
        let g = hbase::Get {
            row: b(row),
            max_versions: Some(versions),
            ..Default::default()
        };
        self.get_with(&PB, g)
            .iter()
            .map(|c| {
                (
                    format!(
                        "{}:{}",
                        String::from_utf8_lossy(&c.family),
                        String::from_utf8_lossy(&c.qualifier)
                    ),
                    c.timestamp,
                    String::from_utf8_lossy(&c.value).into_owned(),
                )
            })
            .collect()
    }

    fn resolve(&self) -> impl Fn(&hbase::RegionSpecifier) -> Result<RegionTarget> + '_ {
        move |spec| {
            if spec.value.as_ref() == b"bad-region" {
                Err(HbaseError::from(crate::error::ServerError::not_serving(
                    "t", 999, "gone",
                )))
            } else {
                Ok(self.target.clone())
            }
        }
    }

    fn scan_call(
        &self,
        ctx: &CallCtx,
        r: hbase::ScanRequest,
    ) -> Result<(hbase::ScanResponse, Results)> {
        let reply = scan(&self.svc, ctx, &r, self.resolve())?;
        let resp = hbase::ScanResponse::decode(reply.param).expect("decodes");
        let mut reader = CellReader::new(reply.cellblock);
        let results = if ctx.cell_blocks {
            resp.cells_per_result
                .iter()
                .zip(&resp.partial_flag_per_result)
                .map(|(n, p)| (reader.take(*n as usize).expect("cells"), *p))
                .collect()
        } else {
            resp.results
                .iter()
                .map(|r| (convert::cells_from_hbase(r), r.partial.unwrap_or(false)))
                .collect()
        };
        Ok((resp, results))
    }
}

fn result_cells(ctx: &CallCtx, r: &hbase::Result, block: &mut CellReader) -> Vec<Cell> {
    if ctx.cell_blocks {
        block
            .take(r.associated_cell_count.unwrap_or(0) as usize)
            .expect("cells in block")
    } else {
        convert::cells_from_hbase(r)
    }
}

fn rows(results: &[(Vec<Cell>, bool)]) -> Vec<String> {
    results
        .iter()
        .map(|(c, _)| String::from_utf8_lossy(&c[0].row).into_owned())
        .collect()
}

#[test]
fn puts_arrive_as_column_values_or_cell_blocks_and_gets_answer_both_ways() {
    let fx = fixture();
    fx.put("r1", "a", "v1", 10);
    // A put carried in the request cell block, at the mutation's timestamp default.
    let (m, block) = cell_block_put("r1", "b", 11, "v2");
    let (resp, _) = fx
        .mutate(&BLOCKS, req(m, None), block)
        .expect("cell block put");
    assert!(resp.result.is_none(), "puts return no result");
    assert_eq!(
        fx.get_row("r1", 1),
        vec![
            ("cf:a".into(), 10, "v1".into()),
            ("cf:b".into(), 11, "v2".into())
        ]
    );
    // Cell-block answers, a column selection and existence-only.
    let g = hbase::Get {
        row: b("r1"),
        column: vec![hbase::Column {
            family: b("cf"),
            qualifier: vec![b("b")],
        }],
        ..Default::default()
    };
    let cells = fx.get_with(&BLOCKS, g);
    assert_eq!(cells.len(), 1);
    assert_eq!(&cells[0].value[..], b"v2");
    for (row, want) in [("r1", true), ("nope", false)] {
        let g = hbase::Get {
            row: b(row),
            existence_only: Some(true),
            ..Default::default()
        };
        let reply = get(&fx.svc, &PB, &fx.target, &g).expect("exists");
        let r = hbase::GetResponse::decode(reply.param)
            .expect("decodes")
            .result
            .expect("result");
        assert_eq!(r.exists, Some(want), "{row}");
    }
    // A cell of another row in the block is refused, naming both rows.
    let mut block = BytesMut::new();
    cellar_proto::cellblock::put_cell(
        &mut block,
        b"zz",
        b"cf",
        b"b",
        1,
        cellar_model::CellType::Put,
        b"x",
    );
    let m = hbase::MutationProto {
        row: Some(b("r1")),
        mutate_type: Some(MutationType::Put as i32),
        associated_cell_count: Some(1),
        ..Default::default()
    };
    let e = fx
        .mutate(&PB, req(m, None), block.freeze())
        .expect_err("wrong row");
    assert_eq!(e.class, DO_NOT_RETRY);
    assert!(e.message.contains("'zz'"), "{}", e.message);
}

#[test]
fn every_delete_type_removes_what_hbase_would() {
    let fx = fixture();
    for ts in [1, 2, 3] {
        fx.put("r", "a", &format!("a{ts}"), ts);
        fx.put("r", "b", &format!("b{ts}"), ts);
    }
    let ok = |m| fx.mutate(&PB, req(m, None), Bytes::new()).expect("delete");
    ok(del("r", "cf", "a", DeleteType::DeleteOneVersion, 2));
    let got = fx.get_row("r", 5);
    assert!(
        got.contains(&("cf:a".into(), 3, "a3".into()))
            && got.contains(&("cf:a".into(), 1, "a1".into()))
    );
    assert!(
        !got.iter().any(|(c, ts, _)| c == "cf:a" && *ts == 2),
        "{got:?}"
    );
    ok(del("r", "cf", "b", DeleteType::DeleteMultipleVersions, 2));
    let got = fx.get_row("r", 5);
    assert_eq!(
        got.iter()
            .filter(|(c, _, _)| c == "cf:b")
            .map(|x| x.1)
            .collect::<Vec<_>>(),
        vec![3]
    );
    ok(del("r", "cf", "", DeleteType::DeleteFamilyVersion, 3));
    let got = fx.get_row("r", 5);
    assert_eq!(got, vec![("cf:a".into(), 1, "a1".into())]);
    fx.put("r", "c", "c9", 9);
    ok(del("r", "cf", "", DeleteType::DeleteFamily, 5));
    assert_eq!(fx.get_row("r", 5), vec![("cf:c".into(), 9, "c9".into())]);
    // A delete naming no column removes the whole row (every family) up to its timestamp.
    let m = hbase::MutationProto {
        row: Some(b("r")),
        mutate_type: Some(MutationType::Delete as i32),
        timestamp: Some(20),
        ..Default::default()
    };
    ok(m);
    assert!(fx.get_row("r", 5).is_empty());
    // Delete cells in the request block.
    fx.put("s", "a", "x", 4);
    let mut block = BytesMut::new();
    cellar_proto::cellblock::put_cell(
        &mut block,
        b"s",
        b"cf",
        b"a",
        4,
        cellar_model::CellType::DeleteColumn,
        b"",
    );
    let m = hbase::MutationProto {
        row: Some(b("s")),
        mutate_type: Some(MutationType::Delete as i32),
        associated_cell_count: Some(1),
        ..Default::default()
    };
    fx.mutate(&PB, req(m, None), block.freeze())
        .expect("block delete");
    assert!(fx.get_row("s", 5).is_empty());
}

#[test]
fn increments_and_appends_return_results_unless_told_not_to() {
    let fx = fixture();
    let inc = |n: i64, rr: Option<u8>| {
        let mut m = mutation(
            MutationType::Increment,
            "c",
            "cf",
            vec![QualifierValue {
                qualifier: Some(b("n")),
                value: Some(Bytes::copy_from_slice(&n.to_be_bytes())),
                ..Default::default()
            }],
        );
        if let Some(v) = rr {
            m.attribute.push(hbase::NameBytesPair {
                name: convert::RETURN_RESULTS_ATTRIBUTE.into(),
                value: Some(Bytes::copy_from_slice(&[v])),
            });
        }
        fx.mutate(&PB, req(m, None), Bytes::new())
            .expect("increment")
            .0
    };
    let r = inc(5, None).result.expect("result");
    assert_eq!(
        &convert::cells_from_hbase(&r)[0].value[..],
        &5i64.to_be_bytes()
    );
    let r = inc(3, Some(0)).result.expect("result");
    assert!(r.cell.is_empty(), "_rr_ = false: no cells");
    let r = inc(1, Some(0xff)).result.expect("result");
    assert_eq!(
        &convert::cells_from_hbase(&r)[0].value[..],
        &9i64.to_be_bytes()
    );
    let m = mutation(MutationType::Append, "c", "cf", vec![qv("s", "ab", None)]);
    fx.mutate(&PB, req(m, None), Bytes::new()).expect("append");
    let m = mutation(MutationType::Append, "c", "cf", vec![qv("s", "cd", None)]);
    let (resp, block) = fx
        .mutate(&BLOCKS, req(m, None), Bytes::new())
        .expect("append");
    let cells = result_cells(
        &BLOCKS,
        &resp.result.expect("result"),
        &mut CellReader::new(block),
    );
    assert_eq!(&cells[0].value[..], b"abcd");
}

/// An increment or append reads the current value only among the versions inside its
/// `time_range` (HBase reads it with a Get over that range): a newer version outside it is
/// passed over, and with none inside it the increment starts from 0, the append from
/// nothing. The Java client always sends the range, all time unless set.
#[test]
fn increments_and_appends_read_the_current_value_within_their_time_range() {
    let fx = fixture();
    let counter = |n: i64, ts: u64| QualifierValue {
        qualifier: Some(b("n")),
        value: Some(Bytes::copy_from_slice(&n.to_be_bytes())),
        timestamp: Some(ts),
        ..Default::default()
    };
    let older = mutation(MutationType::Put, "k", "cf", vec![counter(5, 100)]);
    fx.mutate(&PB, req(older, None), Bytes::new())
        .expect("put 5");
    let newer = mutation(MutationType::Put, "k", "cf", vec![counter(50, 200)]);
    fx.mutate(&PB, req(newer, None), Bytes::new())
        .expect("put 50");
    fx.put("k", "s", "old", 100);
    fx.put("k", "s", "new", 200);
    let range = |from: u64, to: u64| {
        Some(hbase::TimeRange {
            from: Some(from),
            to: Some(to),
        })
    };
    let value = |m: hbase::MutationProto| {
        let (resp, _) = fx.mutate(&PB, req(m, None), Bytes::new()).expect("applied");
        convert::cells_from_hbase(&resp.result.expect("result"))[0]
            .value
            .clone()
    };
    let inc = |tr: Option<hbase::TimeRange>| hbase::MutationProto {
        time_range: tr,
        ..mutation(
            MutationType::Increment,
            "k",
            "cf",
            vec![QualifierValue {
                timestamp: None,
                ..counter(1, 0)
            }],
        )
    };
    // [0, 150) holds only the 5 at 100.
    assert_eq!(&value(inc(range(0, 150)))[..], &6i64.to_be_bytes());
    // [300, 400) holds nothing: from 0.
    assert_eq!(&value(inc(range(300, 400)))[..], &1i64.to_be_bytes());
    // All time, as the Java client sends it by default (to = Long.MAX_VALUE): the newest.
    assert_eq!(
        &value(inc(range(0, i64::MAX as u64)))[..],
        &2i64.to_be_bytes()
    );
    let app = |tr: Option<hbase::TimeRange>| hbase::MutationProto {
        time_range: tr,
        ..mutation(MutationType::Append, "k", "cf", vec![qv("s", "+x", None)])
    };
    assert_eq!(&value(app(range(0, 150)))[..], b"old+x");
    assert_eq!(&value(app(range(150, 160)))[..], b"+x");
}

fn condition(op: hbase::CompareType, value: &str) -> hbase::Condition {
    hbase::Condition {
        row: b("k"),
        family: Some(b("cf")),
        qualifier: Some(b("q")),
        compare_type: Some(op as i32),
        comparator: Some(hbase::Comparator {
            name: "org.apache.hadoop.hbase.filter.BinaryComparator".into(),
            serialized_comparator: Some(
                hbase::BinaryComparator {
                    comparable: hbase::ByteArrayComparable {
                        value: Some(b(value)),
                    },
                }
                .encode_to_vec()
                .into(),
            ),
        }),
        ..Default::default()
    }
}

#[test]
fn check_and_mutate_compares_operand_against_stored_value_as_hbase_does() {
    use hbase::CompareType as T;
    let fx = fixture();
    fx.put("k", "q", "m", 1);
    let try_put = |c: hbase::Condition, v: &str| {
        let m = mutation(MutationType::Put, "k", "cf", vec![qv("w", v, None)]);
        fx.mutate(&PB, req(m, Some(c)), Bytes::new())
            .expect("checkAndMutate")
            .0
            .processed
    };
    assert_eq!(try_put(condition(T::Equal, "m"), "1"), Some(true));
    assert_eq!(try_put(condition(T::Equal, "x"), "2"), Some(false));
    // HBase: "operand LESS stored" — "a" < "m" holds, "z" < "m" does not.
    assert_eq!(try_put(condition(T::Less, "a"), "3"), Some(true));
    assert_eq!(try_put(condition(T::Less, "z"), "4"), Some(false));
    assert_eq!(try_put(condition(T::Greater, "z"), "5"), Some(true));
    // An empty operand: the column must be absent.
    let mut absent = condition(T::Equal, "");
    absent.qualifier = Some(b("missing"));
    assert_eq!(try_put(absent, "6"), Some(true));
    let w: Vec<_> = fx
        .get_row("k", 1)
        .into_iter()
        .filter(|c| c.0 == "cf:w")
        .collect();
    assert_eq!(w[0].2, "6");
    // A filter condition holds when the row passes it with at least one cell.
    let filter_condition = |name: &str, serialized: Vec<u8>| {
        let mut c = condition(T::Equal, "m");
        c.family = None;
        c.qualifier = None;
        c.compare_type = None;
        c.comparator = None;
        c.filter = Some(hbase::Filter {
            name: name.into(),
            serialized_filter: Some(serialized.into()),
        });
        c
    };
    let key_only = hbase::KeyOnlyFilter { len_as_val: false }.encode_to_vec();
    let passes = filter_condition("org.apache.hadoop.hbase.filter.KeyOnlyFilter", key_only);
    assert_eq!(try_put(passes, "7"), Some(true));
    let none = filter_condition("org.apache.hadoop.hbase.filter.FilterAllFilter", Vec::new());
    assert_eq!(try_put(none, "8"), Some(false));
    let unknown = filter_condition("x.NoSuchFilter", Vec::new());
    let m = mutation(MutationType::Put, "k", "cf", vec![qv("w", "9", None)]);
    let e = fx
        .mutate(&PB, req(m, Some(unknown)), Bytes::new())
        .expect_err("unknown filter class");
    assert_eq!(e.class, DO_NOT_RETRY);
    assert!(e.message.contains("x.NoSuchFilter"), "{}", e.message);
    // Meta is read-only.
    let m = mutation(MutationType::Put, "k", "cf", vec![qv("w", "7", None)]);
    let e = mutate(
        &fx.svc,
        &PB,
        &RegionTarget::Meta,
        &req(m, None),
        &mut CellReader::new(Bytes::new()),
    )
    .expect_err("meta");
    assert!(e.message.contains("hbase:meta"), "{}", e.message);
}

fn action(index: u32, m: Option<hbase::MutationProto>, g: Option<hbase::Get>) -> hbase::Action {
    hbase::Action {
        index: Some(index),
        mutation: m,
        get: g,
        service_call: None,
    }
}

fn region_action(value: &str, actions: Vec<hbase::Action>) -> hbase::RegionAction {
    hbase::RegionAction {
        region: hbase::RegionSpecifier {
            r#type: 1,
            value: b(value),
        },
        atomic: None,
        action: actions,
        condition: None,
    }
}

#[test]
#[allow(deprecated)]
fn multi_reports_each_action_and_each_region_on_its_own() {
    let fx = fixture();
    fx.put("g", "a", "gv", 1);
    // Cells for the block-carried mutations, in action order, across region actions.
    let mut block = BytesMut::new();
    cellar_proto::cellblock::put_cell(
        &mut block,
        b"lost",
        b"cf",
        b"a",
        1,
        cellar_model::CellType::Put,
        b"x",
    );
    cellar_proto::cellblock::put_cell(
        &mut block,
        b"m2",
        b"cf",
        b"a",
        1,
        cellar_model::CellType::Put,
        b"v2",
    );
    let block_put = |row: &str| hbase::MutationProto {
        row: Some(b(row)),
        mutate_type: Some(MutationType::Put as i32),
        associated_cell_count: Some(1),
        ..Default::default()
    };
    let good = mutation(MutationType::Put, "m1", "cf", vec![qv("a", "v1", None)]);
    let bad_family = mutation(MutationType::Put, "m3", "nofam", vec![qv("a", "v", None)]);
    let get_g = hbase::Get {
        row: b("g"),
        ..Default::default()
    };
    let mut cas = region_action(
        "r",
        vec![action(
            20,
            Some(mutation(
                MutationType::Put,
                "k",
                "cf",
                vec![qv("q", "new", None)],
            )),
            None,
        )],
    );
    cas.condition = Some(condition(hbase::CompareType::Equal, ""));
    cas.atomic = Some(true);
    let req = hbase::MultiRequest {
        region_action: vec![
            region_action("bad-region", vec![action(0, Some(block_put("lost")), None)]),
            region_action(
                "r",
                vec![
                    action(5, Some(good), None),
                    action(6, Some(bad_family), None),
                    action(7, None, Some(get_g)),
                    action(8, Some(block_put("m2")), None),
                ],
            ),
            cas,
        ],
        ..Default::default()
    };
    let (resp, out) = multi(&fx.svc, &BLOCKS, &req, block.freeze(), fx.resolve());
    assert_eq!(resp.region_action_result.len(), 3);
    let failed = &resp.region_action_result[0];
    assert!(failed
        .exception
        .as_ref()
        .expect("region failure")
        .name
        .ends_with("NotServingRegionException"));
    let r = &resp.region_action_result[1].result_or_exception;
    assert_eq!(
        r.iter().map(|x| x.index).collect::<Vec<_>>(),
        vec![Some(5), Some(6), Some(7), Some(8)]
    );
    assert!(r[0].exception.is_none() && r[2].exception.is_none() && r[3].exception.is_none());
    let ex = r[1].exception.as_ref().expect("bad family fails alone");
    assert_eq!(ex.name, NO_SUCH_FAMILY);
    assert!(String::from_utf8_lossy(ex.value.as_deref().unwrap_or_default()).contains("nofam"));
    // Result cells come in result order from the response block.
    let mut reader = CellReader::new(out.freeze());
    let _ = result_cells(
        &BLOCKS,
        r[0].result.as_ref().expect("put result"),
        &mut reader,
    );
    let got = result_cells(
        &BLOCKS,
        r[2].result.as_ref().expect("get result"),
        &mut reader,
    );
    assert_eq!(&got[0].value[..], b"gv");
    assert_eq!(resp.region_action_result[2].processed, Some(true));
    assert_eq!(resp.processed, Some(true));
    assert_eq!(fx.get_row("m1", 1)[0].2, "v1");
    assert_eq!(
        fx.get_row("m2", 1)[0].2,
        "v2",
        "the skipped region's cells were not misassigned"
    );
    assert!(fx.get_row("lost", 1).is_empty());
    assert_eq!(fx.get_row("k", 1)[0].2, "new");
}

/// An old-style `Get.closest_row_before` (pre-1.0 clients, AsyncHBase's first region lookup)
/// is refused as HBase 2.6's region server refuses it: `UnknownProtocolException`, do not
/// retry, in a Get of a user region or of meta and in a Multi's Get action (only that action
/// fails). AsyncHBase switches to reversed meta scans on exactly that class.
#[test]
fn closest_row_before_is_refused_with_hbase_2s_unknown_protocol_exception() {
    let fx = fixture();
    fx.put("g", "a", "gv", 1);
    let closest = hbase::Get {
        row: b("h"),
        column: vec![hbase::Column {
            family: b("cf"),
            qualifier: Vec::new(),
        }],
        closest_row_before: Some(true),
        ..Default::default()
    };
    for target in [fx.target.clone(), RegionTarget::Meta] {
        let e = get(&fx.svc, &PB, &target, &closest).expect_err("refused");
        assert_eq!(e.class, UNKNOWN_PROTOCOL, "{target:?}: {e:?}");
        assert!(e.do_not_retry, "{e:?}");
        assert!(e.message.contains("closest_row_before"), "{e:?}");
    }
    let plain = hbase::Get {
        row: b("g"),
        ..Default::default()
    };
    let req = hbase::MultiRequest {
        region_action: vec![region_action(
            "r",
            vec![
                action(1, None, Some(closest.clone())),
                action(2, None, Some(plain)),
            ],
        )],
        ..Default::default()
    };
    let (resp, out) = multi(&fx.svc, &BLOCKS, &req, Bytes::new(), fx.resolve());
    let r = &resp.region_action_result[0].result_or_exception;
    assert_eq!(r.len(), 2, "{resp:?}");
    let ex = r[0].exception.as_ref().expect("the closest-row Get fails");
    assert_eq!((r[0].index, ex.name.as_str()), (Some(1), UNKNOWN_PROTOCOL));
    let got = result_cells(
        &BLOCKS,
        r[1].result.as_ref().expect("the plain Get is served"),
        &mut CellReader::new(out.freeze()),
    );
    assert_eq!(&got[0].value[..], b"gv");
}

#[test]
fn atomic_row_mutations_apply_together_and_multi_row_is_refused() {
    let fx = fixture();
    fx.put("a", "old", "x", 1);
    let mut ra = region_action(
        "r",
        vec![
            action(
                0,
                Some(mutation(
                    MutationType::Put,
                    "a",
                    "cf",
                    vec![qv("n", "1", None)],
                )),
                None,
            ),
            action(
                1,
                Some(del("a", "cf", "old", DeleteType::DeleteMultipleVersions, 5)),
                None,
            ),
        ],
    );
    ra.atomic = Some(true);
    let req = hbase::MultiRequest {
        region_action: vec![ra.clone()],
        ..Default::default()
    };
    let (resp, _) = multi(&fx.svc, &PB, &req, Bytes::new(), fx.resolve());
    assert!(resp.region_action_result[0].exception.is_none(), "{resp:?}");
    assert_eq!(
        fx.get_row("a", 1),
        vec![("cf:n".into(), fx.get_row("a", 1)[0].1, "1".into())]
    );
    ra.action.push(action(
        2,
        Some(mutation(
            MutationType::Put,
            "other",
            "cf",
            vec![qv("n", "1", None)],
        )),
        None,
    ));
    let req = hbase::MultiRequest {
        region_action: vec![ra],
        ..Default::default()
    };
    let (resp, _) = multi(&fx.svc, &PB, &req, Bytes::new(), fx.resolve());
    let ex = resp.region_action_result[0]
        .exception
        .as_ref()
        .expect("refused");
    assert_eq!(ex.name, DO_NOT_RETRY);
    assert!(fx.get_row("other", 1).is_empty());
}

fn open(scan: hbase::Scan, rows: u32, limit: u32) -> hbase::ScanRequest {
    hbase::ScanRequest {
        region: Some(hbase::RegionSpecifier {
            r#type: 1,
            value: b("r"),
        }),
        scan: Some(scan),
        number_of_rows: Some(rows),
        limit_of_rows: Some(limit),
        ..Default::default()
    }
}

fn next(id: u64, rows: u32) -> hbase::ScanRequest {
    hbase::ScanRequest {
        scanner_id: Some(id),
        number_of_rows: Some(rows),
        ..Default::default()
    }
}

#[test]
fn scanners_open_continue_and_close_with_hbase_flags() {
    let fx = fixture();
    for r in ["r1", "r2", "r3", "r4", "r5"] {
        fx.put(r, "a", r, 1);
    }
    for ctx in [PB, BLOCKS] {
        let (resp, res) = fx
            .scan_call(&ctx, open(hbase::Scan::default(), 2, 0))
            .expect("open");
        assert_eq!(rows(&res), vec!["r1", "r2"]);
        assert_eq!(resp.more_results_in_region, Some(true));
        assert!(resp.ttl.is_some_and(|t| t > 0));
        let id = resp.scanner_id.expect("id");
        let (_, res) = fx.scan_call(&ctx, next(id, 2)).expect("next");
        assert_eq!(rows(&res), vec!["r3", "r4"]);
        let (resp, res) = fx.scan_call(&ctx, next(id, 2)).expect("last");
        assert_eq!(rows(&res), vec!["r5"]);
        assert_eq!(resp.more_results_in_region, Some(false));
        let e = fx.scan_call(&ctx, next(id, 2)).expect_err("gone");
        assert_eq!(e.class, UNKNOWN_SCANNER);
    }
    // Limit, then close of an open scanner.
    let (resp, res) = fx
        .scan_call(&PB, open(hbase::Scan::default(), 2, 3))
        .expect("open");
    assert_eq!(rows(&res), vec!["r1", "r2"]);
    let id = resp.scanner_id.expect("id");
    let (resp, res) = fx.scan_call(&PB, next(id, 10)).expect("next");
    assert_eq!(rows(&res), vec!["r3"]);
    assert_eq!(resp.more_results_in_region, Some(false));
    let (resp, _) = fx
        .scan_call(&PB, open(hbase::Scan::default(), 1, 0))
        .expect("open");
    let id = resp.scanner_id.expect("id");
    let renew = hbase::ScanRequest {
        scanner_id: Some(id),
        renew: Some(true),
        ..Default::default()
    };
    let (_, res) = fx.scan_call(&PB, renew).expect("renew");
    assert!(res.is_empty());
    let close = hbase::ScanRequest {
        scanner_id: Some(id),
        close_scanner: Some(true),
        ..Default::default()
    };
    let (resp, _) = fx.scan_call(&PB, close).expect("close");
    assert_eq!(resp.more_results, Some(false));
    assert_eq!(
        fx.scan_call(&PB, next(id, 1)).expect_err("closed").class,
        UNKNOWN_SCANNER
    );
    // Bounds: exclusive start / inclusive stop, forward and reversed.
    let bounded = |reversed: bool, start: &str, inc_start: bool, stop: &str, inc_stop: bool| {
        let s = hbase::Scan {
            start_row: Some(b(start)),
            stop_row: Some(b(stop)),
            include_start_row: Some(inc_start),
            include_stop_row: Some(inc_stop),
            reversed: Some(reversed),
            ..Default::default()
        };
        rows(&fx.scan_call(&PB, open(s, 100, 0)).expect("bounded").1)
    };
    assert_eq!(bounded(false, "r2", false, "r4", true), vec!["r3", "r4"]);
    assert_eq!(bounded(false, "r2", true, "r4", false), vec!["r2", "r3"]);
    assert_eq!(
        bounded(true, "r4", true, "r2", true),
        vec!["r4", "r3", "r2"]
    );
    assert_eq!(bounded(true, "r4", false, "r2", false), vec!["r3"]);
    assert_eq!(
        bounded(true, "r9", true, "", false),
        vec!["r5", "r4", "r3", "r2", "r1"]
    );
}

/// HBase's per-scanner call sequence: nexts, renewals and closes that carry `next_call_seq`
/// must carry the scanner's next number (the Java client counts nexts and renewals from 0);
/// any other gets `OutOfOrderScannerNextException` and changes nothing. Calls without a
/// number are not counted.
#[test]
fn scanner_calls_out_of_sequence_are_refused_and_change_nothing() {
    let fx = fixture();
    for r in ["r1", "r2", "r3", "r4", "r5", "r6"] {
        fx.put(r, "a", r, 1);
    }
    let numbered = |id: u64, seq: u64| hbase::ScanRequest {
        next_call_seq: Some(seq),
        ..next(id, 1)
    };
    let (resp, res) = fx
        .scan_call(&PB, open(hbase::Scan::default(), 1, 0))
        .expect("open");
    assert_eq!(rows(&res), vec!["r1"]);
    let id = resp.scanner_id.expect("id");
    let (_, res) = fx.scan_call(&PB, numbered(id, 0)).expect("next 0");
    assert_eq!(rows(&res), vec!["r2"]);
    for (seq, what) in [(0, "a repeated number"), (2, "a skipped number")] {
        let e = fx.scan_call(&PB, numbered(id, seq)).expect_err(what);
        assert_eq!(e.class, OUT_OF_ORDER_SCANNER_NEXT, "{what}");
        assert!(e.do_not_retry);
        assert!(
            e.message.contains("Expected nextCallSeq: 1")
                && e.message.contains(&format!("from client: {seq}")),
            "{}",
            e.message
        );
    }
    // The Java client's lease renewal takes a number too.
    let renew = hbase::ScanRequest {
        renew: Some(true),
        ..numbered(id, 1)
    };
    let (_, res) = fx.scan_call(&PB, renew.clone()).expect("renew 1");
    assert!(res.is_empty());
    assert_eq!(
        fx.scan_call(&PB, renew).expect_err("renew 1 again").class,
        OUT_OF_ORDER_SCANNER_NEXT
    );
    // An unnumbered next is served and not counted.
    let (_, res) = fx.scan_call(&PB, next(id, 1)).expect("unnumbered");
    assert_eq!(rows(&res), vec!["r3"]);
    let (_, res) = fx.scan_call(&PB, numbered(id, 2)).expect("next 2");
    assert_eq!(rows(&res), vec!["r4"]);
    // A close out of order leaves the scanner open; in order, it closes it.
    let close = |seq: u64| hbase::ScanRequest {
        close_scanner: Some(true),
        ..numbered(id, seq)
    };
    assert_eq!(
        fx.scan_call(&PB, close(7)).expect_err("close 7").class,
        OUT_OF_ORDER_SCANNER_NEXT
    );
    let (_, res) = fx.scan_call(&PB, numbered(id, 3)).expect("next 3");
    assert_eq!(rows(&res), vec!["r5"]);
    fx.scan_call(&PB, close(4)).expect("close 4");
    assert_eq!(
        fx.scan_call(&PB, numbered(id, 5))
            .expect_err("closed")
            .class,
        UNKNOWN_SCANNER
    );
    // A numbered open is call 0: its first next is 1; another number is refused.
    let opened = |seq: u64| hbase::ScanRequest {
        next_call_seq: Some(seq),
        ..open(hbase::Scan::default(), 1, 0)
    };
    let e = fx.scan_call(&PB, opened(3)).expect_err("open numbered 3");
    assert_eq!(e.class, OUT_OF_ORDER_SCANNER_NEXT);
    let (resp, _) = fx.scan_call(&PB, opened(0)).expect("open numbered 0");
    let id = resp.scanner_id.expect("id");
    let refused = hbase::ScanRequest {
        next_call_seq: Some(0),
        ..next(id, 1)
    };
    assert_eq!(
        fx.scan_call(&PB, refused)
            .expect_err("0 was the open")
            .class,
        OUT_OF_ORDER_SCANNER_NEXT
    );
    let (_, res) = fx
        .scan_call(
            &PB,
            hbase::ScanRequest {
                next_call_seq: Some(1),
                ..next(id, 1)
            },
        )
        .expect("next 1");
    assert_eq!(rows(&res), vec!["r2"]);
}

/// A scan of `hbase:meta` answers at most `number_of_rows` rows per call, as HBase's region
/// server does, with a scanner for the rest (its calls numbered like any scanner's); without
/// a number of rows every row comes at once.
#[test]
fn meta_scans_answer_number_of_rows_at_a_time() {
    let fx = fixture();
    fx.svc
        .master()
        .expect("a master")
        .create_table(
            TableSchema::new("m", vec![FamilySchema::new("f")]),
            &[b("b"), b("c"), b("d"), b("e")],
        )
        .expect("table m created");
    let meta = |_: &hbase::RegionSpecifier| Ok(RegionTarget::Meta);
    let call = |r: hbase::ScanRequest| -> Result<(hbase::ScanResponse, Vec<Vec<u8>>)> {
        let reply = scan(&fx.svc, &PB, &r, meta)?;
        let resp = hbase::ScanResponse::decode(reply.param).expect("decodes");
        let rows = resp
            .results
            .iter()
            .map(|r| convert::cells_from_hbase(r)[0].row.to_vec())
            .collect();
        Ok((resp, rows))
    };
    let regions_of_m = hbase::Scan {
        start_row: Some(b("m,,")),
        stop_row: Some(b("m-")),
        column: vec![hbase::Column {
            family: b("info"),
            qualifier: Vec::new(),
        }],
        ..Default::default()
    };
    let (resp, all) = call(open(regions_of_m.clone(), 0, 0)).expect("whole meta scan");
    assert_eq!(
        all.len(),
        5,
        "one row per region of m: {:?}",
        all.iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect::<Vec<_>>()
    );
    assert_eq!(resp.more_results_in_region, Some(false));

    let (resp, first) = call(open(regions_of_m, 2, 0)).expect("open");
    assert_eq!(first, all[..2], "the first two rows");
    assert_eq!(resp.more_results_in_region, Some(true), "more to come");
    let id = resp.scanner_id.expect("a scanner id");
    let numbered = |seq: u64| hbase::ScanRequest {
        next_call_seq: Some(seq),
        ..next(id, 2)
    };
    let (resp, second) = call(numbered(0)).expect("next 0");
    assert_eq!(second, all[2..4]);
    assert_eq!(resp.more_results_in_region, Some(true));
    assert_eq!(
        call(numbered(0)).expect_err("next 0 again").class,
        OUT_OF_ORDER_SCANNER_NEXT
    );
    let (resp, last) = call(numbered(1)).expect("next 1");
    assert_eq!(last, all[4..]);
    assert_eq!(resp.more_results_in_region, Some(false), "meta is done");
    assert_eq!(
        call(numbered(2)).expect_err("closed at the end").class,
        UNKNOWN_SCANNER
    );
}

#[test]
fn wide_rows_come_in_batches_flagged_partial() {
    let fx = fixture();
    for q in ["a", "b", "c"] {
        fx.put("w", q, q, 1);
    }
    let s = hbase::Scan {
        batch_size: Some(2),
        ..Default::default()
    };
    for ctx in [PB, BLOCKS] {
        let (_, res) = fx.scan_call(&ctx, open(s.clone(), 10, 0)).expect("open");
        assert_eq!(
            res.iter().map(|(c, p)| (c.len(), *p)).collect::<Vec<_>>(),
            vec![(2, true), (1, false)]
        );
    }
    // A filter with an unknown class is refused by name at open.
    let s = hbase::Scan {
        filter: Some(hbase::Filter {
            name: "com.example.MyFilter".into(),
            serialized_filter: None,
        }),
        ..Default::default()
    };
    let e = fx
        .scan_call(&PB, open(s, 10, 0))
        .expect_err("unknown filter");
    assert!(e.message.contains("com.example.MyFilter"), "{}", e.message);
    // A known filter runs.
    let s = hbase::Scan {
        filter: Some(hbase::Filter {
            name: "org.apache.hadoop.hbase.filter.ColumnPrefixFilter".into(),
            serialized_filter: Some(
                hbase::ColumnPrefixFilter { prefix: b("b") }
                    .encode_to_vec()
                    .into(),
            ),
        }),
        ..Default::default()
    };
    let (_, res) = fx.scan_call(&PB, open(s, 10, 0)).expect("filtered");
    assert_eq!(res.len(), 1);
    assert_eq!(&res[0].0[0].qualifier[..], b"b");
}

impl Fixture {
    /// A Mutate call as the reactor takes it: addressed by region name, encoded.
    fn mutate_on_reactor(
        &self,
        m: hbase::MutationProto,
        condition: Option<hbase::Condition>,
        block: Bytes,
    ) -> Option<Inline> {
        let RegionTarget::User { table, region_id } = &self.target else {
            panic!("user region");
        };
        let mut r = req(m, condition);
        r.region = hbase::RegionSpecifier {
            r#type: 1,
            value: crate::hbase::names::region_name(table, b"", *region_id),
        };
        mutate_inline(&self.svc, &PB, &Bytes::from(r.encode_to_vec()), &block)
    }
}

#[test]
fn plain_puts_are_applied_on_the_reactor_and_other_writes_declined() {
    let fx = fixture();
    let inline = |m, condition, block| fx.mutate_on_reactor(m, condition, block);
    // The Java client's shape: the cells in the request's cell block.
    let (m, block) = cell_block_put("r1", "a", 11, "v1");
    let Some(Inline::AfterWal(write, reply)) = inline(m, None, block) else {
        panic!("a plain put runs on the reactor and waits for its WAL write");
    };
    // Not acknowledged, not visible, until its WAL record is in the OS.
    assert!(fx.get_row("r1", 1).is_empty());
    write.finish().expect("WAL write");
    let resp = hbase::MutateResponse::decode(reply.param).expect("decodes");
    assert_eq!(resp.processed, Some(true));
    assert!(resp.result.is_none());
    assert_eq!(fx.get_row("r1", 1), vec![("cf:a".into(), 11, "v1".into())]);

    // Deletes, increments, conditional puts and unknown families' errors: the pool's.
    let d = del("r1", "cf", "a", DeleteType::DeleteOneVersion, 11);
    assert!(inline(d, None, Bytes::new()).is_none());
    let incr = mutation(
        MutationType::Increment,
        "r2",
        "cf",
        vec![qv("n", "x", None)],
    );
    assert!(inline(incr, None, Bytes::new()).is_none());
    let put = mutation(MutationType::Put, "r1", "cf", vec![qv("a", "v2", Some(12))]);
    let cond = condition(hbase::CompareType::Equal, "v1");
    assert!(inline(put, Some(cond), Bytes::new()).is_none());
    assert_eq!(fx.get_row("r1", 1), vec![("cf:a".into(), 11, "v1".into())]);
    let bad = mutation(MutationType::Put, "r3", "nope", vec![qv("a", "v", None)]);
    let Some(Inline::Ready(Err(err))) = inline(bad, None, Bytes::new()) else {
        panic!("an unknown family is answered inline with an error");
    };
    assert_eq!(err.class, NO_SUCH_FAMILY, "{}", err.message);
}

#[test]
fn an_increment_waits_for_a_deferred_put_of_its_row_and_reads_it() {
    let fx = fixture();
    // Column cf:n of row c, holding `n` as HBase counters do (8 bytes, big-endian).
    let counter = |kind: MutationType, n: i64, timestamp: Option<u64>| {
        let value = Some(Bytes::copy_from_slice(&n.to_be_bytes()));
        let cell = QualifierValue {
            qualifier: Some(b("n")),
            value,
            timestamp,
            ..Default::default()
        };
        mutation(kind, "c", "cf", vec![cell])
    };
    let put = counter(MutationType::Put, 5, Some(1));
    let Some(Inline::AfterWal(write, _)) = fx.mutate_on_reactor(put, None, Bytes::new()) else {
        panic!("a plain put runs on the reactor");
    };
    let incremented = std::thread::scope(|s| {
        let incr = s.spawn(|| {
            let m = counter(MutationType::Increment, 1, None);
            fx.mutate(&PB, req(m, None), Bytes::new())
                .expect("increment")
                .0
        });
        // Without the row held, the increment would finish here, reading no value (the put
        // is not visible yet) and writing 1 over the put's 5.
        std::thread::sleep(std::time::Duration::from_millis(50));
        write.finish().expect("WAL write");
        incr.join().expect("increment thread")
    });
    let cells = convert::cells_from_hbase(&incremented.result.expect("result"));
    assert_eq!(&cells[0].value[..], &6i64.to_be_bytes());
    assert_eq!(fx.get_row("c", 1)[0].2.as_bytes(), &6i64.to_be_bytes()[..]);
}

impl Fixture {
    /// A Get call as the reactor takes it: addressed by region name, encoded.
    fn get_on_reactor(&self, ctx: &CallCtx, g: &hbase::Get) -> Option<Result<HReply>> {
        let RegionTarget::User { table, region_id } = &self.target else {
            panic!("user region");
        };
        let r = hbase::GetRequest {
            region: hbase::RegionSpecifier {
                r#type: 1,
                value: crate::hbase::names::region_name(table, b"", *region_id),
            },
            get: g.clone(),
        };
        get_inline(&self.svc, ctx, &Bytes::from(r.encode_to_vec()))
    }
}

/// What a client reads from a Get's answer: whether it exists (existence-only Gets), and the
/// cells, from the message or the cell block; or the exception's class.
fn answer(
    ctx: &CallCtx,
    reply: Result<HReply>,
) -> std::result::Result<(Option<bool>, Vec<Cell>), String> {
    let reply = reply.map_err(|e| e.class.to_string())?;
    let r = hbase::GetResponse::decode(reply.param)
        .expect("decodes")
        .result
        .expect("result");
    let cells = result_cells(ctx, &r, &mut CellReader::new(reply.cellblock));
    Ok((r.exists, cells))
}

#[test]
fn gets_on_the_reactor_answer_what_the_handler_pool_does() {
    let fx = fixture();
    for (q, v, ts) in [
        ("a", "a1", 10),
        ("a", "a2", 11),
        ("a", "a3", 12),
        ("b", "b1", 10),
    ] {
        fx.put("r1", q, v, ts);
    }
    let m = mutation(MutationType::Put, "r1", "cg", vec![qv("x", "x1", Some(10))]);
    fx.mutate(&PB, req(m, None), Bytes::new()).expect("put cg");
    let d = del("r1", "cf", "a", DeleteType::DeleteOneVersion, 12);
    fx.mutate(&PB, req(d, None), Bytes::new()).expect("delete");
    let prefix_filter = hbase::Filter {
        name: "org.apache.hadoop.hbase.filter.ColumnPrefixFilter".into(),
        serialized_filter: Some(
            hbase::ColumnPrefixFilter { prefix: b("b") }
                .encode_to_vec()
                .into(),
        ),
    };
    let column = |f: &str, q: &str| hbase::Column {
        family: b(f),
        qualifier: vec![b(q)],
    };
    let gets = [
        (
            "whole row",
            hbase::Get {
                row: b("r1"),
                ..Default::default()
            },
        ),
        (
            "versions",
            hbase::Get {
                row: b("r1"),
                max_versions: Some(3),
                ..Default::default()
            },
        ),
        (
            "column",
            hbase::Get {
                row: b("r1"),
                column: vec![column("cf", "a")],
                max_versions: Some(2),
                ..Default::default()
            },
        ),
        (
            "family",
            hbase::Get {
                row: b("r1"),
                column: vec![hbase::Column {
                    family: b("cg"),
                    qualifier: vec![],
                }],
                ..Default::default()
            },
        ),
        (
            "time range",
            hbase::Get {
                row: b("r1"),
                max_versions: Some(5),
                time_range: Some(hbase::TimeRange {
                    from: Some(10),
                    to: Some(11),
                }),
                ..Default::default()
            },
        ),
        (
            "filter",
            hbase::Get {
                row: b("r1"),
                filter: Some(prefix_filter),
                ..Default::default()
            },
        ),
        (
            "exists",
            hbase::Get {
                row: b("r1"),
                existence_only: Some(true),
                ..Default::default()
            },
        ),
        (
            "missing row",
            hbase::Get {
                row: b("r9"),
                ..Default::default()
            },
        ),
        (
            "missing exists",
            hbase::Get {
                row: b("r9"),
                existence_only: Some(true),
                ..Default::default()
            },
        ),
        (
            "unknown family",
            hbase::Get {
                row: b("r1"),
                column: vec![column("nope", "a")],
                ..Default::default()
            },
        ),
    ];
    for ctx in [&PB, &BLOCKS] {
        for (what, g) in &gets {
            let inline = fx
                .get_on_reactor(ctx, g)
                .unwrap_or_else(|| panic!("{what}: answered on the reactor"));
            let pooled = get(&fx.svc, ctx, &fx.target, g);
            assert_eq!(
                answer(ctx, inline),
                answer(ctx, pooled),
                "{what}, cell blocks {}",
                ctx.cell_blocks
            );
        }
    }
    // The answers are the expected ones, not merely equal.
    let whole = answer(&BLOCKS, get(&fx.svc, &BLOCKS, &fx.target, &gets[0].1)).expect("get");
    let values: Vec<_> = whole
        .1
        .iter()
        .map(|c| String::from_utf8_lossy(&c.value).into_owned())
        .collect();
    assert_eq!(values, ["a2", "b1", "x1"]);
    let unknown = fx.get_on_reactor(&BLOCKS, &gets[9].1).expect("answered");
    assert_eq!(answer(&BLOCKS, unknown), Err(NO_SUCH_FAMILY.to_string()));
}
