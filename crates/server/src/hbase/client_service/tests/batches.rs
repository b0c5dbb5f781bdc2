//! Multi: plain region actions action by action, atomic and conditional ones as one row
//! mutation.

use super::*;

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
