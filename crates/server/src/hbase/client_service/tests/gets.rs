//! Get: refusals, and the reactor's Gets answering what the handler pool does.

use super::*;

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

impl Fixture {
    /// A Get call as the reactor takes it: addressed by region name, encoded.
    fn get_on_reactor(&self, ctx: &CallCtx, g: &hbase::Get) -> Option<Result<Reply>> {
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
    reply: Result<Reply>,
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

impl Fixture {
    /// Flushes the fixture's region: its rows move from the memstore to a store file.
    pub(super) fn flush(&self) {
        let RegionTarget::User { table, region_id } = &self.target else {
            panic!("user region");
        };
        let hosted = self
            .svc
            .rs
            .router
            .region_for_call(table, *region_id)
            .expect("region");
        hosted.with(|r| Ok(r.flush()?)).expect("flushed");
    }
}

/// The block bytes a Get's answer reports (`Result.metrics`), if it reports any.
fn get_metrics(reply: Result<Reply>) -> Option<u64> {
    let reply = reply.expect("get");
    let resp = hbase::GetResponse::decode(reply.param).expect("decodes");
    resp.result
        .expect("result")
        .metrics
        .map(|m| m.block_bytes_scanned.expect("block bytes"))
}

#[test]
fn a_get_with_query_metrics_reports_the_block_bytes_it_read() {
    let fx = fixture();
    fx.put("r1", "a", "value", 1);
    let asked = hbase::Get {
        row: b("r1"),
        query_metrics_enabled: Some(true),
        ..Default::default()
    };
    // Only in the memstore: no block read, and the answer says so.
    assert_eq!(get_metrics(get(&fx.svc, &PB, &fx.target, &asked)), Some(0));
    fx.flush();
    for ctx in [&PB, &BLOCKS] {
        let read = get_metrics(get(&fx.svc, ctx, &fx.target, &asked)).expect("metrics");
        assert!(read > 0, "a read from a store file scans its block");
        // The block is now cached: the reactor answers, with the same count (HBase counts
        // cached blocks as scanned too).
        let inline = fx.get_on_reactor(ctx, &asked).expect("on the reactor");
        assert_eq!(get_metrics(inline), Some(read));
    }
    // Not asked: none; an existence-only Get: none, as from HBase.
    let plain = hbase::Get {
        query_metrics_enabled: None,
        ..asked.clone()
    };
    assert_eq!(get_metrics(get(&fx.svc, &PB, &fx.target, &plain)), None);
    let exists = hbase::Get {
        existence_only: Some(true),
        ..asked.clone()
    };
    assert_eq!(get_metrics(get(&fx.svc, &PB, &fx.target, &exists)), None);
    // A Get inside a Multi reports in its result too.
    let req = hbase::MultiRequest {
        region_action: vec![region_action(
            "r",
            vec![
                action(0, None, Some(asked.clone())),
                action(1, None, Some(plain)),
            ],
        )],
        ..Default::default()
    };
    let (resp, _) = multi(&fx.svc, &PB, &req, Bytes::new(), fx.resolve());
    let metrics: Vec<Option<u64>> = resp.region_action_result[0]
        .result_or_exception
        .iter()
        .map(|r| {
            r.result
                .as_ref()
                .expect("result")
                .metrics
                .as_ref()
                .and_then(|m| m.block_bytes_scanned)
        })
        .collect();
    assert!(metrics[0].is_some_and(|n| n > 0), "{metrics:?}");
    assert_eq!(metrics[1], None);
}
