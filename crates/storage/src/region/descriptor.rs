//! The region descriptor (`.regioninfo`): which table, which rows, which families and options.
//! Format in `docs/region-layout.md`:
//!
//! ```text
//! magic "CELLRGN\0" | version: u32 LE | body_len: u32 LE | body (UTF-8 lines) | crc32c(body): u32 LE
//! ```
//! Keys are hex-encoded in the body, so any bytes survive.

use crate::fs::{read_all, write_atomic, FileSystem};
use bytes::Bytes;
use cellar_model::{Error, FamilySchema, Result, TableSchema};
use std::path::Path;

pub const DESCRIPTOR_FILE: &str = ".regioninfo";
const MAGIC: &[u8; 8] = b"CELLRGN\0";
pub const DESCRIPTOR_VERSION: u32 = 1;

/// Identity and key range of a region: rows in `[start_key, end_key)`; empty bounds are open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionInfo {
    pub id: u64,
    pub start_key: Bytes,
    pub end_key: Bytes,
}

impl RegionInfo {
    /// A region holding every row.
    pub fn whole(id: u64) -> RegionInfo {
        RegionInfo {
            id,
            start_key: Bytes::new(),
            end_key: Bytes::new(),
        }
    }

    pub fn contains_row(&self, row: &[u8]) -> bool {
        row >= &self.start_key[..] && (self.end_key.is_empty() || row < &self.end_key[..])
    }
}

/// Lower-case hex, for keys in text files (region descriptors, references, snapshot
/// manifests).
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The bytes [`hex`] wrote; `None` for anything else.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect()
}

fn family_line(f: &FamilySchema) -> String {
    // `query_cache` is written only when on, so descriptors of families without it read the
    // same in versions that predate it.
    let query_cache = if f.query_cache {
        ";query_cache=true"
    } else {
        ""
    };
    // Likewise `keep_deleted_cells`.
    let keep_deleted = if f.keep_deleted_cells {
        ";keep_deleted_cells=true"
    } else {
        ""
    };
    format!(
        "family={};max_versions={};min_versions={};ttl={};compression={};bloom={};bloom_bits={};block_size={};in_memory={}{}{}",
        hex(f.name.as_bytes()),
        f.max_versions,
        f.min_versions,
        f.ttl_secs.map_or(String::new(), |t| t.to_string()),
        f.compression,
        f.bloom,
        f.bloom_bits_per_key,
        f.block_size,
        f.in_memory,
        query_cache,
        keep_deleted
    )
}

fn parse_family(line: &str) -> std::result::Result<FamilySchema, String> {
    let mut f = FamilySchema::new("");
    for part in line.split(';') {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("'{part}' is not key=value"))?;
        let num = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{k}: '{v}' is not a number"))
        };
        match k {
            "family" => {
                let raw = unhex(v).ok_or("family name is not hex")?;
                f.name = String::from_utf8(raw).map_err(|_| "family name is not UTF-8")?;
            }
            "max_versions" => f.max_versions = num(v)? as u32,
            "min_versions" => f.min_versions = num(v)? as u32,
            "ttl" => f.ttl_secs = if v.is_empty() { None } else { Some(num(v)?) },
            "compression" => f.compression = v.parse().map_err(|e: Error| e.to_string())?,
            "bloom" => f.bloom = v.parse().map_err(|e: Error| e.to_string())?,
            "bloom_bits" => f.bloom_bits_per_key = num(v)? as u32,
            "block_size" => f.block_size = num(v)? as u32,
            "in_memory" => f.in_memory = v == "true",
            "query_cache" => f.query_cache = v == "true",
            "keep_deleted_cells" => f.keep_deleted_cells = v == "true",
            other => return Err(format!("unknown family option '{other}'")),
        }
    }
    Ok(f)
}

pub fn write(
    fs: &dyn FileSystem,
    dir: &Path,
    info: &RegionInfo,
    schema: &TableSchema,
) -> Result<()> {
    let mut body = format!(
        "region_id={}\ntable={}\nstart_key={}\nend_key={}\n",
        info.id,
        hex(schema.name.as_bytes()),
        hex(&info.start_key),
        hex(&info.end_key)
    );
    for f in &schema.families {
        body.push_str(&family_line(f));
        body.push('\n');
    }
    let mut buf = Vec::with_capacity(body.len() + 20);
    buf.extend_from_slice(MAGIC);
    buf.extend_from_slice(&DESCRIPTOR_VERSION.to_le_bytes());
    buf.extend_from_slice(&(body.len() as u32).to_le_bytes());
    buf.extend_from_slice(body.as_bytes());
    buf.extend_from_slice(&crc32c::crc32c(body.as_bytes()).to_le_bytes());
    write_atomic(fs, &dir.join(DESCRIPTOR_FILE), &buf)
}

/// Reads a descriptor; a wrong magic, newer version, bad checksum or malformed body is an
/// error naming the file.
pub fn read(fs: &dyn FileSystem, dir: &Path) -> Result<(RegionInfo, TableSchema)> {
    let path = dir.join(DESCRIPTOR_FILE);
    let name = path.display().to_string();
    let data = read_all(fs, &path)?;
    let magic = data
        .get(..8)
        .ok_or_else(|| Error::corruption(&name, 0, "file is shorter than its header"))?;
    if magic != MAGIC {
        let mut m = [0u8; 8];
        m.copy_from_slice(magic);
        return Err(Error::BadMagic {
            file: name,
            kind: "region descriptor",
            found: u64::from_be_bytes(m),
        });
    }
    let word = |at: usize| -> Result<u32> {
        data.get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
            .ok_or_else(|| Error::corruption(&name, at as u64, "truncated header"))
    };
    let version = word(8)?;
    if version > DESCRIPTOR_VERSION {
        return Err(Error::UnsupportedVersion {
            file: name,
            found: version,
            supported: DESCRIPTOR_VERSION,
        });
    }
    let len = word(12)? as usize;
    let body = data
        .get(16..16 + len)
        .ok_or_else(|| Error::corruption(&name, 16, "truncated body"))?;
    if word(16 + len)? != crc32c::crc32c(body) {
        return Err(Error::checksum(&name, 16, "region descriptor body"));
    }
    let body =
        std::str::from_utf8(body).map_err(|_| Error::corruption(&name, 16, "body is not UTF-8"))?;
    let bad = |detail: String| Error::corruption(&name, 16, detail);
    let (mut id, mut table, mut start, mut end, mut families) =
        (None, None, None, None, Vec::new());
    for line in body.lines() {
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| bad(format!("line '{line}' is not key=value")))?;
        match k {
            "region_id" => id = v.parse::<u64>().ok(),
            "table" => table = unhex(v).and_then(|t| String::from_utf8(t).ok()),
            "start_key" => start = unhex(v),
            "end_key" => end = unhex(v),
            "family" => families.push(parse_family(line).map_err(bad)?),
            other => return Err(bad(format!("unknown key '{other}'"))),
        }
    }
    let (Some(id), Some(table), Some(start), Some(end)) = (id, table, start, end) else {
        return Err(bad("missing region_id, table, start_key or end_key".into()));
    };
    let schema = TableSchema::new(table, families);
    schema.validate()?;
    Ok((
        RegionInfo {
            id,
            start_key: start.into(),
            end_key: end.into(),
        },
        schema,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::LocalFs;

    #[test]
    fn round_trip_and_refusals() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut f = FamilySchema::new("cf");
        f.ttl_secs = Some(60);
        f.compression = cellar_model::Compression::Zstd;
        let schema = TableSchema::new("t", vec![f, FamilySchema::new("x")]);
        let info = RegionInfo {
            id: 7,
            start_key: Bytes::from_static(b"a\x00"),
            end_key: Bytes::from_static(b"m"),
        };
        write(&LocalFs, dir.path(), &info, &schema).expect("write");
        assert_eq!(read(&LocalFs, dir.path()).expect("read"), (info, schema));

        let path = dir.path().join(DESCRIPTOR_FILE);
        let mut bytes = std::fs::read(&path).expect("read raw");
        bytes[8] = 9; // version 9
        std::fs::write(&path, &bytes).expect("write raw");
        let err = read(&LocalFs, dir.path())
            .expect_err("newer version")
            .to_string();
        assert!(
            err.contains("version 9") && err.contains(".regioninfo"),
            "{err}"
        );
        bytes[0] = b'X';
        std::fs::write(&path, &bytes).expect("write raw");
        let err = read(&LocalFs, dir.path())
            .expect_err("bad magic")
            .to_string();
        assert!(err.contains("bad magic"), "{err}");
    }
}
