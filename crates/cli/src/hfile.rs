//! `cellar hfile`: reads HBase store files (HFile v3) and prints what they hold: the trailer
//! and file info (`--meta`), and cells (`--cells`), as HBase's `hbase hfile -m -p` does. It
//! checks every block's checksum on the way, so it also tells whether a file would import.

use cellar_hfile::{kind, Cell, HFile};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// HFiles to read (a store file of an HBase table, e.g. under
    /// /hbase/data/default/TABLE/REGION/FAMILY/).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print the trailer and the file info.
    #[arg(short, long)]
    meta: bool,
    /// Print every cell (row, column, timestamp, type, value; bytes outside printable ASCII
    /// as \xNN, as HBase's shell shows them).
    #[arg(short = 'p', long)]
    cells: bool,
}

pub fn run(args: Args) -> Result<(), String> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for path in &args.files {
        let file = HFile::open(path).map_err(|e| e.to_string())?;
        if args.meta {
            meta(&mut out, &file).map_err(|e| e.to_string())?;
        }
        let mut count: u64 = 0;
        for cell in file.cells() {
            let cell = cell.map_err(|e| e.to_string())?;
            if args.cells {
                writeln!(out, "{}", show(&cell)).map_err(|e| e.to_string())?;
            }
            count += 1;
        }
        writeln!(
            out,
            "{}: {count} cells, {} bytes, HFile {}.{}, {} blocks, {} compression: every block's checksum verified",
            path.display(),
            file.size(),
            file.trailer.major,
            file.trailer.minor,
            file.encoding(),
            file.trailer.codec.name(),
        )
        .map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn meta(out: &mut impl Write, f: &HFile) -> std::io::Result<()> {
    let t = &f.trailer;
    writeln!(out, "{}:", f.path().display())?;
    writeln!(
        out,
        "  trailer: version {}.{}, {} cells, compression {}, comparator {}",
        t.major,
        t.minor,
        t.entry_count,
        t.codec.name(),
        t.comparator
    )?;
    writeln!(
        out,
        "  data index: {} levels, {} root entries; first data block at {:?}, last at {}",
        t.data_index_levels,
        t.data_index_count,
        t.first_data_block_offset,
        t.last_data_block_offset
    )?;
    writeln!(
        out,
        "  cells carry tags: {} (compressed: {}), sequence ids: {}",
        f.format().includes_tags,
        f.format().compress_tags,
        f.format().includes_mvcc
    )?;
    writeln!(out, "  file info:")?;
    for (k, v) in &f.info.entries {
        let value = match v.len() {
            8 if !v.iter().all(|b| b.is_ascii_graphic()) => format!(
                "{} (long)",
                i64::from_be_bytes(v.as_slice().try_into().unwrap_or_default())
            ),
            4 if !v.iter().all(|b| b.is_ascii_graphic()) => format!(
                "{} (int)",
                i32::from_be_bytes(v.as_slice().try_into().unwrap_or_default())
            ),
            _ => printable(v),
        };
        writeln!(out, "    {} = {value}", printable(k))?;
    }
    Ok(())
}

/// One cell as `K: row/family:qualifier/timestamp/Type/vlen=N/seqid=S V: value`.
fn show(c: &Cell) -> String {
    let kind = match c.kind {
        kind::PUT => "Put",
        kind::DELETE => "Delete",
        kind::DELETE_COLUMN => "DeleteColumn",
        kind::DELETE_FAMILY => "DeleteFamily",
        kind::DELETE_FAMILY_VERSION => "DeleteFamilyVersion",
        _ => "Unknown",
    };
    let tags = if c.tags.is_empty() {
        String::new()
    } else {
        format!(" T[{}]", printable(&c.tags))
    };
    format!(
        "K: {}/{}:{}/{}/{kind}/vlen={}/seqid={} V: {}{tags}",
        printable(&c.row),
        printable(&c.family),
        printable(&c.qualifier),
        c.timestamp,
        c.value.len(),
        c.sequence_id,
        printable(&c.value)
    )
}

/// Bytes as HBase's `Bytes.toStringBinary`: printable ASCII as is, the rest as \xNN.
fn printable(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len());
    for &x in b {
        if (0x20..0x7f).contains(&x) && x != b'\\' {
            s.push(x as char);
        } else {
            s.push_str(&format!("\\x{x:02X}"));
        }
    }
    s
}
