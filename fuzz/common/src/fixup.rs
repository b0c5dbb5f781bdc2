//! Checksum repair. Store files, WAL records, region descriptors, references and compaction
//! markers are all checksummed, and a mutated input almost never carries a matching CRC: the
//! decoder would stop at the check and the fuzzer would learn nothing about what lies behind
//! it. A target whose flags byte asks for it therefore recomputes the checksums (the same
//! definitions as `docs/storefile-format.md`, `docs/wal-format.md`, `docs/region-layout.md`)
//! before handing the bytes to Cellar's own decoder, which still checks everything.

/// Store-file footer length (format version 1) and the offset of its CRC.
const FOOTER_LEN: usize = 68;
const FOOTER_CRC_AT: usize = 56;
const MAGIC: &[u8; 8] = b"CellarSF";
const BLOCK_TRAILER_LEN: usize = 5;

fn u64_le(d: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(d.get(at..at + 8)?.try_into().ok()?))
}

fn u32_le(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?))
}

fn varint(d: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *d.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Rewrites the trailer CRC of the block at (`offset`, `size`) if it lies inside `limit`;
/// returns its payload and compression code.
fn fix_block(file: &mut [u8], offset: u64, size: u64, limit: usize) -> Option<(Vec<u8>, u8)> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(usize::try_from(size).ok()?)?;
    if end.checked_add(BLOCK_TRAILER_LEN)? > limit {
        return None;
    }
    let payload = file.get(start..end)?.to_vec();
    let code = *file.get(end)?;
    let crc = crc32c::crc32c_append(crc32c::crc32c(&payload), &[code]);
    file.get_mut(end + 1..end + 5)?
        .copy_from_slice(&crc.to_le_bytes());
    Some((payload, code))
}

/// Makes a store file's footer well-formed (`footer` flag: length, version, magic, CRC) and
/// recomputes the CRCs of the blocks it and the index point at (`blocks` flag).
pub fn store_file(file: &mut [u8], footer: bool, blocks: bool) {
    let Some(footer_start) = file.len().checked_sub(FOOTER_LEN) else {
        return;
    };
    if footer {
        let f = &mut file[footer_start..];
        f[48..52].copy_from_slice(&(FOOTER_LEN as u32).to_le_bytes());
        f[52..56].copy_from_slice(&1u32.to_le_bytes());
        f[60..68].copy_from_slice(MAGIC);
    }
    if blocks {
        let handle = |i: usize| {
            let f = &file[footer_start..];
            (
                u64_le(f, i * 16).unwrap_or(0),
                u64_le(f, i * 16 + 8).unwrap_or(0),
            )
        };
        let (index, bloom, meta) = (handle(0), handle(1), handle(2));
        fix_block(file, meta.0, meta.1, footer_start);
        if bloom.1 > 0 {
            fix_block(file, bloom.0, bloom.1, footer_start);
        }
        if let Some((payload, code)) = fix_block(file, index.0, index.1, footer_start) {
            let raw = if code == 0 {
                Some(payload)
            } else {
                cellar_storage::fuzzing::storefile_block::decompress_payload(code, &payload).ok()
            };
            for (off, size) in raw.as_deref().map(index_handles).unwrap_or_default() {
                fix_block(file, off, size, footer_start);
            }
        }
    }
    if footer {
        let crc = crc32c::crc32c(&file[footer_start..footer_start + FOOTER_CRC_AT]);
        file[footer_start + FOOTER_CRC_AT..footer_start + FOOTER_CRC_AT + 4]
            .copy_from_slice(&crc.to_le_bytes());
    }
}

/// The data-block handles an (uncompressed) index block lists, as far as it parses.
fn index_handles(block: &[u8]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let Some(count_at) = block.len().checked_sub(4) else {
        return out;
    };
    let restarts = u32_le(block, count_at).unwrap_or(0) as usize;
    let Some(entries_end) = restarts
        .checked_mul(4)
        .and_then(|n| count_at.checked_sub(n))
    else {
        return out;
    };
    let area = &block[..entries_end];
    let mut pos = 0;
    while pos < area.len() && out.len() < 4096 {
        let (Some(_shared), Some(unshared), Some(value_len)) = (
            varint(area, &mut pos),
            varint(area, &mut pos),
            varint(area, &mut pos),
        ) else {
            break;
        };
        let Some(value_at) = pos.checked_add(unshared as usize) else {
            break;
        };
        let Some(value) = area.get(value_at..value_at.saturating_add(value_len as usize)) else {
            break;
        };
        let mut p = 0;
        if let (Some(off), Some(size)) = (varint(value, &mut p), varint(value, &mut p)) {
            out.push((off, size));
        }
        pos = value_at + value.len();
    }
    out
}

/// Recomputes the checksums of every WAL record that fits, from the segment header on, as the
/// header's version frames them (version 2: payload CRC and salted header CRC; version 1: one
/// CRC).
pub fn wal_segment(seg: &mut [u8]) {
    if u32_le(seg, 8) == Some(2) {
        wal_segment_v2(seg);
        return;
    }
    const HEADER_LEN: usize = 12;
    const RECORD_HEADER_LEN: usize = 24;
    let mut pos = HEADER_LEN;
    while let Some(len) = u32_le(seg, pos + 4) {
        let end = match (pos + RECORD_HEADER_LEN).checked_add(len as usize) {
            Some(e) if e <= seg.len() => e,
            _ => return,
        };
        let crc = crc32c::crc32c_append(
            crc32c::crc32c(&seg[pos + 4..pos + RECORD_HEADER_LEN]),
            &seg[pos + RECORD_HEADER_LEN..end],
        );
        seg[pos..pos + 4].copy_from_slice(&crc.to_le_bytes());
        pos = end;
    }
}

fn wal_segment_v2(seg: &mut [u8]) {
    const HEADER_LEN: usize = 20;
    const RECORD_HEADER_LEN: usize = 28;
    let Some(salt) = seg.get(12..20).map(<[u8]>::to_vec) else {
        return;
    };
    let mut pos = HEADER_LEN;
    while let Some(len) = u32_le(seg, pos) {
        let end = match (pos + RECORD_HEADER_LEN).checked_add(len as usize) {
            Some(e) if e <= seg.len() => e,
            _ => return,
        };
        let pcrc = crc32c::crc32c(&seg[pos + RECORD_HEADER_LEN..end]);
        seg[pos + 20..pos + 24].copy_from_slice(&pcrc.to_le_bytes());
        let hcrc = crc32c::crc32c_append(crc32c::crc32c(&salt), &seg[pos..pos + 24]);
        seg[pos + 24..pos + 28].copy_from_slice(&hcrc.to_le_bytes());
        pos = end;
    }
}

/// A region descriptor around `body`: magic, version 1, length, body, CRC.
pub fn region_descriptor(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 20);
    out.extend_from_slice(b"CELLRGN\0");
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
    out
}

/// A reference file's text around `body` (its `crc=` line appended).
pub fn reference(body: &[u8]) -> Vec<u8> {
    let mut out = body.to_vec();
    out.extend_from_slice(format!("crc={:08x}\n", crc32c::crc32c(body)).as_bytes());
    out
}

/// A compaction marker's text around `body` (a newline, then its `crc=` line).
pub fn marker(body: &[u8]) -> Vec<u8> {
    let mut out = body.to_vec();
    out.extend_from_slice(format!("\ncrc={:08x}\n", crc32c::crc32c(body)).as_bytes());
    out
}
