use super::*;
use crate::hbase::exceptions::DO_NOT_RETRY;

fn f(class: &str, m: &impl Message) -> hbase::Filter {
    hbase::Filter {
        name: format!("{PACKAGE}{class}"),
        serialized_filter: Some(m.encode_to_vec().into()),
    }
}

fn binary(v: &str) -> hbase::Comparator {
    hbase::Comparator {
        name: format!("{PACKAGE}BinaryComparator"),
        serialized_comparator: Some(
            hbase::BinaryComparator {
                comparable: hbase::ByteArrayComparable {
                    value: Some(Bytes::copy_from_slice(v.as_bytes())),
                },
            }
            .encode_to_vec()
            .into(),
        ),
    }
}

fn regex(pattern: &str, flags: i32) -> hbase::Comparator {
    hbase::Comparator {
        name: format!("{PACKAGE}RegexStringComparator"),
        serialized_comparator: Some(
            hbase::RegexStringComparator {
                pattern: pattern.into(),
                pattern_flags: flags,
                charset: "UTF-8".into(),
                engine: None,
            }
            .encode_to_vec()
            .into(),
        ),
    }
}

fn cmp(op: hbase::CompareType, c: hbase::Comparator) -> hbase::CompareFilter {
    hbase::CompareFilter {
        compare_op: op as i32,
        comparator: Some(c),
    }
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

#[test]
fn each_filter_class_maps_to_its_model_filter() {
    use hbase::CompareType as T;
    let scv = hbase::SingleColumnValueFilter {
        column_family: Some(b("cf")),
        column_qualifier: Some(b("q")),
        compare_op: T::GreaterOrEqual as i32,
        comparator: binary("5"),
        filter_if_missing: Some(true),
        latest_version_only: None,
    };
    let cases: Vec<(hbase::Filter, Filter)> = vec![
        (
            f(
                "PrefixFilter",
                &hbase::PrefixFilter {
                    prefix: Some(b("ab")),
                },
            ),
            Filter::Prefix(b("ab")),
        ),
        (
            f(
                "ColumnPrefixFilter",
                &hbase::ColumnPrefixFilter { prefix: b("q") },
            ),
            Filter::ColumnPrefix(b("q")),
        ),
        (
            f(
                "MultipleColumnPrefixFilter",
                &hbase::MultipleColumnPrefixFilter {
                    sorted_prefixes: vec![b("a"), b("b")],
                },
            ),
            Filter::List(
                ListOp::MustPassOne,
                vec![Filter::ColumnPrefix(b("a")), Filter::ColumnPrefix(b("b"))],
            ),
        ),
        (
            f(
                "ColumnRangeFilter",
                &hbase::ColumnRangeFilter {
                    min_column: Some(b("a")),
                    min_column_inclusive: Some(true),
                    max_column: None,
                    max_column_inclusive: Some(false),
                },
            ),
            Filter::ColumnRange {
                min: Some(b("a")),
                min_inclusive: true,
                max: None,
                max_inclusive: false,
            },
        ),
        (
            f(
                "RowFilter",
                &hbase::RowFilter {
                    compare_filter: cmp(T::Less, binary("m")),
                },
            ),
            Filter::Row(CompareOp::Less, Comparator::Binary(b("m"))),
        ),
        (
            f(
                "FamilyFilter",
                &hbase::FamilyFilter {
                    compare_filter: cmp(T::Equal, binary("cf")),
                },
            ),
            Filter::Family(CompareOp::Equal, Comparator::Binary(b("cf"))),
        ),
        (
            f(
                "QualifierFilter",
                &hbase::QualifierFilter {
                    compare_filter: cmp(T::Greater, binary("q")),
                },
            ),
            Filter::Qualifier(CompareOp::Greater, Comparator::Binary(b("q"))),
        ),
        (
            f(
                "ValueFilter",
                &hbase::ValueFilter {
                    compare_filter: cmp(
                        T::NotEqual,
                        hbase::Comparator {
                            name: format!("{PACKAGE}SubstringComparator"),
                            serialized_comparator: Some(
                                hbase::SubstringComparator { substr: "x".into() }
                                    .encode_to_vec()
                                    .into(),
                            ),
                        },
                    ),
                },
            ),
            Filter::Value(CompareOp::NotEqual, Comparator::Substring("x".into())),
        ),
        (
            f(
                "ValueFilter",
                &hbase::ValueFilter {
                    compare_filter: cmp(
                        T::Equal,
                        hbase::Comparator {
                            name: format!("{PACKAGE}BinaryPrefixComparator"),
                            serialized_comparator: Some(
                                hbase::BinaryPrefixComparator {
                                    comparable: hbase::ByteArrayComparable {
                                        value: Some(b("v")),
                                    },
                                }
                                .encode_to_vec()
                                .into(),
                            ),
                        },
                    ),
                },
            ),
            Filter::Value(CompareOp::Equal, Comparator::BinaryPrefix(b("v"))),
        ),
        (
            f(
                "RowFilter",
                &hbase::RowFilter {
                    compare_filter: cmp(T::Equal, regex("^r.$", DOTALL)),
                },
            ),
            Filter::Row(CompareOp::Equal, Comparator::Regex("^r.$".into())),
        ),
        (
            f(
                "RowFilter",
                &hbase::RowFilter {
                    compare_filter: cmp(T::Equal, regex("a.b", CASE_INSENSITIVE)),
                },
            ),
            Filter::Row(CompareOp::Equal, Comparator::Regex("(?i-s)a.b".into())),
        ),
        (
            f(
                "RowFilter",
                &hbase::RowFilter {
                    compare_filter: cmp(T::Equal, regex("a.b", LITERAL | DOTALL)),
                },
            ),
            Filter::Row(CompareOp::Equal, Comparator::Regex(r"a\.b".into())),
        ),
        (
            f("SingleColumnValueFilter", &scv),
            Filter::SingleColumnValue {
                family: b("cf"),
                qualifier: b("q"),
                op: CompareOp::GreaterOrEqual,
                comparator: Comparator::Binary(b("5")),
                filter_if_missing: true,
                latest_version_only: true,
            },
        ),
        (
            f("KeyOnlyFilter", &hbase::KeyOnlyFilter { len_as_val: true }),
            Filter::KeyOnly { len_as_value: true },
        ),
        (
            f("FirstKeyOnlyFilter", &hbase::FirstKeyOnlyFilter {}),
            Filter::FirstKeyOnly,
        ),
        (
            f("PageFilter", &hbase::PageFilter { page_size: 3 }),
            Filter::Page(3),
        ),
        (
            f(
                "MultiRowRangeFilter",
                &hbase::MultiRowRangeFilter {
                    row_range_list: vec![hbase::RowRange {
                        start_row: Some(b("a")),
                        start_row_inclusive: Some(false),
                        stop_row: Some(b("c")),
                        stop_row_inclusive: Some(true),
                    }],
                },
            ),
            Filter::RowRanges(vec![RowRange {
                start: b("a"),
                start_inclusive: false,
                stop: b("c"),
                stop_inclusive: true,
            }]),
        ),
        (
            f(
                "InclusiveStopFilter",
                &hbase::InclusiveStopFilter {
                    stop_row_key: Some(b("k")),
                },
            ),
            Filter::Row(CompareOp::LessOrEqual, Comparator::Binary(b("k"))),
        ),
        (
            f(
                "FilterList",
                &hbase::FilterList {
                    operator: hbase::filter_list::Operator::MustPassOne as i32,
                    filters: vec![
                        f(
                            "PrefixFilter",
                            &hbase::PrefixFilter {
                                prefix: Some(b("a")),
                            },
                        ),
                        f(
                            "FilterList",
                            &hbase::FilterList {
                                operator: hbase::filter_list::Operator::MustPassAll as i32,
                                filters: vec![f(
                                    "FirstKeyOnlyFilter",
                                    &hbase::FirstKeyOnlyFilter {},
                                )],
                            },
                        ),
                    ],
                },
            ),
            Filter::List(
                ListOp::MustPassOne,
                vec![
                    Filter::Prefix(b("a")),
                    Filter::List(ListOp::MustPassAll, vec![Filter::FirstKeyOnly]),
                ],
            ),
        ),
    ];
    for (proto, want) in cases {
        let got = checked_filter_from_hbase(&proto, false)
            .unwrap_or_else(|e| panic!("{} did not convert: {e}", proto.name));
        assert_eq!(got, want, "{}", proto.name);
    }
    // Reversed scans keep rows at or above the inclusive stop.
    let stop = f(
        "InclusiveStopFilter",
        &hbase::InclusiveStopFilter {
            stop_row_key: Some(b("k")),
        },
    );
    assert_eq!(
        checked_filter_from_hbase(&stop, true).expect("converts"),
        Filter::Row(CompareOp::GreaterOrEqual, Comparator::Binary(b("k")))
    );
    // The exclude variant drops exactly the tested column after the row test.
    let ex = f(
        "SingleColumnValueExcludeFilter",
        &hbase::SingleColumnValueExcludeFilter {
            single_column_value_filter: scv,
        },
    );
    match checked_filter_from_hbase(&ex, false).expect("converts") {
        Filter::List(ListOp::MustPassAll, members) => {
            assert!(matches!(members[0], Filter::SingleColumnValue { .. }));
            assert_eq!(members.len(), 2);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn unknown_classes_and_bad_patterns_are_named() {
    let unknown = hbase::Filter {
        name: "org.apache.hadoop.hbase.filter.DependentColumnFilter".into(),
        serialized_filter: None,
    };
    let e = checked_filter_from_hbase(&unknown, false).expect_err("unknown filter");
    assert_eq!(e.class, DO_NOT_RETRY);
    assert!(
        e.message
            .contains("org.apache.hadoop.hbase.filter.DependentColumnFilter"),
        "{}",
        e.message
    );
    // Nested inside a list too.
    let list = f(
        "FilterList",
        &hbase::FilterList {
            operator: 1,
            filters: vec![unknown],
        },
    );
    let e = checked_filter_from_hbase(&list, false).expect_err("nested unknown");
    assert!(e.message.contains("DependentColumnFilter"), "{}", e.message);
    let long = hbase::Comparator {
        name: format!("{PACKAGE}LongComparator"),
        serialized_comparator: None,
    };
    let e = checked_filter_from_hbase(
        &f(
            "ValueFilter",
            &hbase::ValueFilter {
                compare_filter: cmp(hbase::CompareType::Equal, long),
            },
        ),
        false,
    )
    .expect_err("unknown comparator");
    assert!(
        e.message
            .contains("org.apache.hadoop.hbase.filter.LongComparator"),
        "{}",
        e.message
    );
    let bad = f(
        "RowFilter",
        &hbase::RowFilter {
            compare_filter: cmp(hbase::CompareType::Equal, regex("(unclosed", DOTALL)),
        },
    );
    let e = checked_filter_from_hbase(&bad, false).expect_err("bad regex");
    assert_eq!(e.class, DO_NOT_RETRY);
    assert!(e.message.contains("(unclosed"), "{}", e.message);
    let garbage = hbase::Filter {
        name: format!("{PACKAGE}PageFilter"),
        serialized_filter: Some(Bytes::from_static(b"\xff\xff\xff")),
    };
    let e = checked_filter_from_hbase(&garbage, false).expect_err("garbage");
    assert!(e.message.contains("PageFilter"), "{}", e.message);
}

#[test]
fn column_pagination_and_skip_filters_map_and_bad_counts_are_refused() {
    let page = |limit, offset, column_offset: Option<&str>| {
        f(
            "ColumnPaginationFilter",
            &hbase::ColumnPaginationFilter {
                limit,
                offset,
                column_offset: column_offset.map(b),
            },
        )
    };
    assert_eq!(
        checked_filter_from_hbase(&page(3, Some(2), None), false).expect("maps"),
        Filter::ColumnPage {
            limit: 3,
            offset: 2,
            column_offset: None
        }
    );
    assert_eq!(
        checked_filter_from_hbase(&page(3, None, Some("q")), false).expect("maps"),
        Filter::ColumnPage {
            limit: 3,
            offset: 0,
            column_offset: Some(b("q"))
        }
    );
    let e = checked_filter_from_hbase(&page(-1, None, None), false).expect_err("negative");
    assert!(e.message.contains("limit -1"), "{}", e.message);

    let value = f(
        "ValueFilter",
        &hbase::ValueFilter {
            compare_filter: cmp(hbase::CompareType::NotEqual, binary("0")),
        },
    );
    let skip = f("SkipFilter", &hbase::SkipFilter { filter: value });
    assert_eq!(
        checked_filter_from_hbase(&skip, false).expect("maps"),
        Filter::Skip(Box::new(Filter::Value(
            CompareOp::NotEqual,
            Comparator::Binary(b("0"))
        )))
    );
    let bad = f(
        "SkipFilter",
        &hbase::SkipFilter {
            filter: f(
                "RowFilter",
                &hbase::RowFilter {
                    compare_filter: cmp(hbase::CompareType::Equal, regex("(", 0)),
                },
            ),
        },
    );
    assert!(
        checked_filter_from_hbase(&bad, false).is_err(),
        "the inner pattern is checked"
    );
}

#[test]
fn while_match_filter_maps_with_its_inner_filter() {
    let prefix = f(
        "PrefixFilter",
        &hbase::PrefixFilter {
            prefix: Some(b("r")),
        },
    );
    let w = f(
        "WhileMatchFilter",
        &hbase::WhileMatchFilter { filter: prefix },
    );
    assert_eq!(
        checked_filter_from_hbase(&w, false).expect("maps"),
        Filter::WhileMatch(Box::new(Filter::Prefix(b("r"))))
    );
}

#[test]
fn fuzzy_row_masks_are_read_in_each_form_the_client_sends() {
    let fuzzy = |mask: &[u8], v2: Option<bool>| {
        f(
            "FuzzyRowFilter",
            &hbase::FuzzyRowFilter {
                fuzzy_keys_data: vec![hbase::BytesBytesPair {
                    first: b("abc"),
                    second: Bytes::copy_from_slice(mask),
                }],
                is_mask_v2: v2,
            },
        )
    };
    let model = |mask: &[u8]| {
        Filter::FuzzyRow(vec![FuzzyKey {
            key: b("abc"),
            mask: Bytes::copy_from_slice(mask),
        }])
    };
    let got = |mask: &[u8], v2| checked_filter_from_hbase(&fuzzy(mask, v2), false);
    // As written: 0 fixed, 1 any.
    assert_eq!(got(&[0, 1, 0], None).expect("raw"), model(&[0, 1, 0]));
    // Preprocessed: 0xff fixed, 0 any; with is_mask_v2, 2 any.
    assert_eq!(got(&[0xff, 0, 0xff], None).expect("v1"), model(&[0, 1, 0]));
    assert_eq!(
        got(&[0xff, 2, 0xff], Some(true)).expect("v2"),
        model(&[0, 1, 0])
    );
    assert_eq!(
        got(&[0, 1, 0], Some(true)).expect("raw, v2"),
        model(&[0, 1, 0])
    );
    let e = got(&[0, 7, 0], None).expect_err("bad byte");
    assert!(
        e.message.contains("fuzzy key 0: mask byte 7"),
        "{}",
        e.message
    );
    let e = got(&[0, 1], None).expect_err("short mask");
    assert!(
        e.message.contains("the mask has 2 bytes for a key of 3"),
        "{}",
        e.message
    );
}

#[test]
fn column_count_get_filter_maps_its_limit_and_refuses_a_negative_one() {
    let count = |limit| {
        f(
            "ColumnCountGetFilter",
            &hbase::ColumnCountGetFilter { limit },
        )
    };
    assert_eq!(
        checked_filter_from_hbase(&count(3), false).expect("maps"),
        Filter::ColumnCount(3)
    );
    let e = checked_filter_from_hbase(&count(-2), false).expect_err("negative");
    assert!(e.message.contains("limit -2 is negative"), "{}", e.message);
}

#[test]
fn timestamps_filter_maps_its_timestamps_and_refuses_negative_ones() {
    let ts = |timestamps: Vec<i64>| {
        f(
            "TimestampsFilter",
            &hbase::TimestampsFilter {
                timestamps,
                can_hint: Some(true),
            },
        )
    };
    assert_eq!(
        checked_filter_from_hbase(&ts(vec![5, 2]), false).expect("maps"),
        Filter::Timestamps(vec![5, 2])
    );
    let e = checked_filter_from_hbase(&ts(vec![5, -1]), false).expect_err("negative");
    assert_eq!(e.class, DO_NOT_RETRY);
    assert!(
        e.message.contains("timestamp -1 is negative"),
        "{}",
        e.message
    );
}
