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

const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// One connection to a service (`ClientService`, `MasterService`).
pub struct Conn {
    stream: TcpStream,
    next_call: u32,
}

impl Conn {
    /// Connects and sends the preamble and a connection header naming `service`.
    pub fn open(addr: &str, service: &str) -> Conn {
        let mut stream = TcpStream::connect(addr).expect("connect to the HBase port");
        stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        let mut out = BytesMut::new();
        out.extend_from_slice(&hbase_wire::HBAS_MAGIC);
        out.extend_from_slice(&[hbase_wire::RPC_VERSION, hbase_wire::AUTH_SIMPLE]);
        let header = hbase::ConnectionHeader {
            user_info: Some(hbase::UserInformation {
                effective_user: "cellar-test".into(),
                real_user: None,
            }),
            service_name: Some(service.into()),
            cell_block_codec_class: Some(hbase_wire::KEY_VALUE_CODEC.into()),
            ..Default::default()
        };
        hbase_wire::encode_connection_header(&mut out, &header);
        stream.write_all(&out).expect("send preamble and header");
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
        let call_id = self.next_call;
        self.next_call += 1;
        let mut out = BytesMut::new();
        hbase_wire::encode_request(&mut out, call_id, method, param, &[]);
        self.stream.write_all(&out).expect("send request");
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).expect("response length");
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut body).expect("response body");
        let (header, param, cells) =
            hbase_wire::decode_response(Bytes::from(body)).expect("a well-formed response");
        assert_eq!(header.call_id, Some(call_id), "answer for the call sent");
        match header.exception {
            Some(e) => Err(e),
            None => Ok((param, cells)),
        }
    }

    /// The name of the region of `table` holding `row`, from the client's reversed scan of
    /// `hbase:meta`.
    pub fn locate(&mut self, table: &str, row: &str) -> Bytes {
        let scan = hbase::ScanRequest {
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
        let (param, cells) = self.call("Scan", &scan).expect("meta scan");
        let scan = hbase::ScanResponse::decode(param).expect("decodes");
        if let Some(c) = scan.results.iter().flat_map(|r| r.cell.iter()).next() {
            return c.row.clone().unwrap_or_default();
        }
        let mut reader = cellar_proto::cellblock::CellReader::new(cells);
        reader
            .next_cell()
            .expect("cell block")
            .map(|c| c.row)
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

/// A region specifier by region name.
pub fn region(name: &[u8]) -> hbase::RegionSpecifier {
    hbase::RegionSpecifier {
        r#type: hbase::region_specifier::RegionSpecifierType::RegionName as i32,
        value: Bytes::copy_from_slice(name),
    }
}
