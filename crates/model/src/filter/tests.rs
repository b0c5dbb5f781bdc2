use super::*;
use crate::cell::CellType;

fn b(s: &[u8]) -> Bytes {
    Bytes::copy_from_slice(s)
}

fn cell(row: &str, fam: &str, q: &str, ts: u64, v: &[u8]) -> Cell {
    Cell {
        row: b(row.as_bytes()),
        family: b(fam.as_bytes()),
        qualifier: b(q.as_bytes()),
        timestamp: ts,
        cell_type: CellType::Put,
        seq_id: 1,
        value: b(v),
    }
}

/// A row with cf:a (two versions), cf:b, cf:c and other:a.
fn row(key: &str) -> Vec<Cell> {
    vec![
        cell(key, "cf", "a", 20, b"new"),
        cell(key, "cf", "a", 10, b"old"),
        cell(key, "cf", "b", 10, b"Yellow"),
        cell(key, "cf", "c", 10, b"xyz"),
        cell(key, "other", "a", 10, b"o"),
    ]
}

/// `(family:qualifier@ts=value)` of each surviving cell, or `None` for a dropped row.
fn run(f: &Filter, cells: Vec<Cell>) -> Option<Vec<String>> {
    FilterEval::new(f).filter_row(cells).map(describe)
}

fn describe(cells: Vec<Cell>) -> Vec<String> {
    cells
        .iter()
        .map(|c| {
            format!(
                "{}:{}@{}={}",
                String::from_utf8_lossy(&c.family),
                String::from_utf8_lossy(&c.qualifier),
                c.timestamp,
                String::from_utf8_lossy(&c.value)
            )
        })
        .collect()
}

fn all(key: &str) -> Option<Vec<String>> {
    Some(describe(row(key)))
}

fn qual(op: CompareOp, q: &str) -> Filter {
    Filter::Qualifier(op, Comparator::Binary(b(q.as_bytes())))
}

fn scv(op: CompareOp, v: &str, if_missing: bool, latest: bool) -> Filter {
    Filter::SingleColumnValue {
        family: b(b"cf"),
        qualifier: b(b"a"),
        op,
        comparator: Comparator::Binary(b(v.as_bytes())),
        filter_if_missing: if_missing,
        latest_version_only: latest,
    }
}

fn range(start: &str, si: bool, stop: &str, so: bool) -> RowRange {
    RowRange {
        start: b(start.as_bytes()),
        start_inclusive: si,
        stop: b(stop.as_bytes()),
        stop_inclusive: so,
    }
}

#[test]
fn empty_rows_are_dropped_even_without_conditions() {
    let f = Filter::List(ListOp::MustPassAll, vec![]);
    assert_eq!(run(&f, vec![]), None);
    assert_eq!(run(&f, row("r")), all("r"));
    let f = Filter::List(ListOp::MustPassOne, vec![]);
    assert_eq!(run(&f, row("r")), all("r"));
}

#[test]
fn prefix_and_row_filters_keep_or_drop_whole_rows() {
    let f = Filter::Prefix(b(b"ab"));
    assert_eq!(run(&f, row("abc")), all("abc"));
    assert_eq!(run(&f, row("ac")), None);
    assert_eq!(run(&f, row("a")), None);

    let f = Filter::Row(CompareOp::GreaterOrEqual, Comparator::Binary(b(b"m")));
    assert_eq!(run(&f, row("m")), all("m"));
    assert_eq!(run(&f, row("z")), all("z"));
    assert_eq!(run(&f, row("l")), None);

    let f = Filter::Row(CompareOp::Less, Comparator::BinaryPrefix(b(b"r2")));
    assert_eq!(run(&f, row("r1999")), all("r1999"));
    assert_eq!(run(&f, row("r2000")), None);

    let f = Filter::Row(CompareOp::Equal, Comparator::Regex("^user[0-9]+$".into()));
    assert_eq!(run(&f, row("user42")), all("user42"));
    assert_eq!(run(&f, row("user4x")), None);
}

#[test]
fn row_ranges_respect_inclusivity_and_open_ends() {
    let f = Filter::RowRanges(vec![
        range("b", true, "d", false),
        range("m", false, "p", true),
    ]);
    for (key, pass) in [
        ("a", false),
        ("b", true),
        ("c", true),
        ("d", false),
        ("m", false),
        ("m0", true),
        ("p", true),
        ("p0", false),
    ] {
        assert_eq!(run(&f, row(key)).is_some(), pass, "row {key}");
    }
    let open = Filter::RowRanges(vec![
        range("", true, "c", false),
        range("x", true, "", false),
    ]);
    assert!(run(&open, row("")).is_some());
    assert!(run(&open, row("a")).is_some());
    assert!(run(&open, row("k")).is_none());
    assert!(run(&open, row("zzz")).is_some());
    assert_eq!(run(&Filter::RowRanges(vec![]), row("a")), None);
}

#[test]
fn single_column_value_tests_the_newest_version_by_default() {
    // Newest cf:a is "new", the older one "old".
    assert_eq!(
        run(&scv(CompareOp::Equal, "new", false, true), row("r")),
        all("r")
    );
    assert_eq!(
        run(&scv(CompareOp::Equal, "old", false, true), row("r")),
        None
    );
    // Value compared to the operand: "new" < "p".
    assert_eq!(
        run(&scv(CompareOp::Less, "p", false, true), row("r")),
        all("r")
    );
    assert_eq!(
        run(&scv(CompareOp::Greater, "p", false, true), row("r")),
        None
    );
    // Any version may match when latest_version_only is off.
    assert_eq!(
        run(&scv(CompareOp::Equal, "old", false, false), row("r")),
        all("r")
    );
    assert_eq!(
        run(&scv(CompareOp::Equal, "none", false, false), row("r")),
        None
    );
}

#[test]
fn single_column_value_missing_column_passes_unless_filter_if_missing() {
    let without_a: Vec<Cell> = row("r")
        .into_iter()
        .filter(|c| c.qualifier != "a")
        .collect();
    let expected = Some(describe(without_a.clone()));
    assert_eq!(
        run(&scv(CompareOp::Equal, "x", false, true), without_a.clone()),
        expected
    );
    assert_eq!(
        run(&scv(CompareOp::Equal, "x", true, true), without_a),
        None
    );
    // other:a is a different column: it does not count as cf:a.
    let only_other = vec![cell("r", "other", "a", 1, b"new")];
    assert_eq!(
        run(&scv(CompareOp::Equal, "new", true, true), only_other),
        None
    );
}

#[test]
fn column_prefix_and_range_trim_cells() {
    let cells = vec![
        cell("r", "cf", "a", 1, b"1"),
        cell("r", "cf", "ab", 1, b"2"),
        cell("r", "cf", "b", 1, b"3"),
        cell("r", "cf", "c", 1, b"4"),
        cell("r", "cf", "d", 1, b"5"),
    ];
    let quals = |f: &Filter| -> Vec<String> {
        FilterEval::new(f)
            .filter_row(cells.clone())
            .map(|cs| {
                cs.iter()
                    .map(|c| String::from_utf8_lossy(&c.qualifier).into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(quals(&Filter::ColumnPrefix(b(b"a"))), ["a", "ab"]);
    assert!(quals(&Filter::ColumnPrefix(b(b"z"))).is_empty());
    let cr = |min: Option<&str>, mi, max: Option<&str>, ma| Filter::ColumnRange {
        min: min.map(|s| b(s.as_bytes())),
        min_inclusive: mi,
        max: max.map(|s| b(s.as_bytes())),
        max_inclusive: ma,
    };
    assert_eq!(
        quals(&cr(Some("a"), true, Some("c"), false)),
        ["a", "ab", "b"]
    );
    assert_eq!(
        quals(&cr(Some("a"), false, Some("c"), true)),
        ["ab", "b", "c"]
    );
    assert_eq!(quals(&cr(None, false, Some("b"), true)), ["a", "ab", "b"]);
    assert_eq!(quals(&cr(Some("c"), true, None, false)), ["c", "d"]);
    assert!(quals(&cr(Some("x"), true, None, false)).is_empty());
}

#[test]
fn qualifier_family_and_value_filters_trim_cells() {
    assert_eq!(
        run(&qual(CompareOp::Equal, "a"), row("r")),
        Some(vec![
            "cf:a@20=new".into(),
            "cf:a@10=old".into(),
            "other:a@10=o".into()
        ])
    );
    assert_eq!(
        run(&qual(CompareOp::Greater, "a"), row("r")),
        Some(vec!["cf:b@10=Yellow".into(), "cf:c@10=xyz".into()])
    );
    let fam = Filter::Family(CompareOp::NotEqual, Comparator::Binary(b(b"cf")));
    assert_eq!(run(&fam, row("r")), Some(vec!["other:a@10=o".into()]));
    let val = Filter::Value(CompareOp::Equal, Comparator::Substring("LLO".into()));
    assert_eq!(run(&val, row("r")), Some(vec!["cf:b@10=Yellow".into()]));
    let val = Filter::Value(CompareOp::Equal, Comparator::Regex("^[a-z]{3}$".into()));
    assert_eq!(
        run(&val, row("r")),
        Some(vec![
            "cf:a@20=new".into(),
            "cf:a@10=old".into(),
            "cf:c@10=xyz".into()
        ])
    );
    let none = Filter::Value(CompareOp::Equal, Comparator::Binary(b(b"nothing")));
    assert_eq!(run(&none, row("r")), None);
}

#[test]
fn key_only_strips_values_or_replaces_them_with_their_length() {
    let out = FilterEval::new(&Filter::KeyOnly {
        len_as_value: false,
    })
    .filter_row(row("r"))
    .expect("row kept");
    assert_eq!(out.len(), 5);
    assert!(out.iter().all(|c| c.value.is_empty()));
    assert_eq!(out[0].qualifier, "a");
    assert_eq!(out[0].timestamp, 20);
    let out = FilterEval::new(&Filter::KeyOnly { len_as_value: true })
        .filter_row(row("r"))
        .expect("row kept");
    assert_eq!(&out[2].value[..], &6u32.to_be_bytes()[..]);
    assert_eq!(&out[4].value[..], &1u32.to_be_bytes()[..]);
}

#[test]
fn first_key_only_keeps_the_first_cell() {
    assert_eq!(
        run(&Filter::FirstKeyOnly, row("r")),
        Some(vec!["cf:a@20=new".into()])
    );
}

#[test]
fn page_passes_n_rows_then_reports_all_remaining_filtered() {
    let mut eval = FilterEval::new(&Filter::Page(2));
    assert!(!eval.all_remaining_filtered());
    assert!(eval.filter_row(row("a")).is_some());
    assert!(
        eval.filter_row(vec![]).is_none(),
        "empty rows are not counted"
    );
    assert!(!eval.all_remaining_filtered());
    assert!(eval.filter_row(row("b")).is_some());
    assert!(eval.all_remaining_filtered());
    assert!(eval.filter_row(row("c")).is_none());

    let mut zero = FilterEval::new(&Filter::Page(0));
    assert!(zero.all_remaining_filtered());
    assert!(zero.filter_row(row("a")).is_none());
}

#[test]
fn page_in_an_and_list_counts_only_rows_that_pass_the_whole_list() {
    let f = Filter::List(
        ListOp::MustPassAll,
        vec![Filter::Page(2), Filter::Prefix(b(b"k"))],
    );
    let mut eval = FilterEval::new(&f);
    assert!(eval.filter_row(row("a")).is_none());
    assert!(eval.filter_row(row("b")).is_none());
    assert!(eval.filter_row(row("k1")).is_some());
    assert!(!eval.all_remaining_filtered());
    assert!(eval.filter_row(row("x")).is_none());
    assert!(eval.filter_row(row("k2")).is_some());
    assert!(eval.all_remaining_filtered());
    assert!(eval.filter_row(row("k3")).is_none());
}

#[test]
fn page_in_an_or_list_stops_only_its_own_branch() {
    let f = Filter::List(
        ListOp::MustPassOne,
        vec![Filter::Page(1), Filter::Prefix(b(b"k"))],
    );
    let mut eval = FilterEval::new(&f);
    assert!(eval.filter_row(row("a")).is_some());
    assert!(eval.filter_row(row("b")).is_none());
    assert!(eval.filter_row(row("k")).is_some());
    assert!(!eval.all_remaining_filtered());
    let both = Filter::List(ListOp::MustPassOne, vec![Filter::Page(1), Filter::Page(2)]);
    let mut eval = FilterEval::new(&both);
    assert!(eval.filter_row(row("a")).is_some());
    assert!(eval.filter_row(row("b")).is_some());
    assert!(eval.all_remaining_filtered());
    assert!(eval.filter_row(row("c")).is_none());
}

#[test]
fn and_list_intersects_cells_and_requires_every_row_filter() {
    let f = Filter::List(
        ListOp::MustPassAll,
        vec![
            Filter::Prefix(b(b"r")),
            Filter::Family(CompareOp::Equal, Comparator::Binary(b(b"cf"))),
            qual(CompareOp::GreaterOrEqual, "b"),
        ],
    );
    assert_eq!(
        run(&f, row("r1")),
        Some(vec!["cf:b@10=Yellow".into(), "cf:c@10=xyz".into()])
    );
    assert_eq!(run(&f, row("s1")), None);
    // Cell filters that leave nothing drop the row.
    let f = Filter::List(
        ListOp::MustPassAll,
        vec![qual(CompareOp::Equal, "b"), qual(CompareOp::Equal, "c")],
    );
    assert_eq!(run(&f, row("r")), None);
}

#[test]
fn and_list_runs_members_in_order_over_survivors() {
    // FirstKeyOnly after a qualifier filter keeps the first matching cell...
    let f = Filter::List(
        ListOp::MustPassAll,
        vec![qual(CompareOp::Equal, "b"), Filter::FirstKeyOnly],
    );
    assert_eq!(run(&f, row("r")), Some(vec!["cf:b@10=Yellow".into()]));
    // ...before it, the first cell of the row, which the qualifier filter then drops.
    let f = Filter::List(
        ListOp::MustPassAll,
        vec![Filter::FirstKeyOnly, qual(CompareOp::Equal, "b")],
    );
    assert_eq!(run(&f, row("r")), None);
    // KeyOnly in the list: value filters still see the real values.
    let f = Filter::List(
        ListOp::MustPassAll,
        vec![
            Filter::KeyOnly {
                len_as_value: false,
            },
            Filter::Value(CompareOp::Equal, Comparator::Binary(b(b"xyz"))),
        ],
    );
    assert_eq!(run(&f, row("r")), Some(vec!["cf:c@10=".into()]));
}

#[test]
fn or_list_unites_cells_and_passes_rows_any_member_passes() {
    let f = Filter::List(
        ListOp::MustPassOne,
        vec![Filter::Prefix(b(b"a")), qual(CompareOp::Equal, "c")],
    );
    assert_eq!(run(&f, row("a1")), all("a1"));
    assert_eq!(run(&f, row("b1")), Some(vec!["cf:c@10=xyz".into()]));
    let f = Filter::List(
        ListOp::MustPassOne,
        vec![qual(CompareOp::Equal, "b"), qual(CompareOp::Equal, "c")],
    );
    assert_eq!(
        run(&f, row("r")),
        Some(vec!["cf:b@10=Yellow".into(), "cf:c@10=xyz".into()])
    );
    let f = Filter::List(
        ListOp::MustPassOne,
        vec![
            Filter::Prefix(b(b"x")),
            scv(CompareOp::Equal, "zzz", true, true),
        ],
    );
    assert_eq!(run(&f, row("r")), None);
}

#[test]
fn nested_lists_transform_only_the_cells_their_branch_kept() {
    // (q = b AND KeyOnly) OR q = c: b loses its value, c keeps it, the rest goes.
    let f = Filter::List(
        ListOp::MustPassOne,
        vec![
            Filter::List(
                ListOp::MustPassAll,
                vec![
                    qual(CompareOp::Equal, "b"),
                    Filter::KeyOnly { len_as_value: true },
                ],
            ),
            qual(CompareOp::Equal, "c"),
        ],
    );
    let out = FilterEval::new(&f).filter_row(row("r")).expect("kept");
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].qualifier, "b");
    assert_eq!(&out[0].value[..], &6u32.to_be_bytes()[..]);
    assert_eq!(&out[1].value[..], b"xyz");

    // prefix r AND (family other OR (q = b AND value contains "ell")).
    let f = Filter::List(
        ListOp::MustPassAll,
        vec![
            Filter::Prefix(b(b"r")),
            Filter::List(
                ListOp::MustPassOne,
                vec![
                    Filter::Family(CompareOp::Equal, Comparator::Binary(b(b"other"))),
                    Filter::List(
                        ListOp::MustPassAll,
                        vec![
                            qual(CompareOp::Equal, "b"),
                            Filter::Value(CompareOp::Equal, Comparator::Substring("ELL".into())),
                        ],
                    ),
                ],
            ),
        ],
    );
    assert_eq!(
        run(&f, row("r9")),
        Some(vec!["cf:b@10=Yellow".into(), "other:a@10=o".into()])
    );
    assert_eq!(run(&f, row("q9")), None);
}

#[test]
fn validate_names_bad_regexes_anywhere_in_the_tree() {
    assert!(
        Filter::Value(CompareOp::Equal, Comparator::Regex("a+".into()))
            .validate()
            .is_ok()
    );
    let bad = Filter::List(
        ListOp::MustPassAll,
        vec![
            Filter::Prefix(b(b"r")),
            Filter::List(
                ListOp::MustPassOne,
                vec![Filter::Qualifier(
                    CompareOp::Equal,
                    Comparator::Regex("[z-a".into()),
                )],
            ),
        ],
    );
    let err = bad.validate().expect_err("bad regex").to_string();
    assert!(
        err.contains("[z-a") && err.contains("invalid argument"),
        "{err}"
    );
    // Evaluating it anyway matches nothing rather than panicking.
    assert_eq!(run(&bad, row("r")), None);
}

#[test]
fn column_page_keeps_one_page_of_columns_one_version_each() {
    let page = |limit, offset| Filter::ColumnPage {
        limit,
        offset,
        column_offset: None,
    };
    let got = |f: &Filter| run(f, row("r"));
    // Columns in order: cf:a (two versions), cf:b, cf:c, other:a.
    assert_eq!(
        got(&page(2, 0)),
        Some(vec!["cf:a@20=new".into(), "cf:b@10=Yellow".into()])
    );
    assert_eq!(
        got(&page(2, 2)),
        Some(vec!["cf:c@10=xyz".into(), "other:a@10=o".into()])
    );
    assert_eq!(got(&page(10, 3)), Some(vec!["other:a@10=o".into()]));
    assert_eq!(got(&page(1, 4)), None, "no column left: the row is dropped");
    assert_eq!(got(&page(0, 0)), None);
    // From a qualifier on: b and c of cf, then other:a is past the limit.
    let from_b = Filter::ColumnPage {
        limit: 2,
        offset: 0,
        column_offset: Some(b(b"b")),
    };
    assert_eq!(
        got(&from_b),
        Some(vec!["cf:b@10=Yellow".into(), "cf:c@10=xyz".into()])
    );
    // Counting restarts with each row, and only cells earlier filters kept are counted.
    let mut eval = FilterEval::new(&page(1, 0));
    assert_eq!(eval.filter_row(row("r1")).map(|c| c.len()), Some(1));
    assert_eq!(eval.filter_row(row("r2")).map(|c| c.len()), Some(1));
    let after_b = Filter::List(
        ListOp::MustPassAll,
        vec![qual(CompareOp::Greater, "a"), page(1, 0)],
    );
    assert_eq!(got(&after_b), Some(vec!["cf:b@10=Yellow".into()]));
}

#[test]
fn skip_drops_a_row_when_its_inner_filter_drops_any_cell() {
    let not_yellow = |v: &str| {
        Filter::Skip(Box::new(Filter::Value(
            CompareOp::NotEqual,
            Comparator::Binary(b(v.as_bytes())),
        )))
    };
    assert_eq!(run(&not_yellow("Yellow"), row("r")), None);
    assert_eq!(run(&not_yellow("Blue"), row("r")), all("r"));
    // The inner filter's transforms carry through.
    let keys = Filter::Skip(Box::new(Filter::KeyOnly {
        len_as_value: false,
    }));
    let kept = run(&keys, row("r")).expect("kept");
    assert!(kept.iter().all(|c| c.ends_with('=')), "{kept:?}");
    assert!(not_yellow("(").validate().is_ok());
    let bad_regex = Filter::Skip(Box::new(Filter::Row(
        CompareOp::Equal,
        Comparator::Regex("(".into()),
    )));
    assert!(bad_regex.validate().is_err(), "the inner filter is checked");
}

#[test]
fn while_match_ends_at_the_first_cell_its_inner_filter_drops() {
    let below = |r: &str| {
        Filter::WhileMatch(Box::new(Filter::Row(
            CompareOp::Less,
            Comparator::Binary(b(r.as_bytes())),
        )))
    };
    let mut eval = FilterEval::new(&below("r2"));
    assert!(eval.filter_row(row("r1")).is_some());
    assert!(!eval.all_remaining_filtered());
    assert_eq!(
        eval.filter_row(row("r2")),
        None,
        "the first row the inner filter drops"
    );
    assert!(eval.all_remaining_filtered(), "the scan can stop");
    assert_eq!(
        eval.filter_row(row("r0")),
        None,
        "nothing passes after the end"
    );

    // A cell-level inner filter: that row keeps the cells before the first dropped one.
    let not_yellow = Filter::WhileMatch(Box::new(Filter::Value(
        CompareOp::NotEqual,
        Comparator::Binary(b(b"Yellow")),
    )));
    let mut eval = FilterEval::new(&not_yellow);
    assert_eq!(
        eval.filter_row(row("r1")).map(describe),
        Some(vec!["cf:a@20=new".into(), "cf:a@10=old".into()])
    );
    assert!(eval.all_remaining_filtered());
    assert!(Filter::WhileMatch(Box::new(Filter::Row(
        CompareOp::Equal,
        Comparator::Regex("(".into())
    )))
    .validate()
    .is_err());
}

#[test]
fn fuzzy_row_matches_fixed_positions_and_lets_the_others_be_anything() {
    let key = |k: &str, m: &[u8]| FuzzyKey {
        key: b(k.as_bytes()),
        mask: b(m),
    };
    // "??_2024": any two bytes, then "_2024".
    let f = Filter::FuzzyRow(vec![key("00_2024", &[1, 1, 0, 0, 0, 0, 0])]);
    assert_eq!(run(&f, row("ab_2024")), all("ab_2024"));
    assert_eq!(
        run(&f, row("zz_2024-more")),
        all("zz_2024-more"),
        "longer rows: the prefix"
    );
    assert_eq!(run(&f, row("ab_2023")), None);
    assert_eq!(run(&f, row("ab-2024")), None);
    // A shorter row is compared where it has bytes, as HBase does.
    assert_eq!(run(&f, row("ab_20")), all("ab_20"));
    // Any of several keys.
    let either = Filter::FuzzyRow(vec![key("a", &[0]), key("b", &[0])]);
    assert!(run(&either, row("b1")).is_some());
    assert!(run(&either, row("c1")).is_none());
    // Masks must fit their keys and hold 0s and 1s only.
    let short = Filter::FuzzyRow(vec![key("abc", &[0, 1])]);
    assert!(short.validate().is_err());
    let err = Filter::FuzzyRow(vec![key("ok", &[0, 0]), key("ab", &[0, 2])])
        .validate()
        .expect_err("bad mask");
    assert!(
        err.to_string().contains("fuzzy key 1: mask byte 1 is 2"),
        "{err}"
    );
}

#[test]
fn the_reads_version_count_applies_to_the_cells_the_filter_passes() {
    let eval = |f: &Filter, versions| {
        FilterEval::new(f)
            .versions(versions)
            .filter_row(row("r"))
            .map(describe)
    };
    // One version, and the newest does not match: the newest that does is returned.
    let old = Filter::Value(CompareOp::Equal, Comparator::Binary(b(b"old")));
    assert_eq!(eval(&old, 1), Some(vec!["cf:a@10=old".into()]));
    // Every cell passes: one version per column, the newest; each family's column counts alone.
    let any = Filter::Value(CompareOp::NotEqual, Comparator::Binary(b(b"nothing")));
    assert_eq!(
        eval(&any, 1),
        Some(vec![
            "cf:a@20=new".into(),
            "cf:b@10=Yellow".into(),
            "cf:c@10=xyz".into(),
            "other:a@10=o".into()
        ])
    );
    assert_eq!(eval(&any, 2), all("r"));
}

#[test]
fn timestamps_keep_the_listed_versions_and_a_one_version_read_gets_the_newest_of_them() {
    let ts = Filter::Timestamps(vec![10]);
    assert_eq!(
        run(&ts, row("r")),
        Some(vec![
            "cf:a@10=old".into(),
            "cf:b@10=Yellow".into(),
            "cf:c@10=xyz".into(),
            "other:a@10=o".into()
        ])
    );
    // cf:a's newest version (20) is not listed: the read of one version gets 10.
    let both = Filter::Timestamps(vec![20, 10]);
    let one = FilterEval::new(&both).versions(1).filter_row(row("r"));
    assert_eq!(
        one.map(describe).map(|c| c[0].clone()),
        Some("cf:a@20=new".into())
    );
    let one = FilterEval::new(&ts).versions(1).filter_row(row("r"));
    assert_eq!(
        one.map(describe).map(|c| c[0].clone()),
        Some("cf:a@10=old".into())
    );
    assert_eq!(run(&Filter::Timestamps(vec![15]), row("r")), None);
}

#[test]
fn column_count_keeps_a_rows_first_columns_and_ends_the_scan_at_a_longer_row() {
    // Enough columns: the row passes whole (newest versions only), and the scan goes on.
    let mut eval = FilterEval::new(&Filter::ColumnCount(4));
    assert_eq!(
        eval.filter_row(row("r1")).map(describe),
        Some(vec![
            "cf:a@20=new".into(),
            "cf:b@10=Yellow".into(),
            "cf:c@10=xyz".into(),
            "other:a@10=o".into()
        ])
    );
    assert!(!eval.all_remaining_filtered());
    // More columns than the limit: the first ones, then nothing more.
    let mut eval = FilterEval::new(&Filter::ColumnCount(2));
    assert_eq!(
        eval.filter_row(row("r1")).map(describe),
        Some(vec!["cf:a@20=new".into(), "cf:b@10=Yellow".into()])
    );
    assert!(eval.all_remaining_filtered());
    assert_eq!(eval.filter_row(row("r2")), None);
}
