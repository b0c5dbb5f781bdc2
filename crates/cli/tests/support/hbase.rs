//! A minimal HBase wire client for tests, speaking the protocol byte by byte as HBase's Java
//! client does (preamble, connection header, request frames), so a test can drive Cellar's
//! HBase front end without a JVM.

use bytes::{Bytes, BytesMut};
use cellar_proto::hbase;
use cellar_proto::hbase_wire;
use prost::Message;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

pub fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect to the HBase port");
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    s
}

/// Reads one response frame; `None` at a clean end of stream.
pub fn read_frame(s: &mut TcpStream) -> Option<(hbase::ResponseHeader, Bytes, Bytes)> {
    let mut len = [0u8; 4];
    match s.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return None,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
        Err(e) => panic!("reading a response frame: {e}"),
    }
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).expect("frame body");
    Some(hbase_wire::decode_response(Bytes::from(body)).expect("a well-formed response frame"))
}

pub fn at_eof(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.read(&mut b), Ok(0))
        || matches!(s.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset)
}

/// A connection that has sent the HBase preamble and a header for `service`.
pub fn open(addr: &str, service: &str) -> TcpStream {
    open_as(addr, service, "cellar-test")
}

/// [`open`] as `user` (the connection header's user: HBase's SIMPLE authentication).
pub fn open_as(addr: &str, service: &str, user: &str) -> TcpStream {
    let mut s = connect(addr);
    let mut out = BytesMut::new();
    out.extend_from_slice(&hbase_wire::HBAS_MAGIC);
    out.extend_from_slice(&[hbase_wire::RPC_VERSION, hbase_wire::AUTH_SIMPLE]);
    let header = hbase::ConnectionHeader {
        user_info: Some(hbase::UserInformation {
            effective_user: user.into(),
            real_user: None,
        }),
        service_name: Some(service.into()),
        cell_block_codec_class: Some(hbase_wire::KEY_VALUE_CODEC.into()),
        ..Default::default()
    };
    hbase_wire::encode_connection_header(&mut out, &header);
    s.write_all(&out).expect("send preamble and header");
    s
}

/// One call and its answer: `Ok(response message bytes, cell block)` or `Err(exception)`.
pub fn call(
    s: &mut TcpStream,
    call_id: u32,
    method: &str,
    param: &impl Message,
) -> Result<(Bytes, Bytes), hbase::ExceptionResponse> {
    call_with_cells(s, call_id, method, param, &[])
}

/// [`call`] with a cell block after the request message.
pub fn call_with_cells(
    s: &mut TcpStream,
    call_id: u32,
    method: &str,
    param: &impl Message,
    cells: &[u8],
) -> Result<(Bytes, Bytes), hbase::ExceptionResponse> {
    let mut out = BytesMut::new();
    hbase_wire::encode_request(&mut out, call_id, method, param, cells);
    s.write_all(&out).expect("send request");
    let (header, param, cells) = read_frame(s).expect("an answer before the connection closed");
    assert_eq!(header.call_id, Some(call_id), "answer for the call sent");
    match header.exception {
        Some(e) => Err(e),
        None => Ok((param, cells)),
    }
}

pub fn region(name: &[u8]) -> hbase::RegionSpecifier {
    hbase::RegionSpecifier {
        r#type: hbase::region_specifier::RegionSpecifierType::RegionName as i32,
        value: Bytes::copy_from_slice(name),
    }
}

/// The client's locate scan for `row` of `table`: the cells (row, qualifier, value) of the
/// first `hbase:meta` row at or before it.
pub fn locate(
    client: &mut TcpStream,
    call_id: u32,
    table: &str,
    row: &str,
) -> Vec<(Bytes, Bytes, Bytes)> {
    let locate = hbase::ScanRequest {
        region: Some(region(b"hbase:meta,,1")),
        scan: Some(hbase::Scan {
            start_row: Some(Bytes::from(format!("{table},{row},99999999999999"))),
            stop_row: Some(Bytes::from(format!("{table},,"))),
            include_stop_row: Some(true),
            reversed: Some(true),
            column: vec![hbase::Column {
                family: Bytes::from_static(b"info"),
                qualifier: Vec::new(),
            }],
            ..Default::default()
        }),
        number_of_rows: Some(1),
        ..Default::default()
    };
    let (param, cells) = call(client, call_id, "Scan", &locate).expect("meta scan");
    let scan = hbase::ScanResponse::decode(param).expect("decodes");
    let mut reader = cellar_proto::cellblock::CellReader::new(cells);
    let mut found = scan
        .results
        .iter()
        .flat_map(|r| r.cell.clone())
        .map(|c| {
            (
                c.row.unwrap_or_default(),
                c.qualifier.unwrap_or_default(),
                c.value.unwrap_or_default(),
            )
        })
        .collect::<Vec<_>>();
    while let Some(c) = reader.next_cell().expect("cell block") {
        found.push((c.row, c.qualifier, c.value));
    }
    found
}

/// A connection to one service that numbers its calls itself.
pub struct Conn {
    stream: TcpStream,
    next_call: u32,
}

impl Conn {
    /// Connects and sends the preamble and a connection header naming `service`.
    pub fn open(addr: &str, service: &str) -> Conn {
        Conn::open_as(addr, service, "cellar-test")
    }

    /// [`Conn::open`] as `user`.
    pub fn open_as(addr: &str, service: &str, user: &str) -> Conn {
        let stream = open_as(addr, service, user);
        stream.set_nodelay(true).expect("nodelay");
        Conn {
            stream,
            next_call: 1,
        }
    }

    /// One call and its answer: `Ok((response message, cell block))` or `Err(exception)`.
    pub fn call(
        &mut self,
        method: &str,
        param: &impl Message,
    ) -> Result<(Bytes, Bytes), hbase::ExceptionResponse> {
        let id = self.next_call;
        self.next_call += 1;
        call(&mut self.stream, id, method, param)
    }

    /// The name of the region of `table` holding `row`, from the client's reversed scan of
    /// `hbase:meta`.
    pub fn locate(&mut self, table: &str, row: &str) -> Bytes {
        let id = self.next_call;
        self.next_call += 1;
        locate(&mut self.stream, id, table, row)
            .into_iter()
            .find(|(_, q, _)| q.as_ref() == b"regioninfo")
            .map(|(r, _, _)| r)
            .expect("a meta row for the table")
    }

    /// Puts `value` in `family:qualifier` of `row`.
    pub fn put(
        &mut self,
        region_name: &Bytes,
        row: &[u8],
        family: &[u8],
        qualifier: &[u8],
        value: &[u8],
    ) {
        use hbase::mutation_proto::column_value::QualifierValue;
        let m = hbase::MutationProto {
            row: Some(Bytes::copy_from_slice(row)),
            mutate_type: Some(hbase::mutation_proto::MutationType::Put as i32),
            column_value: vec![hbase::mutation_proto::ColumnValue {
                family: Bytes::copy_from_slice(family),
                qualifier_value: vec![QualifierValue {
                    qualifier: Some(Bytes::copy_from_slice(qualifier)),
                    value: Some(Bytes::copy_from_slice(value)),
                    ..Default::default()
                }],
            }],
            ..Default::default()
        };
        let req = hbase::MutateRequest {
            region: region(region_name),
            mutation: m,
            ..Default::default()
        };
        self.call("Mutate", &req).expect("Mutate");
    }

    /// The newest value of the first cell of `row`.
    pub fn get(&mut self, region_name: &Bytes, row: &[u8]) -> Option<Bytes> {
        let req = hbase::GetRequest {
            region: region(region_name),
            get: hbase::Get {
                row: Bytes::copy_from_slice(row),
                ..Default::default()
            },
        };
        let (param, cells) = self.call("Get", &req).expect("Get");
        let resp = hbase::GetResponse::decode(param).expect("decodes");
        if let Some(c) = resp.result.iter().flat_map(|r| r.cell.iter()).next() {
            return c.value.clone();
        }
        let mut reader = cellar_proto::cellblock::CellReader::new(cells);
        reader.next_cell().expect("cell block").map(|c| c.value)
    }
}
