//! The metadata block: the [`FileMeta`] fields a reader needs without reading data.
//!
//! ```text
//! first_key: varint len | bytes      last_key: varint len | bytes
//! min_timestamp | max_timestamp | max_seq | cell_count | delete_count |
//! data_block_count | raw_data_bytes            (varint64 each)
//! compression: u8 | bloom: u8
//! created_ms: varint64 | flags: u8     (appended later; absent in older files)
//! level: u8                            (appended later; absent in older files)
//! version_deletes: varint64            (appended later; absent in older files)
//! ```
//!
//! Readers ignore bytes after these fields: later versions may append fields without breaking
//! older readers; a file that ends after `bloom` has `created_ms` 0 (unknown) and no flags, one
//! that ends after `flags` has level 0, one that ends after `level` an unknown count of
//! version deletes. `format_version` and `file_size` come from the footer and the file itself.

use super::coding::{
    get_length_prefixed, get_varint64, put_length_prefixed, put_varint64, DecodeResult, Malformed,
};
use super::FileMeta;
use cellar_model::{BloomType, Compression};

pub(crate) fn encode(m: &FileMeta) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + m.first_key.len() + m.last_key.len());
    put_length_prefixed(&mut out, &m.first_key);
    put_length_prefixed(&mut out, &m.last_key);
    for v in [
        m.min_timestamp,
        m.max_timestamp,
        m.max_seq,
        m.cell_count,
        m.delete_count,
        m.data_block_count,
        m.raw_data_bytes,
    ] {
        put_varint64(&mut out, v);
    }
    out.push(m.compression.code());
    out.push(m.bloom.code());
    put_varint64(&mut out, m.created_ms);
    out.push(if m.major_compaction { FLAG_MAJOR } else { 0 });
    out.push(m.level);
    if let Some(n) = m.version_deletes {
        put_varint64(&mut out, n);
    }
    out
}

/// `flags` bit: the file is a major compaction's output.
const FLAG_MAJOR: u8 = 1;

/// Decodes the block; the caller fills `format_version` and `file_size`.
pub(crate) fn decode(data: &[u8]) -> DecodeResult<FileMeta> {
    let mut p = 0;
    let first_key = get_length_prefixed(data, &mut p)?.to_vec();
    let last_key = get_length_prefixed(data, &mut p)?.to_vec();
    let mut nums = [0u64; 7];
    for n in &mut nums {
        *n = get_varint64(data, &mut p)?;
    }
    let [min_timestamp, max_timestamp, max_seq, cell_count, delete_count, data_block_count, raw_data_bytes] =
        nums;
    let Some(&[compression, bloom]) = data.get(p..p.saturating_add(2)) else {
        return Err(Malformed("metadata block truncated"));
    };
    let compression = Compression::from_code(compression)
        .ok_or(Malformed("unknown compression code in metadata"))?;
    let bloom = BloomType::from_code(bloom).ok_or(Malformed("unknown bloom type in metadata"))?;
    p += 2;
    // Fields appended after the first version: all or nothing.
    let (created_ms, flags) = if p == data.len() {
        (0, 0)
    } else {
        let created = get_varint64(data, &mut p)?;
        let Some(&flags) = data.get(p) else {
            return Err(Malformed("metadata block truncated"));
        };
        p += 1;
        (created, flags)
    };
    // Appended after `flags`: the compaction level the file was written for, then the count
    // of markers that delete one version.
    let level = data.get(p).copied().unwrap_or(0);
    let version_deletes = if p + 1 < data.len() {
        p += 1;
        Some(get_varint64(data, &mut p)?)
    } else {
        None
    };
    Ok(FileMeta {
        format_version: 0,
        first_key,
        last_key,
        min_timestamp,
        max_timestamp,
        max_seq,
        cell_count,
        delete_count,
        data_block_count,
        raw_data_bytes,
        file_size: 0,
        compression,
        bloom,
        created_ms,
        major_compaction: flags & FLAG_MAJOR != 0,
        level,
        version_deletes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_tolerates_appended_fields() {
        let m = FileMeta {
            format_version: 0,
            first_key: b"first".to_vec(),
            last_key: b"last".to_vec(),
            min_timestamp: 1,
            max_timestamp: u64::MAX,
            max_seq: 99,
            cell_count: 1000,
            delete_count: 3,
            data_block_count: 4,
            raw_data_bytes: 123_456,
            file_size: 0,
            compression: Compression::Zstd,
            bloom: BloomType::RowCol,
            created_ms: 1_790_000_000_000,
            major_compaction: true,
            level: 3,
            version_deletes: Some(2),
        };
        let mut raw = encode(&m);
        assert_eq!(decode(&raw), Ok(m.clone()));
        raw.extend_from_slice(b"future");
        assert_eq!(decode(&raw), Ok(m));
        // Valid lengths: the first version (no created_ms, flags, level, version deletes),
        // up to the flags, up to the level, and whole.
        let whole = raw.len() - 6;
        let (to_level, to_flags) = (whole - 1, whole - 2);
        let first_version_len = to_flags - 1 - 6;
        for cut in (0..whole).filter(|&c| ![first_version_len, to_flags, to_level].contains(&c)) {
            assert!(decode(&raw[..cut]).is_err(), "cut at {cut}");
        }
        let old = decode(&raw[..to_level]).expect("up to the level");
        assert_eq!((old.level, old.version_deletes), (3, None));
        let older = decode(&raw[..to_flags]).expect("up to the flags");
        assert_eq!((older.level, older.version_deletes), (0, None));
    }

    #[test]
    fn reads_files_written_before_the_created_time_and_flags() {
        let m = FileMeta {
            first_key: b"a".to_vec(),
            last_key: b"b".to_vec(),
            created_ms: 5,
            major_compaction: true,
            level: 2,
            version_deletes: Some(0),
            ..FileMeta::default()
        };
        let raw = encode(&m);
        // Version 1 ended after `bloom`: one varint byte of created_ms, the flags byte, the
        // level byte and one varint byte of version deletes.
        let old = decode(&raw[..raw.len() - 4]).expect("old metadata");
        assert_eq!(old.created_ms, 0);
        assert!(!old.major_compaction);
        assert_eq!(old.first_key, m.first_key);
    }
}
