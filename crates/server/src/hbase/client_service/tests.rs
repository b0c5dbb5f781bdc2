//! ClientService against a real region server on a temporary directory, with prost-encoded
//! HBase messages. Regions are addressed by target (names are another module's job). The
//! fixture and helpers are here, the tests by call family in `tests/`.

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

mod batches;
mod gets;
mod mutations;
mod scanners;

// The calls as these tests make them: a request message on a region target (names are
// another module's job), through each family's execute half.

fn get(svc: &HbaseService, ctx: &CallCtx, target: &RegionTarget, g: &hbase::Get) -> Result<Reply> {
    get::execute(svc, ctx, get::GetCall::new(target.clone(), g)?)
}

fn mutate(
    svc: &HbaseService,
    ctx: &CallCtx,
    target: &RegionTarget,
    req: &hbase::MutateRequest,
    cells: &mut CellReader,
) -> Result<Reply> {
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
) -> Result<Reply> {
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
