//! Mutate: puts, deletes, increments, appends, checkAndMutate, and the plain put the reactor
//! applies.

use super::*;

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
