//! The seed corpora: small valid inputs for every target, made by Cellar's own encoders, in
//! the layouts of [`crate::targets`]. `cargo run --manifest-path fuzz/Cargo.toml --bin
//! make-seeds` writes them under `fuzz/corpus/<target>/`.

use crate::memfs::MemFs;
use bytes::{Bytes, BytesMut};
use cellar_model::filter::{Comparator, CompareOp, Condition, Filter, ListOp};
use cellar_model::key::make_key;
use cellar_model::{
    BloomType, CellType, Compression, FamilySchema, Get, RowMutation, Scan, TableSchema,
};
use cellar_proto::{cellblock, convert, frame, hbase, hbase_wire, pb};
use cellar_storage::fs::FsRef;
use cellar_storage::fuzzing::{region_descriptor, store_files, wal_segment};
use cellar_storage::region::{wal_payload, RegionInfo};
use cellar_storage::storefile::{StoreFileOptions, StoreFileWriter};
use prost::Message;
use std::path::Path;

/// One seed: target, file name, bytes.
pub type Seed = (&'static str, String, Vec<u8>);

/// Every seed of every target.
pub fn all() -> Vec<Seed> {
    let mut out = Vec::new();
    native(&mut out);
    hbase_seeds(&mut out);
    storage(&mut out);
    hfile(&mut out);
    text(&mut out);
    thrift(&mut out);
    out
}

/// Thrift calls as happybase sends them: a mutateRows with a batch, a scannerOpenWithScan
/// with a filter, on each protocol (first byte: 0 binary, 1 compact), whole and one byte at a
/// time (first byte 2, 3); and calls claiming huge lists of one-byte values.
fn thrift(out: &mut Vec<Seed>) {
    use cellar_server::thrift::protocol::{write_message, MessageType, Protocol, TType, Value};
    let mutation = Value::Struct(vec![
        (1, Value::Bool(false)),
        (2, Value::text("cf:q")),
        (3, Value::text("value")),
        (4, Value::Bool(true)),
    ]);
    let batch = Value::Struct(vec![
        (1, Value::text("row")),
        (
            2,
            Value::List(TType::Struct, vec![mutation.clone(), mutation]),
        ),
    ]);
    let attrs = Value::Map(TType::Binary, TType::Binary, vec![]);
    let calls = [
        (
            "mutateRows",
            vec![
                (1, Value::text("t")),
                (2, Value::List(TType::Struct, vec![batch])),
                (3, attrs.clone()),
            ],
        ),
        (
            "scannerOpenWithScan",
            vec![
                (1, Value::text("t")),
                (
                    2,
                    Value::Struct(vec![
                        (1, Value::text("a")),
                        (3, Value::I64(1 << 40)),
                        (4, Value::List(TType::Binary, vec![Value::text("cf")])),
                        (5, Value::I32(1000)),
                        (6, Value::text("PrefixFilter('a')")),
                        (8, Value::Bool(true)),
                    ]),
                ),
                (3, attrs),
            ],
        ),
    ];
    for (i, (name, body)) in calls.iter().enumerate() {
        for (sel, protocol) in [(0u8, Protocol::Binary), (1, Protocol::Compact)] {
            let mut bytes = vec![sel];
            write_message(
                &mut bytes,
                protocol,
                name,
                MessageType::Call,
                i as i32,
                body,
            );
            out.push((
                "thrift_message",
                format!("{name}-{protocol}"),
                bytes.clone(),
            ));
            // The same call as an unframed connection receives it one byte at a time.
            bytes[0] = sel | 1 << 1;
            out.push((
                "thrift_message",
                format!("{name}-{protocol}-bytewise"),
                bytes,
            ));
        }
    }
    // Lists claiming 8 Mi one-byte elements (bools, empty structs), 16 of them present: 8 MiB
    // on the wire would be 256 MiB decoded, refused from the list's header.
    for (sel, protocol) in [(0u8, Protocol::Binary), (1, Protocol::Compact)] {
        for (what, binary, compact, elem) in [("bools", 2u8, 1u8, 1u8), ("structs", 12, 12, 0)] {
            let mut bytes = vec![sel];
            write_message(
                &mut bytes,
                protocol,
                "mutateRows",
                MessageType::Call,
                1,
                &[],
            );
            bytes.pop(); // the empty body's stop byte
            let n: u32 = 8 << 20;
            match protocol {
                Protocol::Binary => {
                    bytes.extend_from_slice(&[15, 0, 2, binary]);
                    bytes.extend_from_slice(&n.to_be_bytes());
                }
                Protocol::Compact => {
                    bytes.extend_from_slice(&[0x29, 0xf0 | compact]);
                    let mut v = n;
                    while v >= 0x80 {
                        bytes.push(v as u8 | 0x80);
                        v >>= 7;
                    }
                    bytes.push(v as u8);
                }
            }
            bytes.extend_from_slice(&[elem; 16]);
            out.push((
                "thrift_message",
                format!("huge-list-of-{what}-{protocol}"),
                bytes,
            ));
        }
    }
}

fn prefixed(sel: u8, param: &[u8], cells: &[u8]) -> Vec<u8> {
    let mut v = vec![sel];
    let _ = prost::encode_length_delimiter(param.len(), &mut v);
    v.extend_from_slice(param);
    v.extend_from_slice(cells);
    v
}

fn filter() -> Filter {
    Filter::List(
        ListOp::MustPassAll,
        vec![
            Filter::Prefix(Bytes::from_static(b"user")),
            Filter::Value(CompareOp::NotEqual, Comparator::Regex("^x+$".into())),
            Filter::Skip(Box::new(Filter::ColumnPrefix(Bytes::from_static(b"f")))),
        ],
    )
}

fn schema() -> TableSchema {
    let mut f = FamilySchema::new("f");
    f.compression = Compression::Lz4;
    f.bloom = BloomType::RowCol;
    f.ttl_secs = Some(86_400);
    TableSchema::new("t1", vec![f, FamilySchema::new("g")])
}

fn native(out: &mut Vec<Seed>) {
    let region = || {
        Some(pb::RegionRef {
            table: "t1".into(),
            region_id: 7,
        })
    };
    let get = Get::new(Bytes::from_static(b"row1"))
        .column(b"f", b"q")
        .filter(filter());
    let put = RowMutation::new(Bytes::from_static(b"row1"))
        .put(b"f", b"q", 5, Bytes::from_static(b"value"))
        .delete_column(b"f", b"old", 4);
    let mut put_cells = BytesMut::new();
    let put_pb = convert::mutation_to_pb(&put, cellar_model::MutationKind::PutDelete, &mut put_cells);
    let incr = RowMutation::new(Bytes::from_static(b"row2")).put(
        b"f",
        b"n",
        cellar_model::LATEST_TIMESTAMP,
        Bytes::copy_from_slice(&5i64.to_be_bytes()),
    );
    let mut incr_cells = BytesMut::new();
    let incr_pb = convert::mutation_to_pb(&incr, cellar_model::MutationKind::Increment, &mut incr_cells);
    let cond = Condition {
        row: Bytes::from_static(b"row1"),
        family: Bytes::from_static(b"f"),
        qualifier: Bytes::from_static(b"q"),
        op: CompareOp::Equal,
        value: Some(Bytes::from_static(b"value")),
    };
    let scan = Scan::new().reversed().limit(10).filter(filter());
    use pb::Method as M;
    let requests: Vec<(M, Vec<u8>, Vec<u8>)> = vec![
        (
            M::LocateRegion,
            pb::LocateRegionRequest {
                table: "t1".into(),
                row: Bytes::from_static(b"row1"),
            }
            .encode_to_vec(),
            vec![],
        ),
        (
            M::Get,
            pb::GetRequest {
                region: region(),
                get: Some(convert::get_to_pb(&get)),
            }
            .encode_to_vec(),
            vec![],
        ),
        (
            M::Mutate,
            pb::MutateRequest {
                region: region(),
                mutation: Some(put_pb.clone()),
                condition: Some(convert::condition_to_pb(&cond)),
            }
            .encode_to_vec(),
            put_cells.to_vec(),
        ),
        (
            M::Multi,
            pb::MultiRequest {
                actions: vec![
                    pb::Action {
                        index: 0,
                        region: region(),
                        op: Some(pb::action::Op::Mutation(put_pb)),
                    },
                    pb::Action {
                        index: 1,
                        region: region(),
                        op: Some(pb::action::Op::Mutation(incr_pb)),
                    },
                    pb::Action {
                        index: 2,
                        region: region(),
                        op: Some(pb::action::Op::Get(convert::get_to_pb(&get))),
                    },
                ],
            }
            .encode_to_vec(),
            [&put_cells[..], &incr_cells[..]].concat(),
        ),
        (
            M::ScanOpen,
            pb::ScanOpenRequest {
                region: region(),
                scan: Some(convert::scan_to_pb(&scan)),
                rows: 100,
                ..Default::default()
            }
            .encode_to_vec(),
            vec![],
        ),
        (
            M::CreateTable,
            pb::CreateTableRequest {
                schema: Some(convert::schema_to_pb(&schema())),
                split_keys: vec![Bytes::from_static(b"m")],
            }
            .encode_to_vec(),
            vec![],
        ),
        (
            M::AlterTable,
            pb::AlterTableRequest {
                table: "t1".into(),
                put_families: vec![convert::family_to_pb(&FamilySchema::new("h"))],
                delete_families: vec!["g".into()],
                options: Some(convert::options_to_pb(&cellar_model::TableOptions {
                    max_file_size: Some(1 << 30),
                    durability: cellar_model::Durability::AsyncWal,
                    read_only: false,
                })),
            }
            .encode_to_vec(),
            vec![],
        ),
        (
            M::DisableTable,
            pb::TableRequest { table: "t1".into() }.encode_to_vec(),
            vec![],
        ),
    ];
    let mut cells = BytesMut::new();
    let result = convert::result_to_pb(
        &[cellar_model::Cell {
            row: put.row.clone(),
            family: Bytes::from_static(b"f"),
            qualifier: Bytes::from_static(b"q"),
            timestamp: 5,
            cell_type: CellType::Put,
            seq_id: 0,
            value: Bytes::from_static(b"value"),
        }],
        false,
        &mut cells,
    );
    let responses: Vec<(M, Vec<u8>, Vec<u8>)> = vec![
        (
            M::Get,
            pb::GetResponse {
                result: Some(result),
            }
            .encode_to_vec(),
            cells.to_vec(),
        ),
        (
            M::ScanOpen,
            pb::ScanOpenResponse {
                scanner_id: 3,
                results: vec![result, result],
                more_in_region: true,
                lease_ms: 60_000,
                ..Default::default()
            }
            .encode_to_vec(),
            [&cells[..], &cells[..]].concat(),
        ),
        (
            M::DescribeTable,
            pb::DescribeTableResponse {
                table: Some(pb::TableInfo {
                    schema: Some(convert::schema_to_pb(&schema())),
                    ..Default::default()
                }),
            }
            .encode_to_vec(),
            vec![],
        ),
    ];
    for (m, param, cells) in &requests {
        let name = format!("req-{}", m.as_str_name().to_lowercase());
        out.push(("native_request", name, prefixed(*m as u8, param, cells)));
        let header = pb::RequestHeader {
            call_id: 9,
            method: *m as i32,
            timeout_ms: 1000,
            want_timing: false,
            user: String::new(),
            effective_user: String::new(),
        };
        let mut f = BytesMut::new();
        frame::encode_frame_raw(&mut f, &header, param, cells);
        let mut v = frame::PREAMBLE.to_vec();
        v.extend_from_slice(&f[4..]);
        out.push((
            "native_frame",
            format!("req-{}", m.as_str_name().to_lowercase()),
            v,
        ));
    }
    for (m, param, cells) in &responses {
        let name = format!("resp-{}", m.as_str_name().to_lowercase());
        out.push((
            "native_request",
            name,
            prefixed(0x80 | *m as u8, param, cells),
        ));
    }
    let err = pb::ResponseHeader {
        call_id: 9,
        error: Some(pb::RpcError {
            code: pb::ErrorCode::NotServingRegion as i32,
            message: "region moved".into(),
        }),
        timing: None,
    };
    let mut f = BytesMut::new();
    frame::encode_response(&mut f, &err, &pb::Empty {}, &[]);
    let mut v = frame::PREAMBLE.to_vec();
    v.extend_from_slice(&f[4..]);
    out.push(("native_frame", "resp-error".into(), v));

    let mut block = BytesMut::new();
    for (i, t) in [CellType::Put, CellType::Delete, CellType::DeleteFamily]
        .into_iter()
        .enumerate()
    {
        cellblock::put_cell(
            &mut block,
            b"row",
            b"f",
            format!("q{i}").as_bytes(),
            9,
            t,
            b"v",
        );
    }
    let mut v = 3u32.to_be_bytes().to_vec();
    v.extend_from_slice(&block);
    out.push(("cellblock", "three-cells".into(), v));

    // A prepared scan's compact results: prepared columns, one defined in place, a delete.
    let cell = |q: &str, t: CellType, v: &str| cellar_model::Cell {
        row: bytes::Bytes::from_static(b"row"),
        family: bytes::Bytes::from_static(b"cf"),
        qualifier: bytes::Bytes::copy_from_slice(q.as_bytes()),
        timestamp: 1_700_000_000_000,
        cell_type: t,
        seq_id: 0,
        value: bytes::Bytes::copy_from_slice(v.as_bytes()),
    };
    let columns = cellar_proto::prepared::Columns::new(vec![
        (
            bytes::Bytes::from_static(b"cf"),
            bytes::Bytes::from_static(b"a"),
        ),
        (
            bytes::Bytes::from_static(b"cf"),
            bytes::Bytes::from_static(b"b"),
        ),
    ]);
    for compress in [false, true] {
        let mut e = cellar_proto::prepared::Encoder::new(&columns);
        e.row(
            &[
                cell("a", CellType::Put, &"x".repeat(200)),
                cell("b", CellType::Put, "y"),
                cell("z", CellType::DeleteColumn, ""),
            ],
            false,
        );
        e.row(&[cell("z", CellType::Put, &"w".repeat(100))], true);
        let name = if compress { "zstd" } else { "plain" };
        out.push(("prepared_results", name.into(), e.finish(compress).to_vec()));
    }
}

fn hbase_seeds(out: &mut Vec<Seed>) {
    use cellar_server::hbase::fuzzing::{region_name, METHODS};
    let sel = |service: &str, method: &str| {
        METHODS
            .iter()
            .position(|&(s, m)| s == service && m == method)
            .unwrap_or(0) as u8
    };
    let spec = hbase::RegionSpecifier {
        r#type: 1,
        value: region_name("t1", b"", 1_700_000_000_000),
    };
    let meta = hbase::RegionSpecifier {
        r#type: 1,
        value: Bytes::from_static(b"hbase:meta,,1"),
    };
    let table = hbase::TableName {
        namespace: Bytes::from_static(b"default"),
        qualifier: Bytes::from_static(b"t1"),
    };
    let comparator = hbase::Comparator {
        name: "org.apache.hadoop.hbase.filter.BinaryComparator".into(),
        serialized_comparator: Some(
            hbase::BinaryComparator {
                comparable: hbase::ByteArrayComparable {
                    value: Some(Bytes::from_static(b"row5")),
                },
            }
            .encode_to_vec()
            .into(),
        ),
    };
    let row_filter = hbase::Filter {
        name: "org.apache.hadoop.hbase.filter.RowFilter".into(),
        serialized_filter: Some(
            hbase::RowFilter {
                compare_filter: hbase::CompareFilter {
                    compare_op: 4,
                    comparator: Some(comparator),
                },
            }
            .encode_to_vec()
            .into(),
        ),
    };
    let list = hbase::Filter {
        name: "org.apache.hadoop.hbase.filter.FilterList".into(),
        serialized_filter: Some(
            hbase::FilterList {
                operator: 1,
                filters: vec![
                    row_filter.clone(),
                    hbase::Filter {
                        name: "org.apache.hadoop.hbase.filter.PageFilter".into(),
                        serialized_filter: Some(
                            hbase::PageFilter { page_size: 10 }.encode_to_vec().into(),
                        ),
                    },
                ],
            }
            .encode_to_vec()
            .into(),
        ),
    };
    let mut cells = BytesMut::new();
    cellblock::put_cell(&mut cells, b"row1", b"f", b"q", 5, CellType::Put, b"v1");
    cellblock::put_cell(&mut cells, b"row1", b"f", b"r", 5, CellType::Put, b"v2");
    let put = hbase::MutationProto {
        row: Some(Bytes::from_static(b"row1")),
        mutate_type: Some(hbase::mutation_proto::MutationType::Put as i32),
        associated_cell_count: Some(2),
        ..Default::default()
    };
    let delete = hbase::MutationProto {
        row: Some(Bytes::from_static(b"row2")),
        mutate_type: Some(hbase::mutation_proto::MutationType::Delete as i32),
        ..Default::default()
    };
    let get = hbase::Get {
        row: Bytes::from_static(b"row1"),
        column: vec![hbase::Column {
            family: Bytes::from_static(b"f"),
            qualifier: vec![Bytes::from_static(b"q")],
        }],
        filter: Some(row_filter.clone()),
        ..Default::default()
    };
    let family = hbase::ColumnFamilySchema {
        name: Bytes::from_static(b"f"),
        attributes: vec![
            hbase::BytesBytesPair {
                first: Bytes::from_static(b"VERSIONS"),
                second: Bytes::from_static(b"3"),
            },
            hbase::BytesBytesPair {
                first: Bytes::from_static(b"COMPRESSION"),
                second: Bytes::from_static(b"SNAPPY"),
            },
        ],
        configuration: vec![],
    };
    // Seed name, service, method, param, cell block.
    type Call = (&'static str, &'static str, &'static str, Vec<u8>, Vec<u8>);
    let calls: Vec<Call> = vec![
        (
            "get",
            "ClientService",
            "Get",
            hbase::GetRequest {
                region: spec.clone(),
                get: get.clone(),
            }
            .encode_to_vec(),
            vec![],
        ),
        (
            "mutate",
            "ClientService",
            "Mutate",
            hbase::MutateRequest {
                region: spec.clone(),
                mutation: put.clone(),
                ..Default::default()
            }
            .encode_to_vec(),
            cells.to_vec(),
        ),
        (
            "multi",
            "ClientService",
            "Multi",
            hbase::MultiRequest {
                region_action: vec![hbase::RegionAction {
                    region: spec.clone(),
                    atomic: Some(false),
                    action: vec![
                        hbase::Action {
                            index: Some(0),
                            mutation: Some(put),
                            ..Default::default()
                        },
                        hbase::Action {
                            index: Some(1),
                            mutation: Some(delete),
                            ..Default::default()
                        },
                        hbase::Action {
                            index: Some(2),
                            get: Some(get),
                            ..Default::default()
                        },
                    ],
                    ..Default::default()
                }],
                ..Default::default()
            }
            .encode_to_vec(),
            cells.to_vec(),
        ),
        (
            "scan",
            "ClientService",
            "Scan",
            hbase::ScanRequest {
                region: Some(spec.clone()),
                scan: Some(hbase::Scan {
                    start_row: Some(Bytes::from_static(b"a")),
                    filter: Some(list),
                    ..Default::default()
                }),
                number_of_rows: Some(100),
                ..Default::default()
            }
            .encode_to_vec(),
            vec![],
        ),
        (
            "scan-meta",
            "ClientService",
            "Scan",
            hbase::ScanRequest {
                region: Some(meta),
                scan: Some(hbase::Scan {
                    start_row: Some(Bytes::from_static(b"t1,,")),
                    reversed: Some(true),
                    ..Default::default()
                }),
                ..Default::default()
            }
            .encode_to_vec(),
            vec![],
        ),
        (
            "create-table",
            "MasterService",
            "CreateTable",
            hbase::CreateTableRequest {
                table_schema: hbase::TableSchema {
                    table_name: Some(table.clone()),
                    column_families: vec![family.clone()],
                    ..Default::default()
                },
                split_keys: vec![Bytes::from_static(b"m")],
                ..Default::default()
            }
            .encode_to_vec(),
            vec![],
        ),
        (
            "add-column",
            "MasterService",
            "AddColumn",
            hbase::AddColumnRequest {
                table_name: table.clone(),
                column_families: family,
                ..Default::default()
            }
            .encode_to_vec(),
            vec![],
        ),
        (
            "table-names",
            "MasterService",
            "GetTableNames",
            hbase::GetTableNamesRequest {
                regex: Some("t.*".into()),
                namespace: Some("default".into()),
                ..Default::default()
            }
            .encode_to_vec(),
            vec![],
        ),
        (
            "region-info",
            "AdminService",
            "GetRegionInfo",
            hbase::GetRegionInfoRequest {
                region: spec,
                ..Default::default()
            }
            .encode_to_vec(),
            vec![],
        ),
    ];
    for (name, service, method, param, cells) in calls {
        out.push((
            "hbase_request",
            name.to_string(),
            prefixed(sel(service, method), &param, &cells),
        ));
        if name == "get" || name == "multi" {
            let header = hbase::RequestHeader {
                call_id: Some(3),
                method_name: Some(method.to_string()),
                request_param: Some(true),
                cell_block_meta: (!cells.is_empty()).then_some(hbase::CellBlockMeta {
                    length: Some(cells.len() as u32),
                }),
                ..Default::default()
            };
            let mut v = b"HBas\x00\x50".to_vec();
            v.extend_from_slice(&header.encode_length_delimited_to_vec());
            let _ = prost::encode_length_delimiter(param.len(), &mut v);
            v.extend_from_slice(&param);
            v.extend_from_slice(&cells);
            out.push(("hbase_frame", format!("request-{name}"), v));
        }
    }
    let header = hbase::ConnectionHeader {
        user_info: Some(hbase::UserInformation {
            effective_user: "alice".into(),
            real_user: None,
        }),
        service_name: Some("ClientService".into()),
        cell_block_codec_class: Some(hbase_wire::KEY_VALUE_CODEC.into()),
        ..Default::default()
    };
    let mut f = BytesMut::new();
    hbase_wire::encode_connection_header(&mut f, &header);
    let mut v = b"HBas\x00\x50".to_vec();
    v.extend_from_slice(&f[4..]);
    out.push(("hbase_frame", "connection-header".into(), v));
    let mut f = BytesMut::new();
    hbase_wire::encode_exception(
        &mut f,
        4,
        "org.apache.hadoop.hbase.DoNotRetryIOException",
        "no",
        true,
    );
    let mut v = b"Regist".to_vec();
    v.extend_from_slice(&f[4..]);
    out.push(("hbase_frame", "exception".into(), v));
}

fn storage(out: &mut Vec<Seed>) {
    let mem = MemFs::new();
    let fs: FsRef = mem.clone();
    let configs = [
        ("plain-rowbloom", Compression::None, BloomType::Row, 40),
        ("lz4-rowcol", Compression::Lz4, BloomType::RowCol, 40),
        ("zstd-nobloom", Compression::Zstd, BloomType::None, 40),
        ("snappy-row", Compression::Snappy, BloomType::Row, 40),
        ("empty", Compression::None, BloomType::Row, 0),
    ];
    for (name, compression, bloom, cells) in configs {
        let path = Path::new("/seed").join(format!("{name}.sf"));
        let opts = StoreFileOptions {
            block_size: 256,
            compression,
            bloom,
            bloom_bits_per_key: 10,
            restart_interval: 4,
        };
        let mut w = StoreFileWriter::create(&fs, &path, opts).expect("memory");
        for i in 0..cells {
            let row = format!("row{:03}", i / 3);
            let key = make_key(
                row.as_bytes(),
                format!("q{}", i % 3).as_bytes(),
                100,
                CellType::Put,
                i as u64 + 1,
            );
            w.add(&key, format!("value-{i}-{}", "x".repeat(i % 7)).as_bytes())
                .expect("ordered keys");
        }
        w.finish().expect("memory");
        let file = mem.get(&path).expect("written");
        for flags in [0u8, 7] {
            let mut v = vec![flags];
            v.extend_from_slice(&file);
            out.push(("storefile", format!("{name}-{flags}"), v));
        }
    }
    let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..20)
        .map(|i| {
            (
                make_key(format!("r{i:02}").as_bytes(), b"q", 7, CellType::Put, i),
                vec![b'v'; i as usize % 5],
            )
        })
        .collect();
    for interval in [1, 16] {
        let raw = cellar_storage::fuzzing::storefile_block::encode_block(&entries, interval);
        let mut v = vec![0u8];
        v.extend_from_slice(&raw);
        out.push(("storefile_block", format!("raw-{interval}"), v));
        for code in [1u8, 2, 3] {
            if let Some(c) = cellar_storage::fuzzing::storefile_block::compress_payload(code, &raw)
            {
                let mut v = vec![code];
                v.extend_from_slice(&c);
                out.push(("storefile_block", format!("codec{code}-{interval}"), v));
            }
        }
    }

    let info = RegionInfo {
        id: 42,
        start_key: Bytes::from_static(b"b\x00\xff"),
        end_key: Bytes::from_static(b"m"),
    };
    let dir = Path::new("/seed/region");
    region_descriptor::write(&*mem, dir, &info, &schema()).expect("memory");
    let file = mem
        .get(&dir.join(region_descriptor::DESCRIPTOR_FILE))
        .expect("written");
    out.push((
        "region_descriptor",
        "file".into(),
        [&[0u8][..], &file].concat(),
    ));
    let body = file.get(16..file.len() - 4).unwrap_or_default();
    out.push((
        "region_descriptor",
        "body".into(),
        [&[1u8][..], body].concat(),
    ));

    let r = store_files::Reference {
        parent: "/data/t1/0001/f/00000000000000a1.sf".into(),
        start: b"m".to_vec(),
        end: vec![],
    };
    let p = Path::new("/seed/ref");
    r.write(&fs, p).expect("memory");
    out.push((
        "store_refs",
        "reference".into(),
        [&[0u8][..], &mem.get(p).expect("written")].concat(),
    ));
    let inputs = vec![
        store_files::store_file_name(1),
        store_files::store_file_name(2),
        store_files::ref_file_name(3),
    ];
    for (name, outputs) in [
        ("marker", None),
        ("marker-v2", Some(vec![store_files::store_file_name(4)])),
    ] {
        let p = Path::new("/seed/marker");
        let marker = store_files::Marker {
            inputs: inputs.clone(),
            outputs,
        };
        store_files::write_marker(&fs, p, &marker).expect("memory");
        out.push((
            "store_refs",
            name.into(),
            [&[1u8][..], &mem.get(p).expect("written")].concat(),
        ));
    }

    let key1 = make_key(b"row1", b"q", 5, CellType::Put, 11);
    let key2 = make_key(b"row1", b"", 5, CellType::DeleteFamily, 11);
    let mut payload = Vec::new();
    wal_payload::encode(
        &mut payload,
        None,
        &[],
        &[(b"f", &key1, b"value"), (b"g", &key2, b"")],
    );
    out.push(("wal_edit", "two-cells".into(), payload.clone()));
    let mut with_nonce = Vec::new();
    let nonce = cellar_model::Nonce {
        group: 77,
        nonce: 1001,
    };
    wal_payload::encode(&mut with_nonce, Some(nonce), &[], &[(b"f", &key1, b"8bytes!!")]);
    out.push(("wal_edit", "nonce".into(), with_nonce));
    let mut replicated = Vec::new();
    wal_payload::encode(
        &mut replicated,
        Some(nonce),
        &[(2u128 << 64) | 1, u128::MAX],
        &[(b"f", &key1, b"value")],
    );
    out.push(("wal_edit", "cluster-ids".into(), replicated));
    let framer = wal_segment::RecordFramer::new(crate::targets::FUZZ_SALT);
    let mut seg = wal_segment::segment_header(crate::targets::FUZZ_SALT).to_vec();
    for (region, seq) in [(7u64, 11u64), (7, 12), (9, 1)] {
        seg.extend_from_slice(&framer.header(region, seq, &payload).expect("fits"));
        seg.extend_from_slice(&payload);
    }
    out.push((
        "wal_segment",
        "three-records".into(),
        [&[0u8][..], &seg].concat(),
    ));
    let torn = &seg[..seg.len() - 3];
    out.push((
        "wal_segment",
        "torn-tail".into(),
        [&[2u8][..], torn].concat(),
    ));
}

fn text(out: &mut Vec<Seed>) {
    let scripts = [
        "create 't1', 'f', {NAME => 'g', VERSIONS => 3, COMPRESSION => 'LZ4'}",
        "put 't1', 'row1', 'f:q', \"v\\x00\\xff\"; get 't1', 'row1'",
        "scan 't1', {STARTROW => 'a', LIMIT => 10, FILTER => \"PrefixFilter('r') AND ValueFilter(=, 'binary:x')\"}",
        "alter 't1', NAME => 'f', METHOD => 'delete'\n# comment\nlist\n",
        "incr 't1', 'r', 'f:n', 5\ndeleteall 't1', 'r'\nget 't1', 'r', {COLUMNS => ['f:a', 'f:b'], TIMERANGE => [0, 9]}",
    ];
    for (i, s) in scripts.iter().enumerate() {
        out.push(("shell_parser", format!("script-{i}"), s.as_bytes().to_vec()));
    }
    let filters = [
        "PrefixFilter('row') AND (QualifierFilter(>=, 'binary:b') OR ValueFilter(!=, 'regexstring:^x.*'))",
        "SKIP ValueFilter(=, 'substring:abc')",
        "WHILE RowFilter(<, 'binaryprefix:m')",
        "SingleColumnValueFilter('f', 'q', =, 'binary:v', true, false)",
        "ColumnRangeFilter('a', true, 'z', false) AND PageFilter(10) AND KeyOnlyFilter()",
        "FirstKeyOnlyFilter() OR TimestampsFilter(1, 5, 9) OR ColumnCountGetFilter(2)",
    ];
    for (i, f) in filters.iter().enumerate() {
        out.push(("filter_lang", format!("filter-{i}"), f.as_bytes().to_vec()));
    }
    let configs = [
        "data_dir = \"./cellar-data\"\nlisten = \"127.0.0.1:16200\"\n\n[rpc]\nhandler_count = 30\nmax_queued_calls = 300\nmax_request_bytes = 67108864\nio_threads = 2\ninline_gets = true\n\n[scanner]\nlease_ms = 60000\n\n[split]\nauto = true\ninitial_bytes = 67108864\nmax_bytes = 10737418240\n\n[storage]\nblock_cache_bytes = 268435456\ncompaction_ratio = 1.2\nblocking_wait_ms = 10000\n",
        "[rpc]\nhandler_count = 64\n[storage]\nblock_cache_bytes = 8589934592\n",
    ];
    for (i, c) in configs.iter().enumerate() {
        out.push(("config", format!("config-{i}"), c.as_bytes().to_vec()));
    }
    // Certificates `cellar cert` made once (a client's, CN alice; a server's for
    // db.example.com), as DER: fixed text, so the seeds do not change from run to run.
    for (i, pem) in [CLIENT_CERT_PEM, SERVER_CERT_PEM].iter().enumerate() {
        out.push(("cert_identity", format!("cert-{i}"), pem_body(pem)));
    }
    use cellar_server::security::acl::{encode_key, Scope};
    let scopes = [
        Scope::Global,
        Scope::Namespace("ns".into()),
        Scope::table("ns:t"),
        Scope::family("t", b"f"),
        Scope::Table {
            table: "t".into(),
            family: Some(Bytes::from_static(b"f")),
            qualifier: Some(Bytes::from_static(b"q\x00")),
        },
    ];
    for (i, scope) in scopes.iter().enumerate() {
        let mut record = encode_key(if i % 2 == 0 { "alice" } else { "@ops" }, scope);
        record.push(0xff);
        record.extend_from_slice(b"RWXCA");
        out.push(("permission_record", format!("grant-{i}"), record));
    }
}

const CLIENT_CERT_PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIBeTCCASCgAwIBAgIUK1XBLztrNSzv5qLDAtgGL7j+sGMwCgYIKoZIzj0EAwIw\nIDEeMBwGA1UEAwwVQ2VsbGFyIGRldmVsb3BtZW50IENBMB4XDTI2MTEyNjEyNDgw\nOFoXDTI3MTEyNzEyNDgwOFowEDEOMAwGA1UEAwwFYWxpY2UwWTATBgcqhkjOPQIB\nBggqhkjOPQMBBwNCAAQllUmk/H/+49GEXYsVTQi7kDBL2OfJGRKTpL34vIq4rN0h\nxXWJIVntP/FOcV+o4+uYsp5ie4pRvvnBj9dk5FWjo0gwRjAfBgNVHSMEGDAWgBTa\nKLCQNZJiHZxaWQiKkENTq51DFDAOBgNVHQ8BAf8EBAMCBaAwEwYDVR0lBAwwCgYI\nKwYBBQUHAwIwCgYIKoZIzj0EAwIDRwAwRAIgXts+FjuUXbf5OfAdhknKfDPs+8QY\nLewD/X+MGGEwho0CIGJWwefIXd+UhaGKScxBUD15gr1IIIlXR38oKV8wBe1j\n-----END CERTIFICATE-----";

const SERVER_CERT_PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIBpzCCAU6gAwIBAgIUWe6YOOswqA0vxKmlKwUJIW4EV9MwCgYIKoZIzj0EAwIw\nIDEeMBwGA1UEAwwVQ2VsbGFyIGRldmVsb3BtZW50IENBMB4XDTI2MTEyNjEyNDgw\nOFoXDTI3MTEyNzEyNDgwOFowGTEXMBUGA1UEAwwOZGIuZXhhbXBsZS5jb20wWTAT\nBgcqhkjOPQIBBggqhkjOPQMBBwNCAAQ/OKrUnfC5nR3C18M62SFk5BZJBr5lCLav\nPc+A4fJrM35ngtfMPcPVbu4/SWeKueN48fv1EtiznZySZzv9lY6Ko20wazAfBgNV\nHSMEGDAWgBTaKLCQNZJiHZxaWQiKkENTq51DFDAZBgNVHREEEjAQgg5kYi5leGFt\ncGxlLmNvbTAOBgNVHQ8BAf8EBAMCBaAwHQYDVR0lBBYwFAYIKwYBBQUHAwEGCCsG\nAQUFBwMCMAoGCCqGSM49BAMCA0cAMEQCIQCxZlX8Umx6l2O4hUgRz+ahq3OIkNy/\ng1b4PZjKVhIrjQIfZFYiekkIXtWjYdwyv8L17aI0ytG2h3M7em8h3vS2Jw==\n-----END CERTIFICATE-----";

/// The DER bytes of a one-certificate PEM text.
fn pem_body(pem: &str) -> Vec<u8> {
    let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64_decode(&b64)
}

fn base64_decode(s: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let digits: Vec<u8> = s.bytes().filter(|&c| c != b'=').map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &d)| n | u32::from(d) << (18 - 6 * i));
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}

/// HFiles written by HBase 2.6.4's own writer (crates/hfile/tests/fixtures): whole small files,
/// and the data block payloads inside them for the block modes (the file's first data block,
/// decompressed by Cellar's reader).
fn hfile(out: &mut Vec<Seed>) {
    let files: [(&str, &[u8]); 4] = [
        ("fast_diff-gz", include_bytes!("../../../crates/hfile/tests/fixtures/fast_diff-gz.hfile")),
        ("empty", include_bytes!("../../../crates/hfile/tests/fixtures/empty.hfile")),
        ("fast_diff-zstd", include_bytes!("../../../crates/hfile/tests/fixtures/fast_diff-zstd.hfile")),
        ("none-snappy", include_bytes!("../../../crates/hfile/tests/fixtures/none-snappy.hfile")),
    ];
    for (name, bytes) in files {
        let mut whole = vec![0u8];
        whole.extend_from_slice(bytes);
        out.push(("hfile", format!("file-{name}"), whole));
    }
    // Uncompressed files: the first block's payload is its bytes after the 33-byte header,
    // up to the header's data size.
    let blocks: [(&str, &[u8], u8); 5] = [
        ("none", include_bytes!("../../../crates/hfile/tests/fixtures/none-none.hfile"), 1),
        ("prefix", include_bytes!("../../../crates/hfile/tests/fixtures/prefix-none.hfile"), 2),
        ("diff", include_bytes!("../../../crates/hfile/tests/fixtures/diff-none.hfile"), 2),
        ("fast_diff", include_bytes!("../../../crates/hfile/tests/fixtures/fast_diff-none.hfile"), 2),
        ("row_index", include_bytes!("../../../crates/hfile/tests/fixtures/row_index_v1-none.hfile"), 2),
    ];
    for (name, bytes, mode) in blocks {
        let size = bytes
            .get(29..33)
            .and_then(|s| <[u8; 4]>::try_from(s).ok())
            .map_or(0, |s| u32::from_be_bytes(s) as usize);
        let Some(payload) = bytes.get(33..size) else { continue };
        // Tags, compressed when encoded, and sequence ids: as these files were written.
        let flags = if mode == 2 && name != "row_index" { 4 | 8 | 16 } else { 4 | 16 };
        let mut seed = vec![mode | flags];
        seed.extend_from_slice(payload);
        out.push(("hfile", format!("block-{name}"), seed));
    }
    let mut gz = vec![3u8, 1, 0, 11];
    let mut enc = flate2_free_gzip(b"hello world");
    gz.append(&mut enc);
    out.push(("hfile", "gz".into(), gz));
}

/// A gzip member of stored (uncompressed) deflate blocks, written by hand: the seed needs no
/// compressor crate.
fn flate2_free_gzip(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    out.push(1); // final stored block
    let len = data.len() as u16;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&(!len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&crc32_ieee(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

fn crc32_ieee(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
        }
    }
    !crc
}
