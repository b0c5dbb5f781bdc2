//! One function per fuzz target; `fuzz/fuzz_targets/<name>.rs` calls it with libFuzzer's input.
//! The first byte of an input often selects what to decode (a method, a codec, flags for
//! checksum repair, see [`crate::fixup`]); the corpora under `fuzz/corpus/<name>/` are written
//! in these layouts by [`crate::seeds`].

use crate::fixup;
use crate::memfs::MemFs;
use crate::shell::parser;
use bytes::{Buf, Bytes, BytesMut};
use cellar_model::{Cell, TableSchema};
use cellar_proto::cellblock::{self, CellReader};
use cellar_proto::{convert, frame, hbase_wire, pb};
use cellar_storage::block_cache::{BlockCache, Priority};
use cellar_storage::fs::FsRef;
use cellar_storage::fuzzing::{region_descriptor, store_files, storefile_block, wal_segment};
use cellar_storage::iter::CellIter;
use cellar_storage::region::wal_payload;
use cellar_storage::storefile::{StoreFile, StoreFileOptions, StoreFileWriter};
use prost::Message;
use std::path::Path;
use std::sync::Arc;

/// Most entries a target reads from one store file or segment (inputs are far smaller).
const MAX_ENTRIES: usize = 100_000;

/// A target: one fuzz input in, a panic or an abort on a defect.
pub type Target = fn(&[u8]);

/// Every target, by name: what `scripts/fuzz.sh` runs and the corpus directories.
pub const ALL: &[(&str, Target)] = &[
    ("native_frame", native_frame),
    ("native_request", native_request),
    ("cellblock", cellblock),
    ("hbase_frame", hbase_frame),
    ("hbase_request", hbase_request),
    ("storefile", storefile),
    ("storefile_block", storefile_block),
    ("region_descriptor", region_descriptor),
    ("store_refs", store_refs),
    ("wal_edit", wal_edit),
    ("wal_segment", wal_segment),
    ("shell_parser", shell_parser),
    ("filter_lang", filter_lang),
    ("config", config),
    ("cert_identity", cert_identity),
    ("permission_record", permission_record),
    ("thrift_message", thrift_message),
    ("hfile", hfile),
];

/// A decoded message, encoded again, decodes to a message that encodes to the same bytes.
/// (Bytes, not values, are compared: a float field may hold a NaN.)
fn round_trip<M: Message + Default>(m: &M, what: &str) {
    let once = m.encode_to_vec();
    let back = M::decode(once.as_slice())
        .unwrap_or_else(|e| panic!("{what} re-encoded does not decode: {e}"));
    assert_eq!(back.encode_to_vec(), once, "{what} does not round-trip");
}

/// A varint-length-prefixed part and the rest.
fn split_prefixed(data: &[u8]) -> Option<(Bytes, Bytes)> {
    let mut b = data;
    let len = prost::decode_length_delimiter(&mut b).ok()?;
    if len > b.len() {
        return None;
    }
    let (p, rest) = b.split_at(len);
    Some((Bytes::copy_from_slice(p), Bytes::copy_from_slice(rest)))
}

/// Strips the u32 BE length prefix of an encoded frame, checking it.
fn body_of(frame: BytesMut) -> Bytes {
    let mut f = frame.freeze();
    let len = f.get_u32() as usize;
    assert_eq!(len, f.len(), "frame length prefix");
    f
}

// ---- native protocol ----

/// `preamble (8 bytes) | frame body`: the preamble check, then the body as a request and as a
/// response (and the server's header peek). Decoded frames are encoded again and must decode
/// to the same header, parameter and cell block.
pub fn native_frame(data: &[u8]) {
    let Some((pre, body)) = data.split_first_chunk::<8>() else {
        return;
    };
    let _ = frame::check_preamble(pre);
    let body = Bytes::copy_from_slice(body);
    let peeked = frame::peek_request_header(&body);
    if let Ok((h, parts)) = frame::decode_request(body.clone()) {
        round_trip(&h, "RequestHeader");
        assert_eq!(peeked.as_ref(), Some(&h), "peek and decode disagree");
        let mut out = BytesMut::new();
        frame::encode_frame_raw(&mut out, &h, &parts.param, &parts.cellblock);
        let (h2, p2) = frame::decode_request(body_of(out)).expect("a re-encoded request decodes");
        assert_eq!(
            (h2, p2.param, p2.cellblock),
            (h, parts.param, parts.cellblock)
        );
    }
    if let Ok((h, parts)) = frame::decode_response(body) {
        round_trip(&h, "ResponseHeader");
        let mut out = BytesMut::new();
        frame::encode_frame_raw(&mut out, &h, &parts.param, &parts.cellblock);
        let (h2, p2) = frame::decode_response(body_of(out)).expect("a re-encoded response decodes");
        assert_eq!(
            (h2, p2.param, p2.cellblock),
            (h, parts.param, parts.cellblock)
        );
    }
}

fn decode<M: Message + Default>(param: &Bytes, what: &str) -> Option<M> {
    let m = frame::decode_param::<M>(param.clone(), what).ok()?;
    round_trip(&m, what);
    Some(m)
}

fn get(g: pb::Get) {
    if let Ok(get) = convert::get_from_pb(g) {
        let back = convert::get_from_pb(convert::get_to_pb(&get))
            .unwrap_or_else(|e| panic!("a converted get does not convert back: {e}"));
        assert_eq!(back, get, "get does not round-trip");
    }
}

fn scan(s: pb::Scan) {
    if let Ok(scan) = convert::scan_from_pb(s) {
        let back = convert::scan_from_pb(convert::scan_to_pb(&scan))
            .unwrap_or_else(|e| panic!("a converted scan does not convert back: {e}"));
        assert_eq!(back, scan, "scan does not round-trip");
    }
}

fn mutation(m: &pb::Mutation, cells: &mut CellReader) {
    if let Ok((rm, kind)) = convert::mutation_from_pb(m, cells) {
        let mut block = BytesMut::new();
        let again = convert::mutation_to_pb(&rm, kind, &mut block);
        let back = convert::mutation_from_pb(&again, &mut CellReader::new(block.freeze()))
            .unwrap_or_else(|e| panic!("a converted mutation does not convert back: {e}"));
        assert_eq!(back, (rm, kind), "mutation does not round-trip");
    }
}

fn condition(c: pb::Condition) {
    if let Ok(cond) = convert::condition_from_pb(c) {
        let back = convert::condition_from_pb(convert::condition_to_pb(&cond))
            .unwrap_or_else(|e| panic!("a converted condition does not convert back: {e}"));
        assert_eq!(back, cond, "condition does not round-trip");
    }
}

fn schema(s: pb::TableSchema) {
    if let Ok(schema) = convert::schema_from_pb(s) {
        let _ = schema.validate();
        let back = convert::schema_from_pb(convert::schema_to_pb(&schema))
            .unwrap_or_else(|e| panic!("a converted schema does not convert back: {e}"));
        assert_eq!(back, schema, "schema does not round-trip");
    }
}

fn results(rs: &[pb::Result], cells: Bytes) {
    let mut reader = CellReader::new(cells);
    for r in rs {
        if convert::result_from_pb(r, &mut reader).is_err() {
            return;
        }
    }
}

/// `selector | varint param_len | param | cell block`. Selector bits 0-6 are a [`pb::Method`];
/// bit 7 clear: the method's request, decoded and converted as the server's service does
/// (`crates/server/src/service.rs`); set: its response, as the client reads it. Conversions
/// Cellar has both ways (gets, scans, mutations with their cells, conditions, filters,
/// schemas) must round-trip.
pub fn native_request(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Ok(method) = pb::Method::try_from(i32::from(sel & 0x7f)) else {
        return;
    };
    let Some((param, cells)) = split_prefixed(rest) else {
        return;
    };
    if sel & 0x80 != 0 {
        native_response(method, &param, cells);
        return;
    }
    use pb::Method as M;
    match method {
        M::Unspecified | M::Ping | M::ListTables | M::Status => {}
        M::Grant | M::Revoke => {
            let perm = if method == M::Grant {
                decode::<pb::GrantRequest>(&param, "GrantRequest").and_then(|r| r.permission)
            } else {
                decode::<pb::RevokeRequest>(&param, "RevokeRequest").and_then(|r| r.permission)
            };
            if let Some(p) = perm {
                let _ = cellar_server::native_service::scope_from_pb(p.scope.as_ref());
                let _ = cellar_server::security::acl::Actions::parse(&p.actions);
            }
        }
        M::UserPermissions => {
            if let Some(r) = decode::<pb::UserPermissionsRequest>(&param, "UserPermissionsRequest")
            {
                let _ = cellar_server::native_service::scope_from_pb(r.scope.as_ref());
            }
        }
        M::LocateRegion => {
            decode::<pb::LocateRegionRequest>(&param, "LocateRegionRequest");
        }
        M::ListRegions => {
            decode::<pb::ListRegionsRequest>(&param, "ListRegionsRequest");
        }
        M::Get => {
            if let Some(g) = decode::<pb::GetRequest>(&param, "GetRequest").and_then(|r| r.get) {
                get(g);
            }
        }
        M::Mutate => {
            let Some(req) = decode::<pb::MutateRequest>(&param, "MutateRequest") else {
                return;
            };
            if let Some(m) = &req.mutation {
                mutation(m, &mut CellReader::new(cells));
            }
            if let Some(c) = req.condition {
                condition(c);
            }
        }
        M::Multi => {
            let Some(req) = decode::<pb::MultiRequest>(&param, "MultiRequest") else {
                return;
            };
            let mut reader = CellReader::new(cells);
            for a in req.actions {
                match a.op {
                    Some(pb::action::Op::Get(g)) => get(g),
                    Some(pb::action::Op::Mutation(m)) => mutation(&m, &mut reader),
                    None => {}
                }
            }
        }
        M::ScanOpen => {
            if let Some(s) =
                decode::<pb::ScanOpenRequest>(&param, "ScanOpenRequest").and_then(|r| r.scan)
            {
                scan(s);
            }
        }
        M::ScanNext => {
            decode::<pb::ScanNextRequest>(&param, "ScanNextRequest");
        }
        M::PrepareScan => {
            if let Some(s) =
                decode::<pb::PrepareScanRequest>(&param, "PrepareScanRequest").and_then(|r| r.scan)
            {
                scan(s);
            }
        }
        M::ClosePreparedScan => {
            decode::<pb::ClosePreparedScanRequest>(&param, "ClosePreparedScanRequest");
        }
        M::ScanClose => {
            decode::<pb::ScanCloseRequest>(&param, "ScanCloseRequest");
        }
        M::CreateTable => {
            if let Some(s) = decode::<pb::CreateTableRequest>(&param, "CreateTableRequest")
                .and_then(|r| r.schema)
            {
                schema(s);
            }
        }
        M::DeleteTable
        | M::DisableTable
        | M::EnableTable
        | M::TruncateTable
        | M::DescribeTable
        | M::FlushTable => {
            decode::<pb::TableRequest>(&param, "TableRequest");
        }
        M::AlterTable => {
            let Some(req) = decode::<pb::AlterTableRequest>(&param, "AlterTableRequest") else {
                return;
            };
            for f in req.put_families {
                if let Ok(fam) = convert::family_from_pb(f) {
                    let back =
                        convert::family_from_pb(convert::family_to_pb(&fam)).unwrap_or_else(|e| {
                            panic!("a converted family does not convert back: {e}")
                        });
                    assert_eq!(back, fam, "family does not round-trip");
                }
            }
        }
        M::CompactTable => {
            decode::<pb::CompactTableRequest>(&param, "CompactTableRequest");
        }
        M::SplitTable => {
            decode::<pb::SplitTableRequest>(&param, "SplitTableRequest");
        }
        M::MergeRegions => {
            decode::<pb::MergeRegionsRequest>(&param, "MergeRegionsRequest");
        }
        M::Snapshot => {
            decode::<pb::SnapshotRequest>(&param, "SnapshotRequest");
        }
        M::ListSnapshots => {}
        M::DeleteSnapshot | M::RestoreSnapshot => {
            decode::<pb::SnapshotNameRequest>(&param, "SnapshotNameRequest");
        }
        M::CloneSnapshot => {
            decode::<pb::CloneSnapshotRequest>(&param, "CloneSnapshotRequest");
        }
        M::Balance => {}
        M::BalanceSwitch => {
            decode::<pb::BalanceSwitchRequest>(&param, "BalanceSwitchRequest");
        }
        M::MoveRegion => {
            decode::<pb::MoveRegionRequest>(&param, "MoveRegionRequest");
        }
        M::AssignRegion | M::UnassignRegion => {
            decode::<pb::RegionNameRequest>(&param, "RegionNameRequest");
        }
        M::TransportHello => {
            decode::<pb::TransportHelloRequest>(&param, "TransportHelloRequest");
        }
        M::OpenRegion => {
            if let Some(s) =
                decode::<pb::OpenRegionRequest>(&param, "OpenRegionRequest").and_then(|r| r.schema)
            {
                schema(s);
            }
        }
        M::CloseRegion => {
            decode::<pb::CloseRegionRequest>(&param, "CloseRegionRequest");
        }
        M::FlushRegion => {
            decode::<pb::FlushRegionRequest>(&param, "FlushRegionRequest");
        }
        M::PrepareSplit => {
            decode::<pb::PrepareSplitRequest>(&param, "PrepareSplitRequest");
        }
        M::SplitRegion => {
            decode::<pb::SplitRegionRequest>(&param, "SplitRegionRequest");
        }
        M::MergeRegion => {
            decode::<pb::MergeRegionRequest>(&param, "MergeRegionRequest");
        }
        M::SnapshotRegion => {
            decode::<pb::SnapshotRegionRequest>(&param, "SnapshotRegionRequest");
        }
        M::BulkLoadRegion => {
            decode::<pb::BulkLoadRegionRequest>(&param, "BulkLoadRegionRequest");
        }
    }
}

/// A response as the client reads it (`crates/client`): the message, then each result's
/// cells from the cell block, and table schemas.
fn native_response(method: pb::Method, param: &Bytes, cells: Bytes) {
    use pb::Method as M;
    match method {
        M::Get => {
            if let Some(r) = decode::<pb::GetResponse>(param, "GetResponse").and_then(|r| r.result)
            {
                results(&[r], cells);
            }
        }
        M::Mutate => {
            if let Some(r) =
                decode::<pb::MutateResponse>(param, "MutateResponse").and_then(|r| r.result)
            {
                results(&[r], cells);
            }
        }
        M::Multi => {
            if let Some(r) = decode::<pb::MultiResponse>(param, "MultiResponse") {
                let rs: Vec<_> = r.results.into_iter().filter_map(|a| a.result).collect();
                results(&rs, cells);
            }
        }
        M::ScanOpen => {
            if let Some(r) = decode::<pb::ScanOpenResponse>(param, "ScanOpenResponse") {
                scan_results(r.encoding(), &r.results, cells);
            }
        }
        M::ScanNext => {
            if let Some(r) = decode::<pb::ScanNextResponse>(param, "ScanNextResponse") {
                scan_results(r.encoding(), &r.results, cells);
            }
        }
        M::LocateRegion => {
            decode::<pb::LocateRegionResponse>(param, "LocateRegionResponse");
        }
        M::ListRegions => {
            decode::<pb::ListRegionsResponse>(param, "ListRegionsResponse");
        }
        M::ListTables => {
            decode::<pb::ListTablesResponse>(param, "ListTablesResponse");
        }
        M::DescribeTable => {
            if let Some(s) = decode::<pb::DescribeTableResponse>(param, "DescribeTableResponse")
                .and_then(|r| r.table)
                .and_then(|t| t.schema)
            {
                schema(s);
            }
        }
        M::Status => {
            decode::<pb::StatusResponse>(param, "StatusResponse");
        }
        M::Balance => {
            decode::<pb::BalanceResponse>(param, "BalanceResponse");
        }
        M::BalanceSwitch => {
            decode::<pb::BalanceSwitchResponse>(param, "BalanceSwitchResponse");
        }
        M::PrepareSplit => {
            decode::<pb::PrepareSplitResponse>(param, "PrepareSplitResponse");
        }
        M::TransportHello => {
            decode::<pb::TransportHelloResponse>(param, "TransportHelloResponse");
        }
        _ => {
            decode::<pb::Empty>(param, "Empty");
        }
    }
}

/// `u32 BE n | cell block`: `take(n)` as a mutation or result takes its cells, then every cell
/// up to the first error; the cells read, encoded again, must be the bytes they came from.
/// A scan response's results in the encoding it names.
fn scan_results(encoding: pb::ResultEncoding, rs: &[pb::Result], cells: Bytes) {
    match encoding {
        pb::ResultEncoding::PreparedV1 => cellar_proto::prepared::fuzz_decode(&cells),
        pb::ResultEncoding::CellBlockZstd => {
            if let Ok(plain) = zstd_inflate(&cells) {
                results(rs, Bytes::from(plain));
            }
        }
        pb::ResultEncoding::CellBlock => results(rs, cells),
    }
}

/// A bounded inflate of a zstd frame (as the client's).
fn zstd_inflate(data: &[u8]) -> Result<Vec<u8>, ()> {
    let size = zstd::zstd_safe::get_frame_content_size(data)
        .ok()
        .flatten()
        .filter(|&n| n <= 1 << 20)
        .ok_or(())?;
    zstd::bulk::decompress(data, size as usize).map_err(|_| ())
}

/// A prepared scan's compact result block (`cellar_proto::prepared`).
pub fn prepared_results(data: &[u8]) {
    cellar_proto::prepared::fuzz_decode(data);
}

pub fn cellblock(data: &[u8]) {
    let Some((n, block)) = data.split_first_chunk::<4>() else {
        return;
    };
    let block = Bytes::copy_from_slice(block);
    let _ = CellReader::new(block.clone()).take(u32::from_be_bytes(*n) as usize);
    let mut reader = CellReader::new(block.clone());
    let mut cells: Vec<Cell> = Vec::new();
    while let Ok(Some(c)) = reader.next_cell() {
        cells.push(c);
    }
    let mut out = BytesMut::new();
    for c in &cells {
        cellblock::put(&mut out, c);
    }
    assert_eq!(
        &out[..],
        &block[..out.len().min(block.len())],
        "cells encoded again differ from the block they came from"
    );
    let back = CellReader::new(out.freeze())
        .take(cells.len())
        .expect("re-encoded cells decode");
    assert_eq!(back, cells, "cells do not round-trip");
    // The block read as `KeyValueCodecWithTags`: a block of plain cells comes back as it is;
    // whatever else is accepted reads without a panic.
    if reader.is_empty() {
        assert_eq!(
            cellblock::without_tags(block.clone()).as_ref(),
            Ok(&block),
            "a block without tags changed"
        );
    }
    if let Ok(plain) = cellblock::without_tags(block.clone()) {
        if plain.len() == block.len() {
            assert_eq!(plain, block, "a block whose cells had no tags changed");
        }
        let mut reader = CellReader::new(plain);
        while let Ok(Some(_)) = reader.next_cell() {}
    }
}

// ---- HBase wire ----

/// `preamble (6 bytes) | body`: the preamble's classification, then the body as a connection
/// header, a request frame and a response frame; what decodes is encoded again and must
/// decode to the same parts.
pub fn hbase_frame(data: &[u8]) {
    let Some((pre, body)) = data.split_first_chunk::<6>() else {
        return;
    };
    let _ = hbase_wire::classify_preamble(pre);
    let body = Bytes::copy_from_slice(body);
    if let Ok(h) = hbase_wire::decode_connection_header(body.clone()) {
        round_trip(&h, "ConnectionHeader");
        let mut out = BytesMut::new();
        hbase_wire::encode_connection_header(&mut out, &h);
        let back = hbase_wire::decode_connection_header(body_of(out))
            .expect("a re-encoded connection header decodes");
        assert_eq!(back, h, "connection header does not round-trip");
    }
    if let Ok(req) = hbase_wire::decode_request(body.clone()) {
        round_trip(&req.header, "RequestHeader");
        let mut again = req.header.encode_length_delimited_to_vec();
        if req.header.request_param() {
            let _ = prost::encode_length_delimiter(req.param.len(), &mut again);
            again.extend_from_slice(&req.param);
        }
        again.extend_from_slice(&req.cellblock);
        let back = hbase_wire::decode_request(Bytes::from(again))
            .expect("a re-encoded HBase request decodes");
        assert_eq!(
            (back.header, back.param, back.cellblock),
            (req.header, req.param, req.cellblock)
        );
    }
    if let Ok((h, param, cells)) = hbase_wire::decode_response(body) {
        round_trip(&h, "ResponseHeader");
        let mut again = h.encode_length_delimited_to_vec();
        if h.exception.is_none() {
            let _ = prost::encode_length_delimiter(param.len(), &mut again);
            again.extend_from_slice(&param);
            again.extend_from_slice(&cells);
        }
        let back = hbase_wire::decode_response(Bytes::from(again))
            .expect("a re-encoded HBase response decodes");
        assert_eq!(back, (h, param, cells));
    }
}

/// `selector | varint param_len | param | cell block`: the selector picks a (service,
/// method) of the HBase front end ([`cellar_server::hbase::fuzzing::METHODS`]); the call is
/// decoded and converted as its handler does, cells taken from the KeyValue cell block.
pub fn hbase_request(data: &[u8]) {
    use cellar_server::hbase::fuzzing::{decode_call, METHODS};
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Some(&(service, method)) = METHODS.get(usize::from(sel) % METHODS.len()) else {
        return;
    };
    let Some((param, cells)) = split_prefixed(rest) else {
        return;
    };
    let _ = decode_call(service, method, param, cells);
}

// ---- storage files ----

/// `flags | file`: a whole store file opened from memory (footer, meta, index, bloom),
/// verified, every block read and iterated (through a block cache when flag 4 is set), and
/// sought to its own keys. Flag 1 repairs the footer, flag 2 the block checksums
/// ([`fixup::store_file`]). What iterates is written again with the writer (when its keys are
/// valid and ascending) and must read back the same.
pub fn storefile(data: &[u8]) {
    let Some((&flags, file)) = data.split_first() else {
        return;
    };
    let mut file = file.to_vec();
    fixup::store_file(&mut file, flags & 1 != 0, flags & 2 != 0);
    let mem = MemFs::new();
    let fs: FsRef = mem.clone();
    let path = Path::new("/t/f/0000000000000001.sf");
    mem.put(path, file);
    let cache = (flags & 4 != 0).then(|| Arc::new(BlockCache::new(1 << 20)));
    let Ok(sf) = StoreFile::open(&fs, path, 1, cache, Priority::Normal) else {
        return;
    };
    let _ = sf.verify();
    let _ = sf.middle_key();
    let _ = sf.may_contain_row(b"row");
    let _ = sf.may_contain_column(b"row", b"q");
    let entries = read_all(&sf);
    if flags & 4 != 0 {
        // Again, from the cache.
        assert_eq!(read_all(&sf), entries, "a cached read differs");
    }
    let mut it = sf.iter(false);
    for (k, _) in entries.iter().step_by(entries.len() / 8 + 1) {
        let _ = it.seek(k);
        let _ = it.seek_for_prev(k);
        let _ = sf.may_contain_row(k);
    }

    let meta = sf.meta().clone();
    let opts = StoreFileOptions {
        block_size: 512,
        compression: meta.compression,
        bloom: meta.bloom,
        bloom_bits_per_key: 10,
        restart_interval: 16,
    };
    let copy = Path::new("/t/f/0000000000000002.sf");
    let Ok(mut w) = StoreFileWriter::create(&fs, copy, opts) else {
        return;
    };
    for (k, v) in &entries {
        if w.add(k, v).is_err() {
            return;
        }
    }
    w.finish()
        .expect("the writer finishes a file of valid, ordered keys");
    let again = StoreFile::open(&fs, copy, 2, None, Priority::Normal)
        .expect("a file the writer wrote opens");
    again.verify().expect("a file the writer wrote verifies");
    assert_eq!(read_all(&again), entries, "store file does not round-trip");
}

fn read_all(sf: &Arc<StoreFile>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = sf.iter(true);
    let mut entries = Vec::new();
    if it.seek_to_first().is_err() {
        return entries;
    }
    while it.valid() && entries.len() < MAX_ENTRIES {
        entries.push((it.key().to_vec(), it.value().to_vec()));
        if it.next().is_err() {
            break;
        }
    }
    entries
}

/// `codec | block`: codec 0 is an uncompressed block; 1-3 (lz4, zstd, snappy) are decompressed
/// first (and must compress and decompress back). The block decoder alone: restart array,
/// entries, iteration, seeks, and the builder's round trip.
pub fn storefile_block(data: &[u8]) {
    let Some((&codec, payload)) = data.split_first() else {
        return;
    };
    let raw = match codec & 3 {
        0 => payload.to_vec(),
        c => match storefile_block::decompress_payload(c, payload) {
            Ok(raw) => raw,
            Err(_) => return,
        },
    };
    let _ = storefile_block::block(Bytes::from(raw));
}

/// `flags | bytes`: a region descriptor (`.regioninfo`), the bytes as the whole file, or with
/// flag 1 as its body (header and CRC added). What reads is written again with the
/// descriptor writer and must read back the same.
pub fn region_descriptor(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let file = if flags & 1 != 0 {
        fixup::region_descriptor(rest)
    } else {
        rest.to_vec()
    };
    let fs = MemFs::new();
    let dir = Path::new("/t/r1");
    fs.put(&dir.join(region_descriptor::DESCRIPTOR_FILE), file);
    let Ok((info, schema)) = region_descriptor::read(&*fs, dir) else {
        return;
    };
    let dir2 = Path::new("/t/r2");
    region_descriptor::write(&*fs, dir2, &info, &schema).expect("writes to memory");
    let back: (_, TableSchema) =
        region_descriptor::read(&*fs, dir2).expect("a written descriptor reads back");
    assert_eq!(
        back,
        (info, schema),
        "region descriptor does not round-trip"
    );
}

/// `flags | bytes`: flag 1 clear, a reference file; set, a compaction marker. Flag 2 treats
/// the bytes as the body and appends its `crc=` line. What reads is written again and must
/// read back the same.
pub fn store_refs(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let marker = flags & 1 != 0;
    let file = match (flags & 2 != 0, marker) {
        (false, _) => rest.to_vec(),
        (true, false) => fixup::reference(rest),
        (true, true) => fixup::marker(rest),
    };
    let mem = MemFs::new();
    let fs: FsRef = mem.clone();
    let path = Path::new("/t/f/0000000000000001.x");
    mem.put(path, file);
    let again = Path::new("/t/f/0000000000000002.x");
    if marker {
        if let Ok(Some(marker)) = store_files::read_marker(&fs, path) {
            store_files::write_marker(&fs, again, &marker).expect("writes to memory");
            let back = store_files::read_marker(&fs, again).expect("reads from memory");
            assert_eq!(back, Some(marker), "compaction marker does not round-trip");
        }
    } else if let Ok(r) = store_files::Reference::read(&fs, path) {
        r.write(&fs, again).expect("writes to memory");
        let back = store_files::Reference::read(&fs, again).expect("a written reference reads");
        assert_eq!(back, r, "reference does not round-trip");
    }
}

/// A WAL edit payload (the cells of one row mutation, with a nonce in version 2, cluster ids
/// and maybe a nonce in version 3). One that decodes is exactly what the encoder writes for
/// its cells, nonce and cluster ids.
pub fn wal_edit(data: &[u8]) {
    let Ok(cells) = wal_payload::decode(data, "fuzz edit") else {
        return;
    };
    let header = wal_payload::edit_header(data).expect("an edit that decodes has a header");
    let triples: Vec<(&[u8], &[u8], &[u8])> =
        cells.iter().map(|c| (c.family, c.key, c.value)).collect();
    let mut out = Vec::new();
    wal_payload::encode(&mut out, header.nonce, &header.cluster_ids, &triples);
    assert_eq!(out, data, "edit does not round-trip");
}

/// The salt of the segment header flag 1 puts in front of a `wal_segment` input.
pub const FUZZ_SALT: u64 = 0x5eed_5a17_f022;

/// `flags | segment`: a WAL segment (flag 1 puts a valid version 2 segment header in front;
/// flag 2 repairs record checksums, [`fixup::wal_segment`]): the header check, records walked
/// with `decode_at`, `replay_segment`, and each record's payload as an edit. Replayed records
/// framed again (version 2) must replay the same, with no damage.
pub fn wal_segment(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mut seg = Vec::with_capacity(rest.len() + wal_segment::HEADER_LEN);
    if flags & 1 != 0 {
        seg.extend_from_slice(&wal_segment::segment_header(FUZZ_SALT));
    }
    seg.extend_from_slice(rest);
    if flags & 2 != 0 {
        fixup::wal_segment(&mut seg);
    }
    let header = wal_segment::check_segment_header("fuzz-segment", &seg);
    let mut walked = Vec::new();
    if let Ok(h) = &header {
        for p in 0..seg.len().min(32) {
            let _ = wal_segment::decode_at(h, &seg, p);
        }
        let mut pos = h.len;
        while let wal_segment::Decoded::Record {
            region,
            seq,
            payload,
            next,
        } = wal_segment::decode_at(h, &seg, pos)
        {
            assert!(next > pos, "decode_at does not advance");
            walked.push((region, seq, Bytes::copy_from_slice(&seg[payload])));
            pos = next;
            if walked.len() >= MAX_ENTRIES {
                return;
            }
        }
    }
    let seg = Bytes::from(seg);
    let Ok(replay) = wal_segment::replay_segment("fuzz-segment", &seg) else {
        return;
    };
    let Ok(header) = header else {
        panic!("replay accepted a bad header");
    };
    let got: Vec<_> = replay
        .records
        .iter()
        .map(|r| (r.region, r.seq, r.payload.clone()))
        .collect();
    assert_eq!(got, walked, "replay and decode_at disagree");
    if let Some(d) = &replay.damage {
        assert!(d.offset as usize >= header.len, "damage inside the header");
    }
    for r in &replay.records {
        let _ = wal_payload::decode(&r.payload, "fuzz record");
    }
    let salt = header.salt ^ 1;
    let framer = wal_segment::RecordFramer::new(salt);
    let mut again = wal_segment::segment_header(salt).to_vec();
    for r in &replay.records {
        let h = framer
            .header(r.region, r.seq, &r.payload)
            .expect("payload fits");
        again.extend_from_slice(&h);
        again.extend_from_slice(&r.payload);
    }
    let back = wal_segment::replay_segment("fuzz-segment", &Bytes::from(again))
        .expect("re-framed records replay");
    assert!(back.damage.is_none(), "re-framed records leave damage");
    assert_eq!(
        back.records, replay.records,
        "WAL records do not round-trip"
    );
}

// ---- the shell and the config file ----

/// The shell's command language (`cellar shell`), on the input as UTF-8 (lossy).
pub fn shell_parser(data: &[u8]) {
    let src = String::from_utf8_lossy(data);
    let _ = parser::parse_script(&src);
}

/// HBase's filter language as the shell reads it. The language has no printer; a parsed
/// filter is validated and must round-trip through the native wire form.
pub fn filter_lang(data: &[u8]) {
    let Ok(f) = cellar_model::parse_filter(data) else {
        return;
    };
    let _ = f.validate();
    let back = convert::filter_from_pb(convert::filter_to_pb(&f))
        .unwrap_or_else(|e| panic!("a parsed filter does not convert back: {e}"));
    assert_eq!(back, f, "filter does not round-trip through the wire form");
}

/// `cellar.toml`: TOML into `ServerConfig`, validation, the engine configuration.
pub fn config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(c) = cellar_server::ServerConfig::from_toml(&text) {
        let _ = c.storage_config();
    }
}

/// A client certificate as the TLS handshake hands it over (DER): the user it names, if any,
/// is one a permission or an audit line can hold.
pub fn cert_identity(data: &[u8]) {
    if let Ok(user) = cellar_server::security::identity::user_from_certificate(data) {
        assert!(cellar_server::security::identity::check_user(&user).is_ok());
    }
}

/// A stored grant as meta holds it (`security::acl`): a record that decodes encodes to the
/// same bytes, and an actions value parses or is refused, never panics.
pub fn permission_record(data: &[u8]) {
    use cellar_server::security::acl;
    let (key, value) = match data.iter().position(|&b| b == 0xff) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    if let Ok((user, scope)) = acl::decode_key(key) {
        assert_eq!(
            acl::encode_key(&user, &scope),
            key,
            "a permission record does not round-trip"
        );
    }
    if let Ok(text) = std::str::from_utf8(value) {
        if let Ok(actions) = acl::Actions::parse(text) {
            assert_eq!(acl::Actions::parse(&actions.to_string()), Ok(actions));
        }
    }
}

/// A Thrift call as the gateway reads it (first byte: bit 0 the protocol, the other bits the
/// size of the pieces an unframed connection receives it in, 0: all at once): decoding never
/// panics; a decoded message's size in memory is within the limit; the scanner that finds
/// where an unframed call ends, fed piece by piece, agrees with the reader; and a decoded
/// message written again in the same protocol decodes to the same message.
pub fn thrift_message(data: &[u8]) {
    use cellar_server::thrift::protocol::{
        decoded_size, read_message, write_message, Limits, Protocol, Scanner,
    };
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let protocol = if first & 1 == 0 {
        Protocol::Binary
    } else {
        Protocol::Compact
    };
    let piece = match usize::from(first >> 1) {
        0 => rest.len().max(1),
        n => n,
    };
    let limits = Limits {
        max_depth: 16,
        max_string: 1 << 20,
        max_decoded: 4 << 20,
    };
    let read = read_message(rest, protocol, limits);
    let mut scanner = Scanner::new(protocol, limits);
    let mut scanned = Ok(None);
    let mut end = 0;
    while matches!(scanned, Ok(None)) && end < rest.len() {
        end = (end + piece).min(rest.len());
        scanned = scanner.advance(&rest[..end]);
    }
    match (&read, &scanned) {
        (Ok((_, used)), Ok(Some(n))) => assert_eq!(used, n, "the scanner and the reader disagree"),
        (Ok((_, used)), other) => panic!("the reader read {used} bytes, the scanner: {other:?}"),
        (Err(e), Ok(Some(n))) => panic!("the scanner found {n} bytes, the reader: {e}"),
        _ => {}
    }
    let Ok((msg, used)) = read else {
        return;
    };
    assert!(used <= rest.len(), "read past the input");
    assert!(
        decoded_size(&msg) <= limits.max_decoded,
        "the decoded message is over the limit"
    );
    let mut again = Vec::new();
    write_message(
        &mut again, protocol, &msg.name, msg.kind, msg.seq, &msg.body,
    );
    let (back, n) = read_message(&again, protocol, limits)
        .unwrap_or_else(|e| panic!("a re-encoded message does not decode: {e}"));
    assert_eq!(n, again.len(), "the re-encoded message has trailing bytes");
    // Doubles are compared through their encoding (a NaN is not equal to itself).
    let mut twice = Vec::new();
    write_message(
        &mut twice, protocol, &back.name, back.kind, back.seq, &back.body,
    );
    assert_eq!(twice, again, "the message does not round-trip");
}

/// An HBase store file (`crates/hfile`, `docs/hfile-format.md`). The first byte picks what the
/// rest is: 0, a whole HFile (opened from memory, every cell read); 1 and 2, one data block's
/// payload, plain or encoded, with bits 2-4 giving the cell format (tags, compressed tags,
/// sequence ids); 3, a block for codec `rest[0]` (trailer ordinal) decompressing to the u16
/// `rest[1..3]` bytes.
pub fn hfile(data: &[u8]) {
    use cellar_hfile::{fuzzing, Format, HFile};
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let format = Format {
        includes_tags: mode & 4 != 0,
        compress_tags: mode & 8 != 0,
        includes_mvcc: mode & 16 != 0,
    };
    match mode & 3 {
        0 => {
            if let Ok(file) = HFile::from_bytes("fuzz.hfile", rest.to_vec()) {
                let _ = file.cells().take(MAX_ENTRIES).count();
            }
        }
        1 | 2 => {
            if let Ok(cells) = fuzzing::decode_data_block(rest, format, mode & 3 == 2) {
                assert!(cells.len() <= rest.len(), "more cells than bytes");
            }
        }
        _ => {
            if let [codec, a, b, input @ ..] = rest {
                let size = usize::from(u16::from_be_bytes([*a, *b]));
                if let Ok(out) = fuzzing::decompress(u64::from(*codec), input, size) {
                    assert_eq!(out.len(), size, "decompressed to another size than asked");
                }
            }
        }
    }
}
