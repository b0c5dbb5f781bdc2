//! Meta as the Java client reads it, over a real region server.

use super::*;
use crate::hbase::master_service::test_support::{create, create_namespace, Fixture};
use crate::hbase::names::region_name;
use bytes::Bytes;

fn b(s: &[u8]) -> Bytes {
    Bytes::copy_from_slice(s)
}

/// The RegionInfo in a row's `info:regioninfo` (which must carry the PBUF magic).
fn region_info(cells: &[Cell]) -> hbase::RegionInfo {
    let cell = cells
        .iter()
        .find(|c| &c.family[..] == b"info" && &c.qualifier[..] == b"regioninfo")
        .expect("info:regioninfo");
    assert_eq!(&cell.value[..4], b"PBUF");
    hbase::RegionInfo::decode(&cell.value[4..]).expect("RegionInfo decodes")
}

fn value<'a>(cells: &'a [Cell], family: &str, qualifier: &str) -> Option<&'a [u8]> {
    cells
        .iter()
        .find(|c| &c.family[..] == family.as_bytes() && &c.qualifier[..] == qualifier.as_bytes())
        .map(|c| &c.value[..])
}

/// The Java client's locate: a reversed scan from `<table>,<row>,99999999999999` down to
/// `<table>,,` (inclusive), family `info`, first row.
fn locate(f: &Fixture, table: &str, row: &[u8]) -> Option<Vec<Cell>> {
    let mut start = format!("{table},").into_bytes();
    start.extend_from_slice(row);
    start.extend_from_slice(b",99999999999999");
    let scan = MetaScan {
        start: Bytes::from(start),
        include_start: true,
        stop: Bytes::from(format!("{table},,")),
        include_stop: true,
        reversed: true,
        families: vec![b(b"info")],
        limit: 1,
        ..Default::default()
    };
    super::scan(&f.svc, &scan).expect("scan").into_iter().next()
}

#[test]
fn the_locate_scan_finds_the_region_holding_each_row() {
    let f = Fixture::new();
    create(&f, "t", &[b"g", b"p", b"p\x00,x"]).expect("create t");
    // Neighbours whose rows sort next to t's in meta.
    create(&f, "t2", &[b"a"]).expect("create t2");
    create(&f, "s", &[]).expect("create s");
    create_namespace(&f, "ns");
    create(&f, "ns:t", &[]).expect("create ns:t");
    for (row, want_start, want_end) in [
        (&b""[..], &b""[..], &b"g"[..]),
        (b"a", b"", b"g"),
        (b"f\xff\xff", b"", b"g"),
        (b"g", b"g", b"p"),
        (b"g,x,y", b"g", b"p"),
        (b"o", b"g", b"p"),
        (b"p", b"p", b"p\x00,x"),
        (b"p\x00", b"p", b"p\x00,x"),
        (b"p\x00,x", b"p\x00,x", b""),
        (b"zzzz", b"p\x00,x", b""),
        (b"\xff\xff", b"p\x00,x", b""),
    ] {
        let cells = locate(&f, "t", row).unwrap_or_else(|| panic!("row {row:?} located"));
        let info = region_info(&cells);
        assert_eq!(
            (
                &info.start_key.clone().unwrap_or_default()[..],
                &info.end_key.clone().unwrap_or_default()[..]
            ),
            (want_start, want_end),
            "row {row:?}"
        );
        assert_eq!(&info.table_name.namespace[..], b"default");
        assert_eq!(&info.table_name.qualifier[..], b"t");
        // The row key is the name the client recomputes from the RegionInfo.
        let want_name = region_name("t", want_start, info.region_id);
        assert_eq!(cells[0].row, want_name, "row {row:?}");
        assert_eq!(
            value(&cells, "info", "server"),
            Some(&b"127.0.0.1:16020"[..])
        );
        assert_eq!(
            value(&cells, "info", "serverstartcode"),
            Some(&f.svc.start_code.to_be_bytes()[..])
        );
        assert_eq!(value(&cells, "info", "state"), Some(&b"OPEN"[..]));
        assert!(cells.iter().all(|c| &c.family[..] == b"info"));
    }
    let ns = locate(&f, "ns:t", b"x").expect("ns:t located");
    assert_eq!(&region_info(&ns).table_name.namespace[..], b"ns");
    assert!(
        locate(&f, "nosuch", b"x").is_none(),
        "unknown tables have no rows"
    );
}

#[test]
fn forward_scan_lists_a_tables_regions_in_order_and_daughters_replace_parents() {
    let f = Fixture::new();
    create(&f, "t", &[b"g", b"p"]).expect("create t");
    create(&f, "t-x", &[]).expect("create t-x");
    // HBase's own range for a table's regions: `<t>,,` to `<t> ,,`.
    let regions = |f: &Fixture| {
        let scan = MetaScan {
            start: b(b"t,,"),
            include_start: true,
            stop: b(b"t ,,"),
            ..Default::default()
        };
        super::scan(&f.svc, &scan)
            .expect("scan")
            .iter()
            .map(|cells| region_info(cells).start_key.unwrap_or_default())
            .collect::<Vec<_>>()
    };
    assert_eq!(regions(&f), vec![b(b""), b(b"g"), b(b"p")]);
    f.svc
        .master()
        .expect("a master")
        .split_table("t", Some(b(b"m")))
        .expect("split at m");
    assert_eq!(regions(&f), vec![b(b""), b(b"g"), b(b"m"), b(b"p")]);
    let m = locate(&f, "t", b"mm").expect("daughter located");
    assert_eq!(region_info(&m).start_key, Some(b(b"m")));
    assert!(region_info(&m).split != Some(true) && region_info(&m).offline != Some(true));
}

#[test]
fn table_state_rows_follow_the_table() {
    let f = Fixture::new();
    create(&f, "t", &[b"k"]).expect("create");
    let state = |f: &Fixture| {
        let cells = super::get(&f.svc, b"t", &[], &[(b(b"table"), b(b"state"))]).expect("get");
        assert!(cells.len() <= 1);
        // No PBUF magic: the client parses TableState directly.
        cells.first().map(|c| {
            hbase::TableState::decode(&c.value[..])
                .expect("TableState decodes")
                .state
        })
    };
    assert_eq!(state(&f), Some(hbase::table_state::State::Enabled as i32));
    // The encoded value is never empty: ENABLED (0) is written, as `required` demands.
    let raw = super::get(&f.svc, b"t", &[b(b"table")], &[]).expect("get");
    assert_eq!(&raw[0].value[..], &[0x08, 0x00][..]);
    f.svc
        .master()
        .expect("a master")
        .disable_table("t")
        .expect("disable");
    assert_eq!(state(&f), Some(hbase::table_state::State::Disabled as i32));
    let closed = locate(&f, "t", b"z").expect("a disabled table keeps its region rows");
    assert_eq!(value(&closed, "info", "state"), Some(&b"CLOSED"[..]));
    f.svc
        .master()
        .expect("a master")
        .delete_table("t")
        .expect("delete");
    assert_eq!(state(&f), None);
    assert!(locate(&f, "t", b"z").is_none());
    // Cellar's own meta and system tables never show.
    assert!(super::get(&f.svc, b"hbase:meta", &[], &[])
        .expect("get")
        .is_empty());
}

#[test]
fn selection_filter_and_limit() {
    use cellar_model::filter::Filter;
    let f = Fixture::new();
    create(&f, "a", &[b"m"]).expect("create a");
    create(&f, "b", &[]).expect("create b");
    let all = super::scan(&f.svc, &MetaScan::default()).expect("scan");
    // a, a's 2 regions, b, b's region: table rows first, each before its regions.
    assert_eq!(all.len(), 5);
    assert_eq!(&all[0][0].row[..], b"a");
    assert_eq!(&all[3][0].row[..], b"b");
    for row in &all {
        let quals: Vec<_> = row
            .iter()
            .map(|c| (c.family.clone(), c.qualifier.clone()))
            .collect();
        let mut sorted = quals.clone();
        sorted.sort();
        assert_eq!(quals, sorted, "cells in HBase's order");
    }
    let narrowed = super::scan(
        &f.svc,
        &MetaScan {
            families: vec![b(b"info")],
            columns: vec![(b(b"info"), b(b"server"))],
            ..Default::default()
        },
    )
    .expect("scan");
    assert_eq!(narrowed.len(), 3, "table rows have no info cells");
    assert!(narrowed
        .iter()
        .all(|r| r.len() == 1 && &r[0].qualifier[..] == b"server"));
    let filtered = super::scan(
        &f.svc,
        &MetaScan {
            filter: Some(Filter::Prefix(b(b"a,"))),
            limit: 1,
            reversed: true,
            ..Default::default()
        },
    )
    .expect("scan");
    assert_eq!(filtered.len(), 1);
    assert_eq!(
        region_info(&filtered[0]).start_key,
        Some(b(b"m")),
        "reversed: last first"
    );
    let exclusive = super::scan(
        &f.svc,
        &MetaScan {
            start: b(b"a"),
            include_start: false,
            stop: b(b"b"),
            include_stop: false,
            ..Default::default()
        },
    )
    .expect("scan");
    assert_eq!(exclusive.len(), 2, "a's regions only");
}
