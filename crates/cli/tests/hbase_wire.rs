//! The HBase-compatible front end of a real `cellar standalone`, spoken to byte by byte as
//! HBase's Java client does (preambles, connection header, frames), so protocol mistakes show
//! up here without a JVM. The Java client itself runs in `java/hbase-compat-tests`.

mod support;

use bytes::{Bytes, BytesMut};
use cellar_proto::hbase;
use cellar_proto::hbase_wire::{self, PREAMBLE_CALL_ID};
use prost::Message;
use std::io::Write;
use std::net::TcpStream;
use support::hbase::{at_eof, call, connect, locate, open, read_frame, region};
use support::Server;

#[test]
fn the_registry_preamble_gets_the_cluster_id_which_survives_a_restart() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let ask = |addr: &str| {
        let mut s = connect(addr);
        s.write_all(&hbase_wire::REGISTRY_PREAMBLE).expect("send");
        let (header, param, _) = read_frame(&mut s).expect("an answer to the registry preamble");
        assert_eq!(header.call_id, Some(PREAMBLE_CALL_ID));
        assert!(header.exception.is_none(), "{:?}", header.exception);
        let answer = hbase::GetConnectionRegistryResponse::decode(param).expect("decodes");
        assert!(
            at_eof(&mut s),
            "the server closes after the registry answer"
        );
        answer.cluster_id
    };
    let first = {
        let server = Server::start_in(tmp.path(), None);
        ask(&server.hbase)
    };
    assert_eq!(first.len(), 36, "a UUID-shaped cluster id: {first}");
    let server = Server::start_in(tmp.path(), None);
    assert_eq!(
        ask(&server.hbase),
        first,
        "the same cluster id after a restart"
    );
}

#[test]
fn bad_preambles_are_answered_with_hbase_exceptions_and_closed() {
    let server = Server::start();
    let cases: [(&[u8; 6], &str); 3] = [
        (b"GET / ", "FatalConnectionException"),
        (b"HBas\x07\x50", "WrongVersionException"),
        (b"HBas\x00\x51", "BadAuthException"),
    ];
    for (preamble, class) in cases {
        let mut s = connect(&server.hbase);
        s.write_all(preamble).expect("send");
        let (header, _, _) = read_frame(&mut s).expect("an exception before the close");
        let e = header.exception.expect("an exception");
        let name = e.exception_class_name.unwrap_or_default();
        assert!(name.ends_with(class), "{preamble:?}: got {name}");
        assert!(at_eof(&mut s), "{preamble:?}: the connection closes");
    }
    // The server still serves everyone else.
    let mut s = open(&server.hbase, "MasterService");
    let (param, _) = call(
        &mut s,
        1,
        "IsMasterRunning",
        &hbase::IsMasterRunningRequest {},
    )
    .expect("IsMasterRunning answers");
    let r = hbase::IsMasterRunningResponse::decode(param).expect("decodes");
    assert!(r.is_master_running);
}

#[test]
fn unknown_methods_and_services_get_do_not_retry_exceptions_and_the_connection_stays_usable() {
    let server = Server::start();
    let mut s = open(&server.hbase, "MasterService");
    let e = call(&mut s, 7, "NoSuchMethod", &hbase::IsMasterRunningRequest {})
        .expect_err("an unknown method is refused");
    assert!(e.do_not_retry(), "{e:?}");
    assert!(
        e.stack_trace().contains("NoSuchMethod"),
        "names the method: {e:?}"
    );
    let ok = call(
        &mut s,
        8,
        "IsMasterRunning",
        &hbase::IsMasterRunningRequest {},
    );
    assert!(ok.is_ok(), "the same connection still answers: {ok:?}");

    let mut other = open(&server.hbase, "NoSuchService");
    let e = call(&mut other, 1, "Get", &hbase::IsMasterRunningRequest {})
        .expect_err("an unknown service is refused");
    assert!(
        e.stack_trace().contains("NoSuchService"),
        "names the service: {e:?}"
    );
}

#[test]
fn a_garbage_frame_closes_only_its_own_connection() {
    let server = Server::start();
    let mut good = open(&server.hbase, "MasterService");
    let mut bad = open(&server.hbase, "MasterService");
    // A frame whose header length runs past its end.
    bad.write_all(&[0, 0, 0, 3, 0x7f, 1, 2])
        .expect("send garbage");
    let (header, _, _) = read_frame(&mut bad).expect("an exception before the close");
    assert!(
        header.exception.is_some(),
        "the malformed frame is answered"
    );
    assert!(at_eof(&mut bad), "the bad connection closes");
    assert!(
        call(
            &mut good,
            1,
            "IsMasterRunning",
            &hbase::IsMasterRunningRequest {}
        )
        .is_ok(),
        "other connections keep working"
    );
}

#[test]
fn an_oversized_request_is_refused_with_request_too_big() {
    let server = Server::start_with_config("[rpc]\nmax_request_bytes = 4096\n");
    let mut s = open(&server.hbase, "ClientService");
    let mut frame = Vec::new();
    frame.extend_from_slice(&(1_000_000u32).to_be_bytes());
    frame.extend_from_slice(&[0u8; 1024]);
    s.write_all(&frame).expect("send the start of a big frame");
    let (header, _, _) = read_frame(&mut s).expect("an exception");
    let name = header
        .exception
        .and_then(|e| e.exception_class_name)
        .unwrap_or_default();
    assert!(name.ends_with("RequestTooBigException"), "{name}");
}

#[test]
fn a_security_probe_is_answered_and_the_connection_goes_on() {
    let server = Server::start();
    let mut s = connect(&server.hbase);
    s.write_all(&hbase_wire::SECURITY_PREAMBLE).expect("send");
    let (header, _, _) = read_frame(&mut s).expect("an answer to the probe");
    let class = header
        .exception
        .and_then(|e| e.exception_class_name)
        .unwrap_or_default();
    assert!(class.ends_with("SecurityNotEnabledException"), "{class}");
    // The same connection continues with the real preamble and a header.
    let mut hello = BytesMut::new();
    hello.extend_from_slice(&hbase_wire::HBAS_MAGIC);
    hello.extend_from_slice(&[hbase_wire::RPC_VERSION, hbase_wire::AUTH_SIMPLE]);
    let header = hbase::ConnectionHeader {
        service_name: Some("MasterService".into()),
        ..Default::default()
    };
    hbase_wire::encode_connection_header(&mut hello, &header);
    s.write_all(&hello).expect("send preamble");
    assert!(call(
        &mut s,
        1,
        "IsMasterRunning",
        &hbase::IsMasterRunningRequest {}
    )
    .is_ok());
}

/// Creates `table` (family `f`) through the master, split at `splits`, and checks its
/// procedure finished.
fn create_table(master: &mut TcpStream, table: &str, splits: &[&[u8]]) {
    let create = hbase::CreateTableRequest {
        table_schema: hbase::TableSchema {
            table_name: Some(hbase::TableName {
                namespace: Bytes::from_static(b"default"),
                qualifier: Bytes::copy_from_slice(table.as_bytes()),
            }),
            column_families: vec![hbase::ColumnFamilySchema {
                name: Bytes::from_static(b"f"),
                ..Default::default()
            }],
            ..Default::default()
        },
        split_keys: splits.iter().map(|k| Bytes::copy_from_slice(k)).collect(),
        ..Default::default()
    };
    let (param, _) = call(master, 1, "CreateTable", &create).expect("CreateTable");
    let proc_id = hbase::CreateTableResponse::decode(param)
        .expect("decodes")
        .proc_id
        .expect("a procedure id");
    let (param, _) = call(
        master,
        2,
        "getProcedureResult",
        &hbase::GetProcedureResultRequest { proc_id },
    )
    .expect("getProcedureResult");
    let state = hbase::GetProcedureResultResponse::decode(param).expect("decodes");
    assert_eq!(
        state.state,
        hbase::get_procedure_result_response::State::Finished as i32
    );
    assert!(state.exception.is_none(), "{:?}", state.exception);
}

/// The Java client's path, call by call: create a pre-split table through the master and poll
/// its procedure, find a row's region with a reversed scan of `hbase:meta`, then put and get
/// the row in that region, answers in cell blocks.
#[test]
fn a_table_is_created_located_through_meta_written_and_read() {
    let server = Server::start();
    let mut master = open(&server.hbase, "MasterService");
    create_table(&mut master, "wire", &[b"m"]);

    // Where does row "q" live? The client's locate scan.
    let mut client = open(&server.hbase, "ClientService");
    let found = locate(&mut client, 1, "wire", "q");
    let (region_name, _, info) = found
        .iter()
        .find(|(_, q, _)| q.as_ref() == b"regioninfo")
        .cloned()
        .expect("the first row holds info:regioninfo");
    assert!(
        region_name.starts_with(b"wire,m,"),
        "row 'q' is in the region starting at 'm': {region_name:?}"
    );
    let info = hbase::RegionInfo::decode(info.slice(4..)).expect("PBUF + RegionInfo");
    assert_eq!(info.start_key.as_deref(), Some(&b"m"[..]));
    let server_col = found
        .iter()
        .find(|(_, q, _)| q.as_ref() == b"server")
        .map(|(_, _, v)| String::from_utf8_lossy(v).into_owned());
    assert_eq!(server_col.as_deref(), Some(server.hbase.as_str()));

    use hbase::mutation_proto::column_value::QualifierValue;
    let put = hbase::MutateRequest {
        region: region(&region_name),
        mutation: hbase::MutationProto {
            row: Some(Bytes::from_static(b"q")),
            mutate_type: Some(hbase::mutation_proto::MutationType::Put as i32),
            column_value: vec![hbase::mutation_proto::ColumnValue {
                family: Bytes::from_static(b"f"),
                qualifier_value: vec![QualifierValue {
                    qualifier: Some(Bytes::from_static(b"c")),
                    value: Some(Bytes::from_static(b"hello")),
                    ..Default::default()
                }],
            }],
            ..Default::default()
        },
        ..Default::default()
    };
    let (param, _) = call(&mut client, 2, "Mutate", &put).expect("put");
    assert_eq!(
        hbase::MutateResponse::decode(param)
            .expect("decodes")
            .processed,
        Some(true)
    );
    let get = hbase::GetRequest {
        region: region(&region_name),
        get: hbase::Get {
            row: Bytes::from_static(b"q"),
            ..Default::default()
        },
    };
    let (param, cells) = call(&mut client, 3, "Get", &get).expect("get");
    let result = hbase::GetResponse::decode(param)
        .expect("decodes")
        .result
        .expect("a result");
    assert_eq!(
        result.associated_cell_count,
        Some(1),
        "the cell rides in the cell block"
    );
    let mut reader = cellar_proto::cellblock::CellReader::new(cells);
    let cell = reader.next_cell().expect("cell block").expect("one cell");
    assert_eq!(
        (
            &cell.row[..],
            &cell.family[..],
            &cell.qualifier[..],
            &cell.value[..]
        ),
        (&b"q"[..], &b"f"[..], &b"c"[..], &b"hello"[..])
    );
    // The front end's calls and connections show in /metrics.
    let metrics = server.http_get("/metrics");
    let calls = metrics
        .lines()
        .find_map(|l| l.strip_prefix("cellar_hbase_call_duration_seconds_count "))
        .and_then(|n| n.trim().parse::<u64>().ok())
        .expect("cellar_hbase_call_duration_seconds_count in /metrics");
    assert!(calls >= 5, "at least the calls made here: {calls}");
    assert!(
        metrics.contains("cellar_hbase_open_connections 2\n"),
        "both connections open: {metrics}"
    );

    // A region name whose MD5 suffix does not match is refused, naming it.
    let forged = hbase::GetRequest {
        region: region(b"wire,,1.00000000000000000000000000000000."),
        get: hbase::Get {
            row: Bytes::from_static(b"q"),
            ..Default::default()
        },
    };
    let e = call(&mut client, 4, "Get", &forged).expect_err("a forged region name is refused");
    assert!(e.do_not_retry(), "{e:?}");
    assert!(
        e.stack_trace().contains("wire,,1."),
        "names the region: {e:?}"
    );
}

/// AsyncHBase (OpenTSDB's client) and pre-1.0 clients locate a region with a Get of
/// `hbase:meta` carrying `closest_row_before` and family `info`. HBase 2.6's region server
/// refuses it with `UnknownProtocolException` (do not retry), in Get and in a Multi's Get;
/// on that class AsyncHBase falls back to a reversed scan of meta from the same key, one
/// row, which must find the region. The same requests go to a real HBase 2.6 from
/// java/hbase-compat-tests (ClosestRowBeforeTest) so both answers are compared.
#[test]
fn closest_row_before_gets_hbase_2s_unknown_protocol_exception_and_the_fallback_scan_locates() {
    const UNKNOWN_PROTOCOL: &str = "org.apache.hadoop.hbase.exceptions.UnknownProtocolException";
    let server = Server::start();
    let mut master = open(&server.hbase, "MasterService");
    create_table(&mut master, "crb", &[b"m"]);
    let mut client = open(&server.hbase, "ClientService");
    // AsyncHBase's meta search key: `<table>,<row>,:` (':' sorts after every region id).
    let search = Bytes::from_static(b"crb,q,:");
    let info = hbase::Column {
        family: Bytes::from_static(b"info"),
        qualifier: Vec::new(),
    };
    let closest = hbase::Get {
        row: search.clone(),
        column: vec![info.clone()],
        closest_row_before: Some(true),
        ..Default::default()
    };
    let get = hbase::GetRequest {
        region: region(b"hbase:meta,,1"),
        get: closest.clone(),
    };
    let e = call(&mut client, 1, "Get", &get).expect_err("closest_row_before is refused");
    assert_eq!(e.exception_class_name(), UNKNOWN_PROTOCOL, "{e:?}");
    assert!(e.do_not_retry(), "{e:?}");
    assert!(e.stack_trace().contains("closest_row_before"), "{e:?}");

    let multi = hbase::MultiRequest {
        region_action: vec![hbase::RegionAction {
            region: region(b"hbase:meta,,1"),
            atomic: None,
            action: vec![hbase::Action {
                index: Some(0),
                get: Some(closest),
                ..Default::default()
            }],
            condition: None,
        }],
        ..Default::default()
    };
    let (param, _) = call(&mut client, 2, "Multi", &multi).expect("Multi answers per action");
    let resp = hbase::MultiResponse::decode(param).expect("decodes");
    let roe = &resp.region_action_result[0].result_or_exception;
    let ex = roe[0].exception.as_ref().expect("the action fails");
    assert_eq!(ex.name, UNKNOWN_PROTOCOL, "{resp:?}");

    // AsyncHBase's fallback: reversed scan from the search key, family info, one row.
    let scan = hbase::ScanRequest {
        region: Some(region(b"hbase:meta,,1")),
        scan: Some(hbase::Scan {
            start_row: Some(search),
            stop_row: Some(Bytes::new()),
            reversed: Some(true),
            column: vec![info],
            ..Default::default()
        }),
        number_of_rows: Some(1),
        client_handles_partials: Some(false),
        client_handles_heartbeats: Some(false),
        ..Default::default()
    };
    let (param, cells) = call(&mut client, 3, "Scan", &scan).expect("reversed meta scan");
    let resp = hbase::ScanResponse::decode(param).expect("decodes");
    assert!(!resp.cells_per_result.is_empty(), "{resp:?}");
    let mut reader = cellar_proto::cellblock::CellReader::new(cells);
    let first = reader.next_cell().expect("cell block").expect("a row");
    assert!(
        first.row.starts_with(b"crb,m,"),
        "row 'q' is in the region starting at 'm': {:?}",
        first.row
    );
}

/// A client may send many calls before reading any answer (the Java client multiplexes its
/// threads over one connection). More calls than a connection may have in flight, sent in
/// one write: every one is answered exactly once, puts before the gets that read them.
#[test]
fn pipelined_calls_past_the_in_flight_limit_are_all_answered() {
    use hbase::mutation_proto::column_value::QualifierValue;
    const CALLS: u32 = 1500;
    let server = Server::start();
    let mut master = open(&server.hbase, "MasterService");
    create_table(&mut master, "pipe", &[]);
    let mut client = open(&server.hbase, "ClientService");
    let found = locate(&mut client, 1, "pipe", "r");
    let region_name = found
        .iter()
        .find(|(_, q, _)| q.as_ref() == b"regioninfo")
        .map(|(r, _, _)| r.clone())
        .expect("the table's region");
    let row = |i: u32| Bytes::from(format!("r{i:05}"));
    let read_all = |client: &mut TcpStream, first_id: u32| {
        let mut answers = std::collections::BTreeMap::new();
        for _ in 0..CALLS {
            let (header, param, cells) = read_frame(client).expect("an answer for every call");
            assert!(header.exception.is_none(), "{:?}", header.exception);
            let id = header.call_id.expect("call id") - first_id;
            assert!(
                answers.insert(id, (param, cells)).is_none(),
                "call {id} answered twice"
            );
        }
        assert_eq!(answers.len(), CALLS as usize);
        answers
    };
    let mut out = BytesMut::new();
    for i in 0..CALLS {
        let put = hbase::MutateRequest {
            region: region(&region_name),
            mutation: hbase::MutationProto {
                row: Some(row(i)),
                mutate_type: Some(hbase::mutation_proto::MutationType::Put as i32),
                column_value: vec![hbase::mutation_proto::ColumnValue {
                    family: Bytes::from_static(b"f"),
                    qualifier_value: vec![QualifierValue {
                        qualifier: Some(Bytes::from_static(b"c")),
                        value: Some(Bytes::from(i.to_string())),
                        ..Default::default()
                    }],
                }],
                ..Default::default()
            },
            ..Default::default()
        };
        hbase_wire::encode_request(&mut out, 1000 + i, "Mutate", &put, &[]);
    }
    client.write_all(&out).expect("send the puts");
    for (_, (param, _)) in read_all(&mut client, 1000) {
        let resp = hbase::MutateResponse::decode(param).expect("decodes");
        assert_eq!(resp.processed, Some(true));
    }
    out.clear();
    for i in 0..CALLS {
        let get = hbase::GetRequest {
            region: region(&region_name),
            get: hbase::Get {
                row: row(i),
                ..Default::default()
            },
        };
        hbase_wire::encode_request(&mut out, 5000 + i, "Get", &get, &[]);
    }
    client.write_all(&out).expect("send the gets");
    for (i, (_, cells)) in read_all(&mut client, 5000) {
        let mut reader = cellar_proto::cellblock::CellReader::new(cells);
        let cell = reader
            .next_cell()
            .expect("cell block")
            .expect("the row's cell");
        assert_eq!(
            (&cell.row, &cell.value[..]),
            (&row(i), i.to_string().as_bytes())
        );
    }
}

fn mutation(
    row: Bytes,
    kind: hbase::mutation_proto::MutationType,
    value: Bytes,
) -> hbase::MutationProto {
    use hbase::mutation_proto::column_value::QualifierValue;
    hbase::MutationProto {
        row: Some(row),
        mutate_type: Some(kind as i32),
        column_value: vec![hbase::mutation_proto::ColumnValue {
            family: Bytes::from_static(b"f"),
            qualifier_value: vec![QualifierValue {
                qualifier: Some(Bytes::from_static(b"c")),
                value: Some(value),
                ..Default::default()
            }],
        }],
        ..Default::default()
    }
}

/// The value of `row`'s `f:c`, read through the HBase port.
fn get_value(
    client: &mut TcpStream,
    call_id: u32,
    region_name: &Bytes,
    row: &[u8],
) -> Option<Bytes> {
    let get = hbase::GetRequest {
        region: region(region_name),
        get: hbase::Get {
            row: Bytes::copy_from_slice(row),
            ..Default::default()
        },
    };
    let (_, cells) = call(client, call_id, "Get", &get).expect("get");
    let mut reader = cellar_proto::cellblock::CellReader::new(cells);
    reader.next_cell().expect("cell block").map(|c| c.value)
}

/// Puts the reactor applies and increments the handler pool applies, from several
/// connections at once on the same rows of two regions: every call is answered (a put's WAL
/// write deferred to the end of its read batch never leaves another connection's write
/// waiting for good), no increment is lost to a put it raced, and every acknowledged write
/// is back after `kill -9`.
#[test]
fn puts_and_increments_from_many_connections_on_shared_rows_all_finish_and_survive_kill9() {
    use hbase::mutation_proto::MutationType;
    const CONNECTIONS: u32 = 4;
    const CALLS: u32 = 400;
    let tmp = tempfile::tempdir().expect("temp dir");
    // Every call pipelined at once may be queued (a put whose row another connection holds
    // goes to the handler pool): room for all, so this tests answers, not overload refusals.
    let config = tmp.path().join("cellar.toml");
    std::fs::write(&config, "[rpc]\nmax_queued_calls = 4096\n").expect("config");
    let data = tmp.path().join("data");
    let mut server = Server::start_in(&data, Some(&config));
    let mut master = open(&server.hbase, "MasterService");
    create_table(&mut master, "shared", &[b"m"]);
    let mut client = open(&server.hbase, "ClientService");
    let region_of = |client: &mut TcpStream, id: u32, row: &str| {
        locate(client, id, "shared", row)
            .iter()
            .find(|(_, q, _)| q.as_ref() == b"regioninfo")
            .map(|(r, _, _)| r.clone())
            .expect("the row's region")
    };
    let regions = [
        region_of(&mut client, 1, "a"),
        region_of(&mut client, 2, "z"),
    ];
    assert_ne!(regions[0], regions[1], "two regions");
    // Row k of region half h: "c…" sorts before the split row "m", "x…" after it.
    let row = |h: usize, k: u32| Bytes::from(format!("{}{k:02}", ["c", "x"][h]));
    let counter = |h: usize| Bytes::from(format!("{}-count", ["c", "x"][h]));
    let is_increment = |i: u32| i % 8 == 7;
    // Runs of eight calls alternate between the regions.
    let half = |i: u32| ((i / 8) % 2) as usize;

    std::thread::scope(|s| {
        for c in 0..CONNECTIONS {
            let (addr, regions) = (&server.hbase, &regions);
            s.spawn(move || {
                let mut conn = open(addr, "ClientService");
                let mut out = BytesMut::new();
                for i in 0..CALLS {
                    let h = half(i);
                    let m = if is_increment(i) {
                        mutation(
                            counter(h),
                            MutationType::Increment,
                            Bytes::copy_from_slice(&1i64.to_be_bytes()),
                        )
                    } else {
                        mutation(
                            row(h, i % 20),
                            MutationType::Put,
                            Bytes::from(format!("{c}-{i}")),
                        )
                    };
                    let put = hbase::MutateRequest {
                        region: region(&regions[h]),
                        mutation: m,
                        ..Default::default()
                    };
                    hbase_wire::encode_request(&mut out, i, "Mutate", &put, &[]);
                }
                conn.write_all(&out).expect("send the calls");
                let mut answered = std::collections::BTreeSet::new();
                for _ in 0..CALLS {
                    let (header, _, _) = read_frame(&mut conn).expect("an answer for every call");
                    assert!(header.exception.is_none(), "{:?}", header.exception);
                    assert!(answered.insert(header.call_id.expect("call id")));
                }
            });
        }
    });

    let increments = CONNECTIONS
        * (0..CALLS)
            .filter(|&i| is_increment(i) && half(i) == 0)
            .count() as u32;
    let expect_counts = |client: &mut TcpStream, first_id: u32| {
        for (h, region_name) in regions.iter().enumerate() {
            let n = get_value(client, first_id + h as u32, region_name, &counter(h))
                .expect("the counter");
            assert_eq!(
                &n[..],
                &i64::from(increments).to_be_bytes(),
                "counter {h}: no increment lost"
            );
            let v = get_value(client, first_id + 2 + h as u32, region_name, &row(h, 2))
                .expect("a put row");
            assert!(String::from_utf8_lossy(&v).contains('-'), "{v:?}");
        }
    };
    expect_counts(&mut client, 10);
    drop(client);
    server.kill9();
    let server = Server::start_in(&data, Some(&config));
    let mut client = open(&server.hbase, "ClientService");
    expect_counts(&mut client, 20);
}

/// The HBase client resends an increment with the same nonce when it gets no answer; a
/// retry of one already applied is answered with the current value and applied once, also by
/// a server restarted after `kill -9` (the nonce is replayed from the WAL).
#[test]
fn a_retried_increment_is_applied_once_even_across_kill9() {
    use hbase::mutation_proto::MutationType;
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start_in(tmp.path(), None);
    let mut master = open(&server.hbase, "MasterService");
    create_table(&mut master, "nonces", &[]);
    let region_of = |client: &mut TcpStream, id: u32| {
        locate(client, id, "nonces", "c")
            .iter()
            .find(|(_, q, _)| q.as_ref() == b"regioninfo")
            .map(|(r, _, _)| r.clone())
            .expect("the row's region")
    };
    let increment = |client: &mut TcpStream, call_id: u32, region_name: &Bytes, nonce: u64| {
        let mut m = mutation(
            Bytes::from_static(b"c"),
            MutationType::Increment,
            Bytes::copy_from_slice(&5i64.to_be_bytes()),
        );
        m.nonce = Some(nonce);
        let req = hbase::MutateRequest {
            region: region(region_name),
            mutation: m,
            nonce_group: Some(77),
            ..Default::default()
        };
        let (param, cells) = call(client, call_id, "Mutate", &req).expect("increment");
        let resp = hbase::MutateResponse::decode(param).expect("decodes");
        let mut value = resp
            .result
            .iter()
            .flat_map(|r| r.cell.iter())
            .filter_map(|c| c.value.clone())
            .next();
        if value.is_none() {
            let mut reader = cellar_proto::cellblock::CellReader::new(cells);
            value = reader.next_cell().expect("cell block").map(|c| c.value);
        }
        let v = value.expect("the incremented value");
        i64::from_be_bytes(v[..].try_into().expect("8 bytes"))
    };
    let mut client = open(&server.hbase, "ClientService");
    let r = region_of(&mut client, 1);
    assert_eq!(increment(&mut client, 2, &r, 1001), 5);
    assert_eq!(
        increment(&mut client, 3, &r, 1001),
        5,
        "a retry: answered, not applied"
    );
    assert_eq!(
        increment(&mut client, 4, &r, 1002),
        10,
        "another nonce: applied"
    );
    drop(client);
    server.kill9();
    let server = Server::start_in(tmp.path(), None);
    let mut client = open(&server.hbase, "ClientService");
    let r = region_of(&mut client, 1);
    assert_eq!(
        increment(&mut client, 2, &r, 1002),
        10,
        "a retry after the restart: the nonce came back with the WAL"
    );
    assert_eq!(increment(&mut client, 3, &r, 1003), 15);
}

/// The names of a process's threads (`/proc/PID/task/*/comm`, at most 15 bytes each).
fn thread_names(pid: u32) -> Vec<String> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the server's threads");
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect()
}

/// Both ports run on one set of threads: the handler pool of `rpc.handler_count` and the
/// reactor, not a pool and a runtime per protocol; calls through both ports, some of them
/// disk-bound (table creation), are served by them.
#[test]
fn both_ports_share_one_handler_pool_and_one_reactor() {
    let mut server = Server::start_with_config("[rpc]\nhandler_count = 3\nio_threads = 2\n");
    let mut master = open(&server.hbase, "MasterService");
    create_table(&mut master, "shared", &[]);
    let mut client = open(&server.hbase, "ClientService");
    assert!(
        !locate(&mut client, 1, "shared", "r").is_empty(),
        "the HBase port serves reads of meta"
    );
    let native = support::connect_blocking(&server.native);
    assert!(
        native
            .admin()
            .list_tables()
            .expect("native list")
            .iter()
            .any(|t| t.schema.name == "shared"),
        "the native port sees the table the HBase port created"
    );
    let names = thread_names(server.pid());
    let handlers = names
        .iter()
        .filter(|n| n.starts_with("cellar-handler"))
        .count();
    assert_eq!(
        handlers, 3,
        "one pool of rpc.handler_count threads: {names:?}"
    );
    assert!(
        !names.iter().any(|n| n.starts_with("cellar-hbase")),
        "no threads of the HBase port's own: {names:?}"
    );
    assert!(
        names
            .iter()
            .filter(|n| n.starts_with("cellar-rpc-io"))
            .count()
            >= 2,
        "the reactor's workers: {names:?}"
    );
    server.terminate();
}

/// The rows of a ScanResponse whose results came in the cell block.
fn scanned_rows(param: Bytes, cells: Bytes) -> (hbase::ScanResponse, Vec<Bytes>) {
    let resp = hbase::ScanResponse::decode(param).expect("ScanResponse decodes");
    let mut reader = cellar_proto::cellblock::CellReader::new(cells);
    let mut rows = Vec::new();
    for n in &resp.cells_per_result {
        let cells = reader.take(*n as usize).expect("the result's cells");
        rows.push(cells[0].row.clone());
    }
    (resp, rows)
}

/// HBase counts each scanner's calls: the Java client sends `next_call_seq` 0, 1, 2, … on its
/// nexts, and a `next` whose number is not the one expected (a retry after a lost answer)
/// gets `OutOfOrderScannerNextException` (the client then reopens the scan after the last row
/// it has), never the rows after the lost ones.
#[test]
fn a_retried_scanner_next_gets_out_of_order_scanner_next_exception_not_the_next_rows() {
    let server = Server::start();
    let mut master = open(&server.hbase, "MasterService");
    create_table(&mut master, "seq", &[]);
    let mut client = support::hbase::Conn::open(&server.hbase, "ClientService");
    let region_name = client.locate("seq", "r1");
    for i in 1..=6 {
        let r = format!("r{i}");
        client.put(&region_name, r.as_bytes(), b"f", b"c", r.as_bytes());
    }
    let scan_open = hbase::ScanRequest {
        region: Some(region(&region_name)),
        scan: Some(hbase::Scan::default()),
        number_of_rows: Some(2),
        ..Default::default()
    };
    let (param, cells) = client.call("Scan", &scan_open).expect("open");
    let (resp, rows) = scanned_rows(param, cells);
    assert_eq!(rows, vec![Bytes::from("r1"), Bytes::from("r2")]);
    let id = resp.scanner_id.expect("a scanner id");
    let next = |seq: u64| hbase::ScanRequest {
        scanner_id: Some(id),
        number_of_rows: Some(2),
        next_call_seq: Some(seq),
        ..Default::default()
    };
    let (param, cells) = client.call("Scan", &next(0)).expect("next 0");
    assert_eq!(
        scanned_rows(param, cells).1,
        vec![Bytes::from("r3"), Bytes::from("r4")]
    );
    // The answer to next 0 was lost; the client sends it again.
    let e = client
        .call("Scan", &next(0))
        .expect_err("a repeated next_call_seq must not get the following rows");
    assert_eq!(
        e.exception_class_name(),
        "org.apache.hadoop.hbase.exceptions.OutOfOrderScannerNextException"
    );
    assert!(e.do_not_retry(), "{e:?}");
    assert!(
        e.stack_trace().contains("Expected nextCallSeq: 1")
            && e.stack_trace().contains("from client: 0"),
        "{e:?}"
    );
    // A number ahead of the expected one is refused too; the scanner stays as it was.
    let e = client.call("Scan", &next(5)).expect_err("a skipped number");
    assert_eq!(
        e.exception_class_name(),
        "org.apache.hadoop.hbase.exceptions.OutOfOrderScannerNextException"
    );
    let (param, cells) = client.call("Scan", &next(1)).expect("next 1");
    let (resp, rows) = scanned_rows(param, cells);
    assert_eq!(rows, vec![Bytes::from("r5"), Bytes::from("r6")]);
    assert_eq!(resp.more_results_in_region, Some(false));
}

/// A cell as HBase's `KeyValueCodecWithTags` writes it when the cell carries `tags`.
fn tagged_cell(row: &[u8], qualifier: &[u8], ts: u64, value: &[u8], tags: &[u8]) -> Vec<u8> {
    let mut key = Vec::new();
    key.extend_from_slice(&(row.len() as u16).to_be_bytes());
    key.extend_from_slice(row);
    key.push(1);
    key.extend_from_slice(b"f");
    key.extend_from_slice(qualifier);
    key.extend_from_slice(&ts.to_be_bytes());
    key.push(4); // Put
    let mut out = Vec::new();
    let total = 8 + key.len() + value.len() + 2 + tags.len();
    out.extend_from_slice(&(total as u32).to_be_bytes());
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(&(value.len() as u32).to_be_bytes());
    out.extend_from_slice(&key);
    out.extend_from_slice(value);
    out.extend_from_slice(&(tags.len() as u16).to_be_bytes());
    out.extend_from_slice(tags);
    out
}

/// How an HBase replication source talks to its peer: AdminService over a connection whose
/// codec is `KeyValueCodecWithTags`, `ReplicateWALEntry` with the WAL entries' cells in the
/// cell block, tags on some. The edits land (tags dropped) and read back through
/// ClientService; a cell block whose tags length lies is refused for that call only.
#[test]
fn a_replication_source_on_the_tags_codec_ships_edits_that_clients_then_read() {
    let server = Server::start();
    let mut master = open(&server.hbase, "MasterService");
    create_table(&mut master, "repl", &[]);

    let mut source = connect(&server.hbase);
    let mut out = BytesMut::new();
    out.extend_from_slice(&hbase_wire::HBAS_MAGIC);
    out.extend_from_slice(&[hbase_wire::RPC_VERSION, hbase_wire::AUTH_SIMPLE]);
    let header = hbase::ConnectionHeader {
        user_info: Some(hbase::UserInformation {
            effective_user: "hbase".into(),
            real_user: None,
        }),
        service_name: Some("AdminService".into()),
        cell_block_codec_class: Some("org.apache.hadoop.hbase.codec.KeyValueCodecWithTags".into()),
        ..Default::default()
    };
    hbase_wire::encode_connection_header(&mut out, &header);
    source.write_all(&out).expect("send preamble and header");

    // A TTL tag (type 8) on the first cell, none on the second.
    let mut block = tagged_cell(
        b"r1",
        b"c",
        5,
        b"shipped",
        &[0, 9, 8, 0, 0, 0, 0, 0, 0, 0, 60],
    );
    let mut plain = BytesMut::new();
    cellar_proto::cellblock::put(
        &mut plain,
        &cellar_model::Cell {
            row: Bytes::from_static(b"r2"),
            family: Bytes::from_static(b"f"),
            qualifier: Bytes::from_static(b"c"),
            timestamp: 6,
            cell_type: cellar_model::CellType::Put,
            seq_id: 0,
            value: Bytes::from_static(b"plain"),
        },
    );
    block.extend_from_slice(&plain);
    let request = hbase::ReplicateWalEntryRequest {
        entry: vec![hbase::WalEntry {
            key: hbase::WalKey {
                encoded_region_name: Bytes::from_static(b"d41d8cd98f00b204e9800998ecf8427e"),
                table_name: Bytes::from_static(b"repl"),
                log_sequence_number: 7,
                write_time: 1_700_000_000_000,
                ..Default::default()
            },
            key_value_bytes: Vec::new(),
            associated_cell_count: Some(2),
        }],
        replication_cluster_id: Some(String::new()),
        ..Default::default()
    };
    let mut out = BytesMut::new();
    hbase_wire::encode_request(&mut out, 1, "ReplicateWALEntry", &request, &block);
    source.write_all(&out).expect("send");
    let (header, _, _) = read_frame(&mut source).expect("answered");
    assert_eq!(header.call_id, Some(1));
    assert!(header.exception.is_none(), "{:?}", header.exception);

    // A tags length longer than the cell: that call is refused, the connection goes on.
    let mut lying = tagged_cell(b"r3", b"c", 5, b"x", &[1, 2, 3]);
    let at = lying.len() - 5;
    lying[at + 1] = 200;
    let mut out = BytesMut::new();
    hbase_wire::encode_request(&mut out, 2, "ReplicateWALEntry", &request, &lying);
    source.write_all(&out).expect("send");
    let (header, _, _) = read_frame(&mut source).expect("answered");
    let e = header.exception.expect("refused");
    assert!(e.do_not_retry(), "{e:?}");
    assert!(e.stack_trace().contains("tags"), "{e:?}");
    let mut out = BytesMut::new();
    hbase_wire::encode_request(&mut out, 3, "ReplicateWALEntry", &request, &block);
    source.write_all(&out).expect("send");
    let (header, _, _) = read_frame(&mut source).expect("answered again");
    assert!(header.exception.is_none(), "{:?}", header.exception);

    let mut client = support::hbase::Conn::open(&server.hbase, "ClientService");
    let region_name = client.locate("repl", "r1");
    assert_eq!(
        client.get(&region_name, b"r1").as_deref(),
        Some(&b"shipped"[..])
    );
    assert_eq!(
        client.get(&region_name, b"r2").as_deref(),
        Some(&b"plain"[..])
    );
    let metrics = server.http_get("/metrics");
    assert!(
        metrics.contains("cellar_replication_sink_batches_total 2\n")
            && metrics.contains("cellar_replication_sink_failed_batches_total 0\n")
            && metrics.contains("cellar_replication_sink_cells_total 4\n"),
        "{metrics}"
    );
}
