//! Entry points for the fuzz targets in `fuzz/` (not part of the engine's API; hidden from its
//! docs): the block decoder and the block codecs on their own, without a file around them.

use super::block::{Block, BlockBuilder, BlockIter};
use super::compression::{compress, decompress};
use bytes::Bytes;
use cellar_model::Compression;

/// The entries of a decoded block, in block order.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Decodes an uncompressed block as the reader does (`Block::new`, then the iterator from
/// the first entry to the end, `check_entries`, `seek_to_last`, seeks to some of its keys),
/// and returns its entries. A block that decodes is rebuilt with the writer's builder, and the
/// rebuilt block must decode to the same entries.
pub fn block(data: Bytes) -> Result<Entries, &'static str> {
    let block = Block::new(data.clone()).map_err(|m| m.0)?;
    let mut it = BlockIter::new(block.clone());
    let _ = it.seek_to_last();
    let entries = read_block(data)?;
    // A block that passes the entry check (what `StoreFile::verify` runs) reads the same
    // whichever way it is entered.
    let checked = block.check_entries().ok();
    if let Some(counted) = checked {
        assert_eq!(
            counted,
            entries.len(),
            "check_entries disagrees with the iterator"
        );
        it.seek_to_last().map_err(|m| m.0)?;
        assert_eq!(
            it.valid().then(|| (it.key().to_vec(), it.value().to_vec())),
            entries.last().cloned(),
            "seek_to_last is not the last entry"
        );
    }
    // Keys of a damaged block need not be ordered: only "no panic, no endless loop" holds.
    for (k, _) in entries.iter().step_by(entries.len() / 8 + 1) {
        let _ = it.seek(k);
        let _ = it.seek_for_prev(k);
    }
    let _ = it.seek(b"");
    let _ = it.seek_for_prev(&[0xff; 40]);

    let mut b = BlockBuilder::new(16);
    for (k, v) in &entries {
        b.add(k, v);
    }
    let rebuilt = Bytes::copy_from_slice(b.finish());
    let again = read_block(rebuilt).unwrap_or_else(|m| panic!("a rebuilt block fails: {m}"));
    assert_eq!(
        again, entries,
        "block does not round-trip through the builder"
    );
    Ok(entries)
}

fn read_block(data: Bytes) -> Result<Entries, &'static str> {
    let block = Block::new(data).map_err(|m| m.0)?;
    let mut it = BlockIter::new(block);
    it.seek_to_first().map_err(|m| m.0)?;
    let mut entries = Vec::new();
    while it.valid() {
        entries.push((it.key().to_vec(), it.value().to_vec()));
        it.next().map_err(|m| m.0)?;
    }
    Ok(entries)
}

/// Decompresses a block payload with the codec of `code` (`Compression::code`) as the reader
/// does. What decodes is compressed again and must decompress to the same bytes.
pub fn decompress_payload(code: u8, payload: &[u8]) -> Result<Vec<u8>, &'static str> {
    let codec = match Compression::from_code(code) {
        Some(Compression::None) | None => return Err("not a codec"),
        Some(c) => c,
    };
    let raw = decompress(codec, payload).map_err(|m| m.0)?;
    let mut out = Vec::new();
    if compress(codec, &raw, &mut out) == codec {
        let back = decompress(codec, &out).unwrap_or_else(|m| panic!("{codec:?}: {}", m.0));
        assert_eq!(back, raw, "{codec:?} does not round-trip");
    }
    Ok(raw)
}

/// A block of `entries` as the writer's builder lays it out (for seed inputs).
pub fn encode_block(entries: &[(Vec<u8>, Vec<u8>)], restart_interval: usize) -> Vec<u8> {
    let mut b = BlockBuilder::new(restart_interval);
    for (k, v) in entries {
        b.add(k, v);
    }
    b.finish().to_vec()
}

/// `raw` compressed with the codec of `code`, if that codec shrinks it (for seed inputs).
pub fn compress_payload(code: u8, raw: &[u8]) -> Option<Vec<u8>> {
    let codec = Compression::from_code(code)?;
    let mut out = Vec::new();
    (codec != Compression::None && compress(codec, raw, &mut out) == codec).then_some(out)
}
