//! The table export file, version 1 (`docs/export-format.md`): a header with the table's
//! schema and region boundaries, blocks of cells in the native cell-block encoding, and an end
//! marker with the totals. Every part carries a CRC-32C, so a damaged or cut file is refused
//! with where and why, never imported in part without saying so.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use cellar_model::{Cell, TableSchema};
use cellar_proto::{cellblock, convert, pb};
use prost::Message;
use std::io::{Read, Write};

pub const MAGIC: &[u8; 8] = b"CELLAREX";
pub const VERSION: u16 = 1;
/// A block is written once its cells pass this many bytes.
pub const BLOCK_BYTES: usize = 1 << 20;
/// The largest block or header a reader accepts (a corrupt length must not allocate wildly).
const MAX_PART_BYTES: u32 = 256 << 20;

/// What an export holds besides its cells.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub schema: TableSchema,
    /// The start keys of every region but the first.
    pub split_keys: Vec<Bytes>,
}

/// The totals the end marker records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub rows: u64,
    pub cells: u64,
}

/// Writes an export to any writer; [`ExportWriter::finish`] writes the end marker.
pub struct ExportWriter<W: Write> {
    out: W,
    block: BytesMut,
    block_cells: u32,
    totals: Totals,
    last_row: Option<Bytes>,
    bytes: u64,
}

impl<W: Write> ExportWriter<W> {
    pub fn new(mut out: W, header: &Header) -> std::io::Result<ExportWriter<W>> {
        let mut h = BytesMut::new();
        let schema = convert::schema_to_pb(&header.schema).encode_to_vec();
        h.put_u32(schema.len() as u32);
        h.put_slice(&schema);
        h.put_u32(header.split_keys.len() as u32);
        for k in &header.split_keys {
            h.put_u32(k.len() as u32);
            h.put_slice(k);
        }
        let mut head = BytesMut::new();
        head.put_slice(MAGIC);
        head.put_u16(VERSION);
        head.put_u32(h.len() as u32);
        head.put_u32(crc32c::crc32c(&h));
        head.put_slice(&h);
        out.write_all(&head)?;
        Ok(ExportWriter {
            out,
            block: BytesMut::with_capacity(BLOCK_BYTES + 64 * 1024),
            block_cells: 0,
            totals: Totals::default(),
            last_row: None,
            bytes: head.len() as u64,
        })
    }

    /// Appends a cell; cells come in the table's order (a row's cells together).
    pub fn cell(&mut self, c: &Cell) -> std::io::Result<()> {
        if self.last_row.as_ref() != Some(&c.row) {
            self.totals.rows += 1;
            self.last_row = Some(c.row.clone());
        }
        cellblock::put(&mut self.block, c);
        self.block_cells += 1;
        self.totals.cells += 1;
        if self.block.len() >= BLOCK_BYTES {
            self.write_block()?;
        }
        Ok(())
    }

    fn write_block(&mut self) -> std::io::Result<()> {
        if self.block_cells == 0 {
            return Ok(());
        }
        let mut head = [0u8; 12];
        head[..4].copy_from_slice(&(self.block.len() as u32).to_be_bytes());
        head[4..8].copy_from_slice(&self.block_cells.to_be_bytes());
        head[8..].copy_from_slice(&crc32c::crc32c(&self.block).to_be_bytes());
        self.out.write_all(&head)?;
        self.out.write_all(&self.block)?;
        self.bytes += 12 + self.block.len() as u64;
        self.block.clear();
        self.block_cells = 0;
        Ok(())
    }

    pub fn totals(&self) -> Totals {
        self.totals
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Writes the last block and the end marker; returns the writer and the totals.
    pub fn finish(mut self) -> std::io::Result<(W, Totals, u64)> {
        self.write_block()?;
        let mut end = BytesMut::new();
        end.put_u32(0);
        end.put_u64(self.totals.rows);
        end.put_u64(self.totals.cells);
        let crc = crc32c::crc32c(&end[4..]);
        end.put_u32(crc);
        self.out.write_all(&end)?;
        self.out.flush()?;
        Ok((self.out, self.totals, self.bytes + end.len() as u64))
    }
}

/// Reads an export block by block, checking every checksum.
pub struct ExportReader<R: Read> {
    input: R,
    offset: u64,
    header: Header,
    seen: Totals,
    last_row: Option<Bytes>,
    done: bool,
}

fn read_exact<R: Read>(r: &mut R, buf: &mut [u8], offset: u64, what: &str) -> Result<(), String> {
    r.read_exact(buf).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            format!(
                "the export ends at byte {offset} inside its {what}: the file is cut short (an \
                 export that did not finish, or a partial copy)"
            )
        } else {
            format!("cannot read the export at byte {offset}: {e}")
        }
    })
}

impl<R: Read> ExportReader<R> {
    pub fn open(mut input: R) -> Result<ExportReader<R>, String> {
        let mut head = [0u8; 18];
        read_exact(&mut input, &mut head, 0, "header")?;
        if &head[..8] != MAGIC {
            return Err("not a Cellar table export (it does not start with CELLAREX)".into());
        }
        let version = u16::from_be_bytes([head[8], head[9]]);
        if version != VERSION {
            return Err(format!(
                "the export is format version {version}; this Cellar reads version {VERSION}{}",
                if version > VERSION {
                    " (it was made by a newer Cellar: import it with that one)"
                } else {
                    ""
                }
            ));
        }
        let len = u32::from_be_bytes([head[10], head[11], head[12], head[13]]);
        let crc = u32::from_be_bytes([head[14], head[15], head[16], head[17]]);
        if len > MAX_PART_BYTES {
            return Err(format!("the export's header claims {len} bytes: damaged"));
        }
        let mut h = vec![0u8; len as usize];
        read_exact(&mut input, &mut h, 18, "header")?;
        if crc32c::crc32c(&h) != crc {
            return Err("the export's header fails its checksum: the file is damaged".into());
        }
        let header = parse_header(Bytes::from(h))
            .map_err(|e| format!("the export's header cannot be read: {e}"))?;
        Ok(ExportReader {
            input,
            offset: 18 + u64::from(len),
            header,
            seen: Totals::default(),
            last_row: None,
            done: false,
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Bytes read so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next block's cells; `None` after the end marker (whose totals were checked).
    pub fn next_block(&mut self) -> Result<Option<Vec<Cell>>, String> {
        if self.done {
            return Ok(None);
        }
        let at = self.offset;
        let mut len = [0u8; 4];
        read_exact(&mut self.input, &mut len, at, "block list")?;
        let len = u32::from_be_bytes(len);
        if len == 0 {
            let mut end = [0u8; 20];
            read_exact(&mut self.input, &mut end, at + 4, "end marker")?;
            let crc = u32::from_be_bytes([end[16], end[17], end[18], end[19]]);
            if crc32c::crc32c(&end[..16]) != crc {
                return Err(format!(
                    "the export's end marker at byte {at} fails its checksum: damaged"
                ));
            }
            let mut b = &end[..16];
            let totals = Totals {
                rows: b.get_u64(),
                cells: b.get_u64(),
            };
            if totals != self.seen {
                return Err(format!(
                    "the export's end marker records {} rows and {} cells but the file holds {} rows and {} cells",
                    totals.rows, totals.cells, self.seen.rows, self.seen.cells
                ));
            }
            self.offset = at + 24;
            self.done = true;
            return Ok(None);
        }
        if len > MAX_PART_BYTES {
            return Err(format!(
                "the block at byte {at} claims {len} bytes: the file is damaged"
            ));
        }
        let mut rest = [0u8; 8];
        read_exact(&mut self.input, &mut rest, at + 4, "block header")?;
        let count = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let crc = u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]);
        let mut payload = vec![0u8; len as usize];
        read_exact(&mut self.input, &mut payload, at + 12, "block")?;
        if crc32c::crc32c(&payload) != crc {
            return Err(format!(
                "the block at byte {at} fails its checksum: the file is damaged"
            ));
        }
        let mut reader = cellblock::CellReader::new(Bytes::from(payload));
        let mut cells = Vec::with_capacity(count as usize);
        while let Some(c) = reader
            .next_cell()
            .map_err(|e| format!("the block at byte {at} holds a malformed cell: {e}"))?
        {
            if self.last_row.as_ref() != Some(&c.row) {
                self.seen.rows += 1;
                self.last_row = Some(c.row.clone());
            }
            cells.push(c);
        }
        if cells.len() != count as usize {
            return Err(format!(
                "the block at byte {at} says {count} cells but holds {}",
                cells.len()
            ));
        }
        self.seen.cells += u64::from(count);
        self.offset = at + 12 + u64::from(len);
        Ok(Some(cells))
    }

    /// What was read so far (after the end marker: the whole export).
    pub fn totals(&self) -> Totals {
        self.seen
    }
}

fn parse_header(mut h: Bytes) -> Result<Header, String> {
    fn take(h: &mut Bytes, what: &str) -> Result<Bytes, String> {
        if h.remaining() < 4 {
            return Err(format!("it ends before the {what}"));
        }
        let n = h.get_u32() as usize;
        if h.remaining() < n {
            return Err(format!("the {what} runs past its end"));
        }
        Ok(h.split_to(n))
    }
    let schema = pb::TableSchema::decode(take(&mut h, "schema")?)
        .map_err(|e| format!("the schema does not decode: {e}"))?;
    let schema = convert::schema_from_pb(schema).map_err(|e| e.to_string())?;
    if h.remaining() < 4 {
        return Err("it ends before the split keys".into());
    }
    let n = h.get_u32();
    let mut split_keys = Vec::new();
    for i in 0..n {
        split_keys.push(take(&mut h, &format!("split key {i}"))?);
    }
    if h.has_remaining() {
        return Err(format!("{} bytes follow the split keys", h.remaining()));
    }
    Ok(Header { schema, split_keys })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellar_model::{CellType, FamilySchema};

    fn cell(row: &str, ts: u64, value: &str) -> Cell {
        Cell {
            row: Bytes::from(row.to_string()),
            family: Bytes::from_static(b"f"),
            qualifier: Bytes::from_static(b"q"),
            timestamp: ts,
            cell_type: CellType::Put,
            seq_id: 0,
            value: Bytes::from(value.to_string()),
        }
    }

    fn export(cells: &[Cell]) -> (Header, Vec<u8>) {
        let header = Header {
            schema: TableSchema::new("t", vec![FamilySchema::new("f")]),
            split_keys: vec![Bytes::from_static(b"m"), Bytes::from_static(b"\x00\xff")],
        };
        let mut w = ExportWriter::new(Vec::new(), &header).expect("header");
        for c in cells {
            w.cell(c).expect("cell");
        }
        let (out, totals, bytes) = w.finish().expect("finish");
        assert_eq!(bytes, out.len() as u64);
        assert_eq!(totals.cells, cells.len() as u64);
        (header, out)
    }

    fn read_all(bytes: &[u8]) -> Result<(Header, Vec<Cell>), String> {
        let mut r = ExportReader::open(bytes)?;
        let mut cells = Vec::new();
        while let Some(b) = r.next_block()? {
            cells.extend(b);
        }
        Ok((r.header().clone(), cells))
    }

    #[test]
    fn an_export_reads_back_whole() {
        let cells: Vec<Cell> = (0..50_000)
            .map(|i| cell(&format!("r{:06}", i / 2), 1000 - (i % 2), &"v".repeat(40)))
            .collect();
        let (header, bytes) = export(&cells);
        let (h, back) = read_all(&bytes).expect("reads");
        assert_eq!(h, header);
        assert_eq!(back, cells);
        let (_, empty) = export(&[]);
        assert_eq!(
            read_all(&empty).expect("empty export").1,
            Vec::<Cell>::new()
        );
    }

    #[test]
    fn damage_and_truncation_are_refused_naming_where() {
        let cells: Vec<Cell> = (0..30_000)
            .map(|i| cell(&format!("r{i:06}"), 1, "value"))
            .collect();
        let (_, bytes) = export(&cells);
        let mut flipped = bytes.clone();
        let mid = bytes.len() / 2;
        flipped[mid] ^= 0x40;
        let e = read_all(&flipped).expect_err("a flipped byte");
        assert!(e.contains("checksum") || e.contains("damaged"), "{e}");
        for cut in [10, 100, mid, bytes.len() - 1] {
            let e = read_all(&bytes[..cut]).expect_err("cut short");
            assert!(
                e.contains("cut short") || e.contains("damaged"),
                "{cut}: {e}"
            );
        }
        let mut newer = bytes.clone();
        newer[9] = 2;
        let e = read_all(&newer).expect_err("newer version");
        assert!(e.contains("newer Cellar"), "{e}");
        let e = read_all(b"PAR1 not an export at all").expect_err("not an export");
        assert!(e.contains("not a Cellar table export"), "{e}");
    }
}
